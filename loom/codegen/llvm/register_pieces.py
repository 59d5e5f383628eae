"""Masked vector loads wider than a vector register on x86, as register-wide pieces.

LLVM 22's X86 back end splits a masked load wider than a register into register-wide loads, and
a piece whose mask turns out all false only in its own combines (a guarded row's last vectors:
`broadcast(h >= 2) && ramp(32, 1, 16) < broadcast(38, 16)`, the upper 8 lanes all off) is
loaded whole: its lanes hold memory past the guard instead of zero, and may fault. Seen on AVX2
(Zen 3) for masks made of a splat of a scalar condition and a constant, and for a ramp
comparison and a constant at 32 lanes; loads of one register or less and all masked stores were
right (tests/codegen/test_x86_masked_loads.py keeps the reduced cases). So loom splits such a
load itself: each piece's condition is the load's predicate cut to the piece's lanes
(loom.ir.lanes) and simplified; a piece whose condition is provably false is zero and reads
nothing, one provably true is a plain load, any other a register-wide masked load; then the
pieces are concatenated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from loom.codegen.llvm.types import I1, I32, PTR
from loom.ir import expr as E
from loom.ir.lanes import lane_slice
from loom.ir.simplify import simplify

if TYPE_CHECKING:  # the function code generator calls these
    from loom.codegen.llvm.function import FunctionCodegen
    from loom.target.target import Target


def register_elements(target: Target, item_bytes: int) -> int:
    """Elements of `item_bytes` bytes in one vector register of `target`."""
    return max(1, target.vector_bytes // max(1, item_bytes))


def applies(target: Target, span: int, item_bytes: int) -> bool:
    """Whether a masked load of `span` elements of `item_bytes` bytes is split into pieces on
    `target`: an x86 target, and more elements than a register holds."""
    return target.triple.startswith("x86_64") and span > register_elements(target, item_bytes)


def masked_load(
    cg: FunctionCodegen,
    e: E.BufferLoad,
    ptr: ir.Value,
    element: ir.Type,
    align: int,
    stride: int = 1,
) -> ir.Value | None:
    """The `span` = lanes x `stride` elements from `ptr` that the predicated load `e` needs,
    in register-wide pieces: lane k of `e` is element k * stride of the result, read where its
    predicate holds and zero where it does not; the elements between lanes (stride > 1) are
    unspecified. None where the predicate cannot be cut into pieces (it reads a vector
    variable): the caller loads the whole vector."""
    lanes = e.dtype.lanes
    span = lanes * stride
    read = (lanes - 1) * stride + 1  # the span's elements past the last lane are not read
    per = register_elements(cg.mcg.target, e.buffer.dtype.itemsize)
    pieces = []
    for start in range(0, span, per):
        count = min(per, span - start)
        typ = ir.VectorType(element, count)
        first, last = -(-start // stride), min(lanes - 1, (start + count - 1) // stride)
        if first > last:  # only elements between lanes, or past the last one
            pieces.append(ir.Constant(typ, None))
            continue
        cond = lane_slice(e.predicate, first, last - first + 1)
        if cond is None:
            return None
        cond = simplify(cond)
        positions = [k * stride - start for k in range(first, last + 1)]
        pieces.append(_piece(cg, ptr, typ, align, start, cond, positions, read))
    return _concat(cg.builder, pieces)


def _piece(cg, ptr, typ: ir.VectorType, align: int, start: int, cond, positions, read: int):
    """Elements start .. start+count-1: lanes at `positions` (offsets in the piece) where
    `cond` (their predicate) holds, zero elsewhere."""
    count = typ.count
    truth = _constant_truth(cond)
    if truth is False:
        return ir.Constant(typ, None)
    at = cg.builder.gep(ptr, [ir.Constant(I32, start)], source_etype=typ.element)
    if truth is True:
        on = [start + k < read for k in range(count)]
        if all(on):
            return cg.builder.load(at, typ=typ, align=align)
        mask = ir.Constant(ir.VectorType(I1, count), [int(b) for b in on])
    else:
        mask = _spread(cg, cg.expr(cond), positions, count)
    return cg.intrinsic(
        "llvm.masked.load",
        typ,
        [at, ir.Constant(I32, align), mask, ir.Constant(typ, None)],
        [typ, PTR],
    )


def _constant_truth(cond) -> bool | None:
    """True or False for a condition that is that constant in every lane, else None."""
    value = cond.value if isinstance(cond, E.Broadcast) else cond
    return bool(value.value) if isinstance(value, E.IntImm) else None


def _spread(cg, mask: ir.Value, positions: list[int], count: int) -> ir.Value:
    """A `count`-lane mask with lane i of `mask` at positions[i], off elsewhere."""
    if not isinstance(mask.type, ir.VectorType):  # one lane: a scalar condition
        on = ir.Constant(ir.VectorType(I1, count), [int(k in positions) for k in range(count)])
        return cg.builder.select(mask, on, ir.Constant(on.type, None))
    if positions == list(range(count)):
        return mask
    off = len(positions)  # an element of the all-off second operand
    picks = [positions.index(k) if k in positions else off for k in range(count)]
    zero = ir.Constant(mask.type, None)
    return cg.builder.shuffle_vector(mask, zero, ir.Constant(ir.VectorType(I32, count), picks))


def _concat(builder: ir.IRBuilder, pieces: list[ir.Value]) -> ir.Value:
    whole = pieces[0]
    for piece in pieces[1:]:
        whole = _concat_two(builder, whole, piece)
    return whole


def _concat_two(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    na, nb = a.type.count, b.type.count
    width = max(na, nb)
    a, b = _widen(builder, a, width), _widen(builder, b, width)
    picks = list(range(na)) + [width + k for k in range(nb)]
    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(I32, na + nb), picks))


def _widen(builder: ir.IRBuilder, v: ir.Value, width: int) -> ir.Value:
    n = v.type.count
    if n == width:
        return v
    picks = list(range(n)) + [0] * (width - n)
    return builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, width), picks))


__all__ = ["applies", "masked_load", "register_elements"]
