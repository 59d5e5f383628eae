"""CPU schedules for a model's 2-D convolutions and poolings (NCHW): a register-tiled direct
convolution.

A stage is recognized from its rule, not its name: a reduction of a 4-D output (n, m, oh, ow)
that reads one 4-D tensor through a window (its index moves along oh and ow: the data, padded
or not) and, besides, only tensors that do not move along oh and ow (the weights). Convolutions
(dense, 1x1, strided, dilated), depthwise and grouped ones, max and average pooling all match;
the rest is left to group_schedules.py.

The schedule (the direct convolution of TVM's x86 conv2d and onnxruntime's MLAS NCHW kernels):

- the output is cut into tiles of `channels` output channels x `rows` output rows x `width`
  output columns; for each tile the reduction fills a local buffer of accumulators, its
  reduction loops (input channel, kernel row, kernel column, in the rule's order) outside the
  tile, the tile's channels, rows and vectors unrolled and its columns vectorized: every
  access to the accumulators has a constant index, so LLVM keeps them in registers, and each
  step is one unaligned input load per vector, shared by the tile's channels, and one
  broadcast weight per channel, shared by the tile's rows and vectors;
- the tile is stored once through the element-wise epilogue (bias, activation), vectorized;
- the data is read from a copy made first, so that the inner loop reads it unguarded and
  contiguously: the padded input (the `pad` stage, inlined by the default schedule), its rows
  widened with zeros to whole vector registers when the output's are not (a 56-wide row is
  computed as 64 columns, the last 8 never stored: LLVM splits a vector of 56 lanes into
  pieces of 4, and a masked accumulator stays in memory), and with a stride, split into the
  stride's phases (`[c, h, phase, j] = x[c, h, j * stride + phase]`: a strided window reads
  a contiguous row of one phase instead of gathering); see conv_widen.py. The copy is made
  once for the whole kernel when output channels share their input (group_schedules.py then
  schedules it), else for the tile's channels inside the channel loop (depthwise
  convolutions and poolings read one channel);
- the phase copy reads the data at `j * stride + p`: LLVM code loads such a vector as one
  contiguous (masked) load and a shuffle (codegen/llvm/function.py `_strided_load`), so even
  a pooling's or a depthwise convolution's few steps gain from it. On a target whose masked
  loads are not safe (Hexagon) those are gathers, and strided windows of one channel and few
  steps (fewer than STRIDED_MIN_STEPS) are left to group_schedules.py there;
- tile sizes come from a small cost model (`_tile`): at most ACCUMULATOR_SHARE of the
  vector registers for accumulators, whole vector registers along the row, the most output elements
  per cycle, then the fewest loads per multiply-add;
- the loops outside the tile run in parallel when the kernel has enough work
  (group_schedules.PARALLEL_MIN_WORK).

Each output element is still reduced in the rule's order: the results are the default
schedule's, up to the contraction of a multiply and an add into a fused multiply-add.
"""

from __future__ import annotations

import dataclasses
import math

from loom.backend.cpu import group_schedules
from loom.backend.cpu.conv_widen import widen
from loom.backend.cpu.group_schedules import (
    STRIDED_MIN_STEPS,
    _stride,
    reduction_output,
)
from loom.ir.expr import IntImm, Var
from loom.ir.simplify import simplify
from loom.ir.structural import structural_equal
from loom.ir.visitor import post_order_visit, substitute
from loom.te.schedule import AttachType, Schedule, Stage
from loom.te.tensor import ComputeOp, ProducerLoad, Reduce

ACCUMULATOR_SHARE = 3 / 4
"""A tile's accumulators take at most this share of the vector registers (32 with AVX-512, 16
with AVX2 or SSE): the rest hold the input vectors and the broadcast weights."""

MAX_ROW_REGISTERS = 8
"""A tile is at most this many registers wide."""

MAX_TILE_ROWS = 8

HALF_WIDTH_CORES = frozenset({"znver4"})
"""Cores (`-mcpu`) whose vector units are half as wide as their registers: AMD Zen 4 runs an
AVX-512 operation as two 256-bit halves, so 7 vectors of 8 lanes compute a 56-wide row at
the cost of 3.5 registers (measured: 4% faster than the row widened to 4 full registers)."""

