"""The reference interpreter of the loop IR: the semantics native code generators must match.

`interpret(func, *args)` runs a PrimFunc on numpy arrays (modified in place) and scalars. Values
follow `loom.ir.semantics` exactly. Every memory access is bounds-checked; an illegal operation
(out-of-bounds access, integer division by zero, invalid cast, failed assertion) raises
`InterpreterError`. Storage from `Allocate` starts filled with junk (NaN, True, or bytes 0x5A) so
that reading before writing shows.

A function is translated once into Python source (see `loom.ir.pycodegen`; `python_source` shows
it), compiled, and cached per PrimFunc.
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
from loom.ir.dtype import DataType
from loom.ir.expr import Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.pycodegen import GeneratedFunction, generate, junk_value

__all__ = ["Pointer", "Storage", "interpret", "python_source"]


class Storage:
    """The memory of one buffer: a list of element values of one dtype."""

    __slots__ = ("data", "dtype", "name")

    def __init__(self, name: str, dtype: DataType, data: list) -> None:
        self.name = name
        self.dtype = dtype
        self.data = data

    def __repr__(self) -> str:
        return f"Storage({self.name}: {len(self.data)} x {self.dtype})"


class Pointer:
    """A handle value: an element offset into a storage (`None` is the null pointer).

    Extern callbacks use it to read and write memory: `p[i]` and `p[i] = v` address element
    `offset + i`, bounds-checked against the storage; stored values are brought into the dtype.
    `p + k` is the pointer `k` elements further.
    """

    __slots__ = ("offset", "storage")

    def __init__(self, storage: Storage, offset: int = 0) -> None:
        self.storage = storage
        self.offset = offset

    @property
    def dtype(self) -> DataType:
        return self.storage.dtype

    def __len__(self) -> int:
        """Elements from this pointer to the end of the storage."""
        return max(0, len(self.storage.data) - self.offset)

    def _element(self, i: int) -> int:
        index = self.offset + int(i)
        if not 0 <= index < len(self.storage.data):
            raise InterpreterError(
                f"pointer access at element {index} is outside the storage {self.storage.name} "
                f"of {len(self.storage.data)} elements"
            )
        return index

    def __getitem__(self, i: int):
        return self.storage.data[self._element(i)]

    def __setitem__(self, i: int, value) -> None:
        self.storage.data[self._element(i)] = semantics.fit(value, self.dtype)

    def __add__(self, k: int) -> Pointer:
        return Pointer(self.storage, self.offset + int(k))

    def read(self, n: int) -> list:
        """The `n` elements starting here."""
        return [self[i] for i in range(n)]

    def write(self, values) -> None:
        for i, v in enumerate(values):
            self[i] = v

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Pointer)
            and other.storage is self.storage
            and other.offset == self.offset
        )

    def __hash__(self) -> int:
        return hash((id(self.storage), self.offset))

    def __repr__(self) -> str:
        return f"Pointer({self.storage.name} + {self.offset})"


# -- helpers the generated code calls (see loom.ir.pycodegen) -----------------------------------
def _out_of_bounds(name, what, indices, shape, strides, base, size, lane):
    where = f"{what} of {name}[{', '.join(map(str, indices))}]"
    if lane is not None:
        where += f" (lane {lane})"
    if len(shape) >= 2:
        for d, (i, extent) in enumerate(zip(indices, shape)):
            if not 0 <= i < extent:
                raise InterpreterError(
                    f"{where}: index {i} is outside dimension {d} of extent {extent}"
                )
    offset = base + sum(i * s for i, s in zip(indices, strides))
    if size == 0:
        raise InterpreterError(f"{where}: its storage is empty (a null pointer?)")
    raise InterpreterError(
        f"{where}: element {offset} is outside its storage of {size} elements (0..{size - 1})"
    )


def _out_of_bounds_ramp(name, what, start, step, lanes, size):
    for lane in range(lanes):
        offset = start + lane * step
        if not 0 <= offset < size:
            raise InterpreterError(
                f"{what} of {name}[{start}:{start + lanes * step}:{step}] (lane {lane}): element "
                f"{offset} is outside its storage of {size} elements (0..{size - 1})"
            )
    raise InterpreterError(f"{what} of {name} is outside its storage")  # not reached


def _view(pointer, dt: DataType, name: str):
    """Storage, list, element offset and list length behind a pointer viewed as a buffer."""
    if pointer is None:
        return None, [], 0, 0
    if not isinstance(pointer, Pointer):
        raise InterpreterError(f"{name} holds {pointer!r}, not a pointer")
    if pointer.dtype != dt:
        raise InterpreterError(
            f"{name} points into {pointer.storage.name} ({pointer.dtype}) but is viewed as {dt}; "
            "the interpreter cannot reinterpret memory"
        )
    data = pointer.storage.data
    return pointer.storage, data, pointer.offset, len(data)


def _address_of(storage, offset: int, size: int, name: str) -> Pointer:
    if storage is None:
        raise InterpreterError(f"address_of an element of {name}, which is a null pointer")
    if not 0 <= offset <= size:  # one past the end is a valid address
        raise InterpreterError(
            f"address_of {name} at element {offset} is outside its storage of {size} elements"
        )
    return Pointer(storage, offset)


def _allocate(name: str, dt: DataType, count: int) -> Storage:
    if count < 0:
        raise InterpreterError(f"allocate {name}: negative size {count}")
    return Storage(name, dt, [junk_value(dt)] * count)


def _check_loop(lo: int, extent: int, dt: DataType, name: str) -> None:
    if extent > 0 and lo + extent - 1 > dt.max_value():
        raise InterpreterError(
            f"loop {name}: the last value {lo + extent - 1} (min {lo} + extent {extent} - 1) "
            f"does not fit in {dt}"
        )


def _lookup_extern(externs: Mapping[str, Callable], name: str, func_name: str) -> Callable:
    fn = externs.get(name)
    if fn is None:
        raise LoomError(
            f"{func_name} calls the extern symbol {name!r}, which is not provided; pass "
            f"externs={{{name!r}: callable}} (provided: {sorted(externs) or 'none'})"
        )
    return fn


def _extern_result(value, dt: DataType, name: str):
    """Bring a callback's result into `dt`; None counts as 0 (a void function)."""
    if dt.is_handle:
        if value is not None and not isinstance(value, Pointer):
            raise InterpreterError(f"extern {name} returns handle, got {value!r}")
        return value
    if dt.is_vector:
        if value is None:
            value = (0,) * dt.lanes
        lanes = tuple(value)
        if len(lanes) != dt.lanes:
            raise InterpreterError(f"extern {name} returns {dt}, got {len(lanes)} values")
        return tuple(semantics.fit(v, dt.element) for v in lanes)
    return semantics.fit(0 if value is None else value, dt)


