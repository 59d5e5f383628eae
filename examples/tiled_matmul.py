"""A tiled float32 matmul: output tiles of 32x32, the reduction split by 4, a local accumulator
(cache_write) computed per tile, the inner loop vectorized and the tile rows run in parallel.
Run: python examples/tiled_matmul.py
"""

import numpy as np

from loom import te

TITLE = "tiled float32 matmul (tile, reorder, cache_write, vectorize, parallel)"
M = N = K = 128


def make():
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis(K, name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 32, 32)
    s[C].parallel(io)
    s[C].vectorize(ji)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(ck, factor=4)
    s[CL].reorder(ko, ci, ki, cj)
    s[CL].unroll(ki)
    s[CL].vectorize(cj)
    return s, [A, B, C]


def inputs(rng):
    return [
        rng.standard_normal((M, K)).astype(np.float32),
        rng.standard_normal((K, N)).astype(np.float32),
        np.zeros((M, N), np.float32),
    ]


def reference(a, b, c):
    return [a, b, a @ b]


def numpy_fast(a, b, c):
    np.matmul(a, b, out=c)


if __name__ == "__main__":
    from loom.demo import run_example

    run_example(__import__(__name__))
