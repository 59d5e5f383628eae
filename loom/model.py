"""`loom.compile`: a model (ONNX or a loom Graph) to a callable compiled module.

The graph goes through the graph passes (loom/graph/passes/pipeline.py), is lowered to one
IRModule (loom/graph/lower.py) and built for the target like any module. The result is called
with numpy arrays by the model's input names and returns its outputs by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loom.driver import build
from loom.errors import LoomError
from loom.frontend import from_onnx
from loom.graph.ir import Graph
from loom.graph.lower import LoweredGraph, lower_graph
from loom.graph.passes.partition import REGION
from loom.graph.passes.pipeline import GraphPass, optimize
from loom.runtime.model import Model, ModelModule
from loom.target import Target, as_target


class CompiledModel(Model):
    """A model compiled here: `model(input=x)` returns {output name: array}; `graph` is the
    graph that was lowered (fused), `kernels` the kernels' names."""

    def __init__(self, graph: Graph, lowered: LoweredGraph, module, target: Target):
        super().__init__(module)
        self.graph = graph
        self.lowered = lowered
        self.target = target

    @property
    def kernels(self) -> tuple[str, ...]:
        return self.lowered.kernels


def _describe_groups(graph: Graph, lowered: LoweredGraph, target: Target) -> list[dict]:
    """Each kernel main calls: its operators and where it runs (a region's backend; else the
    target, or "host" beside an accelerator's regions)."""
    host = "host" if target.backend.partitions else str(target)
    groups = []
    for node, kernel in zip(graph.nodes, lowered.kernels):
        body = node.attr("body")
        ops = [n.op for n in body.nodes] if body is not None else [node.op]
        where = node.attr("backend") if node.op == REGION else host
        groups.append({"kernel": kernel, "ops": ops, "target": where})
    return groups


def compile(
    model,
    target: str | Target = "llvm",
    shapes: Mapping[str, Sequence[int]] | None = None,
    passes: Sequence[tuple[str, GraphPass]] = (),
) -> CompiledModel:
    """Compile `model` (a path to an .onnx file, an onnx.ModelProto, or a loom Graph) for
    `target`; `shapes` fixes the inputs' unknown dimensions; `passes` are (phase, pass) pairs
    run at the graph pipeline's phases. For an accelerator's target ("npu"), the chains of
    operators its backend takes run on it, and the rest on the host."""
    target = as_target(target)
    if isinstance(model, Graph):
        if shapes:
            raise LoomError("shapes= applies to ONNX models; a Graph's shapes are already static")
        graph = model
    else:
        graph = from_onnx(model, shapes=shapes)
    graph = optimize(graph, passes, backend=target.backend)
    lowered = lower_graph(graph, target=target)
    module = build(lowered.module, target=target)
    interface = ModelModule(
        lowered.module.functions[0].name,
        [(v, graph.type_of(v).shape, str(graph.type_of(v).dtype)) for v in graph.inputs],
        [(v, graph.type_of(v).shape, str(graph.type_of(v).dtype)) for v in graph.outputs],
        [graph.constants[v] for v in lowered.constants],
        _describe_groups(graph, lowered, target),
        [(v, graph.type_of(v).shape, str(graph.type_of(v).dtype)) for v in lowered.workspace],
    )
    module.import_module(interface)
    return CompiledModel(graph, lowered, module, target)


__all__ = ["CompiledModel", "compile"]
