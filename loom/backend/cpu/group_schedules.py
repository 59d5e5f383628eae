"""The CPU's schedules for the kernels of a model (`Backend.schedule_group` of the `llvm` target).

loom/graph/lower.py hands over each kernel with its default schedule: every intermediate that
is not a reduction inlined, and a reduction read only by an element-wise output of its shape
(conv + bias + ReLU, Gemm + bias, ReduceMean's division) computed inside that output's innermost
loop. Each stage left at the root (the outputs, and reductions with several readers, such as
Softmax's maximum and sum) is then scheduled on its own:

- its innermost axis longer than 1, with the one before it when rows are shorter than a vector
  register and every access stays contiguous across rows (a 7x7 plane), is the *vector
  block*, computed in vectors of a power-of-two length (LLVM scalarizes masked accesses of any
  other length) of at most `VECTOR_REGISTERS` registers, the lanes past its end masked off;
- the loops outside the block, with the block's outer loop when they have few iterations, are
  fused into one loop that runs in parallel when the stage has enough work
  (`PARALLEL_MIN_WORK`): on a small kernel, waking the threads costs more than they save;
- a reduction gets vector accumulators: its reduction loops outside the vector loop, so that
  each lane accumulates its own element in the same order as before (a float sum is never
  reassociated), and a tile of rows of them (`ACCUMULATOR_REGISTERS`) in one pass, sharing the
  loads that do not move along the rows (a convolution's weights, a matrix product's row of
  B). A reduction at the root is first computed into a local buffer (`cache_write`), like one
  in an epilogue, so that its accumulators can stay in registers. Vectors dividing the block
  are preferred: a masked accumulator stays in memory. All this only when the reduction's
  loads run contiguously along the vector, or do not move, or, with many steps, are strided
  by a little (`STRIDED_MIN_STEPS`); otherwise the reduction keeps the default loops, the
  ones outside the innermost parallel.

Element-wise stages are always vectorized (the vectorizer runs a loop it cannot vectorize
serially); what they read across the lanes through a broadcast or a transpose is left to LLVM
(gathers). A fused block keeps a contiguous access contiguous:
a vector covers whole rows, and no more than the vectorizer's widest vector, so that after
lowering `row * cols + col` simplifies back to one index.

Every primitive used only reorders the iterations of independent elements: the results are
those of the default schedule, bit for bit.
"""

from __future__ import annotations

import dataclasses
import math

from loom.ir.expr import Call, IntImm, PrimExpr, Var
from loom.ir.simplify import simplify
from loom.ir.visitor import Mutator, post_order_visit, substitute
from loom.te.schedule import AttachType, Schedule, Stage
from loom.te.tensor import ComputeOp, IterVar, ProducerLoad, Reduce

VECTOR_REGISTERS = 4
"""A vector loop covers at most this many registers: the vectorizer's own limit
(loom/transform/vectorize_loop.py), which would cut a longer loop into chunks itself."""

PARALLEL_MIN_WORK = 1 << 20
"""A stage runs in parallel when its work reaches this many simple operations (per output
element: one, LIBRARY_CALL_COST per library call, the reduction's steps, a quarter of them
with vector accumulators): 150 to 400 us on one thread. Measured on the 2-vCPU VM loom is
benchmarked on, a second thread lost time on every kernel under about 400 us (the pool's
thread sleeps between kernels; waking it took 50 to 100 us) and gained 20% at 500 us."""

VECTOR_REDUCTION_SPEEDUP = 4
"""How much less a reduction step costs with vector accumulators, for PARALLEL_MIN_WORK."""

ACCUMULATOR_REGISTERS = 8
"""A vector reduction keeps up to this many vector registers of accumulators (a tile of
rows): independent additions that hide the latency of each (AVX-512 and NEON have 32
registers, AVX2 16)."""

MIN_PARALLEL_ITERATIONS = 8
"""Below this many iterations outside the vector block, the block's outer loop joins the
parallel loop, so that the threads get balanced shares."""

