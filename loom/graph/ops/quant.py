"""Quantized operators (ONNX opset 21): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
QLinearConv, QLinearMatMul, ConvInteger and MatMulInteger.

loom computes what onnxruntime's CPU kernels (MLAS) compute, bit for bit:
- quantizing divides by the scale in float32 (`x / scale`, never `x * (1 / scale)`), clamps to
  the output type's range shifted by the zero point, rounds half to even and adds the zero point
  (MlasQuantizeLinear). The clamp is SSE's `maxps`/`minps`, which return the bound for a NaN: a
  NaN quantizes to the type's minimum;
- integer products accumulate in int32, wrapping (ONNX: "accumulation may overflow if and only
  if in 32 bits"), with the bias added in int32;
- requantizing (QLinearConv, QLinearMatMul) converts the int32 sum to float32, multiplies it by
  the float32 multiplier `x_scale * w_scale / y_scale` (computed in that order, per output
  channel or column), clamps, rounds half to even and adds the zero point
  (MlasRequantizeOutput). Every step is one correctly rounded float32 operation, so no tie case
  differs. One-element constant scales become immediates: the multiplier folds at compile time;
- DynamicQuantizeLinear follows onnxruntime's GetQuantizationParameter: the range is widened to
  include 0, the scale is `(max - min) / 255` (1 when the range is empty, where ONNX's formula
  divides by 0) and the zero point `round(clamp(0 - min / scale, 0, 255))`. The range skips NaNs
  (where MLAS's vector min/max keeps or drops one depends on its lane: loom does not follow it).

Scales and zero points may be graph inputs or constants. What loom refuses: blocked
quantization (block_size != 0), float8/int4/int2 types, and QuantizeLinear of float16 or int32.
float16 scales of QLinearMatMul (which onnxruntime does not take) are widened to float32.
Where ONNX allows more than onnxruntime, loom follows ONNX: per-channel weight zero points that
differ (onnxruntime's QLinearConv requires them equal), per-row `a` parameters of
QLinearMatMul, int8 x with uint8 w.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from loom import te
from loom.abi.dtype import dtype
from loom.errors import LoomError
from loom.graph.ir import Node, TensorType
from loom.graph.ops.base import Operator, Pattern, broadcast_index, normalize_axis, register
from loom.graph.ops.elementwise import ONNX_ELEMENT_TYPES
from loom.graph.ops.nn import (
    ConvShape,
    check_window_attrs,
    conv_evaluate,
    conv_shape,
    matmul_compute,
    matmul_evaluate,
    matmul_shape,
    padded_source,
    window_index,
)
from loom.ir.expr import PrimExpr
from loom.te.tensor import Tensor

QRANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535)}
"""The quantized types loom has, with their saturation ranges."""
BYTES = ("int8", "uint8")
DEQUANTIZABLE = (*QRANGES, "int32")
SCALES = ("float32", "float16")
QUANTIZE_DTYPES = {k: v for k, v in ONNX_ELEMENT_TYPES.items() if v in QRANGES}
"""QuantizeLinear's output_dtype values loom supports (TensorProto numbers)."""
CONV_ATTRS = frozenset({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})


# -- small helpers ------------------------------------------------------------------------------


def _fail(node: Node, message: str) -> LoomError:
    return LoomError(f"{node.label}: {message}")


def _input(items: Sequence, k: int):
    return items[k] if k < len(items) else None


def _require(node: Node, types: Sequence[TensorType | None], names: Sequence[str]) -> None:
    for k, name in enumerate(names):
        if _input(types, k) is None:
            raise _fail(node, f"input {k} ({name}) is required")


def _expect(node: Node, t: TensorType, allowed: Sequence[str], what: str) -> None:
    if str(t.dtype) not in allowed:
        raise _fail(node, f"{what} must be one of {', '.join(allowed)}, got {t.dtype}")


def _same_dtype(node: Node, t: TensorType | None, like: TensorType, what: str, of: str) -> None:
    if t is not None and t.dtype != like.dtype:
        raise _fail(node, f"{what} must have {of}'s dtype {like.dtype}, got {t.dtype}")


def _one_element(node: Node, t: TensorType | None, what: str) -> None:
    """`t` is per-tensor: a scalar or a 1-D tensor of one element (what onnxruntime takes)."""
    if t is not None and (t.size != 1 or t.rank > 1):
        raise _fail(node, f"{what} must be a scalar (per-tensor), got shape {list(t.shape)}")


def _tensor_types(tensors: Sequence[Tensor | None], consts: Sequence = ()) -> list:
    """The types of a kernel's inputs: its tensors', or its constants' for constant inputs."""
    types = []
    for k, t in enumerate(tensors):
        value = _input(consts, k)
        if t is not None:
            types.append(TensorType(t.shape, str(t.dtype)))
        else:
            types.append(None if value is None else TensorType.of(value))
    return types


def _array_types(arrays: Sequence[np.ndarray | None]) -> list[TensorType | None]:
    return [None if a is None else TensorType.of(a) for a in arrays]


