"""pack_weights: constant weights in the layout the kernels read fastest, once, at compile time.

- Gemm with transB=1 and a constant B (a fully connected layer stored as [out, in], as
  PyTorch exports it) reads a transposed B: each output element is a dot product along B's
  rows, which a kernel can only vectorize by reassociating the sum. The pass gives the node
  B's transpose as a new constant and transB=0: the kernel is then a plain matrix product,
  its vectors along B's contiguous rows (dense_schedules.py), and the sum keeps its order.

The transpose is exact (a copy), so results are those of the kernel with transB=0. Run after
fold_constants (B must be constant) and before eliminate_dead (which drops a B nothing else
reads).
"""

from __future__ import annotations

import numpy as np

from loom.graph.ir import Graph, Node


def taken_names(graph: Graph) -> set[str]:
    """Every value name of `graph`: its inputs, constants, typed values and node outputs."""
    outputs = (v for n in graph.nodes for v in n.outputs)
    return {*graph.inputs, *graph.constants, *graph.types, *outputs}


def fresh_name(name: str, taken: set[str]) -> str:
    """`name`, or `name.k` for the first k that makes it new; added to `taken`."""
    candidate, k = name, 1
    while candidate in taken:
        candidate, k = f"{name}.{k}", k + 1
    taken.add(candidate)
    return candidate


def pack_weights(graph: Graph) -> Graph:
    """`graph` with every Gemm(transB=1) of a constant B reading B's transpose, transB=0."""
    constants = dict(graph.constants)
    taken = taken_names(graph)
    transposed: dict[str, str] = {}  # a constant -> its transpose (shared by its readers)
    nodes: list[Node] = []
    for node in graph.nodes:
        b = node.inputs[1] if node.op == "Gemm" and len(node.inputs) > 1 else ""
        if not node.attr("transB", 0) or b not in constants or constants[b].ndim != 2:
            nodes.append(node)
            continue
        if b not in transposed:
            transposed[b] = fresh_name(f"{b}.transposed", taken)
            constants[transposed[b]] = np.ascontiguousarray(constants[b].T)
        attrs = {k: v for k, v in node.attrs.items() if k != "transB"}
        inputs = (node.inputs[0], transposed[b], *node.inputs[2:])
        nodes.append(node.replace(inputs=inputs, attrs=attrs))
    if not transposed:
        return graph
    return graph.with_nodes(nodes, constants)


__all__ = ["fresh_name", "pack_weights", "taken_names"]
