"""The reductions (loom/graph/ops/reduce.py) against onnxruntime: infer, evaluate and the
compiled compute, over axes, keepdims, empty axes and dtypes."""

import numpy as np
import pytest

import loom
import loom.graph.ops.reduce  # registers the operators before any test runs
from loom.graph.ir import Node, TensorType
from loom.graph.ops import OPERATORS, unsupported
from tests.graph.opcheck import check_op

RNG = np.random.default_rng(11)

ALL = [
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceSumSquare",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
]
INTEGER = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
           "ReduceL1", "ReduceL2"]  # fmt: skip


def data(op, shape, dtype=np.float32):
    if np.dtype(dtype).kind == "f":
        x = RNG.standard_normal(shape).astype(dtype)
        if op in ("ReduceLogSum",):
            x = np.abs(x) + np.asarray(0.1, dtype)
        if op == "ReduceProd":
            x = (np.sign(x) * (0.5 + np.abs(x) % 1.0)).astype(dtype)
        return np.asarray(x, dtype)
    low, high = (-3, 4) if op == "ReduceProd" else (-40, 40)
    return RNG.integers(low, high, shape).astype(dtype)


def axes_input(axes):
    return None if axes is None else np.array(axes, np.int64)


def check(op, x, axes=None, **attrs):
    inputs = [x] if axes is None else [x, axes_input(axes)]
    check_op(op, inputs, attrs, constant=(1,), rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("op", ALL)
@pytest.mark.parametrize(
    "shape, axes, attrs",
    [
        ((3, 4, 5), (0, -1), {"keepdims": 0}),
        ((3, 4, 5), (1,), {}),
        ((3, 4, 5), None, {}),
        ((3, 4, 5), None, {"keepdims": 0}),
        ((2, 6), (), {"noop_with_empty_axes": 1}),
        ((2, 6), (), {"keepdims": 0}),
        ((), None, {"keepdims": 0}),
    ],
)
def test_reduce_float(op, shape, axes, attrs):
    check(op, data(op, shape), axes, **attrs)


@pytest.mark.parametrize("op", INTEGER)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("axes, attrs", [((-1,), {}), ((0, 2), {"keepdims": 0}), (None, {})])
def test_reduce_integers(op, dtype, axes, attrs):
    check(op, data(op, (3, 4, 5), dtype), axes, **attrs)


def test_mean_of_integers_truncates_toward_zero():
    x = np.array([[2, 2, 2], [-2, -2, -3], [5, -5, -1], [7, 0, 0]], np.int32)
    check("ReduceMean", x, (1,))


def test_noop_still_applies_the_element_function():
    x = data("ReduceSumSquare", (2, 3))
    for op in ("ReduceSumSquare", "ReduceL2", "ReduceL1"):
        check(op, x, (), noop_with_empty_axes=1)


def test_max_min_of_other_types():
    b = RNG.integers(0, 2, (3, 4)).astype(bool)
    check("ReduceMax", b, (1,))
    check("ReduceMin", b, (0,), keepdims=0)
    check("ReduceMax", data("ReduceMax", (3, 4), np.int8), (1,))
    check("ReduceMin", data("ReduceMin", (3, 4), np.uint8), None)


def test_float16_accumulates_in_float32():
    x = RNG.standard_normal((4, 64)).astype(np.float16)
    check_op("ReduceSum", [x, np.array([1], np.int64)], constant=(1,), rtol=2e-3, atol=1e-3)
    check_op("ReduceMean", [x, np.array([1], np.int64)], constant=(1,), rtol=2e-3, atol=1e-3)


def test_log_sum_exp_of_large_values():
    x = (RNG.standard_normal((3, 5)) * 100).astype(np.float32)
    check("ReduceLogSumExp", x, (1,))
    check("ReduceLogSumExp", np.full((2, 3), -np.inf, np.float32), (1,))


def test_reduce_refuses():
    node = Node("ReduceSum", ["x", "axes"], ["y"], {"keepdims": 1})
    assert "must be a constant" in unsupported(node, constant=lambda v: v == "x")
    assert unsupported(node, constant=lambda v: True) is None
    node = Node("ReduceSum", ["x"], ["y"], {"axes": (1,)})  # opset 13's attribute
    assert unsupported(node) == "ReduceSum: attribute axes not supported"
    node = Node("ReduceLogSum", ["x"], ["y"])
    with pytest.raises(loom.LoomError, match="float only"):
        OPERATORS.get("ReduceLogSum").infer(node, [TensorType((2,), "int32")], [None])
    node = Node("ReduceMean", ["x", "a"], ["y"])
    with pytest.raises(loom.LoomError, match="repeat"):
        OPERATORS.get("ReduceMean").infer(
            node, [TensorType((2, 3), "float32"), None], [None, np.array([1, -1], np.int64)]
        )


# -- ArgMax, ArgMin --------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize(
    "attrs",
    [
        {},
        {"axis": 1, "keepdims": 0},
        {"axis": -1},
        {"axis": 2, "select_last_index": 1},
        {"axis": 0, "keepdims": 0, "select_last_index": 1},
    ],
)
def test_arg(op, attrs):
    ties = RNG.integers(-2, 3, (3, 4, 5)).astype(np.int32)
    check_op(op, [ties], attrs)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_float(op):
    check_op(op, [data(op, (4, 6))], {"axis": 1})
    check_op(op, [data(op, (7,))], {"keepdims": 0})