def _wrap_int32(a: np.ndarray) -> np.ndarray:
    """An exact integer sum as the int32 accumulator holds it (wrapped modulo 2**32)."""
    return a.astype(np.int64).astype(np.int32)


def _np_scalar(a: np.ndarray | None, dt=np.int64) -> np.ndarray:
    return np.zeros((), dt) if a is None else a.reshape(()).astype(dt)


@dataclasses.dataclass(frozen=True)
class _Param:
    """A scale or zero point as a kernel reads it: a one-element constant is an immediate (so a
    constant multiplier folds at compile time), anything else is read from its tensor."""

    tensor: Tensor | None
    value: np.ndarray | None

    def at(self, index: Sequence = ()) -> PrimExpr:
        """The element at `index` (ignored when there is one element)."""
        if self.value is not None and self.value.size == 1:
            dt = str(dtype(self.value.dtype))
            return te.const(self.value.reshape(-1)[0].item(), dt)
        t = self.tensor
        if t is None:
            raise LoomError(
                f"a scale or zero point of {self.value.size} elements must be given as a tensor"
            )
        if math.prod(t.shape) == 1:
            return t(tuple(0 for _ in t.shape))
        return t(tuple(index))

    def scale(self, index: Sequence = ()) -> PrimExpr:
        """The element as float32 (float16 scales widen first)."""
        return te.cast(self.at(index), "float32")

    def zero_point(self, index: Sequence = ()) -> PrimExpr:
        return te.cast(self.at(index), "int32")


def _param(node: Node, tensors, consts, k: int) -> _Param | None:
    if k >= len(node.inputs) or not node.inputs[k]:
        return None
    tensor, value = _input(tensors, k), _input(consts, k)
    if tensor is None and value is None:
        raise _fail(node, f"input {k} ({node.inputs[k]}) has neither a tensor nor a value")
    return _Param(tensor, value)


def _zero_point_expr(p: _Param | None, index: Sequence = ()) -> PrimExpr:
    return te.const(0, "int32") if p is None else p.zero_point(index)


# -- rounding and saturation ----------------------------------------------------------------------


def _saturate(v: PrimExpr, zp: PrimExpr, qtype: str) -> PrimExpr:
    """MLAS's last steps: clamp `v` (float) to the range of `qtype` less the zero point `zp`
    (int32), as maxps/minps do (a NaN becomes the lower bound), round half to even, add zp."""
    lo, hi = QRANGES[qtype]
    low = te.cast(lo - zp, v.dtype)
    high = te.cast(hi - zp, v.dtype)
    v = te.select(te.greater(v, low), v, low)
    v = te.select(te.less(v, high), v, high)
    return te.cast(te.cast(te.round(v), "int32") + zp, qtype)


def _np_saturate(v: np.ndarray, zp: np.ndarray, qtype: str) -> np.ndarray:
    """`_saturate` in numpy (`v` float32, `zp` integers broadcasting against it)."""
    lo, hi = QRANGES[qtype]
    zp = np.asarray(zp, np.int64)
    low = (lo - zp).astype(v.dtype)
    high = (hi - zp).astype(v.dtype)
    v = np.where(v > low, v, low)
    v = np.where(v < high, v, high)
    return (np.rint(v).astype(np.int64) + zp).astype(qtype)


# -- per-tensor or per-axis parameters of QuantizeLinear and DequantizeLinear ---------------------


def _check_block_size(node: Node) -> str | None:
    block = int(node.attr("block_size", 0))
    if block != 0:
        return f"block_size={block} (blocked quantization) is not supported"
    return None


def _qdq_axis(node: Node, x: TensorType, scale: TensorType, zp: TensorType | None) -> int | None:
    """The axis of per-axis quantization, or None for per-tensor."""
    if scale.rank <= 1 and scale.size == 1:
        _one_element(node, zp, "the zero point")
        return None
    axis_attr = int(node.attr("axis", 1))
    if scale.rank != 1 or x.rank == 0:
        raise _fail(
            node,
            f"the scale of shape {list(scale.shape)} is neither per-tensor (one element) nor "
            f"per-axis (1-D); blocked quantization is not supported",
        )
    axis = normalize_axis(axis_attr, x.rank, node)
    if scale.shape[0] != x.shape[axis]:
        raise _fail(
            node,
            f"a per-axis scale must have x's axis {axis_attr} length {x.shape[axis]}, got "
            f"{scale.shape[0]}",
        )
    if zp is not None and zp.shape != scale.shape:
        raise _fail(node, f"the zero point's shape {list(zp.shape)} differs from the scale's")
    return axis


def _np_along(p: np.ndarray | None, axis: int | None, rank: int, dt) -> np.ndarray:
    """A per-tensor or per-axis parameter shaped to broadcast against the tensor."""
    if p is None:
        return np.zeros((), dt)
    if axis is None:
        return p.reshape(()).astype(dt)
    return p.astype(dt).reshape([-1 if k == axis else 1 for k in range(rank)])


# -- QuantizeLinear -------------------------------------------------------------------------------


