"""Programs several test files share."""

import numpy as np

from loom import te

# where tests place the example accelerator's scratchpad (loom.runtime.scratchpad_emu)
SCRATCHPAD_BASE = 0x4000_0000


def seed_program():
    """The VTCM question's program: two int8 inputs copied into `local.vtcm`, then added."""
    A = te.placeholder((2048,), name="A", dtype="int8")
    B = te.placeholder((2048,), name="B", dtype="int8")
    A_buf = te.compute((2048,), lambda *i: A(*i), "A_buf")
    B_buf = te.compute((2048,), lambda *i: B(*i), "B_buf")
    C = te.compute((2048,), lambda *i: A_buf(*i) + B_buf(*i), name="C")
    s = te.create_schedule(C.op)
    s[A_buf].set_scope("local.vtcm")
    s[B_buf].set_scope("local.vtcm")
    return s, [A, B, C]


def seed_inputs():
    """(a, b, expected c) for the seed program; the sum wraps like int8 does."""
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, 2048).astype(np.int8)
    b = rng.integers(-128, 128, 2048).astype(np.int8)
    return a, b, (a.astype(np.int16) + b).astype(np.int8)
