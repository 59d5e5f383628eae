"""cpu_prefetch_tile_output: a serial tile loop whose body runs a reduction into local
accumulators and then stores them into a large output gets, at the top of its body, a
`prefetch_write` of every line the next iteration's epilogue stores (its unrolled loops at each
iteration, its vectorized one at its first and last lane); nothing else changes, and loops
whose stores the hardware prefetcher follows, short tiles, small outputs and other loops are
left alone."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import loom
from loom.ir import op
from loom.ir.buffer import decl_buffer
from loom.ir.expr import Var
from loom.ir.function import PrimFunc
from loom.ir.interpret import interpret
from loom.ir.stmt import Allocate, Evaluate, For, ForKind, seq
from loom.ir.structural import assert_structural_equal
from loom.transform.cpu_prefetch_tile_output import (
    MIN_BUFFER_BYTES,
    MIN_TILE_UPDATES,
    prefetch_tile_output,
)

TILES = 4
ROWS = 2  # the tile's rows (unrolled)
LANES = 8  # the tile's vector
STEPS = MIN_TILE_UPDATES // ROWS  # the reduction: a tile long enough to prefetch for


def tile_loop(
    steps=STEPS,
    block=None,
    rows_apart=64,
    tile_kind=ForKind.SERIAL,
    reduction_scope="local",
    out_elements=None,
    index_uses_tile=True,
):
    """A tile loop t over TILES tiles: acc[r * LANES + l] = 0, then for k < steps:
    acc[...] += X[k * LANES + l] (r unrolled, l vectorized), then the epilogue
    Y[t * block + r * rows_apart + l] = acc[...] + 1. `block` defaults to the output's
    elements over TILES (each tile in a block of its own). Returns the function and a maker of
    the expected prefetch of element `offset` of the next tile."""
    elements = out_elements or MIN_BUFFER_BYTES // 4
    block = block if block is not None else elements // TILES
    X = decl_buffer((steps * LANES,), "float32", "X")
    Y = decl_buffer((elements,), "float32", "Y")
    acc = decl_buffer((ROWS * LANES,), "float32", "acc", scope=reduction_scope)
    t, r, l, k, r2, l2, r3, l3 = (Var(n) for n in ("t", "r", "l", "k", "r2", "l2", "r3", "l3"))

    def rows(r_var, l_var, store):
        return For(
            r_var,
            op.const(0),
            op.const(ROWS),
            ForKind.UNROLLED,
            For(l_var, op.const(0), op.const(LANES), ForKind.VECTORIZED, store),
        )

    init = rows(r, l, acc.store(op.const(0.0, "float32"), [r * LANES + l]))
    update = acc[r2 * LANES + l2] + X[k * LANES + l2]
    reduction = For(
        k,
        op.const(0),
        op.const(steps),
        ForKind.SERIAL,
        rows(r2, l2, acc.store(update, [r2 * LANES + l2])),
    )
    where = (t * block if index_uses_tile else 0) + r3 * rows_apart + l3
    epilogue = rows(r3, l3, Y.store(acc[r3 * LANES + l3] + op.const(1.0, "float32"), [where]))

    def func(first=()):
        body = Allocate(acc, seq(*first, init, reduction, epilogue))
        return PrimFunc("tiles", (X, Y), For(t, op.const(0), op.const(TILES), tile_kind, body))

    def prefetch(offset):
        following = op.min_(t + 1, TILES - 1)
        at = op.max_(op.min_(following * block + offset, elements - 1), 0)
        address = op.call_intrin("handle", "address_of", Y[at])
        return Evaluate(op.call_intrin("int32", "prefetch_write", address))

    return func, prefetch


def test_the_tile_loop_prefetches_the_next_tiles_output_lines_for_writing():
    func, prefetch = tile_loop()
    offsets = [r * 64 + lane for r in range(ROWS) for lane in (0, LANES - 1)]
    expected = func([prefetch(offset) for offset in offsets])
    assert_structural_equal(prefetch_tile_output(func()), expected)


def test_the_prefetches_change_no_result():
    func, _ = tile_loop()
    x = np.linspace(-3, 3, STEPS * LANES, dtype=np.float32)
    want = np.zeros(MIN_BUFFER_BYTES // 4, dtype=np.float32)
    got = want.copy()
    interpret(func(), x, want)
    interpret(prefetch_tile_output(func()), x, got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "case",
    [
        dict(block=16),  # the next tile stores within a line of this one's: a stream
        dict(out_elements=MIN_BUFFER_BYTES // 4 // 2),  # an output that stays in the cache
        dict(tile_kind=ForKind.UNROLLED),  # not a serial loop
        dict(reduction_scope="global"),  # no reduction into local accumulators
        dict(index_uses_tile=False),  # every tile stores to the same place
        dict(steps=STEPS // 2),  # a short tile: the reorder buffer overlaps its misses
    ],
    ids=["along a row", "small output", "unrolled", "no local reduction", "same place", "short"],
)
def test_other_loops_are_left_alone(case):
    func, _ = tile_loop(**case)
    assert_structural_equal(prefetch_tile_output(func()), func())


def _conv_add_relu(channels: int, size: int, rng):
    w = rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) * 0.1
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Add", ["c", "r"], ["s"]),
            helper.make_node("Relu", ["s"], ["y"]),
        ],
        "block",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size]),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, channels, size, size]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, size, size])],
        [numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), w


def test_a_residual_convolution_prefetches_its_next_tiles_output():
    """resnet18's 3x3 convolution of 64 channels at 56x56 with its residual add: the tiles run
    along the channels, a plane (12.5 KB) apart, into an 800 KB output. For AVX2 (its flat
    grid's tiles; a full-width AVX-512 core takes a channel tile there, whose stores the pass
    leaves alone), which runs on any x86-64 machine with AVX2."""
    rng = np.random.default_rng(0)
    model, w = _conv_add_relu(64, 56, rng)
    compiled = loom.compile(model, target="llvm -mcpu=haswell -mattr=+avx2,+fma")
    assert compiled.module.get_source("ir").count("@prefetch_write(") >= 1
    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    r = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    padded = np.pad(x[0].astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
    want = np.maximum(np.einsum("chwij,ocij->ohw", windows, w)[None] + r, 0)
    np.testing.assert_allclose(compiled(x=x, r=r)["y"], want, rtol=1e-4, atol=1e-4)
