"""A convolution computed on a flattened grid (for conv_schedules.py).

Rows of 28 outputs computed in vectors of 16 (or 8) lanes waste an eighth of the
multiply-adds: 32 columns computed, 28 stored. Here the rows are laid end to end instead.
The padded data is copied with a row stride `S` = its width less `z`, `z` the columns that are
zero on both sides (the padding: `z = min(left, right)`): a window running past a row's end
reads the next row's left padding, zero as the right padding it stands for was. The outputs are
computed on the same grid, `flat[n, m, q]` at `q = oh * S + ow`, for all `q` below whole
tiles covering `(OH - 1) * S + OW`; the columns `OW..S-1` of each row and the tail are
computed and never read. A 28x28 output (S = 29) is then 816 lanes computed for 784 outputs
(4 % more) instead of 896 (14 %).

The tile is `channels` output channels x `vectors` consecutive vectors of the grid: each step
of the reduction loads `vectors` input vectors (contiguous: `q + kh * S + kw`) and broadcasts
one weight per channel, as conv_schedules.py's tile of one row. The grid is computed into a
buffer of its own (`.flat`), which the epilogue then reads row by row, contiguously. When the
data is a kernel argument already laid out as the grid (a 1x1 convolution without padding,
S its width), the grid reads it as it is (`_laid_out_as_grid`): its copy cost mobilenet_v2's
192 -> 32 at 28x28 15 % of its time. Computed lanes past the data's last row (14x14: 200
lanes for 196) are read as zeros, `q < H * S ? data : 0` (only the last vector's loads
masked), when the data has at least as many channels as the output (the copy with zero rows
cost mobilenet_v2's 576 -> 96 and 384 -> 64 at 14x14 3-5 % of their time).

With a stride, the window reads the data's phases (`[c, a, b, r, j] = data[c, r*sh + a,
j*sw + b]`, those it reads) instead: each phase a plane of rows `S` long, `S` the output's
width and the window's reach in the phase (no zero columns are shared there), read at
`q + (kh // sh) * S + kw // sw` in the plane of phase `(kh % sh, kw % sw)`.

Stages are built here as conv_widen.py does (`Schedule.replace_op`): the data's copy
`[n, c, r, j] = data[n, c, r, j]` (j < S, zero past the data's last row), the grid's reduction,
which reads it at `[n, c, (q + off) // S, (q + off) % S]` (the simplifier merges the row and
column back into one contiguous offset), and the reduction's stage becomes the copy
`out[n, m, oh, ow] = flat[n, m, oh * S + ow]`, inlined into the epilogue.
"""

from __future__ import annotations

import dataclasses
import itertools

from loom import te
from loom.ir.expr import FloatImm, IntImm, PrimExpr, Var
from loom.ir.op import floordiv, floormod
from loom.ir.simplify import simplify
from loom.ir.visitor import Mutator, post_order_visit, substitute
from loom.te.schedule import Schedule, Stage
from loom.te.tensor import (
    ComputeOp,
    IterVar,
    PlaceholderOp,
    ProducerLoad,
    Range,
    Reduce,
    Tensor,
)


@dataclasses.dataclass(frozen=True)
class Grid:
    """How a convolution's outputs lie on the flattened grid."""

    stride: int  # S: the row stride of the grid and of the data's copy
    offsets: tuple[PrimExpr, PrimExpr]  # the window's row and column, at oh = ow = 0
    outputs: int  # OH * OW: the useful lanes
    last: int  # (OH - 1) * S + OW: the grid's lanes that are read
    steps: tuple[int, int] = (1, 1)  # the window's stride along rows and columns


def grid(red: ComputeOp, data: ProducerLoad) -> Grid | None:
    """The flattened grid of `red` (a 4-D window reduction reading `data`), if its window
    moves by a constant along output rows and columns and nothing else reads the output
    position; else None."""
    _, _, oh, ow = (iv.var for iv in red.axis)
    zero = {oh: IntImm(0), ow: IntImm(0)}
    single = {r.var: IntImm(0) for r in red.reduce_axis if int(r.dom.extent.value) == 1}
    offsets, steps = [], []
    for index, var in ((data.indices[2], oh), (data.indices[3], ow)):
        index = simplify(substitute(index, single))  # a 1x1 kernel's axes: constant offsets
        offset = simplify(substitute(index, zero))
        step = simplify(substitute(index, {**zero, var: IntImm(1)}) - offset)
        if not (isinstance(step, IntImm) and step.value >= 1) or _reads(offset, (oh, ow)):
            return None
        if not _is_zero(simplify(index - (var * step.value + offset))):
            return None
        offsets.append(offset)
        steps.append(step.value)
    others = [ld for ld in _loads(red.body.source) if ld is not data]
    if any(_reads(i, (oh, ow)) for ld in others for i in ld.indices):
        return None
    if _reads(red.body.condition, (oh, ow)) or _reads(data.indices[1], (oh, ow)):
        return None
    ranges = [_extremes(offset, red) for offset in offsets]
    if any(r is None or r[0] < 0 for r in ranges):
        return None  # a window before the data's first row or column (read guarded)
    rows, columns = int(red.shape[2]), int(red.shape[3])
    if steps == [1, 1]:
        width = int(data.tensor.shape[3])
        left, right = _zero_columns(data.tensor)
        stride = width - min(left, right)
    else:  # rows of the phases' planes, long enough for every window: no wrapping
        stride = columns + ranges[1][1] // steps[1]
    last = (rows - 1) * stride + columns
    return Grid(stride, tuple(offsets), rows * columns, last, tuple(steps))


