"""Calling compiled functions: every argument is checked before the call, run-time errors
become Python exceptions, and nothing crashes the process."""

import numpy as np
import pytest

import loom
from loom import LoomError, te


@pytest.fixture(scope="module")
def axpy():
    A = te.placeholder((16, 8), name="A")
    B = te.placeholder((16, 8), name="B")
    alpha = te.var("alpha", "float32")
    C = te.compute((16, 8), lambda i, j: A[i, j] * alpha + B[i, j], name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    return loom.build(s, [A, B, alpha, C], name="axpy")


def arrays():
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((16, 8)).astype(np.float32),
        rng.standard_normal((16, 8)).astype(np.float32),
        np.zeros((16, 8), np.float32),
    )


def test_call_with_scalar(axpy):
    a, b, c = arrays()
    axpy["axpy"](a, b, 3.0, c)
    np.testing.assert_allclose(c, a * np.float32(3) + b, rtol=1e-6)
    axpy(a, b, 2, c)  # a module with one function is callable; an int converts to float32
    np.testing.assert_allclose(c, a * np.float32(2) + b, rtol=1e-6)


def test_wrong_dtype(axpy):
    a, b, c = arrays()
    with pytest.raises(TypeError, match=r"axpy: argument A must have dtype float32, got float64"):
        axpy["axpy"](a.astype(np.float64), b, 1.0, c)


def test_wrong_shape(axpy):
    a, b, c = arrays()
    with pytest.raises(ValueError, match=r"argument B must have shape \(16, 8\), got \(8, 16\)"):
        axpy["axpy"](a, b.reshape(8, 16), 1.0, c)


def test_non_contiguous_view(axpy):
    a, b, c = arrays()
    wide = np.zeros((16, 16), np.float32)
    with pytest.raises(ValueError, match=r"argument C is not C-contiguous"):
        axpy["axpy"](a, b, 1.0, wide[:, ::2])


def test_too_few_arguments(axpy):
    a, b, _ = arrays()
    with pytest.raises(
        TypeError,
        match=r"axpy\(A: float32\[16, 8\], B: float32\[16, 8\], alpha: "
        r"float32, C: float32\[16, 8\]\) takes 4 arguments, got 3",
    ):
        axpy["axpy"](a, b, 1.0)


def test_read_only_output(axpy):
    a, b, c = arrays()
    c.flags.writeable = False
    with pytest.raises(
        ValueError,
        match=r"argument C is written by axpy but the array is "
        r"read-only",
    ):
        axpy["axpy"](a, b, 1.0, c)
    a.flags.writeable = False  # a read-only input is fine
    axpy["axpy"](a, b, 1.0, np.zeros((16, 8), np.float32))


def test_wrong_scalar_and_non_array(axpy):
    a, b, c = arrays()
    with pytest.raises(TypeError, match=r"argument alpha must be a number \(float32\)"):
        axpy["axpy"](a, b, "x", c)
    with pytest.raises(TypeError, match=r"argument A must be a numpy array"):
        axpy["axpy"]([1, 2], b, 1.0, c)


def test_output_sharing_memory_with_input_is_refused(axpy):
    a, b, _ = arrays()
    with pytest.raises(ValueError, match=r"arguments B and C share memory"):
        axpy["axpy"](a, b, 1.0, b)


def test_misaligned_arrays_are_copied_and_written_back(axpy):
    a, b, _ = arrays()
    raw = np.zeros(16 * 8 + 1, np.float32)
    c = raw[1:].reshape(16, 8)  # 4 bytes past an aligned start: not 64-byte aligned
    assert c.ctypes.data % 64
    axpy["axpy"](a, b, 1.0, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    assert axpy.signatures["axpy"].params[0].alignment == loom.target.Target("llvm").alignment


def test_aligned_arrays():
    x = loom.nd.array(np.arange(10, dtype=np.int16), alignment=128)
    assert x.ctypes.data % 128 == 0 and x.dtype == np.int16
    y = loom.nd.empty((3, 5), "float32")
    assert y.ctypes.data % 64 == 0 and y.shape == (3, 5)


def test_runtime_error_becomes_exception_with_last_error():
    A = te.placeholder((4,), name="A", dtype="int32")
    B = te.placeholder((4,), name="B", dtype="int32")
    C = te.compute((4,), lambda i: A[i] // B[i], name="C")
    mod = loom.build(te.create_schedule(C.op), [A, B, C], name="div")
    a = np.array([7, -7, 9, 1], np.int32)
    c = np.zeros(4, np.int32)
    mod["div"](a, np.array([2, 2, -4, 1], np.int32), c)
    np.testing.assert_array_equal(c, a // np.array([2, 2, -4, 1]))
    with pytest.raises(LoomError, match=r"div failed .*integer division by zero in div"):
        mod["div"](a, np.array([1, 0, 1, 1], np.int32), c)
    mod["div"](a, np.array([1, 1, 1, 1], np.int32), c)  # the module still works afterwards
    np.testing.assert_array_equal(c, a)


def test_int_min_divided_by_minus_one_wraps():
    A = te.placeholder((2,), name="A", dtype="int32")
    B = te.placeholder((2,), name="B", dtype="int32")
    C = te.compute((2,), lambda i: A[i] // B[i] + A[i] % B[i], name="C")
    mod = loom.build(te.create_schedule(C.op), [A, B, C], name="f")
    c = np.zeros(2, np.int32)
    mod["f"](np.array([-(2**31), 5], np.int32), np.array([-1, -1], np.int32), c)
    np.testing.assert_array_equal(c, [-(2**31), -5])


def test_get_source_and_time_evaluator(axpy):
    import re

    assert re.search(r"define .*i32 @axpy\(ptr", axpy.get_source("ll"))
    assert "axpy:" in axpy.get_source("asm")
    with pytest.raises(LoomError, match=r"no 'cuda' source"):
        axpy.get_source("cuda")
    a, b, c = arrays()
    result = axpy.time_evaluator("axpy", number=5, repeat=3)(a, b, 1.0, c)
    assert len(result.results) == 3 and 0 < result.median < 1 and result.std >= 0
    with pytest.raises(LoomError, match=r"module has no function 'nope'"):
        axpy["nope"]
