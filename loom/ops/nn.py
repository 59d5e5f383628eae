"""Compute definitions of neural-network operators (no schedules: those live with the targets).

Each function returns the output tensor; intermediate stages (padding, the max and sum of a
softmax) are separate computes so a schedule can inline them or compute them where it likes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loom import te
from loom.errors import LoomError
from loom.ir import op as irop
from loom.ir.expr import PrimExpr
from loom.te.tensor import Tensor


def _pair(v, what: str) -> tuple[int, int]:
    if isinstance(v, int):
        return v, v
    if isinstance(v, tuple | list) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return int(v[0]), int(v[1])
    raise TypeError(f"{what} must be an int or a pair of ints, got {v!r}")


def elementwise(fn: Callable[..., PrimExpr], *inputs: Tensor, name: str = "elementwise") -> Tensor:
    """`fn` applied element by element to tensors of one shape."""
    shape = inputs[0].shape
    for t in inputs[1:]:
        if t.shape != shape:
            raise LoomError(
                f"{name}: shapes differ: {inputs[0].name}{list(shape)} vs {t.name}{list(t.shape)}"
            )
    return te.compute(shape, lambda *i: fn(*[t(*i) for t in inputs]), name=name)


def broadcast_to(t: Tensor, shape: Sequence[int], name: str | None = None) -> Tensor:
    """numpy-style broadcast of `t` to `shape` (dimensions aligned at the right)."""
    shape = tuple(shape)
    offset = len(shape) - t.ndim
    if offset < 0 or any(s not in (1, shape[offset + k]) for k, s in enumerate(t.shape)):
        raise LoomError(f"cannot broadcast {t.name}{list(t.shape)} to {list(shape)}")

    def rule(*i):
        return t(*[0 if s == 1 else i[offset + k] for k, s in enumerate(t.shape)])

    return te.compute(shape, rule, name=name or f"{t.name}.broadcast")


def matmul(a: Tensor, b: Tensor, out_dtype: str | None = None, name: str = "matmul") -> Tensor:
    """C[i, j] = sum_k A[i, k] * B[k, j]."""
    (n, k), (k2, m) = a.shape, b.shape
    if k != k2:
        raise LoomError(
            f"matmul: inner dimensions differ: {a.name}{list(a.shape)} @ {b.name}{list(b.shape)}"
        )
    dt = out_dtype or str(a.dtype)
    r = te.reduce_axis(k, name="k")
    return te.compute(
        (n, m), lambda i, j: te.sum(a[i, r].astype(dt) * b[r, j].astype(dt), axis=r), name=name
    )


def pad(
    t: Tensor, before: Sequence[int], after: Sequence[int], value=0, name: str = "pad"
) -> Tensor:
    """`t` padded with `value`: `before[d]` elements before and `after[d]` after dimension d."""
    if len(before) != t.ndim or len(after) != t.ndim:
        raise LoomError(f"pad: {t.name} has {t.ndim} dimensions, got padding {before}/{after}")
    shape = tuple(s + b + a for s, b, a in zip(t.shape, before, after))

    def rule(*i):
        inside = [
            irop.all_(i[d] >= before[d], i[d] < before[d] + t.shape[d])
            for d in range(t.ndim)
            if before[d] or after[d]
        ]
        src = t(*[i[d] - before[d] for d in range(t.ndim)])
        if not inside:
            return src
        return te.if_then_else(irop.all_(*inside), src, irop.const(value, t.dtype))

    return te.compute(shape, rule, name=name)


def _conv_out(size: int, kernel: int, stride: int, pad_: int, dilation: int = 1) -> int:
    out = (size + 2 * pad_ - dilation * (kernel - 1) - 1) // stride + 1
    if out <= 0:
        raise LoomError(
            f"convolution output would be empty (size {size}, kernel {kernel}, "
            f"stride {stride}, padding {pad_})"
        )
    return out


def conv2d_nchw(
    data: Tensor,
    kernel: Tensor,
    stride=1,
    padding=0,
    out_dtype: str | None = None,
    name: str = "conv2d",
) -> Tensor:
    """2-d convolution, data NCHW, kernel OIHW (O output channels, I input channels)."""
    n, c, h, w = data.shape
    o, ci, kh, kw = kernel.shape
    if ci != c:
        raise LoomError(f"conv2d: data has {c} channels, kernel expects {ci}")
    (sh, sw), (ph, pw) = _pair(stride, "stride"), _pair(padding, "padding")
    oh, ow = _conv_out(h, kh, sh, ph), _conv_out(w, kw, sw, pw)
    src = pad(data, (0, 0, ph, pw), (0, 0, ph, pw), name=f"{name}.pad") if ph or pw else data
    dt = out_dtype or str(data.dtype)
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    return te.compute(
        (n, o, oh, ow),
        lambda b, f, y, x: te.sum(
            src[b, rc, y * sh + ry, x * sw + rx].astype(dt) * kernel[f, rc, ry, rx].astype(dt),
            axis=[rc, ry, rx],
        ),
        name=name,
    )


def depthwise_conv2d_nchw(
    data: Tensor, kernel: Tensor, stride=1, padding=0, name: str = "depthwise_conv2d"
) -> Tensor:
    """Depthwise convolution: data NCHW, kernel (C * multiplier, 1, KH, KW)."""
    n, c, h, w = data.shape
    oc, one, kh, kw = kernel.shape
    if one != 1 or oc % c:
        raise LoomError(
            f"depthwise_conv2d: kernel must be (C*m, 1, KH, KW) for C={c}, got {list(kernel.shape)}"
        )
    mult = oc // c
    (sh, sw), (ph, pw) = _pair(stride, "stride"), _pair(padding, "padding")
    oh, ow = _conv_out(h, kh, sh, ph), _conv_out(w, kw, sw, pw)
    src = pad(data, (0, 0, ph, pw), (0, 0, ph, pw), name=f"{name}.pad") if ph or pw else data
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    return te.compute(
        (n, oc, oh, ow),
        lambda b, f, y, x: te.sum(
            src[b, f // mult, y * sh + ry, x * sw + rx] * kernel[f, 0, ry, rx], axis=[ry, rx]
        ),
        name=name,
    )


def pool2d(
    data: Tensor, kernel, stride=None, padding=0, kind: str = "max", name: str = "pool2d"
) -> Tensor:
    """Max or average pooling over NCHW data; average divides by the full window (padding
    counted, as ONNX count_include_pad=1)."""
    n, c, h, w = data.shape
    (kh, kw) = _pair(kernel, "kernel")
    (sh, sw) = _pair(stride if stride is not None else kernel, "stride")
    (ph, pw) = _pair(padding, "padding")
    oh, ow = _conv_out(h, kh, sh, ph), _conv_out(w, kw, sw, pw)
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    if kind == "max":
        fill = irop.min_value(data.dtype)
        src = (
            pad(data, (0, 0, ph, pw), (0, 0, ph, pw), value=fill.value, name=f"{name}.pad")
            if ph or pw
            else data
        )
        return te.compute(
            (n, c, oh, ow),
            lambda b, f, y, x: te.max(src[b, f, y * sh + ry, x * sw + rx], axis=[ry, rx]),
            name=name,
        )
    if kind == "avg":
        if not data.dtype.is_float:
            raise LoomError(f"average pooling needs a float tensor, got {data.dtype}")
        src = pad(data, (0, 0, ph, pw), (0, 0, ph, pw), name=f"{name}.pad") if ph or pw else data
        total = te.compute(
            (n, c, oh, ow),
            lambda b, f, y, x: te.sum(src[b, f, y * sh + ry, x * sw + rx], axis=[ry, rx]),
            name=f"{name}.sum",
        )
        return te.compute((n, c, oh, ow), lambda *i: total(*i) / float(kh * kw), name=name)
    raise LoomError(f"pool2d kind must be 'max' or 'avg', got {kind!r}")


def softmax(x: Tensor, name: str = "softmax") -> Tensor:
    """Softmax over the last axis, stabilized by subtracting the row maximum."""
    *lead, n = x.shape
    k1, k2 = te.reduce_axis(n, "k"), te.reduce_axis(n, "k")
    row_max = te.compute(tuple(lead), lambda *i: te.max(x(*i, k1), axis=k1), name=f"{name}.max")
    exp = te.compute(x.shape, lambda *i: te.exp(x(*i) - row_max(*i[:-1])), name=f"{name}.exp")
    total = te.compute(tuple(lead), lambda *i: te.sum(exp(*i, k2), axis=k2), name=f"{name}.sum")
    return te.compute(x.shape, lambda *i: exp(*i) / total(*i[:-1]), name=name)
