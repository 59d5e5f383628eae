"""Checking the arguments of a call against a function's signature, and building the
`void *args[]` vector the entry point takes.

A wrong array is a clear TypeError or ValueError naming the argument, never a crash; a
misaligned array is copied to an aligned one (and written back after the call).

Each call first takes the fast path, `native_plan`'s: the C extension (call_native.py) checks
the arguments against the signature, compiled once per function, copies misaligned arrays and
calls. Only when an argument fails its fast checks does `prepare_call` check it again here, in
detail: it raises the clear error, or handles what only it handles (an ndarray subclass, a
numpy scalar). Both check the same things; tests/runtime/test_call_overhead.py holds them to
the same errors.
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Callable

import numpy as np

from loom.abi import shape_expr
from loom.abi.dtype import dtype as to_dtype
from loom.abi.signature import FunctionSignature, ParamSpec
from loom.runtime.call_native import extension
from loom.runtime.ndarray import array as aligned_array

_CTYPES = {
    "bool": ctypes.c_bool,
    "int8": ctypes.c_int8,
    "int16": ctypes.c_int16,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32,
    "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
}


def native_plan(sig: FunctionSignature, address: int) -> Callable[[tuple], int | None] | None:
    """`run(args) -> status | None`: the fast checks and call of the entry point at `address`
    (None from `run`: an argument failed them and nothing was called). None when the C
    extension is unavailable or the signature has a parameter it cannot check (a compound
    symbolic dimension such as `n * 4` takes the Python path)."""
    module = extension()
    if module is None:
        return None
    slots = {p.name: k for k, p in enumerate(sig.params) if not p.is_buffer}
    params = []
    for spec in sig.params:
        described = _describe(spec, slots)
        if described is None:
            return None
        params.append(described)
    return module.Plan(address, np.ndarray, params, len(sig.arguments)).run


def _describe(spec: ParamSpec, slots: dict[str, int]) -> tuple | None:
    """A parameter as the C extension's Plan takes it (loom/runtime/native/host/loom_call.c);
    a dimension that is a shape variable by itself is -(k + 1), k that scalar's parameter."""
    dt = to_dtype(spec.dtype)
    if spec.is_buffer:
        if not all(isinstance(d, int) or d in slots for d in spec.shape):
            return None
        np_dtype = dt.numpy
        # the format numpy exports for this dtype: an array passes when it exports the same
        buffer_format = memoryview(np.empty(0, np_dtype)).format
        return (
            "buffer",
            buffer_format,
            np_dtype.itemsize,
            tuple(d if isinstance(d, int) else -slots[d] - 1 for d in spec.shape),
            spec.alignment,
            spec.written,
        )
    if spec.dtype not in _CTYPES:
        return None  # the Python path raises the error
    if spec.implicit and not dt.is_integer:
        return None
    if dt.is_float:
        return (spec.dtype,)
    if dt.is_bool:
        return ("bool",)
    if dt.kind == "int":
        return ("int", dt.itemsize, dt.min_value(), dt.max_value())
    return ("uint", dt.itemsize, dt.max_value())


@dataclasses.dataclass
class PreparedCall:
    """The argument vector of one call, and the copies to write back after it."""

    argv: ctypes.Array
    keep: list  # objects that must live during the call
    copy_back: list[tuple[np.ndarray, np.ndarray]]

    def finish(self) -> None:
        for original, aligned in self.copy_back:
            original[...] = aligned


def prepare_call(sig: FunctionSignature, args: tuple) -> PreparedCall:
    """Check every argument against the signature and build the `void *args[]` vector (with
    the values of the implicit shape variables after the arguments)."""
    arguments = sig.arguments
    if len(args) != len(arguments):
        raise TypeError(f"{sig.describe()} takes {len(arguments)} arguments, got {len(args)}")
    argv = (ctypes.c_void_p * len(sig.params))()
    keep: list = []
    copy_back: list[tuple[np.ndarray, np.ndarray]] = []
    checked: list[tuple[ParamSpec, object]] = []
    for k, (spec, value) in enumerate(zip(arguments, args)):
        if not spec.is_buffer:
            scalar = _scalar(sig, spec, value)
            checked.append((spec, scalar.value))
            keep.append(scalar)
            argv[k] = ctypes.addressof(scalar)
            continue
        arr = _check_array(sig, spec, value)
        checked.append((spec, arr))
        if arr.ctypes.data % spec.alignment:
            aligned = aligned_array(arr, alignment=spec.alignment)
            if spec.written:
                copy_back.append((arr, aligned))
            arr = aligned
        keep.append(arr)
        argv[k] = arr.ctypes.data
    for k, (spec, value) in enumerate(bind_shapes(sig, checked), start=len(arguments)):
        scalar = _scalar(sig, spec, value)
        keep.append(scalar)
        argv[k] = ctypes.addressof(scalar)
    _check_distinct(sig, [(spec, v) for spec, v in checked if spec.is_buffer])
    return PreparedCall(argv, keep, copy_back)


def _check_array(sig: FunctionSignature, spec: ParamSpec, value) -> np.ndarray:
    where = f"{sig.name}: argument {spec.name}"
    if not isinstance(value, np.ndarray):
        raise TypeError(
            f"{where} must be a numpy array of {spec.dtype}[{', '.join(map(str, spec.shape))}], "
            f"got {type(value).__name__}"
        )
    expected = to_dtype(spec.dtype).numpy
    if value.dtype != expected:
        raise TypeError(f"{where} must have dtype {spec.dtype}, got {value.dtype}")
    check_shape(sig, spec, value.shape)
    if not value.flags.c_contiguous:
        raise ValueError(
            f"{where} is not C-contiguous (a strided view); pass np.ascontiguousarray(...) of it"
        )
    if spec.written and not value.flags.writeable:
        raise ValueError(f"{where} is written by {sig.name} but the array is read-only")
    return value


