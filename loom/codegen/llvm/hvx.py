"""Masked contiguous vector loads and stores for Hexagon HVX that never touch memory outside the
aligned HVX blocks that hold an enabled lane.

LLVM's own lowering of `llvm.masked.load` on Hexagon reads the whole vector (two aligned HVX
blocks when the address is unaligned), so a partial last vector can read a block past the end of
its buffer, which faults when that block is on an unmapped page. These read and write only the
aligned W-byte blocks (W: the HVX vector length) that contain the first and the last enabled
byte of each W-byte chunk of the vector (clamped into the enabled range), which are inside the
buffer; an aligned block never crosses a page. A vector of V bytes starting at p is assembled,
chunk by chunk, from the aligned blocks below and above p + c (c = 0, W, ...):

    load:  lo = vmem(floor(p + clamp(c, f, l))), hi = vmem(floor(p + clamp(c + W - 1, f, l))),
           chunk = valign(hi, lo, p mod W)
    store: the chunk rotated by p mod W, stored under the enabled bytes' predicate into the
           block below (if it holds an enabled byte) and the block above (if it does)

where f and l are the offsets of the first and last enabled byte and floor rounds down to a
multiple of W. Where the block below p + c holds an enabled byte, the clamped address is in it
(and likewise above), so the assembled bytes are right wherever a lane is enabled; elsewhere
they are unspecified and masked off. With no lane enabled nothing is read (the load is zero)
or written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from loom.codegen.llvm.types import I1, I8, I32, PTR

if TYPE_CHECKING:  # the function code generator calls these
    from loom.codegen.llvm.function import FunctionCodegen
    from loom.target.target import Target

_INTPTR = I32  # Hexagon's pointers are 32-bit


def hvx_bytes(target: Target) -> int:
    """The HVX vector length in bytes of a Hexagon target with HVX, else 0."""
    if not target.triple.startswith("hexagon"):
        return 0
    hvx = target.option("hvx", "0")
    return int(hvx) if hvx.isdigit() else 0


def handles(target: Target, vector_type: ir.VectorType) -> bool:
    """Whether `masked_load`/`masked_store` serve a contiguous vector of this memory type on
    `target`: HVX, and a power-of-two number of bytes that is at most one vector or a whole
    number of vectors."""
    width = hvx_bytes(target)
    size = _byte_size(vector_type)
    return bool(width) and size is not None and size & (size - 1) == 0 and size >= 4


def _byte_size(vector_type: ir.VectorType) -> int | None:
    element = vector_type.element
    bits = getattr(element, "width", None)
    if bits is None:  # float types
        bits = {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}.get(type(element))
    if bits is None or bits % 8:
        return None
    return vector_type.count * bits // 8


class _Span:
    """The enabled bytes of a masked access at `ptr`: offsets f, l of its first and last enabled
    byte (i32), and the offset of `ptr` in its aligned block."""

    def __init__(self, cg: FunctionCodegen, ptr: ir.Value, mask: ir.Value, element_bytes: int):
        self.cg, self.ptr = cg, ptr
        b = cg.builder
        lanes = mask.type.count
        bits_type = ir.IntType(lanes)
        bits = b.bitcast(mask, bits_type)
        false = ir.Constant(I1, 0)
        first = cg.intrinsic(f"llvm.cttz.i{lanes}", bits_type, [bits, false], [])
        leading = cg.intrinsic(f"llvm.ctlz.i{lanes}", bits_type, [bits, false], [])
        first, leading = _to_i32(b, first), _to_i32(b, leading)
        last = b.sub(ir.Constant(I32, lanes - 1), leading)
        size = ir.Constant(I32, element_bytes)
        self.first = b.mul(first, size)
        self.last = b.add(b.mul(last, size), ir.Constant(I32, element_bytes - 1))

    def shift(self, width: int) -> ir.Value:
        """The offset of the access in its aligned block."""
        b = self.cg.builder
        return b.and_(b.ptrtoint(self.ptr, _INTPTR), ir.Constant(_INTPTR, width - 1))

    def clamp(self, b: ir.IRBuilder, offset: int) -> ir.Value:
        c = ir.Constant(I32, offset)
        low = b.select(b.icmp_signed("<", c, self.first), self.first, c)
        return b.select(b.icmp_signed(">", low, self.last), self.last, low)

    def block(self, b: ir.IRBuilder, offset: ir.Value, width: int) -> ir.Value:
        """A pointer to the aligned block holding byte `offset`: the access's pointer moved by
        `offset` less that byte's place in its block (a GEP from the pointer, so that it keeps the
        buffer's aliasing information; llvm.ptrmask would need the data layout's pointer width
        before loom's module has one)."""
        byte = b.add(b.ptrtoint(self.ptr, _INTPTR), offset)
        back = b.sub(offset, b.and_(byte, ir.Constant(_INTPTR, width - 1)))
        return b.gep(self.ptr, [back], source_etype=I8)


