"""The reference interpreter of the loop IR: the semantics native code generators must match.

`interpret(func, *args)` runs a PrimFunc on numpy arrays (modified in place) and scalars. Values
follow `loom.ir.semantics` exactly. Every memory access is bounds-checked; an illegal operation
(out-of-bounds access, integer division by zero, invalid cast, failed assertion) raises
`InterpreterError`. Storage from `Allocate` starts filled with junk (NaN, True, or bytes 0x5A) so
that reading before writing shows.

Two modes run a function. The default, `mode="compiled"`, translates it once into Python source
(see `loom.ir.pycodegen`; `python_source` shows it), compiled and cached per PrimFunc: fast.
`mode="tree"` walks the IR with the plain evaluator of `loom.ir.evaluate`: the specification the
compiled mode is tested against, slower.
"""

from __future__ import annotations

import functools
import linecache
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from loom.errors import InterpreterError, LoomError
from loom.ir import semantics
from loom.ir.buffer import Buffer
from loom.ir.evaluate import evaluate, evaluator
from loom.ir.expr import IntImm, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.pycodegen import GeneratedFunction, generate
from loom.ir.shape_vars import bind_shape_vars, shape_params
from loom.ir.storage import (
    Pointer,
    Storage,
    address_of,
    allocate,
    check_loop,
    extern_result,
    fail,
    lookup_extern,
    out_of_bounds,
    out_of_bounds_ramp,
    view,
)
from loom.ir.visitor import free_vars

__all__ = ["Pointer", "Storage", "interpret", "python_source"]


_RUNTIME: dict[str, Any] = {
    "_rf": semantics.round_float,
    "_bin": semantics.binary,
    "_cast": semantics.cast,
    "_fdiv": semantics.float_div,
    "_wrap": semantics.wrap_int,
    "_IE": InterpreterError,
    "_fail": fail,
    "_Storage": Storage,
    "_Pointer": Pointer,
    "_oob": out_of_bounds,
    "_oob_ramp": out_of_bounds_ramp,
    "_view": view,
    "_addr": address_of,
    "_alloc": allocate,
    "_check_loop": check_loop,
    "_extern": lookup_extern,
    "_xres": extern_result,
    "_INF": math.inf,
    "_NAN": math.nan,
}


# -- compiling ----------------------------------------------------------------------------------
class _Compiled:
    def __init__(self, generated: GeneratedFunction, fn: Callable) -> None:
        self.generated = generated
        self.fn = fn


@functools.lru_cache(maxsize=1024)
def _compile(func: PrimFunc) -> _Compiled:
    generated = generate(func)
    filename = f"<loom.interpret {func.name} #{id(generated)}>"
    # lets tracebacks show the generated line
    lines = generated.source.splitlines(True)
    linecache.cache[filename] = (len(generated.source), None, lines, filename)
    namespace = {**_RUNTIME, **generated.constants}
    exec(compile(generated.source, filename, "exec"), namespace)
    return _Compiled(generated, namespace[generated.name])


def _select(func: PrimFunc | IRModule, entry: str | None) -> PrimFunc:
    if isinstance(func, PrimFunc):
        if entry is not None and entry != func.name:
            raise LoomError(f"entry {entry!r} given, but the function is {func.name!r}")
        return func
    if not isinstance(func, IRModule):
        raise TypeError(f"interpret takes a PrimFunc or an IRModule, got {type(func).__name__}")
    if entry is None:
        if len(func) != 1:
            raise LoomError(
                f"the module has {len(func)} functions {func.names()}; choose one with entry="
            )
        return func.functions[0]
    if entry not in func:
        raise LoomError(f"no function {entry!r} in the module; it has {func.names()}")
    return func[entry]


def python_source(func: PrimFunc | IRModule, entry: str | None = None) -> str:
    """The Python source `interpret` runs for `func` (for debugging)."""
    return _compile(bind_shape_vars(_select(func, entry))).generated.source


# -- arguments ----------------------------------------------------------------------------------
def _check_array(func: PrimFunc, buf: Buffer, arg) -> np.ndarray:
    """The array checked but for a symbolic shape's values (_bind_shapes checks them)."""
    dt = buf.dtype.numpy
    symbolic = not all(isinstance(d, IntImm) for d in buf.shape)
    shape = tuple(buf.shape) if symbolic else buf.const_shape()
    what = f"argument {buf.name!r} of {func.name}"
    expected = f"a numpy array of shape {shape} and dtype {dt}"
    if not isinstance(arg, np.ndarray):
        raise TypeError(f"{what} must be {expected}, got {type(arg).__name__}")
    if arg.dtype != dt:
        raise TypeError(f"{what} must have dtype {dt}, got {arg.dtype}")
    if (len(arg.shape) != len(shape)) if symbolic else (arg.shape != shape):
        raise ValueError(f"{what} must have shape {shape}, got {arg.shape}")
    if not arg.flags.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous, got an array with strides {arg.strides}")
    if not arg.flags.writeable:
        raise ValueError(f"{what} must be writeable, got a read-only array")
    return arg