FMA_CHAINS = 8
"""Independent multiply-adds in flight that keep the FMA units busy (latency 4, two units)."""

MIN_PARALLEL_ITERATIONS = 8
"""Below this many channel tiles, a depthwise kernel's parallel loop takes in the row tiles."""

MIN_COLUMNS = 4
"""Outputs narrower than this, and vectors shorter, are left to group_schedules.py (it fuses
short rows into one vector)."""

MAX_UNROLLED_STEPS = 512
"""The kernel window's loops are unrolled while tile copies x window steps stay below this."""

VECTOR_REDUCTION_SPEEDUP = 8
"""How much less an output element's reduction step costs in a tile, for PARALLEL_MIN_WORK."""

DEFAULT_VECTOR_BYTES = 16


@dataclasses.dataclass(frozen=True)
class _Window:
    """A recognized convolution or pooling: `reduction` computes the window sums (or maxima);
    `output` is the root stage that stores them (its epilogue); `padded` is the inlined stage
    the window reads (padding), if any; `shared` output channels (a dense convolution's all,
    a grouped one's group) read the same input: a tile of channels shares its input loads."""

    reduction: Stage
    output: Stage
    padded: Stage | None
    shared: int  # output channels reading the same input channels (1: none share)


@dataclasses.dataclass(frozen=True)
class _Tile:
    channels: int
    rows: int
    width: int  # output columns per tile
    lanes: int  # columns per vector: a register's, or half a register's


def schedule(s: Schedule, target) -> None:
    """Schedule, in place, the stages of `s` this module recognizes; leave the others untouched
    for group_schedules.py."""
    register = _vector_bytes(target)
    for stage in list(s.stages):
        window = _recognize(s, stage, _deinterleaves(target))
        if window is None:
            continue
        lanes = max(1, register // stage.op.dtype.itemsize)
        budget = int((32 if register >= 64 else 16) * ACCUMULATOR_SHARE)
        halves = getattr(target, "cpu", None) in HALF_WIDTH_CORES
        tile = _tile(window, lanes, budget, halves)
        if tile is not None:
            _schedule_window(s, window, tile, lanes)


def _deinterleaves(target) -> bool:
    """Whether the target's code loads a short-strided vector contiguously (see above)."""
    return target is None or bool(getattr(target, "masked_loads_are_safe", True))


def _vector_bytes(target) -> int:
    width = getattr(target, "vector_bytes", None) if target is not None else None
    return int(width) if width else DEFAULT_VECTOR_BYTES


# -- recognizing a convolution --------------------------------------------------------------------


def _loads(e) -> list[ProducerLoad]:
    found: list[ProducerLoad] = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, ProducerLoad) else None)
    return found


def _recognize(s: Schedule, stage: Stage, deinterleaves: bool = True) -> _Window | None:
    op = stage.op
    if not isinstance(op, ComputeOp) or not isinstance(op.body, Reduce) or len(op.axis) != 4:
        return None
    if stage.relations or stage.loop_kinds or stage.pragmas:
        return None
    output = reduction_output(s, stage)
    if output is None:
        return None
    data = _window_load(op)
    if data is None:
        return None
    shared = _shared_channels(data, op.axis[1].var, int(op.shape[1]))
    strided = _stride(data, op.axis[3].var) > 1
    if strided and shared == 1 and not deinterleaves and _steps(op) < STRIDED_MIN_STEPS:
        return None  # a phase copy for a few steps of one channel: slower than gathers
    source = s[data.tensor.op] if isinstance(data.tensor.op, ComputeOp) else None
    padded = source if source is not None and source.attach_type == AttachType.INLINE else None
    if padded is not None and isinstance(padded.op.body, Reduce):
        return None
    return _Window(stage, output, padded, shared)


