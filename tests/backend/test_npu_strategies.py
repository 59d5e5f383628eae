"""The NPU's weight-stationary strategies (docs/npu-strategies.md): bit-exact at ragged sizes
and across row blocks, double-buffered copies at distinct scratchpad rows, and the figures the
decoupled cycle model gives them (utilization counted with the problem's own MACs, not the
padding the array also multiplies)."""

import numpy as np
import pytest

import loom
from loom.backend import npu
from loom.backend.npu import simulator as npu_sim
from loom.memory.program import PLAN_ATTR

from . import npu_reference as ref

DIM = npu_sim.DIM


def run_matmul(m, n, k, seed=0, **options):
    """(C, counters) of the matmul strategy on random operands, checked against numpy."""
    mod = loom.build(
        *npu.BACKEND.strategy("matmul", m, n, k, multiplier=5, shift=11, relu=True, **options),
        target="npu",
        name="mm",
    )
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    bias = rng.integers(-20000, 20000, n).astype(np.int32)
    c = np.zeros((m, n), np.int8)
    npu_sim.reset()
    mod["mm"](a, b, bias, c)
    np.testing.assert_array_equal(c, ref.matmul(a, b, bias, 5, 11, True))
    return npu_sim.counters()


def run_conv(data, kernel, stride=1, padding=0, pad_value=0):
    sch, args = npu.BACKEND.strategy(
        "conv2d",
        data,
        kernel,
        stride=stride,
        padding=padding,
        pad_value=pad_value,
        multiplier=7,
        shift=10,
        relu=True,
    )
    mod = loom.build(sch, args, target="npu", name="conv")
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, data).astype(np.int8)
    w = rng.integers(-128, 128, kernel).astype(np.int8)
    bias = rng.integers(-5000, 5000, kernel[3]).astype(np.int32)
    out = np.zeros(args[3].shape, np.int8)
    npu_sim.reset()
    mod["conv"](x, w, bias, out)
    xp = np.pad(x, ((0, 0), (padding,) * 2, (padding,) * 2, (0, 0)), constant_values=pad_value)
    np.testing.assert_array_equal(out, ref.conv2d_nhwc(xp, w, bias, stride, 0, 7, 10, True))
    return npu_sim.counters(), out.shape


def utilization(counters, macs):
    return macs / (counters["cycles"] * DIM * DIM)


@pytest.mark.parametrize(
    "shape, options",
    [
        ((40, 72, 56), {}),
        ((17, 5, 33), {}),
        ((1, 1, 1), {}),
        ((33, 47, 16), {"block_rows": 8}),  # five row blocks: A's block alternates copies
        ((50, 20, 70), {"block_rows": 24}),  # the last block is short
        ((30, 16, 45), {"weights": "resident", "block_rows": 16}),
        ((48, 40, 40), {"double_buffer": False}),
        ((513, 17, 1), {}),  # two row blocks of a one-column A
        ((1100, 33, 64), {}),  # three row blocks
    ],
)
def test_matmul_is_bit_exact_at_ragged_sizes_and_across_blocks(shape, options):
    run_matmul(*shape, **options)


@pytest.mark.parametrize(
    "data, kernel, stride, padding",
    [
        ((1, 40, 40, 20), (3, 3, 20, 18), 1, 1),  # four row blocks, ragged channels
        ((1, 37, 20, 8), (3, 3, 8, 8), 1, 1),  # 37 output rows: blocks of one row
        ((1, 39, 40, 16), (1, 1, 16, 16), 1, 0),  # blocks of 3 rows, one mvout each
        ((2, 9, 11, 3), (3, 3, 3, 5), 1, 1),  # two images
        ((1, 12, 7, 33), (1, 1, 33, 17), 1, 0),  # pointwise: accumulator rows are pixels
        ((1, 8, 9, 16), (2, 3, 16, 16), 1, 2),
        ((1, 10, 10, 20), (3, 3, 20, 18), 2, 1),
        ((1, 9, 40, 17), (2, 3, 17, 33), 3, 0),
        ((1, 4, 600, 8), (3, 3, 8, 8), 1, 1),  # an output row wider than half the accumulator
    ],
)
def test_conv2d_is_bit_exact_with_a_nonzero_pad_value(data, kernel, stride, padding):
    run_conv(data, kernel, stride, padding, pad_value=-3)


def test_matmul_256_cube_reads_each_operand_once_and_keeps_the_array_busy():
    m = n = k = 256
    counters = run_matmul(m, n, k)
    assert counters["bytes_in"] == m * k + k * n + 4 * n  # the minimum: each operand once
    assert utilization(counters, m * n * k) >= 0.85


def test_matmul_512_cube_keeps_the_array_busy():
    counters = run_matmul(512, 512, 512)
    assert counters["bytes_in"] <= 2 * (512 * 512 * 2 + 4 * 512)
    assert utilization(counters, 512**3) >= 0.85


def test_a_small_ragged_matmul_keeps_the_array_half_busy():
    m, n, k = 40, 72, 56
    counters = run_matmul(m, n, k)
    assert utilization(counters, m * n * k) >= 0.5


@pytest.mark.parametrize(
    "data, kernel, padding",
    [((1, 56, 56, 64), (3, 3, 64, 64), 1), ((1, 112, 112, 32), (1, 1, 32, 64), 0)],
    ids=["resnet18_3x3", "pointwise_112"],
)
def test_conv2d_layers_keep_the_array_busy(data, kernel, padding):
    counters, (n, oh, ow, f) = run_conv(data, kernel, 1, padding)
    macs = n * oh * ow * f * kernel[0] * kernel[1] * kernel[2]
    assert utilization(counters, macs) >= 0.7


def test_double_buffered_copies_get_their_own_scratchpad_rows():
    """plan_memory places each double-buffered buffer (both copies) apart from every other
    buffer; the kernel addresses copy `i % 2` of it."""
    sch, args = npu.BACKEND.strategy("matmul", 64, 64, 64, block_rows=16)
    mod = loom.lower(sch, args, name="mm", target="npu")
    plan = mod.attr(PLAN_ATTR)
    a, b, acc = (plan.where(name) for name in ("A.npu.spad", "B.npu.spad", "acc"))
    assert (a.size, b.size) == (2 * 4 * 16 * DIM, 2 * DIM * DIM)  # A: 4 slices x 16 rows
    assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset
    assert acc.size == 2 * 16 * DIM * 4  # two accumulator tiles of 16 rows
    kernel = str(loom.lower(sch, args, name="mm"))
    for loop in ("i.outer", "j.outer", "kt"):  # A's block, the accumulator tile, B's tile
        assert f"floormod({loop}, 2)" in kernel
