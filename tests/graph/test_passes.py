"""Graph passes, each with a graph before and the graph expected after (structural equality)."""

import numpy as np
import pytest

from loom import LoomError
from loom.graph import Graph, Node, TensorType, assert_graph_equal
from loom.graph.ops import OPERATORS
from loom.graph.passes.eliminate_dead import eliminate_dead
from loom.graph.passes.fold_constants import fold_constants
from loom.graph.passes.fuse import FUSED, find_groups, fuse
from loom.graph.passes.infer_types import infer_types
from loom.graph.passes.pipeline import PHASES, optimize
from loom.graph.passes.simplify import simplify

F32 = "float32"


def typed(inputs, outputs, nodes, constants=None, types=None):
    return infer_types(Graph(inputs, outputs, nodes, constants or {}, types or {}))


X = {"x": TensorType((1, 3, 4, 4), F32)}


def test_dead_nodes_and_unread_constants_go():
    before = typed(
        ("x",),
        ("y",),
        (
            Node("Relu", ("x",), ("y",)),
            Node("Exp", ("x",), ("dead",)),
            Node("Neg", ("dead",), ("dead2",)),
        ),
        {"unused": np.ones(2, F32)},
        X,
    )
    expected = typed(("x",), ("y",), (Node("Relu", ("x",), ("y",)),), {}, X)
    assert_graph_equal(eliminate_dead(before), expected)


def test_a_shape_computation_folds_away():
    # Reshape(x, Concat(Gather(Shape(x), 0), [-1])): the shape is known, so it is a constant
    before = typed(
        ("x",),
        ("y",),
        (
            Node("Shape", ("x",), ("s",)),
            Node("Gather", ("s", "zero"), ("n",), {"axis": 0}),
            Node("Unsqueeze", ("n", "axes"), ("n1",)),
            Node("Concat", ("n1", "minus1"), ("shape",), {"axis": 0}),
            Node("Reshape", ("x", "shape"), ("y",)),
        ),
        {
            "zero": np.array(0, np.int64),
            "axes": np.array([0], np.int64),
            "minus1": np.array([-1], np.int64),
        },
        X,
    )
    after = eliminate_dead(fold_constants(before))
    expected = typed(
        ("x",), ("y",), (Node("Reshape", ("x", "shape"), ("y",)),), {"shape": np.array([1, -1])}, X
    )
    assert_graph_equal(after, expected)
    assert after.type_of("y") == TensorType((1, 48), F32)


def test_identity_and_dropout_disappear_and_reshape_chains_merge():
    before = typed(
        ("x",),
        ("y",),
        (
            Node("Identity", ("x",), ("a",)),
            Node("Flatten", ("a",), ("b",), {"axis": 1}),
            Node("Dropout", ("b",), ("c",)),
            Node("Unsqueeze", ("c", "axes"), ("d",)),
            Node("Relu", ("d",), ("y",)),
        ),
        {"axes": np.array([0], np.int64)},
        X,
    )
    expected = typed(
        ("x",),
        ("y",),
        (Node("Reshape", ("x", "shape"), ("d",)), Node("Relu", ("d",), ("y",))),
        {"shape": np.array([1, 1, 48], np.int64)},
        X,
    )
    assert_graph_equal(eliminate_dead(simplify(before)), expected)


def test_batch_norm_folds_into_the_conv_before_it():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((2, 3, 1, 1)).astype(F32)
    params = {k: rng.uniform(0.5, 2, 2).astype(F32) for k in ("scale", "b", "mean", "var")}
    before = typed(
        ("x",),
        ("y",),
        (
            Node("Conv", ("x", "w"), ("c",)),
            Node(
                "BatchNormalization", ("c", "scale", "b", "mean", "var"), ("y",), {"epsilon": 1e-3}
            ),
        ),
        {"w": w, **params},
        X,
    )
    after = eliminate_dead(simplify(before))
    assert [n.op for n in after.nodes] == ["Conv"]
    x = rng.standard_normal((1, 3, 4, 4)).astype(F32)

    def run(g):
        env = {"x": x, **g.constants}
        for n in g.nodes:
            outs = OPERATORS.get(n.op).evaluate(n, [env[v] if v else None for v in n.inputs])
            env.update(zip(n.outputs, outs))
        return env["y"]

    np.testing.assert_allclose(run(after), run(before), rtol=1e-5, atol=1e-6)


