"""Vector loads of a ramp with a small constant stride (2 to 4) on LLVM: one contiguous masked
load of the span and a shuffle keeping every stride-th element instead of a gather
(loom/codegen/llvm/function.py `_strided_load`). The span's last elements are past the last one
read and are masked off, so a load ending exactly at the end of its buffer stays in bounds."""

import numpy as np
import pytest

import loom
from loom import te

RNG = np.random.default_rng(0)


def strided_read(n: int, stride: int, offset: int, lanes: int, dtype: str):
    """C[i] = A[i * stride + offset], with A exactly long enough for the last read."""
    size = (n - 1) * stride + offset + 1
    A = te.placeholder((size,), name="A", dtype=dtype)
    C = te.compute((n,), lambda i: A[i * stride + offset] + A[i * stride + offset], name="C")
    sch = te.create_schedule(C.op)
    _, inner = sch[C].split(C.op.axis[0], factor=lanes)
    sch[C].vectorize(inner)
    return sch, [A, C], size


def data(size: int, dtype: str) -> np.ndarray:
    if dtype.startswith("float"):
        return RNG.standard_normal(size).astype(dtype)
    return RNG.integers(-100, 100, size).astype(dtype)


@pytest.mark.parametrize("stride", [2, 3, 4])
@pytest.mark.parametrize("lanes", [4, 8, 16])
@pytest.mark.parametrize("offset", [0, 1])
def test_strided_vector_loads_match_numpy_up_to_the_buffer_end(stride, lanes, offset):
    n = lanes * 5
    sch, args, size = strided_read(n, stride, offset, lanes, "float32")
    mod = loom.build(sch, args, target="llvm")
    a = data(size, "float32")
    c = np.empty(n, "float32")
    mod["main"](a, c)
    expected = a[offset::stride][:n] * 2
    np.testing.assert_array_equal(c, expected)


@pytest.mark.parametrize("dtype", ["int8", "int32", "float64"])
def test_strided_loads_of_other_dtypes(dtype):
    n, stride, lanes = 32, 2, 8
    sch, args, size = strided_read(n, stride, 1, lanes, dtype)
    mod = loom.build(sch, args, target="llvm")
    a = data(size, dtype)
    c = np.empty(n, dtype)
    mod["main"](a, c)
    np.testing.assert_array_equal(c, (a[1::stride] * 2).astype(dtype))


@pytest.mark.parametrize("stride", [2, 3, 4])
def test_no_gather_is_left_for_a_small_constant_stride(stride):
    sch, args, _ = strided_read(64, stride, 0, 8, "float32")
    text = loom.build(sch, args, target="llvm").get_source("ll")
    assert "llvm.masked.gather" not in text
    assert "llvm.masked.load" in text and "shufflevector" in text


def test_a_wide_stride_is_still_gathered():
    sch, args, size = strided_read(64, 5, 0, 8, "float32")
    mod = loom.build(sch, args, target="llvm")
    assert "llvm.masked.gather" in mod.get_source("ll")
    a = data(size, "float32")
    c = np.empty(64, "float32")
    mod["main"](a, c)
    np.testing.assert_array_equal(c, a[::5] * 2)


@pytest.mark.parametrize("stride", [2, 3, 4])
@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_predicated_strided_loads_read_only_their_lanes(stride, lanes):
    """A guarded read past both ends of A (a padding): the off lanes read nothing and are 0."""
    n, size = lanes * 4, lanes * 3
    A = te.placeholder((size,), name="A")
    C = te.compute(
        (n,),
        lambda i: te.if_then_else(
            te.all(i * stride >= 2, i * stride - 2 < size), A[i * stride - 2], te.const(0.0)
        ),
        name="C",
    )
    sch = te.create_schedule(C.op)
    _, inner = sch[C].split(C.op.axis[0], factor=lanes)
    sch[C].vectorize(inner)
    mod = loom.build(sch, [A, C], target="llvm")
    assert "llvm.masked.gather" not in mod.get_source("ll")
    a = data(size, "float32")
    c = np.empty(n, "float32")
    mod["main"](a, c)
    padded = np.concatenate([np.zeros(2, "float32"), a, np.zeros(n * stride, "float32")])
    np.testing.assert_array_equal(c, padded[::stride][:n])