def _quantize_dtype(node: Node, zp: TensorType | None) -> str:
    code = int(node.attr("output_dtype", 0))
    if code and code not in QUANTIZE_DTYPES:
        raise _fail(node, _output_dtype_reason(code))
    if zp is None:
        return QUANTIZE_DTYPES[code] if code else "uint8"
    _expect(node, zp, tuple(QRANGES), "y_zero_point")
    if code and QUANTIZE_DTYPES[code] != str(zp.dtype):
        raise _fail(
            node, f"output_dtype={code} ({QUANTIZE_DTYPES[code]}) but y_zero_point is {zp.dtype}"
        )
    return str(zp.dtype)


def _output_dtype_reason(code: int) -> str:
    supported = ", ".join(f"{k} ({v})" for k, v in QUANTIZE_DTYPES.items())
    return (
        f"output_dtype={code} is not supported (loom quantizes to {supported}; it has no float8, "
        "int4 or int2 types)"
    )


def _quantize_types(node: Node, types) -> tuple[str, int | None]:
    _require(node, types, ("x", "y_scale"))
    x, scale, zp = types[0], types[1], _input(types, 2)
    _expect(node, x, ("float32",), "x")
    _same_dtype(node, scale, x, "y_scale", "x")
    return _quantize_dtype(node, zp), _qdq_axis(node, x, scale, zp)


def _quantize_infer(node, types, consts):
    out, _ = _quantize_types(node, types)
    return [TensorType(types[0].shape, out)]


def _quantize_evaluate(node, inputs):
    x, scale, zp = inputs[0], inputs[1], _input(inputs, 2)
    out, axis = _quantize_types(node, _array_types(inputs))
    v = x / _np_along(scale, axis, x.ndim, np.float32)
    return [_np_saturate(v, _np_along(zp, axis, x.ndim, np.int64), out)]


def _quantize_compute(node, tensors, consts, out_types):
    x = tensors[0]
    out, axis = _quantize_types(node, _tensor_types(tensors, consts))
    scale, zp = _param(node, tensors, consts, 1), _param(node, tensors, consts, 2)

    def rule(*i):
        at = () if axis is None else (i[axis],)
        return _saturate(x(*i) / scale.scale(at), _zero_point_expr(zp, at), out)

    return [te.compute(x.shape, rule, name="quantize_linear")]


def _quantize_check(node: Node) -> str | None:
    code = int(node.attr("output_dtype", 0))
    if code and code not in QUANTIZE_DTYPES:
        return _output_dtype_reason(code)
    return _check_block_size(node)


register(
    Operator(
        "QuantizeLinear",
        Pattern.BROADCAST,
        _quantize_infer,
        _quantize_evaluate,
        _quantize_compute,
        attrs={"axis", "block_size", "output_dtype", "saturate"},
        check=_quantize_check,
        doc="float32 to int8, uint8, int16 or uint16, per tensor or per axis: saturate(round half "
        "to even(x / scale) + zero point), as onnxruntime (a NaN gives the type's minimum). "
        "Blocked quantization and float8/int4 outputs are not supported; saturate only concerns "
        "float8.",
    )
)


# -- DequantizeLinear -----------------------------------------------------------------------------


def _dequantize_types(node: Node, types) -> tuple[str, int | None]:
    _require(node, types, ("x", "x_scale"))
    x, scale, zp = types[0], types[1], _input(types, 2)
    _expect(node, x, DEQUANTIZABLE, "x")
    _expect(node, scale, SCALES, "x_scale")
    _same_dtype(node, zp, x, "x_zero_point", "x")
    return str(scale.dtype), _qdq_axis(node, x, scale, zp)


def _dequantize_infer(node, types, consts):
    out, _ = _dequantize_types(node, types)
    return [TensorType(types[0].shape, out)]


def _dequantize_evaluate(node, inputs):
    x, scale, zp = inputs[0], inputs[1], _input(inputs, 2)
    out, axis = _dequantize_types(node, _array_types(inputs))
    # onnxruntime: float(int32(x) - zp) * float(scale), rounded to the output type at the end
    shifted = x.astype(np.int32) - _np_along(zp, axis, x.ndim, np.int32)
    y = shifted.astype(np.float32) * _np_along(scale, axis, x.ndim, np.float32)
    return [y.astype(out)]


def _dequantize_compute(node, tensors, consts, out_types):
    x = tensors[0]
    out, axis = _dequantize_types(node, _tensor_types(tensors, consts))
    scale, zp = _param(node, tensors, consts, 1), _param(node, tensors, consts, 2)

    def rule(*i):
        at = () if axis is None else (i[axis],)
        shifted = te.cast(x(*i), "int32") - _zero_point_expr(zp, at)
        return te.cast(te.cast(shifted, "float32") * scale.scale(at), out)

    return [te.compute(x.shape, rule, name="dequantize_linear")]


register(
    Operator(
        "DequantizeLinear",
        Pattern.BROADCAST,
        _dequantize_infer,
        _dequantize_evaluate,
        _dequantize_compute,
        attrs={"axis", "block_size"},
        check=_check_block_size,
        doc="int8, uint8, int16, uint16 or int32 to the scale's float32 or float16, per tensor or "
        "per axis: (x - zero point) * scale, computed in float32. Blocked quantization and "
        "float8/int4 inputs are not supported.",
    )
)


