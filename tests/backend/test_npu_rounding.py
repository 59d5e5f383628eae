"""The NPU's two roundings through loom: `requantize(..., rounding=)` in the IR, its recognition
by the mvout pragma rule (config_st's rounding operand), and the matmul and conv2d strategies
bit-exact with numpy at ties, where halves up and halves to even differ (docs/npu.md, mvout)."""

import re

import numpy as np
import pytest

import loom
from loom import te
from loom.backend import npu
from loom.backend.npu import simulator as npu_sim

from . import npu_reference as ref

ROUNDINGS = ("half_up", "half_even")


def tie_heavy(shape, seed):
    """Small int8 values: their products' sums are odd half of the time (a tie after a shift
    by 1) and stay far from saturation."""
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(np.int8)


@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_matmul_rounds_as_asked(rounding):
    m, n, k = 20, 37, 50
    sch, args = npu.BACKEND.strategy("matmul", m, n, k, multiplier=3, shift=1, rounding=rounding)
    mod = loom.build(sch, args, target="npu", name="mm")
    a, b = tie_heavy((m, k), 0), tie_heavy((k, n), 1)
    bias = np.random.default_rng(2).integers(-40, 40, n).astype(np.int32)
    c = np.zeros((m, n), np.int8)
    mod["mm"](a, b, bias, c)
    np.testing.assert_array_equal(c, ref.matmul(a, b, bias, 3, 1, False, rounding))
    other = ROUNDINGS[1 - ROUNDINGS.index(rounding)]
    differs = c != ref.matmul(a, b, bias, 3, 1, False, other)
    assert 0.1 < np.mean(differs) < 0.4  # an odd sum times 3 is a tie: half of those differ


@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_conv2d_rounds_as_asked(rounding):
    data, kernel = (1, 9, 11, 20), (3, 3, 20, 18)
    sch, args = npu.BACKEND.strategy(
        "conv2d", data, kernel, padding=1, multiplier=1, shift=2, relu=True, rounding=rounding
    )
    mod = loom.build(sch, args, target="npu", name="conv")
    x, w = tie_heavy(data, 3), tie_heavy(kernel, 4)
    bias = np.random.default_rng(5).integers(-40, 40, kernel[3]).astype(np.int32)
    out = np.zeros(args[3].shape, np.int8)
    mod["conv"](x, w, bias, out)
    want = ref.conv2d_nhwc(x, w, bias, 1, 1, 1, 2, True, rounding)
    np.testing.assert_array_equal(out, want)
    other = ROUNDINGS[1 - ROUNDINGS.index(rounding)]
    assert np.any(out != ref.conv2d_nhwc(x, w, bias, 1, 1, 1, 2, True, other))


def test_the_kernel_configures_the_rounding_it_was_built_with():
    for rounding, code in (("half_up", 0), ("half_even", 1)):
        sch, args = npu.BACKEND.strategy(
            "matmul", 16, 16, 16, multiplier=5, shift=3, rounding=rounding
        )
        text = str(loom.lower(sch, args, name="mm", target="npu")["mm_npu"])
        # config_st(stride, multiplier, shift, relu, rounding)
        operands = re.findall(r'"npu_config_st", (\d+), (\d+), (\d+), (\d+), (\d+)', text)
        assert operands and set(operands) == {("16", "5", "3", "0", str(code))}, text


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("multiplier, shift, relu", [(12345, 13, True), (3, 1, False), (1, 0, 0)])
def test_requantize_means_the_same_in_the_ir_as_in_mvout(rounding, multiplier, shift, relu):
    X = te.placeholder((64,), "int32", name="X")
    Y = te.compute(
        (64,), lambda i: npu.requantize(X[i], multiplier, shift, relu, rounding), name="Y"
    )
    rng = np.random.default_rng(0)
    x = rng.integers(-(2**31), 2**31 - 1, 64).astype(np.int32)
    x[:32] = (2 * rng.integers(-1000, 1000, 32) + 1) << max(shift - 1, 0)  # ties (shift > 0)
    y = np.zeros(64, np.int8)
    loom.ir.interpret(loom.lower(te.create_schedule(Y.op), [X, Y]), x, y)
    np.testing.assert_array_equal(y, ref.requantize(x, multiplier, shift, relu, rounding))


def test_bad_roundings_are_refused():
    x = te.placeholder((4,), "int32", name="x")
    with pytest.raises(ValueError, match=r"rounding must be one of \('half_up', 'half_even'\)"):
        npu.requantize(x[0], 3, 4, False, "even")
    with pytest.raises(ValueError, match="rounding must be one of"):
        npu.BACKEND.strategy("matmul", 4, 4, 4, rounding=1)
    with pytest.raises(loom.LoomError, match="npu_mvout: rounding must be one of"):
        npu_sim.rounding_code("nearest", "npu_mvout")
