"""Neural-network graph operators (ONNX opset 21): convolutions, pooling, normalizations, matrix
products and softmax.

Where ONNX's specification and onnxruntime disagree, loom does what onnxruntime does (its
outputs are the reference loom is tested against), and refuses what onnxruntime refuses:
- `auto_pad=SAME_*` splits the padding as onnxruntime does, rounding towards zero, so a kernel
  smaller than its stride can make a negative padding (the windows start inside the input);
- pooling with `ceil_mode=1` drops a last window that would start past the input and its
  leading padding (as PyTorch and onnxruntime do; ONNX's shape inference keeps it);
- ConvTranspose with `auto_pad=SAME_*` and no `output_shape` makes min(input * stride, the
  unpadded size) outputs;
- Conv and pooling with `auto_pad=SAME_*` and a dilation above 1 are refused: onnxruntime
  refuses it for Conv and computes the pooling padding without the dilation (ConvTranspose's
  SAME padding, which uses the dilated kernel, is supported).

numpy implementations gather every window at once (`_windows`), so constant folding stays
vectorized; float32 accumulates in float64.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

import numpy as np

from loom import te
from loom.graph.ir import Node, TensorType
from loom.graph.ops.base import (
    Operator,
    Pattern,
    broadcast_index,
    broadcast_shape,
    normalize_axis,
    register,
)
from loom.ir import op as irop
from loom.ops.nn import pad as pad_tensor
from loom.te.tensor import Tensor

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
FLOATS = ("float32", "float64")
MATMUL_TYPES = ("float32", "float64", "int32", "int64", "uint32", "uint64")
MAXPOOL_TYPES = ("float32", "float64", "int8", "uint8")


# -- small helpers ------------------------------------------------------------------------------


def _fail(node: Node, message: str) -> ValueError:
    return ValueError(f"{node.label}: {message}")


def _expect_dtype(node: Node, t: TensorType, allowed: Sequence[str], what: str) -> None:
    if str(t.dtype) not in allowed:
        raise _fail(node, f"{what} must be one of {', '.join(allowed)}, got {t.dtype}")


def _expect_inputs(node: Node, types: Sequence[TensorType | None], required: int) -> None:
    missing = [k for k in range(required) if k >= len(types) or types[k] is None]
    if missing:
        raise _fail(node, f"input {missing[0]} is required")


def _input(types: Sequence, k: int):
    return types[k] if k < len(types) else None


def _tensor_types(tensors: Sequence[Tensor | None]) -> list[TensorType | None]:
    return [None if t is None else TensorType(t.shape, str(t.dtype)) for t in tensors]


def _wide(x: np.ndarray) -> np.ndarray:
    """`x` in the precision numpy should accumulate it in."""
    return x.astype(np.float64) if x.dtype == np.float32 else x


def _trunc_div(a: int, b: int) -> int:
    """a / b rounded towards zero (C's integer division, which onnxruntime's padding uses)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _ints_attr(node: Node, name: str, count: int, default: int) -> tuple[int, ...]:
    value = node.attr(name)
    if value is None:
        return (default,) * count
    value = tuple(int(v) for v in value)
    if len(value) != count:
        raise _fail(node, f"{name} has {len(value)} values, expected {count}")
    return value


def _auto_pad(node: Node) -> str:
    return str(node.attr("auto_pad", "NOTSET"))


def check_window_attrs(node: Node, dilated_same: bool = False) -> str | None:
    """The reasons a Conv/ConvTranspose/pool node's window attributes are not supported."""
    auto_pad = _auto_pad(node)
    if auto_pad not in AUTO_PADS:
        return f"auto_pad={auto_pad} is not one of {', '.join(AUTO_PADS)}"
    for name, low in (("strides", 1), ("dilations", 1), ("kernel_shape", 1), ("pads", 0)):
        values = node.attr(name)
        if values is not None and any(int(v) < low for v in values):
            return f"{name}={list(values)}: values below {low} are not supported"
    dilated = any(int(d) != 1 for d in node.attr("dilations", ()) or ())
    if auto_pad.startswith("SAME") and dilated and not dilated_same:
        return f"auto_pad={auto_pad} with dilations > 1 is not supported"
    return None


# -- window geometry shared by convolution and pooling ------------------------------------------


@dataclasses.dataclass(frozen=True)
class Window:
    """Where the windows of a convolution or pooling lie along each spatial axis: window `o`
    of axis i reads input positions `o * strides[i] - begin[i] + k * dilations[i]` for k in
    [0, kernel[i]); positions outside [0, size) are padding."""

    size: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]
    end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.size)

    def positions(self, i: int) -> np.ndarray:
        """The input positions windows of axis i read, shape (out[i], kernel[i])."""
        o = np.arange(self.out[i])[:, None] * self.strides[i] - self.begin[i]
        return o + np.arange(self.kernel[i])[None, :] * self.dilations[i]

    def counted(self, i: int, include_pad: bool) -> tuple[int, int]:
        """The positions of axis i an average counts: the input, or with its padding."""
        if include_pad:
            return -self.begin[i], self.size[i] + self.end[i]
        return 0, self.size[i]

    def reads_after(self, i: int) -> int:
        """How far past the end of axis i the last window reads."""
        last = (self.out[i] - 1) * self.strides[i] - self.begin[i]
        return max(0, last + (self.kernel[i] - 1) * self.dilations[i] + 1 - self.size[i])


