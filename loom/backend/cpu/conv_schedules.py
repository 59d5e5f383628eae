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
- when output channels share their input, every channel tile of a row of tiles runs on it
  while it is in L1, except where a short reduction writes an output larger than L2 from
  data that fits in it (`_channel_tiles_outside`): then each channel tile runs over all the
  rows, storing a few streams the hardware prefetcher follows;
- the data is read from a copy made first, so that the inner loop reads it unguarded and
  contiguously: the padded input (the `pad` stage, inlined by the default schedule), its rows
  widened with zeros to whole vector registers when the output's are not (a 56-wide row is
  computed as 64 columns, the last 8 never stored: LLVM splits a vector of 56 lanes into
  pieces of 4, and a masked accumulator stays in memory), and with a stride, split into the
  stride's phases (`[c, h, phase, j] = x[c, h, j * stride + phase]`: a strided window reads
  a contiguous row of one phase instead of gathering); see conv_widen.py. The copy is made
  once for the whole kernel when output channels share their input (group_schedules.py then
  schedules it), else for the tile's channels inside the channel loop (depthwise
  convolutions and poolings read one channel), on the stack when small (COPY_STACK_BYTES),
  a phase copy's phases and row vectors unrolled (and its rows, when few: `_unroll_phases`)
  so that its masks are constants;
- the phase copy reads the data at `j * stride + p`: LLVM code loads such a vector as one
  contiguous (masked) load and a shuffle (codegen/llvm/function.py `_strided_load`), so even
  a pooling's or a depthwise convolution's few steps gain from it. On a target whose masked
  loads are not safe (Hexagon) those are gathers, and strided windows of one channel and few
  steps (fewer than STRIDED_MIN_STEPS) are left to group_schedules.py there;
- rows narrower than whole vectors (28 = 3.5 vectors of 8) waste the rest of their last
  vector; a convolution of shared input is then computed on a flattened grid instead, its
  rows laid end to end (conv_flat.py), when the cost model (`_flat_tile`) finds that
  FLAT_MIN_GAIN better: resnet18's 3x3 convolutions at 28x28 (stride 1, and 2 on AVX-512:
  STRIDED_FLAT_CHANNEL_GAIN) and 14x14,
  mobilenet_v2's pointwise ones at 14x14, and at 56x56 resnet18's 3x3 convolution of 64
  channels, whose rows of 7 vectors allow no tile of rows beyond 8 accumulators, too few for
  its long reduction (LONG_REDUCTION_STEPS);
