"""A convolution computed with its output channels in the vector lanes (for conv_schedules.py).

conv_schedules.py's tile vectorizes along output columns: a 14- or 7-wide row wastes the rest
of its last vector (16 lanes computed for 14 outputs, 8 for 7). Here, as in onnxruntime's MLAS
NCHWc kernels, a vector holds `C` consecutive output channels instead (no lane wasted at any
width): the tile is `rows` x `width` output pixels x `C` channels; each reduction step
(input channel, kernel row, kernel column) loads the `C` channels' weights as C / lanes
contiguous vectors (the weights come packed as [O / C, I, KH, KW, C]: pack_conv_weights.py)
and broadcasts one input element per pixel, shared by the pixel's vectors: ideally one
`vfmadd231ps` with a broadcast memory operand per pixel and register.

The reduction is rebuilt channels last, `lanes[n, mo, oh, ow, mi]` for channel `mo * C + mi`,
so that the tile's accumulators (a local buffer of [rows, width, C] computed at the output's
tile) are vectors along their last axis, every access at a constant index after unrolling:
LLVM keeps them in registers. The reduction's stage becomes the copy
`out[n, m, oh, ow] = lanes[n, m // C, oh, ow, m % C]`, inlined into the epilogue (bias,
activation), which stores the tile once: a channel's pixels of a row as one vector when the
row's pixels fill one (conv_schedules.PIXEL_VECTOR_WIDTHS), else a pixel's channels as a
vector strided across the planes (it runs once per output element, the tile 9 * I
multiply-adds per element).

`rows_first` then makes the tile read its data from a copy laid out [n, h, c, w]: its steps
read consecutive rows instead of one plane after another.

A 1x1 convolution of stride 1 reads its data at its own output pixel: its rows may be laid end
to end, `lanes[n, mo, p, mi]` for pixel `p = oh * OW + ow` (channels_last's `pixels`), so that
a tile takes any number of consecutive pixels (MLAS's pointwise kernel on a 7x7 plane: 5 or 6
pixels, where a row of 7 admits 7 or 1). The axis runs to whole tiles; the pixels past the
last read the last one's data (a clamped index, no bound check in the reduction) and are never
stored.

Stages are built as conv_flat.py does (`Schedule.replace_op`).
"""

from __future__ import annotations

from loom import te
from loom.ir.expr import FloorDiv, FloorMod, IntImm, PrimExpr, Var
from loom.ir.op import floordiv, floormod, min_
from loom.ir.visitor import Mutator, substitute
from loom.te.schedule import Schedule, Stage
from loom.te.tensor import ComputeOp, IterVar, ProducerLoad, Range, Reduce, Tensor


class _SplitChannel(Mutator):
    """`m // C` and `m % C` (the packed weights' indices) become `mo` and `mi`; any other use
    of `m` becomes `mo * C + mi` (by the substitution that follows)."""

    def __init__(self, m: Var, block: int, mo: Var, mi: Var):
        self.m, self.block, self.mo, self.mi = m, block, mo, mi

    def _of_m(self, e) -> bool:
        return e.a is self.m and isinstance(e.b, IntImm) and e.b.value == self.block

    def visit_FloorDiv(self, e: FloorDiv) -> PrimExpr:
        return self.mo if self._of_m(e) else self.generic_mutate(e)

    def visit_FloorMod(self, e: FloorMod) -> PrimExpr:
        return self.mi if self._of_m(e) else self.generic_mutate(e)

    def visit_Reduce(self, e: Reduce) -> PrimExpr:
        return self.generic_mutate(e)


