"""Symbolic shapes end to end, in TVM's style (issue 18): a kernel built once for `n` runs for
any `n` on llvm and c (and Hexagon: tests/hexagon/test_hexagon_symbolic.py); the shape variables
are bound from the arguments at call time, and arguments that disagree are refused naming the
variable."""

import numpy as np
import pytest

import loom as tvm
from loom import te
from loom.ir.interpret import interpret
from tests.runtime.test_export import run_in_new_process

TARGETS = ["llvm", "c"]


def _acceptance_schedule():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: A[i] * 2 + 1, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].vectorize(xi)
    s[B].parallel(xo)
    return s, A, B


@pytest.mark.parametrize("target", TARGETS)
def test_built_once_runs_for_every_n_and_a_wrong_length_names_n(target):
    s, A, B = _acceptance_schedule()
    f = tvm.build(s, [A, B], target)
    dev = tvm.cpu(0)
    for n in (1, 3, 1000, 1025, 0):
        a = tvm.nd.array(np.random.uniform(size=n).astype(A.dtype), dev)
        b = tvm.nd.array(np.full(n, -7, dtype=B.dtype), dev)
        f(a, b)
        np.testing.assert_array_equal(b.numpy(), a.numpy() * 2 + 1)
    with pytest.raises(
        ValueError,
        match=r"main: argument B must have shape \[n\] = \[5\] \(n = 5 from the dimension 0 "
        r"of argument A\), got \(4,\)",
    ):
        f(np.zeros(5, "float32"), np.zeros(4, "float32"))
    with pytest.raises(ValueError, match=r"argument A must have 1 dimensions \[n\], got"):
        f(np.zeros((2, 2), "float32"), np.zeros(4, "float32"))


def test_the_signature_names_the_shape_variables_and_takes_only_the_arguments():
    s, A, B = _acceptance_schedule()
    f = tvm.build(s, [A, B], "llvm")
    assert f["main"].signature.describe() == "main(A: float32[n], B: float32[n])"
    with pytest.raises(TypeError, match=r"takes 2 arguments, got 3"):
        f(np.zeros(4, "float32"), np.zeros(4, "float32"), 4)


def test_the_lowered_function_takes_n_after_its_arguments():
    s, A, B = _acceptance_schedule()
    (func,) = list(tvm.lower(s, [A, B]))
    assert [p.name for p in func.params] == ["A", "B", "n"]
    assert func.attr("shape_params") == 1


@pytest.mark.parametrize("target", TARGETS)
def test_two_shape_variables_a_reduction_and_an_intermediate_of_symbolic_size(target):
    n, m = te.var("n"), te.size_var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    row = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="row")
    C = te.compute((n, m), lambda i, j: A[i, j] - row[i], name="C")
    s = te.create_schedule(C.op)
    _, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].vectorize(ji)
    f = tvm.build(s, [A, C], target)
    lowered = tvm.lower(s, [A, C])
    for rows, cols in ((1, 1), (3, 5), (7, 33), (64, 100)):
        a = np.random.rand(rows, cols).astype("float32")
        expected = a - a.sum(axis=1, keepdims=True)
        c = np.empty_like(a)
        f(a, c)
        np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5)
        c[...] = np.nan
        interpret(lowered, a, c)  # the reference interpreter binds n and m the same way
        np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"argument C must have shape \[n, m\] = \[2, 3\]"):
        f(np.zeros((2, 3), "float32"), np.zeros((2, 4), "float32"))
    with pytest.raises(ValueError, match=r"argument 'C' of main must have shape \(n, m\)"):
        interpret(lowered, np.zeros((2, 3), "float32"), np.zeros((2, 4), "float32"))


