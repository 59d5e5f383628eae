"""partition: give a backend the chains of operators it takes, as regions; the host keeps the rest.

A backend declares `GraphPattern`s (`Backend.graph_patterns()`): a chain of operators, the
first one the anchor and each next one the only reader of the previous one's only output, and a
`check` that says why a matched chain cannot go to the backend (a dtype, a zero point, a layout
it does not take). Visiting the nodes in order, the first pattern (in the backend's order, so
list longer chains first) whose chain matches and whose check accepts makes a region: one node
`loom.region` with attributes `backend` (its name), `pattern` (the pattern's name) and `body`
(the chain as a Graph whose inputs are the values it reads, constants included), put where the
chain's last node was. Every other node stays on the host. A region is opaque to fusion; the
backend lowers it (`Backend.lower_region`), and its graph passes at the phase "partitioned"
see the whole graph, regions and host nodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from loom.errors import LoomError
from loom.graph.ir import Graph, Node

REGION = "loom.region"

CheckFn = Callable[[Sequence[Node], Graph], str | None]
"""(the matched nodes, the whole graph) -> why the backend cannot take them, or None."""


@dataclasses.dataclass(frozen=True)
class GraphPattern:
    """A chain of operators `ops` (ONNX names) that a backend takes, if `check` accepts it."""

    name: str
    ops: tuple[str, ...]
    check: CheckFn | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise LoomError(f"a graph pattern's name must be an identifier, got {self.name!r}")
        if not self.ops or not all(isinstance(o, str) and o for o in self.ops):
            raise LoomError(
                f"graph pattern {self.name}: ops must be operator names, got {self.ops}"
            )
        object.__setattr__(self, "ops", tuple(self.ops))

    def match(self, anchor: Node, graph: Graph, consumers: dict[str, list[Node]]) -> list[Node]:
        """The chain starting at `anchor`, or [] if it does not match."""
        if anchor.op != self.ops[0]:
            return []
        chain = [anchor]
        for op in self.ops[1:]:
            last = chain[-1]
            if len(last.outputs) != 1 or last.outputs[0] in graph.outputs:
                return []
            readers = consumers.get(last.outputs[0], [])
            if len(readers) != 1 or readers[0].op != op:
                return []
            chain.append(readers[0])
        return chain


def region_node(graph: Graph, nodes: Sequence[Node], backend: str, pattern: str, index: int):
    """The `loom.region` node of `nodes` (a chain whose inner values are read only inside)."""
    defined = {v for n in nodes for v in n.outputs}
    inputs = tuple(dict.fromkeys(v for n in nodes for v in n.inputs if v and v not in defined))
    outputs = nodes[-1].outputs
    live = {*inputs, *defined}
    name = f"{backend}_{index}_{pattern}"
    body = Graph(
        inputs,
        outputs,
        tuple(nodes),
        types={k: t for k, t in graph.types.items() if k in live},
        name=name,
    )
    attrs = {"backend": backend, "pattern": pattern, "body": body}
    return Node(REGION, inputs, outputs, attrs, name=name)


def find_regions(graph: Graph, patterns: Sequence[GraphPattern]):
    """[(pattern, chain)] of the chains `patterns` take, in graph order, each node in one."""
    consumers = graph.consumers()
    taken: set[int] = set()
    found = []
    for node in graph.nodes:
        if id(node) in taken:
            continue
        for pattern in patterns:
            chain = pattern.match(node, graph, consumers)
            if not chain or any(id(n) in taken for n in chain):
                continue
            if pattern.check is not None and pattern.check(chain, graph) is not None:
                continue
            taken.update(id(n) for n in chain)
            found.append((pattern, chain))
            break
    return found


def partition(graph: Graph, backend=None) -> Graph:
    """The graph with the chains `backend.graph_patterns()` take as its regions (unchanged
    without a backend or patterns)."""
    patterns = list(backend.graph_patterns()) if backend is not None else []
    for p in patterns:
        if not isinstance(p, GraphPattern):
            raise LoomError(
                f"backend {backend.name}: graph_patterns() must give GraphPatterns, got {p!r}"
            )
    found = find_regions(graph, patterns)
    if not found:
        return graph
    last_of = {id(chain[-1]): (pattern, chain) for pattern, chain in found}
    inside = {id(n) for _, chain in found for n in chain}
    nodes = []
    for node in graph.nodes:
        if id(node) in last_of:
            pattern, chain = last_of[id(node)]
            nodes.append(region_node(graph, chain, backend.name, pattern.name, len(nodes)))
        elif id(node) not in inside:
            nodes.append(node)
    return graph.with_nodes(nodes)


def regions(graph: Graph, backend: str | None = None) -> list[Node]:
    """The region nodes of `graph` (of one backend if named)."""
    return [
        n
        for n in graph.nodes
        if n.op == REGION and (backend is None or n.attr("backend") == backend)
    ]


__all__ = ["REGION", "GraphPattern", "find_regions", "partition", "region_node", "regions"]
