"""The NPU at the graph level: what it takes from a model, and how its regions are lowered.

Patterns (`PATTERNS`): QLinearConv and QLinearMatMul, each optionally followed by Relu (the
DequantizeLinear -> Conv/MatMul -> QuantizeLinear form becomes these first, by
loom/graph/passes/fold_qdq.py). `check` keeps on the host what the NPU cannot compute exactly:
- int8 data, weights and output; weights, bias, scales and zero points constant;
- weights' zero point 0 and the output's zero point 0 (mvout saturates to [-128, 127] after its
  rounding shift and adds nothing); per-tensor scales (one requantization per kernel);
- the input's zero point is folded into the bias (its weights' sums), and padding reads it;
- a 2-D convolution with group 1, dilation 1, one stride and one padding on every side; a
  matrix product of a 2-D input and 2-D constant weights;
- a requantization scale x_scale * w_scale / y_scale (float32, as onnxruntime computes it) that
  is exactly a multiplier / 2^shift with multiplier < 2^31 and shift <= 62 (the NPU's
  MAX_SHIFT: every float32 in [2^-39, 2^31) is), and a folded bias that fits int32.

The NPU regions requantize with that fixed-point multiplier and round halves to even
(`config_st`'s rounding NPU_ROUND_HALF_EVEN, docs/npu.md): y = round_half_even(acc * M / 2^S),
ONNX's value in exact arithmetic. onnxruntime computes float32(acc) * scale in float32 and
rounds that to nearest even (MlasRequantizeOutput), which is the exact value whenever
|acc * M| < 2^24; the two agree bit for bit there (docs/models.md, "Partitioning for a backend",
says where they can differ beyond it).

`legalize` (the backend's graph pass at the phase "partitioned") rewrites each region into the
NPU's own operators, `npu.conv2d` (NHWC data, (KH, KW, C, F) weights) and `npu.matmul`, with
their weights re-laid out and biases folded at compile time, and host Transposes between NCHW
and NHWC around a convolution. `lower_region` builds an `npu.*` node with the strategies of
loom/backend/npu/ops.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from loom.errors import LoomError
from loom.graph.ir import Graph, Node, TensorType
from loom.graph.passes.partition import REGION, GraphPattern
from loom.ir.function import PrimFunc
from loom.te.lower import lower_schedule

from . import ops
from .simulator import MAX_SHIFT

CONV = "npu.conv2d"
MATMUL = "npu.matmul"
BACKEND_NAME = "npu"
ROUNDING = "half_even"
"""How an NPU region rounds halves when it requantizes: to even, as ONNX and onnxruntime."""


def fixed_point(scale: float) -> tuple[int, int] | None:
    """(multiplier, shift) with multiplier / 2^shift == `scale` exactly, 1 <= multiplier <
    2^31 and 0 <= shift <= MAX_SHIFT (62), in lowest terms; None if `scale` has no such form
    (the NPU would round a different ratio, so it could not give the model's integers)."""
    if not math.isfinite(scale) or scale <= 0:
        return None
    _, exponent = math.frexp(scale)  # scale = m * 2^exponent, 1/2 <= m < 1
    shift = min(MAX_SHIFT, 31 - exponent)  # 31 significant bits, as a multiplier holds
    if shift < 0:
        return None
    multiplier = round(scale * 2.0**shift)
    if multiplier >= 2**31:
        multiplier, shift = (multiplier + 1) // 2, shift - 1
    if multiplier < 1 or shift < 0:
        return None
    while multiplier % 2 == 0 and shift > 0:
        multiplier, shift = multiplier // 2, shift - 1
    if multiplier * 2.0**-shift != scale:  # both sides exact: a double has 53 bits
        return None
    return multiplier, shift


def _scalar(graph: Graph, value: str, what: str) -> float | int | str:
    """The value of constant scalar `value`, or a reason it is not one."""
    if not value:
        return 0  # an absent zero point
    if value not in graph.constants:
        return f"{what} {value} is not a constant"
    array = np.asarray(graph.constants[value])
    if array.size != 1:
        return f"{what} {value} is not per-tensor (it has {array.size} values)"
    return array.reshape(()).item()


def _int8(graph: Graph, values: Sequence[str]) -> str | None:
    for v in values:
        if str(graph.type_of(v).dtype) != "int8":
            return f"{v} is {graph.type_of(v).dtype}, the NPU takes int8"
    return None


def _quantization(graph: Graph, node: Node) -> dict | str:
    """multiplier, shift and the input's zero point of a QLinearConv/QLinearMatMul, or why the
    NPU cannot take it. Inputs: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp."""
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp = (list(node.inputs) + [""] * 8)[:8]
    reason = _int8(graph, [x, w, node.outputs[0]])
    if reason:
        return reason
    if w not in graph.constants:
        return f"its weights {w} are not a constant"
    found = {}
    scalars = {"x_scale": x_scale, "x_zp": x_zp, "w_scale": w_scale, "y_scale": y_scale}
    for key, v in scalars.items():
        found[key] = _scalar(graph, v, key)
        if isinstance(found[key], str):
            return found[key]
    for key, v in (("w_zp", w_zp), ("y_zp", y_zp)):
        if v and v not in graph.constants:
            return f"{key} {v} is not a constant"
        if v and np.any(np.asarray(graph.constants[v]) != 0):
            what = "weights" if key == "w_zp" else "output"
            return f"{key} is not 0 (the NPU's {what} are symmetric)"
    scale = float(
        np.float32(found["x_scale"]) * np.float32(found["w_scale"]) / np.float32(found["y_scale"])
    )
    fixed = fixed_point(scale)
    if fixed is None:
        return (
            f"the requantization scale {scale!r} is not exactly a multiplier / 2^shift "
            f"(multiplier < 2^31, shift <= {MAX_SHIFT})"
        )
    return {"multiplier": fixed[0], "shift": fixed[1], "x_zp": int(found["x_zp"])}


def _conv_geometry(graph: Graph, node: Node) -> dict | str:
    """stride and padding of a QLinearConv the NPU takes, or why it cannot."""
    if graph.type_of(node.inputs[0]).rank != 4:
        return "only 2-D convolutions"
    if node.attr("group", 1) != 1:
        return f"group={node.attr('group')} (the NPU takes group 1)"
    if any(d != 1 for d in node.attr("dilations", (1, 1))):
        return f"dilations={node.attr('dilations')}"
    if node.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return f"auto_pad={node.attr('auto_pad')}"
    strides = tuple(node.attr("strides", (1, 1)))
    pads = tuple(node.attr("pads", (0, 0, 0, 0)))
    if node.attr("auto_pad", "NOTSET") == "VALID":
        pads = (0, 0, 0, 0)
    if len(set(strides)) != 1:
        return f"strides={strides} (one stride for both axes)"
    if len(set(pads)) != 1:
        return f"pads={pads} (the same padding on every side)"
    return {"stride": strides[0], "padding": pads[0]}


def _folded_bias(graph: Graph, node: Node, weights: np.ndarray, x_zp: int) -> np.ndarray | str:
    """The bias with the input's zero point folded in: B - x_zp * (the sum of each output's
    weights); `weights` are (reduction..., outputs)."""
    outputs = weights.shape[-1]
    bias = np.zeros(outputs, np.int64)
    if len(node.inputs) > 8 and node.inputs[8]:
        if node.inputs[8] not in graph.constants:
            return f"its bias {node.inputs[8]} is not a constant"
        bias += np.asarray(graph.constants[node.inputs[8]], np.int64).reshape(outputs)
    sums = weights.astype(np.int64).reshape(-1, outputs).sum(axis=0)
    folded = bias - x_zp * sums
    if folded.min(initial=0) < -(2**31) or folded.max(initial=0) >= 2**31:
        return "its bias with the input's zero point folded in does not fit int32"
    return folded.astype(np.int32)


def _conv_params(graph: Graph, node: Node) -> dict | str:
    quant = _quantization(graph, node)
    if isinstance(quant, str):
        return quant
    geometry = _conv_geometry(graph, node)
    if isinstance(geometry, str):
        return geometry
    weights = np.asarray(graph.constants[node.inputs[3]]).transpose(2, 3, 1, 0)  # KH KW C F
    bias = _folded_bias(graph, node, weights, quant["x_zp"])
    if isinstance(bias, str):
        return bias
    return {**quant, **geometry, "weights": np.ascontiguousarray(weights), "bias": bias}


def _matmul_params(graph: Graph, node: Node) -> dict | str:
    quant = _quantization(graph, node)
    if isinstance(quant, str):
        return quant
    a, b = graph.type_of(node.inputs[0]), graph.type_of(node.inputs[3])
    if a.rank != 2 or b.rank != 2:
        return f"only 2-D matrix products (got {a} x {b})"
    weights = np.asarray(graph.constants[node.inputs[3]])
    bias = _folded_bias(graph, node, weights, quant["x_zp"])
    if isinstance(bias, str):
        return bias
    return {**quant, "weights": weights, "bias": bias}


PARAMS = {"QLinearConv": _conv_params, "QLinearMatMul": _matmul_params}


def _check(nodes: Sequence[Node], graph: Graph) -> str | None:
    params = PARAMS[nodes[0].op](graph, nodes[0])
    return params if isinstance(params, str) else None


PATTERNS = [
    GraphPattern("qlinear_conv_relu", ("QLinearConv", "Relu"), _check),
    GraphPattern("qlinear_conv", ("QLinearConv",), _check),
    GraphPattern("qlinear_matmul_relu", ("QLinearMatMul", "Relu"), _check),
    GraphPattern("qlinear_matmul", ("QLinearMatMul",), _check),
]


# -- legalize: each region into the NPU's operators ------------------------------------------------


class _Builder:
    """New nodes, constants and types for the graph being rewritten."""

    def __init__(self, graph: Graph):
        self.constants = dict(graph.constants)
        self.types = dict(graph.types)
        self.nodes: list[Node] = []

    def constant(self, name: str, value: np.ndarray) -> str:
        self.constants[name] = value
        self.types[name] = TensorType.of(value)
        return name

    def value(self, name: str, t: TensorType) -> str:
        self.types[name] = t
        return name


def _nhwc(t: TensorType) -> TensorType:
    n, c, h, w = t.shape
    return TensorType((n, h, w, c), t.dtype)


def _legalize_region(region: Node, graph: Graph, b: _Builder) -> None:
    body = region.attr("body")
    anchor = body.nodes[0]
    graph = graph.replace(types={**graph.types, **body.types})  # with the region's inner values
    params = PARAMS[anchor.op](graph, anchor)
    if isinstance(params, str):
        raise LoomError(f"npu region {region.name}: {params}")
    relu = len(body.nodes) > 1
    out = body.nodes[-1].outputs[0]
    attrs = {k: params[k] for k in ("multiplier", "shift")} | {"relu": int(relu)}
    attrs["rounding"] = ROUNDING
    w = b.constant(f"{region.name}.weights", params["weights"])
    bias = b.constant(f"{region.name}.bias", params["bias"])
    x = anchor.inputs[0]
    if anchor.op == "QLinearConv":
        x_nhwc = b.value(f"{region.name}.x_nhwc", _nhwc(graph.type_of(x)))
        y_nhwc = b.value(f"{region.name}.y_nhwc", _nhwc(graph.type_of(out)))
        b.nodes.append(Node("Transpose", (x,), (x_nhwc,), {"perm": (0, 2, 3, 1)}))
        attrs |= {"stride": params["stride"], "padding": params["padding"]}
        attrs["pad_value"] = params["x_zp"]
        npu = Node(CONV, (x_nhwc, w, bias), (y_nhwc,), attrs, name=region.name)
        b.nodes.append(_npu_region(npu, b, region))
        b.nodes.append(Node("Transpose", (y_nhwc,), (out,), {"perm": (0, 3, 1, 2)}))
    else:
        npu = Node(MATMUL, (x, w, bias), (out,), attrs, name=region.name)
        b.nodes.append(_npu_region(npu, b, region))


def _npu_region(npu: Node, b: _Builder, region: Node) -> Node:
    """`region` with `npu` as its body."""
    values = (*npu.inputs, *npu.outputs)
    body = Graph(
        npu.inputs, npu.outputs, (npu,), types={v: b.types[v] for v in values}, name=region.name
    )
    return region.replace(
        inputs=npu.inputs, outputs=npu.outputs, attrs={**region.attrs, "body": body}
    )


def legalize(graph: Graph) -> Graph:
    """Each NPU region of `graph` as an `npu.*` operator (with host Transposes around a
    convolution); the rest of the graph unchanged."""
    b = _Builder(graph)
    for node in graph.nodes:
        if node.op == REGION and node.attr("backend") == BACKEND_NAME:
            if node.attr("body").nodes[0].op in (CONV, MATMUL):
                b.nodes.append(node)  # already legal
            else:
                _legalize_region(node, graph, b)
        else:
            b.nodes.append(node)
    used = {v for n in b.nodes for v in n.inputs}
    constants = {k: v for k, v in b.constants.items() if k in used or k in graph.outputs}
    live = {*graph.inputs, *constants, *(v for n in b.nodes for v in n.outputs)}
    types = {k: t for k, t in b.types.items() if k in live}
    return Graph(graph.inputs, graph.outputs, tuple(b.nodes), constants, types, graph.name)


# -- lowering a region -----------------------------------------------------------------------------


def _schedule(node: Node, graph: Graph):
    attrs = {k: int(node.attr(k)) for k in ("multiplier", "shift")}
    attrs["relu"] = bool(node.attr("relu"))
    attrs["rounding"] = str(node.attr("rounding", "half_up"))
    if node.op == CONV:
        return ops.conv2d_nhwc(
            graph.type_of(node.inputs[0]).shape,
            graph.type_of(node.inputs[1]).shape,
            stride=int(node.attr("stride")),
            padding=int(node.attr("padding")),
            pad_value=int(node.attr("pad_value")),
            **attrs,
        )
    if node.op == MATMUL:
        (m, k), (_, n) = graph.type_of(node.inputs[0]).shape, graph.type_of(node.inputs[1]).shape
        return ops.matmul(m, n, k, **attrs)
    raise LoomError(
        f"npu region {node.name}: {node.op} is not an NPU operator (run the npu backend's "
        f"legalize graph pass first); the NPU's are {CONV}, {MATMUL}"
    )


def lower_region(backend, region: Node, graph: Graph, name: str) -> list[PrimFunc]:
    """The host function `name` and NPU kernel of a legalized region."""
    body = region.attr("body")
    if len(body.nodes) != 1:
        raise LoomError(
            f"npu region {region.name}: expected one NPU operator, got {[n.op for n in body.nodes]}"
        )
    s, args = _schedule(body.nodes[0], graph)
    func = lower_schedule(s, args, name)
    return list(backend.partition(func).functions)


__all__ = ["CONV", "MATMUL", "PATTERNS", "fixed_point", "legalize", "lower_region"]