def test_fusion_groups_by_pattern():
    w = np.ones((4, 3, 3, 3), F32)
    g = typed(
        ("x",),
        ("y",),
        (
            Node("Conv", ("x", "w", "bias"), ("c",), {"pads": [1, 1, 1, 1]}),
            Node("Relu", ("c",), ("r",)),  # epilogue of the conv
            Node("MaxPool", ("r",), ("p",), {"kernel_shape": [2, 2], "strides": [2, 2]}),
            Node("Exp", ("p",), ("e",)),  # into the pool's epilogue
            Node("ReduceSum", ("e",), ("s",), {"keepdims": 1}),  # starts a group: e has 1 reader
            Node("Softmax", ("s",), ("y",)),  # opaque: alone
        ),
        {"w": w, "bias": np.zeros(4, F32)},
        X,
    )
    groups = [[n.op for n in nodes] for nodes, _ in find_groups(g)]
    assert groups == [["Conv", "Relu"], ["MaxPool", "Exp", "ReduceSum"], ["Softmax"]] or groups == [
        ["Conv", "Relu"],
        ["MaxPool", "Exp"],
        ["ReduceSum"],
        ["Softmax"],
    ]
    fused = fuse(g)
    assert [n.op for n in fused.nodes].count(FUSED) >= 2
    body = fused.nodes[0].attr("body")
    assert [n.op for n in body.nodes] == ["Conv", "Relu"] and body.inputs == ("x", "w", "bias")


def test_a_value_read_twice_ends_its_group():
    g = typed(
        ("x",),
        ("y",),
        (
            Node("Relu", ("x",), ("a",)),
            Node("Exp", ("a",), ("b",)),
            Node("Add", ("a", "b"), ("y",)),
        ),
        {},
        X,
    )
    assert [[n.op for n in nodes] for nodes, _ in find_groups(g)] == [["Relu"], ["Exp", "Add"]]


def test_user_passes_run_at_their_phase_and_unknown_phases_are_refused():
    seen = []

    def record(graph):
        seen.append(sorted(graph.ops()))
        return graph

    g = typed(
        ("x",), ("y",), (Node("Identity", ("x",), ("a",)), Node("Relu", ("a",), ("y",))), {}, X
    )
    optimize(g, [("imported", record), ("simplified", record), ("fused", record)])
    assert seen == [["Identity", "Relu"], ["Relu"], ["Relu"]]
    assert PHASES == ("imported", "simplified", "partitioned", "fused")
    with pytest.raises(LoomError, match="unknown graph phase 'later'"):
        optimize(g, [("later", record)])


def test_groups_come_in_the_order_their_values_are_made():
    # Or(Greater(a, b), Equal(a, b)): Greater and Or fuse, but the group must come after Equal
    g = typed(
        ("a", "b"),
        ("y",),
        (
            Node("Greater", ("a", "b"), ("gt",)),
            Node("Equal", ("a", "b"), ("eq",)),
            Node("Or", ("gt", "eq"), ("y",)),
        ),
        {},
        {"a": TensorType((3,), F32), "b": TensorType((3,), F32)},
    )
    fused = fuse(g)  # the Graph constructor checks every value is made before it is read
    assert [n.op for n in fused.nodes] == ["Equal", FUSED]


def test_an_if_with_a_known_condition_becomes_the_branch_it_takes():
    then = Graph(("x",), ("r",), (Node("Relu", ("x",), ("r",)),))
    other = Graph(("x",), ("n",), (Node("Neg", ("x",), ("n",)),))
    for cond, op in ((True, "Relu"), (False, "Neg")):
        before = Graph(
            ("x",),
            ("y",),
            (Node("If", ("c",), ("y",), {"then_branch": then, "else_branch": other}),),
            {"c": np.array(cond)},
            X,
        )
        expected = typed(
            ("x",), ("y",), (Node(op, ("x",), ("t",)), Node("Identity", ("t",), ("y",))), {}, X
        )
        assert_graph_equal(eliminate_dead(infer_types(before)), expected)
