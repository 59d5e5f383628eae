"""Tensor-expression behaviour as TVM scripts rely on it, through `import loom as tvm`
(docs/tvm-compat.md, "TE behaviour"): errors are RuntimeErrors, `te.max(a, b)` and
`te.min(a, b, ...)` build the binary max and min, and `fuse()` of no axes adds TVM's singleton
loop of extent 1."""

import numpy as np
import pytest

import loom as tvm
from loom import te
from loom.errors import DeviceError, InterpreterError, LoomError, LoweringError, ScheduleError
from loom.frontend.onnx import UnsupportedModelError
from loom.graph.ir import GraphError
from loom.runtime.artifact import ArtifactError
from loom.runtime.device.protocol import ProtocolError

N = 64


def run(s, args, *arrays, target="llvm"):
    f = tvm.build(s, args, target)
    f(*arrays)


# -- errors are RuntimeErrors --------------------------------------------------------------------
LOOM_ERRORS = (
    ScheduleError,
    LoweringError,
    InterpreterError,
    DeviceError,
    ArtifactError,
    ProtocolError,
    GraphError,
    UnsupportedModelError,
)


@pytest.mark.parametrize("error", [LoomError, *LOOM_ERRORS])
def test_every_loom_error_is_a_runtime_error(error):
    assert issubclass(error, RuntimeError)
    assert issubclass(error, LoomError)
    assert not issubclass(error, ValueError | TypeError)


def test_every_subclass_of_loom_error_is_listed_above():
    # a new error class must be checked here too (and stay a RuntimeError through LoomError)
    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    listed = set(LOOM_ERRORS)
    found = {c for c in subclasses(LoomError) if c.__module__.startswith("loom.")}
    assert found <= listed, f"unlisted LoomError subclasses: {found - listed}"


def test_a_schedule_error_is_caught_as_a_runtime_error():
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: A[i] * 2, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    with pytest.raises(RuntimeError) as caught:  # as a TVM script catches TVMError
        s[B].vectorize(B.op.axis[0])  # split already: not a loop any more
    assert isinstance(caught.value, tvm.ScheduleError)
    assert "already split" in str(caught.value)


def test_a_lowering_error_is_caught_as_a_runtime_error():
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: A[i] + 1, name="B")
    C = te.compute((N,), lambda i: B[i] * 2, name="C")
    D = te.compute((N,), lambda i: B[i] - 1, name="D")
    s = te.create_schedule([C.op, D.op])
    s[B].compute_at(s[C], C.op.axis[0])  # D reads B outside C's loop
    with pytest.raises(RuntimeError, match="computed outside it"):
        tvm.lower(s, [A, C, D])


def test_a_wrong_argument_to_a_built_function_is_a_value_error_not_a_runtime_error():
    # loom differs here on purpose (docs/tvm-compat.md, "TE behaviour"): TVM's TVMError
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: A[i] + 1, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], "llvm")
    with pytest.raises(ValueError, match="argument B") as caught:
        f(np.zeros(N, "float32"), np.zeros(N - 1, "float32"))
    assert not isinstance(caught.value, RuntimeError)
    with pytest.raises(TypeError, match="argument A"):
        f(np.zeros(N, "float64"), np.zeros(N, "float32"))


# -- te.max / te.min of two expressions ----------------------------------------------------------
@pytest.mark.parametrize(
    ("te_op", "np_op"), [(te.max, np.maximum), (te.min, np.minimum)], ids=["max", "min"]
)
def test_binary_max_and_min_of_two_tensors(te_op, np_op):
    A = te.placeholder((N,), name="A")
    B = te.placeholder((N,), name="B")
    C = te.compute((N,), lambda i: te_op(A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].split(C.op.axis[0], factor=8)[1])
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(N).astype("float32") for _ in range(2))
    c = np.empty(N, "float32")
    run(s, [A, B, C], a, b, c)
    np.testing.assert_array_equal(c, np_op(a, b))


def test_relu_as_te_max_with_a_python_number():
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: te.max(A[i], 0.0), name="B")
    C = te.compute((N,), lambda i: te.min(6, B[i]), name="C")  # relu6; an int beside a float
    s = te.create_schedule(C.op)
    a = np.linspace(-10, 10, N, dtype="float32")
    c = np.empty(N, "float32")
    run(s, [A, C], a, c, target="c")
    np.testing.assert_array_equal(c, np.clip(a, 0, 6))


def test_binary_max_of_variables_is_a_max_node_not_a_reduction():
    x, y = te.var("x"), te.var("y")
    e = te.max(x, y)
    assert type(e).__name__ == "Max" and not isinstance(e, te.Reduce)
    assert str(e.dtype) == "int32"
    assert type(te.min(x, y + 1)).__name__ == "Min"
    assert te.max(3, 5).value == 5  # two constants fold, as in TVM


