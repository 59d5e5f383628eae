"""Buffers: a typed, shaped view of memory in a named memory scope.

A buffer's storage is identified by its `data` variable (a handle). Several buffers may view the
same storage: flattening replaces an N-d buffer by a 1-d buffer with the same `data`.
"""

from __future__ import annotations

from collections.abc import Sequence

from loom.abi.dtype import HANDLE, INT32, INT64, DataType, dtype
from loom.ir.expr import BufferLoad, IntImm, PrimExpr, Var
from loom.ir.node import Node, node
from loom.ir.op import convert
from loom.ir.stmt import BufferStore, store


def _index_const(value: int | PrimExpr) -> PrimExpr:
    if isinstance(value, PrimExpr):
        if not value.dtype.is_integer or value.dtype.is_vector:
            raise TypeError(f"buffer dimensions must be scalar integers, got {value.dtype}")
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"buffer dimensions must be integers, got {value!r}")
    return IntImm(value, INT32 if value <= INT32.max_value() else INT64)


@node
class Buffer(Node):
    """name, element dtype, shape, strides (in elements; empty = compact row-major), memory
    scope, and alignment in bytes (0: the default of the scope and the target)."""

    name: str
    dtype: DataType
    shape: tuple[PrimExpr, ...]
    data: Var
    strides: tuple[PrimExpr, ...] = ()
    scope: str = "global"
    alignment: int = 0

    def __post_init__(self) -> None:
        dt = dtype(self.dtype)
        if dt.is_vector or dt.is_handle:
            raise TypeError(f"buffer {self.name} needs a scalar element dtype, got {dt}")
        self._set("dtype", dt)
        self._set("shape", tuple(_index_const(s) for s in self.shape))
        self._set("strides", tuple(_index_const(s) for s in self.strides))
        if self.strides and len(self.strides) != len(self.shape):
            raise ValueError(
                f"buffer {self.name} has {len(self.shape)} dimensions "
                f"but {len(self.strides)} strides"
            )
        if not self.data.dtype.is_handle:
            raise TypeError(
                f"data of buffer {self.name} must be a handle Var, got {self.data.dtype}"
            )
        if self.alignment < 0 or (self.alignment & (self.alignment - 1)):
            raise ValueError(
                f"alignment of buffer {self.name} must be a power of two, got {self.alignment}"
            )

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def const_shape(self) -> tuple[int, ...]:
        """The shape as Python ints; raises if a dimension is symbolic."""
        out = []
        for s in self.shape:
            if not isinstance(s, IntImm):
                raise ValueError(f"buffer {self.name} has a symbolic dimension {s}")
            out.append(s.value)
        return tuple(out)

    def element_strides(self) -> tuple[PrimExpr, ...]:
        """Strides in elements: the declared ones, or compact row-major (int64 when a stride
        does not fit in int32)."""
        if self.strides:
            return self.strides
        if all(isinstance(s, IntImm) for s in self.shape):
            strides, acc = [], 1
            for extent in reversed(self.shape):
                strides.append(acc)
                acc *= extent.value
            dt = INT32 if acc <= INT32.max_value() else INT64
            return tuple(IntImm(v, dt) for v in reversed(strides))
        out: list[PrimExpr] = []
        acc_expr: PrimExpr = IntImm(1)
        for extent in reversed(self.shape):
            out.append(acc_expr)
            acc_expr = acc_expr * extent
        return tuple(reversed(out))

    def storage_elements(self) -> PrimExpr:
        """Number of elements of storage the buffer spans."""
        if not self.shape:
            return IntImm(1)
        strides = self.element_strides()
        span: PrimExpr = IntImm(1, strides[0].dtype)
        for extent, stride in zip(self.shape, strides):
            span = span + (extent - 1) * stride
        return span

    def flat_index(self, indices: Sequence[PrimExpr]) -> PrimExpr:
        """The offset in elements of `self[indices]`."""
        if len(indices) != len(self.shape):
            raise ValueError(
                f"buffer {self.name} has {self.ndim} dimensions, got {len(indices)} indices"
            )
        offset: PrimExpr | None = None
        for index, stride in zip(indices, self.element_strides()):
            term = convert(index) * stride
            offset = term if offset is None else offset + term
        return offset if offset is not None else IntImm(0)

    def flattened(self) -> Buffer:
        """The 1-d view of this buffer's storage (itself if already 1-d and compact). Its size
        is `storage_elements()`, folded where the shape is constant (flatten_buffer also
        simplifies a symbolic one)."""
        if self.ndim == 1 and not self.strides:
            return self
        size = self.storage_elements()
        return Buffer(self.name, self.dtype, (size,), self.data, (), self.scope, self.alignment)

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, tuple(convert(i) for i in indices))

    def load(self, indices: Sequence, predicate: PrimExpr | None = None) -> BufferLoad:
        return BufferLoad(self, tuple(convert(i) for i in indices), predicate)

    def store(self, value, indices: Sequence, predicate: PrimExpr | None = None) -> BufferStore:
        """`self[indices] = value` as a statement (loom.ir.stmt.store)."""
        return store(self, value, indices, predicate)


def decl_buffer(
    shape: Sequence[int | PrimExpr],
    dtype: str | DataType = "float32",
    name: str = "buffer",
    *,
    scope: str = "global",
    strides: Sequence[int | PrimExpr] = (),
    alignment: int = 0,
) -> Buffer:
    """A new buffer with its own storage (a fresh data variable)."""
    if isinstance(shape, int | PrimExpr):
        shape = (shape,)
    return Buffer(name, dtype, tuple(shape), Var(name, HANDLE), tuple(strides), scope, alignment)