# -- DynamicQuantizeLinear ------------------------------------------------------------------------


def _dynamic_infer(node, types, consts):
    _require(node, types, ("x",))
    _expect(node, types[0], ("float32",), "x")
    return [
        TensorType(types[0].shape, "uint8"),
        TensorType((), "float32"),
        TensorType((), "uint8"),
    ][: len(node.outputs)]


def _np_dynamic_parameters(x: np.ndarray) -> tuple[np.float32, np.float32]:
    """onnxruntime's (scale, zero point) of `x`, both float32."""
    f32 = np.float32
    flat = x.reshape(-1)
    low = min(np.fmin.reduce(flat, initial=f32(np.inf)), f32(0))
    high = max(np.fmax.reduce(flat, initial=f32(-np.inf)), f32(0))
    scale = f32(1) if high == low else f32(high - low) / f32(255)
    initial = f32(0) - low / scale
    zp = np.rint(max(f32(0), min(f32(255), initial)))
    return f32(scale), f32(zp)


def _dynamic_evaluate(node, inputs):
    x = inputs[0]
    _dynamic_infer(node, _array_types(inputs), [])
    scale, zp = _np_dynamic_parameters(x)
    y = _np_saturate(x / scale, np.int64(zp), "uint8")
    outs = [y, np.array(scale, np.float32), np.array(zp, np.uint8)]
    return outs[: len(node.outputs)]


def _range_end(x: Tensor, reducer, empty: float, name: str) -> Tensor:
    """The minimum or maximum of every element of `x`, NaNs skipped (read as `empty`)."""
    axes = [te.reduce_axis(d, f"r{k}") for k, d in enumerate(x.shape)] or [te.reduce_axis(1, "r")]
    value = x(*[r.var for r in axes][: x.ndim])
    skip = te.select(te.equal(value, value), value, te.const(empty, "float32"))
    return te.compute((), lambda: reducer(skip, axis=axes), name=name)


def _dynamic_compute(node, tensors, consts, out_types):
    x = tensors[0]
    f32 = "float32"
    zero, one = te.const(0.0, f32), te.const(1.0, f32)
    low_red = _range_end(x, te.min, math.inf, "dynamic_quantize.min")
    high_red = _range_end(x, te.max, -math.inf, "dynamic_quantize.max")

    def scale_of():
        # std::min(min, 0.0f) and std::max(max, 0.0f), then GetQuantizationParameter's scale
        low = te.select(te.less(zero, low_red()), zero, low_red())
        high = te.select(te.less(high_red(), zero), zero, high_red())
        return low, te.select(te.equal(high, low), one, (high - low) / te.const(255.0, f32))

    def zero_point_of():
        low, scale = scale_of()
        initial = zero - low / scale
        clamped = te.select(te.less(initial, te.const(255.0, f32)), initial, te.const(255.0, f32))
        clamped = te.select(te.less(zero, clamped), clamped, zero)
        return te.cast(te.round(clamped), "int32")

    def quantized(*i):
        return _saturate(x(*i) / scale_of()[1], zero_point_of(), "uint8")

    outs = [
        te.compute(x.shape, quantized, name="dynamic_quantize"),
        te.compute((), lambda: scale_of()[1], name="dynamic_quantize.scale"),
        te.compute((), lambda: te.cast(zero_point_of(), "uint8"), name="dynamic_quantize.zp"),
    ]
    return outs[: len(node.outputs)]


register(
    Operator(
        "DynamicQuantizeLinear",
        Pattern.OPAQUE,
        _dynamic_infer,
        _dynamic_evaluate,
        _dynamic_compute,
        doc="float32 to uint8 with a scale and zero point from the tensor's range (widened to "
        "include 0), as onnxruntime: scale (max - min) / 255 (1 if max == min), zero point "
        "round(clamp(-min / scale, 0, 255)); outputs y, y_scale and y_zero_point (scalars). "
        "The range skips NaNs (onnxruntime's vector code may not) and a NaN quantizes to 0.",
    )
)


# -- integer convolution: QLinearConv and ConvInteger -------------------------------------------


def _integer_conv_shape(node: Node, x: TensorType, w: TensorType) -> ConvShape:
    _expect(node, x, BYTES, "x")
    _expect(node, w, BYTES, "w")
    if x.rank < 3:
        raise _fail(node, f"x must be (N, C, D1, ...), got shape {list(x.shape)}")
    if w.rank != x.rank:
        raise _fail(node, f"w must have x's rank {x.rank}, got shape {list(w.shape)}")
    # Conv's geometry checks (groups, kernel_shape, padding) on stand-ins of Conv's dtype
    return conv_shape(node, TensorType(x.shape, "float32"), TensorType(w.shape, "float32"), None)


def _per_channel(node: Node, t: TensorType | None, channels: int, what: str) -> None:
    """`t` is per-tensor or has one value per output channel (a 1-D tensor)."""
    if t is None or (t.rank <= 1 and t.size == 1):
        return
    if t.shape != (channels,):
        raise _fail(
            node,
            f"{what} must be a scalar or have one value per output channel ({channels}), got "
            f"shape {list(t.shape)}",
        )


