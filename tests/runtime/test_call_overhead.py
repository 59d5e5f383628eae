"""The fast call path (loom/runtime/call.py, native/host/loom_call.c): a call checks its
arguments in C against the signature compiled once per function; every argument the fast checks
refuse goes to the detailed Python checks, which raise the same clear errors as before or handle
what only they handle (misaligned arrays, ndarray subclasses, numpy scalars). bench/call.py
measures what it costs."""

import threading

import numpy as np
import pytest

import loom
from loom import te
from loom.runtime import call_native

N = 4


@pytest.fixture(scope="module")
def add():
    A = te.placeholder((N,), name="A")
    B = te.placeholder((N,), name="B")
    C = te.compute((N,), lambda i: A[i] + B[i], name="C")
    return loom.build(te.create_schedule(C.op), [A, B, C], name="add")


@pytest.fixture(scope="module")
def scaled():
    """C = A * alpha + n, with a float32 and an int16 scalar."""
    A = te.placeholder((N,), name="A")
    alpha = te.var("alpha", "float32")
    n = te.var("n", "int16")
    C = te.compute((N,), lambda i: A[i] * alpha + n.astype("float32"), name="C")
    return loom.build(te.create_schedule(C.op), [A, alpha, n, C], name="scaled")


def values(seed=0):
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


def test_the_c_extension_is_built_and_used(add):
    assert call_native.unavailable() is None
    fn = add["add"]
    a, b, c = loom.nd.array(values(1)), loom.nd.array(values(2)), loom.nd.empty((N,))
    assert fn._run((a, b, c)) == 0  # checked and called in C
    np.testing.assert_array_equal(c, a + b)
    assert fn._run((a, b, c.astype(np.float64))) is None  # refused there: nothing called


def test_aligned_and_plain_numpy_arrays_give_the_same_result(add):
    fn = add["add"]
    a, b = values(1), values(2)
    for make in (loom.nd.array, np.array):
        c = make(np.zeros(N, np.float32))
        fn(make(a), make(b), c)
        np.testing.assert_array_equal(c, a + b)


def test_a_misaligned_output_is_written_back(add):
    raw = np.zeros(N + 1, np.float32)
    c = raw[1:]  # 4 bytes past an aligned start: never 64-byte aligned
    assert c.ctypes.data % 64
    a, b = values(1), values(2)
    add["add"](a, b, c)
    np.testing.assert_array_equal(c, a + b)
    assert raw[0] == 0


