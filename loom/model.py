"""`loom.compile`: a model (ONNX or a loom Graph) to a callable compiled module.

The graph goes through the graph passes (loom/graph/passes/pipeline.py), is lowered to one
IRModule (loom/graph/lower.py) and built for the target like any module. The result is called
with numpy arrays by the model's input names and returns its outputs by name.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
from collections.abc import Mapping, Sequence

from loom.codegen.c.compile import compile_c_object
from loom.collector import fewer_collections
from loom.driver import lower
from loom.errors import LoomError
from loom.frontend import from_onnx
from loom.graph.ir import Graph
from loom.graph.lower import LoweredGraph, lower_graph
from loom.graph.passes.partition import REGION
from loom.graph.passes.pipeline import GraphPass, optimize
from loom.ir.function import IRModule
from loom.memory.pool import Pool
from loom.memory.program import PLAN_ATTR, MemoryPlan, describe_pools
from loom.packaging import finish
from loom.runtime.c_entry import check_name, wrapper_source
from loom.runtime.model import Model, ModelModule
from loom.runtime.module import NativeModule
from loom.target import Target, as_target


class CompiledModel(Model):
    """A model compiled here: `model(input=x)` returns {output name: array}; `graph` is the
    graph that was lowered (fused), `kernels` the kernels' names."""

    def __init__(
        self, graph: Graph, lowered: LoweredGraph, module, target: Target, memory_plan: MemoryPlan
    ):
        super().__init__(module)
        self.graph = graph
        self.lowered = lowered
        self.target = target
        self.memory_plan = memory_plan
        """Where every buffer went: loom.memory.program.MemoryPlan."""

    @property
    def kernels(self) -> tuple[str, ...]:
        return self.lowered.kernels


def _model_name(model, graph: Graph) -> str:
    """The file's name for a path, else the graph's unless it is the default "main"."""
    if isinstance(model, str | os.PathLike):
        stem = re.sub(r"\W", "_", pathlib.Path(model).stem)
        if stem and not stem[0].isdigit():
            return stem
    return graph.name if graph.name != "main" and graph.name.isidentifier() else "model"


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


@dataclasses.dataclass(frozen=True)
class LoweredModel:
    """A model lowered for its target and planned, before code generation."""

    name: str
    graph: Graph
    lowered: LoweredGraph
    module: IRModule
    """The lowered module, every buffer in its pool (plan_memory ran)."""
    memory_plan: MemoryPlan


@fewer_collections
def lower_model(
    model,
    target: str | Target = "llvm",
    shapes: Mapping[str, Sequence[int]] | None = None,
    passes: Sequence[tuple[str, GraphPass]] = (),
    pools: Sequence[Pool] = (),
    name: str | None = None,
) -> LoweredModel:
    """`compile`'s work up to code generation: the model imported, optimized, lowered to one
    IRModule and its memory planned (what `loom plan` draws). The arguments are compile's."""
    target = as_target(target)
    if isinstance(model, Graph):
        if shapes:
            raise LoomError("shapes= applies to ONNX models; a Graph's shapes are already static")
        graph = model
    else:
        graph = from_onnx(model, shapes=shapes)
    name = check_name(_model_name(model, graph) if name is None else name)
    if name == "main":
        raise LoomError("name='main' would clash with a C program's main; choose another")
    graph = dataclasses.replace(graph, name=name)
    graph = optimize(graph, passes, backend=target.backend, target=target)
    lowered = lower_graph(graph, target=target)
    mod = lower(lowered.module, target=target, pools=pools)
    return LoweredModel(name, graph, lowered, mod, mod.attr(PLAN_ATTR))


@fewer_collections
def compile(
    model,
    target: str | Target = "llvm",
    shapes: Mapping[str, Sequence[int]] | None = None,
    passes: Sequence[tuple[str, GraphPass]] = (),
    pools: Sequence[Pool] = (),
    name: str | None = None,
) -> CompiledModel:
    """Compile `model` (a path to an .onnx file, an onnx.ModelProto, or a loom Graph) for
    `target`; `shapes` fixes the inputs' unknown dimensions; `passes` are (phase, pass) pairs
    run at the graph pipeline's phases. For an accelerator's target ("npu"), the chains of
    operators its backend takes run on it, and the rest on the host. `pools`
    (loom.memory.Pool) are where the model's tensors and constants go (docs/memory-planning.md);
    without them, a workspace the caller gives and constants embedded in the library. `name`
    (a C identifier; default: the ONNX file's name, else the graph's, else "model") names the
    model's functions and its C entry point `<name>_run` (`c_header`)."""
    target = as_target(target)
    done = lower_model(model, target, shapes, passes, pools, name)
    graph, lowered = done.graph, done.lowered
    interface = ModelModule(
        lowered.module.functions[0].name,
        [(v, graph.type_of(v).shape, str(graph.type_of(v).dtype)) for v in graph.inputs],
        [(v, graph.type_of(v).shape, str(graph.type_of(v).dtype)) for v in graph.outputs],
        _describe_groups(graph, lowered, target),
        describe_pools(done.memory_plan),
        done.name,
        target.alignment,
    )
    module = target.backend.codegen(done.module, target)
    if target.is_host and isinstance(module, NativeModule):  # the C entry point <name>_run
        source = wrapper_source(done.name, interface)
        entry = NativeModule(
            "c", {}, {"c": source}, target, object_code=compile_c_object(source, f"{done.name}_run")
        )
        module.import_module(entry)
    module = finish(module)
    module.import_module(interface)
    return CompiledModel(graph, lowered, module, target, done.memory_plan)


__all__ = ["CompiledModel", "LoweredModel", "compile", "lower_model"]