def _extremes(e: PrimExpr, red: ComputeOp) -> tuple[int, int] | None:
    """The least and the largest value of `e` (a window's offset: linear in the reduction's
    axes, growing or, flipped, shrinking with them) over the reduction; None if not
    constant there. A linear expression takes them at corners of the axes' box."""
    axes = [r for r in red.reduce_axis if _reads(e, (r.var,))]
    values = []
    for corner in itertools.product(*([0, int(r.dom.extent.value) - 1] for r in axes)):
        value = simplify(substitute(e, {r.var: IntImm(v) for r, v in zip(axes, corner)}))
        if not isinstance(value, IntImm):
            return None
        values.append(value.value)
    return min(values), max(values)


def _largest(e: PrimExpr, red: ComputeOp) -> int:
    return _extremes(e, red)[1]


def _is_zero(e) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def _reads(e, vars_) -> bool:
    if e is None:
        return False
    found = []
    post_order_visit(e, lambda n: found.append(n) if any(n is v for v in vars_) else None)
    return bool(found)


def _loads(e) -> list[ProducerLoad]:
    found: list[ProducerLoad] = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, ProducerLoad) else None)
    return found


def _zero_columns(narrow: Tensor) -> tuple[int, int]:
    """How many of the data's first and last columns are zero in every row (its padding):
    the rule with the column fixed simplifies to a zero constant."""
    op = narrow.op
    if not isinstance(op, ComputeOp) or isinstance(op.body, Reduce):
        return 0, 0
    column = op.axis[3].var
    width = int(op.shape[3])

    def zero(j: int) -> bool:
        value = simplify(substitute(op.body, {column: IntImm(j)}))
        return isinstance(value, IntImm | FloatImm) and value.value == 0

    left = next((j for j in range(width) if not zero(j)), width)
    right = next((j for j in range(width) if not zero(width - 1 - j)), width)
    return left, right


class _ReadFlat(Mutator):
    """Reads of `narrow` become reads of its flat copy: of the window's phase plane (with a
    stride) at `(q + off) // S, (q + off) % S`."""

    def __init__(
        self, narrow: Tensor, copy: Tensor, q: Var, g: Grid, offsets, limit: int | None = None
    ):
        self.narrow, self.copy, self.q, self.g, self.offsets = narrow, copy, q, g, offsets
        self.limit = limit  # the copy's lanes, when the grid reads past them (zeros there)

    def visit_ProducerLoad(self, e: ProducerLoad) -> PrimExpr:
        e = self.generic_mutate(e)
        if e.tensor.op is not self.narrow.op:
            return e
        (sh, sw), stride = self.g.steps, self.g.stride
        row, column = self.offsets
        at = self.q + simplify(floordiv(row, sh) * stride + floordiv(column, sw))
        place = (floordiv(at, stride), floormod(at, stride))
        if (sh, sw) == (1, 1):
            load = ProducerLoad(self.copy, (*e.indices[:2], *place))
            if self.limit is None:
                return load
            return te.if_then_else(at < self.limit, load, te.const(0, load.dtype))
        phase = tuple(
            simplify(floormod(offset, step)) if count > 1 else IntImm(0)
            for offset, step, (count, _) in zip(self.offsets, (sh, sw), _phases(self.g))
        )
        return ProducerLoad(self.copy, (*e.indices[:2], *phase, *place))

    def visit_Reduce(self, e: Reduce) -> PrimExpr:
        return self.generic_mutate(e)


def _phases(g: Grid) -> tuple[tuple[int, int], tuple[int, int]]:
    """Along rows and columns, how many phases of the stride the window reads, and the first:
    all (from 0) when the window moves along the axis, else the one it stays in (a 1x1
    convolution with a stride reads one)."""
    return tuple(
        (1, offset.value % step) if isinstance(offset, IntImm) else (step, 0)
        for offset, step in zip(g.offsets, g.steps)
    )


