"""The CPU's schedules for a model's row reductions: vector accumulators along the reduced row.

A *row reduction* reduces, for each output element, a run of elements contiguous in memory:
ReduceSum/Mean/Max/Min over the last axes, Softmax's maximum and sum over the last axis,
LayerNormalization's sum and sum of squares, a global pooling, a dot product with both operands
contiguous. The default schedule computes each output element as one dependent chain of scalar
steps; group_schedules.py vectorizes a reduction only along the output's contiguous axis. Here
the row is cut in vectors of `lanes` elements (ACCUMULATOR_REGISTERS registers: independent
additions that hide each other's latency), with `rfactor`:

    B.rf[i, l]  = sum(A[i, o * lanes + l] for o)       the accumulators, one vector per row
    B.rf_1[i, m] = sum(B.rf[i, o * register + m] for o)  ... combined in halves down to 2 lanes
    B[i]        = B.rf_n[i, 0] + B.rf_n[i, 1]

the accumulators computed inside the loop over the rows (in registers: a local buffer of one
vector), the rows in parallel when there is enough work. A row whose length the vector does not
divide masks its last vector only (the guard is `likely`: the vectorizer peels that iteration);
a short one (under PADDED_ROW_VECTORS vectors: GlobalAveragePool's 7x7 = 49) is reduced over its
length rounded up to whole vectors instead, the elements past its end the reducer's identity
(`_padded_row`): its last vector is then a masked load, not a masked update of accumulators
that LLVM keeps in memory, whose partial store and full reload stalled each row (1280 rows of
49: 26 -> 4.5 us; onnxruntime 17).

Reassociation: a float sum (or product) is computed in another order than the default
schedule's: element j of a row is added to accumulator lane j mod `lanes` in order, the lanes
are then added pairwise (a tree of log2(lanes) levels). Its error bound, (n / lanes +
log2(lanes)) * 2^-24 * sum(|x|) for float32, is smaller than the sequential order's
(n - 1) * 2^-24 * sum(|x|); onnxruntime's MLAS reassociates alike. Max, min and integer
reductions give the default schedule's result exactly (docs/schedules.md, "rfactor").

NaN: a float maximum of a row group whose NaN could not change the output (Softmax's and
LogSoftmax's: a NaN in the row makes the row's sum of exp(x - max), and through it every
output element, NaN whatever the maximum) is combined as `acc > x ? acc : x`, one `maxps`,
instead of the IR's NaN-propagating maximum (a compare, an unordered compare, an or and a blend
per vector: Softmax over 1024-wide rows was 5% slower). Without NaN the two agree but for the
sign of a zero maximum (-0 and +0 compare equal), which x - max shows only as the sign of a
zero difference: `_nan_free_maximum`.

A reduction this module takes is scheduled entirely (with the element-wise output it is
computed in, if any); group_schedules.py schedules every other stage.
"""

from __future__ import annotations

import math

from loom.backend.cpu import group_schedules
from loom.backend.cpu.group_schedules import (
    VECTOR_REDUCTION_SPEEDUP,
    _reads,
    _stride,
    _vector_bytes,
)
from loom.ir.expr import GT, Add, Call, Cast, Div, IntImm, Mul, PrimExpr, Select, Sub, Var
from loom.ir.op import floordiv, floormod, if_then_else, min_value
from loom.ir.structural import structural_equal
from loom.ir.visitor import substitute
from loom.te.operation import comm_reducer
from loom.te.schedule import AttachType, Schedule, Stage
from loom.te.tensor import ComputeOp, IterVar, ProducerLoad, Range, Reduce

ACCUMULATOR_REGISTERS = 4
"""A row's accumulators fill this many vector registers: four independent additions in flight
hide an addition's latency (4 cycles) at two loads per cycle; the vectorizer's widest vector
(VECTOR_REGISTERS) too, so that it needs no chunks."""