def _np_integer_conv(node: Node, x, x_zp, w, w_zp) -> np.ndarray:
    """The exact sum of (x - x_zp) * (w - w_zp) (int64). Conv's numpy code runs on float64
    operands: the products and sums are integers far below 2**53, so float64 is exact."""
    xs = x.astype(np.int64) - _np_scalar(x_zp)
    if w_zp is not None and w_zp.size > 1:
        ws = w.astype(np.int64) - w_zp.astype(np.int64).reshape(-1, *(1,) * (w.ndim - 1))
    else:
        ws = w.astype(np.int64) - _np_scalar(w_zp)
    acc = conv_evaluate(node, [xs.astype(np.float64), ws.astype(np.float64)])[0]
    return acc.astype(np.int64)


def _integer_conv_compute(
    node: Node,
    x: Tensor,
    x_zp: _Param | None,
    w: Tensor,
    w_zp: _Param | None,
    out_shape: Sequence[int],
    name: str,
) -> Tensor:
    """sum((x - x_zp) * (w - w_zp)) in int32. Padding reads x_zp: shifted, it reads 0."""
    shape = _integer_conv_shape(node, *_tensor_types([x, w]))
    win = shape.win
    shifted = te.compute(
        x.shape, lambda *i: te.cast(x(*i), "int32") - _zero_point_expr(x_zp), name=f"{name}.x"
    )
    src, shift = padded_source(shifted, win, 0, name)
    per_group_in = x.shape[1] // shape.groups
    per_group_out = shape.out_channels // shape.groups
    rc = te.reduce_axis(per_group_in, "rc")
    rk = [te.reduce_axis(k, f"rk{i}") for i, k in enumerate(win.kernel)]

    def rule(n, m, *o):
        channel = m // per_group_out * per_group_in + rc
        ks = [k.var for k in rk]
        pos = window_index(win, o, ks, shift)
        weight = te.cast(w[(m, rc, *ks)], "int32") - _zero_point_expr(w_zp, (m,))
        return te.sum(src[(n, channel, *pos)] * weight, axis=[rc, *rk])

    return te.compute(out_shape, rule, name=name)


def _conv_out_shape(x: TensorType, shape: ConvShape) -> tuple[int, ...]:
    return (x.shape[0], shape.out_channels, *shape.win.out)


# -- QLinearConv ----------------------------------------------------------------------------------

QLINEAR_CONV_INPUTS = (
    "x",
    "x_scale",
    "x_zero_point",
    "w",
    "w_scale",
    "w_zero_point",
    "y_scale",
    "y_zero_point",
)


def _qconv_types(node: Node, types) -> tuple[ConvShape, str]:
    _require(node, types, QLINEAR_CONV_INPUTS)
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp = types[:8]
    shape = _integer_conv_shape(node, x, w)
    _same_dtype(node, x_zp, x, "x_zero_point", "x")
    _same_dtype(node, w_zp, w, "w_zero_point", "w")
    _expect(node, y_zp, BYTES, "y_zero_point")
    for t, what in ((x_scale, "x_scale"), (w_scale, "w_scale"), (y_scale, "y_scale")):
        _expect(node, t, ("float32",), what)
    for t, what in ((x_scale, "x_scale"), (x_zp, "x_zero_point"), (y_scale, "y_scale")):
        _one_element(node, t, what)
    _one_element(node, y_zp, "y_zero_point")
    _per_channel(node, w_scale, shape.out_channels, "w_scale")
    _per_channel(node, w_zp, shape.out_channels, "w_zero_point")
    bias = _input(types, 8)
    if bias is not None and (str(bias.dtype) != "int32" or bias.shape != (shape.out_channels,)):
        raise _fail(node, f"B must be int32[{shape.out_channels}], got {bias}")
    return shape, str(y_zp.dtype)


def _qconv_infer(node, types, consts):
    shape, out = _qconv_types(node, types)
    return [TensorType(_conv_out_shape(types[0], shape), out)]


def _channel_view(p: np.ndarray, rank: int, dt) -> np.ndarray:
    """A per-tensor or per-channel parameter broadcasting against (N, M, D1, ...)."""
    if p.size == 1:
        return p.reshape(()).astype(dt)
    return p.astype(dt).reshape(-1, *(1,) * (rank - 2))


def _qconv_evaluate(node, inputs):
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp = inputs[:8]
    bias = _input(inputs, 8)
    _, out = _qconv_types(node, _array_types(inputs))
    acc = _np_integer_conv(node, x, x_zp, w, w_zp)
    if bias is not None:
        acc = acc + bias.astype(np.int64).reshape(-1, *(1,) * (x.ndim - 2))
    f32 = np.float32
    multiplier = x_scale.reshape(()).astype(f32) * _channel_view(w_scale, x.ndim, f32)
    multiplier = multiplier / y_scale.reshape(()).astype(f32)
    v = _wrap_int32(acc).astype(f32) * multiplier
    return [_np_saturate(v, _np_scalar(y_zp), out)]


