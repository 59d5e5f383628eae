"""simplify: algebraic simplifications that make fewer, simpler nodes.

- Identity, and Dropout at inference (its mask unused), read as their input: their consumers
  read the input instead. (One that produces a graph output stays, keeping the output's name.)
- A chain of shape-only operators (Reshape, Flatten, Squeeze, Unsqueeze) whose intermediate
  values have no other reader becomes one Reshape to the last shape.
- BatchNormalization right after a Conv with constant weights (the Conv's output read by
  nothing else) folds into the Conv's weights and bias.
Run after infer_types and fold_constants (the shapes must be known, the parameters constant).
"""

from __future__ import annotations

import numpy as np

from loom.graph.ir import Graph, Node

_PASS_THROUGH = {"Identity", "Dropout"}
_RESHAPES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}


def _rename(node: Node, renames: dict[str, str]) -> Node:
    if not any(v in renames for v in node.inputs):
        return node
    return node.replace(inputs=tuple(renames.get(v, v) for v in node.inputs))


def _remove_pass_through(graph: Graph) -> Graph:
    consumers = graph.consumers()
    renames: dict[str, str] = {}
    kept = []
    for node in graph.nodes:
        node = _rename(node, renames)
        mask_unused = len(node.outputs) == 1 or not consumers.get(node.outputs[1])
        out = node.outputs[0]
        if (
            node.op in _PASS_THROUGH
            and mask_unused
            and (node.op == "Identity" or len(node.outputs) == 1)
            and out not in graph.outputs
        ):
            renames[out] = node.inputs[0]
            continue
        kept.append(node)
    return graph.with_nodes(kept)


def _merge_reshapes(graph: Graph) -> Graph:
    consumers = graph.consumers()
    producers = graph.producers()
    constants = dict(graph.constants)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for node in graph.nodes:
        if node.op not in _RESHAPES:
            continue
        source = node.inputs[0]
        first = node
        # walk back over reshapes whose only reader is the next one
        while True:
            p = producers.get(source)
            if (
                p is None
                or p.op not in _RESHAPES
                or len(consumers.get(source, ())) != 1
                or source in graph.outputs
            ):
                break
            dropped.add(id(p))
            first, source = p, p.inputs[0]
        if first is node:
            continue
        out = node.outputs[0]
        shape_name = f"{out}.shape"
        constants[shape_name] = np.array(graph.type_of(out).shape, np.int64)
        replaced[id(node)] = Node("Reshape", (source, shape_name), (out,), name=node.name)
    nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in dropped]
    return graph.with_nodes(nodes, constants)


def _fold_batch_norm(graph: Graph) -> Graph:
    consumers = graph.consumers()
    producers = graph.producers()
    constants = dict(graph.constants)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for bn in graph.nodes:
        if bn.op != "BatchNormalization" or len(bn.outputs) != 1:
            continue
        conv = producers.get(bn.inputs[0])
        params = bn.inputs[1:5]
        if (
            conv is None
            or conv.op != "Conv"
            or len(consumers.get(conv.outputs[0], ())) != 1
            or conv.outputs[0] in graph.outputs
            or not all(v in constants for v in (*params, *conv.inputs[1:]) if v)
        ):
            continue
        scale, b, mean, var = (constants[v].astype(np.float64) for v in params)
        eps = float(bn.attr("epsilon", 1e-5))
        weight = constants[conv.inputs[1]]
        factor = scale / np.sqrt(var + eps)
        bias = constants[conv.inputs[2]] if len(conv.inputs) > 2 and conv.inputs[2] else 0.0
        new_w = (weight * factor.reshape(-1, *([1] * (weight.ndim - 1)))).astype(weight.dtype)
        new_b = ((np.asarray(bias, np.float64) - mean) * factor + b).astype(weight.dtype)
        out = bn.outputs[0]
        constants[f"{out}.weight"] = new_w
        constants[f"{out}.bias"] = new_b
        inputs = (conv.inputs[0], f"{out}.weight", f"{out}.bias")
        replaced[id(conv)] = conv.replace(inputs=inputs, outputs=(out,))
        dropped.add(id(bn))
    nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in dropped]
    return graph.with_nodes(nodes, constants)


def simplify(graph: Graph) -> Graph:
    """The graph with the simplifications of the module docstring applied."""
    return _fold_batch_norm(_merge_reshapes(_remove_pass_through(graph)))


__all__ = ["simplify"]
