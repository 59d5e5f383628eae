"""The built-in intrinsics: operations a `Call(kind=intrin)` may name, with their typing rules.

An intrinsic has a meaning every code generator and the interpreter implement (unlike an extern
call, which names a C symbol of a runtime library). The registry itself is in
loom.ir.intrinsic_registry; back ends may register more.
"""

from __future__ import annotations

from loom.abi.dtype import INT32
from loom.ir.expr import BufferLoad, StringImm
from loom.ir.intrinsic_registry import (  # noqa: F401  (the registry's API, here as before)
    INTRINSICS,
    Intrinsic,
    check_call,
    list_intrinsics,
    lookup,
    register,
)


def _float_math(call) -> None:
    for arg in call.args:
        if not arg.dtype.is_float or arg.dtype != call.dtype:
            raise TypeError(
                f"{call.op} takes and returns floats of one dtype, got "
                f"{[str(a.dtype) for a in call.args]} -> {call.dtype}"
            )


def _if_then_else(call) -> None:
    cond, t, f = call.args
    if not cond.dtype.is_bool or t.dtype != f.dtype or t.dtype != call.dtype:
        raise TypeError(
            f"if_then_else(cond: bool, a, b) needs a and b of the result dtype, got "
            f"({cond.dtype}, {t.dtype}, {f.dtype}) -> {call.dtype}"
        )
    if cond.dtype.lanes not in (1, t.dtype.lanes):
        raise TypeError(
            f"if_then_else condition has {cond.dtype.lanes} lanes, values {t.dtype.lanes}"
        )


def _same_as_arg(call) -> None:
    if call.args[0].dtype != call.dtype:
        raise TypeError(
            f"{call.op} returns its argument's dtype {call.args[0].dtype}, declared {call.dtype}"
        )


def _address_of(call) -> None:
    if not isinstance(call.args[0], BufferLoad) or not call.dtype.is_handle:
        raise TypeError("address_of takes one buffer access and returns a handle")


def _prefetch(call) -> None:
    arg = call.args[0]
    if not arg.dtype.is_handle or arg.dtype.is_vector or call.dtype != INT32:
        raise TypeError(
            f"{call.op} takes one address (a scalar handle, e.g. address_of(B[i, j])) and "
            f"returns int32 (used as a statement, Evaluate), got ({arg.dtype}) -> {call.dtype}"
        )


def _handle_test(call) -> None:
    if not call.args[0].dtype.is_handle or not call.dtype.is_bool:
        raise TypeError(f"{call.op} takes a handle and returns bool")


def _require(call) -> None:
    cond, value, message = call.args
    if (
        not cond.dtype.is_bool
        or cond.dtype.lanes not in (1, value.dtype.lanes)
        or value.dtype != call.dtype
        or not isinstance(message, StringImm)
    ):
        raise TypeError(
            "require(cond: bool, value, message: StringImm) returns the value's dtype, got "
            f"({cond.dtype}, {value.dtype}, {type(message).__name__}) -> {call.dtype}"
        )


for _name in (
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "sqrt",
    "tanh",
    "sigmoid",
    "erf",
    "sin",
    "cos",
    "fabs",
    "floor",
    "ceil",
    "trunc",
    "round",
):
    register(_name, 1, _float_math, f"elementwise {_name} of a float (round: half to even)")
register("pow", 2, _float_math, "a to the power b, floats")
register(
    "if_then_else", 3, _if_then_else, "cond ? a : b, evaluating only the taken side (lazy select)"
)
register("likely", 1, _same_as_arg, "hint that a condition is usually true; returns it")
register(
    "arithmetic_fence",
    1,
    _same_as_arg,
    "its argument, which the target's fast-math flags (-fp-contract, -fp-reassoc) may not fuse "
    "or reorder with the arithmetic around it (the LLVM code generator emits the argument's "
    "own add, subtract or multiply without fast-math flags); made by the legalize pass where "
    "its expansions need every rounding (a float FloorMod)",
)
register("address_of", 1, _address_of, "the address of a buffer element (a handle)")
register("isnullptr", 1, _handle_test, "true if a handle is the null pointer")
register(
    "prefetch",
    1,
    _prefetch,
    "a hint to fetch the cache line at an address into every level of the data cache for "
    "reading (LLVM's llvm.prefetch read, locality 3; C's __builtin_prefetch(p, 0, 3)); returns "
    "int32 0, as a statement (Evaluate). No effect on results: the interpreter checks the "
    "address and does nothing; the code generators emit it where written (a call of its own "
    "each time), and the LLVM one keeps reusing the loads before it",
)
register(
    "prefetch_write",
    1,
    _prefetch,
    "prefetch for writing: a hint to fetch the cache line at an address into every level of "
    "the data cache, owned for a store (LLVM's llvm.prefetch write, locality 3; C's "
    "__builtin_prefetch(p, 1, 3)); otherwise as prefetch",
)
register(
    "require",
    3,
    _require,
    "value, once cond holds in every lane; else the function fails with the message (as an "
    "assertion does). Lazy like if_then_else: checked only where evaluated. Made by the "
    "legalize pass (integer division by zero)",
)


def _reinterpret(call) -> None:
    src, dst = call.args[0].dtype, call.dtype
    kinds_ok = all(d.is_integer or d.is_float for d in (src, dst))
    if not kinds_ok or src.bits * src.lanes != dst.bits * dst.lanes:
        raise TypeError(
            f"reinterpret takes a number and returns the same bits as another integer or float "
            f"dtype of the same width, got {src} -> {dst}"
        )


def _takes_a_name(what: str):
    """The check of an intrinsic taking `what` (a name, as a StringImm) and returning a handle."""

    def check(call) -> None:
        if not isinstance(call.args[0], StringImm) or not call.dtype.is_handle:
            raise TypeError(f"{call.op} takes {what} (a StringImm), returns a handle")

    return check


register(
    "reinterpret",
    1,
    _reinterpret,
    "the bits of a value as another integer or float dtype of the same width (float32 <-> "
    "uint32, ...); made by lower_parallel to pack floats into its closures",
)


register(
    "global_address",
    1,
    _takes_a_name("an array's symbol"),
    "the address of an array of the library (the module's attribute `globals`: a static memory "
    "pool, constants embedded with their values); made by plan_memory",
)
register(
    "function_address",
    1,
    _takes_a_name("a function's name"),
    "the address of the module's function of that name (a handle): a parallel task's, or the "
    "entry point `int32_t f(void *const *args)` of another function; made by lower_parallel",
)
