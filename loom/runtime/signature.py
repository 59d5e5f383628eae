"""What a compiled function expects of each argument, and the checks made before a call.

The signature is derived from the PrimFunc and the target (alignment), stored in the artifact's
metadata, and checked in Python before every call, so a wrong array is a clear TypeError or
ValueError naming the argument, never a crash (DESIGN.md decision 4).
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Mapping

import numpy as np

from loom.ir.buffer import Buffer
from loom.ir.dtype import dtype as to_dtype
from loom.ir.expr import Call, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.stmt import BufferStore, LetStmt
from loom.ir.visitor import children, post_order_visit
from loom.runtime import abi


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """One argument: a buffer (shape, alignment, whether the function writes it) or a scalar."""

    name: str
    dtype: str
    shape: tuple[int, ...] | None = None  # None: a scalar
    alignment: int = 1
    written: bool = False

    @property
    def is_buffer(self) -> bool:
        return self.shape is not None

    def to_json(self) -> dict:
        return dataclasses.asdict(self) | {"shape": list(self.shape) if self.is_buffer else None}

    @staticmethod
    def from_json(d: dict) -> ParamSpec:
        shape = tuple(d["shape"]) if d.get("shape") is not None else None
        return ParamSpec(
            d["name"], d["dtype"], shape, d.get("alignment", 1), d.get("written", False)
        )


@dataclasses.dataclass(frozen=True)
class FunctionSignature:
    name: str
    params: tuple[ParamSpec, ...]

    def to_json(self) -> dict:
        return {"name": self.name, "params": [p.to_json() for p in self.params]}

    @staticmethod
    def from_json(d: dict) -> FunctionSignature:
        return FunctionSignature(d["name"], tuple(ParamSpec.from_json(p) for p in d["params"]))

    def describe(self) -> str:
        parts = []
        for p in self.params:
            parts.append(
                f"{p.name}: {p.dtype}{list(p.shape)}" if p.is_buffer else f"{p.name}: {p.dtype}"
            )
        return f"{self.name}({', '.join(parts)})"


def written_buffers(
    func: PrimFunc, callees: Mapping[str, FunctionSignature] | None = None
) -> set[Var]:
    """Data variables of buffers the function stores to, or whose address may be written
    through: an address given to a call at a parameter that is not read-only (an extern
    symbol's parameter not declared `const`; a parameter another function in `callees`
    writes; any parameter of a function not in `callees`), or an address that escapes into a
    variable. Each occurrence of an address is judged by where it stands."""
    callees = callees or {}
    written: set[Var] = set()

    def read_only_args(call: Call) -> set[int]:
        if call.kind == "func":
            sig = callees.get(call.op)
            if sig is None:
                return set()
            return {k for k, p in enumerate(sig.params) if p.is_buffer and not p.written}
        return abi.read_only_params(call.op)

    def escapes(value) -> None:  # every handle a let binds may be written through later
        post_order_visit(
            value,
            lambda n: written.add(n) if isinstance(n, Var) and n.dtype.is_handle else None,
        )

    def walk(n, read_only: bool = False) -> None:
        if isinstance(n, BufferStore):
            written.add(n.buffer.data)
        elif isinstance(n, LetStmt):
            escapes(n.value)
        elif isinstance(n, Call) and n.op == "address_of":
            if not read_only:
                written.add(n.args[0].buffer.data)
        elif isinstance(n, Call) and n.kind != "intrin":
            read = read_only_args(n)
            for k, arg in enumerate(n.args):
                if k not in read and isinstance(arg, Var) and arg.dtype.is_handle:
                    written.add(arg)
                walk(arg, read_only=k in read)
            return
        for child in children(n):  # an address computed from another (a cast, an offset)
            walk(child, read_only)

    walk(func.body)
    return written


def signature_of(
    func: PrimFunc, alignment: int, callees: Mapping[str, FunctionSignature] | None = None
) -> FunctionSignature:
    """The signature of `func`; buffers without a declared alignment get `alignment`;
    `callees` are the signatures of functions it calls."""
    written = written_buffers(func, callees)
    params = []
    for p in func.params:
        if isinstance(p, Buffer):
            params.append(
                ParamSpec(
                    p.name,
                    str(p.dtype),
                    p.const_shape(),
                    p.alignment or alignment,
                    p.data in written,
                )
            )
        else:
            params.append(ParamSpec(p.name, str(p.dtype)))
    return FunctionSignature(func.name, tuple(params))


def module_signatures(
    mod: IRModule, alignment: int, callees: Mapping[str, FunctionSignature] | None = None
) -> dict[str, FunctionSignature]:
    """The signatures of every function of `mod`, each computed after those of the functions
    it calls (in `mod`, or given in `callees`), so arrays passed on only to be read stay
    inputs."""
    by_name = {f.name: f for f in mod}
    done: dict[str, FunctionSignature] = dict(callees or {})

    def compute(func: PrimFunc, visiting: set[str]) -> None:
        visiting.add(func.name)
        calls: list[str] = []
        post_order_visit(
            func.body,
            lambda n: calls.append(n.op) if isinstance(n, Call) and n.kind == "func" else None,
        )
        for name in calls:
            if name in by_name and name not in done and name not in visiting:
                compute(by_name[name], visiting)  # a cycle leaves the callee conservative
        done[func.name] = signature_of(func, alignment, done)

    for func in mod:
        if func.name not in done:
            compute(func, set())
    return {f.name: done[f.name] for f in mod}


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
    """Check every argument against the signature and build the `void *args[]` vector."""
    from loom.runtime.ndarray import array as aligned_array

    if len(args) != len(sig.params):
        raise TypeError(f"{sig.describe()} takes {len(sig.params)} arguments, got {len(args)}")
    argv = (ctypes.c_void_p * len(args))()
    keep: list = []
    copy_back: list[tuple[np.ndarray, np.ndarray]] = []
    buffers: list[tuple[ParamSpec, np.ndarray]] = []
    for k, (spec, value) in enumerate(zip(sig.params, args)):
        if not spec.is_buffer:
            scalar = _scalar(sig, spec, value)
            keep.append(scalar)
            argv[k] = ctypes.addressof(scalar)
            continue
        arr = _check_array(sig, spec, value)
        buffers.append((spec, arr))
        if arr.ctypes.data % spec.alignment:
            aligned = aligned_array(arr, alignment=spec.alignment)
            if spec.written:
                copy_back.append((arr, aligned))
            arr = aligned
        keep.append(arr)
        argv[k] = arr.ctypes.data
    _check_distinct(sig, buffers)
    return PreparedCall(argv, keep, copy_back)


def _check_array(sig: FunctionSignature, spec: ParamSpec, value) -> np.ndarray:
    where = f"{sig.name}: argument {spec.name}"
    if not isinstance(value, np.ndarray):
        raise TypeError(
            f"{where} must be a numpy array of {spec.dtype}{list(spec.shape)}, got "
            f"{type(value).__name__}"
        )
    expected = to_dtype(spec.dtype).numpy
    if value.dtype != expected:
        raise TypeError(f"{where} must have dtype {spec.dtype}, got {value.dtype}")
    if value.shape != spec.shape:
        raise ValueError(f"{where} must have shape {spec.shape}, got {value.shape}")
    if not value.flags.c_contiguous:
        raise ValueError(
            f"{where} is not C-contiguous (a strided view); pass np.ascontiguousarray(...) of it"
        )
    if spec.written and not value.flags.writeable:
        raise ValueError(f"{where} is written by {sig.name} but the array is read-only")
    return value


def _check_distinct(sig: FunctionSignature, buffers: list[tuple[ParamSpec, np.ndarray]]) -> None:
    for i, (si, ai) in enumerate(buffers):
        for sj, aj in buffers[i + 1 :]:
            if (si.written or sj.written) and np.may_share_memory(ai, aj):
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
