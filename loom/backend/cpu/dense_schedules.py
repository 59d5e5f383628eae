"""CPU schedules for a model's matrix products (MatMul, batched MatMul, Gemm): register tiles.

A stage is recognized from its rule, not its name: a sum over one reduction axis of an output
of rank 2 or more whose loads all either stay put along the output's last axis j and move
along the reduction (A[..., i, k]) or run along j contiguously without moving along the
output's row i (B[..., k, j]), at least one of each; the element-wise epilogue it may sit in
(Gemm's alpha and bias, a fused Add) reads contiguously along j or not at all. The stage is
the output (MatMul alone) or, as the default schedule leaves it, a reduction computed inside
its epilogue's innermost loop. Products whose rows are shorter than a vector register, and
everything else, are left to group_schedules.py.

The schedule is the `matmul` strategy's micro-kernel (dense_tiles.py) without packing B (a
constant B is a kernel argument like any other; pack_weights.py makes a constant transposed
B a plain one at compile time):

- the output is cut into tiles of `rows` rows x `vectors` registers of columns; per tile, the
  reduction fills a local buffer of accumulators, the reduction loop outside the tile and
  unrolled `k_unroll` times, the tile's rows and vectors unrolled and its lanes vectorized,
  so that every access to the accumulators has a constant index and LLVM keeps them in
  registers: per step, one vector load of B per register, shared by the rows, and one
  broadcast of A per row, shared by the vectors;
- the tile is stored once through the epilogue, vectorized;
- the batch axes, the column tiles and the row tiles (in that order: a column panel of B stays
  in cache while the row tiles reuse it) are fused into one loop, parallel when the kernel
  has enough work (group_schedules.PARALLEL_MIN_WORK);
- a single row (a batch-1 dense layer) too small for threads is a matrix-vector product: no
  row shares B's loads, and B is streamed from memory, so the row's accumulators (a local
  row) are updated a few registers at a time by many rows of B, the loop over the row inside
  the reduction's loop: B is read row after row, contiguously, many rows in flight
  (`_schedule_one_row`).

Each output element is still summed in the rule's order (k = 0, 1, ...): the results are the
default schedule's, up to the contraction of a multiply and an add into a fused multiply-add.
"""

from __future__ import annotations

import dataclasses
import math

from loom.backend.cpu import group_schedules
from loom.backend.cpu.dense_tiles import ALIASING_BYTES, DenseTile, VectorUnit, choose_tile
from loom.backend.cpu.group_schedules import _reads, _stride, reduction_output
from loom.te.schedule import Schedule, Stage
from loom.te.tensor import ComputeOp, Reduce

VECTOR_SPEEDUP = 8
"""How much less a step of a product costs in a register tile than in the default loops, for
the work that decides whether the kernel runs in parallel."""

ROW_VECTORS = 2
"""A one-row product (a matrix-vector product, run on one thread) accumulates this many
registers of its row at a time..."""

ROW_K_UNROLL = 16
"""...over this many rows of B, then the next registers of the row: the loop over the row is
inside the reduction's, so B is read row after row, contiguously, 16 streams in flight that
keep many of B's cache lines on their way from memory. Measured with bench/gemv.py on Zen 4
(1 thread, B flushed to DRAM as in a model's run / B in the caches, ms): mobilenet_v2's 1 x 1280
x 1000 classifier 0.31-0.39 / 0.070, against 0.37-0.41 / 0.077 for 4 registers x 8 rows,
0.42-0.44 for 4 x 16, 0.48-0.50 for 32 rows; onnxruntime 0.44-0.50 / 0.073-0.086."""

ALIASED_ROW_K_UNROLL = 8
"""The rows of B per step when B's rows are a multiple of ALIASING_BYTES long: then every row
maps to the same sets of the L1 cache, and 16 rows (32 lines, 12 ways) evict each other
(1 x 1024 x 1024 from the caches: 0.076 ms with 16 rows, 0.064 with 8)."""

ROW_MAX_BYTES = 64 << 10
"""The longest row whose accumulators one-row products keep in memory (the stack)."""


@dataclasses.dataclass(frozen=True)
class _Product:
    reduction: Stage  # the sum
    output: Stage  # the stage at the root: the sum itself, or its element-wise epilogue


def schedule(s: Schedule, target) -> None:
    """Schedule, in place, the matrix products of `s`; leave the other stages untouched for
    group_schedules.py."""
    unit = VectorUnit.of(target)
    for stage in list(s.stages):
        product = _recognize(s, stage, unit)
        if product is not None:
            _schedule_product(s, product, unit)


# -- recognizing a matrix product -----------------------------------------------------------------


def _recognize(s: Schedule, stage: Stage, unit: VectorUnit) -> _Product | None:
    op = stage.op
    if (
        not isinstance(op, ComputeOp)
        or not isinstance(op.body, Reduce)
        or op.body.combiner.name != "sum"
        or len(op.body.axis) != 1
        or len(op.axis) < 2
        or stage.relations
        or stage.loop_kinds
        or stage.pragmas
    ):
        return None
    output = reduction_output(s, stage)
    if output is None:
        return None
    if int(op.shape[-1]) < unit.lanes(op.dtype):
        return None  # rows shorter than a register: group_schedules' fused blocks
    if not _product_loads(s, op) or not _epilogue_contiguous(s, output):
        return None
    return _Product(stage, output)


