"""Re-laying out a convolution's data for its vector loop (for conv_schedules.py).

Rows of whole registers: a row of 56 outputs is 3 registers and a half of float32 with
AVX-512. LLVM splits a vector of 56 lanes into pieces of 4, and a masked last vector keeps its
accumulators in memory (LLVM promotes no masked access to registers). So the reduction is
computed over rows of 64 columns instead, from a copy of its input whose rows are widened with
zeros: the 8 columns past the end are computed and never stored (the output stage still covers
its own shape; only its last vector of a row is a masked store).

Strided windows: a window read at `ow * stride + k` is a gather along the vector. The copy is
then split into the stride's phases, `[n, c, h, p, j] = data[n, c, h, j * stride + p]`, which
the reduction reads at `[..., k % stride, ow + k // stride]`: contiguous along `ow`.

A strided window of one element along both axes (a 1x1 convolution with a stride: it reads
one phase of every `stride`-th row) would read a quarter of each cache line of that copy: the
copy is then the subsampled data itself, `[n, c, i, j] = data[n, c, i * sh + r0, j * sw + c0]`,
read at `[..., oh, ow]` (measured: the 1x1/2 convolution of resnet18 at 7x7 outputs is twice
as fast).

A phase copy reads the padding's rule with its row conditions taken out of the lazy guard
(`_read`): a row of padding is a select of zeros, the data's row index clamped, and only the
columns' conditions mask the loads (constants once the copy's vectors are unrolled). A copy
without a stride keeps the padding's rule (its rows, not unrolled, gained nothing so, and
mobilenet_v2's depthwise 3x3 convolution of 960 channels at 7x7 lost a quarter).

The copy replaces the padded copy the schedule makes anyway. Changing which tensor a stage
reads is not a schedule primitive: this module builds the new stages itself (as
`Schedule.cache_read` does) and uses `Schedule.replace_op`.
"""

from __future__ import annotations

from loom import te
from loom.ir.expr import And, Call, FloatImm, IntImm, PrimExpr, Var
from loom.ir.op import all_, floordiv, floormod, max_, min_, select
from loom.ir.simplify import simplify
from loom.ir.structural import structural_equal
from loom.ir.visitor import Mutator, post_order_visit, substitute
from loom.te.schedule import Schedule, Stage
from loom.te.tensor import ComputeOp, IterVar, ProducerLoad, Range, Reduce, Tensor


class _ReadRelaid(Mutator):
    """Reads of `narrow` at column `ow * stride + rest` become reads of `relaid` (rows widened,
    and with a stride, split into its phases): at `[..., rest % stride, ow + rest // stride]`,
    contiguous along `ow`; or at the same indices without a stride."""

    def __init__(self, narrow: Tensor, relaid: Tensor, ow: Var, stride: int):
        self.narrow, self.relaid, self.ow, self.stride = narrow, relaid, ow, stride

    def visit_ProducerLoad(self, e: ProducerLoad) -> PrimExpr:
        e = self.generic_mutate(e)
        if e.tensor.op is not self.narrow.op:
            return e
        if self.stride == 1:
            return ProducerLoad(self.relaid, e.indices)
        rest = simplify(substitute(e.indices[3], {self.ow: IntImm(0)}))
        phase = floormod(rest, self.stride)
        column = self.ow + floordiv(rest, self.stride)
        return ProducerLoad(self.relaid, (*e.indices[:3], simplify(phase), simplify(column)))

    def visit_Reduce(self, e: Reduce) -> PrimExpr:
        return self.generic_mutate(e)


def _conjuncts(e: PrimExpr) -> list[PrimExpr]:
    return _conjuncts(e.a) + _conjuncts(e.b) if isinstance(e, And) else [e]


