"""fold_constants: nodes whose inputs are all constants become constants.

Each such node is evaluated with its operator's numpy semantics (`Operator.evaluate`), so shape
computations (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) vanish before lowering. A node
that only reads the shape or size of its input (Shape, Size) folds as soon as that input's type
is known, whatever computes it, and so does a node whose outputs are all empty (a dimension
of size 0: there is nothing to compute). A folded value larger than `MAX_FOLDED_ELEMENTS`
stays a node (an Expand of a scalar to a huge tensor would bloat the model). Run after
infer_types.

`fold_constants_keeping_dequantize` leaves DequantizeLinear nodes of constants (quantized
weights) for fold_qdq, which turns DQ -> Conv -> Q into QLinearConv: folded first, the weights
would be float constants and the integer operator lost.
"""

from __future__ import annotations

import numpy as np

from loom.graph.ir import Graph, GraphError, Node, TensorType
from loom.graph.ops import OPERATORS

MAX_FOLDED_ELEMENTS = 1 << 24

SHAPE_ONLY = {"Shape", "Size"}
"""Operators whose result depends only on their input's type."""


def stand_in(t: TensorType) -> np.ndarray:
    """An array of type `t` without its data (a broadcast zero), for a SHAPE_ONLY operator."""
    return np.broadcast_to(np.zeros((), t.dtype.numpy), t.shape)


def _shape_only_value(node: Node, graph: Graph) -> list[np.ndarray] | None:
    if node.op not in SHAPE_ONLY or node.inputs[0] not in graph.types:
        return None
    args = [stand_in(graph.type_of(node.inputs[0]))]
    return list(OPERATORS.get(node.op).evaluate(node, args))


def _empty_outputs(node: Node, graph: Graph) -> list[np.ndarray] | None:
    types = [graph.types.get(v) for v in node.outputs]
    if any(t is None or t.size for t in types):
        return None
    return [np.empty(t.shape, t.dtype.numpy) for t in types]


def _fold(node: Node, graph: Graph, constants: dict, keep: frozenset) -> list[np.ndarray] | None:
    if node.op in keep:
        return None
    empty = _empty_outputs(node, graph)
    if empty is not None:
        return empty
    shape_only = _shape_only_value(node, graph)
    if shape_only is not None:
        return shape_only
    if not all(v == "" or v in constants for v in node.inputs):
        return None
    for v in node.outputs:
        t = graph.types.get(v)
        if t is not None and t.size > MAX_FOLDED_ELEMENTS:
            return None
    args = [constants[v] if v else None for v in node.inputs]
    return list(OPERATORS.get(node.op).evaluate(node, args))


def fold_constants(graph: Graph, keep: frozenset[str] = frozenset()) -> Graph:
    """The graph with every foldable node replaced by the constants it computes (but nodes of
    the operators in `keep`)."""
    constants = dict(graph.constants)
    kept = []
    for node in graph.nodes:
        values = _fold(node, graph, constants, keep)
        if values is None:
            kept.append(node)
            continue
        for name, value in zip(node.outputs, values):
            value = np.asarray(value)
            expected = graph.types.get(name)
            if expected is not None and TensorType.of(value) != expected:
                raise GraphError(
                    f"fold_constants: {node.label} ({node.op}) evaluated to "
                    f"{TensorType.of(value)}, but its type is {expected}"
                )
            constants[name] = value
    return graph.with_nodes(kept, constants)


def fold_constants_keeping_dequantize(graph: Graph) -> Graph:
    """fold_constants, but DequantizeLinear nodes stay (see the module docstring)."""
    return fold_constants(graph, keep=frozenset({"DequantizeLinear"}))


__all__ = [
    "MAX_FOLDED_ELEMENTS",
    "SHAPE_ONLY",
    "fold_constants",
    "fold_constants_keeping_dequantize",
    "stand_in",
]
