"""Operators and importer cases the real models of tests/models need, each on small inputs
against onnxruntime: LSTM (silero-vad), If (silero-vad) and PP-OCR's unnamed dimensions."""

import numpy as np
import pytest

import loom
from loom.graph.ir import Node
from loom.graph.ops import unsupported
from tests.graph.opcheck import check_op

pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(7)


def lstm_inputs(steps, batch, inputs, hidden, directions=1, bias=True, states=True, peep=False):
    def a(*shape, scale=0.5):
        return (RNG.standard_normal(shape) * scale).astype("float32")

    state = (directions, batch, hidden)
    return [
        a(steps, batch, inputs),
        a(directions, 4 * hidden, inputs),
        a(directions, 4 * hidden, hidden),
        a(directions, 8 * hidden) if bias else None,
        None,
        a(*state) if states else None,
        a(*state) if states else None,
        a(directions, 3 * hidden) if peep else None,
    ]


@pytest.mark.parametrize(
    "steps, batch, direction, options",
    [
        (1, 1, "forward", {}),
        (3, 2, "forward", {}),
        (3, 2, "reverse", {}),
        (2, 3, "bidirectional", {}),
        (3, 2, "forward", {"bias": False, "states": False}),
        (3, 2, "forward", {"peep": True}),
        (2, 2, "bidirectional", {"peep": True}),
    ],
)
def test_lstm_matches_onnxruntime(steps, batch, direction, options):
    dirs = 2 if direction == "bidirectional" else 1
    inputs = lstm_inputs(steps, batch, 5, 4, dirs, **options)
    while inputs[-1] is None:
        inputs.pop()
    attrs = {"hidden_size": 4, "direction": direction}
    check_op("LSTM", inputs, attrs, n_outputs=3, rtol=1e-5, atol=1e-6)


def test_lstm_clip_and_activations():
    inputs = lstm_inputs(2, 2, 3, 4, peep=True)
    inputs = [x * 4 if x is not None else None for x in inputs]
    attrs = {"hidden_size": 4, "clip": 1.5, "activations": ["Sigmoid", "Relu", "Tanh"]}
    check_op("LSTM", inputs, attrs, n_outputs=3, rtol=1e-5, atol=1e-6)


def test_lstm_with_fewer_outputs():
    inputs = lstm_inputs(2, 1, 3, 4)[:3]
    check_op("LSTM", inputs, {"hidden_size": 4}, n_outputs=1)
    check_op("LSTM", inputs, {"hidden_size": 4}, n_outputs=2)


@pytest.mark.parametrize(
    "attrs, inputs, reason",
    [
        ({"input_forget": 1}, ["x", "w", "r"], "input_forget=1"),
        ({"layout": 1}, ["x", "w", "r"], "layout=1"),
        ({"activations": ("Sigmoid", "Elu", "Tanh")}, ["x", "w", "r"], "Elu"),
        ({"activation_alpha": (1.0,)}, ["x", "w", "r"], "activation_alpha"),
        ({"direction": "sideways"}, ["x", "w", "r"], "direction"),
        ({}, ["x", "w", "r", "b", "lens"], "sequence_lens"),
    ],
)
def test_lstm_refuses_what_it_does_not_support(attrs, inputs, reason):
    assert reason in unsupported(Node("LSTM", inputs, ["y"], attrs))


# -- If and the importer ----------------------------------------------------------------------

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from loom.errors import LoomError  # noqa: E402
from loom.frontend import from_onnx  # noqa: E402
from loom.frontend.onnx import UnsupportedModelError  # noqa: E402
from tests.graph.test_compile import onnxruntime_run  # noqa: E402


def make_model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(initializers).items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def constant_branch(name, output, values):
    value = numpy_helper.from_array(np.asarray(values, np.float32))
    node = helper.make_node("Constant", [], [output], value=value)
    return helper.make_graph([node], name, [], [helper.make_tensor_value_info(output, FLOAT, [2])])


