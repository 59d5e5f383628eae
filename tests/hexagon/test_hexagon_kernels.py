"""Kernels built for Hexagon v66 run under qemu-hexagon and match numpy: integer kernels with
HVX-vectorized schedules (whose assembly has HVX instructions), float32 kernels as scalar
code."""

import re

import numpy as np
import pytest

import loom
from loom.backend.hexagon import strategies as hx

from .conftest import requires_hexagon

pytestmark = requires_hexagon
TARGET = loom.target.hexagon("v66")
HVX = re.compile(r"\bv\d+(:\d+)?\b.*=|vmem\(")  # an HVX register written, or a vector load/store


def run(dev, sch_args, arrays, name="k"):
    mod = loom.build(*sch_args, target=TARGET, name=name)
    loaded = mod.to_device(dev)
    loaded[name](*arrays)
    return mod


def rand(shape, dtype, low=-50, high=50, seed=0):
    return np.random.default_rng(seed).integers(low, high, shape).astype(dtype)


def assert_hvx(mod):
    asm = mod.get_source("asm")
    assert HVX.search(asm), "no HVX instruction in the vectorized kernel"


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32"])
def test_elementwise_hvx(dev, dtype):
    n = 512
    a, b = rand(n, dtype), rand(n, dtype, seed=1)
    out = np.zeros(n, dtype)
    sch = hx.elementwise(lambda x, y: x * y + x, (n,), 2, dtype, TARGET)
    mod = run(dev, sch, [a, b, out])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, (a * b + a).astype(dtype))
    assert_hvx(mod)


@pytest.mark.parametrize("dtype,acc", [("int8", "int32"), ("int16", "int32"), ("int32", "int32")])
def test_column_sum_hvx(dev, dtype, acc):
    x = rand((16, 64), dtype)
    out = np.zeros(64, acc)
    mod = run(dev, hx.column_sum(16, 64, dtype, acc, TARGET), [x, out])
    np.testing.assert_array_equal(out, x.astype(acc).sum(0))
    assert_hvx(mod)


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_matmul_hvx(dev, dtype):
    m, n, k = 8, 64, 32
    a, b = rand((m, k), dtype), rand((k, n), dtype, seed=2)
    c = np.zeros((m, n), np.int32)
    mod = run(dev, hx.matmul(m, n, k, dtype, "int32", TARGET), [a, b, c])
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    assert_hvx(mod)