def _read(narrow: Tensor, n, c, h, w) -> PrimExpr:
    """`narrow(n, c, h, w)`; for the padding of a 4-D tensor (`pad`'s rule: the data where
    every index is inside, else a constant), its rule with the row's conditions taken out
    of the lazy guard into a select, the row index clamped into the data: the copy's loads
    are then masked by the columns' conditions alone, constants once its vectors are
    unrolled (_unroll_phases), and a row of padding is a zeroing select, where a mask made
    from the row's and the columns' conditions together per vector had cost mobilenet_v2's
    depthwise 3x3/2 convolutions' copy a third of its instructions (144 channels at 56x56
    and 192 at 28x28 20-28 % faster so). Where the rows' conditions hold, the clamp changes
    nothing: the same value is read."""
    op = narrow.op
    body = op.body if isinstance(op, ComputeOp) and len(op.axis) == 4 else None
    if not (isinstance(body, Call) and body.op == "if_then_else"):
        return narrow(n, c, h, w)
    cond, value, other = body.args
    row, column = op.axis[2].var, op.axis[3].var
    if not isinstance(value, ProducerLoad) or len(value.tensor.shape) != 4:
        return narrow(n, c, h, w)
    if not isinstance(other, IntImm | FloatImm):
        return narrow(n, c, h, w)  # the padding value: a constant
    rows = [e for e in _conjuncts(cond) if _reads(e, row) and not _reads(e, column)]
    columns = [e for e in _conjuncts(cond) if not _reads(e, row)]
    if not rows or len(rows) + len(columns) != len(_conjuncts(cond)):
        return narrow(n, c, h, w)
    if any(_reads(i, row) for k, i in enumerate(value.indices) if k != 2):
        return narrow(n, c, h, w)
    height = int(value.tensor.shape[2])
    clamped = min_(max_(value.indices[2], IntImm(0)), IntImm(height - 1))
    load = ProducerLoad(value.tensor, (*value.indices[:2], clamped, value.indices[3]))
    inner = te.if_then_else(all_(*columns), load, other) if columns else load
    rule = select(all_(*rows), inner, other)
    mapping = dict(zip((iv.var for iv in op.axis), (n, c, h, w)))
    return substitute(rule, mapping)


def _relaid_input(narrow: Tensor, read: int, stride: int) -> Tensor:
    """`narrow` with its rows widened with zeros to `read` + 1 columns; with a stride, split
    into `stride` phases: `[n, c, h, p, j] = narrow[n, c, h, j * stride + p]`."""
    have = int(narrow.shape[3])
    zero = te.const(0, narrow.dtype)
    if stride == 1:
        return te.compute(
            (*narrow.shape[:3], read + 1),
            lambda n, c, h, w: te.if_then_else(w < have, narrow(n, c, h, w), zero),
            name=f"{narrow.op.name}.wide",
        )
    columns = read // stride + 1
    if (columns - 1) * stride + stride - 1 < have:  # every phase's row lies inside: no guard
        return te.compute(
            (*narrow.shape[:3], stride, columns),
            lambda n, c, h, p, j: _read(narrow, n, c, h, j * stride + p),
            name=f"{narrow.op.name}.phases",
        )
    return te.compute(
        (*narrow.shape[:3], stride, columns),
        lambda n, c, h, p, j: te.if_then_else(
            j * stride + p < have, _read(narrow, n, c, h, j * stride + p), zero
        ),
        name=f"{narrow.op.name}.phases",
    )


class _ReadSubsampled(Mutator):
    """Reads of `narrow` become reads of `sub` (the subsampled data) at `[..., oh, ow]`."""

    def __init__(self, narrow: Tensor, sub: Tensor, oh: Var, ow: Var):
        self.narrow, self.sub, self.oh, self.ow = narrow, sub, oh, ow

    def visit_ProducerLoad(self, e: ProducerLoad) -> PrimExpr:
        e = self.generic_mutate(e)
        if e.tensor.op is not self.narrow.op:
            return e
        return ProducerLoad(self.sub, (*e.indices[:2], self.oh, self.ow))

    def visit_Reduce(self, e: Reduce) -> PrimExpr:
        return self.generic_mutate(e)