_RUNTIME: dict[str, Any] = {
    "_rf": semantics.round_float,
    "_bin": semantics.binary,
    "_cast": semantics.cast,
    "_fdiv": semantics.float_div,
    "_wrap": semantics.wrap_int,
    "_IE": InterpreterError,
    "_Storage": Storage,
    "_Pointer": Pointer,
    "_oob": _out_of_bounds,
    "_oob_ramp": _out_of_bounds_ramp,
    "_view": _view,
    "_addr": _address_of,
    "_alloc": _allocate,
    "_check_loop": _check_loop,
    "_extern": _lookup_extern,
    "_xres": _extern_result,
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
    return _compile(_select(func, entry)).generated.source


# -- arguments ----------------------------------------------------------------------------------
def _check_array(func: PrimFunc, buf: Buffer, arg) -> np.ndarray:
    shape, dt = buf.const_shape(), buf.dtype.numpy
    what = f"argument {buf.name!r} of {func.name}"
    expected = f"a numpy array of shape {shape} and dtype {dt}"
    if not isinstance(arg, np.ndarray):
        raise TypeError(f"{what} must be {expected}, got {type(arg).__name__}")
    if arg.dtype != dt:
        raise TypeError(f"{what} must have dtype {dt}, got {arg.dtype}")
    if arg.shape != shape:
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
    """Call arguments of the generated function, and (parameter position, array, storage) of
    each buffer argument."""
    if len(args) != len(func.params):
        names = ", ".join(p.name for p in func.params)
        raise TypeError(f"{func.name}({names}) takes {len(func.params)} arguments, got {len(args)}")
    call_args: list = []
    arrays: list[tuple[int, np.ndarray, Storage]] = []
    for k, (param, arg) in enumerate(zip(func.params, args)):
        if isinstance(param, Var):
            call_args.append(_convert_scalar(func, param, arg))
            continue
        arr = _check_array(func, param, arg)
        storage = _shared_storage(func, param, arr, arrays)
        if storage is None:
            storage = Storage(param.name, param.dtype, arr.reshape(-1).tolist())
        arrays.append((k, arr, storage))
        call_args.append(storage)
    return call_args, arrays


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


def interpret(
    func: PrimFunc | IRModule,
    *args,
    entry: str | None = None,
    externs: Mapping[str, Callable] | None = None,
) -> None:
    """Run `func` (or the function `entry` of a module) on `args`, one per parameter.

    A Buffer parameter takes a writeable C-contiguous numpy array of exactly its shape and dtype,
    which the function modifies in place (also when it fails midway, as native code would). A
    scalar parameter takes a Python or numpy number, converted to its dtype (an integer out of
    range is refused); a handle parameter takes a `Pointer` or None. `externs` maps the symbol of
    each `call_extern` to a Python callable, which receives the evaluated arguments (vectors as
    tuples, handles as `Pointer`) and returns the result (None counts as 0).

    Raises TypeError/ValueError for wrong arguments, LoomError for a missing extern, and
    InterpreterError for an illegal operation during the run.
    """
    prim = _select(func, entry)
    compiled = _compile(prim)
    call_args, arrays = _prepare(prim, args)
    write_back = compiled.generated.write_back
    try:
        compiled.fn(*call_args, dict(externs or {}))
    finally:
        for k, arr, storage in arrays:
            if write_back[k]:
                arr.reshape(-1)[:] = storage.data
