"""A 3x3 conv2d (NCHW, padding 1) whose padded input is computed per output row with
compute_at, only the three input rows that row needs. Run: python examples/conv2d.py
"""

import numpy as np

from loom import te
from loom.ops import conv2d_nchw

TITLE = "conv2d 3x3 NCHW, padding computed per output row (compute_at)"
SHAPE = (1, 8, 16, 16)
KERNEL = (16, 8, 3, 3)


def make():
    data = te.placeholder(SHAPE, name="data")
    kernel = te.placeholder(KERNEL, name="kernel")
    out = conv2d_nchw(data, kernel, stride=1, padding=1, name="conv")
    s = te.create_schedule(out.op)
    padded = out.op.input_tensors[0]
    n, f, y, x = out.op.axis
    rc, ry, rx = out.op.reduce_axis
    s[out].reorder(n, y, f, x, rc, ry, rx)
    s[padded].compute_at(s[out], y)
    return s, [data, kernel, out]


def inputs(rng):
    return [
        rng.standard_normal(SHAPE).astype(np.float32),
        rng.standard_normal(KERNEL).astype(np.float32),
        np.zeros((1, KERNEL[0], SHAPE[2], SHAPE[3]), np.float32),
    ]


def reference(data, kernel, out):
    n, c, h, w = data.shape
    padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
    result = np.zeros_like(out)
    for ry in range(3):
        for rx in range(3):
            window = padded[:, :, ry : ry + h, rx : rx + w]
            result += np.einsum("nchw,fc->nfhw", window, kernel[:, :, ry, rx])
    return [data, kernel, result]


if __name__ == "__main__":
    from loom.demo import run_example

    run_example(__import__(__name__))
