"""The graph pass list, top to bottom, with the named phases where a user's or a backend's
graph passes run (`optimize(graph, extra=[("simplified", my_pass)])`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from loom.errors import LoomError
from loom.graph.ir import Graph
from loom.graph.passes.eliminate_dead import eliminate_dead
from loom.graph.passes.fold_constants import fold_constants
from loom.graph.passes.fuse import fuse
from loom.graph.passes.infer_types import infer_types
from loom.graph.passes.simplify import simplify

GraphPass = Callable[[Graph], Graph]


@dataclasses.dataclass(frozen=True)
class Phase:
    name: str


PIPELINE: list[GraphPass | Phase] = [
    Phase("imported"),  # as the frontend made it: every value typed
    infer_types,
    fold_constants,
    eliminate_dead,
    simplify,
    fold_constants,  # simplify made new constants (folded batch norms, merged shapes)
    eliminate_dead,
    Phase("simplified"),  # no constant-foldable node, no dead node left
    fuse,
    Phase("fused"),  # loom.fused groups: one kernel each
]

PHASES = tuple(p.name for p in PIPELINE if isinstance(p, Phase))


def optimize(graph: Graph, extra: Sequence[tuple[str, GraphPass]] = ()) -> Graph:
    """`graph` through PIPELINE; each (phase, pass) of `extra` runs at its phase, in order."""
    for phase, _ in extra:
        if phase not in PHASES:
            raise LoomError(f"unknown graph phase {phase!r}; the phases are {list(PHASES)}")
    for item in PIPELINE:
        if isinstance(item, Phase):
            for phase, graph_pass in extra:
                if phase == item.name:
                    graph = _checked(graph_pass(graph), graph_pass)
        else:
            graph = item(graph)
    return graph


def _checked(result, graph_pass) -> Graph:
    if not isinstance(result, Graph):
        raise LoomError(f"graph pass {graph_pass!r} returned {type(result).__name__}, not a Graph")
    return result


__all__ = ["PHASES", "PIPELINE", "GraphPass", "Phase", "optimize"]
