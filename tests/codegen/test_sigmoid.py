"""sigmoid far below zero keeps its subnormal result natively, as the interpreter computes it
(issue: llvm and c computed 1 / (1 + exp(-x)), whose exp overflows, and flushed to 0)."""

import numpy as np
import pytest

import loom
from loom import te


@pytest.mark.parametrize("target", ["llvm", "c"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_of_large_negative_inputs_matches_the_interpreter(target, dtype):
    x = np.array([-100.0, -80.0, -745.0, -20.0, 0.0, 20.0, 100.0], dtype)
    A = te.placeholder(x.shape, name="A", dtype=dtype)
    B = te.compute(x.shape, lambda i: te.sigmoid(A[i]), name="B")
    s = te.create_schedule(B.op)
    want = np.zeros_like(x)
    loom.ir.interpret(loom.lower(s, [A, B]), x, want)
    got = np.zeros_like(x)
    loom.build(s, [A, B], target=target)(x, got)
    np.testing.assert_array_equal(got, want)
    if dtype == "float32":
        assert got[0] == np.float32(3.783506e-44)  # a subnormal, not 0
    assert got[0] > 0
