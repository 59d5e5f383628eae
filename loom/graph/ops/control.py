"""Control-flow graph operators (ONNX opset 21): If, where its condition is a constant.

loom compiles static graphs: an If is supported only where its condition folds to a constant
(exporters' guards on shapes, such as silero-vad's "is the batch dimension 1"), and the graph
then runs the chosen branch. The importer keeps an If's inputs as ONNX has them (the condition
alone); its branches, `Graph` attributes, list the outer values they read as their inputs.

So `infer` gives the chosen branch's output types, and `evaluate` runs the chosen branch with
each operator's numpy semantics when the branch reads no outer value (a branch that does can
only be inlined: a graph pass replaces the If by the chosen branch's nodes). There is no
kernel: an If never reaches the lowering.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loom.errors import LoomError
from loom.graph.ir import Graph, Node, TensorType
from loom.graph.ops.base import OPERATORS, Operator, Pattern, register


def chosen_branch(node: Node, condition: np.ndarray | None) -> Graph:
    """The branch an If with this `condition` value runs (ValueError naming the node if the
    condition is not a known single boolean)."""
    if condition is None:
        raise ValueError(
            f"{node.label}: the condition is not a constant; loom compiles an If only where "
            "its condition folds to a constant"
        )
    condition = np.asarray(condition)
    if condition.size != 1:
        raise ValueError(f"{node.label}: the condition must have one element, not {condition.size}")
    name = "then_branch" if bool(condition.reshape(-1)[0]) else "else_branch"
    branch = node.attr(name)
    if not isinstance(branch, Graph):
        raise ValueError(f"{node.label}: attribute {name} (a graph) is required")
    return branch


def _if_infer(node, types, consts):
    branch = chosen_branch(node, consts[0] if consts else None)
    if len(branch.outputs) != len(node.outputs):
        raise ValueError(
            f"{node.label}: the branch {branch.name} has {len(branch.outputs)} outputs, the If "
            f"has {len(node.outputs)}"
        )
    missing = [v for v in branch.outputs if v not in branch.types]
    if missing:
        raise ValueError(
            f"{node.label}: the types of {', '.join(missing)} of branch {branch.name} are not "
            "known (onnx's shape inference could not give them static shapes)"
        )
    return [branch.type_of(v) for v in branch.outputs]


def run_graph(graph: Graph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of `graph` on `inputs` (one array per graph input), every node evaluated
    with its operator's numpy semantics."""
    values: dict[str, np.ndarray] = dict(graph.constants)
    values.update(zip(graph.inputs, inputs))
    for node in graph.nodes:
        operator = OPERATORS.get(node.op)
        args = [values[v] if v else None for v in node.inputs]
        values.update(zip(node.outputs, (np.asarray(a) for a in operator.evaluate(node, args))))
    return [values[v] for v in graph.outputs]


def _if_evaluate(node, inputs):
    branch = chosen_branch(node, inputs[0])
    if branch.inputs:
        raise LoomError(
            f"{node.label}: branch {branch.name} reads {', '.join(branch.inputs)} of the graph "
            "around it; only inlining the branch can compute it"
        )
    outputs = run_graph(branch, [])
    expected = [TensorType.of(a) for a in outputs]
    for v, t in zip(branch.outputs, expected):
        if v in branch.types and branch.type_of(v) != t:
            raise LoomError(f"{node.label}: branch {branch.name} computed {v} as {t}")
    return outputs


register(
    Operator(
        "If",
        Pattern.OPAQUE,
        _if_infer,
        _if_evaluate,
        None,
        attrs={"then_branch", "else_branch"},
        constant_inputs=(0,),
        doc="The outputs of then_branch or else_branch, chosen by a condition that must be a "
        "constant; no kernel: a graph pass inlines the chosen branch (evaluate runs a branch "
        "that reads no outer value).",
    )
)


__all__ = ["chosen_branch", "run_graph"]
