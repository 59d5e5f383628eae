"""The graph pass list, top to bottom, with the named phases where a user's or a backend's
graph passes run (`optimize(graph, extra=[("simplified", my_pass)])`).

The target's backend takes part twice: `partition` gives it the chains of operators its
`graph_patterns()` declare, and its `graph_passes()` run at their phases (before the user's)
on the whole graph, host nodes included."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

from loom.errors import LoomError
from loom.graph.ir import Graph
from loom.graph.passes.eliminate_dead import eliminate_dead
from loom.graph.passes.fold_constants import fold_constants, fold_constants_keeping_dequantize
from loom.graph.passes.fold_qdq import fold_qdq
from loom.graph.passes.fuse import fuse
from loom.graph.passes.infer_types import infer_types
from loom.graph.passes.pack_weights import pack_weights
from loom.graph.passes.partition import partition
from loom.graph.passes.simplify import simplify

GraphPass = Callable[[Graph], Graph]


@dataclasses.dataclass(frozen=True)
class Phase:
    name: str


def pipeline(backend=None) -> list[GraphPass | Phase]:
    """The passes and phases, in order, for a target of kind `backend` (None: the host)."""
    return [
        Phase("imported"),  # as the frontend made it: every value typed
        infer_types,
        fold_constants_keeping_dequantize,  # fold_qdq needs the quantized weights' DQ nodes
        eliminate_dead,
        simplify,
        fold_qdq,  # DQ -> Conv -> Q as QLinearConv (and MatMul as QLinearMatMul)
        fold_constants,  # simplify made new constants (folded batch norms, merged shapes)
        pack_weights,  # constant weights in the layout the kernels read (Gemm's transB)
        eliminate_dead,
        Phase("simplified"),  # no constant-foldable node, no dead node left
        functools.partial(partition, backend=backend),
        Phase("partitioned"),  # loom.region nodes: the chains the backend takes
        fuse,
        Phase("fused"),  # loom.fused groups: one kernel each
    ]


PHASES = tuple(p.name for p in pipeline() if isinstance(p, Phase))


def graph_passes(backend, target=None) -> list[tuple[str, GraphPass]]:
    """The backend's (phase, graph pass) pairs for `target`, checked."""
    if backend is None:
        return []
    out = []
    for item in backend.graph_passes(target):
        if not isinstance(item, tuple) or len(item) != 2 or not callable(item[1]):
            raise LoomError(
                f"backend {backend.name}: graph_passes() must give (phase, pass), got {item!r}"
            )
        if item[0] not in PHASES:
            raise LoomError(
                f"backend {backend.name}: unknown graph phase {item[0]!r}; the phases are "
                f"{list(PHASES)}"
            )
        out.append(item)
    return out


def optimize(
    graph: Graph, extra: Sequence[tuple[str, GraphPass]] = (), backend=None, target=None
) -> Graph:
    """`graph` through the pipeline for `target` of kind `backend`; at each phase the
    backend's graph passes for `target` run, then each (phase, pass) of `extra`, in order."""
    for phase, _ in extra:
        if phase not in PHASES:
            raise LoomError(f"unknown graph phase {phase!r}; the phases are {list(PHASES)}")
    extra = [*graph_passes(backend, target), *extra]
    for item in pipeline(backend):
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


__all__ = ["PHASES", "GraphPass", "Phase", "graph_passes", "optimize", "pipeline"]