- outputs 14 or 7 wide waste a vector's lanes either way (16 computed for 14, 8 for 7); a
  dense convolution then puts its output channels in the lanes instead (conv_channels.py,
  onnxruntime's NCHWc kernels): a tile of one or two registers of channels x pixels of a
  row, each step a contiguous load of the packed weights per register and a broadcast of
  the input per pixel, when the cost model (`_channel_tile`) finds that CHANNEL_MIN_GAIN
  better: resnet18's 3x3 convolutions at 14x14 and 7x7 (stride 1 and 2; 9-15 % faster),
  its 1x1/2 downsample to 7x7 and mobilenet_v2's pointwise ones at 7x7 (3-19 %), its data
  read from a copy with the rows outside the channels when a row fits a cache line
  (ROWS_FIRST_MAX_BYTES: consecutive steps then read consecutive rows); on AVX2, a 1x1
  convolution of a long reduction whose rows no tile of one row covers with enough
  accumulators takes one register of channels x the whole row instead of the cost model's
  tile (ROW_STREAM_REGISTERS); a tile of rows of 4, 8 or 16 pixels stores each channel's
  pixels as one vector (PIXEL_VECTOR_WIDTHS); on a full-width AVX-512 core a channel tile of
  all the output channels wins ties against tiles of 2 channels, which read the data again for
  every 2 (ONE_BLOCK_CHANNEL_GAIN: mobilenet_v2's projections to 32 channels at 28x28);
- on AVX2, a 1x1 convolution of stride 1 without padding at 7x7 to 14x14 (FLAT_PIXELS_MAX:
  mobilenet_v2's at 7x7 and 14x14, nudenet's and PP-OCRv4's at 10x10) lays its output's rows
  end to end instead, as MLAS computes a pointwise convolution: a tile of two registers of
  channels x 4-6 consecutive pixels (8-12 accumulators; 10-12 for a long reduction, which no
  row of 7 or 14 admits), the last tile computing past the last pixel rather than a bound
  check, its reduction in blocks of about 96 steps outside the tiles (STEP_BLOCK): a block's
  weights stay in L1 cache for every tile, each output still sums its steps in order; on a
  full-width AVX-512 core, the same tile of two registers x 7 pixels with its step blocks
  replaces the row tile of a long reduction at 7x7 and 14x14, where no row admits more
  accumulators (WIDE_FLAT_PIXELS_MAX_ACCUMULATORS: mobilenet_v2's projections);
- tile sizes come from a small cost model (`_tile`): at most ACCUMULATOR_SHARE of the
  vector registers for accumulators, and no more than the registers for the accumulators, the
  loaded vectors a step holds for all of them and one more (`_Budget`: LLVM otherwise keeps
  accumulators on the stack), whole vector registers along the row, the most output elements
  per cycle, then the fewest loads per multiply-add;
- a model's constant weights (of filters up to pack_conv_weights.MAX_FILTER_BYTES) come in
  blocks of the tile's channels, [O / C, I, KH, KW, C] (pack_conv_weights.py asks
  `channel_tile` for C): a tile's weights are one contiguous stream, which the prefetcher
  follows when they come from memory (each of a tile's channels was a stream of its own:
  mobilenet_v2 lost 1.3 ms of 9 to them so). The split of the channels by C makes the
  rule's `m // C` and `m % C` the tile's loop variables; weights in blocks make the tile
  take the block's channels (the same tile on the machine the pass asked for, no division
  on another); where the hardware prefetcher still does not follow them (a few bytes a
  step, or a block read in one row tile), the CPU's pass cpu_prefetch_weights
  (loom/transform/) prefetches them in software;
- the loops outside the tile run in parallel when the kernel has enough work
  (CONV_PARALLEL_MIN_WORK).

Each output element is still reduced in the rule's order: the results are the default
schedule's, up to the contraction of a multiply and an add into a fused multiply-add; and a
float max pooling's up to NaN: its maximum is `acc > x ? acc : x` (one `maxps`, as
onnxruntime's MLAS pooling computes it) instead of the IR's NaN-propagating max (a compare, an
unordered compare and a blend per element: measured 1.5 times slower for resnet18's MaxPool).
ONNX does not say how MaxPool treats NaN; a window whose last element is not NaN has no NaN
maximum here.
"""

from __future__ import annotations

import dataclasses
import math

from loom.backend.cpu import group_schedules
from loom.backend.cpu.conv_channels import channels_last, rows_first
from loom.backend.cpu.conv_flat import Grid, flatten, grid
from loom.backend.cpu.conv_widen import widen
from loom.backend.cpu.dense_tiles import HALF_WIDTH_CORES
from loom.backend.cpu.group_schedules import (
    STRIDED_MIN_STEPS,
    _stride,
    reduction_output,
)
from loom.ir.expr import GT, FloorMod, IntImm, Select, Var
from loom.ir.op import min_value
from loom.ir.simplify import simplify
from loom.ir.structural import structural_equal
from loom.ir.visitor import post_order_visit, substitute
from loom.te.operation import comm_reducer
from loom.te.schedule import AttachType, Schedule, Stage
from loom.te.tensor import ComputeOp, PlaceholderOp, ProducerLoad, Reduce, Tensor
from loom.transform.cpu_prefetch_weights import LINE_BYTES

ACCUMULATOR_SHARE = 3 / 4
"""A tile's accumulators take at most this share of the vector registers (32 with AVX-512, 16
with AVX2 or SSE): the rest hold the input vectors and the broadcast weights."""

SCRATCH_REGISTERS = 1
"""Registers a tile's step needs besides its accumulators and the operands it holds across the
step (`_Budget.fits`): the broadcast weight (or input) of the moment."""

MAX_ROW_REGISTERS = 8
"""A tile is at most this many registers wide."""

MAX_TILE_ROWS = 8

FMA_CHAINS = 8
"""Independent multiply-adds in flight that keep the FMA units busy (latency 4, two units)."""

LONG_REDUCTION_STEPS = 256
"""A tile of rows or of the flat grid whose reduction takes at least this many steps needs
FMA_CHAINS + 1 accumulators to keep the FMA units busy (`_chains`). Measured on Zen 3, one
thread, resnet18's 3x3 convolution of 64 channels at 56x56 (576 steps): its row tile of
exactly FMA_CHAINS accumulators (2 channels x 4 rows; LLVM keeps the input vectors its rows
share in the kernel's window and spills some of them) ran at 81% of the FMA peak, 2.88 ms,
the flat grid's tile of 12 at 85%, 2.75 ms (onnxruntime 2.74). Shorter reductions (the fixed
costs of each tile count more: the flat grid's extra pass over its buffer) and channel tiles
(conv_channels.py: a broadcast per pixel, nothing shared between rows) keep FMA_CHAINS:
measured, the slack there chose flat grids 4-28% slower (mobilenet_v2's first convolution,
resnet18's 3x3 convolutions at 14x14, 1x1 convolutions at 14x14 and 112x112), and tiles 2-5%
faster only for magika's 5x1 convolution and mobilenet_v2's 1x1 960 -> 160 at 7x7."""

MIN_PARALLEL_ITERATIONS = 8
"""Below this many channel tiles, a depthwise kernel's parallel loop, or one with its channels
in the lanes (conv_channels.py), takes in the row tiles."""

CONV_PARALLEL_MIN_WORK = 1 << 18
"""A convolution's loops outside its tile run in parallel when its work (output elements x
reduction steps, over VECTOR_REDUCTION_SPEEDUP for vector accumulators) reaches this, 40-100 us
on one thread: a quarter of group_schedules.PARALLEL_MIN_WORK, which was set when a second
thread slept between kernels and took 50-100 us to wake (the pool's threads now poll between
launches, which then cost ~1 us). A kernel left on one thread also reads back from the other
core's cache what the parallel one before it wrote there: mobilenet_v2's depthwise
convolutions ran slower at two threads than at one. Measured on the Intel Xeon of issue 16 at
two threads, paired: mobilenet_v2 1.09x faster, ppocrv4_det 1.09x, nudenet 1.03x, ppocrv4_rec
1.02x, resnet18 1.01x, silero_vad 1.01x, ppocr_mobile_v2_cls 0.97x (its small convolutions:
0.87x at 1 << 16). At one thread, where a parallel loop is one task, the 30 kernels of
mobilenet_v2 this makes parallel cost 0.3 % more summed hot (4.616 ms against 4.600: a task's
loop bounds are known only at run time) and the model 0.996-1.022x paired. A channel tile of
few blocks shared out in bands of rows (`_schedule_channels`) keeps
group_schedules.PARALLEL_MIN_WORK: fused with the rows, its blocks' loop is not one
cpu_prefetch_weights can follow."""

MIN_COLUMNS = 4
"""Outputs narrower than this, and vectors shorter, are left to group_schedules.py (it fuses
short rows into one vector)."""

MAX_UNROLLED_PHASE_VECTORS = 16
"""A phase copy's row (its phases x vectors) is unrolled up to this many vectors: every vector's
columns are then constants (see _unroll_phases)."""

MAX_UNROLLED_PHASE_PLANE = 64
"""A phase copy's whole plane (rows x phases x vectors) is unrolled up to this many vectors: its
rows are then constants too."""

COPY_STACK_BYTES = 64 * 1024
"""A channel's copy of its data (one plane, padded, widened, split into phases) up to this size
(and an eighth of the target's stack limit) lives on the stack: a heap allocation for each
channel cost mobilenet_v2's depthwise 3x3/2 convolution of 576 channels at 14x14 an eighth of
its time."""

MAX_UNROLLED_STEPS = 320
"""The kernel window's loops are unrolled while tile copies x window steps stay within this.
A longer straight run of multiply-adds lets LLVM's scheduler load ahead, and on 16 registers it
spills: resnet18's 7x7/2 stem (8 accumulators x 49 window steps = 392 unrolled) spilled 64
vectors to the stack and took 6.6 ms, with its window's rows as a loop 4.1 ms (measured on
Zen 3, one thread; the model 2 % faster). The 5x5 depthwise convolutions of the PP-OCR models
(12 x 25 = 300) ran as fast either way (within 2 %)."""

VECTOR_REDUCTION_SPEEDUP = 8
"""How much less an output element's reduction step costs in a tile, for PARALLEL_MIN_WORK."""

DEFAULT_VECTOR_BYTES = 16

FLAT_MIN_GAIN = 1.02
"""A convolution is computed on its flattened grid (conv_flat.py) when that computes this
much more useful output per cycle than rows of whole vectors."""

FLAT_SPLIT_BAND = 1.01
"""Flat-grid tiles whose useful output per cycle is within this factor of the best are ranked
by the L1 accesses of a multiply-add when the vectors are cache lines (AVX-512) and the window
moves: a load at a lane offset crosses a line, two accesses (the broadcast weights one). The
cost model's cycles, which count a load as one, do not see it. Measured on an Intel Xeon
(AVX-512), one thread, paired against onnxruntime, 3x3 convolutions at 56x56: 64 -> 64
channels 0.88x with 4 channels x 5 vectors (20 accumulators, 0.7 accesses a multiply-add),
0.95x with 8 x 3 (0.58; 15.60 useful lanes a cycle against 15.68), 8 x 2 0.94x, 16 x 1 0.84x;
32 -> 64, 128 -> 64, 64 -> 128 and 64 -> 64 at 40x40 alike (8 x 3 6-10 % faster)."""

FLAT_DATA_IN_CACHE = 512 * 1024
"""A flat grid's data copy up to this size is swept once per channel tile (it stays in the
L2 cache, 1 MB on Zen 4: resnet18's 3x3 convolutions at 28x28 and 14x14, 445 and 261 KB, are
1-2 % faster so); a larger one once per grid tile (its 3x3/2 convolution from 56x56 reads
890 KB of phases: 6 % faster so)."""

STREAMED_OUTPUT_BYTES = 2 * 1024 * 1024
"""A dense convolution's output above this size (the L2 cache of the Intel Xeon of issue 16;
Zen 4's is 1 MB) goes out to memory as it is written. When its reduction is short
(SHORT_REDUCTION_STEPS) and its data is re-read from the L2 cache (STREAMED_REREAD_BYTES),
its channel tiles run outside its row tiles (`_channel_tiles_outside`)."""

SHORT_REDUCTION_STEPS = 32
"""A reduction of at most this many steps (a 1x1 convolution from 16 or 32 channels) does
too few multiply-adds a tile to hide the misses of the tile's stores to a streamed output."""

STREAMED_REREAD_BYTES = 1024 * 1024
"""The most data a convolution streaming its output reads again for each channel tile (from
the L2 cache, next to the output's lines passing through)."""


CHANNEL_MIN_GAIN = 1.05
"""A convolution is computed with its output channels in the vector lanes (conv_channels.py)
when that computes this much more useful output per cycle than the tiles of columns."""

ONE_BLOCK_CHANNEL_GAIN = 1.0
ONE_BLOCK_MAX_TILE_CHANNELS = 2
"""On a core of 32 vector registers that runs them whole (full-width AVX-512), a channel tile
that computes all the output channels at once (one block) needs only this much more output
per cycle (ties go to it) against tiles of columns of at most ONE_BLOCK_MAX_TILE_CHANNELS
channels: those read all the data again for every two output channels, the channel tile reads
it once. Measured on the Intel Xeon (one thread), mobilenet_v2's projections to 32 channels at
28x28, a flat grid of 2 channels x 7 vectors against 32 channels x 2 rows x 4 pixels (scored
alike): 96 -> 32 0.036 -> 0.029 ms, 144 -> 32 0.053 -> 0.043, 192 -> 32 0.079 -> 0.068; the
whole model 0.7-1.1 % faster (at two threads the same: they share out bands of rows,
`_schedule_channels`). Against tiles of 4 channels the channel tile lost (64 -> 32 at 56x56
0.079 -> 0.092 ms, 128 -> 32 at 40x40 0.080 -> 0.093, 64 -> 32 at 80x80 0.17 -> 0.30)."""

ROWS_FIRST_MAX_BYTES = 64
"""A tile of channels in the lanes reads its data from a copy with the rows outside the
channels (conv_channels.rows_first) when a row (padded) takes at most this many bytes, a cache
line: a step then reads the bytes after the last step's instead of another plane's line.
Measured on Zen 3, one thread: mobilenet_v2's 1x1 convolutions at 7x7 1.5-1.7 times faster
(960 -> 160: 0.34 -> 0.24 ms; 320 -> 1280: 1.26 -> 0.64 ms), resnet18's 3x3 convolution of
512 channels at 7x7 1.14 times. Wider rows read a new line per step either way (56 columns:
a stride-2 1x1 convolution from 56x56 was 1.2 times slower with the copy)."""

ROWS_FIRST_CHANNEL_GAIN = 1.0
"""CHANNEL_MIN_GAIN for a convolution whose channel tile would read its data rows first, on a
target of 16 vector registers (AVX2): as good a score suffices. The flat grid's tile still
reads a plane per step, and stores the grid to a buffer that its epilogue copies out.
Measured on Zen 3, one thread: mobilenet_v2's 1x1 convolutions at 14x14 576 -> 96 1.4 times
faster as a channel tile, 96 -> 576 1.15 times (those now lay their pixels end to end:
FLAT_PIXELS_MAX). AVX-512 keeps CHANNEL_MIN_GAIN (measured on Zen 4, before rows_first)."""

STRIDED_FLAT_CHANNEL_GAIN = 1.0
"""CHANNEL_MIN_GAIN against the flat grid of a strided convolution (conv_flat.py: the window
reads the data's phase planes), on a target of 16 vector registers (AVX2): as good a score
suffices. Measured on Zen 3, one thread, resnet18's 3x3/2 convolution 64 -> 128 from 56x56
(the grid's 4 channels x 3 vectors scored 7.7, the channel tile's 16 channels x 4 pixels 8.0):
the channel tile 1.2 times faster (1.94-2.10 ms against 2.41-2.48; onnxruntime 1.89-2.00), in
the whole model's sequence 1.56 ms against 1.90 (bench/model_gap.py; resnet18 whole: within
its noise, paired 0.997 and 1.001), a 3x3/2 convolution 16 -> 32 from 56x56 1.3 times.
"""

SPLIT_LOADS_CHANNEL_GAIN = 1.0
"""CHANNEL_MIN_GAIN where the other tiles' input loads cross cache lines (`_splits_lines`:
AVX-512 on a full-width core, a window that moves): as good a score suffices. A channel tile
loads whole-line weight vectors and broadcasts its inputs, none crossing a line. Measured on an
Intel Xeon (AVX-512), one thread, paired against onnxruntime: resnet18's 3x3 convolutions
64 -> 64 at 56x56 0.91x as the flat grid (8 channels x 3 vectors, 15.6 useful lanes a
cycle) against 0.99x as a channel tile (32 channels x 8 pixels, 16.0), 128 -> 128 at 28x28
0.94x against 1.07x, 128 -> 64 at 56x56 0.91x against 0.93x; the 7x7/2 stem (147 steps)
0.99x against 1.05x."""

SPLIT_LOADS_MIN_STEPS = 64
"""SPLIT_LOADS_CHANNEL_GAIN applies from this many reduction steps on: a shorter reduction
does not pay for a channel tile's (its tile of channels x pixels is transposed into the
output's rows). Measured as above: mobilenet_v2's 3x3/2 stem (27 steps) 1.5x slower as a
channel tile."""

MAX_CHANNEL_PIXELS = 14
"""A channel tile (conv_channels.py) takes at most this many output pixels of a row."""

ROW_STREAM_REGISTERS = 16
"""On a target of this many vector registers (AVX2), a 1x1 convolution of a long reduction
(LONG_REDUCTION_STEPS) whose channel tile reads its data rows first takes one register of
channels x a whole row when no tile of one row within ACCUMULATOR_SHARE has FMA_CHAINS + 1
accumulators (`_row_stream`): the cost model's choice there, 16 channels x 2 x 2 pixels (8
accumulators, no slack for the long reduction), reads two rows' lines a step, each line again
by every tile along the row. Measured on Zen 3, one thread, mobilenet_v2's projections at
14x14: 576 -> 96 0.40-0.42 -> 0.33-0.34 ms, 384 -> 96 0.27 -> 0.22, 384 -> 64 0.18 -> 0.15
(8 channels x 14 pixels: 14 accumulators, a weight vector and a broadcast, all 16 registers;
the whole model 1.8-1.9 % faster); not taken at 10x10, where 16 channels x 5 pixels of one
row has 10 accumulators (nudenet_320n's 256 -> 128 and 512 -> 256: the whole row 10-13 %
slower), nor for a 3x3 convolution (256 channels at 14x14: 1.6 times slower). Those
projections (channels in blocks of two registers) now lay their pixels end to end
(FLAT_PIXELS_MAX, decided first); the rule stays for channels in blocks of one register."""


FLAT_PIXELS_VECTOR_BYTES = 32
FLAT_PIXELS_MIN, FLAT_PIXELS_MAX = 49, 196
"""On a target of FLAT_PIXELS_VECTOR_BYTES vectors (AVX2: 16 registers of 8 floats), a float
1x1 convolution of stride 1 without padding whose output has FLAT_PIXELS_MIN to this many
pixels (7x7 to 14x14, the sizes measured) in rows of at most a cache line
(ROWS_FIRST_MAX_BYTES) takes a channel tile of two registers of channels x consecutive pixels
of its rows laid end to end (`_flat_pixels`), its reduction in blocks (STEP_BLOCK), as
onnxruntime's MLAS computes a pointwise convolution on its NCHWc layout: a row of 7 or 14
pixels admits no tile of 10 or 12 accumulators, the flat axis does (16 channels x 5 pixels at
7x7, 50 computed for 49; x 6 at 14x14, 198 for 196, when the reduction is long; a short one
takes 4 pixels, 8 accumulators, as many as its chains need). Measured on Zen 3, one thread,
against the tiles it replaces (shuffled, paired): mobilenet_v2's 960 -> 320 at 7x7 0.57 against
0.85 ms, 320 -> 1280 0.82 against 1.00, 160 -> 960 0.37 against 0.43, at 14x14 576 -> 96 0.47
against 0.75, 384 -> 64 0.27 against 0.35, 96 -> 576 alike (0.59, 0.56); the whole of
mobilenet_v2 1.08-1.14 times faster (three runs; two threads: 1.10), PP-OCRv4 det's (10x10)
1.02, nudenet_320n's 1.01. At 28x28 it lost (192 -> 32: 0.17 against 0.16 ms; 32 -> 192 0.42
against 0.30), and with rows wider than a line (ppocr_mobile_v2_cls's 2x96: the whole model 3 %
slower)."""

WIDE_FLAT_PIXELS_MAX_ACCUMULATORS = 16
"""On a core of wider vectors than AVX2's (AVX-512, run whole), the flat channel tile
(FLAT_PIXELS_MAX) replaces a tile of one row of channels in the lanes when the reduction is long
(LONG_REDUCTION_STEPS) and the row admits no tile with more accumulators than the flat tile's,
at most this many (`_wide_flat_pixels`): its step blocks keep a block's weights in L1 cache
while every tile reads them. Rows of 7 and 14 pixels admit 2 registers x 7 pixels, and so
does the flat axis: mobilenet_v2's projections, measured on the Intel Xeon (AVX-512, one
thread, interleaved): 384 -> 64 at 14x14 0.068 -> 0.057 ms, 576 -> 96 0.140 -> 0.126, 960 -> 160
at 7x7 0.094 -> 0.085, 960 -> 320 0.165 -> 0.153; the whole model 2.6-2.8 % faster. Rows of 10
admit 2 x 10 pixels, 20 accumulators, and the flat tile loses to it by 3-7 % at its best width
and is twice as slow with 20 accumulators (nudenet_320n's and PP-OCRv4 det's 384 -> 256 at
10x10: 0.113 against 0.235 ms); the short reductions of the expansions (64 -> 384, 96 -> 576,
160 -> 960) gain nothing from step blocks and lose up to 10 %."""

PIXEL_VECTOR_WIDTHS = frozenset({4, 8, 16})
"""A channel tile (conv_channels.py) of a row this many pixels wide stores its output a
channel at a time: the channel's pixels, consecutive in the output, as one whole vector (its
accumulators read across the registers: LLVM makes the lanes register shuffles), where
storing a pixel's channels as a vector writes one lane to each of as many planes (a scatter, or
a scalar store a lane). Other widths (7) would store a partial vector. Measured on the Intel
Xeon (AVX-512, one thread, interleaved): resnet18's stem 7x7/2 (8 pixels) 1.310 -> 1.237 ms,
3x3 64 at 56x56 (8) 1.092 -> 1.066, 3x3 128 at 28x28 (2 rows x 4) 1.020 -> 1.006, 1x1/2 64 ->
128 (4) 0.092 -> 0.085; with 7 pixels unchanged (3x3 256 at 14x14, 512 at 7x7) or slower
(mobilenet_v2's 96 -> 576 at 14x14: 0.127 -> 0.135)."""

STEP_BLOCK = 96
STEP_BLOCK_RANGE = (64, 128)
"""A flat channel tile (FLAT_PIXELS_MAX) runs a reduction longer than STEP_BLOCK_RANGE in
blocks of a divisor of its steps in that range, the one nearest STEP_BLOCK: a block's weights
(96 steps x 16 channels: 6 KB) stay in L1 cache while every tile of pixels reads them, and so
does its data at 7x7 (96 x 49 pixels: 19 KB; 75 KB at 14x14, in L2). Measured on Zen 3,
mobilenet_v2's 960 -> 320 at 7x7 with a tile of 16 channels x 6 pixels (before the choice of
the pixels: 5 at 7x7), time per call in two runs on a host whose speed varied: blocks of 96
steps 0.41 ms against 0.51 without; blocks of 64 0.56, 96 0.55, 160 0.61, 240 0.63, 480
0.64."""


@dataclasses.dataclass(frozen=True)
class _Window:
    """A recognized convolution or pooling: `reduction` computes the window sums (or maxima);
    `output` is the root stage that stores them (its epilogue); `padded` is the inlined stage
    the window reads (padding), if any; `shared` output channels (a dense convolution's all,
    a grouped one's group) read the same input: a tile of channels shares its input loads;
    `block`: the weights come in blocks of this many output channels (pack_conv_weights.py),
    or None."""

    reduction: Stage
    output: Stage
    padded: Stage | None
    shared: int  # output channels reading the same input channels (1: none share)
    block: int | None = None


@dataclasses.dataclass(frozen=True)
class _Tile:
    channels: int
    rows: int
    width: int  # output columns per tile
    lanes: int  # columns per vector: a register's, or half a register's


@dataclasses.dataclass(frozen=True)
class _ChannelTile:
    """A tile of conv_channels.py: `channels` output channels in vectors of `lanes` (whole
    registers) x `rows` x `width` output pixels."""

    channels: int
    rows: int
    width: int
    lanes: int
    flat: bool = False  # `width` pixels of the output's rows laid end to end (FLAT_PIXELS_MAX)
    step_block: int | None = None  # the reduction's steps per pass over the pixels


def schedule(s: Schedule, target) -> None:
    """Schedule, in place, the stages of `s` this module recognizes; leave the others untouched
    for group_schedules.py."""
    for stage in list(s.stages):
        window = _recognize(s, stage, _deinterleaves(target))
        if window is None:
            continue
        lanes = _lanes(stage, target)
        chosen = _choose(window, target)
        if isinstance(chosen, _ChannelTile) and chosen.flat:
            _schedule_flat_pixels(s, window, chosen)
        elif isinstance(chosen, _ChannelTile):
            _schedule_channels(s, window, chosen)
        elif isinstance(chosen, tuple):
            _schedule_flat(s, window, *chosen, lanes)
        elif chosen is not None:
            _schedule_window(s, window, chosen, lanes, _copy_stack_bytes(target))


def channel_tile(s: Schedule, stage: Stage, target) -> int | None:
    """How many output channels the register tile `schedule` gives `stage` of `s` for
    `target` has (the tile's channels read one weight each per reduction step), or None when
    `schedule` leaves the stage to group_schedules.py. `s` need not be scheduled: the tile
    depends only on the stage's rule. Graph passes lay constant weights out by it
    (pack_conv_weights.py)."""
    chosen = _chosen(s, stage, target)
    if chosen is None:
        return None
    return (chosen[0] if isinstance(chosen, tuple) else chosen).channels


def channels_in_lanes(s: Schedule, stage: Stage, target) -> bool:
    """Whether `schedule` computes `stage` with its output channels in the vector lanes
    (conv_channels.py): its weights must then come in blocks of `channel_tile` channels for
    the tile to load them as vectors."""
    return isinstance(_chosen(s, stage, target), _ChannelTile)


def _chosen(s: Schedule, stage: Stage, target):
    window = _recognize(s, stage, _deinterleaves(target))
    return None if window is None else _choose(window, target)


def _lanes(stage: Stage, target) -> int:
    return max(1, _vector_bytes(target) // stage.op.dtype.itemsize)


def _choose(window: _Window, target) -> _Tile | tuple[_Tile, Grid, int] | _ChannelTile | None:
    """The tile of rows of whole vectors (`_tile`), or of the flattened grid with the grid and
    its computed lanes (`_flat_tile`) when that is FLAT_MIN_GAIN better, or the tile of
    channels in the lanes (`_channel_tile`) when that is CHANNEL_MIN_GAIN better than
    both; None: none fits."""
    lanes = _lanes(window.reduction, target)
    budget = _Budget(_registers(target))
    if _vector_bytes(target) == FLAT_PIXELS_VECTOR_BYTES:
        pixels = _flat_pixels(window, lanes, budget)
        if pixels is not None:
            return pixels
    stream = _row_stream(window, lanes, budget)
    if stream is not None:
        return stream
    halves = getattr(target, "cpu", None) in HALF_WIDTH_CORES
    found = _tile(window, lanes, budget, halves)
    flat = _flat_tile(window, lanes, budget, halves)
    if flat is not None and (found is None or flat[1] > found[1] * FLAT_MIN_GAIN):
        found = flat
    across = _channel_tile(window, lanes, budget, halves)
    gain = CHANNEL_MIN_GAIN
    if budget.registers == 16 and _rows_first(_window_load(window.reduction.op).tensor):
        gain = ROWS_FIRST_CHANNEL_GAIN
    if budget.registers == 16 and found is not None and _strided_grid(found[0]):
        gain = STRIDED_FLAT_CHANNEL_GAIN
    if (
        _splits_lines(window, lanes, halves)
        and _steps(window.reduction.op) >= SPLIT_LOADS_MIN_STEPS
    ):
        gain = SPLIT_LOADS_CHANNEL_GAIN
    full_width = _vector_bytes(target) > FLAT_PIXELS_VECTOR_BYTES and not halves  # AVX-512
    if full_width and across and found and _one_block_over_few(window, across, found):
        gain = min(gain, ONE_BLOCK_CHANNEL_GAIN)
    if across is not None and (found is None or across[1] >= found[1] * gain):
        wide = _wide_flat_pixels(window, budget, across[0]) if full_width else None
        return wide or across[0]
    return None if found is None else found[0]


def _one_block_over_few(window: _Window, across: tuple, found: tuple) -> bool:
    """Whether the channel tile `across` computes all the output channels at once and the
    tile of columns `found` (of `_tile` or `_flat_tile`) at most ONE_BLOCK_MAX_TILE_CHANNELS."""
    channels = int(window.reduction.op.shape[1])
    tile = found[0][0] if isinstance(found[0], tuple) else found[0]
    return across[0].channels == channels and tile.channels <= ONE_BLOCK_MAX_TILE_CHANNELS


def _wide_flat_pixels(
    window: _Window, budget: _Budget, row_tile: _ChannelTile
) -> _ChannelTile | None:
    """For a core of vectors wider than AVX2's that runs them whole, the flat channel tile
    with its reduction in step blocks (WIDE_FLAT_PIXELS_MAX_ACCUMULATORS) in place of
    `row_tile`, a tile of one row, when the reduction is long and the flat tile has no fewer
    accumulators; or None."""
    if _steps(window.reduction.op) < LONG_REDUCTION_STEPS:
        return None
    lanes = row_tile.lanes
    # the flat tile's channels are two registers
    flat = _flat_pixels(window, lanes, budget, WIDE_FLAT_PIXELS_MAX_ACCUMULATORS // 2)
    if flat is None or flat.step_block is None:
        return None
    row_accumulators = row_tile.rows * row_tile.width * row_tile.channels // lanes
    return flat if 2 * flat.width >= row_accumulators else None


def _splits_lines(window: _Window, vector: int, halves: bool) -> bool:
    """Whether a tile's input loads of `vector` lanes cross a cache line at nearly every load
    (FLAT_SPLIT_BAND, SPLIT_LOADS_CHANNEL_GAIN): the vector is a whole line, on a core that
    runs it whole (not `halves`), and the window moves along the data's rows or columns, so
    that its loads start at every lane offset."""
    red: ComputeOp = window.reduction.op
    if halves or vector * red.dtype.itemsize < LINE_BYTES:
        return False
    data = _window_load(red)
    moving = [r.var for r in red.reduce_axis if int(r.dom.extent.value) > 1]
    return data is not None and any(_uses(i, v) for i in data.indices[2:] for v in moving)


def _strided_grid(tile) -> bool:
    """Whether `tile` (of `_tile` or `_flat_tile`) is a flat grid of a strided window."""
    return isinstance(tile, tuple) and tile[1].steps != (1, 1)


def _rows_first(data) -> bool:
    """Whether a channel tile reads `data` from conv_channels.rows_first's copy."""
    return int(data.shape[3]) * data.dtype.itemsize <= ROWS_FIRST_MAX_BYTES


def _registers(target) -> int:
    """The target's vector registers: 32 with AVX-512, 16 with AVX2 or SSE."""
    return 32 if _vector_bytes(target) >= 64 else 16


@dataclasses.dataclass(frozen=True)
class _Budget:
    """What a tile may hold in `registers` vector registers."""

    registers: int

    @property
    def accumulators(self) -> int:
        return int(self.registers * ACCUMULATOR_SHARE)

    def fits(self, accumulators: int, held: int, capped: bool = True) -> bool:
        """Whether a step of `accumulators` that holds `held` loaded vectors across its
        multiply-adds (the tile's input vectors, each used by every channel; a channel tile's
        weight vectors) stays in the registers. Measured on Zen 3 (16 registers): a tile of 3
        channels x 4 input vectors (12 + 4 + 1 = 17) kept its accumulators on the stack, a
        load and a store per multiply-add, at 53% of the peak."""
        return (
            accumulators <= self.accumulators or not capped
        ) and accumulators + held + SCRATCH_REGISTERS <= self.registers


def _copy_stack_bytes(target) -> int:
    limit = getattr(target, "stack_limit", None) if target is not None else None
    return COPY_STACK_BYTES if limit is None else min(COPY_STACK_BYTES, int(limit) // 8)


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
    return _Window(stage, output, padded, shared, _weight_block(op))


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


def _weight_block(op: ComputeOp) -> int | None:
    """C when the rule reads its weights in blocks of C output channels (`m % C` their last
    index: loom/graph/ops/nn.py, WEIGHT_BLOCK), else None."""
    m = op.axis[1].var
    for load in _loads(op.body.source):
        last = load.indices[-1] if load.indices else None
        if isinstance(last, FloorMod) and last.a is m and isinstance(last.b, IntImm):
            return int(last.b.value)
    return None


def _input_outweighs_weights(op: ComputeOp, data: Tensor) -> bool:
    """Whether the convolution `op` reads more bytes of its input `data` than of its weights
    (its other loads)."""
    weights = {id(ld.tensor): ld.tensor for ld in _loads(op.body.source) if ld.tensor is not data}
    return _bytes(data) > sum(_bytes(t) for t in weights.values())


def _bytes(t: Tensor | ComputeOp) -> int:
    return math.prod(int(d) for d in t.shape) * t.dtype.itemsize


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


def _channel_counts(window: _Window, budget: _Budget) -> list[int]:
    """The channels a tile may take: divisors of the channels that share their input; the
    weights' block alone when they come in blocks that fit (pack_conv_weights.py chose it as
    this cost model's best for this machine: on another target, a tile of the block's channels
    still reads the block without a division)."""
    block = window.block
    if block is not None and block <= budget.accumulators and window.shared % block == 0:
        return [block]
    return _divisors(window.shared, budget.accumulators)


def _widths(columns: int, lanes: int) -> list[int]:
    """The widths a tile may take: whole vectors that divide the (widened) row."""
    return [count * lanes for count in _divisors(columns // lanes, MAX_ROW_REGISTERS)]


def _chains(window: _Window) -> int:
    """The accumulators a tile of rows or of the flat grid needs to keep the FMA units busy
    (LONG_REDUCTION_STEPS)."""
    long = _steps(window.reduction.op) >= LONG_REDUCTION_STEPS
    return FMA_CHAINS + 1 if long else FMA_CHAINS


def _tile(
    window: _Window, lanes: int, budget: _Budget, halves: bool = False
) -> tuple[_Tile, float] | None:
    """The tile with the most useful output elements per cycle, then the fewest loads per
    multiply-add, that fits `budget`, its vectors whole registers of `lanes` or half ones (a
    7-wide row is one vector of 8 lanes, not 16), the row widened to whole vectors; None if
    the output is too narrow for vectors. With `halves` (a core that runs a full register's
    operation as two halves), a half register's operations cost half. With the tile, its
    useful output elements per cycle."""
    _, channels, rows, columns = (int(d) for d in window.reduction.op.shape)
    if columns < MIN_COLUMNS:
        return None
    chains = _chains(window)
    best, best_score = None, None
    for vector in (lanes, lanes // 2):
        if vector < MIN_COLUMNS:
            continue
        wide = -(-columns // vector) * vector
        for width in _widths(wide, vector):
            registers = width // vector
            for tc in _channel_counts(window, budget):
                for tr in _divisors(rows, MAX_TILE_ROWS):
                    accumulators = tc * tr * registers
                    # held across a step: the input vectors its channels share, else (one
                    # channel's own inputs, each used once) the broadcast weight
                    held = tr * registers if window.shared > 1 else 1
                    if not budget.fits(accumulators, held):
                        continue
                    loads = tr * registers + tc  # input vectors, broadcast weights
                    if window.shared == 1:
                        loads = accumulators + tc
                    # cycles of a step: two multiply-adds and two loads a cycle, and an
                    # accumulator's multiply-adds wait for each other (`chains` in flight)
                    cycles = _cycles(accumulators, loads, halves and vector == lanes, chains)
                    useful = tc * tr * width * columns / wide
                    # ties: the fewest wasted lanes (half registers cost half on some cores),
                    # then the widest rows (measured: the input streams along them), last the
                    # fewest input vectors held, which leaves LLVM registers to load ahead
                    # (measured on Zen 3: 4 channels x 1 row x 2 vectors 6 % faster than
                    # 2 x 2 x 2 for resnet18's 7x7/2 stem; mobilenet_v2 1.02x, resnet18 1.01x)
                    score = (
                        useful / cycles,
                        -wide,
                        -loads / accumulators,
                        width,
                        accumulators,
                        -held,
                    )
                    if best_score is None or score > best_score:
                        best, best_score = _Tile(tc, tr, width, vector), score
    return None if best is None else (best, best_score[0])


def _cycles(accumulators: int, loads: int, doubled: bool, chains: int = FMA_CHAINS) -> int:
    """Cycles of a reduction step: two multiply-adds and two loads a cycle, and an
    accumulator's multiply-adds wait for each other (`chains` in flight); twice as many on a
    core that runs the registers' operations as two halves."""
    return max(accumulators, loads, chains) * (2 if doubled else 1)


def _channel_tile(
    window: _Window, lanes: int, budget: _Budget, halves: bool
) -> tuple[_ChannelTile, float] | None:
    """The best tile of conv_channels.py (one or two registers of channels x pixels of a row,
    or of rows, dividing the output), with its useful output elements per cycle; None unless
    all output channels share their input (a dense convolution) and a register's lanes
    divide them (and match the weights' block, if they come in blocks)."""
    _, channels, rows, columns = (int(d) for d in window.reduction.op.shape)
    if window.shared != channels or lanes < MIN_COLUMNS:
        return None
    best, best_score = None, None
    for registers in (1, 2):
        tc = registers * lanes
        if channels % tc or (window.block is not None and window.block != tc):
            continue
        for tr in _divisors(rows, MAX_TILE_ROWS):
            for width in _divisors(columns, MAX_CHANNEL_PIXELS):
                pixels = tr * width
                accumulators = pixels * registers
                if not budget.fits(accumulators, registers):  # the weight vectors held
                    continue
                loads = registers + pixels  # weight vectors, broadcast inputs
                cycles = _cycles(accumulators, loads, halves)
                score = (tc * pixels / cycles, -loads / accumulators, width)
                if best_score is None or score > best_score:
                    best, best_score = _ChannelTile(tc, tr, width, lanes), score
    return None if best is None else (best, best_score[0])


def _row_stream(window: _Window, lanes: int, budget: _Budget) -> _ChannelTile | None:
    """The channel tile of one register of channels x a whole row (ROW_STREAM_REGISTERS says
    when), or None. The weights' block does not change the answer
    (pack_conv_weights.py packs them by it)."""
    red: ComputeOp = window.reduction.op
    _, channels, _, columns = (int(d) for d in red.shape)
    data = _window_load(red)
    if (
        budget.registers != ROW_STREAM_REGISTERS
        or window.shared != channels
        or channels % lanes
        or window.block not in (None, lanes)
        or _steps(red) < LONG_REDUCTION_STEPS
        or not _rows_first(data.tensor)
        or not _pointwise(red, data)
        or not budget.fits(columns, 1, capped=False)  # its accumulators and the weight vector
    ):
        return None
    chains = _chains(window)  # FMA_CHAINS + 1: the reduction is long
    for tc in (t for t in (lanes, 2 * lanes) if channels % t == 0):
        for width in _divisors(columns, columns):
            if width * tc // lanes >= chains and budget.fits(width * tc // lanes, tc // lanes):
                return None  # a tile of one row within the budget keeps the chains busy
    return None if columns < chains else _ChannelTile(lanes, 1, columns, lanes)


def _flat_pixels(
    window: _Window, lanes: int, budget: _Budget, most_pixels: int = MAX_CHANNEL_PIXELS
) -> _ChannelTile | None:
    """The channel tile of two registers of channels x pixels of the output's rows laid end
    to end (FLAT_PIXELS_MAX says when), its reduction in blocks of STEP_BLOCK steps when
    longer; or None. The pixels per tile: the fewest cycles over the whole output (its last
    tile computes past the last pixel), as `_channel_tile` counts a step's. The weights' block
    does not change the answer (pack_conv_weights.py packs them by it)."""
    red: ComputeOp = window.reduction.op
    data = _window_load(red)
    _, channels, rows, columns = (int(d) for d in red.shape)
    tc = 2 * lanes
    if (
        red.dtype != "float32"
        or window.shared != channels
        or channels % tc
        or window.block not in (None, tc)
        or not FLAT_PIXELS_MIN <= rows * columns <= FLAT_PIXELS_MAX
        or not _reads_output_pixel(red, data)
        or not _rows_first(data.tensor)  # rows of a cache line: a tile of a row is short
    ):
        return None
    pixels = rows * columns
    chains = _chains(window)
    best, best_score = None, None
    for width in range(1, most_pixels + 1):
        if not budget.fits(2 * width, 2):  # the accumulators and the two weight vectors
            continue
        tiles = -(-pixels // width)
        cycles = tiles * _cycles(2 * width, 2 + width, False, chains)
        score = (-cycles, -tiles * width, width)  # ties: the fewest pixels computed, wider
        if best_score is None or score > best_score:
            best, best_score = width, score
    if best is None:
        return None
    return _ChannelTile(tc, 1, best, lanes, flat=True, step_block=_step_block(_steps(red)))


def _step_block(steps: int) -> int | None:
    """The reduction's steps per pass of a flat channel tile over the pixels: the divisor of
    `steps` in STEP_BLOCK_RANGE nearest STEP_BLOCK (a partial block would put a bound check
    inside the reduction, and LLVM then keeps the accumulators in memory); None when the
    reduction is no longer than the range or no divisor falls in it."""
    low, high = STEP_BLOCK_RANGE
    if steps <= high:
        return None
    divisors = [d for d in range(low, high + 1) if steps % d == 0]
    return min(divisors, key=lambda d: (abs(d - STEP_BLOCK), -d)) if divisors else None


def _reads_output_pixel(red: ComputeOp, data: ProducerLoad) -> bool:
    """Whether `red` reads its data at its own output pixel, `data[n, c, oh, ow]` of data as
    tall and wide as the output and a kernel's argument (not the padding, computed inline): a
    1x1 convolution of stride 1 without padding."""
    if not isinstance(data.tensor.op, PlaceholderOp):
        return False
    g = grid(red, data)  # the window's offset and step along rows and columns
    return (
        g is not None
        and g.steps == (1, 1)
        and all(isinstance(o, IntImm) and o.value == 0 for o in g.offsets)
        and tuple(int(d) for d in data.tensor.shape[2:]) == tuple(int(d) for d in red.shape[2:])
    )


def _pointwise(red: ComputeOp, data: ProducerLoad) -> bool:
    """Whether `red`'s window is one pixel: no reduction axis longer than 1 moves its load
    along rows or columns."""
    moving = [r.var for r in red.reduce_axis if int(r.dom.extent.value) > 1]
    return not any(_uses(i, v) for i in data.indices[2:] for v in moving)


def _flat_tile(
    window: _Window, lanes: int, budget: _Budget, halves: bool
) -> tuple[tuple[_Tile, Grid, int], float] | None:
    """The best tile of channels x vectors of the flattened grid (conv_flat.py), the grid,
    and its computed lanes (whole tiles); with its useful output elements per cycle. None
    when the convolution has no flat grid (its window does not move by a constant step along
    rows and columns), no shared input (depthwise, pooling) or one output row, or is a
    strided 1x1 convolution."""
    red: ComputeOp = window.reduction.op
    if window.shared == 1 or int(red.shape[2]) == 1:
        return None
    data = _window_load(red)
    g = grid(red, data)
    if g is None or (g.steps != (1, 1) and all(isinstance(o, IntImm) for o in g.offsets)):
        return None  # a strided 1x1 convolution: rows of its subsampled data are faster
    chains = _chains(window)
    candidates = []
    for vector in (lanes, lanes // 2):
        if vector < MIN_COLUMNS:
            continue
        splits = _splits_lines(window, vector, halves)
        for registers in range(1, MAX_ROW_REGISTERS + 1):
            width = registers * vector
            computed = -(-g.last // width) * width
            for tc in _channel_counts(window, budget):
                accumulators = tc * registers
                if not budget.fits(accumulators, registers):  # the input vectors held
                    continue
                loads = registers + tc
                cycles = _cycles(accumulators, loads, halves and vector == lanes, chains)
                useful = tc * width * g.outputs / computed
                accesses = (2 if splits else 1) * registers + tc
                candidates.append(
                    _FlatCandidate(
                        (_Tile(tc, 1, width, vector), g, computed),
                        useful / cycles,
                        (-computed, -loads / accumulators, width),
                        splits,
                        accesses / accumulators,
                    )
                )
    if not candidates:
        return None
    best = max(c.rate for c in candidates)
    if any(c.splits for c in candidates):  # near-ties: the fewest L1 accesses per multiply-add
        near = [c for c in candidates if c.rate >= best / FLAT_SPLIT_BAND]
        chosen = max(near, key=lambda c: (-c.accesses, c.rate, c.ties))
    else:
        chosen = max(candidates, key=lambda c: (c.rate, c.ties))
    return chosen.tile, chosen.rate


@dataclasses.dataclass(frozen=True)
class _FlatCandidate:
    """A tile `_flat_tile` weighs: its useful output elements per cycle (`rate`), what breaks
    ties (fewest computed lanes, then fewest loads a multiply-add, then widest), whether its
    input loads split cache lines and its L1 accesses a multiply-add (FLAT_SPLIT_BAND)."""

    tile: tuple[_Tile, Grid, int]
    rate: float
    ties: tuple
    splits: bool
    accesses: float


# -- the schedule ---------------------------------------------------------------------------------


def _ordered_max(acc, x):
    return Select(GT(acc, x), acc, x)


ORDERED_MAX = comm_reducer(_ordered_max, min_value, "max")
"""A float max pooling's combiner: `acc > x ? acc : x` (x86's `maxps`), see above."""


def _pooling_max(s: Schedule, window: _Window) -> _Window:
    """A float max pooling (a max reduction of its window alone, no weights) combined with
    ORDERED_MAX: the stage's rule replaced, its readers made to read it."""
    red: ComputeOp = window.reduction.op
    body: Reduce = red.body
    if body.combiner.name != "max" or not red.dtype.is_float or len(_loads(body.source)) != 1:
        return window
    reduce = Reduce(ORDERED_MAX, body.source, body.axis, body.condition, body.init)
    s.replace_op(window.reduction, red.with_body(reduce))
    return window


def _schedule_window(
    s: Schedule, window: _Window, tile: _Tile, register_lanes: int, stack_bytes: int = 0
) -> None:
    """The convolution in tiles of rows of whole vectors; a copy of one channel's data of at
    most `stack_bytes` (per channel, when output channels do not share their input) lives on
    the stack."""
    window = _pooling_max(s, window)
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
    if window.shared > 1 and not _channel_tiles_outside(red, out, data):
        # every channel tile of a row reuses the row's input in cache
        outer = [n, oho, owo]
        output.reorder(n, oho, owo, mo, *inner)
        attach = mo
    else:  # one channel tile's planes after another (a channel's padding computed just before
        # them when channels do not share their input)
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
    if work >= CONV_PARALLEL_MIN_WORK:
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
            _unroll_phases(padded, register_lanes)
            channels_copied = int(padded.op.shape[0]) * int(padded.op.shape[1])
            plane = math.prod(int(d) for d in padded.op.shape) // channels_copied
            if plane * padded.op.dtype.itemsize <= stack_bytes:
                padded.set_scope("local")


def _channel_tiles_outside(red: ComputeOp, out: ComputeOp, data: ProducerLoad | None) -> bool:
    """Whether a dense convolution runs each channel tile over all its row tiles (as one whose
    output channels do not share their input) rather than every channel tile on a row tile
    (whose input then stays in L1): for an output larger than the L2 cache
    (STREAMED_OUTPUT_BYTES) from a short reduction (SHORT_REDUCTION_STEPS) of data that stays
    in L2 (STREAMED_REREAD_BYTES). Then a tile stores to the rows of its own few
    channels, which continue those its predecessor stored: a few streams that the hardware
    prefetcher follows, instead of one row of every channel at once. Measured on an Intel Xeon
    (AVX-512, 2 MB L2), one thread: mobilenet_v2's 1x1 convolution 16 -> 96 at 112x112 (a
    4.8 MB output, 16 steps, 784 KB of data) took 0.94 ms in the model's sequence and 0.31
    hot, 0.51 and 0.24 so (onnxruntime 0.71); the whole model 1.049x faster paired, 1.012x at
    two threads. The pointwise 32 -> 64 at 112x112 (3.2 MB from 1.6 MB of data, which the
    output's lines then push out of L2) ran 0.49 -> 0.63 ms so: hence the data's limit."""
    if data is None or _steps(red) > SHORT_REDUCTION_STEPS:
        return False
    return _bytes(out) > STREAMED_OUTPUT_BYTES and _bytes(data.tensor) <= STREAMED_REREAD_BYTES


def _schedule_flat(
    s: Schedule, window: _Window, tile: _Tile, g: Grid, computed: int, register_lanes: int
) -> None:
    """The convolution on its flattened grid (conv_flat.py): the grid's tiles of channels x
    vectors, then the epilogue reading the grid row by row. The channel tiles run outside
    (each tile's weights stay in L1 cache while it sweeps the grid) when the data's copy
    stays in L2 cache (FLAT_DATA_IN_CACHE) for the next tile's sweep; else the grid's tiles
    run outside, every channel tile reusing the tile's input (measured both ways)."""
    reduction, output = window.reduction, window.output
    red: ComputeOp = reduction.op
    data = _window_load(red)
    flat = flatten(s, reduction, data, g, computed)
    copy = _copy_of(flat)
    if copy is not None:
        s[copy].compute_root()
    read = copy.output(0) if copy is not None else data.tensor  # the copy, or the data itself
    copy_bytes = _bytes(read)
    if reduction is not output:
        reduction.compute_inline()
    cache = s.cache_write(flat.op.output(0), "local")
    local = s[cache.op]
    n, m, q = flat.op.axis
    mo, mi = flat.split(m, factor=tile.channels)
    qo, qi = flat.split(q, factor=tile.width)
    vectors, lane = (None, qi) if tile.lanes == tile.width else flat.split(qi, tile.lanes)
    inner = [mi] + ([vectors] if vectors is not None else []) + [lane]
    outer, inside = (mo, qo) if copy_bytes <= FLAT_DATA_IN_CACHE else (qo, mo)
    flat.reorder(n, outer, inside, *inner)
    for loop in inner[:-1]:
        flat.unroll(loop)
    flat.vectorize(lane)
    work = math.prod(int(d) for d in flat.op.shape) * _steps(cache.op)
    if work // VECTOR_REDUCTION_SPEEDUP >= CONV_PARALLEL_MIN_WORK:
        flat.parallel(flat.fuse(n, outer))
    local.compute_at(flat, inside)
    _schedule_accumulators(local, tile)
    _schedule_epilogue(output, register_lanes)


def _schedule_channels(s: Schedule, window: _Window, tile: _ChannelTile) -> None:
    """The convolution with its channels in the lanes (conv_channels.py): the output's tiles
    of pixels x channels, each computing its accumulators (reduction loops outside, pixels
    and registers unrolled, channels vectorized) and then storing them through the epilogue.
    The pixel tiles run inside the channel tiles: a block of weights (up to 590 KB: resnet18's
    3x3 convolutions of 512 channels) is read once from memory and then from cache by each
    pixel tile, the input (at most a few hundred KB at these widths) from cache by each block
    (measured: mobilenet_v2 run whole lost 0.7 ms to its 1x1 convolutions at 7x7 with the
    pixel tiles outside, which read all the weights once per pixel tile).

    With fewer blocks than MIN_PARALLEL_ITERATIONS and an input larger than the weights, the threads
    share out bands of rows, each band's blocks one after another, instead of whole blocks: a thread
    then reads only its band of the input (and of a residual added in the epilogue), not all of it,
    from CONV_PARALLEL_MIN_WORK on (it was group_schedules' PARALLEL_MIN_WORK, four times more,
    which left mobilenet_v2's projections to 32 channels at 28x28, 0.6 M, serial once they took a
    channel tile: ONE_BLOCK_CHANNEL_GAIN; measured at two threads, paired: mobilenet_v2,
    nudenet_320n, resnet18 1.00x, PP-OCRv4 det 1.01x). A block larger than L1 (resnet18's 3x3
    convolutions at 56x56: 2 blocks of 73 KB) is read from L2 by every pixel tile either way.
    Measured on the Intel Xeon of issue 16 at two threads: resnet18's 3x3 convolution 64 -> 64 at
    56x56 with a residual Add 1.07 -> 0.66 ms (without: 0.68 -> 0.63), the whole model 13.3 -> 12.2
    ms; one thread unchanged (1.002x paired). Weights larger than the input (mobilenet_v2's 576 ->
    160 at 7x7: 368 KB against 113 KB) stay shared out by blocks, each read by one thread and
    prefetched (cpu_prefetch_weights follows a loop of blocks, not one fused with the rows: so
    fused, that convolution ran 0.075 -> 0.095 ms at one thread)."""
    reduction, output = window.reduction, window.output
    data = _window_load(reduction.op).tensor
    bands = _input_outweighs_weights(reduction.op, data)
    lanes_stage = channels_last(s, reduction, tile.channels)
    if _rows_first(data):
        rows_first(s, lanes_stage, data)  # computes the padding: scheduled by group_schedules
    elif window.padded is not None:
        window.padded.compute_root()  # unguarded reads; scheduled by group_schedules.py
    if reduction is not output:
        reduction.compute_inline()
    out: ComputeOp = output.op
    n, m, oh, ow = out.axis
    mo, mi = output.split(m, factor=tile.channels)
    oho, ohi = output.split(oh, factor=tile.rows)
    owo, owi = output.split(ow, factor=tile.width)
    if _stores_pixel_vectors(tile):  # a channel's pixels of the tile's row: one vector
        inner = [ohi, mi]
        lane = owi
    else:  # the tile's channels of a pixel: one vector, stored to as many planes
        vectors, lane = (None, mi) if tile.channels == tile.lanes else output.split(mi, tile.lanes)
        inner = [ohi, owi] + ([vectors] if vectors is not None else [])
    output.reorder(n, mo, oho, owo, *inner, lane)
    for loop in inner:
        output.unroll(loop)
    output.vectorize(lane)
    attach = owo
    work = math.prod(int(d) for d in out.shape) * _steps(lanes_stage.op) // VECTOR_REDUCTION_SPEEDUP
    blocks = int(n.dom.extent.value) * int(m.dom.extent.value) // tile.channels
    if blocks >= MIN_PARALLEL_ITERATIONS or not bands:
        if work >= CONV_PARALLEL_MIN_WORK:  # the weights' block index free of divisions
            output.parallel(output.fuse(n, mo))
    elif work >= CONV_PARALLEL_MIN_WORK:  # bands of rows (see above)
        output.reorder(n, oho, mo, owo, *inner, lane)
        attach = output.fuse(n, oho, mo, owo)
        output.parallel(attach)
        if window.padded is not None and not _rows_first(data):
            _padding_in_bands(window.padded, tile.lanes)
    lanes_stage.set_scope("local")  # the accumulators: registers, not the workspace pool
    lanes_stage.compute_at(output, attach)
    red: ComputeOp = lanes_stage.op
    _, _, rows, columns, channels = red.axis
    vectors, lane = (
        (None, channels) if tile.channels == tile.lanes else lanes_stage.split(channels, tile.lanes)
    )
    tile_loops = [rows, columns] + ([vectors] if vectors is not None else [])
    _unroll_tile(
        lanes_stage, tile_loops, lane, tile.rows * tile.width * (tile.channels // tile.lanes)
    )


def _stores_pixel_vectors(tile: _ChannelTile) -> bool:
    """Whether a channel tile's epilogue stores each channel's pixels of a row as one vector
    (PIXEL_VECTOR_WIDTHS) rather than each pixel's channels as a vector strided across planes."""
    return tile.width in PIXEL_VECTOR_WIDTHS


def _schedule_flat_pixels(s: Schedule, window: _Window, tile: _ChannelTile) -> None:
    """The convolution with its channels in the lanes (conv_channels.py) and its output's rows
    laid end to end (`_flat_pixels`): tiles of `tile.width` consecutive pixels x the channels.
    With `tile.step_block`, the accumulators of all the pixels of a block of channels live in
    one buffer (a few KB, `local`) and the reduction runs in blocks of steps outside the
    tiles: a block's weights (steps x channels) stay in L1 cache while every tile reads them
    (and its data, steps x pixels, at 7x7), and each output still sums its steps in order.
    Inside a block, a tile's accumulators stay in registers (no bound check there: LLVM keeps
    a loop's invariant loads and stores in registers).

    The epilogue stores a tile's channels one per lane (eight scalar stores a register, to
    eight planes) with step blocks; without, each channel's pixels as one vector (they are
    consecutive in the output), its accumulators read across the registers (codegen loads
    them lane by lane, which LLVM makes register shuffles): mobilenet_v2's 64 -> 384 and
    96 -> 576 at 14x14 9-16 % faster (Zen 3, paired). With step blocks, read so, the blocks'
    accumulator buffer stayed on the stack inside the reduction (576 -> 96 at 14x14 2.6 times
    slower)."""
    reduction, output = window.reduction, window.output
    _, _, rows, columns = (int(d) for d in reduction.op.shape)
    padded = -(-rows * columns // tile.width) * tile.width
    lanes_stage = channels_last(s, reduction, tile.channels, padded)
    if reduction is not output:
        reduction.compute_inline()
    out: ComputeOp = output.op
    n, m, oh, ow = out.axis
    mo, mi = output.split(m, factor=tile.channels)
    po, pi = output.split(output.fuse(oh, ow), factor=tile.width)
    if tile.step_block is None:  # a channel's pixels: consecutive in the output
        output.reorder(n, mo, po, mi, pi)
        output.unroll(mi)
        output.vectorize(pi)
    else:
        vectors, lane = output.split(mi, tile.lanes)
        output.reorder(n, mo, po, pi, vectors, lane)
        output.unroll(pi)
        output.unroll(vectors)
        output.vectorize(lane)
    blocks = output.fuse(n, mo)
    work = math.prod(int(d) for d in out.shape) * _steps(lanes_stage.op)
    if work // VECTOR_REDUCTION_SPEEDUP >= CONV_PARALLEL_MIN_WORK:
        output.parallel(blocks)
    lanes_stage.set_scope("local")  # the accumulators: registers, or a small stack buffer
    red: ComputeOp = lanes_stage.op
    _, _, pixels, channels = red.axis
    vectors, lane = lanes_stage.split(channels, tile.lanes)
    if tile.step_block is None:
        lanes_stage.compute_at(output, po)
        _unroll_tile(lanes_stage, [pixels, vectors], lane, tile.width * tile.channels // tile.lanes)
        return
    lanes_stage.compute_at(output, blocks)
    steps, *window_axes = red.reduce_axis
    so, si = lanes_stage.split(steps, factor=tile.step_block)
    tile_o, tile_i = lanes_stage.split(pixels, factor=tile.width)
    lanes_stage.reorder(so, tile_o, si, *window_axes, tile_i, vectors, lane)
    lanes_stage.unroll(tile_i)
    lanes_stage.unroll(vectors)
    lanes_stage.vectorize(lane)


def _copy_of(flat: Stage):
    """The data's flat copy that the grid's reduction reads (conv_flat.py names it `.flat`);
    None when it reads the data itself."""
    for tensor in flat.op.input_tensors:
        if tensor.op.name.endswith(".flat"):
            return tensor.op
    return None


def _schedule_epilogue(output: Stage, lanes: int) -> None:
    """The output copied out of the grid row by row: vectors along the row, the channels in
    parallel when there is enough work."""
    n, m, oh, ow = output.op.axis
    if int(ow.dom.extent.value) > lanes:
        _, lane = output.split(ow, factor=lanes)
    else:
        lane = ow
    output.vectorize(lane)
    if math.prod(int(d) for d in output.op.shape) >= group_schedules.PARALLEL_MIN_WORK:
        output.parallel(output.fuse(n, m))


def _extents(axes) -> list[int]:
    return [int(iv.dom.extent.value) for iv in axes]


def _steps(op: ComputeOp) -> int:
    return math.prod(_extents(op.reduce_axis))


def _schedule_accumulators(reduction: Stage, tile: _Tile) -> None:
    """The reduction loops outside the tile; the tile's channels, rows and vectors unrolled,
    its columns vectorized; the kernel window's loops unrolled when short."""
    red: ComputeOp = reduction.op
    m, *rows, ow = red.axis[1:]  # a flat grid's reduction has no row axis (conv_flat.py)
    vectors, lane = (None, ow) if tile.lanes == tile.width else reduction.split(ow, tile.lanes)
    tile_loops = [m, *rows] + ([vectors] if vectors is not None else [])
    _unroll_tile(
        reduction, tile_loops, lane, tile.channels * tile.rows * -(-tile.width // tile.lanes)
    )


def _unroll_tile(reduction: Stage, tile_loops: list, lane, copies: int) -> None:
    """The reduction loops outside the tile's (`copies` vector updates per step), the tile's
    loops unrolled, `lane` vectorized, then the kernel window's loops unrolled from the
    innermost while the unrolled body stays within MAX_UNROLLED_STEPS."""
    red: ComputeOp = reduction.op
    reduction.reorder(*red.reduce_axis, *tile_loops, lane)
    for loop in tile_loops:
        reduction.unroll(loop)
    reduction.vectorize(lane)
    for axis in reversed(red.reduce_axis[1:] if len(red.reduce_axis) > 2 else red.reduce_axis):
        extent = int(axis.dom.extent.value)
        if copies * extent > MAX_UNROLLED_STEPS:
            break
        reduction.unroll(axis)
        copies *= extent


def _unroll_phases(stage: Stage, lanes: int) -> None:
    """A phase copy's (conv_widen.py: `[n, c, h, phase, j]`, its rows in vectors of `lanes` by
    _vectorize_rows) phases and row vectors unrolled (MAX_UNROLLED_PHASE_VECTORS), and its
    rows too when the plane is small (MAX_UNROLLED_PHASE_PLANE): each vector's columns, and so
    its masks (the padding's first and last columns, a 16-lane mask widened to the 32 lanes
    of the two registers a strided vector loads), are then constants; LLVM computed them per
    vector at run time, most of the copy's instructions. Measured on Zen 4 with ReLU6:
    mobilenet_v2's depthwise 3x3/2 convolutions 0.31 -> 0.25 ms (96 channels at 112x112),
    0.041 -> 0.026 ms (576 channels at 14x14, rows unrolled)."""
    if len(stage.op.axis) != 5:
        return
    rows, phases, columns = stage.op.axis[2:]
    vectors = int(phases.dom.extent.value) * -(-int(columns.dom.extent.value) // lanes)
    if vectors > MAX_UNROLLED_PHASE_VECTORS:
        return
    if vectors * int(rows.dom.extent.value) <= MAX_UNROLLED_PHASE_PLANE:
        stage.unroll(rows)
    stage.unroll(phases)
    if int(columns.dom.extent.value) > lanes:  # _vectorize_rows split the row into vectors
        stage.unroll(stage.leaf_iter_vars[-2])


def _padding_in_bands(padded: Stage, lanes: int) -> None:
    """The padded copy of a convolution's input shared out in bands of rows, as the convolution
    is: each thread writes the rows it then reads (left to group_schedules.py, the copy ran on
    one thread, under its PARALLEL_MIN_WORK: resnet18's 3x3 convolutions at 56x56 then read half
    of it from the other core's cache; shared out, the model ran 1.09x faster at two threads,
    unchanged at one)."""
    _vectorize_rows(padded, lanes)
    n, c, r, *columns = padded.leaf_iter_vars
    padded.reorder(n, r, c, *columns)
    padded.parallel(padded.fuse(n, r))


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