STRIDED_MIN_STEPS = 32
"""A reduction whose loads are strided along the vector (a convolution with strides) gets
vector accumulators, its loads gathered, from this many steps per element (measured: 2x for
3x3 and 7x7 stride-2 convolutions of 3 to 64 channels; slower for pooling and depthwise
convolutions, of 4 to 9 steps)."""

MAX_GATHER_STRIDE = 4
"""The largest stride (in elements) of a gathered load in a vector reduction: beyond, each
lane reads its own cache line (a transposed matrix: slower than the scalar loop)."""

LIBRARY_FUNCTIONS = frozenset(
    {"exp", "exp2", "log", "log2", "log10", "sin", "cos", "pow", "tanh", "erf", "sigmoid"}
)
"""Functions LLVM computes lane by lane with a call into libm, for the work estimate."""

LIBRARY_CALL_COST = 16
"""The work of one call of LIBRARY_FUNCTIONS, in simple operations (an erff is about 16 times
a vector addition's time per element)."""

DEFAULT_VECTOR_BYTES = 16
"""A register's bytes when the target does not say (SSE, NEON)."""

MAX_INLINED_NODES = 20_000
"""The access analysis looks through inlined stages up to this many expression nodes; past
it, the stage's accesses count as unknown (no vector reduction, no rows sharing a vector)."""


def schedule_group(s: Schedule, outputs: list, pattern, target) -> None:
    """Schedule, in place, one kernel of a model for CPU `target`: each root stage parallel
    over its outer axes when it has enough work, vectorized over its innermost ones (see the
    module docstring). The schedule follows the stages the default schedule left, whatever the
    group's fusion `pattern`: a Softmax (opaque) has reductions at the root like a ReduceMax."""
    vector_bytes = _vector_bytes(target)
    for stage in list(s.stages):
        if _untouched_root(stage):
            _schedule_root(s, stage, vector_bytes)


def _vector_bytes(target) -> int:
    width = getattr(target, "vector_bytes", None) if target is not None else None
    return int(width) if width else DEFAULT_VECTOR_BYTES


def _untouched_root(stage: Stage) -> bool:
    """A computed stage at the root whose loops nothing has changed yet."""
    return (
        isinstance(stage.op, ComputeOp)
        and stage.attach_type == AttachType.ROOT
        and bool(stage.op.axis)
        and not stage.relations
        and not stage.loop_kinds
        and not stage.pragmas
        and stage.tensorized is None
    )


def reduction_output(s: Schedule, stage: Stage) -> Stage | None:
    """The root stage that stores reduction `stage`'s values, as the default schedule left
    them: `stage` itself at the root, or the element-wise output of its shape it is computed in
    (loom/graph/lower.py, `_into_its_epilogue`); None when a schedule changed either."""
    if stage.attach_type == AttachType.ROOT:
        return stage if _untouched_root(stage) else None
    if stage.attach_type != AttachType.SCOPE:
        return None
    output = stage.attach_stage
    if (
        not _untouched_root(output)
        or stage.attach_ivar is not output.op.axis[-1]
        or isinstance(output.op.body, Reduce)
        or [int(d) for d in output.op.shape] != [int(d) for d in stage.op.shape]
        or len([st for st in s.stages if st.attach_stage is output]) != 1
    ):
        return None
    return output


# -- what a stage reads ---------------------------------------------------------------------------


class _TooBig(Exception):
    pass


class _InlineReads(Mutator):
    """Substitute the rules of inlined stages into an expression, as lowering will, so that
    the loads left are those the loop nest makes; gives up past MAX_INLINED_NODES."""

    def __init__(self, s: Schedule):
        self.s = s
        self.nodes = 0

    def visit(self, node):
        self.nodes += 1
        if self.nodes > MAX_INLINED_NODES:
            raise _TooBig
        return super().visit(node)

    def visit_ProducerLoad(self, e: ProducerLoad) -> PrimExpr:
        e = self.generic_mutate(e)
        op = e.tensor.op
        if not isinstance(op, ComputeOp) or self.s[op].attach_type != AttachType.INLINE:
            return e
        return self.visit(substitute(op.body, {iv.var: i for iv, i in zip(op.axis, e.indices)}))

    def visit_Reduce(self, e: Reduce) -> PrimExpr:
        return self.generic_mutate(e)