def test_every_error_keeps_its_message(add):
    fn = add["add"]
    a, b, c = loom.nd.array(values(1)), loom.nd.array(values(2)), loom.nd.empty((N,))
    with pytest.raises(TypeError, match=r"add: argument A must have dtype float32, got float64"):
        fn(a.astype(np.float64), b, c)
    with pytest.raises(TypeError, match=r"add: argument B must have dtype float32, got >f4"):
        fn(a, b.astype(">f4"), c)
    with pytest.raises(ValueError, match=r"add: argument B must have shape \(4,\), got \(2, 2\)"):
        fn(a, b.reshape(2, 2), c)
    with pytest.raises(ValueError, match=r"argument C is not C-contiguous"):
        fn(a, b, np.zeros(2 * N, np.float32)[::2])
    with pytest.raises(
        TypeError, match=r"argument A must be a numpy array of float32\[4\], got list"
    ):
        fn([1.0, 2.0, 3.0, 4.0], b, c)
    with pytest.raises(
        TypeError, match=r"add\(A: float32\[4\], B: float32\[4\], C: float32\[4\]\) "
    ):
        fn(a, b)
    with pytest.raises(TypeError, match=r"takes 3 arguments, got 4"):
        fn(a, b, c, c)
    with pytest.raises(ValueError, match=r"arguments B and C share memory, but one is written"):
        fn(a, c, c)
    with pytest.raises(ValueError, match=r"arguments A and C share memory"):
        whole = loom.nd.empty((2 * N,))
        fn(whole[:N], b, whole[N // 2 : N // 2 + N])  # overlapping, not identical


def test_read_only_arrays(add):
    fn = add["add"]
    a, b, c = loom.nd.array(values(1)), loom.nd.array(values(2)), loom.nd.empty((N,))
    c.flags.writeable = False
    with pytest.raises(
        ValueError, match=r"argument C is written by add but the array is read-only"
    ):
        fn(a, b, c)
    a.flags.writeable = False  # a read-only input is fine, and one array may be two inputs
    out = loom.nd.empty((N,))
    fn(a, a, out)
    np.testing.assert_array_equal(out, a + a)


def test_what_only_the_python_path_accepts_still_works(add):
    fn = add["add"]
    a, b = values(1), values(2)

    class Tagged(np.ndarray):
        pass

    out = loom.nd.empty((N,)).view(Tagged)  # a subclass of ndarray
    fn(a, b, out)
    np.testing.assert_array_equal(out, a + b)


def test_a_call_releases_its_arrays(add):
    """A call exports its arrays (each export holds a reference) until the kernel returns; after
    it nothing refers to them, so numpy may resize one (its reference check passes)."""
    a, b = values(1), values(2)
    c = np.zeros(N, np.float32)
    add["add"](a, b, c)
    c.resize(2 * N)
    assert c.shape == (2 * N,)
    held = memoryview(c)  # the check itself can fail: an export refuses the resize
    with pytest.raises(ValueError, match=r"cannot resize"):
        c.resize(3 * N)
    del held


def test_scalars(scaled):
    fn = scaled["scaled"]
    a = loom.nd.array(values(3))
    c = loom.nd.empty((N,))
    fn(a, 2.5, -3, c)
    np.testing.assert_allclose(c, a * np.float32(2.5) - 3, rtol=1e-6)
    fn(a, 2, np.int16(7), c)  # an int for a float; a numpy scalar takes the Python path
    np.testing.assert_allclose(c, a * 2 + 7, rtol=1e-6)
    fn(a, np.float32(0.5), 32767, c)
    np.testing.assert_allclose(c, a * np.float32(0.5) + 32767, rtol=1e-6)
    with pytest.raises(ValueError, match=r"scaled: argument n: 32768 does not fit in int16"):
        fn(a, 1.0, 32768, c)
    with pytest.raises(ValueError, match=r"argument n: -32769 does not fit in int16"):
        fn(a, 1.0, -32769, c)
    with pytest.raises(TypeError, match=r"argument n must be an int \(int16\), got 1.5"):
        fn(a, 1.0, 1.5, c)
    with pytest.raises(TypeError, match=r"argument n must be an int \(int16\), got True"):
        fn(a, 1.0, True, c)
    with pytest.raises(TypeError, match=r"argument alpha must be a number \(float32\), got True"):
        fn(a, True, 1, c)
    with pytest.raises(TypeError, match=r"argument alpha must be a number \(float32\), got 'x'"):
        fn(a, "x", 1, c)


def test_a_signature_longer_than_the_stack_arrays():
    """More arguments than the C path keeps on its stack (16)."""
    inputs = [te.placeholder((N,), name=f"X{k}", dtype="int32") for k in range(19)]

    def total(i):
        acc = inputs[0][i]
        for x in inputs[1:]:
            acc = acc + x[i]
        return acc

    S = te.compute((N,), total, name="S")
    mod = loom.build(te.create_schedule(S.op), [*inputs, S], name="many")
    xs = [np.full(N, k, np.int32) for k in range(19)]
    s = loom.nd.empty((N,), "int32")
    mod["many"](*xs, s)
    np.testing.assert_array_equal(s, np.full(N, sum(range(19))))
    assert mod["many"]._run((*[loom.nd.array(x) for x in xs], s)) == 0
    with pytest.raises(TypeError, match=r"argument X18 must have dtype int32, got float32"):
        mod["many"](*xs[:-1], xs[-1].astype(np.float32), s)


def test_concurrent_calls_from_several_threads(add):
    """Each call builds its argument vector on its own stack: threads share nothing."""
    fn = add["add"]
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(300):
                a = rng.standard_normal(N).astype(np.float32)
                b = rng.standard_normal(N).astype(np.float32)
                c = loom.nd.empty((N,)) if seed % 2 else np.empty(N, np.float32)
                fn(a, b, c)
                np.testing.assert_array_equal(c, a + b)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_a_failing_kernel_still_raises_its_error():
    A = te.placeholder((N,), name="A", dtype="int32")
    B = te.placeholder((N,), name="B", dtype="int32")
    C = te.compute((N,), lambda i: A[i] // B[i], name="C")
    fn = loom.build(te.create_schedule(C.op), [A, B, C], name="div")["div"]
    a, c = loom.nd.array(np.array([6, 4, 2, 0], np.int32)), loom.nd.empty((N,), "int32")
    with pytest.raises(loom.LoomError, match=r"div failed .*integer division by zero in div"):
        fn(a, loom.nd.array(np.array([1, 0, 1, 1], np.int32)), c)
    fn(a, loom.nd.array(np.array([2, 2, 2, 2], np.int32)), c)
    np.testing.assert_array_equal(c, [3, 2, 1, 0])


def test_large_misaligned_arrays_are_copied_in_and_written_back():
    """Copies larger than the C path's stack scratch (4 KiB) take one allocation."""
    n = 4096
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i] * 2.0, name="C")
    fn = loom.build(te.create_schedule(C.op), [A, C], name="twice")["twice"]
    raw_a, raw_c = np.zeros(n + 1, np.float32), np.zeros(n + 1, np.float32)
    a, c = raw_a[1:], raw_c[1:]
    a[:] = np.arange(n)
    fn(a, c)
    np.testing.assert_array_equal(c, 2 * np.arange(n, dtype=np.float32))
    assert raw_c[0] == 0


def test_model_calls_from_several_threads_keep_their_own_pools():
    pytest.importorskip("onnx")
    from tests.graph.test_compile import small_cnn

    model = loom.compile(small_cnn())
    assert model.info.caller_pools and model.info.caller_pools[0]["buffers"] > 0
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((2, 3, 8, 8)).astype(np.float32) for _ in range(4)]
    expected = [model(x)["y"] for x in xs]
    assert model._pools() is model._pools()  # kept across calls of one thread
    results: dict[int, list] = {}
    pools: dict[int, np.ndarray] = {}  # kept alive here, so their ids cannot repeat

    def work(k):
        results[k] = [model(xs[k])["y"] for _ in range(20)]
        pools[k] = model._pools()[0]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        for got in results[k]:
            np.testing.assert_array_equal(got, expected[k])
    assert len({id(p) for p in pools.values()}) == 4  # one pool per thread
    out = model(x=xs[0])["y"]  # keywords, and outputs aligned as main requires
    assert out.ctypes.data % model.info.alignment == 0
    with pytest.raises(ValueError, match=r"input 'x' must be float32\[2, 3, 8, 8\], got float64"):
        model(xs[0].astype(np.float64))
    with pytest.raises(TypeError, match=r"missing inputs \['x'\]"):
        model()
    strided = np.zeros((2, 3, 8, 16), np.float32)[..., ::2]
    strided[...] = xs[1]  # a strided view is made contiguous, as before
    np.testing.assert_array_equal(model(strided)["y"], expected[1])
