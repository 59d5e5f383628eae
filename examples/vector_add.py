"""Elementwise float32 add; one input goes through a cache stage in scope "local", computed per
block of 64 elements, and the inner loop is vectorized. Run: python examples/vector_add.py
"""

import numpy as np

from loom import te

TITLE = "float32 add, A cached per block in scope local, vectorized"
HEXAGON = True  # make demo also runs it on Hexagon v66 under qemu-hexagon
N = 4096


def make():
    A = te.placeholder((N,), name="A")
    B = te.placeholder((N,), name="B")
    C = te.compute((N,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    AL = s.cache_read(A, "local", [C])
    outer, inner = s[C].split(C.op.axis[0], factor=64)
    s[AL].compute_at(s[C], outer)
    vo, vi = s[C].split(inner, factor=16)
    s[C].vectorize(vi)
    s[AL].vectorize(s[AL].op.axis[0])
    return s, [A, B, C]


def inputs(rng):
    return [
        rng.standard_normal(N).astype(np.float32),
        rng.standard_normal(N).astype(np.float32),
        np.zeros(N, np.float32),
    ]


def reference(a, b, c):
    return [a, b, a + b]


if __name__ == "__main__":
    from loom.demo import run_example

    run_example(__import__(__name__))