ROW_VECTOR_REGISTERS = 2
"""The element-wise stages of a row group (Softmax's exp and its output, LayerNormalization's
output) compute a row in vectors of this many registers. Two: independent chains that hide an
exp's latency, and exp's one check of its range for both (vecmath's `within`); Softmax over
1024-wide rows 3-5% faster than with one. With ACCUMULATOR_REGISTERS (four), LLVM unrolled
the row's short loops entirely, kept every loaded vector of the shared row from one loop to
the next and spilled them to the stack (5-10% slower than one)."""

MAX_SHARED_ROW_BYTES = 64 * 1024
"""The largest row of an intermediate computed once per row into a local (stack) buffer."""

PADDED_ROW_VECTORS = 4
"""A row shorter than this many accumulator vectors, which they do not divide, is padded with
the reducer's identity to whole vectors (_padded_row)."""

MIN_ROW_REGISTERS = 2
"""Rows shorter than this many vector registers stay with group_schedules.py (scalar chains):
a vector's setup and its combination cost more than they save."""


def schedule(s: Schedule, target) -> None:
    """Schedule, in place, the row reductions of `s` (see the module docstring); leave the
    other stages untouched for group_schedules.py."""
    vector_bytes = _vector_bytes(target)
    rows: dict[Stage, list[IterVar]] = {}
    for stage in s.stages:
        row = _row_axes(s, stage, vector_bytes)
        if row is not None:
            rows[stage] = row
    groups = [(out, group) for out in list(s.stages) if (group := _row_group(s, out, rows))]
    grouped = {member for _, group in groups for member in group}
    for out, group in groups:
        _schedule_row_group(s, out, group, rows, vector_bytes)
    for stage, row in rows.items():
        if stage not in grouped:
            length = _row_length(row)
            lanes = _accumulator_lanes(length, _register_lanes(stage.op, vector_bytes))
            if lanes < length and length % lanes and length < PADDED_ROW_VECTORS * lanes:
                row = _padded_row(s, stage, row, -(-length // lanes) * lanes)
            host = _host(s, stage)
            rows_loop = _parallel_rows(s, host, stage)
            _schedule_row_reduction(s, stage, row, host, rows_loop, vector_bytes)


# -- what a row reduction is ----------------------------------------------------------------------


def _untouched(stage: Stage) -> bool:
    return (
        not stage.relations
        and not stage.loop_kinds
        and not stage.pragmas
        and stage.tensorized is None
        and not stage.rfactored
    )


def _host(s: Schedule, stage: Stage) -> Stage | None:
    """The stage whose loops run over the reduction's rows: the reduction itself at the root,
    or the element-wise output the default schedule computes it in (ReduceMean's division);
    None for any other placement."""
    if stage.attach_type == AttachType.ROOT:
        return stage
    parent = stage.attach_stage
    if (
        stage.attach_type != AttachType.SCOPE
        or not parent.is_output
        or parent.attach_type != AttachType.ROOT
        or not _untouched(parent)
        or isinstance(parent.op.body, Reduce)
        or stage.attach_ivar is not parent.op.axis[-1]
        or [int(d) for d in parent.op.shape] != [int(d) for d in stage.op.shape]
        or any(st.attach_stage is parent and st is not stage for st in s.stages)
    ):
        return None
    return parent


def _row_axes(s: Schedule, stage: Stage, vector_bytes: int) -> list[IterVar] | None:
    """The reduction axes of `stage` that run along one contiguous row of every load that moves
    with them (the innermost ones); None if `stage` is not a row reduction to schedule here."""
    op = stage.op
    if (
        not isinstance(op, ComputeOp)
        or not isinstance(op.body, Reduce)
        or not _untouched(stage)
        or op.dtype.is_bool
        or _host(s, stage) is None
    ):
        return None
    loads = _reads(s, op.body).loads
    if not loads:
        return None
    axes = list(op.reduce_axis)
    last = axes[-1]
    steps = [_stride(ld, last.var) for ld in loads]
    if any(m not in (0, 1) for m in steps) or 1 not in steps:
        return None
    if _contiguous_along_output(op, loads):
        return None  # group_schedules.py's vector accumulators along the output, in order
    row = [last]
    for outer in reversed(axes[:-1]):  # with the axes just outside, while rows stay adjacent
        inner = row[0]
        extent = inner.dom.extent.value
        steps = [(_stride(ld, outer.var), _stride(ld, inner.var)) for ld in loads]
        if any(o is None or i is None or o != i * extent for o, i in steps):
            break
        row.insert(0, outer)
    if _row_length(row) < MIN_ROW_REGISTERS * _register_lanes(op, vector_bytes):
        return None
    return row


def _contiguous_along_output(op: ComputeOp, loads) -> bool:
    """True if the loads run contiguously along the output's innermost axis longer than 1."""
    long_axes = [iv for iv in op.axis if iv.dom.extent.value > 1]
    if not long_axes:
        return False
    steps = [_stride(ld, long_axes[-1].var) for ld in loads]
    return all(m in (0, 1) for m in steps) and 1 in steps


def _vector_steps(s: Schedule, stage: Stage) -> int:
    """The work of one element of a reduction in vector accumulators, in simple operations."""
    steps = math.prod(iv.dom.extent.value for iv in stage.op.reduce_axis)
    return -(-steps * _reads(s, stage.op.body).cost // VECTOR_REDUCTION_SPEEDUP)


def _row_length(row: list[IterVar]) -> int:
    return math.prod(iv.dom.extent.value for iv in row)


def _register_lanes(op: ComputeOp, vector_bytes: int) -> int:
    """How many accumulator elements fill one vector register."""
    return max(1, vector_bytes // max(1, op.dtype.itemsize))


def _accumulator_lanes(length: int, register: int) -> int:
    """The accumulators' vector: the longest power of two of at most ACCUMULATOR_REGISTERS
    registers that divides the row, if it fills a register; else that many registers (or the
    row, if shorter) with the last vector of each row masked."""
    widest = ACCUMULATOR_REGISTERS * register
    lanes = 1
    while lanes * 2 <= widest and length % (lanes * 2) == 0:
        lanes *= 2
    if lanes >= register:
        return lanes
    return min(widest, 1 << (length.bit_length() - 1))


# -- a row group: reductions computed row by row inside their element-wise output ------------------


def _readers(s: Schedule, stage: Stage) -> list[Stage]:
    """The stages reading `stage`, looking through inlined stages."""
    out: list[Stage] = []
    for reader in s.readers(stage):
        found = _readers(s, reader) if reader.attach_type == AttachType.INLINE else [reader]
        out += [r for r in found if r not in out]
    return out


def _reads_by_rows(s: Schedule, reader: Stage, member: Stage, row_vars: list) -> bool:
    """True if `reader` (looking through inlined stages) reads `member` only at the element of
    its own row: indexed by `row_vars`, the reader's first loop variables."""
    loads = _reads(s, reader.op.body).loads
    if loads is None:
        return False
    return all(list(ld.indices) == row_vars for ld in loads if ld.tensor.op is member.op)


def _row_group(s: Schedule, out: Stage, rows: dict[Stage, list[IterVar]]) -> list[Stage]:
    """The row reductions to compute inside the loop over the rows of element-wise output `out`
    (Softmax's maximum and sum, LayerNormalization's moments): read only by `out` and by
    each other, each element of a row of `out` reading its row's values. Empty if none."""
    op = out.op
    if (
        not out.is_output
        or not isinstance(op, ComputeOp)
        or isinstance(op.body, Reduce)
        or out.attach_type != AttachType.ROOT
        or not _untouched(out)
        or any(st.attach_stage is out for st in s.stages)
    ):
        return []
    members = [
        st
        for st in rows
        if st.attach_type == AttachType.ROOT and not st.is_output and s.reaches(st, out)
    ]
    if not members:
        return []
    depth = len(members[0].op.axis)
    if depth == 0 or any(
        [int(d) for d in m.op.shape] != [int(d) for d in op.shape[:depth]] for m in members
    ):
        return []
    for m in members:
        for reader in _readers(s, m):
            if reader is out:
                row_vars = [iv.var for iv in op.axis[:depth]]
            elif reader in members:
                row_vars = [iv.var for iv in reader.op.axis]
            else:
                return []
            if not _reads_by_rows(s, reader, m, row_vars):
                return []
    return members


def _shared_intermediates(s: Schedule, out: Stage, group: list[Stage]) -> list[Stage]:
    """Inlined stages of `out`'s shape with a library call (Softmax's exp) read by `out` and
    a reduction of the group: computed once per row into a local buffer (at most
    MAX_SHARED_ROW_BYTES), instead of once for each reader."""
    depth = len(group[0].op.axis)
    row_bytes = math.prod(int(d) for d in out.op.shape[depth:]) * out.op.dtype.itemsize
    found = []
    for st in s.stages:
        if (
            st.attach_type == AttachType.INLINE
            and [int(d) for d in st.op.shape] == [int(d) for d in out.op.shape]
            and row_bytes * st.op.dtype.itemsize // out.op.dtype.itemsize <= MAX_SHARED_ROW_BYTES
            and _reads(s, st.op.body).library_calls
            and len([r for r in s.readers(st) if r is out or r in group]) > 1
        ):
            found.append(st)
    return found


def _vectorize_row(stage: Stage, axes: list[IterVar], vector_bytes: int) -> None:
    """The stage's loops `axes` (a row) fused and computed in vectors."""
    loop = _fuse(stage, axes)
    if loop is None:
        return
    extent = _row_length(axes)
    register = _register_lanes(stage.op, vector_bytes)
    lanes = min(ROW_VECTOR_REGISTERS * register, 1 << (extent.bit_length() - 1))
    if lanes < extent:
        _, loop = stage.split(loop, factor=lanes)
    stage.vectorize(loop)


def _schedule_row_group(
    s: Schedule,
    out: Stage,
    group: list[Stage],
    rows: dict[Stage, list[IterVar]],
    vector_bytes: int,
) -> None:
    """One loop over the rows of `out` (parallel with enough work): per row, the group's
    reductions in vector accumulators, the shared intermediates, then the row of `out` in
    vectors; a row read again stays in the cache."""
    for m in group:
        if _nan_free_maximum(s, out, group, m):
            _combine_ordered(s, m)
    depth = len(group[0].op.axis)
    shared = _shared_intermediates(s, out, group)
    reads = _reads(s, out.op.body)
    row_elements = math.prod(int(d) for d in out.op.shape[depth:])
    per_element = reads.cost + sum(_vector_steps(s, m) for m in group) // max(1, row_elements)
    inner = list(out.op.axis[depth:])
    row_loop = _fuse(out, list(out.op.axis[:depth]))
    if group_schedules._worth_parallel(out.op, per_element):
        out.parallel(row_loop)
    for m in group:
        _schedule_row_reduction(s, m, rows[m], out, row_loop, vector_bytes)
    for st in shared:
        st.compute_at(out, row_loop)
        st.set_scope("local")
        _vectorize_row(st, list(st.op.axis[depth:]), vector_bytes)
    _vectorize_row(out, inner, vector_bytes)


# -- a maximum whose NaN does not matter ----------------------------------------------------------


def _ordered_max(acc, x):
    return Select(GT(acc, x), acc, x)


ORDERED_MAX = comm_reducer(_ordered_max, min_value, "max")
"""`acc > x ? acc : x`: x86's `maxps` (a NaN is dropped unless it comes last)."""

NAN_KEEPING_CALLS = frozenset({"exp", "exp2", "log", "log2", "log10", "tanh", "erf", "sigmoid"})
"""Functions whose result is NaN for a NaN argument (not pow: pow(NaN, 0) = 1)."""


def _nan_reaches(e: PrimExpr, target: PrimExpr) -> bool:
    """True if `e` is NaN whenever `target` (an expression of e) is: the path from e to it
    passes only float arithmetic, float conversions and NAN_KEEPING_CALLS."""
    if not e.dtype.is_float:
        return False
    if structural_equal(e, target):
        return True
    if isinstance(e, (Add, Sub, Mul, Div)):
        return _nan_reaches(e.a, target) or _nan_reaches(e.b, target)
    if isinstance(e, Cast):
        return _nan_reaches(e.value, target)
    if isinstance(e, Call) and e.op in NAN_KEEPING_CALLS:
        return any(_nan_reaches(a, target) for a in e.args)
    return False


def _inlined(s: Schedule, e: PrimExpr) -> PrimExpr | None:
    """`e` with the rules of inlined stages substituted (None past their size limit)."""
    try:
        return group_schedules._InlineReads(s).visit(e)
    except group_schedules._TooBig:
        return None


def _row_load(member: Stage, indices) -> ProducerLoad:
    """A load of `member`'s result at `indices`."""
    return ProducerLoad(member.op.output(0), tuple(indices))


def _nan_free_maximum(s: Schedule, out: Stage, group: list[Stage], m: Stage) -> bool:
    """True if `m` is a float maximum over a row whose NaN cannot reach the output: another
    member of the group sums, over the same row, an expression that is NaN where m's source
    is (Softmax's sum of exp(x - max)), and every element of `out` is NaN where that sum is."""
    body = m.op.body
    if not (isinstance(body, Reduce) and body.combiner.name == "max" and m.op.dtype.is_float):
        return False
    if body.combiner is ORDERED_MAX:
        return False
    out_body = _inlined(s, out.op.body)
    depth = len(m.op.axis)
    extents = [iv.dom.extent.value for iv in body.axis]
    for total in group:
        tb = total.op.body
        if total is m or tb.combiner.name != "sum":
            continue
        if [iv.dom.extent.value for iv in tb.axis] != extents:
            continue  # not the same row
        rows = {a.var: b.var for a, b in zip(m.op.axis, total.op.axis)}
        rows.update({a.var: b.var for a, b in zip(body.axis, tb.axis)})
        if not structural_equal(substitute(body.condition, rows), tb.condition):
            continue  # the sum may skip an element the maximum takes
        element = substitute(body.source, rows)  # m's source where `total` reads its row
        summed = _inlined(s, tb.source)
        read = _row_load(total, [iv.var for iv in out.op.axis[:depth]])
        if None in (out_body, summed):
            return False
        if _nan_reaches(summed, element) and _nan_reaches(out_body, read):
            return True
    return False


def _combine_ordered(s: Schedule, m: Stage) -> None:
    """`m` combined with ORDERED_MAX: its rule replaced, its readers made to read it."""
    old: ComputeOp = m.op
    body: Reduce = old.body
    s.replace_op(
        m, old.with_body(Reduce(ORDERED_MAX, body.source, body.axis, body.condition, body.init))
    )


# -- scheduling -----------------------------------------------------------------------------------


def _parallel_rows(s: Schedule, host: Stage, stage: Stage) -> IterVar | None:
    """The host's loops fused into one loop over the rows, parallel with enough work."""
    rows = _fuse(host, list(host.op.axis))
    per_element = _vector_steps(s, stage)
    if rows is not None and group_schedules._worth_parallel(host.op, per_element):
        host.parallel(rows)
    return rows


def _schedule_row_reduction(
    s: Schedule,
    stage: Stage,
    row: list[IterVar],
    host: Stage,
    rows: IterVar | None,
    vector_bytes: int,
) -> None:
    """`stage` reduced in vector accumulators, computed per iteration of loop `rows` of `host`
    (itself, or a stage it is computed in)."""
    op: ComputeOp = stage.op
    tensor = stage.origin_op.output(0)  # the name the schedule knows the stage by
    register = _register_lanes(op, vector_bytes)
    length = _row_length(row)
    lanes = _accumulator_lanes(length, register)
    if host is not stage:
        stage.compute_at(host, rows)
        stage.set_scope("local")
    # the loop of the reduction's own that runs over one row
    at = rows if host is stage else stage.op.axis[-1]

    # the accumulators: one vector per row, its elements spread over their lanes
    fused = _fuse(stage, row)
    if lanes < length:
        _, fused = stage.split(fused, factor=lanes)
    width = lanes
    _partials(s, tensor, fused, at)
    # their combination: halves of the vector added down to two lanes
    while width > 2:
        half = register if width > register else width // 2
        _, inner = stage.split(stage.op.reduce_axis[0], factor=half)
        partial = _partials(s, tensor, inner, at)
        s[partial].unroll(s[partial].op.reduce_axis[0])
        width = half
    stage.unroll(stage.op.reduce_axis[0])


def _padded_row(s: Schedule, stage: Stage, row: list[IterVar], padded: int) -> list[IterVar]:
    """Give `stage` (a reduction over `row`, its innermost reduction axes) the rule that
    reduces one axis of `padded` elements instead, the row's elements then the reducer's
    identity: `if_then_else(k < length, x[..., k // w, k % w], identity)`. Its last vector
    is then a masked load added to a whole accumulator vector, not a masked update of the
    accumulators (which LLVM keeps in memory: a short row's partial store then full reload
    stalls its store forwarding; GlobalAveragePool over 7x7 lost 2x to it). Returns the new
    row axis."""
    red: ComputeOp = stage.op
    body: Reduce = red.body
    length = _row_length(row)
    k = IterVar(Var("k"), Range(IntImm(0), IntImm(padded)), row[-1].kind)
    at: dict = {}
    step = 1
    for iv in reversed(row):  # innermost first: k % extent, then k // extent % next, ...
        extent = int(iv.dom.extent.value)
        index = floordiv(k.var, step) if step > 1 else k.var
        at[iv.var] = index if iv is row[0] else floormod(index, extent)
        step *= extent
    others = [iv for iv in red.reduce_axis if all(iv is not r for r in row)]
    fresh = {iv.var: Var(iv.var.name) for iv in others}
    kept = tuple(IterVar(fresh[iv.var], iv.dom, iv.kind) for iv in others)
    at.update(fresh)
    identity = body.combiner.identity(red.dtype)
    source = if_then_else(k.var < length, substitute(body.source, at), identity)
    reduce = Reduce(body.combiner, source, (*kept, k), substitute(body.condition, at), body.init)
    s.replace_op(stage, red.with_body(reduce))
    return [stage.op.reduce_axis[-1]]


def _fuse(stage: Stage, axes: list[IterVar]) -> IterVar | None:
    if not axes:
        return None
    return stage.fuse(*axes) if len(axes) > 1 else axes[0]


def _partials(s: Schedule, tensor, axis: IterVar, at: IterVar | None):
    """rfactor `tensor` over `axis`: partial results along the last axis of a stage computed
    per row (at loop `at` of the reduction, in a local buffer) with its lanes innermost and
    vectorized."""
    stage = s[tensor]
    partial = s.rfactor(tensor, axis, factor_axis=len(stage.op.axis))
    ps = s[partial]
    lanes = ps.op.axis[-1]
    ps.reorder(*[v for v in ps.leaf_iter_vars if v is not lanes], lanes)
    ps.vectorize(lanes)
    if at is not None:
        ps.compute_at(stage, at)
        ps.set_scope("local")
    return partial


__all__ = ["ACCUMULATOR_REGISTERS", "MIN_ROW_REGISTERS", "schedule"]
