"""The quantized graph operators (loom/graph/ops/quant.py) against onnxruntime: infer, numpy
evaluate and the compiled compute, for every dtype combination, granularity and attribute loom
supports, with values that hit the saturation bounds and exact .5 ties.

int8 weights stay within [-64, 64) where onnxruntime multiplies uint8 by int8: its AVX2 kernels
without VNNI add pairs of products in saturating int16 (vpmaddubsw), which larger weights can
overflow. Where onnxruntime refuses what ONNX allows (per-row `a` parameters, per-channel zero
points that differ, int8 x with uint8 w), the compiled kernel is checked against loom's evaluate,
and evaluate against onnxruntime on an equivalent model (sliced per row or channel, or shifted
to uint8).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import loom
from loom import te
from loom.errors import LoomError
from loom.graph.ir import Node, TensorType
from loom.graph.ops import OPERATORS, Pattern, unsupported
from tests.graph.opcheck import check_op

F32 = np.float32
TIES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5], F32)


def rng(seed=0):
    return np.random.default_rng(seed)


def qints(shape, dt, seed=0, low=None, high=None):
    """Random integers of `dt` over its range (or [low, high))."""
    info = np.iinfo(dt)
    low = info.min if low is None else low
    high = info.max + 1 if high is None else high
    return rng(seed).integers(low, high, shape).astype(dt)


def scalar(value, dt=F32):
    return np.array(value, dt)


def check_kernel(op, inputs, attrs=None, n_outputs=1):
    """loom's compiled compute against its own evaluate (no onnxruntime); returns evaluate's."""
    operator = OPERATORS.get(op)
    names = [f"in{k}" if x is not None else "" for k, x in enumerate(inputs)]
    node = Node(op, names, [f"out{k}" for k in range(n_outputs)], dict(attrs or {}))
    types = [None if x is None else TensorType.of(x) for x in inputs]
    out_types = list(operator.infer(node, types, [None] * len(inputs)))
    want = [np.asarray(w) for w in operator.evaluate(node, list(inputs))]
    assert out_types == [TensorType.of(w) for w in want]
    placeholders = [
        None if x is None else te.placeholder(x.shape, dtype=str(x.dtype), name=f"in{k}")
        for k, x in enumerate(inputs)
    ]
    outs = list(operator.compute(node, placeholders, [None] * len(inputs), out_types))
    used = [k for k, p in enumerate(placeholders) if p is not None]
    f = loom.build(
        te.create_schedule([t.op for t in outs]),
        [placeholders[k] for k in used] + outs,
        target="llvm",
        name="op",
    )
    results = [np.zeros(t.shape, t.dtype.numpy) for t in out_types]
    f(*[inputs[k] for k in used], *results)
    for got, w in zip(results, want):
        np.testing.assert_array_equal(got, w)
    return want


# -- QuantizeLinear -------------------------------------------------------------------------------


def _spread(shape, seed=0):
    """Values across and beyond the quantized ranges, with exact ties in front."""
    x = (rng(seed).standard_normal(shape) * 200).astype(F32)
    flat = x.reshape(-1)
    flat[: len(TIES)] = TIES
    flat[len(TIES) : len(TIES) + 2] = [1e9, -1e9]
    return x


@pytest.mark.parametrize(
    "zp",
    [
        scalar(3, np.int8),
        scalar(-128, np.int8),
        scalar(200, np.uint8),
        scalar(-300, np.int16),
        scalar(40000, np.uint16),
        np.array([7], np.uint8),
    ],
)
def test_quantize_per_tensor(zp):
    x = _spread((2, 3, 4))
    check_op("QuantizeLinear", [x, scalar(1.0), zp])
    check_op("QuantizeLinear", [x * F32(0.5), scalar(0.5), zp])  # x / 0.5 are the ties again


def test_quantize_without_zero_point_and_with_output_dtype():
    x = _spread((3, 5))
    check_op("QuantizeLinear", [x, scalar(2.0)])  # uint8
    check_op("QuantizeLinear", [x, scalar(2.0)], {"output_dtype": 3})  # int8
    check_op("QuantizeLinear", [x, scalar(0.1), None], {"output_dtype": 5})  # int16
    check_op("QuantizeLinear", [scalar(2.5), scalar(1.0), scalar(0, np.int8)])  # a scalar x


def test_quantize_special_values():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, 126.5, 127.5, -128.5], F32)
    for zp in (scalar(0, np.int8), scalar(5, np.uint8), scalar(-9, np.int16)):
        check_op("QuantizeLinear", [x, scalar(1.0), zp])


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
def test_quantize_per_axis(axis):
    x = _spread((3, 4, 5), seed=axis + 5)
    n = x.shape[axis]
    scale = np.linspace(0.25, 2.0, n).astype(F32)
    zp = qints((n,), np.int8, seed=axis + 1)
    check_op("QuantizeLinear", [x, scale, zp], {"axis": axis})
    check_op("QuantizeLinear", [x, scale, zp.astype(np.uint8)], {"axis": axis})


def test_quantize_constant_parameters():
    x = _spread((4, 6))
    check_op("QuantizeLinear", [x, scalar(0.5), scalar(-3, np.int8)], constant=(1, 2))
    scale = np.array([0.5, 1, 2, 4], F32)
    # the kernel reads a per-axis scale from its tensor, which a graph always gives
    inputs = [x, scale, np.arange(4, dtype=np.uint8)]
    check_op("QuantizeLinear", inputs, {"axis": 0}, constant=(1,), compiled=False)


# -- DequantizeLinear -----------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16])
def test_dequantize_per_tensor_and_axis(dt):
    x = qints((2, 3, 4), dt, seed=1)
    check_op("DequantizeLinear", [x, scalar(0.37), qints((), dt, seed=2)])
    check_op("DequantizeLinear", [x, scalar(0.37)])
    scale = np.array([0.1, 1.7, 3e-3], F32)
    check_op("DequantizeLinear", [x, scale, qints((3,), dt, seed=3)], {"axis": 1})
    scale = np.array([0.1, 1.7, 3e-3, 9.0], F32)
    check_op("DequantizeLinear", [x, scale, qints((4,), dt, seed=3)], {"axis": -1})


def test_dequantize_int32_float16_and_constants():
    x = qints((3, 4), np.int32, seed=4)
    check_op("DequantizeLinear", [x, scalar(1e-4)])
    check_op("DequantizeLinear", [x, np.array([1e-4, 2e-3, 3e-5], F32)], {"axis": 0})
    x8 = qints((3, 4), np.int8, seed=5)
    check_op("DequantizeLinear", [x8, scalar(0.3, np.float16), scalar(2, np.int8)], rtol=1e-3)
    check_op("DequantizeLinear", [x8, scalar(0.3), scalar(2, np.int8)], constant=(1, 2))


# -- DynamicQuantizeLinear ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x",
    [
        (np.random.default_rng(0).standard_normal((3, 4, 5)) * 3).astype(F32),
        np.array([0.5, 1.0, 254.0, 3.5], F32),  # min adjusted to 0
        np.array([-7.0, -0.25, -3.5], F32),  # max adjusted to 0
        np.array([-0.5, 254.5, 3.5, 4.5, -0.5], F32),  # scale 1, zero point 0.5: ties
        np.array([-1.5, 253.5, 2.5, -1.0], F32),  # zero point 1.5 rounds to 2
        np.zeros((2, 3), F32),  # an empty range: scale 1
        np.array(3.0, F32),
        np.array([-1.5, np.nan, 3.5, 4.5, 2.0], F32),  # onnxruntime skips this NaN too
    ],
)
def test_dynamic_quantize(x):
    check_op("DynamicQuantizeLinear", [x], n_outputs=3)


# -- QLinearConv ----------------------------------------------------------------------------------


def _qconv_inputs(x, w, x_zp=5, w_zp=0, y_zp=3, scales=(0.02, 0.05, 0.25), bias=False):
    """QLinearConv's inputs: per-tensor parameters as onnx's tests give them (w's as 1-D of one
    element), per-channel ones as given; a random int32 bias if `bias`."""
    inputs = [
        x,
        scalar(scales[0]),
        scalar(x_zp, x.dtype),
        w,
        np.atleast_1d(np.asarray(scales[1], F32)),
        np.atleast_1d(np.asarray(w_zp, w.dtype)),
        scalar(scales[2]),
        scalar(y_zp, x.dtype),
    ]
    if bias:
        inputs.append(rng(9).integers(-2000, 2000, w.shape[0]).astype(np.int32))
    return inputs


# (x dtype, w dtype): the combinations onnxruntime has kernels for
COMBOS = [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)]


def _weights(shape, dt, seed=1):
    return qints(shape, dt, seed) if dt == np.uint8 else qints(shape, dt, seed, -64, 64)


@pytest.mark.parametrize("xdt, wdt", COMBOS)
@pytest.mark.parametrize(
    "w_shape, attrs",
    [
        ((4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
        ((4, 3, 3, 2), {"strides": [2, 2], "pads": [1, 0, 2, 1]}),
        ((4, 3, 2, 2), {"dilations": [2, 2], "pads": [1, 1, 0, 2]}),
        ((6, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),  # depthwise
        ((4, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
        ((4, 3, 1, 1), {}),  # pointwise
    ],
)
def test_qlinear_conv_2d(xdt, wdt, w_shape, attrs):
    x = qints((1, 3, 7, 6), xdt, seed=2)
    w = _weights(w_shape, wdt)
    check_op("QLinearConv", _qconv_inputs(x, w, bias=True), attrs)


@pytest.mark.parametrize("xdt, wdt", COMBOS)
def test_qlinear_conv_per_channel_and_grouped(xdt, wdt):
    x = qints((2, 4, 5, 5), xdt, seed=3)
    w = _weights((6, 2, 3, 3), wdt, seed=4)
    scales = (0.03, np.linspace(0.01, 0.08, 6).astype(F32), 0.4)
    zp = np.full(6, 2 if wdt == np.uint8 else 0, wdt)
    inputs = _qconv_inputs(x, w, 0, zp, -1 if xdt == np.int8 else 100, scales)
    check_op("QLinearConv", inputs, {"group": 2, "pads": [0, 1, 1, 0]})


def test_qlinear_conv_1d_and_3d():
    x = qints((1, 2, 9), np.uint8, seed=5)
    w = _weights((3, 2, 3), np.int8, seed=6)
    check_op("QLinearConv", _qconv_inputs(x, w), {"strides": [2], "pads": [2, 1], "dilations": [2]})
    x = qints((1, 2, 4, 5, 4), np.uint8, seed=7)
    w = _weights((3, 2, 2, 3, 2), np.uint8, seed=8)
    check_op("QLinearConv", _qconv_inputs(x, w, 9, 7, 2), {"pads": [1] * 6})


def test_qlinear_conv_ties_and_saturation():
    # multiplier 1 * 1 / 2: every odd sum is an exact .5 tie; large sums saturate both ways
    x = qints((1, 2, 5, 5), np.int8, seed=10, low=-4, high=5)
    w = qints((3, 2, 2, 2), np.int8, seed=11, low=-3, high=4)
    check_op("QLinearConv", _qconv_inputs(x, w, 0, 0, 1, (1.0, 1.0, 2.0)), {"pads": [1, 1, 1, 1]})
    inputs = _qconv_inputs(x, w, -4, 0, 0, (1.0, 3.0, 0.5), bias=True)
    got = check_op("QLinearConv", inputs, {})[0]
    assert got.min() == -128 and got.max() == 127


def test_qlinear_conv_constant_parameters():
    x = qints((1, 3, 6, 6), np.uint8, seed=12)
    w = _weights((4, 3, 3, 3), np.int8, seed=13)
    inputs = _qconv_inputs(x, w, 128, 0, 64, bias=True)
    check_op("QLinearConv", inputs, {"pads": [1, 1, 1, 1]}, constant=(1, 2, 4, 5, 6, 7))
    # a constant int8 weight with zero points 0 takes onnxruntime's symmetric (prepacked) path
    scales = (0.03, np.linspace(0.01, 0.04, 4).astype(F32), 0.2)
    inputs = _qconv_inputs(x, w, 128, np.zeros(4, np.int8), 64, scales, bias=True)
    constant = (1, 2, 3, 4, 5, 6, 7, 8)
    check_op("QLinearConv", inputs, {"pads": [1, 1, 1, 1]}, constant=constant, compiled=False)
    check_op("QLinearConv", inputs, {"pads": [1, 1, 1, 1]})
    x8 = qints((1, 6, 5, 5), np.int8, seed=14)
    w8 = _weights((6, 1, 3, 3), np.int8, seed=15)
    inputs = _qconv_inputs(x8, w8, -3, np.zeros(6, np.int8), 4, (0.05, 0.02, 0.3))
    check_op("QLinearConv", inputs, {"group": 6}, constant=range(1, 8), compiled=False)


def test_qlinear_conv_what_onnxruntime_refuses():
    """Differing per-channel weight zero points: each channel alone against onnxruntime."""
    x = qints((1, 2, 5, 5), np.uint8, seed=16)
    w = qints((3, 2, 3, 3), np.uint8, seed=17)
    zp = np.array([3, 200, 77], np.uint8)
    scales = (0.02, np.array([0.01, 0.03, 0.02], F32), 0.3)
    inputs = _qconv_inputs(x, w, 10, zp, 20, scales, bias=True)
    got = check_kernel("QLinearConv", inputs, {"pads": [1, 1, 1, 1]})[0]
    for m in range(3):
        one = _qconv_inputs(x, w[m : m + 1], 10, zp[m], 20, (0.02, scales[1][m], 0.3))
        one.append(inputs[8][m : m + 1])
        want = check_op("QLinearConv", one, {"pads": [1, 1, 1, 1]}, compiled=False)[0]
        np.testing.assert_array_equal(got[:, m : m + 1], want)
    # int8 x with uint8 w: x + 128 with its zero point + 128 is the same product
    x8 = qints((1, 2, 5, 5), np.int8, seed=18)
    inputs = _qconv_inputs(x8, w, -7, 9, -2)
    got = check_kernel("QLinearConv", inputs)[0]
    shifted = _qconv_inputs((x8.astype(np.int32) + 128).astype(np.uint8), w, 121, 9, 126)
    want = check_op("QLinearConv", shifted, compiled=False)[0]
    np.testing.assert_array_equal(got.astype(np.int32) + 128, want)


# -- ConvInteger ----------------------------------------------------------------------------------


@pytest.mark.parametrize("xdt, wdt", COMBOS)
@pytest.mark.parametrize(
    "attrs",
    [{}, {"pads": [1, 2, 0, 1], "strides": [2, 1]}, {"dilations": [1, 2], "group": 2}],
)
def test_conv_integer(xdt, wdt, attrs):
    x = qints((1, 4, 6, 6), xdt, seed=20)
    w = _weights((4, 4 // attrs.get("group", 1), 3, 2), wdt, seed=21)
    check_op("ConvInteger", [x, w, scalar(7, xdt), scalar(3, wdt)], attrs)
    check_op("ConvInteger", [x, w], attrs)


def test_conv_integer_per_channel_zero_points():
    """onnxruntime takes per-tensor zero points only: each channel alone against it."""
    x = qints((1, 2, 5, 5), np.uint8, seed=22)
    w = qints((3, 2, 2, 2), np.uint8, seed=23)
    zp = np.array([1, 130, 255], np.uint8)
    got = check_kernel("ConvInteger", [x, w, scalar(4, np.uint8), zp], {"pads": [1, 1, 1, 1]})[0]
    for m in range(3):
        one = [x, w[m : m + 1], scalar(4, np.uint8), zp[m : m + 1]]
        want = check_op("ConvInteger", one, {"pads": [1, 1, 1, 1]}, compiled=False)[0]
        np.testing.assert_array_equal(got[:, m : m + 1], want)


# -- QLinearMatMul --------------------------------------------------------------------------------


def _qmm_inputs(a, b, a_zp=3, b_zp=2, y_zp=1, scales=(0.02, 0.03, 0.05), b_shape=None):
    """QLinearMatMul's inputs; b's parameters reshaped to `b_shape` if given."""

    def param(value, dt, shape=None):
        value = np.asarray(value, dt)
        return value if shape is None else value.reshape(shape)

    return [
        a,
        param(scales[0], F32),
        param(a_zp, a.dtype),
        b,
        param(scales[1], F32, b_shape),
        param(b_zp, b.dtype, b_shape),
        param(scales[2], F32),
        param(y_zp, a.dtype),
    ]


@pytest.mark.parametrize("adt, bdt", COMBOS)
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((3, 8), (8, 5)),
        ((2, 3, 4), (4, 5)),
        ((2, 1, 3, 4), (3, 4, 2)),
        ((4,), (4, 3)),
        ((2, 4), (4,)),
    ],
)
def test_qlinear_matmul(adt, bdt, a_shape, b_shape):
    a = qints(a_shape, adt, seed=30)
    b = _weights(b_shape, bdt, seed=31)
    check_op("QLinearMatMul", _qmm_inputs(a, b, y_zp=-100 if adt == np.int8 else 100))


@pytest.mark.parametrize("adt, bdt", COMBOS)
def test_qlinear_matmul_per_column(adt, bdt):
    a = qints((2, 3, 6), adt, seed=32)
    b = _weights((2, 6, 4), bdt, seed=33)
    scales = (0.02, np.linspace(0.01, 0.05, 8).astype(F32), 0.04)
    zp = qints((8,), bdt, seed=34, low=0, high=60)
    check_op("QLinearMatMul", _qmm_inputs(a, b, 3, zp, 2, scales, b_shape=(2, 1, 4)))
    b2 = _weights((6, 4), bdt, seed=35)
    check_op("QLinearMatMul", _qmm_inputs(a, b2, 3, zp[:4], 2, (0.02, scales[1][:4], 0.04)))


def test_qlinear_matmul_ties_saturation_and_constants():
    a = qints((4, 6), np.int8, seed=36, low=-5, high=6)
    b = qints((6, 5), np.int8, seed=37, low=-5, high=6)
    check_op("QLinearMatMul", _qmm_inputs(a, b, 0, 0, 0, (1.0, 1.0, 2.0)))  # .5 ties
    got = check_op("QLinearMatMul", _qmm_inputs(a, b, 0, 0, 5, (1.0, 4.0, 0.25)))[0]
    assert got.min() == -128 and got.max() == 127
    inputs = _qmm_inputs(qints((3, 6), np.uint8), b, 100, 2, 50)
    check_op("QLinearMatMul", inputs, constant=(1, 2, 4, 5, 6, 7))
    check_op("QLinearMatMul", inputs, constant=(1, 2, 3, 4, 5, 6, 7), compiled=False)


def test_qlinear_matmul_what_onnxruntime_refuses():
    # per-row a parameters: each row alone against onnxruntime
    a = qints((3, 5), np.uint8, seed=38)
    b = qints((5, 4), np.uint8, seed=39)
    a_scale, a_zp = np.array([0.01, 0.02, 0.05], F32), np.array([1, 128, 250], np.uint8)
    inputs = _qmm_inputs(a, b, a_zp, 4, 9, (a_scale, 0.03, 0.07))
    got = check_kernel("QLinearMatMul", inputs)[0]
    for i in range(3):
        one = _qmm_inputs(a[i : i + 1], b, a_zp[i], 4, 9, (a_scale[i], 0.03, 0.07))
        np.testing.assert_array_equal(got[i : i + 1], check_op("QLinearMatMul", one)[0])
    # per-row as [..., M, 1] on a batch
    a3 = qints((2, 3, 5), np.uint8, seed=40)
    inputs = _qmm_inputs(a3, b, a_zp.reshape(1, 3, 1), 4, 9, (a_scale.reshape(1, 3, 1), 0.03, 0.07))
    got3 = check_kernel("QLinearMatMul", inputs)[0]
    for n in range(2):
        one = _qmm_inputs(a3[n], b, a_zp, 4, 9, (a_scale, 0.03, 0.07))
        np.testing.assert_array_equal(got3[n], check_kernel("QLinearMatMul", one)[0])
    # float16 scales (widened to float32) against the float32 values
    a16 = _qmm_inputs(a, b, 3, 4, 9, (0.0066, 0.00705, 0.0107))
    for k in (1, 4, 6):
        a16[k] = a16[k].astype(np.float16)
    got = check_kernel("QLinearMatMul", a16)[0]
    widened = [x.astype(F32) if x.dtype == np.float16 else x for x in a16]
    np.testing.assert_array_equal(got, check_op("QLinearMatMul", widened)[0])


# -- MatMulInteger --------------------------------------------------------------------------------


@pytest.mark.parametrize("adt, bdt", [*COMBOS, (np.int8, np.uint8)])
@pytest.mark.parametrize(
    "a_shape, b_shape", [((3, 7), (7, 4)), ((2, 1, 3, 4), (3, 4, 2)), ((4,), (2, 4, 3))]
)
def test_matmul_integer(adt, bdt, a_shape, b_shape):
    a = qints(a_shape, adt, seed=41)
    b = _weights(b_shape, bdt, seed=42)
    check_op("MatMulInteger", [a, b, scalar(5, adt), scalar(3, bdt)])
    check_op("MatMulInteger", [a, b])


def test_matmul_integer_zero_point_layouts():
    a = qints((3, 6), np.uint8, seed=43)
    b = qints((6, 4), np.int8, seed=44, low=-64, high=64)
    check_op("MatMulInteger", [a, b, scalar(9, np.uint8), np.array([1, -2, 3, 60], np.int8)])
    b3 = qints((2, 6, 4), np.int8, seed=45, low=-64, high=64)
    b_zp = qints((2, 1, 4), np.int8, seed=46)
    check_op("MatMulInteger", [a, b3, np.array([9], np.uint8), b_zp])
    # per-row a zero points (onnxruntime refuses them): row by row
    a_zp = np.array([0, 100, 255], np.uint8)
    got = check_kernel("MatMulInteger", [a, b, a_zp, scalar(2, np.int8)])[0]
    for i in range(3):
        want = check_op("MatMulInteger", [a[i : i + 1], b, a_zp[i : i + 1], scalar(2, np.int8)])
        np.testing.assert_array_equal(got[i : i + 1], want[0])


def test_integer_sums_wrap_in_int32():
    a = np.full((1, 70000), 255, np.uint8)
    b = np.full((70000, 1), 255, np.uint8)
    got = check_kernel("MatMulInteger", [a, b])[0]
    assert got[0, 0] == np.int64(255 * 255 * 70000).astype(np.int32)


# -- patterns, refusals and errors ----------------------------------------------------------------


def test_patterns():
    patterns = {
        "QuantizeLinear": Pattern.BROADCAST,
        "DequantizeLinear": Pattern.BROADCAST,
        "DynamicQuantizeLinear": Pattern.OPAQUE,
        "QLinearConv": Pattern.OUT_ELEMWISE_FUSABLE,
        "QLinearMatMul": Pattern.OUT_ELEMWISE_FUSABLE,
        "ConvInteger": Pattern.OUT_ELEMWISE_FUSABLE,
        "MatMulInteger": Pattern.OUT_ELEMWISE_FUSABLE,
    }
    for op, pattern in patterns.items():
        assert OPERATORS.get(op).pattern == pattern


@pytest.mark.parametrize(
    "op, attrs, reason",
    [
        ("QuantizeLinear", {"block_size": 2}, "block_size=2 (blocked quantization)"),
        ("QuantizeLinear", {"output_dtype": 17}, "output_dtype=17 is not supported"),
        ("QuantizeLinear", {"output_dtype": 22}, "no float8, int4 or int2 types"),
        ("DequantizeLinear", {"block_size": 4}, "block_size=4"),
        ("QLinearConv", {"auto_pad": "SAME_UPPER", "dilations": [2, 2]}, "dilations > 1"),
        ("QLinearConv", {"channels_last": 1}, "attribute channels_last not supported"),
        ("ConvInteger", {"auto_pad": "FULL"}, "auto_pad=FULL"),
        ("QLinearMatMul", {"transA": 1}, "attribute transA not supported"),
    ],
)
def test_unsupported(op, attrs, reason):
    why = unsupported(Node(op, ["x", "s", "z"], ["y"], attrs))
    assert why is not None and reason in why, why
    assert why.startswith(f"{op}: ")


def test_supported_attributes():
    attrs = {"axis": 0, "block_size": 0, "output_dtype": 2, "saturate": 0}
    assert unsupported(Node("QuantizeLinear", ["x", "s"], ["y"], attrs)) is None
    assert unsupported(Node("DequantizeLinear", ["x", "s"], ["y"], {"axis": -1})) is None


def _infer(op, types, attrs=None):
    node = Node(op, [f"in{k}" for k in range(len(types))], ["y"], attrs or {})
    return OPERATORS.get(op).infer(node, types, [None] * len(types))


@pytest.mark.parametrize(
    "op, types, attrs, message",
    [
        ("QuantizeLinear", [TensorType((4,), "int32"), TensorType((), "int32")], {}, "x must be"),
        (
            "QuantizeLinear",
            [TensorType((4,), "float32"), TensorType((), "float32"), TensorType((), "int8")],
            {"output_dtype": 2},
            "but y_zero_point is int8",
        ),
        (
            "QuantizeLinear",
            [TensorType((2, 3), "float32"), TensorType((2,), "float32")],
            {"axis": 1},
            "per-axis scale must have x's axis 1 length 3",
        ),
        (
            "QuantizeLinear",
            [TensorType((2, 3), "float32"), TensorType((2, 3), "float32")],
            {},
            "blocked quantization is not supported",
        ),
        (
            "DequantizeLinear",
            [TensorType((4,), "int8"), TensorType((), "float32"), TensorType((), "uint8")],
            {},
            "x_zero_point must have x's dtype int8",
        ),
        (
            "QLinearConv",
            [
                TensorType((1, 2, 4, 4), "uint8"),
                TensorType((), "float32"),
                TensorType((), "uint8"),
                TensorType((3, 2, 2, 2), "int8"),
                TensorType((2,), "float32"),
                TensorType((), "int8"),
                TensorType((), "float32"),
                TensorType((), "uint8"),
            ],
            {},
            "w_scale must be a scalar or have one value per output channel (3)",
        ),
        (
            "QLinearConv",
            [TensorType((1, 2, 4, 4), "float32")] + [TensorType((), "float32")] * 7,
            {},
            "x must be one of int8, uint8",
        ),
        (
            "QLinearMatMul",
            [
                TensorType((3, 4), "uint8"),
                TensorType((4,), "float32"),
                TensorType((4,), "uint8"),
                TensorType((4, 5), "uint8"),
                TensorType((), "float32"),
                TensorType((), "uint8"),
                TensorType((), "float32"),
                TensorType((), "uint8"),
            ],
            {},
            "a_zero_point of shape [4] is neither a scalar nor per row",
        ),
        (
            "MatMulInteger",
            [TensorType((3, 4), "uint8"), TensorType((5, 2), "uint8")],
            {},
            "inner dimensions differ",
        ),
    ],
)
def test_infer_errors(op, types, attrs, message):
    with pytest.raises((LoomError, ValueError), match=re.escape(message)):
        _infer(op, types, attrs)


# -- what quantized models run between these: int8/uint8 tensors ---------------------------------


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
def test_int8_tensors_through_other_operators(dt):
    x = qints((1, 2, 5, 5), dt, seed=50)
    y = qints((1, 2, 5, 5), dt, seed=51, low=0, high=50)
    if dt == np.int8:  # ONNX's Relu takes signed integers only
        check_op("Relu", [x])
    check_op("MaxPool", [x], {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0]})
    check_op("Reshape", [x, np.array([2, -1], np.int64)], constant=(1,))
    check_op("Flatten", [x], {"axis": 2})
    check_op("Transpose", [x], {"perm": [0, 2, 3, 1]})
    check_op("Concat", [x, y], {"axis": 1})
    check_op("Add", [x, y])
