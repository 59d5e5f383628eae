"""Vector accesses along a ramp of constant stride on LLVM, lane by lane at constant offsets
from one address (loom/codegen/llvm/function.py): a store (`_strided_store`), not a scatter
through a vector of addresses (on AVX2, three instructions a lane: the channel tiles'
epilogues of conv_channels.py store one channel per lane so); a load of a stack buffer
(`_load_by_lanes`), not a gather, which would keep the buffer in memory (a flat pixel tile's
epilogue reads its accumulators across the registers so)."""

import numpy as np
import pytest

import loom
from loom import te

RNG = np.random.default_rng(0)


def transposed(m: int, n: int, lanes: int, dtype: str):
    """C[i, j] = A[j, i] + A[j, i], vectorized along C's rows (i): a store of stride n."""
    A = te.placeholder((n, m), name="A", dtype=dtype)
    C = te.compute((m, n), lambda i, j: A[j, i] + A[j, i], name="C")
    sch = te.create_schedule(C.op)
    i, j = C.op.axis
    io, ii = sch[C].split(i, factor=lanes)
    sch[C].reorder(io, j, ii)
    sch[C].vectorize(ii)
    return sch, [A, C]


def data(shape, dtype: str) -> np.ndarray:
    if dtype.startswith("float"):
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(-50, 50, shape).astype(dtype)


@pytest.mark.parametrize("lanes", [4, 8, 16])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32"])
def test_strided_vector_stores_match_numpy(lanes, dtype):
    m, n = lanes * 3, 5
    sch, args = transposed(m, n, lanes, dtype)
    mod = loom.build(sch, args, target="llvm")
    a = data((n, m), dtype)
    c = np.zeros((m, n), dtype)
    mod["main"](a, c)
    np.testing.assert_array_equal(c, (a.T + a.T).astype(dtype))


def test_a_strided_store_is_no_scatter():
    sch, args = transposed(32, 196, 8, "float32")
    text = loom.build(sch, args, target="llvm").get_source("ll")
    assert "llvm.masked.scatter" not in text
    assert text.count("store float") >= 8


def transposed_through_the_stack(m: int, n: int, lanes: int):
    """B = A * 2 in a stack buffer per row tile, C[j, i] = B[i, j] vectorized along i: a
    load of the stack buffer of stride n."""
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, m), lambda j, i: B[i, j], name="C")
    sch = te.create_schedule(C.op)
    j, i = C.op.axis
    io, ii = sch[C].split(i, factor=lanes)
    sch[C].reorder(io, j, ii)
    sch[C].vectorize(ii)
    sch[B].set_scope("local")
    sch[B].compute_at(sch[C], io)
    return sch, [A, C]


@pytest.mark.parametrize("lanes", [4, 8])
@pytest.mark.parametrize("n", [2, 3, 6])
@pytest.mark.parametrize("tail", [0, 1])
def test_strided_loads_of_a_stack_buffer_are_lane_loads(lanes, n, tail):
    """Any constant stride (2 to 4 too: a masked load of the span would keep the buffer in
    memory as well), and a row tile past the end (predicated lanes)."""
    m = lanes * 3 - tail
    sch, args = transposed_through_the_stack(m, n, lanes)
    mod = loom.build(sch, args, target="llvm")
    text = mod.get_source("ll")
    assert "llvm.masked.gather" not in text and "llvm.masked.load" not in text
    a = data((m, n), "float32")
    c = np.zeros((n, m), "float32")
    mod["main"](a, c)
    np.testing.assert_array_equal(c, a.T * 2)