@dataclasses.dataclass(frozen=True)
class _Reads:
    """What a stage's rule does, looking through inlined stages: its tensor reads (None when
    too big to say) and its library calls."""

    loads: list[ProducerLoad] | None
    library_calls: int  # calls of LIBRARY_FUNCTIONS

    @property
    def cost(self) -> int:
        """The work of one evaluation, in simple operations."""
        return 1 + LIBRARY_CALL_COST * self.library_calls


def _reads(s: Schedule, body: PrimExpr) -> _Reads:
    try:
        inlined = _InlineReads(s).visit(body)
    except _TooBig:
        return _Reads(None, 0)
    loads: list[ProducerLoad] = []
    calls: list[Call] = []

    def record(n) -> None:
        if isinstance(n, ProducerLoad):
            loads.append(n)
        elif isinstance(n, Call) and n.op in LIBRARY_FUNCTIONS:
            calls.append(n)

    post_order_visit(inlined, record)
    return _Reads(loads, len(calls))


def _flat_index(load: ProducerLoad) -> PrimExpr:
    flat: PrimExpr = IntImm(0)
    stride = 1
    for index, extent in zip(reversed(load.indices), reversed(load.tensor.shape)):
        flat = flat + index * stride
        stride *= int(extent)
    return flat


def _stride(load: ProducerLoad, var: Var) -> int | None:
    """How many elements the load moves when `var` grows by one; None when that depends on
    where it is (an index divided, or read from data)."""
    flat = _flat_index(load)
    delta = simplify(substitute(flat, {var: var + 1}) - flat)
    return delta.value if isinstance(delta, IntImm) else None


def _steps_along(loads: list[ProducerLoad] | None, var: Var) -> list[int | None] | None:
    """How many elements each load moves when `var` grows by one (None: it depends)."""
    return None if loads is None else [_stride(ld, var) for ld in loads]


def _rows_adjacent(loads: list[ProducerLoad] | None, row: Var, col: Var, cols: int) -> bool:
    """True if each load moving along the block moves by one element per column and `cols`
    per row: consecutive rows are consecutive in memory, so one vector can cover several."""
    if loads is None:
        return False
    for ld in loads:
        steps = (_stride(ld, row), _stride(ld, col))
        if steps not in ((0, 0), (cols, 1)):
            return False
    return True


# -- where the vectors go -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Block:
    """The vector block: the stage's axes from `start` on (`extent` elements), computed in
    vectors of `lanes` elements, a power of two (whole rows, when a vector covers several)."""

    start: int
    extent: int
    lanes: int
    registers: int  # vector registers one vector of `lanes` fills


def _extents(op: ComputeOp) -> list[int]:
    return [int(d) for d in op.shape]


