"""Lowering a graph to one IRModule: a kernel per node (a fused group is one node) and `main`.

Each node's operators build `loom.te` tensors (`Operator.compute`); the kernel's default
schedule inlines every intermediate stage that is not a reduction, and computes a reduction
read only by an element-wise output of its shape inside that output's innermost loop (conv +
bias + ReLU is one loop nest); then the target's backend schedules it further
(`Backend.schedule_group`: the CPU parallelizes and vectorizes). It is lowered to a PrimFunc
whose arguments are the node's inputs, then its outputs.

`main` takes the graph's inputs, then its outputs, and calls the kernels in order. The
constants the kernels read (weights, with their values: CONSTANTS_ATTR) and the intermediate
values (TENSORS_ATTR) are buffers `main` uses without binding: the memory planner
(loom/transform/plan_memory.py) places them in pools, constants embedded in the library.
A region (loom/graph/passes/partition.py) is lowered by its backend (`Backend.lower_region`):
main calls its host function with all its inputs, constants included, then its outputs.
`main` has no allocation of its own: an allocation statement per intermediate value would nest
its body hundreds deep in a real model, deeper than the IR's recursive passes can walk. A
kernel's failure status ends `main` with that status.
"""

from __future__ import annotations

import dataclasses
import re

from tqdm import tqdm

from loom.codegen.llvm.fast_math import FLUSH_DENORMALS_ATTR, flushes_denormals
from loom.errors import LoomError
from loom.graph.ir import Graph, Node, TensorType
from loom.graph.ops import OPERATORS, Pattern
from loom.graph.passes.fuse import FUSED
from loom.graph.passes.partition import REGION
from loom.ir import op as irop
from loom.ir.buffer import Buffer, decl_buffer
from loom.ir.function import IRModule, PrimFunc
from loom.ir.stmt import NOP, AssertStmt, Stmt, seq
from loom.memory.program import CONSTANTS_ATTR, TENSORS_ATTR, ConstantData
from loom.te.lower import lower_schedule
from loom.te.operation import compute, placeholder
from loom.te.schedule import AttachType, create_schedule
from loom.te.tensor import ComputeOp, Reduce, Tensor


@dataclasses.dataclass(frozen=True)
class LoweredGraph:
    """The module, and how `main`'s parameters correspond to the graph's values."""

    module: IRModule
    inputs: tuple[str, ...]
    constants: tuple[str, ...]
    outputs: tuple[str, ...]
    workspace: tuple[str, ...]
    """The intermediate values, placed in pools by the memory planner."""
    kernels: tuple[str, ...]
    """The functions `main` calls, in order: one per node of the graph, then output copies."""


def c_name(text: str) -> str:
    """`text` as a C identifier."""
    name = re.sub(r"\W", "_", text)
    return name if name and not name[0].isdigit() else "v_" + name


def _compile_time_only(graph: Graph) -> set[str]:
    """Values read only as operators' constant inputs (a Reshape's shape): no kernel argument."""
    as_data: set[str] = set()
    as_constant: set[str] = set()
    for node in _all_nodes(graph):
        op = OPERATORS.get(node.op)
        for k, v in enumerate(node.inputs):
            if v:
                (as_constant if _given_as_value(op, k, v, graph) else as_data).add(v)
    return as_constant - as_data


def _given_as_value(op, k: int, v: str, graph: Graph) -> bool:
    """Whether input `k` (value `v`) of a node of `op` reaches its compute as a constant's value
    rather than a tensor: a constant input, or a scalar input that is a one-element constant."""
    if k in op.constant_inputs:
        return True
    value = graph.constants.get(v) if k in op.scalar_inputs else None
    return value is not None and value.size == 1


def _all_nodes(graph: Graph):
    """The operator nodes of the host's kernels (a region's inputs are all arguments)."""
    for node in graph.nodes:
        if node.op == FUSED:
            yield from node.attr("body").nodes
        elif node.op != REGION:
            yield node


