"""ConvTranspose against onnxruntime: the operator's numpy evaluation and its kernel (default
schedule, tests/graph/opcheck.py), and one-node models through loom.compile, whose kernels the
CPU's model schedules (loom/backend/cpu) take. The kernel computes each output phase (the
outputs `o` with one `o mod stride`) from its own taps only: these cases cover phases with
one tap (kernel == stride), several, none (dilation sharing a factor with the stride) and
uneven phase sizes."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import loom
from loom import te
from loom.backend.cpu import conv_schedules
from loom.graph.ir import Node, TensorType
from loom.graph.ops import OPERATORS
from loom.te.tensor import ComputeOp, Reduce
from tests.graph.opcheck import check_op

F32 = {"rtol": 1e-4, "atol": 1e-5}


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CASES_2D = [  # x shape, W shape, attributes
    ((1, 3, 5, 6), (3, 2, 2, 2), {"strides": [2, 2]}),  # kernel == stride: 1x1 per phase
    ((2, 4, 4, 5), (4, 3, 3, 3), {"strides": [3, 3]}),
    ((1, 3, 5, 4), (3, 2, 3, 3), {"strides": [2, 2]}),  # kernel > stride: 2 taps or 1
    ((1, 3, 4, 5), (3, 2, 5, 4), {"strides": [2, 3], "pads": [1, 2, 3, 0]}),
    ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "output_padding": [1, 1]}),
    (
        (1, 3, 4, 4),
        (3, 2, 2, 3),
        {"strides": [3, 2], "output_padding": [2, 1], "pads": [0, 1, 1, 0]},
    ),
    ((1, 2, 4, 5), (2, 3, 3, 3), {"strides": [2, 2], "dilations": [2, 3]}),  # phases with no tap
    ((1, 2, 4, 5), (2, 3, 3, 2), {"strides": [3, 2], "dilations": [2, 2], "pads": [2, 1, 0, 2]}),
    ((1, 2, 5, 5), (2, 2, 3, 3), {"dilations": [2, 1], "pads": [1, 2, 2, 1]}),  # stride 1
    ((2, 6, 4, 3), (6, 2, 3, 2), {"group": 3, "strides": [2, 2], "pads": [1, 0, 0, 1]}),
    ((1, 4, 3, 3), (4, 1, 2, 2), {"group": 4, "strides": [2, 2]}),  # depthwise
    ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "output_shape": [10, 9]}),
    ((1, 3, 4, 5), (3, 2, 3, 4), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 4, 5), (3, 2, 3, 4), {"strides": [3, 2], "auto_pad": "SAME_LOWER"}),
    (
        (1, 2, 4, 4),
        (2, 2, 3, 2),
        {"strides": [2, 1], "dilations": [3, 2], "auto_pad": "SAME_UPPER"},
    ),
    ((1, 3, 2, 2), (3, 2, 1, 1), {"strides": [3, 3]}),  # kernel < stride: zero phases
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", CASES_2D)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose_2d(x_shape, w_shape, attrs, bias):
    x, w = rand(*x_shape), rand(*w_shape, seed=1)
    b = rand(w_shape[1] * attrs.get("group", 1), seed=2) if bias else None
    check_op("ConvTranspose", [x, w] if b is None else [x, w, b], attrs, **F32)


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs",
    [
        ((2, 4, 7), (4, 3, 2), {"strides": [2]}),
        ((1, 4, 6), (4, 3, 3), {"group": 2, "strides": [3], "pads": [1, 2]}),
        ((1, 2, 5), (2, 2, 4), {"strides": [2], "dilations": [3], "output_padding": [1]}),
        ((1, 2, 5), (2, 2, 3), {"strides": [4], "dilations": [2], "pads": [3, 1]}),
    ],
)
def test_conv_transpose_1d(x_shape, w_shape, attrs):
    x, w, b = rand(*x_shape), rand(*w_shape, seed=1), rand(w_shape[1] * attrs.get("group", 1))
    check_op("ConvTranspose", [x, w, b], attrs, **F32)


def test_conv_transpose_3d():
    x, w = rand(1, 2, 3, 4, 3), rand(2, 2, 2, 3, 2, seed=1)
    attrs = {"strides": [2, 1, 2], "pads": [1, 0, 0, 0, 1, 1]}
    check_op("ConvTranspose", [x, w], attrs, **F32)


def _one_node_model(x_shape, w, b, attrs, activation=None):
    inits = [numpy_helper.from_array(w, "w")]
    if b is not None:
        inits.append(numpy_helper.from_array(b, "b"))
    nodes = [
        helper.make_node(
            "ConvTranspose", ["x", "w"] + (["b"] if b is not None else []), ["t"], **attrs
        )
    ]
    nodes.append(helper.make_node(activation or "Identity", ["t"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "deconv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs, activation",
    [
        # ppocrv4_det's two ConvTranspose layers (smaller planes), with their epilogues
        ((1, 24, 20, 20), (24, 24, 2, 2), {"strides": [2, 2], "kernel_shape": [2, 2]}, "Relu"),
        ((1, 24, 40, 40), (24, 1, 2, 2), {"strides": [2, 2]}, "Sigmoid"),
        ((2, 8, 9, 11), (8, 6, 3, 3), {"strides": [2, 2], "pads": [1, 1, 0, 1]}, None),
        (
            (1, 6, 7, 17),
            (6, 4, 4, 4),
            {"strides": [2, 2], "group": 2, "output_padding": [1, 0]},
            None,
        ),
        ((1, 8, 16, 16), (8, 8, 3, 3), {"pads": [1, 1, 1, 1]}, "Relu"),  # stride 1: one phase
        ((1, 4, 33), (4, 8, 3), {"strides": [3], "dilations": [2]}, None),
    ],
)
def test_compiled_model(x_shape, w_shape, attrs, activation):
    w = rand(*w_shape, seed=1)
    b = rand(w_shape[1] * attrs.get("group", 1), seed=2)
    model = _one_node_model(x_shape, w, b, attrs, activation)
    x = rand(*x_shape, seed=3)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    got = loom.compile(model)(x)["y"]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs, reductions",
    [
        ((1, 24, 20, 20), (24, 24, 2, 2), {"strides": [2, 2]}, 1),  # phases merged
        ((1, 8, 9, 11), (8, 6, 3, 3), {"strides": [2, 2], "pads": [1, 1, 0, 1]}, 4),
    ],
)
def test_phases_are_convolutions_the_cpu_schedules_take(x_shape, w_shape, attrs, reductions):
    # each phase is a plain window reduction: conv_schedules.py tiles it like a Conv (or
    # computes it on a flattened grid, conv_flat.py: the tiled reduction is then `.flat`)
    node = Node("ConvTranspose", ["x", "w"], ["y"], attrs)
    types = [TensorType(x_shape, "float32"), TensorType(w_shape, "float32")]
    op = OPERATORS.get("ConvTranspose")
    out_types = op.infer(node, types, [None, None])
    x, w = (
        te.placeholder(x_shape, "float32", name="x"),
        te.placeholder(w_shape, "float32", name="w"),
    )
    (y,) = op.compute(node, [x, w], [None, None], out_types)
    s = te.create_schedule(y.op)
    for stage in s.stages:
        if (
            isinstance(stage.op, ComputeOp)
            and not stage.is_output
            and not isinstance(stage.op.body, Reduce)
        ):
            stage.compute_inline()
    phases = [
        st for st in s.stages if isinstance(st.op, ComputeOp) and isinstance(st.op.body, Reduce)
    ]
    assert len(phases) == reductions
    conv_schedules.schedule(s, loom.target.Target("llvm"))
    tiled = {st.op.name for st in s.stages if st.relations}
    untaken = [st.op.name for st in phases if not ({st.op.name, f"{st.op.name}.flat"} & tiled)]
    assert not untaken