def batch_is_one(x="x"):
    """Nodes computing `is_one` = (the first dimension of x == 1), as exporters guard shapes."""
    return [
        helper.make_node("Shape", [x], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Equal", ["batch", "one"], ["is_one"]),
    ]


SHAPE_CONSTANTS = {"zero": np.array(0, np.int64), "one": np.array(1, np.int64)}


@pytest.mark.parametrize("batch", [1, 3])
def test_an_if_on_a_shape_folds_to_its_branch(batch):
    nodes = [
        *batch_is_one(),
        helper.make_node(
            "If",
            ["is_one"],
            ["picked"],
            then_branch=constant_branch("then", "a", [1, 2]),
            else_branch=constant_branch("else", "b", [3, 4]),
        ),
        helper.make_node("Add", ["x", "picked"], ["y"]),
    ]
    m = make_model(nodes, [("x", FLOAT, ["N", 2])], [("y", FLOAT, None)], SHAPE_CONSTANTS)
    x = RNG.standard_normal((batch, 2)).astype("float32")
    compiled = loom.compile(m, shapes={"x": (batch, 2)})
    assert "If" not in [n.op for n in compiled.graph.nodes]
    np.testing.assert_allclose(compiled(x=x)["y"], onnxruntime_run(m, {"x": x})[0], rtol=1e-6)


def test_an_if_on_an_input_is_refused():
    nodes = [
        helper.make_node(
            "If",
            ["c"],
            ["y"],
            then_branch=constant_branch("then", "a", [1, 2]),
            else_branch=constant_branch("else", "b", [3, 4]),
            name="guard",
        )
    ]
    m = make_model(nodes, [("c", BOOL, [])], [("y", FLOAT, [2])])
    with pytest.raises(UnsupportedModelError, match=r"guard \(If\): input 0 \(c\) must be a const"):
        from_onnx(m)


def test_an_if_whose_branch_reads_the_graph_is_inlined():
    relu = helper.make_node("Relu", ["x"], ["r"])
    r = helper.make_tensor_value_info("r", FLOAT, [1, 2])
    then = helper.make_graph([relu], "then", [], [r])
    nodes = [
        *batch_is_one(),
        helper.make_node("If", ["is_one"], ["y"], then_branch=then, else_branch=then, name="guard"),
    ]
    m = make_model(nodes, [("x", FLOAT, [1, 2])], [("y", FLOAT, [1, 2])], SHAPE_CONSTANTS)
    graph = from_onnx(m)  # infer_types takes the branch the known condition selects
    assert "If" not in graph.ops() and "Relu" in graph.ops()
    x = np.array([[-1.5, 2.0]], np.float32)
    np.testing.assert_array_equal(loom.compile(m)(x=x)["y"], np.maximum(x, 0))


def test_an_unnamed_dimension_is_not_shared():
    # paddle2onnx marks the height and the width of PP-OCR's input "?", and the batch -1
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    m = make_model(nodes, [("x", FLOAT, [-1, 3, "?", "?"])], [("y", FLOAT, [-1, 3, "?", "?"])])
    x = RNG.standard_normal((1, 3, 4, 6)).astype("float32")
    y = loom.compile(m, shapes={"x": x.shape})(x=x)["y"]
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    with pytest.raises(LoomError, match=r"input x: dimension 2 of \[\?, 3, \?, \?\]"):
        from_onnx(m)


def test_the_shape_of_a_value_onnx_cannot_type_is_a_constant():
    # YOLO's anchor grids: a Range whose limit comes from a Shape, and an Expand to its shape
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["width"], axis=0),
        helper.make_node("Cast", ["width"], ["limit"], to=FLOAT),
        helper.make_node("Range", ["start", "limit", "step"], ["grid"]),
        helper.make_node("Shape", ["grid"], ["grid_shape"]),
        helper.make_node("Expand", ["x", "grid_shape"], ["y"]),
    ]
    constants = {
        "one": np.array(1, np.int64),
        "start": np.array(0, np.float32),
        "step": np.array(1, np.float32),
    }
    m = make_model(nodes, [("x", FLOAT, [1, 5])], [("y", FLOAT, None)], constants)
    x = RNG.standard_normal((1, 5)).astype("float32")
    np.testing.assert_array_equal(loom.compile(m)(x=x)["y"], onnxruntime_run(m, {"x": x})[0])