def _tensors_of(node: Node, graph: Graph, typed: Graph, env: dict[str, Tensor]) -> None:
    """Compute `node`'s outputs from `env` into `env`; `typed` has their types (a fused
    group's body, or the graph), `graph` the constants."""
    op = OPERATORS.get(node.op)
    if op.compute is None:
        raise LoomError(
            f"node {node.label}: operator {node.op} has no kernel; its value should have been "
            "folded to a constant (run fold_constants)"
        )
    tensors = [
        None if not v or _given_as_value(op, k, v, graph) else env[v]
        for k, v in enumerate(node.inputs)
    ]
    consts = [graph.constants.get(v) if v else None for v in node.inputs]
    out_types = [typed.type_of(v) for v in node.outputs]
    outs = list(op.compute(node, tensors, consts, out_types))
    for v, t, want in zip(node.outputs, outs, out_types):
        if tuple(int(d) for d in t.shape) != want.shape or t.dtype != want.dtype:
            raise LoomError(
                f"node {node.label}: {node.op} computed {t.dtype}{list(t.shape)}, "
                f"but {v} has type {want}"
            )
        env[v] = t


def _copy(t: Tensor, name: str) -> Tensor:
    return compute(t.shape, lambda *i: t(*i), name=name)


def _pattern(node: Node) -> Pattern:
    if node.op == FUSED:
        return Pattern(node.attr("pattern"))
    return OPERATORS.get(node.op).pattern


def _kernel(node: Node, graph: Graph, name: str, compile_time: set[str], target) -> PrimFunc:
    body = node.attr("body") if node.op == FUSED else None
    nodes = body.nodes if body is not None else (node,)
    args = [v for v in dict.fromkeys(node.inputs) if v and v not in compile_time]
    env: dict[str, Tensor] = {}
    placeholders = []
    for v in args:
        t = graph.type_of(v)
        env[v] = placeholder(t.shape, dtype=t.dtype, name=c_name(v))
        placeholders.append(env[v])
    for n in nodes:
        _tensors_of(n, graph, body or graph, env)
    outputs = [env[v] for v in node.outputs]
    # an output that is an input (a reshape that changes nothing) still needs its own buffer
    outputs = [
        _copy(t, c_name(v)) if any(t is p for p in placeholders) else t
        for v, t in zip(node.outputs, outputs)
    ]
    s = create_schedule([t.op for t in outputs])
    for stage in s.stages:
        op = stage.op
        if isinstance(op, ComputeOp) and not stage.is_output and not isinstance(op.body, Reduce):
            stage.compute_inline()
    for stage in s.stages:
        _into_its_epilogue(s, stage)
    if target is not None:
        target.backend.schedule_group(s, outputs, _pattern(node), target)
    return lower_schedule(s, placeholders + outputs, name)


def _readers_through_inlined(s, stage) -> list:
    """The stages that read `stage`, looking through stages inlined into their readers."""
    out = []
    for reader in s.readers(stage):
        if reader.attach_type == AttachType.INLINE:
            out += _readers_through_inlined(s, reader)
        elif reader not in out:
            out.append(reader)
    return out


def _into_its_epilogue(s, stage) -> None:
    """A reduction read only by an element-wise output of its own shape (a conv with its bias
    and activation) is computed inside the output's innermost loop, one element at a time: the
    group is one loop nest, and the reduction's value never goes to memory."""
    op = stage.op
    if stage.is_output or not isinstance(op, ComputeOp) or not isinstance(op.body, Reduce):
        return
    readers = _readers_through_inlined(s, stage)
    if len(readers) != 1:
        return
    out = readers[0]
    if (
        not out.is_output
        or not isinstance(out.op, ComputeOp)
        or isinstance(out.op.body, Reduce)
        or not out.op.axis  # a scalar: no loop to put it in
        or [int(d) for d in out.op.output(0).shape] != [int(d) for d in op.output(0).shape]
    ):
        return
    stage.compute_at(out, out.op.axis[-1])
    stage.set_scope("local")


def _copy_kernel(t: TensorType, name: str) -> PrimFunc:
    src = placeholder(t.shape, dtype=t.dtype, name="src")
    dst = _copy(src, "dst")
    return lower_schedule(create_schedule(dst.op), [src, dst], name)


PROGRESS_MIN_KERNELS = 8
"""A graph with more kernels shows a progress bar while they are made (on a terminal)."""


