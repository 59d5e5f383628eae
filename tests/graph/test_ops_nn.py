"""The neural-network graph operators (loom/graph/ops/nn.py) against onnxruntime: infer, numpy
evaluate and the compiled compute, for each attribute combination loom supports."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom import te
from loom.graph.ir import Node, TensorType
from loom.graph.ops import OPERATORS, Pattern, unsupported
from tests.graph.opcheck import check_op

F32 = {"rtol": 1e-4, "atol": 1e-5}


def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def ints(*shape, dtype=np.int32, seed=0):
    return np.random.default_rng(seed).integers(-20, 20, shape).astype(dtype)


X = rand(1, 3, 7, 7)


# -- Conv ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "w_shape, attrs",
    [
        ((4, 3, 3, 3), {}),
        ((4, 3, 3, 3), {"kernel_shape": [3, 3], "pads": [1, 0, 2, 1]}),
        ((4, 3, 3, 2), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ((4, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 1, 0, 2]}),
        ((6, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
        ((3, 1, 3, 3), {"group": 3, "strides": [2, 1]}),
        ((4, 3, 4, 4), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
        ((4, 3, 4, 4), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
        ((4, 3, 1, 1), {"auto_pad": "SAME_LOWER", "strides": [3, 3]}),
        ((4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 3]}),
        ((4, 3, 2, 2), {"auto_pad": "NOTSET", "dilations": [1, 3], "strides": [3, 1]}),
    ],
)
def test_conv_2d(w_shape, attrs):
    check_op("Conv", [X, rand(*w_shape, seed=1)], attrs, **F32)


def test_conv_grouped_with_bias():
    x = rand(2, 4, 6, 5)
    check_op("Conv", [x, rand(6, 2, 3, 3, seed=1), rand(6, seed=2)], {"group": 2}, **F32)


def test_conv_1d_and_3d():
    check_op(
        "Conv",
        [rand(1, 3, 9), rand(4, 3, 3, seed=1), rand(4, seed=2)],
        {"strides": [2], "pads": [2, 1], "dilations": [2]},
        **F32,
    )
    check_op("Conv", [rand(1, 2, 4, 5, 4), rand(3, 2, 2, 3, 2, seed=1)], {"pads": [1] * 6}, **F32)


def test_conv_attributes_must_fit_the_weights():
    op = OPERATORS.get("Conv")
    node = Node("Conv", ["x", "w"], ["y"], {"kernel_shape": (2, 2)})
    with pytest.raises(ValueError, match="kernel_shape"):
        op.infer(node, [TensorType.of(X), TensorType((4, 3, 3, 3), "float32")], [None, None])
    node = Node("Conv", ["x", "w"], ["y"], {"group": 2})
    with pytest.raises(ValueError, match="group=2"):
        op.infer(node, [TensorType.of(X), TensorType((4, 3, 3, 3), "float32")], [None, None])


# -- ConvTranspose ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "w_shape, attrs",
    [
        ((3, 2, 3, 3), {}),
        ((3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 0, 2, 1]}),
        ((3, 2, 3, 2), {"strides": [2, 3], "output_padding": [1, 2]}),
        ((3, 2, 2, 3), {"dilations": [2, 1], "strides": [2, 1], "pads": [1, 1, 0, 0]}),
        ((3, 2, 3, 3), {"strides": [2, 2], "output_shape": [14, 16]}),
        ((3, 2, 3, 3), {"strides": [2, 2], "output_shape": [12, 13], "auto_pad": "SAME_UPPER"}),
        ((3, 2, 3, 4), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ((3, 2, 3, 4), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
        ((3, 2, 3, 2), {"strides": [1, 2], "dilations": [2, 3], "auto_pad": "SAME_UPPER"}),
        ((3, 2, 3, 3), {"strides": [2, 1], "auto_pad": "VALID"}),
        ((3, 1, 3, 3), {"group": 3, "strides": [2, 2]}),
    ],
)
def test_conv_transpose_2d(w_shape, attrs):
    check_op("ConvTranspose", [X, rand(*w_shape, seed=1)], attrs, **F32)


def test_conv_transpose_1d_and_3d():
    x, w, b = rand(1, 4, 6), rand(4, 3, 3, seed=1), rand(6, seed=2)
    check_op("ConvTranspose", [x, w, b], {"group": 2, "strides": [3], "pads": [1, 2]}, **F32)
    x, w = rand(1, 2, 3, 4, 3), rand(2, 2, 2, 3, 2, seed=1)
    check_op("ConvTranspose", [x, w], {"strides": [2, 1, 2], "pads": [1, 0, 0, 0, 1, 1]}, **F32)


# -- MaxPool and AveragePool --------------------------------------------------------------------

POOL_WINDOWS = [
    {"kernel_shape": [3, 3]},
    {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 2, 1]},
    {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 3], "ceil_mode": 1},
    {"kernel_shape": [4, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [4, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [1, 1], "strides": [3, 3], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "VALID", "ceil_mode": 1},
    {"kernel_shape": [3, 2], "dilations": [2, 2], "pads": [2, 1, 1, 1], "strides": [2, 1]},
]


@pytest.mark.parametrize("attrs", POOL_WINDOWS)
def test_max_pool(attrs):
    check_op("MaxPool", [X], attrs)


@pytest.mark.parametrize("attrs", POOL_WINDOWS)
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(attrs, count_include_pad):
    check_op("AveragePool", [X], {**attrs, "count_include_pad": count_include_pad}, **F32)


def test_pools_1d_3d_and_other_dtypes():
    x1 = rand(2, 3, 9)
    check_op("MaxPool", [x1], {"kernel_shape": [3], "strides": [2], "pads": [1, 0]})
    check_op("AveragePool", [x1], {"kernel_shape": [4], "strides": [2], "ceil_mode": 1}, **F32)
    x3 = rand(1, 2, 4, 5, 3)
    check_op("MaxPool", [x3], {"kernel_shape": [2, 2, 2], "pads": [1, 0, 0, 0, 1, 1]})
    check_op(
        "MaxPool", [ints(1, 2, 5, 5, dtype=np.int8)], {"kernel_shape": [2, 2], "pads": [1] * 4}
    )
    check_op("MaxPool", [np.abs(ints(1, 2, 5, 5)).astype(np.uint8)], {"kernel_shape": [3, 3]})
    check_op("MaxPool", [rand(1, 2, 5, 5, dtype=np.float64)], {"kernel_shape": [2, 2]})


# -- global pooling -----------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 3, 4, 5), (1, 2, 3, 2, 4)])
def test_global_pools(op, shape):
    check_op(op, [rand(*shape)], **F32)


def test_global_average_pool_float64_evaluates():
    # onnxruntime has no float64 global pooling: numpy's mean is the reference
    x = rand(1, 3, 4, 4, dtype=np.float64)
    node = Node("GlobalAveragePool", ["x"], ["y"])
    (y,) = OPERATORS.get("GlobalAveragePool").evaluate(node, [x])
    np.testing.assert_allclose(y, x.mean(axis=(2, 3), keepdims=True), rtol=1e-12)


# -- BatchNormalization -------------------------------------------------------------------------


def batch_norm_inputs(channels, dtype=np.float32):
    scale, bias, mean = (rand(channels, dtype=dtype, seed=s) for s in (1, 2, 3))
    var = np.abs(rand(channels, dtype=dtype, seed=4)) + dtype(0.1)
    return [scale, bias, mean, var]


@pytest.mark.parametrize(
    "shape, dtype, attrs",
    [
        ((2, 3, 4, 5), np.float32, {}),
        ((4, 3), np.float32, {"epsilon": 1e-2, "momentum": 0.5}),
        ((1, 3, 6), np.float64, {"training_mode": 0}),
    ],
)
def test_batch_norm(shape, dtype, attrs):
    inputs = [rand(*shape, dtype=dtype), *batch_norm_inputs(shape[1], dtype)]
    check_op("BatchNormalization", inputs, attrs, **F32)


# -- Gemm and MatMul ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a_shape, b_shape, c_shape, attrs",
    [
        ((3, 5), (5, 4), None, {}),
        ((5, 3), (5, 4), (4,), {"transA": 1, "alpha": 0.5}),
        ((3, 5), (4, 5), (3, 1), {"transB": 1, "beta": 2.0}),
        ((5, 3), (4, 5), (3, 4), {"transA": 1, "transB": 1, "alpha": -1.5, "beta": 0.25}),
        ((3, 5), (5, 4), (), {"beta": 0.0}),
        ((3, 5), (5, 4), (1, 1), {}),
    ],
)
def test_gemm(a_shape, b_shape, c_shape, attrs):
    c = None if c_shape is None else rand(*c_shape, seed=2)
    check_op("Gemm", [rand(*a_shape), rand(*b_shape, seed=1), c], attrs, **F32)


def test_gemm_float64():
    a, b, c = (rand(*s, dtype=np.float64, seed=k) for k, s in enumerate([(3, 4), (4, 2), (2,)]))
    check_op("Gemm", [a, b, c], {"alpha": 2.0})


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((3, 5), (5, 4)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((4,), (2, 4, 3)),
        ((2, 3, 4), (4,)),
        ((6,), (6,)),
    ],
)
def test_matmul(a_shape, b_shape):
    check_op("MatMul", [rand(*a_shape), rand(*b_shape, seed=1)], **F32)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_matmul_other_dtypes(dtype):
    make = rand if dtype == np.float64 else ints
    check_op("MatMul", [make(2, 3, 4, dtype=dtype), make(4, 5, dtype=dtype, seed=1)])


def test_matmul_integers_wrap():
    a = np.full((2, 3), 2**30, np.int32)
    check_op("MatMul", [a, np.full((3, 2), 3, np.int32)])


# -- Softmax and LogSoftmax ---------------------------------------------------------------------


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize(
    "shape, attrs",
    [((2, 3, 5), {}), ((2, 3, 5), {"axis": 0}), ((2, 3, 5), {"axis": -2}), ((7,), {})],
)
def test_softmax(op, shape, attrs):
    check_op(op, [rand(*shape) * 5], attrs, **F32)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_float64(op):
    check_op(op, [rand(3, 4, dtype=np.float64)], {"axis": 0})


# -- LayerNormalization, InstanceNormalization, LRN ---------------------------------------------


@pytest.mark.parametrize(
    "scale_shape, bias, attrs, n_outputs",
    [
        ((5,), True, {}, 1),
        ((4, 5), False, {"axis": 1, "epsilon": 1e-3}, 1),
        ((1, 5), True, {"axis": -2}, 3),
        ((5,), True, {"axis": 2}, 2),
    ],
)
def test_layer_norm(scale_shape, bias, attrs, n_outputs):
    x = rand(2, 4, 5) * 3 + 1
    inputs = [x, rand(*scale_shape, seed=1)] + ([rand(*scale_shape, seed=2)] if bias else [])
    check_op("LayerNormalization", inputs, attrs, n_outputs=n_outputs, **F32)


def test_layer_norm_float64():
    x, scale, bias = rand(3, 6, dtype=np.float64), rand(6, dtype=np.float64, seed=1), None
    check_op("LayerNormalization", [x, scale, bias], {}, n_outputs=3, **F32)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 2, 7)])
def test_instance_norm(shape):
    c = shape[1]
    inputs = [rand(*shape) * 2 + 1, rand(c, seed=1), rand(c, seed=2)]
    check_op("InstanceNormalization", inputs, {"epsilon": 1e-3}, **F32)


@pytest.mark.parametrize(
    "attrs",
    [{"size": 3}, {"size": 5, "alpha": 0.01, "beta": 0.5, "bias": 2.0}, {"size": 1}],
)
def test_lrn(attrs):
    check_op("LRN", [rand(1, 5, 3, 4) * 3], attrs, **F32)


def test_lrn_even_size_follows_the_spec():
    # onnxruntime refuses even sizes (and onnx.reference's LRN only fills channel 0): check
    # evaluate against the specification's sum, channels [c - floor((size-1)/2),
    # c + ceil((size-1)/2)], and the compiled compute against evaluate
    size, alpha, beta, bias = 4, 0.5, 0.75, 1.0
    x = rand(1, 6, 2, 3)
    want = np.empty_like(x)
    for c in range(6):
        lo, hi = max(0, c - (size - 1) // 2), min(5, c + -(-(size - 1) // 2))
        square_sum = np.sum(x[:, lo : hi + 1].astype(np.float64) ** 2, axis=1)
        want[:, c] = x[:, c] / (bias + alpha / size * square_sum) ** beta
    attrs = {"size": size, "alpha": alpha, "beta": beta, "bias": bias}
    node = Node("LRN", ["x"], ["y"], attrs)
    op = OPERATORS.get("LRN")
    (got,) = op.evaluate(node, [x])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    placeholder = te.placeholder(x.shape, "float32", name="x")
    (y,) = op.compute(node, [placeholder], [None], [TensorType.of(x)])
    kernel = loom.build(te.create_schedule([y.op]), [placeholder, y], target="llvm", name="lrn")
    out = np.zeros_like(x)
    kernel(x, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


# -- what loom refuses --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op, attrs, n_outputs, reason",
    [
        ("MaxPool", {"kernel_shape": (2, 2), "storage_order": 1}, 1, "storage_order=1"),
        ("MaxPool", {"kernel_shape": (2, 2)}, 2, "Indices"),
        (
            "MaxPool",
            {"kernel_shape": (2, 2), "auto_pad": "SAME_UPPER", "dilations": (2, 2)},
            1,
            "dilations > 1",
        ),
        ("Conv", {"auto_pad": "SAME_LOWER", "dilations": (1, 2)}, 1, "dilations > 1"),
        ("Conv", {"auto_pad": "FULL"}, 1, "auto_pad=FULL"),
        ("Conv", {"pads": (0, -1, 0, 0)}, 1, "pads="),
        ("AveragePool", {"kernel_shape": (2, 2), "strides": (0, 1)}, 1, "strides="),
        ("ConvTranspose", {"output_padding": (-1, 0)}, 1, "output_padding"),
        ("BatchNormalization", {"training_mode": 1}, 1, "training_mode=1"),
        ("BatchNormalization", {}, 3, "running_mean"),
        ("LayerNormalization", {"stash_type": 11}, 1, "stash_type=11"),
        ("LRN", {"size": 0}, 1, "size=0"),
        ("Softmax", {"axis": 1, "unknown": 2}, 1, "attribute unknown"),
    ],
)
def test_unsupported(op, attrs, n_outputs, reason):
    node = Node(op, ["x", "w"], [f"y{k}" for k in range(n_outputs)], attrs)
    why = unsupported(node)
    assert why is not None and reason in why, why


@pytest.mark.parametrize(
    "op, attrs",
    [
        ("MaxPool", {"kernel_shape": (2, 2), "pads": (1, 1, 1, 1), "ceil_mode": 1}),
        ("AveragePool", {"kernel_shape": (2,), "count_include_pad": 1, "dilations": (2,)}),
        ("Conv", {"auto_pad": "SAME_UPPER", "group": 2, "strides": (2, 2)}),
        ("ConvTranspose", {"output_shape": (5, 5), "output_padding": (1, 1)}),
        ("BatchNormalization", {"epsilon": 1e-3, "momentum": 0.1, "training_mode": 0}),
        ("LayerNormalization", {"axis": 1, "epsilon": 1e-3, "stash_type": 1}),
    ],
)
def test_supported(op, attrs):
    assert unsupported(Node(op, ["x", "w"], ["y"], attrs)) is None


def test_bad_inputs_name_the_node():
    conv = OPERATORS.get("Conv")
    node = Node("Conv", ["x", "w"], ["y"], {}, name="conv1")
    with pytest.raises(ValueError, match="conv1: W has 2 channels per group"):
        conv.infer(node, [TensorType.of(X), TensorType((4, 2, 3, 3), "float32")], [None, None])
    with pytest.raises(ValueError, match="conv1: X must be one of float32"):
        conv.infer(node, [TensorType((1, 3, 5, 5), "int32")] * 2, [None, None])
    pool = OPERATORS.get("MaxPool")
    node = Node("MaxPool", ["x"], ["y"], {"kernel_shape": (9, 9)}, name="pool1")
    with pytest.raises(ValueError, match="pool1: window 9 is larger"):
        pool.infer(node, [TensorType.of(X)], [None])
    matmul = OPERATORS.get("MatMul")
    node = Node("MatMul", ["a", "b"], ["y"], {}, name="mm")
    with pytest.raises(ValueError, match="mm: inner dimensions differ"):
        matmul.infer(node, [TensorType((2, 3), "float32"), TensorType((4, 2), "float32")], [])
    with pytest.raises(ValueError, match="mm: batch dimensions do not broadcast"):
        matmul.infer(node, [TensorType((2, 2, 3), "float32"), TensorType((3, 3, 2), "float32")], [])


def test_patterns():
    expected = {
        "Conv": Pattern.OUT_ELEMWISE_FUSABLE,
        "ConvTranspose": Pattern.OUT_ELEMWISE_FUSABLE,
        "MaxPool": Pattern.OUT_ELEMWISE_FUSABLE,
        "AveragePool": Pattern.OUT_ELEMWISE_FUSABLE,
        "GlobalAveragePool": Pattern.REDUCTION,
        "GlobalMaxPool": Pattern.REDUCTION,
        "BatchNormalization": Pattern.BROADCAST,
        "Gemm": Pattern.OUT_ELEMWISE_FUSABLE,
        "MatMul": Pattern.OUT_ELEMWISE_FUSABLE,
        "Softmax": Pattern.OPAQUE,
        "LogSoftmax": Pattern.OPAQUE,
        "LayerNormalization": Pattern.OPAQUE,
        "InstanceNormalization": Pattern.OPAQUE,
        "LRN": Pattern.OPAQUE,
    }
    for name, pattern in expected.items():
        op = OPERATORS.get(name)
        assert op.pattern == pattern, name
        assert op.compute is not None, name
