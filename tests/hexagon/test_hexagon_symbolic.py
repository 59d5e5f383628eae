"""A kernel with a symbolic shape built once for Hexagon runs under qemu-hexagon for any n, with
n bound from the arguments on the host side of the call, as on the CPU
(tests/tvm_compat/test_symbolic_shapes.py)."""

import numpy as np
import pytest

import loom
from loom import te
from loom.target import hexagon


def test_an_hvx_kernel_of_symbolic_length_runs_for_every_length(dev):
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype="int16")
    B = te.compute((n,), lambda i: A[i] * 3 + 1, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].split(B.op.axis[0], factor=64)[1])
    f = loom.build(s, [A, B], hexagon("v66"), name="affine").to_device(dev)["affine"]
    for length in (1, 3, 64, 1000, 1025):
        a = np.arange(length, dtype="int16")
        b = np.full(length, -1, "int16")
        f(a, b)
        np.testing.assert_array_equal(b, a * 3 + 1)
    on_device = loom.nd.empty(7, "int16", device=dev)  # a device array: checked the same way
    with pytest.raises(ValueError, match=r"argument B must have shape \[n\] = \[5\] \(n = 5"):
        f(np.zeros(5, "int16"), on_device)