def _to_i32(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    if v.type.width > 32:
        return b.trunc(v, I32)
    if v.type.width < 32:
        return b.zext(v, I32)
    return v


def _any(b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
    bits = b.bitcast(mask, ir.IntType(mask.type.count))
    return b.icmp_unsigned("!=", bits, ir.Constant(bits.type, 0))


def _valign(cg: FunctionCodegen, hi: ir.Value, lo: ir.Value, shift: ir.Value, width: int):
    """Bytes shift .. shift + width - 1 of the pair hi:lo (lo first), as <width x i8>."""
    words = ir.VectorType(I32, width // 4)
    suffix = ".128B" if width == 128 else ""
    out = cg.intrinsic(
        f"llvm.hexagon.V6.valignb{suffix}",
        words,
        [cg.builder.bitcast(hi, words), cg.builder.bitcast(lo, words), shift],
        [],
    )
    return cg.builder.bitcast(out, ir.VectorType(I8, width))


def _chunks(width: int, size: int) -> range:
    return range(0, max(size, width), width)


def masked_load(cg: FunctionCodegen, ptr: ir.Value, mask: ir.Value, typ: ir.VectorType):
    """The vector of memory type `typ` at `ptr` where `mask` is on (zero where it is off)."""
    b = cg.builder
    width = hvx_bytes(cg.mcg.target)
    size = _byte_size(typ)
    block_type = ir.VectorType(I8, width)
    with b.if_else(_any(b, mask), likely=True) as (some_on, none_on):
        with some_on:
            span = _Span(cg, ptr, mask, size // typ.count)
            shift = span.shift(width)
            parts = []
            for c in _chunks(width, size):
                lo = _load_block(b, span.block(b, span.clamp(b, c), width), block_type, width)
                hi_offset = span.clamp(b, c + width - 1)
                hi = _load_block(b, span.block(b, hi_offset, width), block_type, width)
                parts.append(_valign(cg, hi, lo, shift, width))
            loaded = b.bitcast(_take(cg, _concat(cg, parts), size), typ)
            loaded_block = b.block
        with none_on:
            none_block = b.block
    v = b.phi(typ)
    v.add_incoming(loaded, loaded_block)
    v.add_incoming(ir.Constant(typ, None), none_block)
    return v


def masked_store(cg: FunctionCodegen, value: ir.Value, ptr: ir.Value, mask: ir.Value) -> None:
    """Store `value` (a vector in its memory type) at `ptr` where `mask` is on."""
    b = cg.builder
    width = hvx_bytes(cg.mcg.target)
    size = _byte_size(value.type)
    element_bytes = size // value.type.count
    byte_mask = _spread(cg, mask, element_bytes)
    data = b.bitcast(value, ir.VectorType(I8, size))
    ids = cg.constant(ir.VectorType(I8, width), tuple(range(width)))
    with b.if_then(_any(b, mask), likely=True):
        span = _Span(cg, ptr, mask, element_bytes)
        shift = span.shift(width)
        back = b.and_(b.sub(ir.Constant(_INTPTR, width), shift), ir.Constant(_INTPTR, width - 1))
        below = b.icmp_unsigned(">=", ids, _splat(cg, b.trunc(shift, I8), width))
        for c in _chunks(width, size):
            # byte j of the chunk goes to byte (shift + j) mod width of its block
            chunk = _widen(cg, _slice(cg, data, c, width), width)
            chunk_on = _widen(cg, _slice(cg, byte_mask, c, width), width)
            rotated = _valign(cg, chunk, chunk, back, width)
            on_bytes = b.zext(chunk_on, ir.VectorType(I8, width))
            rotated_on = b.icmp_unsigned(
                "!=", _valign(cg, on_bytes, on_bytes, back, width), cg.constant(on_bytes.type, 0)
            )
            low = span.block(b, ir.Constant(I32, c), width)
            high = b.gep(low, [ir.Constant(I32, width)], source_etype=I8)
            lo_block = span.block(b, span.clamp(b, c), width)
            hi_block = span.block(b, span.clamp(b, c + width - 1), width)
            with b.if_then(b.icmp_unsigned("==", lo_block, low)):
                _store_block(cg, rotated, low, b.and_(rotated_on, below), width)
            with b.if_then(b.icmp_unsigned("==", hi_block, high)):
                _store_block(cg, rotated, high, b.and_(rotated_on, b.not_(below)), width)


def _load_block(b: ir.IRBuilder, ptr: ir.Value, typ: ir.Type, width: int) -> ir.Value:
    return b.load(ptr, typ=typ, align=width)


def _store_block(cg: FunctionCodegen, value, ptr, on, width: int) -> None:
    cg.intrinsic(
        "llvm.masked.store",
        ir.VoidType(),
        [value, ptr, ir.Constant(I32, width), on],
        [value.type, PTR],
    )


def _splat(cg: FunctionCodegen, v: ir.Value, lanes: int) -> ir.Value:
    return cg.splat(v, lanes)


def _spread(cg: FunctionCodegen, mask: ir.Value, element_bytes: int) -> ir.Value:
    """The per-lane mask as a per-byte mask (each lane's bit for each of its bytes)."""
    if element_bytes == 1:
        return mask
    lanes = mask.type.count
    picks = tuple(k // element_bytes for k in range(lanes * element_bytes))
    return cg.builder.shuffle_vector(
        mask, cg.constant(mask.type, None), cg.constant(ir.VectorType(I32, len(picks)), picks)
    )


def _slice(cg: FunctionCodegen, v: ir.Value, start: int, width: int) -> ir.Value:
    """Elements start .. start + width - 1 of `v` (all of it if it is not longer)."""
    count = v.type.count
    if count <= width:
        return v
    picks = cg.constant(ir.VectorType(I32, width), tuple(range(start, start + width)))
    return cg.builder.shuffle_vector(v, cg.constant(v.type, ir.Undefined), picks)


def _widen(cg: FunctionCodegen, v: ir.Value, width: int) -> ir.Value:
    """`v` padded to `width` elements with zeros (off, for a mask)."""
    count = v.type.count
    if count == width:
        return v
    picks = tuple(k if k < count else count for k in range(width))
    return cg.builder.shuffle_vector(
        v, cg.constant(v.type, None), cg.constant(ir.VectorType(I32, width), picks)
    )


def _concat(cg: FunctionCodegen, parts: list[ir.Value]) -> ir.Value:
    while len(parts) > 1:
        n = parts[0].type.count
        picks = cg.constant(ir.VectorType(I32, 2 * n), tuple(range(2 * n)))
        parts = [
            cg.builder.shuffle_vector(parts[k], parts[k + 1], picks)
            for k in range(0, len(parts), 2)
        ]
    return parts[0]


def _take(cg: FunctionCodegen, v: ir.Value, count: int) -> ir.Value:
    """The first `count` elements of `v`."""
    if v.type.count == count:
        return v
    picks = cg.constant(ir.VectorType(I32, count), tuple(range(count)))
    return cg.builder.shuffle_vector(v, cg.constant(v.type, ir.Undefined), picks)