def _product_loads(s: Schedule, op: ComputeOp) -> bool:
    """True if `op`'s loads are a matrix product's: A[..., i, k] (still along j) and
    B[..., k, j] (contiguous along j, still along i), at least one of each moving along k."""
    loads = _reads(s, op.body).loads
    if not loads:
        return False
    i, j = op.axis[-2].var, op.axis[-1].var
    k = op.body.axis[0].var
    a_side = b_side = False
    for load in loads:
        along_j, along_i, along_k = _stride(load, j), _stride(load, i), _stride(load, k)
        if along_j is None or along_i is None or along_k is None:
            return False
        if along_j == 1 and along_i == 0:
            b_side = b_side or along_k != 0
        elif along_j == 0:
            a_side = a_side or along_k != 0
        else:
            return False
    return a_side and b_side


def _epilogue_contiguous(s: Schedule, output: Stage) -> bool:
    """True if the epilogue's loads run along the output's last axis contiguously or stay."""
    loads = _reads(s, output.op.body).loads
    if loads is None:
        return False
    j = output.op.axis[-1].var
    return all(_stride(load, j) in (0, 1) for load in loads)


# -- the schedule ---------------------------------------------------------------------------------


def _schedule_product(s: Schedule, product: _Product, unit: VectorUnit) -> None:
    reduction, output = product.reduction, product.output
    if reduction is output:  # no epilogue: compute into local accumulators, then copy out
        reduction = s[s.cache_write(reduction.op.output(0), "local").op]
    out: ComputeOp = output.op
    shape = [int(d) for d in out.shape]
    m, n = shape[-2:]
    steps = int(reduction.op.body.axis[0].dom.extent.value)
    work = math.prod(shape) * steps // VECTOR_SPEEDUP
    parallel = work >= group_schedules.PARALLEL_MIN_WORK
    if math.prod(shape[:-1]) == 1 and not parallel and n * out.dtype.itemsize <= ROW_MAX_BYTES:
        _schedule_one_row(reduction, output, unit)
        return
    tile = choose_tile(m, n, steps, out.dtype, unit)
    *batch, i, j = out.axis
    io, ii = output.split(i, factor=tile.rows)
    jo, ji = output.split(j, factor=tile.cols)
    output.reorder(*batch, jo, io, ii, ji)
    tiles = output.fuse(*batch, jo, io)
    output.unroll(ii)
    _vectorize_columns(output, ji, tile)
    if parallel:
        output.parallel(tiles)
    reduction.compute_at(output, tiles)
    _schedule_accumulators(reduction, tile)


def _schedule_one_row(reduction: Stage, output: Stage, unit: VectorUnit) -> None:
    """One row of products: the row's accumulators (the output, or a local row under the
    epilogue) updated ROW_VECTORS registers at a time by ROW_K_UNROLL rows of B, the loop
    over the row inside the reduction's loop."""
    red: ComputeOp = reduction.op
    lanes = unit.lanes(red.dtype)
    *outer, j = red.axis
    (k,) = red.body.axis
    steps = int(k.dom.extent.value)
    row_bytes = int(red.shape[-1]) * red.dtype.itemsize  # of B, when B is a plain [k, j]
    most = ALIASED_ROW_K_UNROLL if row_bytes % ALIASING_BYTES == 0 else ROW_K_UNROLL
    k_unroll = next(u for u in (most, 8, 4, 2, 1) if u <= most and steps % u == 0)
    jo, ji = reduction.split(j, factor=ROW_VECTORS * lanes)
    jv, jl = reduction.split(ji, factor=lanes)
    ko, ki = reduction.split(k, factor=k_unroll)
    reduction.reorder(*outer, ko, jo, ki, jv, jl)
    reduction.unroll(ki)
    reduction.unroll(jv)
    reduction.vectorize(jl)
    reduction.compute_at(output, output.op.axis[-2])  # the whole row, then the epilogue
    _, lane = output.split(output.op.axis[-1], factor=lanes)
    output.vectorize(lane)


def _vectorize_columns(stage: Stage, axis, tile: DenseTile) -> None:
    """Vectorize `axis` (a tile's columns) a register at a time, the registers unrolled."""
    if tile.vectors > 1:
        outer, axis = stage.split(axis, factor=tile.lanes)
        stage.unroll(outer)
    stage.vectorize(axis)


def _schedule_accumulators(reduction: Stage, tile: DenseTile) -> None:
    """The reduction loop outside the tile, unrolled by k_unroll; the tile's rows and vectors
    unrolled, its lanes vectorized; each row's accumulators on whole registers."""
    red: ComputeOp = reduction.op
    ri, rj = red.axis[-2:]
    (rk,) = red.body.axis
    ko, ki = reduction.split(rk, factor=tile.k_unroll)
    if tile.vectors > 1:
        rjv, rjl = reduction.split(rj, factor=tile.lanes)
        reduction.reorder(ko, ki, ri, rjv, rjl)
        reduction.unroll(rjv)
    else:
        rjl = rj
        reduction.reorder(ko, ki, ri, rjl)
    reduction.unroll(ki)
    reduction.unroll(ri)
    if tile.rows > 1:
        reduction.storage_align(ri, tile.lanes, 0)
    reduction.vectorize(rjl)


__all__ = ["schedule"]