def _qconv_compute(node, tensors, consts, out_types):
    x, w = tensors[0], tensors[3]
    x_scale, x_zp, w_scale, w_zp, y_scale, y_zp = (
        _param(node, tensors, consts, k) for k in (1, 2, 4, 5, 6, 7)
    )
    bias = _input(tensors, 8)
    out = str(out_types[0].dtype)
    acc = _integer_conv_compute(node, x, x_zp, w, w_zp, out_types[0].shape, "qlinear_conv.sum")

    def rule(n, m, *o):
        total = acc[(n, m, *o)]
        if bias is not None:
            total = total + bias[m]
        multiplier = x_scale.scale() * w_scale.scale((m,)) / y_scale.scale()
        return _saturate(te.cast(total, "float32") * multiplier, y_zp.zero_point(), out)

    return [te.compute(out_types[0].shape, rule, name="qlinear_conv")]


register(
    Operator(
        "QLinearConv",
        Pattern.OUT_ELEMWISE_FUSABLE,
        _qconv_infer,
        _qconv_evaluate,
        _qconv_compute,
        attrs=CONV_ATTRS,
        check=check_window_attrs,
        doc="Quantized N-d convolution (int8/uint8 x and w, grouped, optional int32 bias), "
        "per-tensor or per-output-channel weight scale and zero point: the int32 sum of "
        "(x - x_zp) * (w - w_zp) (padding reads x_zp), plus B, requantized as onnxruntime "
        "(float32 sum times the float32 x_scale * w_scale / y_scale, round half to even, "
        "saturate): no tie case differs.",
    )
)


# -- ConvInteger ----------------------------------------------------------------------------------


def _conv_integer_types(node: Node, types) -> ConvShape:
    _require(node, types, ("x", "w"))
    x, w = types[0], types[1]
    x_zp, w_zp = _input(types, 2), _input(types, 3)
    shape = _integer_conv_shape(node, x, w)
    _same_dtype(node, x_zp, x, "x_zero_point", "x")
    _same_dtype(node, w_zp, w, "w_zero_point", "w")
    _one_element(node, x_zp, "x_zero_point")
    _per_channel(node, w_zp, shape.out_channels, "w_zero_point")
    return shape


def _conv_integer_infer(node, types, consts):
    shape = _conv_integer_types(node, types)
    return [TensorType(_conv_out_shape(types[0], shape), "int32")]


def _conv_integer_evaluate(node, inputs):
    _conv_integer_types(node, _array_types(inputs))
    x, w = inputs[0], inputs[1]
    return [_wrap_int32(_np_integer_conv(node, x, _input(inputs, 2), w, _input(inputs, 3)))]


def _conv_integer_compute(node, tensors, consts, out_types):
    x_zp, w_zp = _param(node, tensors, consts, 2), _param(node, tensors, consts, 3)
    y = _integer_conv_compute(
        node, tensors[0], x_zp, tensors[1], w_zp, out_types[0].shape, "conv_integer"
    )
    return [y]


register(
    Operator(
        "ConvInteger",
        Pattern.OUT_ELEMWISE_FUSABLE,
        _conv_integer_infer,
        _conv_integer_evaluate,
        _conv_integer_compute,
        attrs=CONV_ATTRS,
        check=check_window_attrs,
        doc="N-d convolution of int8/uint8 x and w to int32: sum((x - x_zp) * (w - w_zp)), "
        "w_zp per tensor or per output channel; padding reads x_zp; the sum wraps in int32.",
    )
)


# -- integer matrix products: QLinearMatMul and MatMulInteger -------------------------------------


@dataclasses.dataclass(frozen=True)
class _Operand:
    """One matmul operand and how its scale/zero point broadcast against it: `layout` is the
    shape they broadcast from (None: per tensor); `rows` says a per-row 1-D parameter of a
    matrix `a`, laid out as (M, 1)."""

    shape: tuple[int, ...]
    layout: tuple[int, ...] | None
    rows: bool = False

    def param_index(self, operand_index: Sequence) -> tuple:
        """The parameter's index for the operand element at `operand_index`."""
        index = broadcast_index(self.layout, self.shape, operand_index)
        return (index[0],) if self.rows else tuple(index)

    def np_view(self, p: np.ndarray, dt) -> np.ndarray:
        """The parameter broadcasting against the operand."""
        if self.layout is None:
            return p.reshape(()).astype(dt)
        return p.astype(dt).reshape(self.layout)


def _matmul_layout(node: Node, p: TensorType | None, operand: TensorType, side: str, what: str):
    """How a's (side 'a': per row) or b's (side 'b': per column) parameter `p` broadcasts."""
    if p is None or (p.size == 1 and p.rank <= operand.rank):
        return _Operand(operand.shape, None)
    shape, rank = p.shape, operand.rank
    if side == "a" and rank == 2 and shape == (operand.shape[0],):
        return _Operand(operand.shape, (shape[0], 1), rows=True)
    if side == "b" and rank >= 2 and shape == (operand.shape[-1],):
        return _Operand(operand.shape, shape)
    reduced = rank - 1 if side == "a" else rank - 2  # the K axis the parameter does not vary on
    fits = (
        rank >= 2
        and len(shape) == rank
        and shape[reduced] == 1
        and all(d in (1, o) for k, (d, o) in enumerate(zip(shape, operand.shape)) if k != reduced)
    )
    if not fits:
        kind = "per row: [M] or [..., M, 1]" if side == "a" else "per column: [N] or [..., 1, N]"
        raise _fail(
            node,
            f"{what} of shape {list(shape)} is neither a scalar nor {kind} for {side} of shape "
            f"{list(operand.shape)}",
        )
    return _Operand(operand.shape, shape)


