"""Schedules for CPUs: a register-blocked matmul and a streaming elementwise kernel.

Both return `(schedule, args)` ready for `loom.build`. The tile sizes are parameters; the
matmul's defaults come from the target's vector registers (dense_tiles.py), the elementwise
kernel's suit x86-64 with AVX2 or AVX-512 and AArch64 NEON (LLVM splits its vector loops to
the target's vector width).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from loom import te
from loom.abi.dtype import dtype as as_dtype
from loom.backend.cpu.dense_tiles import ACCUMULATORS, ALIASING_BYTES, VectorUnit, choose_tile
from loom.ir.expr import IntImm, PrimExpr
from loom.ir.op import min_
from loom.ops.nn import elementwise
from loom.te.schedule import Schedule
from loom.te.tensor import Tensor

if TYPE_CHECKING:  # loom.target registers the target kinds, which import this module
    from loom.target.target import Target


PACK_MIN_ROWS = 256
"""The matmul strategy packs B (a copy of k x n elements per call) from this many rows of A:
below, the copy costs more than the contiguous panels save. Measured on Zen 4, one thread
(GFLOP/s packed vs not): 512^3 106 vs 99, 256x1024x1024 97 vs 87, but 128x512x512 104 vs
109 and 64x1024x1024 82 vs 87; a matrix-vector product streams B once anyway."""

NARROW_PANEL_BYTES = 64
"""A panel of B whose rows are at most this many bytes (a cache line: AVX2's 16-float tile) is
read a line per row of B, rows a row of B apart (4 KB for n = 1024, lines that share L1 sets),
so packing it pays from NARROW_PACK_MIN_TILES row tiles of A on, not PACK_MIN_ROWS. Measured on
Zen 3 (AVX2), one thread, time unpacked / packed: 16x1024x1024 1.65, 64x1024x1024 2.3,
128x1024x1024 2.6, 64x512x512 1.3, 128x512x512 1.2, 196x576x96 1.07; 8x1024x1024 (two tiles)
0.94."""

NARROW_PACK_MIN_TILES = 4
"""Row tiles of A from which B is packed when the L1 cache would keep few of a panel's rows:
narrow panels (NARROW_PANEL_BYTES), or rows of B a multiple of dense_tiles.ALIASING_BYTES
apart (n = 1024 floats), whose lines all map to the few sets of the first row's, whatever the
panel's width. Measured on an Intel Xeon (AVX-512, 64-float panels), one thread, time unpacked
/ packed: 16x1024x1024 1.21, 32x1024x1024 1.56, 64x1024x1024 2.15, 128x1024x1024 2.56,
64x3072x768 2.59; with rows 2 or 3 KB apart, 64x512x512 0.95, 128x512x512 0.99, 128x768x768
1.02: no gain; 8x1024x1024 (two tiles) 0.94."""

PANEL_STACK_BYTES = 512 << 10
"""The largest panel of B (k x cols) packed where it is used: a local buffer on the stack of
the thread that uses it (half the targets' default stack limit), which stays in L2 while the
row tiles read it. Larger panels are packed all at once before the tiles."""

MIN_PANEL_TASKS = 8
"""Panels from which the panel loop alone is the parallel loop, each thread packing the panels
it uses: no second parallel launch for the packing, no thread waiting for another's packing,
no packed panel moving between cores. Measured on Zen 4, 512^3 (8 panels of 64 columns),
GFLOP/s of CPU time against all of B packed first (medians of runs on a shared machine): one
thread 112.5 vs 111.5, two threads 108 vs 106; B prepacked, 114.5. With fewer panels than
threads, a thread would idle; the count is fixed (not the compiling machine's CPUs) so that a
kernel's code does not depend on where it was built."""


PADDED_ROWS_MAX_WASTE = 1 / 25
"""A matmul that packs B per panel (`_packs_per_panel`) takes all the rows its tile's
accumulators allow (dense_tiles.ACCUMULATORS: AVX2's 12 = 6 rows x 2 vectors;
WIDE_PANEL_ACCUMULATORS on a full-width AVX-512 core) even when they do not divide m, its last
tile computing past m, when that computes at most this share more rows; choose_tile otherwise
takes a divisor of m (4 rows x 2 vectors for m = 64, 512, 1024: 8 accumulators, as many as the
FMA's latency needs with no slack). Rows past m read A's last row and are never stored (no bound
check in the reduction). Measured on Zen 3, paired with numpy per round: 1024^3 4-6 % faster
(one and two threads), 512^3 6-8 %, 64x1024x1024 0-5 %. Not with B prepacked (its tiles one
fused parallel loop): 512^3 13 % slower so."""

WIDE_PANEL_ACCUMULATORS = 24
"""On a core that runs 512-bit registers whole (AVX-512 on Intel and Zen 5, not
dense_tiles.HALF_WIDTH_CORES), a per-panel matmul's tile has this many accumulators (6 rows x 4
vectors of 16 floats, m padded to whole tiles: PADDED_ROWS_MAX_WASTE) instead of
dense_tiles.ACCUMULATORS's 16 (4 x 4). Measured on the Intel Xeon (rocketlake), GFLOP/s of
4 x 64 against 6 x 64 in one process, two runs: 1024^3 199 -> 207 and 192 -> 210 at one
thread, 400 -> 411 and 373 -> 411 at two; 512^3 1.00-1.05 times faster, 64x1024x1024
1.00-1.03. On Zen 4 the 6 x 64 tile spilled (dense_tiles.ACCUMULATORS). The price is build
time: the 1024 matmul's first build (bench/build.py) 42 -> 54 ms (52-62 over five runs), 7.5
ms of it LLVM's work on the larger tile (1026 rows, no padding: 50 ms) and 4.5 ms on the last
tile's rows clamped to A's last row."""

PANEL_GROUP = 4
"""Panels of B that a per-panel matmul (MIN_PANEL_TASKS) packs together, row by row of B: each
row of B is then read 4 panels (256 bytes: AVX2's panels of 16 floats) at a time instead of a
line at a time from rows 4 KB apart, one page per line. Measured on Zen 3 (AVX2), time per
product against one panel at a time, paired with numpy in each round: 64x1024x1024 5-11 %
faster at one thread, 1024^3 2-4 % at one and two threads, 512^3 alike at one thread and 3 %
faster at two; groups of 8 no better. Grouped only while enough groups remain for the threads
(MIN_PANEL_TASKS) and the group fits the stack (PANEL_STACK_BYTES)."""


def matmul(
    m: int,
    n: int,
    k: int,
    dtype: str = "float32",
    *,
    rows: int | None = None,
    cols: int | None = None,
    k_unroll: int | None = None,
    parallel: bool = True,
    target: Target | None = None,
    pack: bool | None = None,
    prepacked: bool = False,
) -> tuple[Schedule, list[Tensor]]:
    """C = A @ B, a `rows` x `cols` tile of C at a time in vector registers (dense_tiles.py;
    None: chosen from `target`'s vector registers, None: this machine's).

    - B is read in panels of `cols` columns. With `pack` (None: from PACK_MIN_ROWS rows of A on,
      from NARROW_PACK_MIN_TILES tiles for panels of a cache line's width or rows of B
      ALIASING_BYTES apart)
      the kernel first copies B into contiguous panels, packedB[p, k, c] = B[k, p*cols + c]
      (zero past n); with `prepacked`, the kernel's B argument already is that array
      (`pack_weights(b, cols)`, shape (panels, k, cols)): constant weights packed once;
      otherwise each step reads its vectors from B's row (a matrix-vector product, m == 1,
      streams B that way).
    - The tile of C is a `local` (stack) buffer computed at the tile loop; its rows, its vectors
      and `k_unroll` steps of the reduction are unrolled (the steps by LLVM: pragma
      unroll_explicit False) and its columns vectorized a register
      at a time, so that every access to it has a constant index and LLVM keeps it in vector
      registers; the reduction keeps its order (each element sums k = 0, 1, ... in turn).
    - The tiles run in parallel (panels outermost: a thread's tiles share panels); the tile
      is copied out with vector stores. When B is packed and has enough panels
      (`_packs_per_panel`), the panel loop is the parallel one and each panel (or group of
      PANEL_GROUP panels) is packed at its iteration into a stack buffer, by the thread that
      then reads it.
    """
    for name, value in (("m", m), ("n", n), ("k", k)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"matmul: {name} must be a positive int, got {value!r}")
    unit = VectorUnit.of(target)
    tile = choose_tile(m, n, k, dtype, unit)
    rows_given = rows
    rows = rows or tile.rows
    cols = cols or tile.cols
    k_unroll = k_unroll or tile.k_unroll
    lanes = tile.lanes if cols % tile.lanes == 0 else cols
    if pack is None:
        itemsize = as_dtype(dtype).itemsize
        narrow = cols * itemsize <= NARROW_PANEL_BYTES
        same_sets = (n * itemsize) % ALIASING_BYTES == 0
        poorly_cached = narrow or same_sets  # unpacked, the panel misses the L1
        many = m >= PACK_MIN_ROWS or (poorly_cached and m >= NARROW_PACK_MIN_TILES * rows)
        pack = many and not prepacked
    if pack and prepacked:
        raise ValueError("matmul: pack and prepacked exclude each other (B is packed already)")
    panels = -(-n // cols)
    panel_bytes = k * cols * as_dtype(dtype).itemsize
    per_panel = pack and _packs_per_panel(n, cols, panel_bytes, target)
    if per_panel and rows_given is None:
        rows = _padded_rows(m, tile.rows, -(-cols // lanes), _panel_accumulators(unit))
    A = te.placeholder((m, k), dtype, name="A")
    if prepacked:
        B = te.placeholder((panels, k, cols), dtype, name="B")
        panel = B
    else:
        B = te.placeholder((k, n), dtype, name="B")
        panel = _packed(B, cols) if pack else None
    r = te.reduce_axis(k, name="k")
    # rows past m (a partial last tile of rows) read A's last row: no bound check in the
    # reduction, their sums never stored (PADDED_ROWS_MAX_WASTE)
    covered = -(-m // rows) * rows
    a_row = (lambda i: i) if covered == m else (lambda i: min_(i, IntImm(m - 1)))
    if panel is None:
        b_at = lambda r, j: B[r, j]  # noqa: E731
    else:
        b_at = lambda r, j: panel[j // cols, r, j % cols]  # noqa: E731
    sums = te.compute(
        (covered, n),
        lambda i, j: te.sum(A[a_row(i), r] * b_at(r, j), axis=r),
        name="C" if covered == m else "C.padded",
    )
    if covered == m:
        C = sums
        s = te.create_schedule(C.op)
        acc = s.cache_write(C, "local")
    else:  # the tile's sums are the padded stage itself, computed at the tile
        C = te.compute((m, n), lambda i, j: sums[i, j], name="C")
        s = te.create_schedule(C.op)
        s[sums].set_scope("local")
        acc = sums
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], rows, cols)
    s[C].reorder(jo, io, ii, ji)
    s[C].unroll(ii)
    _vectorize_columns(s[C], ji, cols, lanes)
    group = _panel_group(panels, panel_bytes, target) if per_panel else 1
    panel_loop = jo  # the loop whose iteration packs its panels (a group's, split off jo)
    if per_panel:  # each panel packed where it is used, on the stack of the thread using it
        tiles = io
        if group > 1:
            panel_loop, jo = s[C].split(jo, factor=group)
        s[panel].compute_at(s[C], panel_loop)
        s[panel].set_scope("local")
    else:
        tiles = s[C].fuse(jo, io)
    s[acc].compute_at(s[C], tiles)
    ti, tj = s[acc].op.axis
    (tk,) = s[acc].op.reduce_axis
    ko, ki = s[acc].split(tk, factor=k_unroll)
    s[acc].reorder(ko, ki, ti, tj)
    s[acc].unroll(ki)
    s[acc].pragma(ki, "unroll_explicit", False)  # LLVM unrolls the steps: loom's copies cost time
    s[acc].unroll(ti)
    _vectorize_columns(s[acc], tj, cols, lanes)
    if parallel:
        s[C].parallel(panel_loop if per_panel else tiles)
    if pack:
        p, row, c = s[panel].op.axis
        if group > 1:  # B's row by row, each row's panels in turn
            s[panel].reorder(row, p, c)
            s[panel].unroll(p)
        s[panel].vectorize(c)
        if parallel and not per_panel:
            s[panel].parallel(p)
    return s, [A, B, C]


def _packs_per_panel(n: int, cols: int, panel_bytes: int, target: Target | None) -> bool:
    """Whether the matmul packs each panel of B inside the loop over panels, the panel loop
    parallel (MIN_PANEL_TASKS), rather than all of B before the tiles. Not when the
    panels do not divide n: the partial last one would be peeled off the parallel loop (its
    bound checks are `likely` conditions) and run on one thread after the others."""
    return n % cols == 0 and n // cols >= MIN_PANEL_TASKS and panel_bytes <= _panel_stack(target)


def _panel_accumulators(unit: VectorUnit) -> int:
    """The accumulators of a per-panel matmul's tile: WIDE_PANEL_ACCUMULATORS on a core that
    runs 512-bit registers whole, else dense_tiles.ACCUMULATORS's."""
    if unit.vector_bytes >= 64 and unit.registers >= 32 and not unit.halves:
        return WIDE_PANEL_ACCUMULATORS
    return ACCUMULATORS[32 if unit.registers >= 32 else 16]


def _padded_rows(m: int, rows: int, vectors: int, accumulators: int) -> int:
    """The rows of a tile of `vectors` vectors a row: all of `accumulators`' (m padded to
    whole tiles: PADDED_ROWS_MAX_WASTE), or `rows` (choose_tile's)."""
    full = max(1, min(m, accumulators // vectors))
    covered = -(-m // full) * full
    if full > rows and covered <= m * (1 + PADDED_ROWS_MAX_WASTE):
        return full
    return rows


def _panel_group(panels: int, panel_bytes: int, target: Target | None) -> int:
    """The panels a per-panel matmul packs together (PANEL_GROUP), or 1."""
    fits = PANEL_GROUP * panel_bytes <= _panel_stack(target)
    if panels % PANEL_GROUP or panels // PANEL_GROUP < MIN_PANEL_TASKS or not fits:
        return 1
    return PANEL_GROUP


def _panel_stack(target: Target | None) -> int:
    """The most bytes of packed panels a thread's stack holds (PANEL_STACK_BYTES)."""
    if target is None:
        return PANEL_STACK_BYTES
    return min(PANEL_STACK_BYTES, target.stack_limit // 2)


def _packed(B: Tensor, cols: int) -> Tensor:
    """B's columns in panels of `cols`, each contiguous: packedB[p, k, c] = B[k, p*cols + c]."""
    k, n = (int(d) for d in B.shape)
    zero = te.const(0, B.dtype)
    return te.compute(
        (-(-n // cols), k, cols),
        lambda p, r, c: (
            te.if_then_else(p * cols + c < n, B[r, p * cols + c], zero)
            if n % cols
            else B[r, p * cols + c]
        ),
        name="packedB",
    )


def _vectorize_columns(stage, axis, extent: int, lanes: int) -> None:
    """Vectorize `axis` (`extent` iterations) a register (`lanes`) at a time, the registers
    unrolled."""
    if extent > lanes and extent % lanes == 0:
        outer, inner = stage.split(axis, factor=lanes)
        stage.unroll(outer)
        stage.vectorize(inner)
    else:
        stage.vectorize(axis)


def pack_weights(b: np.ndarray, cols: int) -> np.ndarray:
    """B (k x n) in the layout `matmul(..., prepacked=True)` reads: panels of `cols` columns,
    out[p, k, c] = b[k, p*cols + c], zero past n. `cols` is the last dimension of that
    matmul's B argument."""
    b = np.asarray(b)
    if b.ndim != 2:
        raise ValueError(f"pack_weights: b must be a matrix, got shape {b.shape}")
    if not isinstance(cols, int) or cols < 1:
        raise ValueError(f"pack_weights: cols must be a positive int, got {cols!r}")
    k, n = b.shape
    panels = -(-n // cols)
    padded = np.zeros((k, panels * cols), b.dtype)
    padded[:, :n] = b
    return np.ascontiguousarray(padded.reshape(k, panels, cols).transpose(1, 0, 2))


def elementwise_kernel(
    fn: Callable[..., PrimExpr],
    shape: tuple[int, ...],
    n_inputs: int,
    dtype: str = "float32",
    *,
    chunk: int = 1 << 16,
    vector: int = 16,
    parallel: bool = True,
) -> tuple[Schedule, list[Tensor]]:
    """out = fn(in_0, ..., in_{n-1}) element by element, streaming at memory speed: the flattened
    iteration space is cut into `chunk`-element blocks (run in parallel), each block into
    `vector`-lane vector operations."""
    inputs = [te.placeholder(shape, dtype, name=f"X{k}") for k in range(n_inputs)]
    out = elementwise(fn, *inputs, name="Y")
    s = te.create_schedule(out.op)
    flat = s[out].fuse(*out.op.axis) if len(shape) > 1 else out.op.axis[0]
    outer, inner = s[out].split(flat, factor=chunk)
    _, lanes = s[out].split(inner, factor=vector)
    s[out].vectorize(lanes)
    if parallel:
        s[out].parallel(outer)
    return s, [*inputs, out]
