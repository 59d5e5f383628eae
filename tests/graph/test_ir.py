"""The graph IR: construction checks, immutability, the text form, structural equality."""

import numpy as np
import pytest

from loom.graph import Graph, GraphError, Node, TensorType, assert_graph_equal, graph_difference

F32 = "float32"


def relu_add(names=("x", "t", "b", "y"), bias=1.0, order=("t", "b")):
    x, t, b, y = names
    inputs = {"t": t, "b": b}
    return Graph(
        (x,),
        (y,),
        (
            Node("Relu", (x,), (t,)),
            Node("Add", tuple(inputs[k] for k in order), (y,), name="add0"),
        ),
        {b: np.full(3, bias, F32)},
        {x: TensorType((3,), F32), t: TensorType((3,), F32), y: TensorType((3,), F32)},
    )


def test_the_text_form_reads_like_the_model():
    text = str(relu_add())
    assert text.splitlines() == [
        "graph main(%x: float32[3]) {",
        "  @b: float32[3] = constant([1.0, 1.0, 1.0])",
        "  %t: float32[3] = Relu(%x)",
        "  %y: float32[3] = Add(%t, @b)  # add0",
        "  return %y",
        "}",
    ]


def test_attributes_print_and_big_constants_print_their_type_only():
    g = Graph(
        ("x",),
        ("y",),
        (Node("Conv", ("x", "w"), ("y",), {"pads": [1, 1, 1, 1], "auto_pad": "NOTSET"}),),
        {"w": np.zeros((8, 3, 3, 3), F32)},
    )
    text = str(g)
    assert "@w: float32[8, 3, 3, 3] = constant\n" in text
    assert "%y = Conv(%x, @w) {auto_pad='NOTSET', pads=[1, 1, 1, 1]}" in text


def test_structural_equality_ignores_names_not_structure():
    assert graph_difference(relu_add(), relu_add(("a", "b2", "c", "d"))) is None
    assert "input 0" in graph_difference(relu_add(), relu_add(order=("b", "t")))
    assert "constants b and b differ" in graph_difference(relu_add(), relu_add(bias=2.0))
    with pytest.raises(AssertionError, match="graphs differ at"):
        assert_graph_equal(relu_add(), relu_add(bias=2.0))


def test_a_nan_constant_equals_itself_and_minus_zero_differs_from_zero():
    def g(v):
        return Graph(("x",), ("y",), (Node("Add", ("x", "c"), ("y",)),), {"c": np.array(v, F32)})

    assert graph_difference(g(np.nan), g(np.nan)) is None
    assert graph_difference(g(-0.0), g(0.0)) is not None


def test_malformed_graphs_are_refused_by_name():
    with pytest.raises(GraphError, match="node Relu -> y reads z"):
        Graph(("x",), ("y",), (Node("Relu", ("z",), ("y",)),))
    with pytest.raises(GraphError, match="value x is defined twice"):
        Graph(("x",), ("x",), (Node("Relu", ("x",), ("x",)),))
    with pytest.raises(GraphError, match="output q is not defined"):
        Graph(("x",), ("q",), ())
    with pytest.raises(ValueError, match="non-negative ints"):
        TensorType((2, -1), F32)
    with pytest.raises(ValueError, match="scalar type"):
        TensorType((2,), "float32x4")
    with pytest.raises(TypeError, match="attribute bad"):
        Node("Relu", ("x",), ("y",), {"bad": object()})


def test_graphs_and_their_constants_are_immutable():
    g = relu_add()
    with pytest.raises(ValueError):
        g.constants["b"][0] = 5.0
    with pytest.raises(TypeError):
        g.constants["c"] = np.zeros(1)
    n = Node("Transpose", ("x",), ("y",), {"perm": [1, 0]})
    assert n.attr("perm") == (1, 0)
    with pytest.raises(TypeError):
        n.attrs["perm"] = (0, 1)


def test_queries():
    g = relu_add()
    assert g.producers()["t"].op == "Relu"
    assert [n.op for n in g.consumers()["t"]] == ["Add"]
    assert g.ops() == {"Relu": 1, "Add": 1}
    assert g.type_of("b") == TensorType((3,), F32)
    with pytest.raises(GraphError, match="run infer_types"):
        Graph(("x",), ("y",), (Node("Relu", ("x",), ("y",)),)).type_of("y")