def _vector_block(
    op: ComputeOp,
    axes: list[IterVar],
    loads: list[ProducerLoad] | None,
    vector_bytes: int,
    accumulate: bool = False,
) -> _Block | None:
    """The vector block of a stage of `op`'s shape whose loops are `axes`, reading `loads`;
    None if no axis is longer than 1. For vector accumulators (`accumulate`), vectors that
    divide the block are preferred: a vector with a masked tail keeps its accumulators in
    memory (LLVM promotes no masked access to registers)."""
    extents = _extents(op)
    long_axes = [k for k, e in enumerate(extents) if e > 1]
    if not long_axes:
        return None
    itemsize = min([op.dtype.itemsize] + [ld.dtype.itemsize for ld in loads or ()])
    register = max(1, vector_bytes // max(1, itemsize))
    widest = VECTOR_REGISTERS * register
    col = long_axes[-1]
    cols = extents[col]
    start, extent = col, cols
    if cols < register and len(long_axes) > 1:
        row = long_axes[-2]
        rows = extents[row] * cols
        whole = rows <= widest  # one vector (padded to a power of two) covers the block
        if (whole or _power_of_two(cols)) and _rows_adjacent(
            loads, axes[row].var, axes[col].var, cols
        ):
            start, extent = row, rows
    lanes = _dividing_lanes(extent, register, widest) if accumulate else None
    if lanes is not None and start != col and lanes % cols and lanes < extent:
        lanes = None  # a vector must cover whole rows
    if lanes is None:
        whole = start != col and extent <= widest
        lanes = _next_power_of_two(extent) if whole else _lanes(extent, register, widest)
    if start != col:
        lanes = max(lanes, cols)
    return _Block(start, extent, lanes, -(-lanes // register))


def _dividing_lanes(extent: int, register: int, widest: int) -> int | None:
    """The longest power-of-two vector, at most `widest`, that divides `extent`; None if it
    is shorter than half a register."""
    lanes = 1
    while lanes * 2 <= widest and extent % (lanes * 2) == 0:
        lanes *= 2
    return lanes if lanes >= max(2, register // 2) else None


def _power_of_two(n: int) -> bool:
    return n & (n - 1) == 0


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _lanes(extent: int, register: int, widest: int) -> int:
    """The vector length for `extent` elements: a power of two (LLVM scalarizes a masked
    access of any other length), at most `widest`, covering the elements in the fewest
    registers, each vector counting as one more (its loop, a reduction's pass)."""
    best, best_cost = 1, None
    lanes = 1
    while lanes <= min(widest, _next_power_of_two(extent)):
        cost = -(-extent // lanes) * (-(-lanes // register) + 1)
        if best_cost is None or cost <= best_cost:
            best, best_cost = lanes, cost
        lanes *= 2
    return best


# -- scheduling -----------------------------------------------------------------------------------


def _attached(s: Schedule, stage: Stage) -> list[Stage]:
    return [
        st for st in s.stages if st.attach_type == AttachType.SCOPE and st.attach_stage is stage
    ]


def _default_epilogue(st: Stage, parent: Stage) -> bool:
    """The default schedule's epilogue: a reduction of the output's shape at its last axis."""
    return (
        isinstance(st.op, ComputeOp)
        and isinstance(st.op.body, Reduce)
        and st.attach_ivar is parent.op.axis[-1]
        and _extents(st.op) == _extents(parent.op)
        and not st.relations
        and not st.loop_kinds
    )


def _schedule_root(s: Schedule, stage: Stage, vector_bytes: int) -> None:
    inner = _attached(s, stage)
    if len(inner) > 1 or not all(_default_epilogue(st, stage) for st in inner):
        return  # not the default schedule's shape: leave it as it is
    if isinstance(stage.op.body, Reduce):
        _schedule_reduction(s, stage, vector_bytes)
    elif inner:
        _schedule_epilogue(s, stage, inner[0], vector_bytes)
    else:
        _schedule_elementwise(s, stage, vector_bytes)


def _steps(op: ComputeOp) -> int:
    return math.prod(int(iv.dom.extent.value) for iv in op.reduce_axis)


def _worth_parallel(op: ComputeOp, per_element: int) -> bool:
    """True if a stage of `per_element` simple operations per output element has enough
    work for threads (PARALLEL_MIN_WORK)."""
    return math.prod(_extents(op)) * per_element >= PARALLEL_MIN_WORK


def _split_block(stage: Stage, block: _Block, pad: bool = True) -> tuple[IterVar | None, IterVar]:
    """Fuse the block's axes and cut them into vectors: (the loop over vectors or None, the
    vector loop). With `pad`, a block shorter than a vector is one vector of `lanes`, the
    lanes past it masked off; without, it is one vector of its own length."""
    axes = list(stage.op.axis[block.start :])
    fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    if block.extent == block.lanes or (block.extent < block.lanes and not pad):
        return None, fused
    return stage.split(fused, factor=block.lanes)


def _vectorize_padded(stage: Stage, axes: list[IterVar], extent: int) -> None:
    """Vectorize `axes` (the stage's innermost loops, `extent` iterations in all) as one loop
    of a power-of-two length, the lanes past `extent` masked off."""
    loop = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    lanes = _next_power_of_two(extent)
    if lanes != extent:
        _, loop = stage.split(loop, factor=lanes)
    stage.vectorize(loop)


def _parallel_outer(
    stage: Stage, outer: list[IterVar], iterations: int, block_outer: IterVar | None
) -> None:
    """Fuse the `outer` loops (`iterations` in all) into one parallel loop, with the loop over
    the block's vectors when they have too few iterations to share among the threads (and
    that loop comes right after them)."""
    loops = list(outer)
    if block_outer is not None and (iterations < MIN_PARALLEL_ITERATIONS or not loops):
        leaves = stage.leaf_iter_vars
        if not loops or leaves.index(block_outer) == leaves.index(loops[-1]) + 1:
            loops.append(block_outer)
    if loops:
        stage.parallel(stage.fuse(*loops) if len(loops) > 1 else loops[0])


def _parallel_rows(stage: Stage, parallel: bool) -> IterVar:
    """Without vectors: the loops outside the innermost one fused into a parallel loop (all of
    them when those have too few iterations), the innermost left as it is, so that its index
    needs no division; the innermost loop."""
    axes = list(stage.op.axis)
    if not parallel:
        return axes[-1]
    outer = axes[:-1]
    if math.prod(_extents(stage.op)[:-1]) < MIN_PARALLEL_ITERATIONS:
        outer = axes
    if outer:
        stage.parallel(stage.fuse(*outer) if len(outer) > 1 else outer[0])
    return stage.leaf_iter_vars[-1]


def _schedule_elementwise(s: Schedule, stage: Stage, vector_bytes: int) -> None:
    op: ComputeOp = stage.op
    reads = _reads(s, op.body)
    block = _vector_block(op, list(op.axis), reads.loads, vector_bytes)
    if block is None:
        return
    block_outer, vector = _split_block(stage, block)
    if _worth_parallel(op, reads.cost):
        outer = list(op.axis[: block.start])
        _parallel_outer(stage, outer, math.prod(_extents(op)[: block.start]), block_outer)
    stage.vectorize(vector)


def _vector_reduction(
    op: ComputeOp,
    axes: list[IterVar],
    loads: list[ProducerLoad] | None,
    block: _Block | None,
    steps: int,
) -> bool:
    """True if a reduction of `steps` steps per element reading `loads` over loops `axes`
    gains from vector accumulators along `block`: its loads along the block's innermost axis
    are contiguous or invariant, or, with enough steps, strided by a little (a gather at each
    step, which beats a scalar loop waiting on its accumulator: a strided convolution)."""
    if block is None or block.lanes < 2:
        return False
    col = max(k for k, e in enumerate(_extents(op)) if e > 1)
    moves = _steps_along(loads, axes[col].var)
    if moves is None or None in moves:
        return False
    if all(m in (0, 1) for m in moves):
        return True
    return steps >= STRIDED_MIN_STEPS and all(abs(m) <= MAX_GATHER_STRIDE for m in moves)


def _schedule_reduction(s: Schedule, stage: Stage, vector_bytes: int) -> None:
    """A reduction at the root: with vector accumulators, computed into a local buffer inside
    its own copy loop (as a reduction in an epilogue: they stay in registers); else parallel
    over its outer axes."""
    op: ComputeOp = stage.op
    axes = list(op.axis)
    reads = _reads(s, op.body)
    block = _vector_block(op, axes, reads.loads, vector_bytes, accumulate=True)
    if not _vector_reduction(op, axes, reads.loads, block, _steps(op)) or (
        block.start == 0 and block.extent <= block.lanes
    ):
        _parallel_rows(stage, _worth_parallel(op, _steps(op) * reads.cost))
        return
    cache = s[s.cache_write(op.output(0), "local")]
    cache.compute_at(stage, stage.op.axis[-1])
    _schedule_epilogue(s, stage, cache, vector_bytes)


def _row_tile(extents: list[int], block: _Block) -> int:
    """How many vectors along the axis just outside the block one pass of a vector reduction
    computes, each in its own accumulators (ACCUMULATOR_REGISTERS in all): rows of a
    convolution sharing its weights, rows of a matrix product sharing a vector of B."""
    if block.start == 0 or extents[block.start - 1] < 2:
        return 1
    most = max(1, ACCUMULATOR_REGISTERS // block.registers)
    return _balanced(extents[block.start - 1], most)


def _balanced(n: int, most: int) -> int:
    """The size of the fewest equal parts of at most `most` that cover n."""
    return -(-n // -(-n // most))


def _schedule_epilogue(s: Schedule, stage: Stage, reduction: Stage, vector_bytes: int) -> None:
    """An element-wise output with its reduction inside (conv + bias + ReLU): per iteration of
    the loop outside the output's row tile and vector loop, the reduction fills a tile of
    vector accumulators, its reduction loops outside them; or, if its loads do not run along
    the vector, it stays one element at a time, in parallel."""
    op: ComputeOp = stage.op
    red: ComputeOp = reduction.op
    # the reduction's reads in the output's loop variables (they have the same shape)
    as_output = {r.var: o.var for r, o in zip(red.axis, op.axis)}
    red_reads, out_reads = _reads(s, red.body), _reads(s, op.body)
    loads = None
    if red_reads.loads is not None and out_reads.loads is not None:
        loads = [substitute(ld, as_output) for ld in red_reads.loads] + out_reads.loads
    axes = list(op.axis)
    extents = _extents(op)
    block = _vector_block(op, axes, loads, vector_bytes, accumulate=True)
    vectorized = _vector_reduction(op, axes, loads, block, _steps(red))
    steps = _steps(red) * red_reads.cost
    if vectorized:
        steps = -(-steps // VECTOR_REDUCTION_SPEEDUP)
    parallel = _worth_parallel(op, steps + out_reads.cost)
    if not vectorized or (block.start == 0 and block.extent <= block.lanes):
        # no loop outside one vector to fill it in, or the reduction would gather
        reduction.compute_at(stage, _parallel_rows(stage, parallel))
        return
    tile = _row_tile(extents, block)
    # the output's vector needs no mask: one vector of the block's length, if it fits
    block_outer, vector = _split_block(stage, block, pad=False)
    outer = axes[: block.start]
    iterations = math.prod(extents[: block.start])
    rows = None
    if tile > 1:
        row_outer, rows = stage.split(outer[-1], factor=tile)
        outer[-1] = row_outer
        iterations = iterations // extents[block.start - 1] * -(-extents[block.start - 1] // tile)
        if block_outer is not None:
            stage.reorder(row_outer, block_outer, rows, vector)
    if parallel:
        _parallel_outer(stage, outer, iterations, block_outer)
    leaves = stage.leaf_iter_vars
    reduction.compute_at(stage, leaves[leaves.index(rows or vector) - 1])
    red_block = list(red.axis[block.start :])
    red_rows = [red.axis[block.start - 1]] if tile > 1 else []
    reduction.reorder(*red.reduce_axis, *red_rows, *red_block)
    width = min(block.extent, block.lanes)
    if red_rows:
        reduction.unroll(red_rows[0])
        # each row's accumulators in a whole vector of their own, not overlapping the next
        reduction.storage_align(red_rows[0], _next_power_of_two(width), 0)
    # the reduction's vector, masked at the image's borders, is padded to a power of two
    _vectorize_padded(reduction, red_block, width)
    stage.vectorize(vector)


__all__ = ["PARALLEL_MIN_WORK", "schedule_group"]
