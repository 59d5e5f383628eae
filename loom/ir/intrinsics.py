"""The registry of intrinsics: operations a `Call(kind=intrin)` may name, with their typing rule.

An intrinsic has a meaning every code generator and the interpreter implement (unlike an extern
call, which names a C symbol of a runtime library). Back ends may register more.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from loom.errors import LoomError


@dataclasses.dataclass(frozen=True)
class Intrinsic:
    name: str
    arity: int | None  # None: any number of arguments
    check: Callable  # check(call) raises TypeError when the call is ill-typed
    doc: str


_REGISTRY: dict[str, Intrinsic] = {}


def register(name: str, arity: int | None, check: Callable, doc: str) -> None:
    """Declare an intrinsic. Re-registering a name replaces it (back ends may refine a rule)."""
    _REGISTRY[name] = Intrinsic(name, arity, check, doc)


def lookup(name: str) -> Intrinsic:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise LoomError(
            f"unknown intrinsic {name!r}; registered: {', '.join(sorted(_REGISTRY))}"
        ) from None


def list_intrinsics() -> list[str]:
    return sorted(_REGISTRY)


def check_call(call) -> None:
    intrin = lookup(call.op)
    if intrin.arity is not None and len(call.args) != intrin.arity:
        raise TypeError(f"intrinsic {call.op} takes {intrin.arity} arguments, got {len(call.args)}")
    intrin.check(call)


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
    from loom.ir.expr import BufferLoad

    if not isinstance(call.args[0], BufferLoad) or not call.dtype.is_handle:
        raise TypeError("address_of takes one buffer access and returns a handle")


def _handle_test(call) -> None:
    if not call.args[0].dtype.is_handle or not call.dtype.is_bool:
        raise TypeError(f"{call.op} takes a handle and returns bool")


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
register("address_of", 1, _address_of, "the address of a buffer element (a handle)")
register("isnullptr", 1, _handle_test, "true if a handle is the null pointer")