def test_max_and_min_still_reduce_with_an_axis():
    A = te.placeholder((8, N), name="A")
    k = te.reduce_axis((0, N), name="k")
    B = te.compute((8,), lambda i: te.max(A[i, k], axis=k), name="B")
    k2 = te.reduce_axis((0, N), name="k2")
    C = te.compute((8,), lambda i: te.min(A[i, k2], axis=k2), name="C")
    s = te.create_schedule([B.op, C.op])
    a = np.random.default_rng(1).standard_normal((8, N)).astype("float32")
    b, c = np.empty(8, "float32"), np.empty(8, "float32")
    run(s, [A, B, C], a, b, c)
    np.testing.assert_array_equal(b, a.max(axis=1))
    np.testing.assert_array_equal(c, a.min(axis=1))


def test_a_reducer_combines_two_values_in_a_custom_comm_reducer():
    # TVM's idiom: a reducer whose combiner calls te.max of two values
    absmax = te.comm_reducer(lambda x, y: te.max(te.abs(x), te.abs(y)), lambda dt: te.const(0, dt))
    A = te.placeholder((4, N), name="A")
    k = te.reduce_axis((0, N), name="k")
    B = te.compute((4,), lambda i: absmax(A[i, k], axis=k), name="B")
    a = np.random.default_rng(2).standard_normal((4, N)).astype("float32")
    b = np.empty(4, "float32")
    run(te.create_schedule(B.op), [A, B], a, b)
    np.testing.assert_array_equal(b, np.abs(a).max(axis=1))


def test_max_of_a_value_and_a_non_expression_is_refused():
    A = te.placeholder((N,), name="A")
    with pytest.raises(TypeError, match="expected a PrimExpr or a Python number"):
        te.max(A[0], "zero")
    with pytest.raises(TypeError, match="axis"):
        te.min(A[0])  # neither a second value nor an axis


def test_max_of_three_values_folds_them_left_to_right_as_tvm():
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: te.max(A[i], 0.0, A[(i + 1) % N]), name="B")
    C = te.compute((N,), lambda i: te.min(A[i], 1.0, A[(i + 1) % N], -1.0), name="C")
    s = te.create_schedule([B.op, C.op])
    a = np.random.uniform(-2, 2, N).astype("float32")
    b, c = np.empty(N, "float32"), np.empty(N, "float32")
    run(s, [A, B, C], a, b, c)
    np.testing.assert_array_equal(b, np.maximum(np.maximum(a, 0), np.roll(a, -1)))
    np.testing.assert_array_equal(c, np.minimum(np.minimum(np.minimum(a, 1), np.roll(a, -1)), -1))


# -- fuse() of no axes ---------------------------------------------------------------------------
def test_fuse_of_no_axes_adds_an_outermost_singleton_loop():
    A = te.placeholder((N, 4), name="A")
    B = te.compute((N, 4), lambda i, j: A[i, j] + 1, name="B")
    s = te.create_schedule(B.op)
    single = s[B].fuse()
    assert single.name == "singleton"
    assert [iv.name for iv in s[B].leaf_iter_vars] == ["singleton", "i", "j"]
    assert s[B].fuse([]) is not single  # another one, outermost
    a, b = np.random.rand(N, 4).astype("float32"), np.empty((N, 4), "float32")
    run(s, [A, B], a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_fuse_of_one_axis_returns_it_as_in_tvm():
    A = te.placeholder((N, 4), name="A")
    B = te.compute((N, 4), lambda i, j: A[i, j] + 1, name="B")
    s = te.create_schedule(B.op)
    i = B.op.axis[0]
    assert s[B].fuse(i) is i
    assert s[B].leaf_iter_vars == list(B.op.axis)


def test_fuse_of_no_axes_of_a_0d_stage_gives_a_loop_to_compute_at():
    A = te.placeholder((), name="A")
    B = te.compute((), lambda: A() * 2, name="B")
    T = te.compute((), lambda: B() + 1, name="T")
    s = te.create_schedule(T.op)
    loop = s[T].fuse()
    s[B].compute_at(s[T], loop)
    assert s[B].attach_ivar is loop
    a, t = np.array(2.5, "float32"), np.empty((), "float32")
    run(s, [A, T], a, t)
    assert t == 6.0


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_rfactor_as_tvm_s_reduction_tests_use_it(target):
    """A sum over a symbolic length split in 4 parts, factored into 4 partial sums computed in
    parallel, then combined (TVM's test_rfactor with parallel partials)."""
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    kf, _ = s[B].split(k, nparts=4)
    BF = s.rfactor(B, kf)
    assert int(BF.shape[0]) == 4 and len(BF.op.reduce_axis) == 1
    s[BF].parallel(BF.op.axis[0])
    f = tvm.build(s, [A, B], target)
    for length in (1, 5, 1024, 1027):
        a = np.random.uniform(size=length).astype("float32")
        b = np.zeros(1, "float32")
        f(a, b)
        np.testing.assert_allclose(b[0], a.sum(), rtol=1e-4)


def test_rfactor_with_factor_axis_puts_the_partials_last():
    n, m = 8, 64
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=16)
    BF = s.rfactor(B, ki, factor_axis=1)
    assert [int(d) for d in BF.shape] == [n, 16]
    f = tvm.build(s, [A, B], "llvm")
    a, b = np.random.rand(n, m).astype("float32"), np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5)