def _window_load(op: ComputeOp) -> ProducerLoad | None:
    """The one load of `op`'s rule that moves along both output rows and columns (a
    window of the data); None unless every other load stays put along them (weights)."""
    _, _, oh, ow = (iv.var for iv in op.axis)
    windows, others = [], []
    for load in _loads(op.body.source):
        if len(load.tensor.shape) == 4 and (_stride(load, ow) or 0) > 0:
            windows.append(load)
        else:
            others.append(load)
    if len(windows) != 1 or not (_stride(windows[0], oh) or 0) > 0:
        return None
    if any(_uses(index, ow) for index in windows[0].indices[:3]):
        return None  # the columns are not the data's last axis (conv_widen.py relies on it)
    if any(_stride(ld, oh) != 0 or _stride(ld, ow) != 0 for ld in others):
        return None
    return windows[0]


def _uses(e, var: Var) -> bool:
    found = []
    post_order_visit(e, lambda n: found.append(n) if n is var else None)
    return bool(found)


def _shared_channels(load: ProducerLoad, m: Var, channels: int) -> int:
    """How many consecutive output channels (from channel 0) read the same input channels:
    all of them for a dense convolution, a group's for a grouped one, 1 for a depthwise one
    or a pooling. The channel index is evaluated (it divides by the group's size:
    `m // per_group * per_group_in + rc`), at the last channel first: the same index there
    is a dense convolution's (the common case, two evaluations). Only the speed depends on
    it: a tile of channels reading different inputs is still computed right."""
    index = load.indices[1]

    def at(k: int):
        return simplify(substitute(index, {m: IntImm(k)}))

    first = at(0)
    if structural_equal(at(channels - 1), first):
        return channels
    for k in range(1, channels):
        if not structural_equal(at(k), first):
            return k
    return channels


# -- tile sizes -----------------------------------------------------------------------------------


def _divisors(n: int, most: int) -> list[int]:
    return [d for d in range(1, min(n, most) + 1) if n % d == 0]


