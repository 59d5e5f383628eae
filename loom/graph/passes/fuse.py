"""fuse: group nodes into fused kernels by operator pattern, as TVM's FuseOps does.

Nodes are visited in order; a node joins the group of one of its producers when that producer's
output is read by this node only (and is not a graph output), and the patterns allow it:

- light (element-wise, broadcast, injective) + light: the wider of the two patterns;
- light + a reduction: a reduction (it reads its inputs' expressions);
- a reduction + element-wise or broadcast: a reduction (an epilogue);
- conv, matmul, pooling (`OUT_ELEMWISE_FUSABLE`) + element-wise or broadcast: unchanged (an
  epilogue: bias, activation, residual add).

Opaque operators stay alone. A group's nodes other than its last have exactly one reader, inside
the group, so every group computes one value and joining never makes a cycle. A group of two or
more nodes becomes one node `loom.fused` whose attribute `body` is the group as a Graph (its
inputs are the values it reads from outside, constants included: weights stay arguments of the
kernel) and whose attribute `pattern` is the group's pattern.
"""

from __future__ import annotations

from loom.graph.ir import Graph, Node
from loom.graph.ops import OPERATORS, Pattern

FUSED = "loom.fused"


def _joined(group: Pattern, node: Pattern) -> Pattern | None:
    """The pattern of a group of pattern `group` after `node` joins it, or None."""
    light = Pattern.INJECTIVE
    if group <= light and node <= light:
        return max(group, node)
    if group <= light and node == Pattern.REDUCTION:
        return Pattern.REDUCTION
    if group in (Pattern.REDUCTION, Pattern.OUT_ELEMWISE_FUSABLE) and node <= Pattern.BROADCAST:
        return group
    return None


class _Group:
    def __init__(self, node: Node, pattern: Pattern):
        self.nodes = [node]
        self.pattern = pattern


def _pattern(node: Node) -> Pattern:
    op = OPERATORS.find(node.op)
    return Pattern.OPAQUE if op is None else op.pattern


def find_groups(graph: Graph) -> list[tuple[list[Node], Pattern]]:
    """The groups of nodes and their patterns, in the order of their last nodes (nodes in
    graph order)."""
    consumers = graph.consumers()
    group_of: dict[str, _Group] = {}  # value -> the group computing it
    groups: list[_Group] = []
    for node in graph.nodes:
        pattern = _pattern(node)
        chosen = None
        if len(node.outputs) == 1 and pattern != Pattern.OPAQUE:
            for v in dict.fromkeys(node.inputs):
                g = group_of.get(v)
                if g is None or v in graph.outputs or len(consumers.get(v, ())) != 1:
                    continue
                if g.nodes[-1].outputs != (v,):  # only a group's last value leaves it
                    continue
                joined = _joined(g.pattern, pattern)
                if joined is not None:
                    chosen = g
                    chosen.pattern = joined
                    break
        if chosen is None:
            chosen = _Group(node, pattern)
            groups.append(chosen)
        else:
            chosen.nodes.append(node)
        for v in node.outputs:
            group_of[v] = chosen
    # in the order of their last nodes: a group reads only values made before its last node,
    # and its own value leaves it from there (ordered by first nodes, a group could come before
    # a value it reads that a later-starting group makes)
    position = {id(n): k for k, n in enumerate(graph.nodes)}
    groups.sort(key=lambda g: position[id(g.nodes[-1])])
    return [(g.nodes, g.pattern) for g in groups]


def _fused_node(graph: Graph, nodes: list[Node], index: int, pattern: Pattern) -> Node:
    defined = {v for n in nodes for v in n.outputs}
    reads = [v for n in nodes for v in n.inputs if v and v not in defined]
    inputs = tuple(dict.fromkeys(reads))
    outputs = nodes[-1].outputs
    live = {*inputs, *defined}
    body = Graph(
        inputs,
        outputs,
        nodes,
        types={k: t for k, t in graph.types.items() if k in live},
        name=f"fused_{index}_" + "_".join(n.op.lower() for n in nodes),
    )
    return Node(FUSED, inputs, outputs, {"body": body, "pattern": int(pattern)}, name=body.name)


def fuse(graph: Graph) -> Graph:
    """The graph with each group of two or more nodes as one `loom.fused` node."""
    out = []
    for k, (nodes, pattern) in enumerate(find_groups(graph)):
        out.append(nodes[0] if len(nodes) == 1 else _fused_node(graph, nodes, k, pattern))
    return graph.with_nodes(out)


__all__ = ["FUSED", "find_groups", "fuse"]