@dataclasses.dataclass(frozen=True)
class _MatMulInputs:
    """Where a matmul node's operands and parameters are among its inputs."""

    a: int
    b: int
    a_zp: int
    b_zp: int
    a_scale: int | None = None
    b_scale: int | None = None


QLINEAR_MATMUL = _MatMulInputs(a=0, b=3, a_zp=2, b_zp=5, a_scale=1, b_scale=4)
MATMUL_INTEGER = _MatMulInputs(a=0, b=1, a_zp=2, b_zp=3)


def _matmul_operands(node: Node, types, where: _MatMulInputs) -> list[_Operand]:
    """The layouts of a's and b's parameters (zero point and scale share one)."""
    layouts = []
    for side, k, zp_k, scale_k in (
        ("a", where.a, where.a_zp, where.a_scale),
        ("b", where.b, where.b_zp, where.b_scale),
    ):
        operand, zp = types[k], _input(types, zp_k)
        scale = None if scale_k is None else types[scale_k]
        _same_dtype(node, zp, operand, f"{side}_zero_point", side)
        layout = _matmul_layout(node, zp, operand, side, f"{side}_zero_point")
        if scale is not None:
            _expect(node, scale, SCALES, f"{side}_scale")
            layout = _matmul_layout(node, scale, operand, side, f"{side}_scale")
            if zp is not None and zp.shape != scale.shape and not zp.size == scale.size == 1:
                raise _fail(
                    node,
                    f"{side}_zero_point and {side}_scale must have one shape, got "
                    f"{list(zp.shape)} and {list(scale.shape)}",
                )
        layouts.append(layout)
    return layouts


def _integer_matmul_shape(node: Node, a: TensorType, b: TensorType) -> tuple[int, ...]:
    _expect(node, a, BYTES, "a")
    _expect(node, b, BYTES, "b")
    return matmul_shape(node, TensorType(a.shape, "int32"), TensorType(b.shape, "int32"))


def _operand_indices(a: Sequence[int], b: Sequence[int], out: Sequence[int], idx: Sequence):
    """The elements of a and b (at k = 0) that output element `idx` of a matmul pairs."""
    batch = out[: len(out) - (len(a) > 1) - (len(b) > 1)]
    lead, rest = idx[: len(batch)], list(idx[len(batch) :])
    i = [rest.pop(0)] if len(a) > 1 else []
    j = [rest.pop(0)] if len(b) > 1 else []
    a_index = (*broadcast_index(a[:-2], batch, lead), *i, 0)
    b_index = (*broadcast_index(b[:-2], batch, lead), 0, *j)
    return a_index, b_index


def _np_shifted(x: np.ndarray, zp: np.ndarray | None, operand: _Operand) -> np.ndarray:
    if zp is None:
        return x.astype(np.int64)
    return x.astype(np.int64) - operand.np_view(zp, np.int64)


def _np_integer_matmul(node: Node, a, a_zp, b, b_zp, layouts) -> np.ndarray:
    a_shift = _np_shifted(a, a_zp, layouts[0])
    b_shift = _np_shifted(b, b_zp, layouts[1])
    return _wrap_int32(matmul_evaluate(node, [a_shift, b_shift])[0])


def _shifted(x: Tensor, zp: _Param | None, operand: _Operand, name: str) -> Tensor:
    def rule(*i):
        value = te.cast(x(*i), "int32")
        if zp is None:
            return value
        return value - zp.zero_point(() if operand.layout is None else operand.param_index(i))

    return te.compute(x.shape, rule, name=name)


def _integer_matmul_compute(
    node: Node, tensors, consts, where: _MatMulInputs, layouts, out_shape, name: str
) -> Tensor:
    """sum((a - a_zp) * (b - b_zp)) in int32, MatMul's compute on the shifted operands."""
    shifted = [
        _shifted(tensors[k], _param(node, tensors, consts, zp_k), layout, f"{name}.{side}")
        for side, k, zp_k, layout in (
            ("a", where.a, where.a_zp, layouts[0]),
            ("b", where.b, where.b_zp, layouts[1]),
        )
    ]
    return matmul_compute(node, shifted, consts, [TensorType(out_shape, "int32")])[0]


# -- QLinearMatMul --------------------------------------------------------------------------------

QLINEAR_MATMUL_INPUTS = (
    "a",
    "a_scale",
    "a_zero_point",
    "b",
    "b_scale",
    "b_zero_point",
    "y_scale",
    "y_zero_point",
)