def check_shape(sig: FunctionSignature, spec: ParamSpec, shape: tuple[int, ...]) -> None:
    """A constant shape in full; of a symbolic one, the number of dimensions (bind_shapes
    checks the rest once every shape variable has its value)."""
    if not spec.is_symbolic:
        if shape != spec.shape:
            raise ValueError(
                f"{sig.name}: argument {spec.name} must have shape {spec.shape}, got {shape}"
            )
    elif len(shape) != len(spec.shape):
        raise ValueError(
            f"{sig.name}: argument {spec.name} must have {len(spec.shape)} dimensions "
            f"[{', '.join(map(str, spec.shape))}], got shape {shape}"
        )


def _check_dimension_fits(
    sig: FunctionSignature, spec: ParamSpec, dim: str, extent: int, dtypes: dict, values: dict
) -> None:
    """The kernel computes a symbolic dimension in the widest dtype of its variables: its value
    must fit there, or the kernel's extents would wrap around."""
    widest = max((dtypes[v] for v in shape_expr.variables(dim)), key=lambda t: t.bits)
    if not 0 <= extent <= widest.max_value():
        given = ", ".join(f"{v} = {values[v]}" for v in shape_expr.variables(dim))
        raise ValueError(
            f"{sig.name}: argument {spec.name} has the dimension {dim} = {extent} ({given}), "
            f"which does not fit {widest}"
        )


def bind_shapes(
    sig: FunctionSignature, checked: list[tuple[ParamSpec, object]]
) -> list[tuple[ParamSpec, int]]:
    """The values of the implicit shape variables, from the arguments (`checked`: each
    parameter with its array, or a scalar's value), in the signature's order; a ValueError
    naming the variable when an array's dimension disagrees with its value. A shape variable
    takes its value from the first array whose dimension is that variable by itself (or from
    the scalar argument of that name)."""
    if not sig.is_symbolic:
        return []
    values: dict[str, int] = {}
    source: dict[str, str] = {}
    for spec, value in checked:
        if not spec.is_buffer:
            values[spec.name], source[spec.name] = value, f"argument {spec.name}"
    for spec, value in checked:
        if spec.is_symbolic:
            for k, d in enumerate(spec.shape):
                if isinstance(d, str) and d.isidentifier() and d not in values:
                    values[d] = value.shape[k]
                    source[d] = f"dimension {k} of argument {spec.name}"
    dtypes = {p.name: to_dtype(p.dtype) for p in sig.params if not p.is_buffer}
    for spec, value in checked:
        if not spec.is_symbolic:
            continue
        expected = tuple(
            d if isinstance(d, int) else shape_expr.evaluate(d, values) for d in spec.shape
        )
        for d, extent in zip(spec.shape, expected):
            if isinstance(d, str):
                _check_dimension_fits(sig, spec, d, extent, dtypes, values)
        if tuple(value.shape) != expected:
            names = [v for d in spec.shape if isinstance(d, str) for v in shape_expr.variables(d)]
            given = ", ".join(
                f"{v} = {values[v]} from the {source[v]}" for v in dict.fromkeys(names)
            )
            raise ValueError(
                f"{sig.name}: argument {spec.name} must have shape "
                f"[{', '.join(map(str, spec.shape))}] = {list(expected)} ({given}), "
                f"got {tuple(value.shape)}"
            )
    implicit = [p for p in sig.params if p.implicit]
    for p in implicit:
        dt = to_dtype(p.dtype)
        if not dt.min_value() <= values[p.name] <= dt.max_value():
            raise ValueError(
                f"{sig.name}: shape variable {p.name} = {values[p.name]} (from the "
                f"{source[p.name]}) does not fit its dtype {p.dtype}"
            )
    return [(p, values[p.name]) for p in implicit]


def _check_distinct(
    sig: FunctionSignature,
    buffers: list[tuple[ParamSpec, object]],
    overlap: Callable[[object, object], bool] = np.may_share_memory,
) -> None:
    """Refuse two buffer arguments that overlap when either is written. `overlap` says whether
    two arguments' memory intersects: numpy's for host arrays; the device path passes one
    that also compares device address ranges (loom/runtime/loaded.py)."""
    for i, (si, ai) in enumerate(buffers):
        for sj, aj in buffers[i + 1 :]:
            if (si.written or sj.written) and overlap(ai, aj):
                raise ValueError(
                    f"{sig.name}: arguments {si.name} and {sj.name} share memory, "
                    "but one is written; loom kernels assume distinct buffers"
                )


def _scalar(sig: FunctionSignature, spec: ParamSpec, value):
    where = f"{sig.name}: argument {spec.name}"
    dt = to_dtype(spec.dtype)
    ctype = _CTYPES.get(spec.dtype)
    if ctype is None:
        raise TypeError(f"{where}: scalar arguments of dtype {spec.dtype} are not supported")
    if isinstance(value, np.generic):
        value = value.item()
    if dt.is_float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{where} must be a number ({spec.dtype}), got {value!r}")
        return ctype(float(value))
    if dt.is_bool:
        if value not in (0, 1, True, False):
            raise TypeError(f"{where} must be a bool, got {value!r}")
        return ctype(bool(value))
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where} must be an int ({spec.dtype}), got {value!r}")
    if not dt.min_value() <= value <= dt.max_value():
        raise ValueError(f"{where}: {value} does not fit in {spec.dtype}")
    return ctype(value)