def _single_point(red: ComputeOp, data: ProducerLoad) -> tuple[int, int, int, int] | None:
    """(row stride, first row, column stride, first column) when `data`'s row and column
    indices are `oh * sh + r0` and `ow * sw + c0` with constants (no kernel axis in them)."""
    _, _, oh, ow = (iv.var for iv in red.axis)
    single = {r.var: IntImm(0) for r in red.reduce_axis if int(r.dom.extent.value) == 1}
    found = []
    for index, var in ((data.indices[2], oh), (data.indices[3], ow)):
        index = simplify(substitute(index, single))
        first = simplify(substitute(index, {oh: IntImm(0), ow: IntImm(0)}))
        step = simplify(substitute(index, {var: IntImm(1)}) - substitute(index, {var: IntImm(0)}))
        other = oh if var is ow else ow
        if not (isinstance(first, IntImm) and isinstance(step, IntImm)) or _reads(index, other):
            return None
        if not structural_equal(simplify(index - (var * step.value + first.value)), IntImm(0)):
            return None
        found += [step.value, first.value]
    return tuple(found)


def _reads(e: PrimExpr, var: Var) -> bool:
    found = []
    post_order_visit(e, lambda n: found.append(n) if n is var else None)
    return bool(found)


def _subsampled_input(narrow: Tensor, rows: int, columns: int, point) -> Tensor:
    sh, r0, sw, c0 = point
    have_h, have_w = int(narrow.shape[2]), int(narrow.shape[3])
    zero = te.const(0, narrow.dtype)
    return te.compute(
        (*narrow.shape[:2], rows, columns),
        lambda n, c, i, j: te.if_then_else(
            (i * sh + r0 < have_h) & (j * sw + c0 < have_w),
            narrow(n, c, i * sh + r0, j * sw + c0),
            zero,
        ),
        name=f"{narrow.op.name}.sub",
    )


def widen(
    s: Schedule, reduction: Stage, data: ProducerLoad, columns: int, stride: int
) -> Stage | None:
    """Make `reduction` (untouched, a 4-D window reduction reading `data` at column
    `ow * stride + ...`) compute `columns` output columns, reading a copy of the data widened
    with zeros and split into the stride's phases: the stage of that copy (at the root; None
    when the data is already wide enough and unstrided, read as it is)."""
    red: ComputeOp = reduction.op
    body: Reduce = red.body
    ow = red.axis[3]
    last = {ow.var: IntImm(columns - 1)}
    last.update({r.var: IntImm(int(r.dom.extent.value) - 1) for r in red.reduce_axis})
    read = simplify(substitute(data.indices[3], last))
    if not isinstance(read, IntImm):
        return None
    narrow = data.tensor
    relaid_stage = None
    source = body.source
    point = _single_point(red, data) if stride > 1 else None
    if point is not None:
        sub = _subsampled_input(narrow, int(red.shape[2]), columns, point)
        source = _ReadSubsampled(narrow, sub, red.axis[2].var, ow.var).visit(source)
        relaid_stage = Stage(sub.op, s, is_output=False)
        s.stages.insert(s.stages.index(reduction), relaid_stage)
    elif read.value >= int(narrow.shape[3]) or stride > 1:
        relaid = _relaid_input(narrow, read.value, stride)
        source = _ReadRelaid(narrow, relaid, ow.var, stride).visit(source)
        relaid_stage = Stage(relaid.op, s, is_output=False)
        s.stages.insert(s.stages.index(reduction), relaid_stage)
    axes = tuple(
        IterVar(Var(iv.name), Range(IntImm(0), IntImm(columns)) if iv is ow else iv.dom, iv.kind)
        for iv in red.axis
    )
    raxes = tuple(IterVar(Var(iv.name), iv.dom, iv.kind) for iv in red.reduce_axis)
    mapping = {old.var: new.var for old, new in zip(red.axis + red.reduce_axis, axes + raxes)}
    wide_body = Reduce(
        body.combiner,
        substitute(source, mapping),
        raxes,
        substitute(body.condition, mapping),
        body.init,
    )
    # the epilogue reads the wide rows' first columns
    s.replace_op(reduction, ComputeOp(red.name, axes, wide_body, red.tag, red.attrs))
    return relaid_stage
