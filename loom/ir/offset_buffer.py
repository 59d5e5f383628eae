"""A buffer with TVM's element offset: the form `tvm.tir.decl_buffer` declares.

TVM's buffers start `elem_offset` elements past their data pointer, and a buffer declared with
an `offset_factor` gets a variable offset that is a multiple of it: a tensor intrinsic's operand
is bound to a region of a larger buffer that way. loom's own buffers start at their data; an
`OffsetBuffer` lives only in the programs TVM's API builds (an intrinsic's body, the
ir_builder's statements), and `lower_offset_buffers` turns it into loom's buffers before
lowering: each access becomes one of a 1-d buffer over the data at `elem_offset + flat index`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loom.abi.dtype import HANDLE
from loom.abi.dtype import dtype as parse_dtype
from loom.ir import op
from loom.ir.buffer import Buffer
from loom.ir.expr import BufferLoad, IntImm, PrimExpr, Ramp, Var
from loom.ir.node import node
from loom.ir.simplify import simplify
from loom.ir.stmt import Allocate, BufferStore
from loom.ir.visitor import Mutator

_ACCESS_MASKS = {"r": 1, "w": 2, "rw": 3, "wr": 3}


@node
class OffsetBuffer(Buffer):
    """A Buffer whose element (0, ..., 0) is `elem_offset` elements past `data`;
    `offset_factor` (0: none) says the offset is a multiple of it."""

    elem_offset: PrimExpr = IntImm(0)
    offset_factor: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._set("elem_offset", op.convert(self.elem_offset))
        if not self.elem_offset.dtype.is_integer or self.elem_offset.dtype.is_vector:
            raise TypeError(
                f"elem_offset of buffer {self.name} must be a scalar integer, got "
                f"{self.elem_offset.dtype}"
            )
        if isinstance(self.offset_factor, bool) or not isinstance(self.offset_factor, int):
            raise TypeError(f"offset_factor of buffer {self.name} must be an int")
        if self.offset_factor < 0:
            raise ValueError(f"offset_factor of buffer {self.name} must be >= 0")

    @property
    def data_alignment(self) -> int:
        return self.alignment

    def get_flattened_buffer(self) -> OffsetBuffer:
        """The 1-d view of the same elements (same data and offset)."""
        if self.ndim == 1 and not self.strides:
            return self
        return OffsetBuffer(
            self.name,
            self.dtype,
            (self.storage_elements(),),
            self.data,
            (),
            self.scope,
            self.alignment,
            self.elem_offset,
            self.offset_factor,
        )

    def offset_of(self, indices: Sequence) -> list[PrimExpr]:
        """The element offset from `data` of `self[indices]` (a one-element list, as TVM's)."""
        return [op.add(self.elem_offset, self.flat_index([op.convert(i) for i in indices]))]

    def access_ptr(
        self, access_mask, ptr_type: str = "handle", content_lanes: int = 1, offset=0, extent=None
    ) -> PrimExpr:
        """The address of the element `offset` (counted from the buffer's first element), as
        a handle for an extern call. `access_mask` ("r", "w", "rw" or 1, 2, 3) is checked but
        does not matter to loom: what an extern symbol writes is in its declaration."""
        del extent  # loom's accesses are checked by the extern's declaration, not a range
        mask = _ACCESS_MASKS.get(access_mask) if isinstance(access_mask, str) else access_mask
        if mask not in (1, 2, 3):
            raise ValueError(
                f"access_ptr of {self.name}: access_mask must be 'r', 'w', 'rw' or 1, 2, 3, "
                f"got {access_mask!r}"
            )
        if ptr_type != "handle":
            raise ValueError(
                f"access_ptr of {self.name}: ptr_type must be 'handle', got {ptr_type!r}"
            )
        if content_lanes != 1:
            raise ValueError(
                f"access_ptr of {self.name}: content_lanes={content_lanes} is not supported "
                "(loom addresses elements)"
            )
        flat = self.get_flattened_buffer()
        return op.call_intrin(HANDLE, "address_of", flat.load((op.convert(offset),)))

    def vload(self, begin, dtype=None, predicate=None) -> BufferLoad:
        """Load at the indices `begin`; a vector `dtype` reads its lanes along the last one."""
        indices = _vector_indices(self, begin, dtype)
        return BufferLoad(self, indices, predicate)

    def vstore(self, begin, value, predicate=None) -> BufferStore:
        """Store `value` at the indices `begin` (its lanes along the last one)."""
        value = op.convert(value)
        indices = _vector_indices(self, begin, value.dtype)
        return BufferStore(self, value, indices, predicate)


def _vector_indices(buf: Buffer, begin, dt) -> tuple[PrimExpr, ...]:
    indices = [op.convert(i) for i in (begin if isinstance(begin, list | tuple) else [begin])]
    lanes = parse_dtype(dt).lanes if dt is not None else 1
    if dt is not None and parse_dtype(dt).element != buf.dtype:
        raise TypeError(f"buffer {buf.name} holds {buf.dtype}, accessed as {dt}")
    if lanes > 1:
        if not indices:
            raise ValueError(f"a vector access of buffer {buf.name} needs an index")
        indices[-1] = Ramp(indices[-1], IntImm(1, indices[-1].dtype), lanes)
    return tuple(indices)


def plain_buffer(buf: Buffer) -> Buffer:
    """loom's buffer for an OffsetBuffer whose offset is 0 (other buffers as they are)."""
    if not isinstance(buf, OffsetBuffer):
        return buf
    offset = simplify(buf.elem_offset)
    if not (isinstance(offset, IntImm) and offset.value == 0):
        raise ValueError(
            f"buffer {buf.name} starts at element offset {offset}: loom's buffers start at "
            "their data (use elem_offset=None and offset_factor=0 outside tensor intrinsics)"
        )
    return Buffer(buf.name, buf.dtype, buf.shape, buf.data, buf.strides, buf.scope, buf.alignment)


class _LowerOffsetBuffers(Mutator):
    """See `lower_offset_buffers`."""

    def __init__(self, values: Mapping[Var, PrimExpr], storage: Mapping[Var, Buffer]):
        self.values = values
        self.storage = storage

    def visit_Var(self, v: Var) -> PrimExpr:
        if v in self.storage:
            return self.storage[v].data
        return self.values.get(v, v)

    def expr(self, e: PrimExpr) -> PrimExpr:
        return self.visit(e)

    def access(self, buf: Buffer, indices: tuple[PrimExpr, ...]):
        """(buffer, indices) of an access after lowering."""
        indices = tuple(self.visit(i) for i in indices)
        target = self.storage.get(buf.data)
        if target is None:
            return self.buffer(buf), indices
        offset = buf.elem_offset if isinstance(buf, OffsetBuffer) else IntImm(0)
        flat = self.expr(offset)
        for index, stride in zip(indices, buf.element_strides()):
            flat = op.add(flat, op.mul(index, self.expr(stride)))
        return target, (flat,)

    def buffer(self, buf: Buffer) -> Buffer:
        if not isinstance(buf, OffsetBuffer):
            return buf
        new = buf.replace(
            shape=tuple(self.expr(s) for s in buf.shape),
            strides=tuple(self.expr(s) for s in buf.strides),
            elem_offset=self.expr(buf.elem_offset),
        )
        return plain_buffer(new)

    def visit_BufferLoad(self, n: BufferLoad) -> PrimExpr:
        buf, indices = self.access(n.buffer, n.indices)
        pred = None if n.predicate is None else self.visit(n.predicate)
        return BufferLoad(buf, indices, pred)

    def visit_BufferStore(self, n: BufferStore) -> BufferStore:
        buf, indices = self.access(n.buffer, n.indices)
        pred = None if n.predicate is None else self.visit(n.predicate)
        return BufferStore(buf, self.visit(n.value), indices, pred)

    def visit_Allocate(self, n: Allocate) -> Allocate:
        return Allocate(self.buffer(n.buffer), self.visit(n.body))


def lower_offset_buffers(
    node, values: Mapping[Var, PrimExpr] | None = None, storage: Mapping[Var, Buffer] | None = None
):
    """`node` with loom's buffers only: `values` replaces variables (an intrinsic's element
    offsets and strides by the region's); an access of a buffer whose data is a key of
    `storage` becomes an access of that (1-d) buffer at `elem_offset + flat index`, and its
    data variable that buffer's data; any other OffsetBuffer must have offset 0."""
    return _LowerOffsetBuffers(values or {}, storage or {}).visit(node)


def decl_offset_buffer(
    shape,
    dtype="float32",
    name: str = "buffer",
    data: Var | None = None,
    strides=None,
    elem_offset=None,
    scope: str = "",
    data_alignment: int = -1,
    offset_factor: int = 0,
) -> OffsetBuffer:
    """TVM's `tir.decl_buffer`: a buffer over `data` (a new handle variable if None). With an
    `offset_factor` and no `elem_offset`, the offset is a new variable `<name>_elem_offset`
    (bound when a tensor intrinsic's operand is bound to its region); strides may be
    variables too. Scope "" is "global"; data_alignment -1 the default."""
    if isinstance(shape, int | PrimExpr):
        shape = (shape,)
    if data is None:
        data = Var(name, HANDLE)
    elif not isinstance(data, Var) or not data.dtype.is_handle:
        raise TypeError(f"decl_buffer {name}: data must be a handle Var, got {data!r}")
    if isinstance(data_alignment, bool) or not isinstance(data_alignment, int):
        raise TypeError(f"decl_buffer {name}: data_alignment must be an int")
    if elem_offset is None:
        elem_offset = Var(f"{name}_elem_offset") if offset_factor else IntImm(0)
    return OffsetBuffer(
        name,
        dtype,
        tuple(shape),
        data,
        tuple(strides or ()),
        scope or "global",
        max(data_alignment, 0),
        op.convert(elem_offset),
        offset_factor,
    )