def _qmatmul_types(node: Node, types):
    _require(node, types, QLINEAR_MATMUL_INPUTS)
    shape = _integer_matmul_shape(node, types[0], types[3])
    layouts = _matmul_operands(node, types, QLINEAR_MATMUL)
    y_scale, y_zp = types[6], types[7]
    _expect(node, y_scale, SCALES, "y_scale")
    _expect(node, y_zp, BYTES, "y_zero_point")
    _one_element(node, y_scale, "y_scale")
    _one_element(node, y_zp, "y_zero_point")
    return shape, layouts, str(y_zp.dtype)


def _qmatmul_infer(node, types, consts):
    shape, _, out = _qmatmul_types(node, types)
    return [TensorType(shape, out)]


def _np_multiplier(a: np.ndarray, b: np.ndarray, layouts, a_scale, b_scale, y_scale):
    """(a_scale * b_scale) / y_scale in float32 for every output element: the matmul is done on
    2-D views (a 1-D a as a row, a 1-D b as a column) and the added axes dropped after."""
    f32 = np.float32
    a2 = a.shape if a.ndim > 1 else (1, *a.shape)
    b2 = b.shape if b.ndim > 1 else (*b.shape, 1)
    rows = np.broadcast_to(layouts[0].np_view(a_scale, f32), (*a2[:-1], 1))
    cols = np.broadcast_to(layouts[1].np_view(b_scale, f32), (*b2[:-2], 1, b2[-1]))
    grid = rows * cols / y_scale.reshape(()).astype(f32)
    if a.ndim == 1:
        grid = grid[..., 0, :]
    if b.ndim == 1:
        grid = grid[..., 0]
    return grid


def _qmatmul_evaluate(node, inputs):
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = inputs[:8]
    _, layouts, out = _qmatmul_types(node, _array_types(inputs))
    acc = _np_integer_matmul(node, a, a_zp, b, b_zp, layouts)
    multiplier = _np_multiplier(a, b, layouts, a_scale, b_scale, y_scale)
    return [_np_saturate(acc.astype(np.float32) * multiplier, _np_scalar(y_zp), out)]


def _qmatmul_compute(node, tensors, consts, out_types):
    a, b = tensors[0], tensors[3]
    _, layouts, out = _qmatmul_types(node, _tensor_types(tensors, consts))
    shape = out_types[0].shape
    acc = _integer_matmul_compute(
        node, tensors, consts, QLINEAR_MATMUL, layouts, shape, "qlinear_matmul"
    )
    a_scale, b_scale, y_scale, y_zp = (_param(node, tensors, consts, k) for k in (1, 4, 6, 7))

    def rule(*idx):
        a_index, b_index = _operand_indices(a.shape, b.shape, shape, idx)
        at_a = () if layouts[0].layout is None else layouts[0].param_index(a_index)
        at_b = () if layouts[1].layout is None else layouts[1].param_index(b_index)
        multiplier = a_scale.scale(at_a) * b_scale.scale(at_b) / y_scale.scale()
        return _saturate(te.cast(acc(*idx), "float32") * multiplier, y_zp.zero_point(), out)

    return [te.compute(shape, rule, name="qlinear_matmul.requantize")]


register(
    Operator(
        "QLinearMatMul",
        Pattern.OUT_ELEMWISE_FUSABLE,
        _qmatmul_infer,
        _qmatmul_evaluate,
        _qmatmul_compute,
        doc="Quantized numpy matmul (int8/uint8, batch dimensions broadcast): the int32 sum of "
        "(a - a_zp) * (b - b_zp), requantized as onnxruntime (float32 sum times the float32 "
        "a_scale * b_scale / y_scale, round half to even, saturate). a's parameters per tensor "
        "or per row, b's per tensor or per column; float16 scales widen to float32.",
    )
)


# -- MatMulInteger --------------------------------------------------------------------------------


def _matmul_integer_types(node: Node, types):
    _require(node, types, ("A", "B"))
    shape = _integer_matmul_shape(node, types[0], types[1])
    return shape, _matmul_operands(node, types, MATMUL_INTEGER)


def _matmul_integer_infer(node, types, consts):
    shape, _ = _matmul_integer_types(node, types)
    return [TensorType(shape, "int32")]


def _matmul_integer_evaluate(node, inputs):
    a, b = inputs[0], inputs[1]
    _, layouts = _matmul_integer_types(node, _array_types(inputs))
    return [_np_integer_matmul(node, a, _input(inputs, 2), b, _input(inputs, 3), layouts)]


def _matmul_integer_compute(node, tensors, consts, out_types):
    _, layouts = _matmul_integer_types(node, _tensor_types(tensors, consts))
    y = _integer_matmul_compute(
        node, tensors, consts, MATMUL_INTEGER, layouts, out_types[0].shape, "matmul_integer"
    )
    return [y]


register(
    Operator(
        "MatMulInteger",
        Pattern.OUT_ELEMWISE_FUSABLE,
        _matmul_integer_infer,
        _matmul_integer_evaluate,
        _matmul_integer_compute,
        doc="numpy matmul of int8/uint8 to int32: sum((A - a_zp) * (B - b_zp)), a_zp per tensor "
        "or per row, b_zp per tensor or per column; the sum wraps in int32.",
    )
)