def _widths(columns: int, lanes: int) -> list[int]:
    """The widths a tile may take: whole vectors that divide the (widened) row."""
    return [count * lanes for count in _divisors(columns // lanes, MAX_ROW_REGISTERS)]


def _tile(window: _Window, lanes: int, budget: int, halves: bool = False) -> _Tile | None:
    """The tile with the most useful output elements per cycle, then the fewest loads per
    multiply-add, at most `budget` accumulator registers, its vectors whole registers of
    `lanes` or half ones (a 7-wide row is one vector of 8 lanes, not 16), the row widened to
    whole vectors; None if the output is too narrow for vectors. With `halves` (a core that
    runs a full register's operation as two halves), a half register's operations cost half."""
    _, channels, rows, columns = (int(d) for d in window.reduction.op.shape)
    if columns < MIN_COLUMNS:
        return None
    best, best_score = None, None
    for vector in (lanes, lanes // 2):
        if vector < MIN_COLUMNS:
            continue
        wide = -(-columns // vector) * vector
        for width in _widths(wide, vector):
            registers = width // vector
            for tc in _divisors(window.shared, budget):
                for tr in _divisors(rows, MAX_TILE_ROWS):
                    accumulators = tc * tr * registers
                    if accumulators > budget:
                        continue
                    loads = tr * registers + tc  # input vectors, broadcast weights
                    if window.shared == 1:
                        loads = accumulators + tc
                    # cycles of a step: two multiply-adds and two loads a cycle, and an
                    # accumulator's multiply-adds wait for each other (FMA_CHAINS in flight)
                    cycles = max(accumulators, loads, FMA_CHAINS)
                    if halves and vector == lanes:
                        cycles *= 2
                    useful = tc * tr * width * columns / wide
                    # ties: the fewest wasted lanes (half registers cost half on some cores),
                    # then the widest rows (measured: the input streams along them)
                    score = (useful / cycles, -wide, -loads / accumulators, width, accumulators)
                    if best_score is None or score > best_score:
                        best, best_score = _Tile(tc, tr, width, vector), score
    return best


# -- the schedule ---------------------------------------------------------------------------------


def _schedule_window(s: Schedule, window: _Window, tile: _Tile, register_lanes: int) -> None:
    reduction, output = window.reduction, window.output
    if reduction is output:  # no epilogue: compute into local accumulators, then copy out
        cache = s.cache_write(reduction.op.output(0), "local")
        reduction = s[cache.op]
    padded = window.padded
    columns = int(reduction.op.shape[3])
    data = _window_load(reduction.op)
    stride = _stride(data, reduction.op.axis[3].var)
    if columns % tile.lanes or stride > 1:  # contiguous rows of whole registers: conv_widen.py
        wide = -(-columns // tile.width) * tile.width
        padded = widen(s, reduction, data, wide, stride) or padded
    red: ComputeOp = reduction.op
    out: ComputeOp = output.op
    n, m, oh, ow = out.axis
    _, channels, rows, columns = (int(d) for d in out.shape)
    mo, mi = output.split(m, factor=tile.channels)
    oho, ohi = output.split(oh, factor=tile.rows)
    owo, owi = output.split(ow, factor=tile.width)
    vectors, lane = (None, owi) if tile.lanes == tile.width else output.split(owi, tile.lanes)
    inner = [mi, ohi] + ([vectors] if vectors is not None else []) + [lane]
    if window.shared > 1:  # every channel tile of a row reuses the row's input in cache
        outer = [n, oho, owo]
        output.reorder(n, oho, owo, mo, *inner)
        attach = mo
    else:  # one channel's plane after another: its padding is computed just before
        outer = [n, mo, oho, owo]
        output.reorder(n, mo, oho, owo, *inner)
        attach = owo
    for loop in inner[:-1]:
        output.unroll(loop)
    output.vectorize(lane)
    planes = mo  # the loop inside which a channel's padding is computed (not shared)
    work = math.prod(int(d) for d in out.shape) * _steps(red) // VECTOR_REDUCTION_SPEEDUP
    if padded is not None:  # the copy: one operation per element (group_schedules' measure)
        work += math.prod(int(d) for d in padded.op.output(0).shape)
    if work >= group_schedules.PARALLEL_MIN_WORK:
        wide = window.shared > 1 or channels // tile.channels >= MIN_PARALLEL_ITERATIONS
        planes = output.fuse(*(outer[:2] if wide else outer[:3]))
        output.parallel(planes)
    reduction.compute_at(output, attach)
    _schedule_accumulators(reduction, tile)
    if padded is not None:
        if window.shared > 1:
            padded.compute_root()  # scheduled by group_schedules.py
        else:
            padded.compute_at(output, planes)
            _vectorize_rows(padded, register_lanes)


def _extents(axes) -> list[int]:
    return [int(iv.dom.extent.value) for iv in axes]


def _steps(op: ComputeOp) -> int:
    return math.prod(_extents(op.reduce_axis))


def _schedule_accumulators(reduction: Stage, tile: _Tile) -> None:
    """The reduction loops outside the tile; the tile's channels, rows and vectors unrolled,
    its columns vectorized; the kernel window's loops unrolled when short."""
    red: ComputeOp = reduction.op
    _, m, oh, ow = red.axis
    vectors, lane = (None, ow) if tile.lanes == tile.width else reduction.split(ow, tile.lanes)
    tile_loops = [m, oh] + ([vectors] if vectors is not None else [])
    reduction.reorder(*red.reduce_axis, *tile_loops, lane)
    for loop in tile_loops:
        reduction.unroll(loop)
    reduction.vectorize(lane)
    copies = tile.channels * tile.rows * -(-tile.width // tile.lanes)
    for axis in reversed(red.reduce_axis[1:] if len(red.reduce_axis) > 2 else red.reduce_axis):
        extent = int(axis.dom.extent.value)
        if copies * extent > MAX_UNROLLED_STEPS:
            break
        reduction.unroll(axis)
        copies *= extent


def _vectorize_rows(stage: Stage, lanes: int) -> None:
    """The padding of a tile's channels: its rows in vectors of `lanes`, a whole register's
    even where the tile uses half ones (a strided copy then deinterleaves two registers with
    one permute; measured a little faster), not a whole row (57 lanes: one vector LLVM
    splits into odd pieces)."""
    row = stage.op.axis[-1]
    if int(row.dom.extent.value) <= lanes:
        stage.vectorize(row)
        return
    _, lane = stage.split(row, factor=lanes)
    stage.vectorize(lane)
