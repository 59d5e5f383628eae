"""The type-inference pass (loom/graph/passes/infer_types.py): every value's type from the
inputs' types, known values handed to the operators that need them, and the errors that name
the node."""

import numpy as np
import pytest

from loom.errors import LoomError
from loom.graph import Graph, GraphError, Node, TensorType
from loom.graph.ops import Operator, Pattern, register
from loom.graph.passes.infer_types import MAX_KNOWN_ELEMENTS, infer_types

F32 = "float32"
X = {"x": TensorType((2, 3), F32)}


def graph(nodes, constants=None, types=None, outputs=("y",), inputs=("x",)):
    return Graph(inputs, outputs, nodes, constants or {}, X if types is None else types)


def recording_operator(name, infer, evaluate=None, seen=None):
    """A test operator that records what its infer and evaluate are given in `seen`."""
    seen = seen if seen is not None else {}

    def recording_infer(node, types, consts):
        seen.setdefault("infer", []).append((list(types), list(consts)))
        return infer(node, types, consts)

    def recording_evaluate(node, inputs):
        seen.setdefault("evaluate", []).append(list(inputs))
        return evaluate(node, inputs)

    register(Operator(name, Pattern.OPAQUE, recording_infer, recording_evaluate), replace=True)
    return seen


def test_every_value_gets_its_type_in_a_new_graph():
    before = graph(
        [
            Node("Relu", ("x",), ("r",)),
            Node("Add", ("r", "b"), ("s",), name="add"),
            Node("ReduceSum", ("s", "axes"), ("y",), {"keepdims": 0}),
        ],
        {"b": np.ones(3, np.float32), "axes": np.array([1], np.int64)},
    )
    after = infer_types(before)
    assert after is not before and "r" not in before.types
    assert after.type_of("r") == after.type_of("s") == TensorType((2, 3), F32)
    assert after.type_of("y") == TensorType((2,), F32)
    assert after.type_of("axes") == TensorType((1,), "int64")
    assert "%y: float32[2] = ReduceSum(%s, @axes) {keepdims=0}" in str(after)


def test_infer_gets_the_constants_and_the_values_computed_from_them_and_from_shapes():
    # Reshape(x, Concat(Gather(Shape(x), 0), [-1])), as exporters write a flatten
    before = Graph(
        ("x",),
        ("y",),
        [
            Node("Shape", ("x",), ("s",)),
            Node("Gather", ("s", "zero"), ("n",), {"axis": 0}),
            Node("Unsqueeze", ("n", "axes"), ("n1",)),
            Node("Concat", ("n1", "minus1"), ("shape",), {"axis": 0}),
            Node("Reshape", ("x", "shape"), ("y",)),
        ],
        {
            "zero": np.array(0, np.int64),
            "axes": np.array([0], np.int64),
            "minus1": np.array([-1], np.int64),
        },
        {"x": TensorType((2, 3, 4), F32)},
    )
    after = infer_types(before)
    assert after.type_of("shape") == TensorType((2,), "int64")
    assert after.type_of("y") == TensorType((2, 12), F32)
    assert set(after.constants) == set(before.constants)  # folding is fold_constants' job


def test_an_absent_optional_input_is_none_and_a_non_constant_has_no_value():
    seen = recording_operator("Probe", lambda node, types, consts: [types[0]])
    after = infer_types(
        graph([Node("Probe", ("x", "", "c"), ("y",))], {"c": np.array([7], np.int64)})
    )
    ((types, consts),) = seen["infer"]
    assert types == [TensorType((2, 3), F32), None, TensorType((1,), "int64")]
    assert consts[0] is None and consts[1] is None and consts[2].tolist() == [7]
    assert after.type_of("y") == TensorType((2, 3), F32)


def test_large_values_are_not_computed_during_inference():
    big = np.ones(MAX_KNOWN_ELEMENTS + 1, np.float32)
    seen = recording_operator(
        "Twice", lambda node, types, consts: [types[0]], lambda node, inputs: [inputs[0] * 2]
    )
    nodes = [Node("Twice", ("small",), ("s2",)), Node("Twice", ("big",), ("b2",))]
    g = Graph(("x",), ("s2", "b2"), nodes, {"small": np.ones(4, np.float32), "big": big}, X)
    infer_types(g)
    assert [args[0].size for args in seen["evaluate"]] == [4]


def test_types_the_graph_has_are_checked_against_the_operators():
    nodes = [Node("Relu", ("x",), ("y",), name="relu1")]
    same = graph(nodes, types={**X, "y": TensorType((2, 3), F32)})
    assert infer_types(same).type_of("y") == TensorType((2, 3), F32)
    wrong = graph(nodes, types={**X, "y": TensorType((3, 2), F32)})
    with pytest.raises(
        GraphError,
        match=r"node relu1 gives y the type float32\[2, 3\], but the graph says float32\[3, 2\]",
    ):
        infer_types(wrong)


def test_a_node_reading_an_untyped_value_is_named():
    g = graph([Node("Relu", ("x",), ("y",), name="relu1")], types={})
    with pytest.raises(GraphError, match="node relu1 reads x, whose type is not known"):
        infer_types(g)
    unused = Graph(("x", "z"), ("y",), [Node("Relu", ("x",), ("y",))], {}, X)
    with pytest.raises(GraphError, match="graph main: z has no type"):
        infer_types(unused)


def test_an_operator_that_refuses_its_inputs_is_reported_with_the_node():
    g = graph([Node("Add", ("x", "b"), ("y",), name="add1")], {"b": np.ones((4,), np.float32)})
    with pytest.raises(GraphError, match="type inference of node add1: input shapes") as caught:
        infer_types(g)
    assert isinstance(caught.value.__cause__, LoomError | ValueError | TypeError)


def test_an_unknown_operator_is_named():
    with pytest.raises(LoomError, match="unknown graph operator 'NoSuchOp'"):
        infer_types(graph([Node("NoSuchOp", ("x",), ("y",))]))


def test_an_infer_giving_the_wrong_number_of_types_is_an_error():
    recording_operator("TwoTypes", lambda node, types, consts: [types[0], types[0]])
    with pytest.raises(GraphError, match=r"TwoTypes.s infer gave .* for node n1, expected one"):
        infer_types(graph([Node("TwoTypes", ("x",), ("y",), name="n1")]))


def test_a_value_that_contradicts_its_inferred_type_is_an_error():
    recording_operator(
        "Liar",
        lambda node, types, consts: [TensorType((2,), "int64")],
        lambda node, inputs: [np.zeros(3, np.int64)],
    )
    g = graph([Node("Liar", ("c",), ("y",), name="liar")], {"c": np.zeros(2, np.int64)})
    with pytest.raises(
        GraphError, match=r"node liar evaluates y to a int64\[3\], but its infer says int64\[2\]"
    ):
        infer_types(g)