def test_conv2d_hvx(dev):
    data = rand((1, 3, 6, 64), "int8", -20, 20)
    kernel = rand((4, 3, 3, 3), "int8", -5, 5, seed=3)
    out = np.zeros((1, 4, 6, 64), np.int32)
    mod = run(
        dev,
        hx.conv2d_nchw(data.shape, kernel.shape, "int8", "int32", TARGET, padding=1),
        [data, kernel, out],
    )
    padded = np.pad(data.astype(np.int32), ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected = np.zeros_like(out)
    for ry in range(3):
        for rx in range(3):
            expected += np.einsum(
                "nchw,fc->nfhw",
                padded[:, :, ry : ry + 6, rx : rx + 64],
                kernel[:, :, ry, rx].astype(np.int32),
            )
    np.testing.assert_array_equal(out, expected)
    assert_hvx(mod)


def test_float32_kernels_scalar(dev):
    n = 96
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    b = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    run(
        dev,
        hx.elementwise(
            lambda x, y: x * y - x / (y * y + 1.0), (n,), 2, "float32", TARGET, vectorize=False
        ),
        [a, b, out],
    )
    np.testing.assert_allclose(out, a * b - a / (b * b + np.float32(1)), rtol=1e-6)
    m = 12
    x, w = (np.random.default_rng(s).standard_normal((m, m)).astype(np.float32) for s in (2, 3))
    c = np.zeros((m, m), np.float32)
    run(dev, hx.matmul(m, m, m, "float32", "float32", TARGET, vectorize=False), [x, w, c])
    np.testing.assert_allclose(c, x @ w, rtol=1e-5, atol=1e-5)


def test_reduction_over_rows_with_integer_division(dev):
    from loom import te

    X = te.placeholder((8, 40), name="X", dtype="int32")
    k = te.reduce_axis(40, "k")
    R = te.compute((8,), lambda i: te.sum(X[i, k] // 3 + X[i, k] % 7, axis=k), name="R")
    x = rand((8, 40), "int32", -1000, 1000)
    r = np.zeros(8, np.int32)
    run(dev, (te.create_schedule(R.op), [X, R]), [x, r])
    np.testing.assert_array_equal(r, (x // 3 + x % 7).sum(1))


@pytest.mark.parametrize("dtype,n", [("int8", 128), ("int8", 32), ("int16", 64), ("int32", 32)])
def test_guarded_vector_loads_never_touch_masked_off_lanes(dev, dtype, n):
    """A shifted read with padding, vectorized: its first lane lies before the buffer. On
    Hexagon a masked vector load would read whole aligned vectors there."""
    from loom import te

    A = te.placeholder((n,), name="A", dtype=dtype)
    P = te.compute(
        (n,),
        lambda i: te.if_then_else(te.all(i >= 1, i < n - 2), A[i - 1], te.const(0, dtype)),
        name="P",
    )
    s = te.create_schedule(P.op)
    s[P].vectorize(P.op.axis[0])
    a = (np.arange(n) % 100 + 1).astype(dtype)
    p = np.zeros(n, dtype)
    run(dev, (s, [A, P]), [a, p])
    expected = np.array([a[i - 1] if 1 <= i < n - 2 else 0 for i in range(n)], dtype)
    np.testing.assert_array_equal(p, expected)


def test_vtcm_larger_than_the_targets_is_a_build_error():
    from loom import te

    A = te.placeholder((4096,), name="A", dtype="int32")
    T = te.compute((4096,), lambda i: A[i] + 1, name="T")
    B = te.compute((4096,), lambda i: T[i] * 2, name="B")
    s = te.create_schedule(B.op)
    s[T].set_scope("local.vtcm")
    small = loom.target.hexagon("v66", vtcm_size=8192)
    with pytest.raises(
        loom.LoomError,
        match=r"buffer T needs 16384 bytes but memory scope "
        r"local.vtcm has 8192 bytes on hexagon",
    ):
        loom.build(s, [A, B], target=small)


def test_parallel_loops_run_as_tasks_of_the_device_runtime(dev):
    """lower_parallel's tasks on the device: the device runtime's loom_parallel_launch runs
    them (a loop nested in a serial one captures its variable, a float scalar and both
    buffers); a failing task fails the call with its own message."""
    from loom import te

    A = te.placeholder((16, 24), name="A")
    s_ = te.var("s", dtype="float32")
    B = te.compute((16, 24), lambda i, j: A[i, j] * s_ + 1.0, name="B")
    s = te.create_schedule(B.op)
    jo, _ = s[B].split(B.op.axis[1], factor=8)
    s[B].parallel(jo)
    mod = loom.build(s, [A, s_, B], target=TARGET, name="k")
    assert mod.extern_symbols["loom_parallel_launch"] == "loom_device_runtime"
    assert list(mod.signatures) == ["k"]
    a = np.random.default_rng(0).standard_normal((16, 24)).astype(np.float32)
    b = np.zeros_like(a)
    mod.to_device(dev)["k"](a, 1.5, b)
    exact = a.astype(np.float64) * 1.5 + 1  # one rounding: -fp-contract=1 fuses the multiply-add
    np.testing.assert_allclose(b, exact, rtol=1e-6, atol=1e-7)

    C = te.placeholder((64,), name="C", dtype="int32")
    D = te.placeholder((64,), name="D", dtype="int32")
    E = te.compute((64,), lambda i: C[i] % D[i], name="E")
    s = te.create_schedule(E.op)
    s[E].parallel(E.op.axis[0])
    loaded = loom.build(s, [C, D, E], target=TARGET, name="pmod").to_device(dev)
    c, d, e = np.arange(64, dtype=np.int32), np.full(64, 5, np.int32), np.zeros(64, np.int32)
    loaded["pmod"](c, d, e)
    np.testing.assert_array_equal(e, c % 5)
    d[33] = 0
    with pytest.raises(loom.LoomError, match=r"integer division by zero in pmod"):
        loaded["pmod"](c, d, e)
