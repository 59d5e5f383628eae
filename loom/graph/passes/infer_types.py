"""Type inference: the `TensorType` of every value of a graph, from its inputs' types.

Nodes are visited in order (a graph's nodes are topologically sorted); each operator's `infer`
gets the node, its input types and the values of its inputs that are known: the graph's
constants, and the small values computed from them and from types (the shape computations
exporters emit, Shape -> Gather -> Concat -> Reshape, whose result a Reshape's type needs before
fold_constants has made it a constant). A type the graph already has (an importer's, such as
onnx's shape inference) must agree with the operator's: a disagreement is a bug in one of them,
and is reported rather than guessed. An `If` whose condition is known here (a constant, or
computed from constants and shapes) is replaced by the branch it takes, whose nodes are then
typed in turn: the branch reads values of the graph around it, so it cannot be typed apart.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping

import numpy as np

from loom.errors import LoomError
from loom.graph.ir import Graph, GraphError, Node, TensorType
from loom.graph.ops.base import OPERATORS, Operator
from loom.graph.passes.fold_constants import SHAPE_ONLY, stand_in

MAX_KNOWN_ELEMENTS = 4096
"""Values up to this size computed from known values are kept for the nodes after them: shapes
and axes are small, and evaluating a whole weight transform belongs to fold_constants."""


def _inlined_branch(node: Node, cond: np.ndarray) -> tuple[list[Node], dict[str, np.ndarray]]:
    """The nodes and constants of the branch an `If` with a known condition takes; Identity
    nodes give the branch's results the If's output names (ONNX names are unique in the whole
    model, so the branch's own names cannot clash)."""
    if cond.size != 1:
        raise GraphError(
            f"node {node.label}: If's condition must have one element, got {cond.shape}"
        )
    branch = node.attr("then_branch" if bool(cond.reshape(-1)[0]) else "else_branch")
    if len(branch.outputs) != len(node.outputs):
        raise GraphError(
            f"node {node.label}: its branch {branch.name} has {len(branch.outputs)} outputs, "
            f"the If {len(node.outputs)}"
        )
    results = [
        Node("Identity", (inner,), (outer,), name=f"{node.name or node.outputs[0]}.{outer}")
        for inner, outer in zip(branch.outputs, node.outputs)
    ]
    return [*branch.nodes, *results], dict(branch.constants)


def infer_types(graph: Graph) -> Graph:
    """`graph` with the type of every value (GraphError naming the node where one cannot be
    inferred or contradicts a type the graph already has). An `If` whose condition is known
    is replaced by the nodes of the branch it takes."""
    types = {v: graph.types[v] for v in graph.inputs if v in graph.types}
    for v, array in graph.constants.items():
        types[v] = TensorType.of(array)
    known: dict[str, np.ndarray] = dict(graph.constants)
    constants = dict(graph.constants)
    pending = collections.deque(graph.nodes)
    nodes: list[Node] = []
    inlined = False
    while pending:
        node = pending.popleft()
        if node.op == "If" and node.inputs[0] in known:
            branch_nodes, branch_constants = _inlined_branch(node, known[node.inputs[0]])
            for v, array in branch_constants.items():
                types[v] = TensorType.of(array)
            constants.update(branch_constants)
            known.update(branch_constants)
            pending.extendleft(reversed(branch_nodes))
            inlined = True
            continue
        nodes.append(node)
        operator = OPERATORS.get(node.op)
        outputs = _infer_node(graph, node, operator, types, known)
        for v, t in zip(node.outputs, outputs):
            given = graph.types.get(v)
            if given is not None and given != t:
                raise GraphError(
                    f"graph {graph.name}: node {node.label} gives {v} the type {t}, but the graph "
                    f"says {given}"
                )
            types[v] = t
        known.update(_known_outputs(graph, node, operator, types, known))
    untyped = [v for v in (*graph.inputs, *graph.outputs) if v not in types]
    if untyped:
        raise GraphError(f"graph {graph.name}: {', '.join(untyped)} has no type")
    if inlined:
        graph = graph.with_nodes(nodes, constants)
    return graph.replace(types=types)


def _infer_node(
    graph: Graph,
    node: Node,
    operator: Operator,
    types: Mapping[str, TensorType],
    known: Mapping[str, np.ndarray],
) -> list[TensorType]:
    missing = [v for v in node.inputs if v and v not in types]
    if missing:
        raise GraphError(
            f"graph {graph.name}: node {node.label} reads {', '.join(missing)}, whose type is "
            "not known"
        )
    input_types = [types[v] if v else None for v in node.inputs]
    values = [known.get(v) if v else None for v in node.inputs]
    try:
        outputs = list(operator.infer(node, input_types, values))
    except (LoomError, ValueError, TypeError) as e:
        reason = str(e).removeprefix(f"{node.label}: ")  # operators name the node too
        raise GraphError(
            f"graph {graph.name}: type inference of node {node.label}: {reason}"
        ) from e
    if len(outputs) != len(node.outputs) or not all(isinstance(t, TensorType) for t in outputs):
        raise GraphError(
            f"graph {graph.name}: {node.op}'s infer gave {outputs!r} for node {node.label}, "
            f"expected one TensorType for each of its {len(node.outputs)} outputs"
        )
    return outputs


def _known_outputs(
    graph: Graph,
    node: Node,
    operator: Operator,
    types: Mapping[str, TensorType],
    known: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """The node's output values, when its inputs are known (or only their types matter) and
    the outputs are small; {} otherwise."""
    if any(types[v].size > MAX_KNOWN_ELEMENTS for v in node.outputs):
        return {}
    if node.op in SHAPE_ONLY:
        args = [stand_in(types[v]) if v else None for v in node.inputs]
    elif all(not v or v in known for v in node.inputs):
        args = [known[v] if v else None for v in node.inputs]
    else:
        return {}
    try:
        values = [np.asarray(a) for a in operator.evaluate(node, args)]
    except (LoomError, ValueError, TypeError, ArithmeticError) as e:
        reason = str(e).removeprefix(f"{node.label}: ")
        raise GraphError(f"graph {graph.name}: evaluating node {node.label}: {reason}") from e
    for v, value in zip(node.outputs, values):
        if TensorType.of(value) != types[v]:
            raise GraphError(
                f"graph {graph.name}: node {node.label} evaluates {v} to a "
                f"{TensorType.of(value)}, but its infer says {types[v]}"
            )
    return dict(zip(node.outputs, values))


__all__ = ["MAX_KNOWN_ELEMENTS", "infer_types"]
