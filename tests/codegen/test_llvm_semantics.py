"""Corner cases where native code must still follow loom/ir/semantics.py exactly, checked
against the reference interpreter on both code generators."""

import numpy as np
import pytest

import loom
from loom import te

TARGETS = ["llvm", "c"]


def run_both(sch_args, inputs, target):
    sch, args = sch_args
    lowered = loom.lower(sch, args, name="k")
    expected = [a.copy() for a in inputs]
    loom.ir.interpret(lowered, *expected)
    got = [a.copy() for a in inputs]
    loom.build(lowered, target=target)["k"](*got)
    return got[-1], expected[-1]


def binary(fn, dtype="float32"):
    A = te.placeholder((8,), name="A", dtype=dtype)
    B = te.placeholder((8,), name="B", dtype=dtype)
    C = te.compute((8,), lambda i: fn(A[i], B[i]), name="C")
    return te.create_schedule(C.op), [A, B, C]


@pytest.mark.parametrize("target", TARGETS)
def test_float_min_max_propagate_nan_as_the_semantics_say(target):
    nan, inf = np.nan, np.inf
    a = np.array([nan, 1, nan, -0.0, 2, -inf, 3, nan], np.float32)
    b = np.array([1, nan, nan, 0.0, 2, inf, -1, -inf], np.float32)
    for fn in (loom.ir.op.min_, loom.ir.op.max_):
        got, want = run_both(binary(fn), [a, b, np.zeros(8, np.float32)], target)
        np.testing.assert_array_equal(got, want)  # NaNs in the same places, same signs


@pytest.mark.parametrize("target", TARGETS)
def test_float_floor_division_uses_a_double_quotient(target):
    # 0.3 / 0.1 is 2.9999999... in double, but rounds to 3.0 as a float32 quotient
    a = np.array([0.3, 7.0, -7.0, 1e-30, 5.5, -0.0, 1.0, 3.0], np.float32)
    b = np.array([0.1, 2.0, 2.0, 3e-31, -1.5, 2.0, 3.0, 0.1], np.float32)
    for fn in (lambda x, y: x // y, lambda x, y: x % y):
        got, want = run_both(binary(fn), [a, b, np.zeros(8, np.float32)], target)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("target", TARGETS)
def test_sine_and_cosine_together(target):
    A = te.placeholder((16,), name="A")
    B = te.compute(
        (16,),
        lambda i: loom.ir.op.math_call("sin", A[i]) + loom.ir.op.math_call("cos", A[i]),
        name="B",
    )
    a = np.linspace(-3, 3, 16, dtype=np.float32)
    got, want = run_both((te.create_schedule(B.op), [A, B]), [a, np.zeros(16, np.float32)], target)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_float16_erf():
    A = te.placeholder((8,), name="A", dtype="float16")
    B = te.compute((8,), lambda i: te.erf(A[i]), name="B")
    a = np.linspace(-2, 2, 8).astype(np.float16)
    got, want = run_both((te.create_schedule(B.op), [A, B]), [a, np.zeros(8, np.float16)], "llvm")
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=1e-3)
