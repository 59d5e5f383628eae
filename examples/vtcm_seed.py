"""The seed program of the VTCM question: two inputs copied into `local.vtcm`, then added.

In TVM the lowered program allocates both copies in VTCM; building it leaves the symbols
HexagonBackendAllocateVTCM / HexagonBackendFreeVTCM undefined. Run: python examples/vtcm_seed.py
"""

import numpy as np

from loom import te

TITLE = "int8 add with two local.vtcm copies (the VTCM question's program)"
HEXAGON = True  # make demo also runs it on Hexagon v66 under qemu-hexagon


def make():
    A = te.placeholder((2048,), name="A", dtype="int8")
    B = te.placeholder((2048,), name="B", dtype="int8")
    A_buf = te.compute((2048,), lambda *i: A(*i), "A_buf")
    B_buf = te.compute((2048,), lambda *i: B(*i), "B_buf")
    C = te.compute((2048,), lambda *i: A_buf(*i) + B_buf(*i), name="C")
    s = te.create_schedule(C.op)
    s[A_buf].set_scope("local.vtcm")
    s[B_buf].set_scope("local.vtcm")
    return s, [A, B, C]


def inputs(rng):
    a = rng.integers(-128, 128, 2048, dtype=np.int8)
    b = rng.integers(-128, 128, 2048, dtype=np.int8)
    return [a, b, np.zeros(2048, np.int8)]


def reference(a, b, c):
    return [a, b, (a.astype(np.int16) + b).astype(np.int8)]


if __name__ == "__main__":
    from loom.demo import run_example

    run_example(__import__(__name__))
