"""fold_qdq: a convolution or matrix product between DequantizeLinear and QuantizeLinear nodes
becomes the integer operator it stands for, as onnxruntime's QDQ transformers do.

A quantized model in ONNX's QDQ form computes in float between DequantizeLinear (DQ) and
QuantizeLinear (Q) nodes: DQ(x) -> Conv(., DQ(w), DQ(bias)) [-> Relu] -> Q. This pass rewrites
it to QLinearConv (and DQ(a) -> MatMul(., DQ(b)) -> Q to QLinearMatMul), which accumulates the
integers exactly and requantizes once; a Relu between them stays, on the integers, when the
output's zero point is 0 (for uint8 it is then the identity and goes). The float and the
integer forms can differ by one unit where float rounding crosses a half. Conditions: the
weights and every scale and zero point are constants, x's scale and zero point per tensor (and
b's, for MatMul), w's per tensor or per output channel (axis 0), the bias a DQ of int32
constants with zero point 0 and the scale x_scale * w_scale, and the Conv's (or Relu's) output
read only by the Q node. A graph's DQ nodes of constants must still be there: the pipeline's
first constant folding keeps them (`fold_constants_keeping_dequantize`); the DQ nodes that
nothing reads any more are dead code.
"""

from __future__ import annotations

import numpy as np

from loom.graph.ir import Graph, Node, TensorType

QUANTIZED = ("int8", "uint8")


class _Rewrite:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.producers = graph.producers()
        self.consumers = graph.consumers()
        self.constants = dict(graph.constants)
        self.types = dict(graph.types)

    def constant(self, name: str) -> np.ndarray | None:
        return self.constants.get(name) if name else None

    def dequantized(self, value: str, per_channel: bool = False) -> tuple | None:
        """(quantized value, scale, zero point) of the DQ node making `value`, its scale and
        zero point constants (per tensor, or along axis 0 if `per_channel`)."""
        node = self.producers.get(value)
        if node is None or node.op != "DequantizeLinear" or node.attr("block_size", 0):
            return None
        x, scale, zero = (*node.inputs, "", "")[:3]
        if str(self.graph.type_of(x).dtype) not in (*QUANTIZED, "int32"):
            return None
        s = self.constant(scale)
        if s is None or (zero and self.constant(zero) is None):
            return None
        if s.size != 1 and not (per_channel and s.ndim == 1 and node.attr("axis", 1) == 0):
            return None
        if zero and self.constant(zero).size != s.size:
            return None
        return x, scale, zero

    def zero_point(self, name: str, like: str) -> str:
        """`name`, or a new constant zero of `like`'s dtype if absent."""
        if name:
            return name
        dtype = self.graph.type_of(like).dtype.numpy
        new = f"{like}.zero_point"
        self.constants[new] = np.zeros((), dtype)
        self.types[new] = TensorType((), self.graph.type_of(like).dtype)
        return new

    def only_reader(self, value: str, op: str) -> Node | None:
        readers = self.consumers.get(value, [])
        if value in self.graph.outputs or len(readers) != 1 or readers[0].op != op:
            return None
        return readers[0]

    def quantize_after(self, node: Node) -> tuple[list[Node], Node | None] | None:
        """([Relu] or [], the Q node) reading `node`'s output, the Q's scale and zero point
        constant per-tensor, its output int8 or uint8."""
        relu = self.only_reader(node.outputs[0], "Relu")
        last = relu or node
        q = self.only_reader(last.outputs[0], "QuantizeLinear")
        if q is None or q.attr("block_size", 0):
            return None
        scale, zero = (*q.inputs, "", "")[1:3]
        s, z = self.constant(scale), self.constant(zero)
        if s is None or s.size != 1 or (zero and (z is None or z.size != 1)):
            return None
        if str(self.graph.type_of(q.outputs[0]).dtype) not in QUANTIZED:
            return None
        return ([relu] if relu else []), q

    def bias(self, value: str, x_scale: str, w_scale: str) -> str | None:
        """The int32 constant behind a DQ'd bias of scale x_scale * w_scale, or None."""
        found = self.dequantized(value, per_channel=True)
        if found is None:
            return None
        b, scale, zero = found
        if str(self.graph.type_of(b).dtype) != "int32" or b not in self.constants:
            return None
        if zero and np.any(self.constant(zero) != 0):
            return None
        want = (self.constant(x_scale).astype(np.float64) * self.constant(w_scale)).reshape(-1)
        have = self.constant(scale).astype(np.float64).reshape(-1)
        if have.size not in (1, want.size) or not np.allclose(have, want, rtol=1e-6, atol=0):
            return None
        return b

    def integer_node(self, node: Node) -> tuple[list[Node], set[int], Node] | None:
        """The nodes replacing `node` (a Conv or MatMul) and its Q [and Relu], the ids of those,
        and the Q node (where the new nodes go)."""
        conv = node.op == "Conv"
        x = self.dequantized(node.inputs[0])
        w = self.dequantized(node.inputs[1], per_channel=conv)
        after = self.quantize_after(node)
        if x is None or w is None or after is None or w[0] not in self.constants:
            return None
        if str(self.graph.type_of(x[0]).dtype) not in QUANTIZED:
            return None
        if str(self.graph.type_of(w[0]).dtype) not in QUANTIZED:
            return None
        relus, q = after
        inputs = [
            x[0],
            x[1],
            self.zero_point(x[2], x[0]),
            w[0],
            w[1],
            self.zero_point(w[2], w[0]),
            q.inputs[1],
            self.zero_point((*q.inputs, "", "")[2], q.outputs[0]),
        ]
        if conv and len(node.inputs) > 2 and node.inputs[2]:
            b = self.bias(node.inputs[2], x[1], w[1])
            if b is None:
                return None
            inputs.append(b)
        y = q.outputs[0]
        zero_y = self.constant(inputs[7])
        out_dtype = str(self.graph.type_of(y).dtype)
        if relus and np.any(zero_y != 0):
            return None  # Relu on the integers is max(., zero point): no such node here
        keep_relu = relus and out_dtype == "int8"
        made = f"{y}.integer" if keep_relu else y
        if keep_relu:
            self.types[made] = self.graph.type_of(y)
        attrs = dict(node.attrs) if conv else {}
        new = [Node("QLinearConv" if conv else "QLinearMatMul", inputs, (made,), attrs, node.name)]
        if keep_relu:
            new.append(Node("Relu", (made,), (y,), name=relus[0].name))
        return new, {id(node), id(q), *(id(r) for r in relus)}, q


def fold_qdq(graph: Graph) -> Graph:
    """The graph with each DQ -> Conv/MatMul [-> Relu] -> Q as QLinearConv/QLinearMatMul."""
    rewrite = _Rewrite(graph)
    replaced: dict[int, list[Node]] = {}  # the id of the Q node -> what replaces the chain
    removed: set[int] = set()
    for node in graph.nodes:
        if node.op not in ("Conv", "MatMul"):
            continue
        found = rewrite.integer_node(node)
        if found is None:
            continue
        new, gone, q = found
        replaced[id(q)] = new
        removed |= gone
    if not replaced:
        return graph
    nodes = []
    for node in graph.nodes:
        if id(node) in replaced:
            nodes.extend(replaced[id(node)])
        elif id(node) not in removed:
            nodes.append(node)
    return Graph(
        graph.inputs, graph.outputs, tuple(nodes), rewrite.constants, rewrite.types, graph.name
    )


__all__ = ["fold_qdq"]
