"""eliminate_dead: drop the nodes and constants no output depends on."""

from __future__ import annotations

from loom.graph.ir import Graph


def eliminate_dead(graph: Graph) -> Graph:
    """The graph without nodes whose outputs no graph output needs (operators are pure), and
    without constants nothing reads."""
    needed = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if needed.intersection(node.outputs):
            kept.append(node)
            needed.update(v for v in node.inputs if v)
    constants = {k: v for k, v in graph.constants.items() if k in needed}
    return graph.with_nodes(reversed(kept), constants)


__all__ = ["eliminate_dead"]