def _laid_out_as_grid(narrow: Tensor, rows: int, g: Grid, outputs: int) -> bool:
    """Whether the grid can read `narrow` itself: a kernel's argument (not a stage computed
    inline, such as the padding) whose rows are the grid's (no shared zero columns, no
    stride): a 1x1 convolution without padding, whose copy was the data itself (600 KB copied
    for mobilenet_v2's 192 -> 32 at 28x28). When the grid reads `rows` past the data's
    height, those are read as zeros (`_ReadFlat`'s limit: its last vector's loads masked),
    which pays only when the data has at least as many channels as the `outputs`: measured
    on mobilenet_v2's 1x1 convolutions at 14x14, 576 -> 96 and 384 -> 64 3-5 % faster so,
    64 -> 384 and 96 -> 576 3 % slower (their copy is small, their reduction short)."""
    height, width = int(narrow.shape[2]), int(narrow.shape[3])
    return (
        isinstance(narrow.op, PlaceholderOp)
        and g.steps == (1, 1)
        and g.stride == width
        and (rows <= height or int(narrow.shape[1]) >= outputs)
    )


def _flat_copy(narrow: Tensor, rows: int, g: Grid) -> Tensor:
    """The data's copy the grid reads: `rows` rows of `g.stride` columns, zero past the data;
    with a stride, one such plane per phase read (`_phases`),
    `[n, c, a, b, r, j] = data[n, c, r*sh + a0 + a, j*sw + b0 + b]`."""
    height, width = int(narrow.shape[2]), int(narrow.shape[3])
    zero = te.const(0, narrow.dtype)
    (sh, sw), stride = g.steps, g.stride
    name = f"{narrow.op.name}.flat"
    if (sh, sw) == (1, 1):
        if stride > width:
            raise ValueError(f"flatten: row stride {stride} exceeds the data's width {width}")
        if rows <= height:
            return te.compute(
                (*narrow.shape[:2], rows, stride), lambda n, c, r, j: narrow(n, c, r, j), name=name
            )
        return te.compute(
            (*narrow.shape[:2], rows, stride),
            lambda n, c, r, j: te.if_then_else(r < height, narrow(n, c, r, j), zero),
            name=name,
        )
    (ph, a0), (pw, b0) = _phases(g)
    return te.compute(
        (*narrow.shape[:2], ph, pw, rows, stride),
        lambda n, c, a, b, r, j: te.if_then_else(
            (r * sh + a + a0 < height) & (j * sw + b + b0 < width),
            narrow(n, c, r * sh + a + a0, j * sw + b + b0),
            zero,
        ),
        name=name,
    )


def flatten(s: Schedule, reduction: Stage, data: ProducerLoad, g: Grid, lanes: int) -> Stage:
    """Make `reduction` (untouched) a copy out of the flattened grid of `lanes` outputs
    (whole tiles covering `g.last`), computed by a new reduction stage (returned) that reads
    a new copy of the data (placed before it, at the root; named `.flat`), or the data itself
    when it is laid out as the grid (`_laid_out_as_grid`). The copy stage is the reduction's
    old stage, with its old operation's identity replaced."""
    red: ComputeOp = reduction.op
    body: Reduce = red.body
    narrow = data.tensor
    (sh, sw), stride = g.steps, g.stride
    reach = _largest(g.offsets[0], red) // sh * stride + _largest(g.offsets[1], red) // sw
    rows = -(-(lanes + reach) // stride)
    outputs = int(red.shape[1])
    copy = narrow if _laid_out_as_grid(narrow, rows, g, outputs) else _flat_copy(narrow, rows, g)
    height = int(narrow.shape[2])
    limit = height * stride if copy is narrow and rows > height else None
    n_iv, m_iv = red.axis[:2]
    axes = (
        IterVar(Var(n_iv.name), n_iv.dom, n_iv.kind),
        IterVar(Var(m_iv.name), m_iv.dom, m_iv.kind),
        IterVar(Var("q"), Range(IntImm(0), IntImm(lanes)), n_iv.kind),
    )
    raxes = tuple(IterVar(Var(iv.name), iv.dom, iv.kind) for iv in red.reduce_axis)
    mapping = {n_iv.var: axes[0].var, m_iv.var: axes[1].var}
    mapping.update({old.var: new.var for old, new in zip(red.reduce_axis, raxes)})
    offsets = tuple(substitute(o, mapping) for o in g.offsets)
    source = _ReadFlat(narrow, copy, axes[2].var, g, offsets, limit).visit(body.source)
    flat_body = Reduce(
        body.combiner,
        substitute(source, mapping),
        raxes,
        substitute(body.condition, mapping),
        body.init,
    )
    flat_op = ComputeOp(f"{red.name}.flat", axes, flat_body, red.tag, red.attrs)
    index = s.stages.index(reduction)
    flat_stage = Stage(flat_op, s, is_output=False)
    if copy is narrow:
        s.stages.insert(index, flat_stage)
    else:
        s.stages[index:index] = [Stage(copy.op, s, is_output=False), flat_stage]
    n, m, oh, ow = (iv.var for iv in red.axis)
    s.replace_op(
        reduction, red.with_body(ProducerLoad(flat_op.output(0), (n, m, oh * stride + ow)))
    )
    return flat_stage
