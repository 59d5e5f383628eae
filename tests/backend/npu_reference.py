"""numpy integer references of the NPU operators, written from docs/npu.md."""

import numpy as np


def round_shift(v: np.ndarray, shift: int, rounding: str = "half_up") -> np.ndarray:
    """v / 2^shift (int64, exact) rounded to the nearest integer, halves up or to even."""
    if shift == 0:
        return v
    floor, rest = v >> shift, v & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    if rounding == "half_up":
        up = rest >= half
    elif rounding == "half_even":
        up = (rest > half) | ((rest == half) & (floor % 2 == 1))
    else:
        raise ValueError(f"rounding must be 'half_up' or 'half_even', got {rounding!r}")
    return floor + up


def requantize(
    acc: np.ndarray, multiplier: int, shift: int, relu: bool, rounding: str = "half_up"
) -> np.ndarray:
    x = np.asarray(acc).astype(np.int32).astype(np.int64)  # the accumulator wraps at int32
    y = np.clip(round_shift(x * multiplier, shift, rounding), -128, 127)
    return (np.maximum(y, 0) if relu else y).astype(np.int8)


def matmul(a, b, bias, multiplier, shift, relu, rounding="half_up"):
    acc = a.astype(np.int64) @ b.astype(np.int64) + bias
    return requantize(acc, multiplier, shift, relu, rounding)


def conv2d_nhwc(x, w, bias, stride, padding, multiplier, shift, relu, rounding="half_up"):
    n, h, wd, c = x.shape
    kh, kw, _, f = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (padding,) * 2, (padding,) * 2, (0, 0)))
    oh, ow = (h + 2 * padding - kh) // stride + 1, (wd + 2 * padding - kw) // stride + 1
    acc = np.zeros((n, oh, ow, f), np.int64) + bias
    for ry in range(kh):
        for rx in range(kw):
            win = xp[:, ry : ry + stride * oh : stride, rx : rx + stride * ow : stride, :]
            acc += np.einsum("nhwc,cf->nhwf", win, w[ry, rx].astype(np.int64))
    return requantize(acc, multiplier, shift, relu, rounding)
