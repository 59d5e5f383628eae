"""Operator strategies for the NPU: int8 matmul (here) and conv2d (NHWC, loom/backend/npu/
conv.py) with bias, requantization and optional ReLU (docs/npu-strategies.md).

Both compute `acc = bias + sum(int32(x) * int32(w))` in the accumulator, stage their operands
in the scratchpad with `mvin`, tensorize the product into `preload`/`compute` (streaming many
rows through each weight tile), and write each output tile back once through `mvout`,
requantized.
"""

from __future__ import annotations

from loom import te
from loom.errors import LoomError
from loom.te.schedule import Schedule
from loom.te.tensor import Tensor

from .arch import ACC, ACC_ROWS, DIM, SPAD, SPAD_ROWS
from .conv import conv2d_nhwc
from .intrinsics import GEMM_STREAM_BIAS
from .packing import column_slices, npu_rows, slices
from .requant import integer, requantize


def _block_rows(m: int, k: int, weights: str, block_rows: int | None) -> tuple[int, bool]:
    """(rows of A per block, whether A's block gets two copies): the most rows (fewest
    blocks, so B is read fewest times) whose accumulator tile (two copies) and A's block in
    DIM-column slices fit beside B's tiles (2 x DIM rows, or all of B when resident); A's
    block is double-buffered when that fits too (with one copy, the next block's first slices
    wait only for the last computes reading them)."""
    b_rows = slices(k) * DIM if weights == "resident" else 2 * DIM

    def fits(rows: int, copies: int) -> bool:
        return 2 * rows <= ACC_ROWS and copies * slices(k) * rows + b_rows <= SPAD_ROWS

    if block_rows is not None:
        block_rows = integer("matmul", "block_rows", block_rows)
        if not 1 <= block_rows <= ACC_ROWS // 2:
            raise LoomError(f"matmul: block_rows must be in [1, {ACC_ROWS // 2}], got {block_rows}")
        return block_rows, fits(block_rows, 2)
    for blocks in range(1, m + 1):
        rows = -(-m // blocks)
        if fits(rows, 1):
            return rows, blocks > 1 and fits(rows, 2)
    return 1, False  # nothing fits: the build names the scratchpad's capacity


def matmul(
    m: int,
    n: int,
    k: int,
    *,
    multiplier: int = 1,
    shift: int = 0,
    relu: bool = False,
    rounding: str = "half_up",
    weights: str = "tile",
    block_rows: int | None = None,
    double_buffer: bool = True,
) -> tuple[Schedule, list[Tensor]]:
    """C = requantize(A @ B + bias): A (m, k) int8, B (k, n) int8, bias (n,) int32, C int8,
    halves rounded as `rounding` says ("half_up" or "half_even", docs/npu.md, mvout).

    Weight-stationary streaming (docs/npu-strategies.md): A is cut into blocks of `block_rows`
    rows (default: the most that fit), each staged once in the scratchpad in DIM-column
    slices; per block and DIM-column tile of C, the bias is broadcast into the accumulator
    tile, then per DIM x DIM tile of B one preload of it and one compute streaming the whole
    block through it, and the tile is stored once (requantized). `weights="tile"` stages each
    tile of B for its preload; "resident" keeps all of B in the scratchpad (for at most DIM
    output columns), which must fit. The accumulator tile, B's tile and A's block are
    double-buffered (`double_buffer=False`: one copy each, for comparison), so the next
    tile's loads and the previous tile's store overlap the current computes."""
    if weights not in ("tile", "resident"):
        raise LoomError(f"weights must be 'tile' or 'resident', got {weights!r}")
    if weights == "resident" and n > DIM:
        raise LoomError(f"resident weights need at most {DIM} output columns, got {n}")
    A = te.placeholder((m, k), "int8", name="A")
    B = te.placeholder((k, n), "int8", name="B")
    bias = te.placeholder((n,), "int32", name="bias")
    A_s = column_slices(A, "A.npu.spad")  # (k slices, m, DIM)
    # the reduction in DIM-wide slices (a slice of A is what a compute streams); past k, A's
    # slice holds zeros, so whatever B's staged tile holds in those rows adds nothing (the
    # tensorized stage never reads B itself there)
    kt, kk = te.reduce_axis(slices(k), name="kt"), te.reduce_axis(DIM, name="kk")
    acc = te.compute(
        (m, n),
        lambda i, j: te.sum(
            A_s[kt, i, kk].astype("int32") * B[kt * DIM + kk, j].astype("int32"),
            axis=[kt, kk],
            init=bias[j],
        ),
        name="acc",
    )
    C = te.compute(
        (m, n), lambda i, j: requantize(acc[i, j], multiplier, shift, relu, rounding), name="C"
    )
    rows, double_a = _block_rows(m, k, weights, block_rows)
    s = te.create_schedule(C.op)
    s[acc].set_scope(ACC)
    B_s = s.cache_read(B, SPAD, [acc])
    io, jo, ii, _ = s[C].tile(*C.op.axis, rows, DIM)
    s[C].pragma(ii, "npu_mvout")
    s[acc].compute_at(s[C], jo)
    ai, aj = s[acc].op.axis
    s[acc].reorder(kt, ai, aj, kk)
    s[acc].tensorize(ai, GEMM_STREAM_BIAS)
    npu_rows(s, acc, 0)
    npu_rows(s, B_s, 0)
    s[A_s].set_scope(SPAD)
    s[A_s].pragma(s[A_s].op.axis[1], "npu_mvin")  # a slice's rows: one mvin
    s[A_s].compute_at(s[C], io)
    s[B_s].pragma(s[B_s].op.axis[0], "npu_mvin")
    if weights == "tile":
        s[B_s].compute_at(s[acc], kt)
    buffered = [acc, B_s] + ([A_s] if double_a else [])
    for stage in buffered if double_buffer else []:
        s[stage].double_buffer()  # (a loop of one iteration keeps one copy)
    return s, [A, B, bias, C]


__all__ = ["conv2d_nhwc", "matmul"]