def channels_last(s: Schedule, reduction: Stage, block: int, pixels: int | None = None) -> Stage:
    """Make `reduction` (a 4-D window reduction (n, m, oh, ow) whose channels `block` divides)
    a copy out of a new reduction stage (returned, placed before it) computing the same sums
    as `[n, m // block, oh, ow, m % block]`. The copy stage is the reduction's old stage, with
    its old operation's identity replaced.

    With `pixels` (at least OH x OW), the output's rows are laid end to end instead,
    `[n, m // block, oh * OW + ow, m % block]`, over `pixels` positions: the sums past the
    last pixel repeat the last one's (its reads, clamped), so that whole tiles of pixels
    cover the axis with no bound check inside the reduction
    (conv_schedules._flat_pixels)."""
    red: ComputeOp = reduction.op
    body: Reduce = red.body
    n_iv, m_iv, oh_iv, ow_iv = red.axis
    channels = int(m_iv.dom.extent.value)
    if channels % block:
        raise ValueError(f"channels_last: block {block} does not divide {channels} channels")
    rows, columns = int(oh_iv.dom.extent.value), int(ow_iv.dom.extent.value)
    if pixels is not None and pixels < rows * columns:
        raise ValueError(f"channels_last: {pixels} pixels do not cover {rows}x{columns}")
    kind = n_iv.kind
    if pixels is None:
        spatial = (
            IterVar(Var(oh_iv.name), oh_iv.dom, kind),
            IterVar(Var(ow_iv.name), ow_iv.dom, kind),
        )
    else:
        spatial = (IterVar(Var("p"), Range(IntImm(0), IntImm(pixels)), kind),)
    axes = (
        IterVar(Var(n_iv.name), n_iv.dom, kind),
        IterVar(Var("mo"), Range(IntImm(0), IntImm(channels // block)), kind),
        *spatial,
        IterVar(Var("mi"), Range(IntImm(0), IntImm(block)), kind),
    )
    n, mo, mi = axes[0].var, axes[1].var, axes[-1].var
    if pixels is None:
        oh, ow = spatial[0].var, spatial[1].var
    else:
        last = min_(spatial[0].var, IntImm(rows * columns - 1))
        oh, ow = floordiv(last, columns), floormod(last, columns)
    raxes = tuple(IterVar(Var(iv.name), iv.dom, iv.kind) for iv in red.reduce_axis)
    mapping = {n_iv.var: n, m_iv.var: mo * block + mi, oh_iv.var: oh, ow_iv.var: ow}
    mapping.update({old.var: new.var for old, new in zip(red.reduce_axis, raxes)})
    split = _SplitChannel(m_iv.var, block, mo, mi)
    lanes_body = Reduce(
        body.combiner,
        substitute(split.visit(body.source), mapping),
        raxes,
        substitute(split.visit(body.condition), mapping),
        body.init,
    )
    lanes_op = ComputeOp(f"{red.name}.lanes", axes, lanes_body, red.tag, red.attrs)
    lanes_stage = Stage(lanes_op, s, is_output=False)
    s.stages.insert(s.stages.index(reduction), lanes_stage)
    a, m, r, c = (iv.var for iv in red.axis)
    place = (r, c) if pixels is None else (r * columns + c,)
    load = ProducerLoad(lanes_op.output(0), (a, floordiv(m, block), *place, floormod(m, block)))
    s.replace_op(reduction, red.with_body(load))
    return lanes_stage


class _ReadRowsFirst(Mutator):
    """Reads of `data[n, c, h, w]` become reads of `copy[n, h, c, w]`."""

    def __init__(self, data: Tensor, copy: Tensor):
        self.data, self.copy = data, copy

    def visit_ProducerLoad(self, e: ProducerLoad) -> PrimExpr:
        if e.tensor.op is not self.data.op:
            return self.generic_mutate(e)
        n, c, h, w = (self.visit(i) for i in e.indices)
        return ProducerLoad(self.copy, (n, h, c, w))

    def visit_Reduce(self, e: Reduce) -> PrimExpr:
        return self.generic_mutate(e)


def rows_first(s: Schedule, lanes: Stage, data: Tensor) -> Stage:
    """Make `lanes` (channels_last's stage) read `data` [n, c, h, w] from a copy laid out
    [n, h, c, w] (the stage of the copy, returned, placed before it, at the root).

    A tile broadcasts, per reduction step (an input channel), a few elements of one input row
    per pixel: read from `data`, each step reads another plane, H x W elements further, a new
    cache line every step that comes from the L2 cache (mobilenet_v2's 1x1 convolutions at 7x7
    read 960 planes of 196 bytes). From the copy, the steps read consecutive rows, W elements
    apart: a 7-wide row's 28 bytes follow the last step's."""
    n, c, h, w = data.shape
    copy = te.compute(
        (n, h, c, w), lambda i, y, k, x: data[i, k, y, x], name=f"{data.op.name}.rows"
    )
    op: ComputeOp = lanes.op
    body: Reduce = op.body
    read = _ReadRowsFirst(data, copy)
    rule = Reduce(body.combiner, read.visit(body.source), body.axis, body.condition, body.init)
    copy_stage = Stage(copy.op, s, is_output=False)
    s.stages.insert(s.stages.index(lanes), copy_stage)
    s.replace_op(lanes, op.with_body(rule))
    return copy_stage


__all__ = ["channels_last", "rows_first"]
