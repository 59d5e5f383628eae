"""fold_qdq and partition, each with a graph before and the graph expected after."""

import numpy as np
import pytest

from loom import LoomError
from loom.graph import Graph, Node, TensorType, assert_graph_equal
from loom.graph.passes.eliminate_dead import eliminate_dead
from loom.graph.passes.fold_qdq import fold_qdq
from loom.graph.passes.partition import REGION, GraphPattern, partition, regions

I8 = "int8"
F32 = "float32"


def t(shape, dtype=F32):
    return TensorType(tuple(shape), dtype)


SCALES = {
    "sx": np.array(0.5, np.float32),
    "zx": np.array(1, np.int8),
    "sw": np.array([0.25, 0.125], np.float32),
    "zw": np.zeros(2, np.int8),
    "sb": np.array([0.125, 0.0625], np.float32),
    "zb": np.zeros(2, np.int32),
    "sy": np.array(2.0, np.float32),
    "zy": np.array(0, np.int8),
}
W = np.arange(2 * 3 * 1 * 1, dtype=np.int8).reshape(2, 3, 1, 1)
B = np.array([5, -7], np.int32)
TYPES = {
    "xq": t((1, 3, 4, 4), I8),
    "x": t((1, 3, 4, 4)),
    "w": t((2, 3, 1, 1)),
    "b": t((2,)),
    "c": t((1, 2, 4, 4)),
    "r": t((1, 2, 4, 4)),
    "y": t((1, 2, 4, 4), I8),
}


def qdq_conv(relu: bool, constants=None, extra_reader=False):
    nodes = [
        Node("DequantizeLinear", ("xq", "sx", "zx"), ("x",)),
        Node("DequantizeLinear", ("wq", "sw", "zw"), ("w",), {"axis": 0}),
        Node("DequantizeLinear", ("bq", "sb", "zb"), ("b",), {"axis": 0}),
        Node("Conv", ("x", "w", "b"), ("c",), {"pads": (0, 0, 0, 0)}, name="conv"),
    ]
    last = "c"
    if relu:
        nodes.append(Node("Relu", ("c",), ("r",), name="relu"))
        last = "r"
    nodes.append(Node("QuantizeLinear", (last, "sy", "zy"), ("y",)))
    outputs = ("y",)
    if extra_reader:
        nodes.append(Node("Exp", ("c",), ("e",)))
        outputs = ("y", "e")
    constants = {**SCALES, "wq": W, "bq": B, **(constants or {})}
    types = dict(TYPES, e=t((1, 2, 4, 4)))
    return Graph(("xq",), outputs, nodes, constants, types)


def qlinear_conv(relu: bool):
    inputs = ("xq", "sx", "zx", "wq", "sw", "zw", "sy", "zy", "bq")
    made = "y.integer" if relu else "y"
    nodes = [Node("QLinearConv", inputs, (made,), {"pads": (0, 0, 0, 0)}, name="conv")]
    if relu:
        nodes.append(Node("Relu", (made,), ("y",), name="relu"))
    constants = {k: v for k, v in SCALES.items() if k not in ("sb", "zb")}
    constants |= {"wq": W, "bq": B}
    return Graph(
        ("xq",), ("y",), nodes, constants, {"xq": TYPES["xq"], made: TYPES["y"], "y": TYPES["y"]}
    )


@pytest.mark.parametrize("relu", [False, True])
def test_fold_qdq_turns_a_dequantized_conv_into_qlinearconv(relu):
    assert_graph_equal(eliminate_dead(fold_qdq(qdq_conv(relu))), qlinear_conv(relu))


def test_fold_qdq_leaves_what_it_cannot_rewrite():
    wrong_bias_scale = qdq_conv(False, {"sb": np.array([0.5, 0.5], np.float32)})
    assert fold_qdq(wrong_bias_scale) is wrong_bias_scale
    read_twice = qdq_conv(False, extra_reader=True)  # the float conv is needed elsewhere
    assert fold_qdq(read_twice) is read_twice
    relu_with_zero_point = qdq_conv(True, {"zy": np.array(3, np.int8)})
    assert fold_qdq(relu_with_zero_point) is relu_with_zero_point


def chain_graph():
    x = t((4,))
    nodes = (
        Node("Exp", ("x",), ("a",), name="exp"),
        Node("Neg", ("a",), ("b",), name="neg"),
        Node("Relu", ("b",), ("c",), name="relu"),
        Node("Neg", ("c",), ("d",), name="neg2"),
        Node("Exp", ("d",), ("y",), name="exp2"),
    )
    return Graph(("x",), ("y",), nodes, {}, {v: x for v in "xabcdy"})


class Backend:
    name = "toy"

    def __init__(self, patterns):
        self.patterns = patterns

    def graph_patterns(self):
        return self.patterns


def test_partition_makes_a_region_of_each_chain_a_pattern_takes():
    patterns = [GraphPattern("neg_relu", ("Neg", "Relu")), GraphPattern("neg", ("Neg",))]
    g = partition(chain_graph(), Backend(patterns))
    assert [n.op for n in g.nodes] == ["Exp", REGION, REGION, "Exp"]
    first, second = regions(g, "toy")
    assert first.attr("pattern") == "neg_relu" and first.inputs == ("a",)
    assert first.outputs == ("c",)
    assert [n.name for n in first.attr("body").nodes] == ["neg", "relu"]
    assert second.attr("pattern") == "neg" and second.outputs == ("d",)


def test_a_check_keeps_a_chain_on_the_host():
    refuse_first = GraphPattern(
        "neg", ("Neg",), lambda nodes, g: None if nodes[0].name == "neg2" else "no"
    )
    g = partition(chain_graph(), Backend([refuse_first]))
    assert [n.op for n in g.nodes] == ["Exp", "Neg", "Relu", REGION, "Exp"]


def test_a_chain_value_read_outside_is_not_taken():
    g = chain_graph()
    g = Graph(g.inputs, ("y", "b"), g.nodes, {}, g.types)  # b is also an output
    out = partition(g, Backend([GraphPattern("neg_relu", ("Neg", "Relu"))]))
    assert [n.op for n in out.nodes] == ["Exp", "Neg", "Relu", "Neg", "Exp"]


def test_partition_without_patterns_changes_nothing():
    g = chain_graph()
    assert partition(g, None) is g and partition(g, Backend([])) is g
    with pytest.raises(LoomError, match="must give GraphPatterns"):
        partition(g, Backend(["Neg"]))