def _same_padding(size: int, kernel: int, stride: int, lower: bool) -> tuple[int, int]:
    """onnxruntime's SAME padding: enough for ceil(size / stride) windows, split evenly, the odd
    element after (SAME_UPPER) or before (SAME_LOWER)."""
    target = -(-size // stride)
    needed = (target - 1) * stride + kernel - size
    head = _trunc_div(needed + 1, 2) if lower else _trunc_div(needed, 2)
    return head, needed - head


def window(
    node: Node, size: Sequence[int], kernel: Sequence[int], ceil_mode: bool = False
) -> Window:
    """The window geometry of a Conv or pooling node over spatial `size`."""
    n = len(size)
    strides = _ints_attr(node, "strides", n, 1)
    dilations = _ints_attr(node, "dilations", n, 1)
    auto_pad = _auto_pad(node)
    if auto_pad == "NOTSET":
        pads = _ints_attr(node, "pads", 2 * n, 0)
        begin, end = pads[:n], pads[n:]
    elif auto_pad == "VALID":
        begin = end = (0,) * n
    else:
        split = [
            _same_padding(size[i], kernel[i], strides[i], auto_pad == "SAME_LOWER")
            for i in range(n)
        ]
        begin, end = tuple(b for b, _ in split), tuple(e for _, e in split)
    out = []
    for i in range(n):
        span = size[i] + begin[i] + end[i] - ((kernel[i] - 1) * dilations[i] + 1)
        if span < 0:
            raise _fail(
                node,
                f"window {(kernel[i] - 1) * dilations[i] + 1} is larger than the padded input "
                f"({size[i] + begin[i] + end[i]}) along spatial axis {i}",
            )
        count = -(-span // strides[i]) + 1 if ceil_mode else span // strides[i] + 1
        if ceil_mode and (count - 1) * strides[i] >= size[i] + begin[i]:
            count -= 1
        out.append(count)
    return Window(tuple(size), tuple(kernel), strides, dilations, begin, end, tuple(out))


def _windows(x: np.ndarray, win: Window, fill) -> np.ndarray:
    """Every window of `x` (N, C, *size): shape (N, C, *out, *kernel), padding read as `fill`."""
    a = x
    for i in range(win.rank):
        axis = 2 + 2 * i
        pos = win.positions(i)
        inside = (pos >= 0) & (pos < win.size[i])
        filler = np.full((*a.shape[:axis], 1, *a.shape[axis + 1 :]), fill, a.dtype)
        a = np.take(np.concatenate([a, filler], axis=axis), np.where(inside, pos, -1), axis=axis)
    n = win.rank
    return a.transpose(0, 1, *(2 + 2 * i for i in range(n)), *(3 + 2 * i for i in range(n)))


def _counts(win: Window, include_pad: bool) -> np.ndarray:
    """How many positions of each window an average divides by, shape `win.out`."""
    total = np.ones((), np.int64)
    for i in range(win.rank):
        pos = win.positions(i)
        low, high = win.counted(i, include_pad)
        per_axis = ((pos >= low) & (pos < high)).sum(axis=1)
        total = np.multiply.outer(total, per_axis)
    return total


def padded_source(x: Tensor, win: Window, fill, name: str) -> tuple[Tensor, tuple[int, ...]]:
    """`x` padded so every window reads inside it, and the shift from window coordinates
    (position = o * stride - begin + k * dilation) to the padded tensor's."""
    before = tuple(max(0, b) for b in win.begin)
    after = tuple(win.reads_after(i) for i in range(win.rank))
    shift = tuple(b - pb for b, pb in zip(before, win.begin))
    if not any(before) and not any(after):
        return x, shift
    padded = pad_tensor(x, (0, 0, *before), (0, 0, *after), value=fill, name=f"{name}.pad")
    return padded, shift


def window_index(win: Window, out_idx: Sequence, ks: Sequence, shift: Sequence[int]) -> list:
    return [
        o * win.strides[i] + k * win.dilations[i] + shift[i]
        for i, (o, k) in enumerate(zip(out_idx, ks))
    ]


def _spatial_input(node: Node, t: TensorType, allowed: Sequence[str], what: str = "X") -> None:
    _expect_dtype(node, t, allowed, what)
    if t.rank < 3:
        raise _fail(node, f"{what} must be (N, C, D1, ...), got shape {list(t.shape)}")


def _kernel_attr(node: Node, n: int) -> tuple[int, ...]:
    kernel = node.attr("kernel_shape")
    if kernel is None:
        raise _fail(node, "kernel_shape is required")
    return _ints_attr(node, "kernel_shape", n, 1)


# -- Conv -----------------------------------------------------------------------------------------


WEIGHT_BLOCK = "loom.weight_block"
"""A Conv's attribute: its W holds its filters in blocks of this many output channels,
[O / block, I / group, *kernel, block], so that a tile of `block` output channels reads its
weights as one contiguous stream (loom/backend/cpu/pack_conv_weights.py): filter m's weight
at (c, *k) is W[m // block, c, *k, m % block]. Only graph passes set it: it is not among the
attributes an ONNX model's Conv may have."""


@dataclasses.dataclass(frozen=True)
class ConvShape:
    win: Window
    groups: int
    out_channels: int


def block_weights(w: np.ndarray, block: int) -> np.ndarray:
    """Filters W[O, I, *kernel] in blocks of `block` output channels (WEIGHT_BLOCK's layout);
    `block` must divide O."""
    if block < 1 or w.ndim < 3 or w.shape[0] % block:
        raise ValueError(f"block={block} must divide the {w.shape[0]} filters of W{list(w.shape)}")
    blocks = w.reshape(w.shape[0] // block, block, *w.shape[1:])
    return np.ascontiguousarray(np.moveaxis(blocks, 1, -1))


def unblock_weights(w: np.ndarray, block: int) -> np.ndarray:
    """The filters W[O, I, *kernel] of weights in WEIGHT_BLOCK's layout (block_weights'
    inverse)."""
    return np.moveaxis(w, -1, 1).reshape(w.shape[0] * block, *w.shape[1:-1])


def _weight_block(node: Node) -> int | None:
    block = node.attr(WEIGHT_BLOCK)
    if block is not None and (isinstance(block, bool) or not isinstance(block, int) or block < 1):
        raise _fail(node, f"{WEIGHT_BLOCK}={block!r} must be a positive integer")
    return block


def _filters_type(node: Node, w: TensorType, rank: int) -> TensorType:
    """W's type as filters [O, I / group, *kernel] of a convolution of `rank` dimensions (the
    data's), whether or not it is in blocks."""
    block = _weight_block(node)
    if block is None:
        return w
    if w.rank != rank + 1 or w.shape[-1] != block:
        raise _fail(
            node, f"{WEIGHT_BLOCK}={block} needs W as [blocks, channels, *kernel, {block}], got {w}"
        )
    return TensorType((w.shape[0] * block, *w.shape[1:-1]), w.dtype)


def conv_shape(node: Node, x: TensorType, w: TensorType, b: TensorType | None) -> ConvShape:
    _spatial_input(node, x, FLOATS)
    w = _filters_type(node, w, x.rank)
    if w.dtype != x.dtype or w.rank != x.rank:
        raise _fail(node, f"W must be {x.dtype} of rank {x.rank}, got {w}")
    groups = int(node.attr("group", 1))
    channels = x.shape[1]
    if groups < 1 or channels % groups or w.shape[0] % groups:
        raise _fail(
            node,
            f"group={groups} must divide the {channels} input channels and W's "
            f"{w.shape[0]} filters",
        )
    if w.shape[1] * groups != channels:
        raise _fail(node, f"W has {w.shape[1]} channels per group, X needs {channels // groups}")
    kernel = tuple(w.shape[2:])
    if node.attr("kernel_shape") is not None and _kernel_attr(node, len(kernel)) != kernel:
        raise _fail(
            node, f"kernel_shape {list(node.attr('kernel_shape'))} differs from W's {list(kernel)}"
        )
    if b is not None and (b.dtype != x.dtype or b.shape != (w.shape[0],)):
        raise _fail(node, f"B must be {x.dtype}[{w.shape[0]}], got {b}")
    return ConvShape(window(node, x.shape[2:], kernel), groups, w.shape[0])


def _conv_infer(node, types, consts):
    _expect_inputs(node, types, 2)
    x = types[0]
    shape = conv_shape(node, x, types[1], _input(types, 2))
    return [TensorType((x.shape[0], shape.out_channels, *shape.win.out), x.dtype)]


def _letters(n: int, first: str) -> str:
    return "".join(chr(ord(first) + i) for i in range(n))


def conv_evaluate(node, inputs):
    x, w = inputs[0], inputs[1]
    b = _input(inputs, 2)
    shape = conv_shape(
        node, TensorType.of(x), TensorType.of(w), None if b is None else TensorType.of(b)
    )
    if _weight_block(node) is not None:
        w = unblock_weights(w, _weight_block(node))
    g, n = shape.groups, shape.win.rank
    cols = _windows(_wide(x), shape.win, 0)
    cols = cols.reshape(x.shape[0], g, x.shape[1] // g, *cols.shape[2:])
    wg = _wide(w).reshape(g, w.shape[0] // g, *w.shape[1:])
    outs, ks = _letters(n, "o"), _letters(n, "t")
    y = np.einsum(f"Ngc{outs}{ks},gmc{ks}->Ngm{outs}", cols, wg, optimize=True)
    y = y.reshape(x.shape[0], w.shape[0], *shape.win.out)
    if b is not None:
        y = y + _wide(b).reshape(-1, *(1,) * n)
    return [y.astype(x.dtype)]


def _add_channel_bias(y: Tensor, b: Tensor | None, name: str) -> Tensor:
    if b is None:
        return y
    return te.compute(y.shape, lambda *i: y(*i) + b[i[1]], name=name)


def _conv_compute(node, tensors, consts, out_types):
    x, w = tensors[0], tensors[1]
    b = _input(tensors, 2)
    shape = conv_shape(node, *_tensor_types([x, w, b]))
    win = shape.win
    src, shift = padded_source(x, win, 0.0, "conv")
    per_group_in = x.shape[1] // shape.groups
    per_group_out = shape.out_channels // shape.groups
    rc = te.reduce_axis(per_group_in, "rc")
    rk = [te.reduce_axis(k, f"rk{i}") for i, k in enumerate(win.kernel)]
    block = _weight_block(node)

    def weight(m, ks):
        if block is None:
            return w[(m, rc, *ks)]
        return w[(m // block, rc, *ks, m % block)]

    def rule(n, m, *o):
        channel = m // per_group_out * per_group_in + rc
        ks = [k.var for k in rk]
        pos = window_index(win, o, ks, shift)
        return te.sum(src[(n, channel, *pos)] * weight(m, ks), axis=[rc, *rk])

    y = te.compute(out_types[0].shape, rule, name="conv" if b is None else "conv.sum")
    return [_add_channel_bias(y, b, "conv")]


register(
    Operator(
        "Conv",
        Pattern.OUT_ELEMWISE_FUSABLE,
        _conv_infer,
        conv_evaluate,
        _conv_compute,
        attrs={"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"},
        check=check_window_attrs,
        doc="N-d convolution (1-D, 2-D, 3-D ...), grouped and depthwise, with optional bias.",
    )
)


# -- ConvTranspose --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _DeconvShape:
    size: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]
    out: tuple[int, ...]
    groups: int
    out_channels: int


def _deconv_axis(node: Node, natural: int, size: int, stride: int, i: int, n: int):
    """(padding before, output size) of spatial axis i of n of a ConvTranspose whose unpadded
    output has `natural` elements (onnxruntime's rules, see the module docstring)."""
    auto_pad = _auto_pad(node)
    if node.attr("output_shape") is not None:
        target = _ints_attr(node, "output_shape", n, 0)[i]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = size * stride
    else:
        pads = _ints_attr(node, "pads", 2 * n, 0) if auto_pad == "NOTSET" else (0,) * (2 * n)
        return pads[i], natural - pads[i] - pads[n + i]
    # ConvTranspose's SAME never grows the output, output_shape does (with zeros at the end)
    total = max(0, natural - target)
    head = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
    return head, target if node.attr("output_shape") is not None else natural - total


def _deconv_shape(node: Node, x: TensorType, w: TensorType, b: TensorType | None) -> _DeconvShape:
    _spatial_input(node, x, FLOATS)
    if w.dtype != x.dtype or w.rank != x.rank:
        raise _fail(node, f"W must be {x.dtype} of rank {x.rank}, got {w}")
    n = x.rank - 2
    groups = int(node.attr("group", 1))
    channels = x.shape[1]
    if groups < 1 or channels % groups or w.shape[0] != channels:
        raise _fail(
            node,
            f"W must have the {channels} input channels first and group={groups} must divide "
            f"them, got W {list(w.shape)}",
        )
    out_channels = w.shape[1] * groups
    kernel = tuple(w.shape[2:])
    if node.attr("kernel_shape") is not None and _kernel_attr(node, n) != kernel:
        raise _fail(
            node, f"kernel_shape {list(node.attr('kernel_shape'))} differs from W's {list(kernel)}"
        )
    if b is not None and (b.dtype != x.dtype or b.shape != (out_channels,)):
        raise _fail(node, f"B must be {x.dtype}[{out_channels}], got {b}")
    size = tuple(x.shape[2:])
    strides = _ints_attr(node, "strides", n, 1)
    dilations = _ints_attr(node, "dilations", n, 1)
    extra = _ints_attr(node, "output_padding", n, 0)
    begin, out = [], []
    for i in range(n):
        natural = strides[i] * (size[i] - 1) + extra[i] + (kernel[i] - 1) * dilations[i] + 1
        head, count = _deconv_axis(node, natural, size[i], strides[i], i, n)
        if count <= 0:
            raise _fail(node, f"the output would be empty along spatial axis {i}")
        begin.append(head)
        out.append(count)
    return _DeconvShape(
        size, kernel, strides, dilations, tuple(begin), tuple(out), groups, out_channels
    )


def _deconv_types(node, types):
    _expect_inputs(node, types, 2)
    b = _input(types, 2)
    return _deconv_shape(node, types[0], types[1], b)


def _deconv_infer(node, types, consts):
    x = types[0]
    shape = _deconv_types(node, types)
    return [TensorType((x.shape[0], shape.out_channels, *shape.out), x.dtype)]


def _deconv_evaluate(node, inputs):
    x, w = inputs[0], inputs[1]
    b = _input(inputs, 2)
    shape = _deconv_types(node, [None if v is None else TensorType.of(v) for v in inputs])
    g, n = shape.groups, len(shape.size)
    xg = _wide(x).reshape(x.shape[0], g, x.shape[1] // g, *shape.size)
    wg = _wide(w).reshape(g, x.shape[1] // g, w.shape[1], *shape.kernel)
    # output position `begin + o` receives input i through kernel offset k when
    # i * stride + k * dilation == begin + o: add each kernel offset's products at once
    full = [
        max(head + o, s * (size - 1) + (k - 1) * d + 1)
        for head, o, s, size, k, d in zip(
            shape.begin, shape.out, shape.strides, shape.size, shape.kernel, shape.dilations
        )
    ]
    acc = np.zeros((x.shape[0], g, w.shape[1], *full), xg.dtype)
    sizes = _letters(n, "o")
    for ks in itertools.product(*(range(k) for k in shape.kernel)):
        part = np.einsum(f"Ngc{sizes},gcm->Ngm{sizes}", xg, wg[(..., *ks)], optimize=True)
        where = tuple(
            slice(k * d, k * d + s * (size - 1) + 1, s)
            for k, d, s, size in zip(ks, shape.dilations, shape.strides, shape.size)
        )
        acc[(..., *where)] += part
    crop = tuple(slice(head, head + o) for head, o in zip(shape.begin, shape.out))
    y = acc[(..., *crop)].reshape(x.shape[0], shape.out_channels, *shape.out)
    if b is not None:
        y = y + _wide(b).reshape(-1, *(1,) * n)
    return [y.astype(x.dtype)]


@dataclasses.dataclass(frozen=True)
class _DeconvPhase:
    """The outputs `o = phase + stride * q` (q in [0, count)) of one spatial axis of a
    ConvTranspose, and the kernel taps that reach them. Output `o` receives input `j` through
    tap `k` when `o + begin == j * stride + k * dilation`: for one phase, only the taps
    `first_tap + t * tap_step` do, and they read inputs `q + lowest + (taps - 1 - t) * step`,
    a plain (stride 1, dilated) window. `taps == 0`: no input reaches the phase."""

    count: int
    taps: int
    first_tap: int
    tap_step: int
    step: int
    lowest: int

    def with_first(self, tap: int) -> _DeconvPhase:
        return dataclasses.replace(self, first_tap=tap)

    @property
    def highest(self) -> int:
        """The last input position the phase reads."""
        return self.count - 1 + self.lowest + (self.taps - 1) * self.step


def _deconv_phases(shape: _DeconvShape, i: int) -> list[_DeconvPhase]:
    """The `strides[i]` phases of spatial axis i."""
    s, d, begin = shape.strides[i], shape.dilations[i], shape.begin[i]
    kernel, out = shape.kernel[i], shape.out[i]
    # k * d == phase + begin (mod s) has solutions iff gcd(d, s) divides phase + begin; they
    # repeat every s / gcd(d, s) taps, whose inputs lie d / gcd(d, s) apart
    g = math.gcd(d, s)
    phases = []
    for phase in range(s):
        count = max(0, -(-(out - phase) // s))
        first = next(
            (k for k in range(min(s // g, kernel)) if (k * d - phase - begin) % s == 0), None
        )
        if count == 0 or first is None:
            phases.append(_DeconvPhase(count, 0, 0, 1, 1, 0))
            continue
        taps = -(-(kernel - first) // (s // g))
        # the input of tap `first` at q == 0, minus the span of the later taps
        lowest = (phase + begin - first * d) // s - (taps - 1) * (d // g)
        phases.append(_DeconvPhase(count, taps, first, s // g, d // g, lowest))
    return phases


def _uniform_phases(axes: list[list[_DeconvPhase]]) -> bool:
    """True if along every axis all phases have the same outputs, taps and window, phase r
    starting at tap r (kernel == stride, the common upsampling, or a multiple of it; the
    first taps are never another order when the rest is the same)."""
    return all(all(p.taps and p == ph[0].with_first(r) for r, p in enumerate(ph)) for ph in axes)


def _deconv_merged(x: Tensor, w: Tensor, shape: _DeconvShape, axes, src: Tensor, before):
    """All phases of uniform `axes` as one convolution whose output channels are the pairs
    (channel, phase), and the rule that picks an output element from it. The phases share
    one input window (kernel == stride: a 1x1 convolution, the matrix product W^T X), so a
    schedule's tile of channels shares its input loads across phases too."""
    radix, phases = [], 1
    for s in reversed(shape.strides):  # phase = sum(r_i * radix_i), the last axis fastest
        radix.insert(0, phases)
        phases *= s
    first = [ph[0] for ph in axes]
    rc = te.reduce_axis(x.shape[1] // shape.groups, "rc")
    rt = [te.reduce_axis(p.taps, f"rt{i}") if p.taps > 1 else None for i, p in enumerate(first)]

    def rule(nn, mp, *q):
        m, phase = mp // phases, mp % phases
        rs = [phase // radix[i] % s if s > 1 else 0 for i, s in enumerate(shape.strides)]
        channel, filt = _deconv_channels(shape, w, m, rc)
        ts = [0 if t is None else t.var for t in rt]
        pos = [qi + p.lowest + bi + t * p.step for qi, p, bi, t in zip(q, first, before, ts)]
        ks = [r + (p.taps - 1 - t) * p.tap_step for p, r, t in zip(first, rs, ts)]
        product = src[(nn, channel, *pos)] * w[(channel, filt, *ks)]
        return te.sum(product, axis=[rc, *(t for t in rt if t is not None)])

    out = (x.shape[0], shape.out_channels * phases, *(p.count for p in first))
    merged = te.compute(out, rule, name="conv_transpose.phases")

    def pick(nn, m, *o):
        phase = sum((oi % s) * radix[i] for i, (oi, s) in enumerate(zip(o, shape.strides)) if s > 1)
        q = [oi // s if s > 1 else oi for oi, s in zip(o, shape.strides)]
        return merged[(nn, m * phases + phase, *q)]

    return pick


def _deconv_channels(shape: _DeconvShape, w: Tensor, m, rc):
    """(input channel, W's filter) that output channel `m` reads at reduction step `rc`."""
    if shape.groups == 1:
        return rc, m
    per_group_in, per_group_out = w.shape[0] // shape.groups, w.shape[1]
    return m // per_group_out * per_group_in + rc, m % per_group_out


def _deconv_phase(x, w, shape: _DeconvShape, ph: list[_DeconvPhase], src, before, name) -> Tensor:
    """The outputs of one phase per axis (`ph`): a convolution over their taps only."""
    rc = te.reduce_axis(x.shape[1] // shape.groups, "rc")
    rt = [te.reduce_axis(p.taps, f"rt{i}") if p.taps > 1 else None for i, p in enumerate(ph)]

    def rule(nn, m, *q):
        channel, filt = _deconv_channels(shape, w, m, rc)
        ts = [0 if t is None else t.var for t in rt]
        pos = [qi + p.lowest + bi + t * p.step for qi, p, bi, t in zip(q, ph, before, ts)]
        ks = [p.first_tap + (p.taps - 1 - t) * p.tap_step for p, t in zip(ph, ts)]
        product = src[(nn, channel, *pos)] * w[(channel, filt, *ks)]
        return te.sum(product, axis=[rc, *(t for t in rt if t is not None)])

    out = (x.shape[0], shape.out_channels, *(p.count for p in ph))
    return te.compute(out, rule, name=name)


def _deconv_assembled(x, w, shape: _DeconvShape, axes, src, before):
    """The rule of an output element read from its phase's own convolution (phases that no
    tap reaches are zeros)."""
    n = len(axes)
    computed = {
        chosen: _deconv_phase(
            x,
            w,
            shape,
            [axes[i][r] for i, r in enumerate(chosen)],
            src,
            before,
            "conv_transpose.phase" + "".join(str(r) for r in chosen),
        )
        for chosen in itertools.product(*(range(s) for s in shape.strides))
        if all(axes[i][r].taps for i, r in enumerate(chosen))
    }
    zero = te.const(0.0, str(x.dtype))

    def pick(nn, m, *o):
        def phase_value(i: int, chosen: tuple[int, ...]):
            if i == n:
                phase = computed.get(chosen)
                if phase is None:
                    return zero
                q = []
                for k, (oi, r) in enumerate(zip(o, chosen)):
                    s, count = shape.strides[k], axes[k][r].count
                    qi = oi // s if s > 1 else oi
                    # the other phases' branches may be evaluated too: keep their reads inside
                    last = (shape.out[k] - 1) // s
                    q.append(qi if count - 1 >= last else irop.min_(qi, count - 1))
                return phase[(nn, m, *q)]
            s = shape.strides[i]
            if s == 1:
                return phase_value(i + 1, (*chosen, 0))
            value = phase_value(i + 1, (*chosen, s - 1))
            for r in reversed(range(s - 1)):
                value = te.if_then_else(
                    te.equal(o[i] % s, r), phase_value(i + 1, (*chosen, r)), value
                )
            return value

        return phase_value(0, ())

    return pick


def _deconv_compute(node, tensors, consts, out_types):
    """ConvTranspose computed phase by phase: the outputs of one phase (one `o mod stride` per
    axis) are a plain convolution over the taps that reach them (see _DeconvPhase), with no
    guard and no wasted tap. Stride 1: the one phase is the output. Phases that differ only
    by their taps (kernel == stride, the common upsampling): one convolution with a channel
    per (channel, phase) (_deconv_merged). Else one convolution per phase, and each output
    element picks its phase's (_deconv_assembled)."""
    x, w = tensors[0], tensors[1]
    b = _input(tensors, 2)
    shape = _deconv_types(node, _tensor_types(tensors))
    n = len(shape.size)
    axes = [_deconv_phases(shape, i) for i in range(n)]
    before = tuple(max(0, *(-p.lowest for p in ph if p.taps)) for ph in axes)
    after = tuple(
        max(0, *(p.highest - (size - 1) for p in ph if p.taps))
        for ph, size in zip(axes, shape.size)
    )
    src = x
    if any(before) or any(after):
        src = pad_tensor(x, (0, 0, *before), (0, 0, *after), name="conv_transpose.pad")
    if all(s == 1 for s in shape.strides):
        name = "conv_transpose" if b is None else "conv_transpose.sum"
        y = _deconv_phase(x, w, shape, [ph[0] for ph in axes], src, before, name)
        return [_add_channel_bias(y, b, "conv_transpose")]
    if _uniform_phases(axes):
        pick = _deconv_merged(x, w, shape, axes, src, before)
    else:
        pick = _deconv_assembled(x, w, shape, axes, src, before)

    def rule(nn, m, *o):
        value = pick(nn, m, *o)
        return value + b[m] if b is not None else value

    return [te.compute(out_types[0].shape, rule, name="conv_transpose")]


def _deconv_check(node: Node) -> str | None:
    # unlike Conv and pooling, onnxruntime's ConvTranspose pads SAME with the dilated kernel
    reason = check_window_attrs(node, dilated_same=True)
    if reason:
        return reason
    extra = node.attr("output_padding")
    if extra is not None and any(int(v) < 0 for v in extra):
        return f"output_padding={list(extra)}: negative values are not supported"
    return None


register(
    Operator(
        "ConvTranspose",
        Pattern.OUT_ELEMWISE_FUSABLE,
        _deconv_infer,
        _deconv_evaluate,
        _deconv_compute,
        attrs={
            "auto_pad",
            "dilations",
            "group",
            "kernel_shape",
            "output_padding",
            "output_shape",
            "pads",
            "strides",
        },
        check=_deconv_check,
        doc="N-d transposed convolution, grouped, with output_padding, output_shape and "
        "optional bias (padding rules of onnxruntime, see loom/graph/ops/nn.py).",
    )
)


# -- MaxPool and AveragePool ----------------------------------------------------------------------


def _pool_window(node: Node, x: TensorType, allowed: Sequence[str]) -> Window:
    _spatial_input(node, x, allowed)
    size = x.shape[2:]
    return window(node, size, _kernel_attr(node, len(size)), bool(node.attr("ceil_mode", 0)))


def _pool_infer(allowed: Sequence[str]):
    def infer(node, types, consts):
        _expect_inputs(node, types, 1)
        x = types[0]
        win = _pool_window(node, x, allowed)
        return [TensorType((*x.shape[:2], *win.out), x.dtype)]

    return infer


def _lowest(dt: np.dtype):
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def _maxpool_evaluate(node, inputs):
    x = inputs[0]
    win = _pool_window(node, TensorType.of(x), MAXPOOL_TYPES)
    cols = _windows(x, win, _lowest(x.dtype))
    return [cols.max(axis=tuple(range(2 + win.rank, 2 + 2 * win.rank)))]


def _maxpool_compute(node, tensors, consts, out_types):
    x = tensors[0]
    win = _pool_window(node, _tensor_types([x])[0], MAXPOOL_TYPES)
    lowest = float("-inf") if x.dtype.is_float else irop.min_value(x.dtype).value
    src, shift = padded_source(x, win, lowest, "max_pool")
    rk = [te.reduce_axis(k, f"rk{i}") for i, k in enumerate(win.kernel)]

    def rule(n, c, *o):
        pos = window_index(win, o, [k.var for k in rk], shift)
        return te.max(src[(n, c, *pos)], axis=rk)

    return [te.compute(out_types[0].shape, rule, name="max_pool")]


def _maxpool_check(node: Node) -> str | None:
    if int(node.attr("storage_order", 0)) != 0:
        return "storage_order=1 is not supported"
    if len(node.outputs) > 1:
        return "the Indices output is not supported"
    return check_window_attrs(node)


register(
    Operator(
        "MaxPool",
        Pattern.OUT_ELEMWISE_FUSABLE,
        _pool_infer(MAXPOOL_TYPES),
        _maxpool_evaluate,
        _maxpool_compute,
        attrs={
            "auto_pad",
            "ceil_mode",
            "dilations",
            "kernel_shape",
            "pads",
            "storage_order",
            "strides",
        },
        check=_maxpool_check,
        doc="N-d max pooling; the Indices output and storage_order=1 are not supported.",
    )
)


def _avgpool_evaluate(node, inputs):
    x = inputs[0]
    win = _pool_window(node, TensorType.of(x), FLOATS)
    cols = _windows(_wide(x), win, 0)
    total = cols.sum(axis=tuple(range(2 + win.rank, 2 + 2 * win.rank)))
    counts = _counts(win, bool(node.attr("count_include_pad", 0)))
    return [(total / counts).astype(x.dtype)]


def _window_count(win: Window, include_pad: bool, dt: str) -> Tensor | float:
    """What each window's sum is divided by: a constant when every window counts all its
    positions, else a tensor over the output's spatial shape."""
    counts = _counts(win, include_pad)
    if counts.min() == counts.max():
        return float(counts.flat[0])
    rk = [te.reduce_axis(k, f"rk{i}") for i, k in enumerate(win.kernel)]

    def rule(*o):
        ok = []
        for i, (oi, k) in enumerate(zip(o, rk)):
            pos = oi * win.strides[i] - win.begin[i] + k.var * win.dilations[i]
            low, high = win.counted(i, include_pad)
            ok += [pos >= low, pos < high]
        return te.sum(te.select(irop.all_(*ok), te.const(1.0, dt), te.const(0.0, dt)), axis=rk)

    return te.compute(win.out, rule, name="average_pool.count")


def _avgpool_compute(node, tensors, consts, out_types):
    x = tensors[0]
    win = _pool_window(node, _tensor_types([x])[0], FLOATS)
    src, shift = padded_source(x, win, 0.0, "average_pool")
    rk = [te.reduce_axis(k, f"rk{i}") for i, k in enumerate(win.kernel)]

    def rule(n, c, *o):
        pos = window_index(win, o, [k.var for k in rk], shift)
        return te.sum(src[(n, c, *pos)], axis=rk)

    total = te.compute(out_types[0].shape, rule, name="average_pool.sum")
    count = _window_count(win, bool(node.attr("count_include_pad", 0)), str(x.dtype))
    if isinstance(count, float):
        return [te.compute(total.shape, lambda *i: total(*i) / count, name="average_pool")]
    return [te.compute(total.shape, lambda *i: total(*i) / count(*i[2:]), name="average_pool")]


register(
    Operator(
        "AveragePool",
        Pattern.OUT_ELEMWISE_FUSABLE,
        _pool_infer(FLOATS),
        _avgpool_evaluate,
        _avgpool_compute,
        attrs={
            "auto_pad",
            "ceil_mode",
            "count_include_pad",
            "dilations",
            "kernel_shape",
            "pads",
            "strides",
        },
        check=check_window_attrs,
        doc="N-d average pooling.",
    )
)


# -- GlobalAveragePool and GlobalMaxPool ----------------------------------------------------------


def _global_infer(allowed: Sequence[str]):
    def infer(node, types, consts):
        _expect_inputs(node, types, 1)
        x = types[0]
        _spatial_input(node, x, allowed)
        return [TensorType((*x.shape[:2], *(1,) * (x.rank - 2)), x.dtype)]

    return infer


def _global_evaluate(kind: str):
    def evaluate(node, inputs):
        x = inputs[0]
        axes = tuple(range(2, x.ndim))
        if kind == "max":
            return [x.max(axis=axes, keepdims=True)]
        return [_wide(x).mean(axis=axes, keepdims=True).astype(x.dtype)]

    return evaluate


def _global_compute(kind: str):
    def compute(node, tensors, consts, out_types):
        x = tensors[0]
        shape = out_types[0].shape
        rk = [te.reduce_axis(s, f"rk{i}") for i, s in enumerate(x.shape[2:])]
        reducer = te.max if kind == "max" else te.sum
        name = f"global_{kind}_pool"
        y = te.compute(
            shape,
            lambda n, c, *_: reducer(x[(n, c, *[k.var for k in rk])], axis=rk),
            name=name if kind == "max" else f"{name}.sum",
        )
        if kind == "max":
            return [y]
        count = float(math.prod(x.shape[2:]))
        return [te.compute(shape, lambda *i: y(*i) / count, name=name)]

    return compute


for _op, _kind, _types in (
    ("GlobalAveragePool", "average", FLOATS),
    ("GlobalMaxPool", "max", MAXPOOL_TYPES),
):
    register(
        Operator(
            _op,
            Pattern.REDUCTION,
            _global_infer(_types),
            _global_evaluate(_kind),
            _global_compute(_kind),
            doc=f"The {_kind} over all spatial positions of each (N, C) plane, keeping them.",
        )
    )


# -- BatchNormalization ---------------------------------------------------------------------------


def _batchnorm_infer(node, types, consts):
    _expect_inputs(node, types, 5)
    x = types[0]
    _expect_dtype(node, x, FLOATS, "X")
    if x.rank < 2:
        raise _fail(node, f"X must be (N, C, ...), got shape {list(x.shape)}")
    for k, name in enumerate(("scale", "B", "input_mean", "input_var"), start=1):
        if types[k].shape != (x.shape[1],) or types[k].dtype != x.dtype:
            raise _fail(node, f"{name} must be {x.dtype}[{x.shape[1]}], got {types[k]}")
    return [x]


def _channel_view(v: np.ndarray, rank: int) -> np.ndarray:
    return _wide(v).reshape(-1, *(1,) * (rank - 2))


def _batchnorm_evaluate(node, inputs):
    x, scale, b, mean, var = inputs[:5]
    eps = float(node.attr("epsilon", 1e-5))
    r = x.ndim
    inv = 1.0 / np.sqrt(_channel_view(var, r) + eps)
    y = (_wide(x) - _channel_view(mean, r)) * inv * _channel_view(scale, r) + _channel_view(b, r)
    return [y.astype(x.dtype)]


def _batchnorm_compute(node, tensors, consts, out_types):
    x, scale, b, mean, var = tensors[:5]
    eps = float(node.attr("epsilon", 1e-5))

    def rule(*i):
        c = i[1]
        return (x(*i) - mean[c]) / te.sqrt(var[c] + eps) * scale[c] + b[c]

    return [te.compute(x.shape, rule, name="batch_norm")]


def _batchnorm_check(node: Node) -> str | None:
    if int(node.attr("training_mode", 0)) != 0:
        return "training_mode=1 is not supported"
    if len(node.outputs) > 1:
        return "the running_mean and running_var outputs (training) are not supported"
    return None


register(
    Operator(
        "BatchNormalization",
        Pattern.BROADCAST,
        _batchnorm_infer,
        _batchnorm_evaluate,
        _batchnorm_compute,
        attrs={"epsilon", "momentum", "training_mode"},
        check=_batchnorm_check,
        doc="Inference-mode batch normalization over axis 1 (momentum is unused).",
    )
)


# -- Gemm and MatMul ------------------------------------------------------------------------------


def _gemm_dims(node: Node, a: TensorType, b: TensorType) -> tuple[int, int, int]:
    if a.rank != 2 or b.rank != 2:
        raise _fail(node, f"A and B must be matrices, got {a} and {b}")
    m, k = a.shape[::-1] if node.attr("transA", 0) else a.shape
    k2, n = b.shape[::-1] if node.attr("transB", 0) else b.shape
    if k != k2:
        raise _fail(node, f"inner dimensions differ: A' is {m}x{k}, B' is {k2}x{n}")
    return m, k, n


def _gemm_infer(node, types, consts):
    _expect_inputs(node, types, 2)
    a, b = types[0], types[1]
    _expect_dtype(node, a, FLOATS, "A")
    if b.dtype != a.dtype:
        raise _fail(node, f"B must be {a.dtype}, got {b.dtype}")
    m, _, n = _gemm_dims(node, a, b)
    c = _input(types, 2)
    if c is not None:
        if c.dtype != a.dtype or c.rank > 2 or broadcast_shape(c.shape, (m, n)) != (m, n):
            raise _fail(node, f"C must be {a.dtype} broadcastable to [{m}, {n}], got {c}")
    return [TensorType((m, n), a.dtype)]


def _gemm_evaluate(node, inputs):
    a, b = _wide(inputs[0]), _wide(inputs[1])
    c = _input(inputs, 2)
    a = a.T if node.attr("transA", 0) else a
    b = b.T if node.attr("transB", 0) else b
    y = float(node.attr("alpha", 1.0)) * (a @ b)
    beta = float(node.attr("beta", 1.0))
    if c is not None and beta != 0.0:
        y = y + beta * _wide(c)
    return [np.broadcast_to(y, (a.shape[0], b.shape[1])).astype(inputs[0].dtype)]


def _gemm_compute(node, tensors, consts, out_types):
    a, b = tensors[0], tensors[1]
    c = _input(tensors, 2)
    trans_a, trans_b = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    shape = out_types[0].shape
    r = te.reduce_axis(a.shape[0] if trans_a else a.shape[1], "k")

    def product(i, j):
        left = a[r, i] if trans_a else a[i, r]
        right = b[j, r] if trans_b else b[r, j]
        return te.sum(left * right, axis=r)

    with_c = c is not None and beta != 0.0
    if alpha == 1.0 and not with_c:
        return [te.compute(shape, product, name="gemm")]
    y = te.compute(shape, product, name="gemm.product")

    def epilogue(i, j):
        value = y[i, j] * alpha if alpha != 1.0 else y[i, j]
        if not with_c:
            return value
        term = c[tuple(broadcast_index(c.shape, shape, (i, j)))]
        return value + (term * beta if beta != 1.0 else term)

    return [te.compute(shape, epilogue, name="gemm")]


register(
    Operator(
        "Gemm",
        Pattern.OUT_ELEMWISE_FUSABLE,
        _gemm_infer,
        _gemm_evaluate,
        _gemm_compute,
        attrs={"alpha", "beta", "transA", "transB"},
        doc="alpha * A' @ B' + beta * C (C broadcast to the product; beta=0 ignores C).",
    )
)


def matmul_shape(node: Node, a: TensorType, b: TensorType) -> tuple[int, ...]:
    _expect_dtype(node, a, MATMUL_TYPES, "A")
    if b.dtype != a.dtype:
        raise _fail(node, f"B must be {a.dtype}, got {b.dtype}")
    if a.rank == 0 or b.rank == 0:
        raise _fail(node, "MatMul operands must have at least one dimension")
    k = a.shape[-1]
    k2 = b.shape[0] if b.rank == 1 else b.shape[-2]
    if k != k2:
        raise _fail(node, f"inner dimensions differ: {list(a.shape)} @ {list(b.shape)}")
    try:
        batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise _fail(
            node, f"batch dimensions do not broadcast: {list(a.shape)} @ {list(b.shape)}"
        ) from None
    rows = a.shape[-2:-1] if a.rank > 1 else ()
    cols = b.shape[-1:] if b.rank > 1 else ()
    return (*batch, *rows, *cols)


def _matmul_infer(node, types, consts):
    _expect_inputs(node, types, 2)
    return [TensorType(matmul_shape(node, types[0], types[1]), types[0].dtype)]


def matmul_evaluate(node, inputs):
    a, b = inputs[0], inputs[1]
    matmul_shape(node, TensorType.of(a), TensorType.of(b))
    return [np.asarray(np.matmul(_wide(a), _wide(b))).astype(a.dtype)]


def matmul_compute(node, tensors, consts, out_types):
    a, b = tensors[0], tensors[1]
    shape = out_types[0].shape
    batch = shape[: len(shape) - (a.ndim > 1) - (b.ndim > 1)]
    r = te.reduce_axis(a.shape[-1], "k")

    def rule(*idx):
        lead = idx[: len(batch)]
        rest = list(idx[len(batch) :])
        i = [rest.pop(0)] if a.ndim > 1 else []
        j = [rest.pop(0)] if b.ndim > 1 else []
        left = a[(*broadcast_index(a.shape[:-2], batch, lead), *i, r)]
        right = b[(*broadcast_index(b.shape[:-2], batch, lead), r, *j)]
        return te.sum(left * right, axis=r)

    return [te.compute(shape, rule, name="matmul")]


register(
    Operator(
        "MatMul",
        Pattern.OUT_ELEMWISE_FUSABLE,
        _matmul_infer,
        matmul_evaluate,
        matmul_compute,
        doc="numpy's matmul: batch dimensions broadcast, 1-D operands lose their added axis; "
        "integers wrap.",
    )
)


# -- Softmax and LogSoftmax -----------------------------------------------------------------------


def _softmax_infer(node, types, consts):
    _expect_inputs(node, types, 1)
    x = types[0]
    _expect_dtype(node, x, FLOATS, "input")
    if x.rank == 0:
        raise _fail(node, "the input must have at least one dimension")
    normalize_axis(int(node.attr("axis", -1)), x.rank, node)
    return [x]


def _softmax_evaluate(log: bool):
    def evaluate(node, inputs):
        x = inputs[0]
        axis = normalize_axis(int(node.attr("axis", -1)), x.ndim, node)
        shifted = _wide(x) - x.max(axis=axis, keepdims=True)
        total = np.exp(shifted).sum(axis=axis, keepdims=True)
        y = shifted - np.log(total) if log else np.exp(shifted) / total
        return [y.astype(x.dtype)]

    return evaluate


def _without(index: Sequence, axis: int) -> tuple:
    return (*index[:axis], *index[axis + 1 :])


def _with(index: Sequence, axis: int, value) -> tuple:
    return (*index[:axis], value, *index[axis:])


def _softmax_compute(log: bool):
    name = "log_softmax" if log else "softmax"

    def compute(node, tensors, consts, out_types):
        x = tensors[0]
        axis = normalize_axis(int(node.attr("axis", -1)), x.ndim, node)
        reduced = _without(x.shape, axis)
        k1, k2 = te.reduce_axis(x.shape[axis], "k"), te.reduce_axis(x.shape[axis], "k")
        top = te.compute(
            reduced, lambda *i: te.max(x[_with(i, axis, k1)], axis=k1), name=f"{name}.max"
        )
        exp = te.compute(
            x.shape, lambda *i: te.exp(x(*i) - top[_without(i, axis)]), name=f"{name}.exp"
        )
        total = te.compute(
            reduced, lambda *i: te.sum(exp[_with(i, axis, k2)], axis=k2), name=f"{name}.sum"
        )
        if log:
            rule = lambda *i: x(*i) - top[_without(i, axis)] - te.log(total[_without(i, axis)])  # noqa: E731
        else:
            # one division per row, then a multiply per element (as onnxruntime): within the
            # tests' tolerance, and a division costs several multiplies' time
            scale = te.compute(
                reduced, lambda *i: te.const(1, x.dtype) / total(*i), name=f"{name}.scale"
            )
            rule = lambda *i: exp(*i) * scale[_without(i, axis)]  # noqa: E731
        return [te.compute(x.shape, rule, name=name)]

    return compute


for _op, _log in (("Softmax", False), ("LogSoftmax", True)):
    register(
        Operator(
            _op,
            Pattern.OPAQUE,
            _softmax_infer,
            _softmax_evaluate(_log),
            _softmax_compute(_log),
            attrs={"axis"},
            doc=f"{_op} along one axis (default -1), stabilized by the maximum.",
        )
    )


# -- LayerNormalization and InstanceNormalization -------------------------------------------------


def _layernorm_axis(node: Node, x: TensorType) -> int:
    return normalize_axis(int(node.attr("axis", -1)), x.rank, node)


def _layernorm_infer(node, types, consts):
    _expect_inputs(node, types, 2)
    x = types[0]
    _expect_dtype(node, x, FLOATS, "X")
    if x.rank == 0:
        raise _fail(node, "X must have at least one dimension")
    axis = _layernorm_axis(node, x)
    for k, name in ((1, "Scale"), (2, "B")):
        t = _input(types, k)
        if t is None:
            continue
        if t.dtype != x.dtype or t.rank > x.rank or broadcast_shape(t.shape, x.shape) != x.shape:
            raise _fail(node, f"{name} must be {x.dtype} broadcastable to {list(x.shape)}, got {t}")
    if len(node.outputs) > 3:
        raise _fail(node, f"has {len(node.outputs)} outputs, at most 3 (Y, Mean, InvStdDev)")
    stats = TensorType((*x.shape[:axis], *(1,) * (x.rank - axis)), "float32")
    return [x, *[stats] * (len(node.outputs) - 1)]


def _moments(x: np.ndarray, axes: tuple[int, ...], eps: float):
    """Mean and 1/sqrt(variance + eps) over `axes` (kept), in float64."""
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    var = np.square(wide - mean).mean(axis=axes, keepdims=True)
    return mean, 1.0 / np.sqrt(var + eps)


def _layernorm_evaluate(node, inputs):
    x, scale = inputs[0], inputs[1]
    b = _input(inputs, 2)
    axis = normalize_axis(int(node.attr("axis", -1)), x.ndim, node)
    mean, inv = _moments(x, tuple(range(axis, x.ndim)), float(node.attr("epsilon", 1e-5)))
    y = (x - mean) * inv * _wide(scale)
    if b is not None:
        y = y + _wide(b)
    stats = [mean.astype(np.float32), inv.astype(np.float32)][: len(node.outputs) - 1]
    return [y.astype(x.dtype), *stats]


@dataclasses.dataclass(frozen=True)
class _Moments:
    """te stages of a mean and inverse standard deviation over trailing axes."""

    total: Tensor
    inv_std: Tensor
    count: float


def _moments_compute(x: Tensor, keep: int, eps: float, name: str) -> _Moments:
    """Statistics of `x` over its axes from `keep` on, each stage of shape x.shape[:keep]."""
    lead, rest = x.shape[:keep], x.shape[keep:]
    count = float(math.prod(rest))
    r1 = [te.reduce_axis(s, f"r{i}") for i, s in enumerate(rest)]
    r2 = [te.reduce_axis(s, f"r{i}") for i, s in enumerate(rest)]
    total = te.compute(
        lead, lambda *i: te.sum(x[(*i, *[r.var for r in r1])], axis=r1), name=f"{name}.sum"
    )

    def squares(*i):
        d = x[(*i, *[r.var for r in r2])] - total(*i) / count
        return te.sum(d * d, axis=r2)

    sq = te.compute(lead, squares, name=f"{name}.squares")
    inv = te.compute(lead, lambda *i: 1.0 / te.sqrt(sq(*i) / count + eps), name=f"{name}.inv_std")
    return _Moments(total, inv, count)


def _layernorm_compute(node, tensors, consts, out_types):
    x, scale = tensors[0], tensors[1]
    b = _input(tensors, 2)
    axis = normalize_axis(int(node.attr("axis", -1)), x.ndim, node)
    m = _moments_compute(x, axis, float(node.attr("epsilon", 1e-5)), "layer_norm")

    def rule(*i):
        lead = i[:axis]
        y = (x(*i) - m.total(*lead) / m.count) * m.inv_std(*lead)
        y = y * scale[tuple(broadcast_index(scale.shape, x.shape, i))]
        if b is not None:
            y = y + b[tuple(broadcast_index(b.shape, x.shape, i))]
        return y

    outs = [te.compute(x.shape, rule, name="layer_norm")]
    stats_shape = out_types[-1].shape
    if len(out_types) > 1:
        outs.append(
            te.compute(
                stats_shape,
                lambda *i: te.cast(m.total(*i[:axis]) / m.count, "float32"),
                name="layer_norm.mean",
            )
        )
    if len(out_types) > 2:
        outs.append(
            te.compute(
                stats_shape,
                lambda *i: te.cast(m.inv_std(*i[:axis]), "float32"),
                name="layer_norm.inv_std_dev",
            )
        )
    return outs


def _layernorm_check(node: Node) -> str | None:
    if int(node.attr("stash_type", 1)) != 1:
        return f"stash_type={node.attr('stash_type')} is not supported (only 1, float32)"
    return None


register(
    Operator(
        "LayerNormalization",
        Pattern.OPAQUE,
        _layernorm_infer,
        _layernorm_evaluate,
        _layernorm_compute,
        attrs={"axis", "epsilon", "stash_type"},
        check=_layernorm_check,
        doc="Layer normalization over the axes from `axis` on, with its optional Mean and "
        "InvStdDev outputs (float32).",
    )
)


def _instnorm_infer(node, types, consts):
    _expect_inputs(node, types, 3)
    x = types[0]
    _spatial_input(node, x, FLOATS, "input")
    for k, name in ((1, "scale"), (2, "B")):
        if types[k].shape != (x.shape[1],) or types[k].dtype != x.dtype:
            raise _fail(node, f"{name} must be {x.dtype}[{x.shape[1]}], got {types[k]}")
    return [x]


def _instnorm_evaluate(node, inputs):
    x, scale, b = inputs[:3]
    mean, inv = _moments(x, tuple(range(2, x.ndim)), float(node.attr("epsilon", 1e-5)))
    y = (x - mean) * inv * _channel_view(scale, x.ndim) + _channel_view(b, x.ndim)
    return [y.astype(x.dtype)]


def _instnorm_compute(node, tensors, consts, out_types):
    x, scale, b = tensors[:3]
    m = _moments_compute(x, 2, float(node.attr("epsilon", 1e-5)), "instance_norm")

    def rule(n, c, *s):
        d = x[(n, c, *s)] - m.total[n, c] / m.count
        return d * m.inv_std[n, c] * scale[c] + b[c]

    return [te.compute(x.shape, rule, name="instance_norm")]


register(
    Operator(
        "InstanceNormalization",
        Pattern.OPAQUE,
        _instnorm_infer,
        _instnorm_evaluate,
        _instnorm_compute,
        attrs={"epsilon"},
        doc="Normalization of each (N, C) plane over its spatial positions.",
    )
)


# -- LRN ------------------------------------------------------------------------------------------


def _lrn_infer(node, types, consts):
    _expect_inputs(node, types, 1)
    x = types[0]
    _expect_dtype(node, x, FLOATS, "X")
    if x.rank < 2:
        raise _fail(node, f"X must be (N, C, ...), got shape {list(x.shape)}")
    return [x]


def _lrn_params(node: Node) -> tuple[int, float, float, float]:
    size = node.attr("size")
    if size is None:
        raise _fail(node, "size is required")
    alpha = float(node.attr("alpha", 1e-4))
    return int(size), alpha, float(node.attr("beta", 0.75)), float(node.attr("bias", 1.0))


def _lrn_evaluate(node, inputs):
    x = inputs[0]
    size, alpha, beta, bias = _lrn_params(node)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = np.square(_wide(x))
    padded = np.pad(sq, [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2))
    windows = np.lib.stride_tricks.sliding_window_view(padded, size, axis=1)
    total = windows.sum(axis=-1)
    return [(_wide(x) / np.power(bias + alpha / size * total, beta)).astype(x.dtype)]


def _lrn_compute(node, tensors, consts, out_types):
    x = tensors[0]
    size, alpha, beta, bias = _lrn_params(node)
    before = (size - 1) // 2
    channels = x.shape[1]
    r = te.reduce_axis(size, "r")

    def squares(n, c, *s):
        j = c - before + r
        value = x[(n, j, *s)]
        inside = irop.all_(j >= 0, j < channels)
        return te.sum(te.if_then_else(inside, value * value, te.const(0.0, str(x.dtype))), axis=r)

    sq = te.compute(x.shape, squares, name="lrn.squares")
    scale = alpha / size
    return [te.compute(x.shape, lambda *i: x(*i) / te.pow(bias + scale * sq(*i), beta), name="lrn")]


def _lrn_check(node: Node) -> str | None:
    size = node.attr("size")
    if size is not None and int(size) < 1:
        return f"size={size} must be at least 1"
    return None


register(
    Operator(
        "LRN",
        Pattern.OPAQUE,
        _lrn_infer,
        _lrn_evaluate,
        _lrn_compute,
        attrs={"alpha", "beta", "bias", "size"},
        check=_lrn_check,
        doc="Local response normalization across channels.",
    )
)


# -- LSTM -----------------------------------------------------------------------------------------
# Gates in ONNX's order i, o, f, c; peepholes i, o, f. The recurrence is unrolled: each time step
# is a few stages of the kernel, so kernels grow with the sequence length (short sequences, such
# as a streaming model's one step, are what this is for).

LSTM_ACTIVATIONS = ("Sigmoid", "Tanh", "Relu")
LSTM_DEFAULT_ACTIVATIONS = ("Sigmoid", "Tanh", "Tanh")
LSTM_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


@dataclasses.dataclass(frozen=True)
class _LstmShape:
    steps: int
    batch: int
    inputs: int
    hidden: int
    directions: int

    def state_shape(self) -> tuple[int, ...]:
        return (self.directions, self.batch, self.hidden)

    def output_shapes(self) -> list[tuple[int, ...]]:
        y = (self.steps, self.directions, self.batch, self.hidden)
        return [y, self.state_shape(), self.state_shape()]


def _lstm_shape(node: Node, types: Sequence[TensorType | None]) -> _LstmShape:
    _expect_inputs(node, types, 3)
    x, w, r = types[0], types[1], types[2]
    _expect_dtype(node, x, FLOATS, "X")
    for k, t in enumerate(types[1:], start=1):
        if t is not None and k != 4 and t.dtype != x.dtype:
            raise _fail(node, f"input {k} must be {x.dtype}, got {t.dtype}")
    if x.rank != 3 or w.rank != 3 or r.rank != 3:
        raise _fail(node, f"X, W and R must have rank 3, got {x}, {w} and {r}")
    steps, batch = x.shape[:2]
    directions = LSTM_DIRECTIONS[node.attr("direction", "forward")]
    hidden = r.shape[2]
    shape = _LstmShape(steps, batch, x.shape[2], hidden, directions)
    expected = {
        1: (directions, 4 * hidden, shape.inputs),
        2: (directions, 4 * hidden, hidden),
        3: (directions, 8 * hidden),
        5: shape.state_shape(),
        6: shape.state_shape(),
        7: (directions, 3 * hidden),
    }
    names = {1: "W", 2: "R", 3: "B", 5: "initial_h", 6: "initial_c", 7: "P"}
    for k, want in expected.items():
        t = _input(types, k)
        if t is not None and t.shape != want:
            raise _fail(node, f"{names[k]} must have shape {list(want)}, got {list(t.shape)}")
    if node.attr("hidden_size") is not None and int(node.attr("hidden_size")) != hidden:
        raise _fail(node, f"hidden_size={node.attr('hidden_size')} but R has {hidden} columns")
    return shape


def _lstm_infer(node, types, consts):
    shape = _lstm_shape(node, types)
    dt = types[0].dtype
    return [TensorType(s, dt) for s in shape.output_shapes()[: len(node.outputs)]]


def _lstm_activations(node: Node) -> tuple[str, ...]:
    """f, g, h of each direction."""
    directions = LSTM_DIRECTIONS.get(node.attr("direction", "forward"), 1)
    return tuple(node.attr("activations") or LSTM_DEFAULT_ACTIVATIONS * directions)


def _lstm_evaluate(node, inputs):
    x = inputs[0]
    shape = _lstm_shape(node, [None if a is None else TensorType.of(a) for a in inputs])
    steps, batch, hidden, dirs = shape.steps, shape.batch, shape.hidden, shape.directions

    def state(k):
        a = _input(inputs, k)
        if a is None:
            return np.zeros((dirs, batch, hidden))
        return _wide(a)

    h0, c0 = state(5), state(6)
    bias, peep = _input(inputs, 3), _input(inputs, 7)
    clip = node.attr("clip")

    def act(name, v, clipped=True):
        # onnxruntime clips the gates' sums (peepholes included), not the cell before h
        if clip is not None and clipped:
            v = np.clip(v, -float(clip), float(clip))
        if name == "Sigmoid":
            return 1 / (1 + np.exp(-v))
        return np.tanh(v) if name == "Tanh" else np.maximum(v, 0)

    acts = _lstm_activations(node)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        f, g, h_act = acts[3 * d : 3 * d + 3]
        b = np.zeros(8 * hidden) if bias is None else _wide(bias[d])
        pi, po, pf = np.split(np.zeros(3 * hidden) if peep is None else _wide(peep[d]), 3)
        h, c = h0[d], c0[d]
        y = np.zeros((steps, batch, hidden))
        for t in _lstm_order(node, d, steps):
            gates = _wide(x[t]) @ _wide(inputs[1][d]).T + h @ _wide(inputs[2][d]).T
            gi, go, gf, gc = np.split(gates + b[: 4 * hidden] + b[4 * hidden :], 4, axis=-1)
            c = act(f, gf + pf * c) * c + act(f, gi + pi * c) * act(g, gc)
            h = act(f, go + po * c) * act(h_act, c, clipped=False)
            y[t] = h
        ys.append(y)
        hs.append(h)
        cs.append(c)
    y, yh, yc = np.stack(ys, axis=1), np.stack(hs), np.stack(cs)
    return [a.astype(inputs[0].dtype) for a in (y, yh, yc)][: len(node.outputs)]


def _lstm_order(node: Node, direction: int, steps: int) -> list[int]:
    """The time indices in the order direction `direction` visits them."""
    reverse = direction == 1 or node.attr("direction", "forward") == "reverse"
    return list(range(steps - 1, -1, -1) if reverse else range(steps))


def _materialized(shape: Sequence[int], rule, name: str) -> Tensor:
    """A stage the kernel keeps in a buffer: a sum over one element. The default schedule
    inlines every stage that is not a reduction, and an inlined recurrence would recompute
    every earlier step in every later one."""
    one = te.reduce_axis(1, "one")
    return te.compute(shape, lambda *i: te.sum(rule(*i), axis=one), name=name)


@dataclasses.dataclass
class _LstmKernel:
    """What every step of one LSTM node's kernel reads."""

    node: Node
    shape: _LstmShape
    tensors: Sequence[Tensor | None]
    dtype: str

    def act(self, name: str, v, clipped: bool = True):
        clip = self.node.attr("clip")
        if clip is not None and clipped:
            bound = float(clip)
            v = irop.max_(irop.min_(v, te.const(bound, self.dtype)), te.const(-bound, self.dtype))
        if name == "Sigmoid":
            return te.sigmoid(v)
        return te.tanh(v) if name == "Tanh" else irop.max_(v, te.const(0.0, self.dtype))

    def initial(self, k: int, d: int, b, j):
        """initial_h (k=5) or initial_c (k=6) of direction d, or 0."""
        tensor = _input(self.tensors, k)
        if tensor is None:
            return te.const(0.0, self.dtype)
        return tensor[d, b, j]

    def input_projection(self, d: int) -> Tensor:
        """X @ W[d]^T for every time step: (steps, batch, 4 * hidden)."""
        x, w, s = self.tensors[0], self.tensors[1], self.shape
        k = te.reduce_axis(s.inputs, "k")

        def rule(t, b, q):
            return te.sum(x[t, b, k] * w[d, q, k], axis=k)

        return te.compute((s.steps, s.batch, 4 * s.hidden), rule, name=f"lstm.xw{d}")

    def direction(self, d: int) -> tuple[dict[int, Tensor], dict[int, Tensor]]:
        """The hidden and cell states of direction d, by time index."""
        s, r = self.shape, self.tensors[2]
        bias, peep = _input(self.tensors, 3), _input(self.tensors, 7)
        f, g, h_act = _lstm_activations(self.node)[3 * d : 3 * d + 3]
        xw = self.input_projection(d)
        hs: dict[int, Tensor] = {}
        cs: dict[int, Tensor] = {}
        h_prev = c_prev = None
        for t in _lstm_order(self.node, d, s.steps):
            j = te.reduce_axis(s.hidden, "j")

            def recurrent(b, q, *, h_prev=h_prev, j=j):
                h = self.initial(5, d, b, j) if h_prev is None else h_prev[b, j]
                return te.sum(h * r[d, q, j], axis=j)

            hr = te.compute((s.batch, 4 * s.hidden), recurrent, name=f"lstm.hr{d}_{t}")

            def gate(b, i, k, c, t=t, hr=hr):
                q = i + k * s.hidden
                value = xw[t, b, q] + hr[b, q]
                if bias is not None:
                    value = value + bias[d, q] + bias[d, q + 4 * s.hidden]
                if peep is not None and c is not None:  # peepholes i, o, f of gates 0, 1, 2
                    value = value + peep[d, i + (k if k < 2 else 2) * s.hidden] * c
                return value

            def cell(b, i, gate=gate, c_prev=c_prev):
                c = self.initial(6, d, b, i) if c_prev is None else c_prev[b, i]
                forget = self.act(f, gate(b, i, 2, c))
                return forget * c + self.act(f, gate(b, i, 0, c)) * self.act(g, gate(b, i, 3, None))

            c_t = _materialized((s.batch, s.hidden), cell, f"lstm.c{d}_{t}")

            def hidden_state(b, i, gate=gate, c_t=c_t):
                c = c_t[b, i]
                return self.act(f, gate(b, i, 1, c)) * self.act(h_act, c, clipped=False)

            h_t = _materialized((s.batch, s.hidden), hidden_state, f"lstm.h{d}_{t}")
            hs[t], cs[t] = h_t, c_t
            h_prev, c_prev = h_t, c_t
        return hs, cs


def _lstm_compute(node, tensors, consts, out_types):
    shape = _lstm_shape(node, _tensor_types(tensors))
    kernel = _LstmKernel(node, shape, tensors, str(tensors[0].dtype))
    hs, cs = zip(*(kernel.direction(d) for d in range(shape.directions)))

    def select(choices, b, j):
        """The value of the first (condition, state) of `choices` whose condition holds (the
        last one's is not tested)."""
        value = choices[-1][1][b, j]
        for condition, state in reversed(choices[:-1]):
            value = te.select(condition, state[b, j], value)
        return value

    def y(t, d, b, j):
        choices = [
            (irop.all_(te.equal(d, dd), te.equal(t, tt)), state)
            for dd, per_time in enumerate(hs)
            for tt, state in per_time.items()
        ]
        return select(choices, b, j)

    def final(per_direction, name):
        def rule(d, b, j):
            choices = [
                (te.equal(d, dd), per_time[_lstm_order(node, dd, shape.steps)[-1]])
                for dd, per_time in enumerate(per_direction)
            ]
            return select(choices, b, j)

        return te.compute(shape.state_shape(), rule, name=name)

    outs = [te.compute(out_types[0].shape, y, name="lstm.y")]
    if len(node.outputs) > 1:
        outs.append(final(hs, "lstm.y_h"))
    if len(node.outputs) > 2:
        outs.append(final(cs, "lstm.y_c"))
    return outs


def _lstm_check(node: Node) -> str | None:
    direction = node.attr("direction", "forward")
    if direction not in LSTM_DIRECTIONS:
        return f"direction={direction!r} is not one of {', '.join(LSTM_DIRECTIONS)}"
    acts = _lstm_activations(node)
    if len(acts) != 3 * LSTM_DIRECTIONS[direction]:
        return f"activations needs 3 names per direction, got {list(acts)}"
    other = [a for a in acts if a not in LSTM_ACTIVATIONS]
    if other:
        return f"activations {other} not supported (only {', '.join(LSTM_ACTIVATIONS)})"
    if node.attr("input_forget", 0):
        return "input_forget=1 not supported"
    if node.attr("layout", 0) != 0:
        # onnxruntime refuses it too ("Batchwise recurrent operations are not supported")
        return f"layout={node.attr('layout')} not supported (only 0: time-major)"
    if len(node.inputs) > 4 and node.inputs[4]:
        return "sequence_lens not supported (every sequence must have the full length)"
    return None


register(
    Operator(
        "LSTM",
        Pattern.OPAQUE,
        _lstm_infer,
        _lstm_evaluate,
        _lstm_compute,
        attrs={"activations", "clip", "direction", "hidden_size", "input_forget", "layout"},
        check=_lstm_check,
        doc="A one-layer LSTM (gates i, o, f, c), forward, reverse or bidirectional, with "
        "optional biases, initial states and peepholes; activations Sigmoid, Tanh or Relu. The "
        "time steps are unrolled in the kernel.",
    )
)