def _convert_scalar(func: PrimFunc, var: Var, value):
    dt = var.dtype
    what = f"argument {var.name!r} of {func.name} ({dt})"
    if dt.is_handle:
        if value is not None and not isinstance(value, Pointer):
            raise TypeError(f"{what} must be a Pointer or None, got {type(value).__name__}")
        return value
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if dt.is_float:
        if isinstance(value, int | float):
            return semantics.fit(value, dt)
        raise TypeError(f"{what} must be a real number, got {type(value).__name__}")
    if not isinstance(value, int):
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} {value!r}")
    if not dt.min_value() <= value <= dt.max_value():
        raise ValueError(f"{what} must be in [{dt.min_value()}, {dt.max_value()}], got {value}")
    return semantics.fit(value, dt)


def _prepare(func: PrimFunc, args: tuple) -> tuple[list, list[tuple[int, np.ndarray, Storage]]]:
    """Call arguments of the generated function (the implicit shape variables' values last:
    loom/ir/shape_vars.py), and (parameter position, array, storage) of each buffer argument."""
    given = func.params[: len(func.params) - shape_params(func)]
    if len(args) != len(given):
        names = ", ".join(p.name for p in given)
        raise TypeError(f"{func.name}({names}) takes {len(given)} arguments, got {len(args)}")
    call_args: list = []
    arrays: list[tuple[int, np.ndarray, Storage]] = []
    for k, (param, arg) in enumerate(zip(given, args)):
        if isinstance(param, Var):
            call_args.append(_convert_scalar(func, param, arg))
            continue
        arr = _check_array(func, param, arg)
        storage = _shared_storage(func, param, arr, arrays)
        if storage is None:
            storage = Storage(param.name, param.dtype, arr.reshape(-1).tolist())
        arrays.append((k, arr, storage))
        call_args.append(storage)
    values = _bind_shapes(
        func, dict(zip(given, call_args)), [(func.params[k], a) for k, a, _ in arrays]
    )
    call_args += [values[v] for v in func.params[len(given) :]]
    return call_args, arrays


def _bind_shapes(
    func: PrimFunc, scalars: dict, arrays: list[tuple[Buffer, np.ndarray]]
) -> dict[Var, int]:
    """The shape variables' values: the scalar arguments', then each from the first array
    whose dimension is that variable by itself; every symbolic dimension checked against
    them."""
    values = {p: v for p, v in scalars.items() if isinstance(p, Var)}
    for buf, arr in arrays:
        for d, extent in zip(buf.shape, arr.shape):
            if isinstance(d, Var) and d not in values:
                values[d] = _convert_scalar(func, d, extent)
    for buf, arr in arrays:
        expected = tuple(int(evaluate(d, values)) for d in buf.shape)
        if arr.shape != expected:
            known = ", ".join(
                f"{v.name} = {values[v]}"
                for v in sorted(set().union(*map(free_vars, buf.shape)), key=lambda v: v.name)
            )
            raise ValueError(
                f"argument {buf.name!r} of {func.name} must have shape "
                f"({', '.join(map(str, buf.shape))}) = {expected} ({known}), got {arr.shape}"
            )
    return values


def _shared_storage(func: PrimFunc, param: Buffer, arr: np.ndarray, seen) -> Storage | None:
    """The storage of an earlier argument that `arr` must share, if any."""
    for k, other_arr, storage in seen:
        other = func.params[k]
        same_var = other.data == param.data
        if other_arr is arr:
            return storage  # the same array passed twice: both parameters see one memory
        if same_var:
            raise ValueError(
                f"parameters {other.name!r} and {param.name!r} of {func.name} share storage; "
                "pass the same array for both"
            )
        if np.shares_memory(other_arr, arr):
            raise ValueError(
                f"arguments {other.name!r} and {param.name!r} of {func.name} overlap in memory; "
                "the interpreter needs disjoint arrays (or the same array)"
            )
    return None


_MODES = ("compiled", "tree")


def interpret(
    func: PrimFunc | IRModule,
    *args,
    entry: str | None = None,
    externs: Mapping[str, Callable] | None = None,
    mode: str = "compiled",
) -> None:
    """Run `func` (or the function `entry` of a module) on `args`, one per parameter.

    A Buffer parameter takes a writeable C-contiguous numpy array of exactly its shape and dtype,
    which the function modifies in place (also when it fails midway, as native code would). A
    scalar parameter takes a Python or numpy number, converted to its dtype (an integer out of
    range is refused); a handle parameter takes a `Pointer` or None. `externs` maps the symbol of
    each `call_extern` to a Python callable, which receives the evaluated arguments (vectors as
    tuples, handles as `Pointer`) and returns the result (None counts as 0). `mode` is "compiled"
    (generated Python code, the default) or "tree" (the plain evaluator `loom.ir.evaluate`, the
    specification); both give the same results and errors.

    Raises TypeError/ValueError for wrong arguments or mode, LoomError for a missing extern, and
    InterpreterError for an illegal operation during the run.
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
    prim = bind_shape_vars(_select(func, entry))
    if mode == "compiled":
        compiled = _compile(prim)
        run, write_back = compiled.fn, compiled.generated.write_back
    else:
        run, write_back = evaluator(prim)
    call_args, arrays = _prepare(prim, args)
    try:
        run(*call_args, dict(externs or {}))
    finally:
        for k, arr, storage in arrays:
            if write_back[k]:
                arr.reshape(-1)[:] = storage.data