@pytest.mark.parametrize("target", TARGETS)
def test_a_compound_dimension_takes_its_variable_as_a_scalar_argument(target):
    n = te.var("n")
    A = te.placeholder((n * 4,), name="A")
    B = te.compute(A.shape, lambda i: A[i] + 1, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].split(B.op.axis[0], factor=4)[1])
    f = tvm.build(s, [n, A, B], target)
    for count in (0, 1, 5):
        a = np.random.rand(4 * count).astype("float32")
        b = np.empty_like(a)
        f(count, a, b)
        np.testing.assert_array_equal(b, a + 1)
    with pytest.raises(
        ValueError,
        match=r"argument A must have shape \[n \* 4\] = \[8\] \(n = 2 from the argument n\)",
    ):
        f(2, np.zeros(12, "float32"), np.zeros(12, "float32"))
    with pytest.raises(tvm.LoweringError, match=r"not in the argument list"):
        tvm.build(s, [A, B], target)


def test_a_shape_variable_given_as_an_argument_must_agree_with_the_arrays():
    m = te.var("m")
    C = te.placeholder((m,), name="C")
    D = te.compute((m,), lambda i: C[i] * 2, name="D")
    f = tvm.build(te.create_schedule(D.op), [C, D, m], "llvm")
    c, d = np.arange(6, dtype="float32"), np.empty(6, "float32")
    f(c, d, 6)
    np.testing.assert_array_equal(d, c * 2)
    with pytest.raises(ValueError, match=r"\[m\] = \[5\] \(m = 5 from the argument m\)"):
        f(c, d, 5)


@pytest.mark.parametrize(
    "n, match",
    [
        (te.var("n", "int8"), r"shape variable n of argument A is int8; shape variables must"),
        (te.var("n.x"), r"shape variable n.x of argument A: its name must be a Python identifier"),
        (te.var("max"), r"other than a keyword, min or max"),
    ],
    ids=["int8", "dotted", "max"],
)
def test_a_shape_variable_narrower_than_int32_or_not_an_identifier_is_refused(n, match):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1, name="B")
    with pytest.raises(tvm.LoweringError, match=match):
        tvm.build(te.create_schedule(B.op), [A, B], "llvm")


def test_an_int64_and_an_int32_variable_in_one_dimension():
    n, m = te.var("n", "int64"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n * m,), lambda i: A[i // m, i % m] * 2, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], "llvm")
    assert f["main"].signature.describe() == "main(A: float32[n, m], B: float32[n * m])"
    a = np.random.rand(3, 5).astype("float32")
    b = np.empty(15, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a.reshape(-1) * 2)


def test_a_compound_dimension_that_does_not_fit_its_dtype_is_refused():
    n = te.var("n")
    A = te.placeholder((n * 4,), name="A")
    B = te.compute(A.shape, lambda i: A[i] + 1, name="B")
    f = tvm.build(te.create_schedule(B.op), [n, A, B], "llvm")
    # 2**29 * 4 does not fit int32: the kernel's extent would wrap (checked before any array)
    with pytest.raises(ValueError, match=r"dimension n \* 4 = 2147483648 \(n = 536870912\)"):
        f(2**29, np.zeros(0, "float32"), np.zeros(0, "float32"))


def test_a_shape_variable_named_like_an_argument_is_refused():
    n = te.var("A")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i], name="B")
    with pytest.raises(tvm.LoweringError, match=r"shape variable A of argument A has the name"):
        tvm.build(te.create_schedule(B.op), [A, B], "llvm")


@pytest.mark.parametrize("target", TARGETS)
def test_a_symbolic_kernel_exported_loads_and_runs_in_a_new_process(tmp_path, target):
    s, A, B = _acceptance_schedule()
    path = tmp_path / "symbolic.so"
    tvm.build(s, [A, B], target, name="twice").export_library(path)
    code = f"""
import numpy as np, loom
f = loom.runtime.load_module({str(path)!r})["twice"]
for n in (3, 1025):
    a = np.arange(n, dtype="float32"); b = np.empty(n, "float32")
    f(a, b)
    assert (b == a * 2 + 1).all()
try:
    f(np.zeros(3, "float32"), np.zeros(2, "float32"))
except ValueError as e:
    print(e)
"""
    assert run_in_new_process(code).strip() == (
        "twice: argument B must have shape [n] = [3] (n = 3 from the dimension 0 of argument A), "
        "got (2,)"
    )
