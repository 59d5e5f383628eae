"""numpy integer references of the NPU operators, written from docs/npu.md."""

import numpy as np


def requantize(acc: np.ndarray, multiplier: int, shift: int, relu: bool) -> np.ndarray:
    x = acc.astype(np.int32).astype(np.int64)  # the accumulator wraps at int32
    y = (x * multiplier + ((1 << (shift - 1)) if shift else 0)) >> shift
    y = np.clip(y, -128, 127)
    return (np.maximum(y, 0) if relu else y).astype(np.int8)


def matmul(a, b, bias, multiplier, shift, relu):
    acc = a.astype(np.int64) @ b.astype(np.int64) + bias
    return requantize(acc, multiplier, shift, relu)


def conv2d_nhwc(x, w, bias, stride, padding, multiplier, shift, relu):
    n, h, wd, c = x.shape
    kh, kw, _, f = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (padding,) * 2, (padding,) * 2, (0, 0)))
    oh, ow = (h + 2 * padding - kh) // stride + 1, (wd + 2 * padding - kw) // stride + 1
    acc = np.zeros((n, oh, ow, f), np.int64) + bias
    for ry in range(kh):
        for rx in range(kw):
            win = xp[:, ry : ry + stride * oh : stride, rx : rx + stride * ow : stride, :]
            acc += np.einsum("nhwc,cf->nhwf", win, w[ry, rx].astype(np.int64))
    return requantize(acc, multiplier, shift, relu)