def _region_functions(node: Node, graph: Graph, name: str, backend) -> list[PrimFunc]:
    """The functions `backend` makes of region `node`; the first one is called as `name`."""
    owner = node.attr("backend")
    if backend is None or backend.name != owner:
        raise LoomError(
            f"node {node.label} is a region of backend {owner}, but the graph is lowered for "
            f"{'the host' if backend is None else 'backend ' + backend.name}"
        )
    funcs = list(backend.lower_region(node, graph, name))
    expected = len(dict.fromkeys(node.inputs)) + len(node.outputs)
    if not funcs or funcs[0].name != name or len(funcs[0].params) != expected:
        raise LoomError(
            f"backend {owner}: lower_region of {node.label} must give first a function {name} "
            f"taking the region's {expected} inputs and outputs"
        )
    return funcs


def lower_graph(graph: Graph, progress: bool | None = None, target=None) -> LoweredGraph:
    """The IRModule of `graph` (typed, with constants folded; fused or not) for `target`
    (a Target: its backend schedules the kernels and lowers its regions; None: the default
    schedules only). `progress`: show a progress bar (None: on a terminal, for more than
    PROGRESS_MIN_KERNELS kernels)."""
    backend = target.backend if target is not None else None
    compile_time = _compile_time_only(graph)
    functions: list[PrimFunc] = []
    calls: list[tuple[str, list[str]]] = []  # (kernel, the values of its arguments)
    show = len(graph.nodes) > PROGRESS_MIN_KERNELS if progress is None else progress
    bar = tqdm(
        graph.nodes, desc=f"kernels of {graph.name}", unit="kernel", disable=None if show else True
    )
    for k, node in enumerate(bar):
        grouped = node.op in (FUSED, REGION)
        label = node.name if grouped else f"{node.op}_{node.name or node.outputs[0]}"
        name = c_name(f"{graph.name}_{k}_{label}")[:120]
        if node.op == REGION:
            functions += _region_functions(node, graph, name, backend)
            args = list(dict.fromkeys(node.inputs))
        else:
            functions.append(_kernel(node, graph, name, compile_time, target))
            args = [v for v in dict.fromkeys(node.inputs) if v and v not in compile_time]
        calls.append((name, args + list(node.outputs)))
    # main's outputs; one that no node computes (an input, a constant, a repeated output) is
    # a copy made by a kernel of its own
    computed = {v for n in graph.nodes for v in n.outputs}
    outputs = []
    for k, v in enumerate(graph.outputs):
        if v in computed and v not in graph.outputs[:k]:
            outputs.append(v)
            continue
        copy = f"{v}.output{k}"
        name = c_name(f"{graph.name}_copy_{k}")
        functions.append(_copy_kernel(graph.type_of(v), name))
        calls.append((name, [v, copy]))
        outputs.append(copy)
    types = {copy: graph.type_of(v) for copy, v in zip(outputs, graph.outputs)}
    used = dict.fromkeys(a for _, args in calls for a in args)
    constants = tuple(v for v in used if v in graph.constants)
    buffers: dict[str, Buffer] = {}
    for v in (*graph.inputs, *constants, *outputs, *used):
        if v not in buffers:
            t = types.get(v) or graph.type_of(v)
            buffers[v] = decl_buffer(t.shape, t.dtype, c_name(v))
    body: Stmt = seq(
        *[
            AssertStmt(
                irop.equal(irop.call_func(name, *[buffers[a].data for a in args]), 0), None, NOP
            )
            for name, args in calls
        ]
    )
    interface = {*graph.inputs, *outputs}
    workspace = tuple(v for v in buffers if v not in interface and v not in constants)
    params = [buffers[v] for v in (*graph.inputs, *outputs)]
    main = PrimFunc(c_name(graph.name), tuple(params), body)
    main = main.with_attr(TENSORS_ATTR, tuple(buffers[v] for v in workspace))
    data = tuple((buffers[v], ConstantData(v, graph.constants[v])) for v in constants)
    main = main.with_attr(CONSTANTS_ATTR, data)
    if flushes_denormals(target):
        main = main.with_attr(FLUSH_DENORMALS_ATTR, True)
    return LoweredGraph(
        IRModule((main, *functions)),
        tuple(graph.inputs),
        constants,
        tuple(outputs),
        workspace,
        tuple(name for name, _ in calls),
    )


__all__ = ["LoweredGraph", "c_name", "lower_graph"]
