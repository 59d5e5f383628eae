"""cpu_prefetch_weights: a prefetch at the top of the innermost serial reduction loops (their
body writes local accumulators only) that read a model's weights (a parameter every call
passes a constant): of a slow stream (at most MAX_STEP_BYTES per iteration) PREFETCH_BYTES
ahead; of a fast one read in blocks, the next block spread over the current block's
iterations, a line per prefetch and up to MAX_LINES_PER_ITERATION of them an iteration;
clamped into the buffer; nothing else changes."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import loom
from loom.ir import op
from loom.ir.buffer import decl_buffer
from loom.ir.expr import Call, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.interpret import interpret
from loom.ir.simplify import simplify
from loom.ir.stmt import Allocate, Evaluate, For, ForKind, SeqStmt, seq
from loom.ir.structural import assert_structural_equal
from loom.ir.visitor import post_order_visit, substitute
from loom.transform.cpu_prefetch_weights import (
    LINE_BYTES,
    MAX_LINES_PER_ITERATION,
    MAX_STEP_BYTES,
    MIN_BUFFER_BYTES,
    PREFETCH_BYTES,
    prefetch_func,
    weight_parameters,
)
from loom.transform.pass_infra import PassContext

STEPS = 4096
CHANNELS = 4  # weights read per step: 16 bytes, a slow stream


WEIGHTS = {1}  # W's position among the parameters


def tile(weights_step: int = CHANNELS, write_weights: bool = False, scope: str = "local"):
    """acc[o] += X[k] * W[k * weights_step + o] for o < CHANNELS (unrolled), k < STEPS, then
    Y = acc: the reduction of a tile of 4 output channels reading its weights 16 bytes a step,
    into accumulators in `scope`. Returns the function and the pieces of its reduction loop
    (which `with_loop` puts back)."""
    X = decl_buffer((STEPS,), "float32", "X")
    W = decl_buffer((STEPS * weights_step,), "float32", "W")
    Y = decl_buffer((CHANNELS,), "float32", "Y")
    acc = decl_buffer((CHANNELS,), "float32", "acc", scope=scope)
    k, o = Var("k"), Var("o")
    update = acc.store(acc[o] + X[k] * W[k * weights_step + o], [o])
    if write_weights:
        update = seq(update, W.store(W[k * weights_step + o] * 1.0, [k * weights_step + o]))
    body = For(o, op.const(0), op.const(CHANNELS), ForKind.UNROLLED, update)
    loop = For(k, op.const(0), op.const(STEPS), ForKind.SERIAL, body)
    return with_loop(X, W, Y, acc, loop), (X, W, Y, acc, k, body)


def with_loop(X, W, Y, acc, loop) -> PrimFunc:
    i = Var("i")
    init = For(i, op.const(0), op.const(CHANNELS), ForKind.SERIAL, acc.store(op.const(0.0), [i]))
    out = For(i, op.const(0), op.const(CHANNELS), ForKind.SERIAL, Y.store(acc[i], [i]))
    return PrimFunc("tile", (X, W, Y), Allocate(acc, seq(init, loop, out)))


def prefetch(buffer, index):
    address = op.call_intrin("handle", "address_of", buffer[index])
    return Evaluate(op.call_intrin("int32", "prefetch", address))


def test_a_slow_stream_of_weights_is_prefetched_ahead():
    func, (X, W, Y, acc, k, body) = tile()
    ahead = PREFETCH_BYTES // (CHANNELS * 4)
    index = op.max_(op.min_(k * CHANNELS + ahead * CHANNELS, STEPS * CHANNELS - 1), 0)
    loop = For(k, op.const(0), op.const(STEPS), ForKind.SERIAL, SeqStmt((prefetch(W, index), body)))
    assert_structural_equal(prefetch_func(func, WEIGHTS), with_loop(X, W, Y, acc, loop))


def test_small_buffers_fast_streams_written_buffers_and_activations_are_left_alone():
    func, _ = tile()
    # X is a slow stream too, but of 16 KB (below MIN_BUFFER_BYTES), and not weights
    assert STEPS * 4 < MIN_BUFFER_BYTES <= STEPS * CHANNELS * 4
    assert_structural_equal(prefetch_func(func, {0}), func)
    assert_structural_equal(prefetch_func(func, set()), func)  # W is not weights
    fast, _ = tile(weights_step=MAX_STEP_BYTES // 4 + 1)  # more than MAX_STEP_BYTES a step
    assert_structural_equal(prefetch_func(fast, WEIGHTS), fast)
    written, _ = tile(write_weights=True)  # not read-only
    assert_structural_equal(prefetch_func(written, WEIGHTS), written)


def test_a_loop_that_writes_memory_is_no_reduction_into_a_tile():
    func, _ = tile(scope="global")
    assert_structural_equal(prefetch_func(func, WEIGHTS), func)


def test_only_the_innermost_serial_loop_is_given_prefetches():
    func, (X, W, Y, acc, k, body) = tile()
    ahead = PREFETCH_BYTES // (CHANNELS * 4)
    index = op.max_(op.min_(k * CHANNELS + ahead * CHANNELS, STEPS * CHANNELS - 1), 0)
    r = Var("r")
    loop = For(k, op.const(0), op.const(STEPS), ForKind.SERIAL, body)
    twice = For(r, op.const(0), op.const(2), ForKind.SERIAL, loop)
    inner = For(
        k, op.const(0), op.const(STEPS), ForKind.SERIAL, SeqStmt((prefetch(W, index), body))
    )
    expected = with_loop(X, W, Y, acc, For(r, op.const(0), op.const(2), ForKind.SERIAL, inner))
    assert_structural_equal(prefetch_func(with_loop(X, W, Y, acc, twice), WEIGHTS), expected)


def test_the_weights_are_the_parameters_main_passes_constants():
    """A model's lowering (loom/graph/lower.py) records main's constants; a kernel's
    parameter is weights when every call passes one there."""
    func, (X, W, Y, *_) = tile()
    A, B, C, D = (decl_buffer((16,), "float32", n) for n in "ABCD")
    calls = seq(
        Evaluate(op.call_func("tile", A.data, B.data, C.data)),
        Evaluate(op.call_func("tile", A.data, B.data, D.data)),
        Evaluate(op.call_func("other", B.data, C.data)),
        Evaluate(op.call_func("other", A.data, C.data)),
    )
    constants = ((B, None), (C, None))
    main = PrimFunc("main", (A, D), calls, attrs=(("model.constants", constants),))
    module = IRModule((main, func))
    assert weight_parameters(module) == {"tile": {1}, "other": {1}}


def test_the_prefetched_addresses_stay_inside_the_buffer():
    """The interpreter checks a prefetch's address: the last iterations' prefetches past the
    weights' end are clamped to their last element."""
    func, _ = tile()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(STEPS).astype("float32")
    w = rng.standard_normal(STEPS * CHANNELS).astype("float32")
    y = np.zeros(CHANNELS, "float32")
    interpret(prefetch_func(func, WEIGHTS), x, w, y)
    want = (x[:, None].astype(np.float64) * w.reshape(STEPS, CHANNELS)).sum(axis=0)
    np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-3)


BLOCKS, ROWS, DEPTH, LANES = 3, 4, 256, 32  # 32 KB of weights per block, 128 bytes a step
W_SIZE = BLOCKS * DEPTH * LANES


def blocked(rows_in_index: bool = False, rows: int = ROWS, lanes: int = LANES):
    """Y[b, r, l] = sum over k of X[r, k] * W[b, k, l]: for each block b of `lanes` channels
    and each of `rows` row tiles r, a reduction over k into `lanes` accumulators (vectorized),
    reading the block's weights a vector a step. With `rows_in_index`, the weights' index
    reads r too: no block structure."""
    X = decl_buffer((rows * DEPTH,), "float32", "X")
    W = decl_buffer((BLOCKS * DEPTH * lanes,), "float32", "W")
    Y = decl_buffer((BLOCKS * rows * lanes,), "float32", "Y")
    acc = decl_buffer((lanes,), "float32", "acc", scope="local")
    b, r, k, lane, i = Var("b"), Var("r"), Var("k"), Var("l"), Var("i")
    w_index = b * (DEPTH * lanes) + k * lanes + lane
    if rows_in_index:
        w_index = w_index + r
    update = acc.store(acc[lane] + X[r * DEPTH + k] * W[w_index], [lane])
    vector = For(lane, op.const(0), op.const(lanes), ForKind.VECTORIZED, update)
    init = For(i, op.const(0), op.const(lanes), ForKind.SERIAL, acc.store(op.const(0.0), [i]))
    out = For(
        i,
        op.const(0),
        op.const(lanes),
        ForKind.SERIAL,
        Y.store(acc[i], [(b * rows + r) * lanes + i]),
    )

    def build(reduction_body):
        reduction = For(k, op.const(0), op.const(DEPTH), ForKind.SERIAL, reduction_body)
        tile = Allocate(acc, seq(init, reduction, out))
        row_tiles = For(r, op.const(0), op.const(rows), ForKind.SERIAL, tile)
        blocks = For(b, op.const(0), op.const(BLOCKS), ForKind.PARALLEL, row_tiles)
        return PrimFunc("tile", (X, W, Y), blocks)

    return build, vector, (W, b, r, k, lane)


def test_a_fast_stream_read_in_blocks_prefetches_the_next_block_across_the_row_tiles():
    build, lanes, (W, b, r, k, lane) = blocked()
    # iteration (r, k) of block b prefetches element (r * DEPTH + k) * block / (ROWS * DEPTH)
    # (rounded up: 8 elements a step) of the next block: a line every 2 steps, all of it by
    # the block's end
    block = DEPTH * LANES
    per_step = -(-block // (ROWS * DEPTH))
    assert per_step == 8
    got = prefetch_func(build(lanes), WEIGHTS)
    reduction = got.body.body.body.body.seq[1]
    assert_structural_equal(reduction.body.seq[1], lanes)
    address = reduction.body.seq[0].value.args[0].args[0]
    assert address.buffer is W
    for bb, rr, kk in ((0, 0, 0), (1, 3, 255), (2, 2, 17), (0, 1, 100)):
        want = min((bb + 1) * block + (rr * DEPTH + kk) * per_step, W_SIZE - 1)
        assert _value(address.indices[0], {b: bb, r: rr, k: kk}) == want


@pytest.mark.parametrize("lanes, lines", [(32, 2), (64, 4)])
def test_a_block_read_faster_than_a_line_an_iteration_is_prefetched_a_line_apart(lanes, lines):
    """One row tile: each step of a block must bring in `lanes` elements of the next (128 or
    256 bytes), as many prefetches a line apart (resnet18's 3x3 convolutions at 7x7: 3)."""
    build, body, (W, b, r, k, lane) = blocked(rows=1, lanes=lanes)
    got = prefetch_func(build(body), WEIGHTS)
    reduction = got.body.body.body.body.seq[1]
    *prefetches, rest = reduction.body.seq
    assert_structural_equal(rest, body)
    assert len(prefetches) == lines
    block, size, line = DEPTH * lanes, BLOCKS * DEPTH * lanes, LINE_BYTES // 4
    for n, p in enumerate(prefetches):
        address = p.value.args[0].args[0]
        assert address.buffer is W
        for bb, kk in ((0, 0), (1, 255), (2, 17), (0, 100)):
            want = min((bb + 1) * block + kk * lanes + n * line, size - 1)
            assert _value(address.indices[0], {b: bb, r: 0, k: kk}) == want


def test_a_block_needing_more_prefetches_an_iteration_than_the_limit_is_left_alone():
    lanes = (MAX_LINES_PER_ITERATION + 1) * LINE_BYTES // 4
    build, body, _ = blocked(rows=1, lanes=lanes)
    func = build(body)
    assert_structural_equal(prefetch_func(func, WEIGHTS), func)


def _value(e, values):
    return simplify(substitute(e, {v: op.const(x) for v, x in values.items()})).value


def test_a_fast_stream_without_blocks_is_left_alone():
    build, lanes, _ = blocked(rows_in_index=True)  # the row tiles move the weights' index
    func = build(lanes)
    assert_structural_equal(prefetch_func(func, WEIGHTS), func)


def test_the_next_blocks_addresses_stay_inside_the_buffer():
    build, lanes, _ = blocked()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(ROWS * DEPTH).astype("float32")
    w = rng.standard_normal(W_SIZE).astype("float32")
    y = np.zeros(BLOCKS * ROWS * LANES, "float32")
    interpret(prefetch_func(build(lanes), WEIGHTS), x, w, y)
    want = np.einsum("rk,bkl->brl", x.reshape(ROWS, DEPTH), w.reshape(BLOCKS, DEPTH, LANES))
    np.testing.assert_allclose(y.reshape(BLOCKS, ROWS, LANES), want, rtol=1e-3, atol=1e-3)


def pointwise_model(channels: int = 576, filters: int = 96, size: int = 14) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((filters, channels, 1, 1)) / np.sqrt(channels)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"])],
        "pointwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def prefetches_of(model, target: str):
    """The prefetch calls in the lowered kernels of `model` compiled for `target`, and the
    compiled model."""
    prefetches = []

    def count(mod):
        for f in mod.functions:
            post_order_visit(
                f.body,
                lambda e: (
                    prefetches.append(e) if isinstance(e, Call) and e.op == "prefetch" else None
                ),
            )
        return mod

    with PassContext(config={"tir.add_lower_pass": [("vectorize", count)]}):
        compiled = loom.compile(model, target=target)
    return prefetches, compiled


@pytest.mark.parametrize(
    "channels, filters, size",
    [
        # conv_flat.py, every x86 CPU: 3 channels of a block a step with AVX-512, 6 with
        # AVX2 (a slow stream)
        (576, 96, 28),
        # conv_channels.py with AVX-512: 10 blocks of 32 channels, 128 bytes a step (a fast
        # stream, the next block prefetched); with AVX2, 8 channels a step (a slow stream)
        (960, 320, 7),
    ],
)
def test_the_llvm_backend_prefetches_a_1x1_convolutions_weights(channels, filters, size):
    """A 1x1 convolution (mobilenet_v2's 576 -> 96, its 221 KB of weights, at 28x28 here;
    its 960 -> 320 at 7x7) reads its weights through the prefetch, whichever tile this CPU
    takes; the results are the convolution's.

    Not at mobilenet_v2's 14x14 for 576 -> 96: there a CPU running AVX-512 at full width
    (Zen 5, Intel) puts the channels in the lanes (3 blocks of 32), too few blocks for a
    parallel loop of its own: the schedule fuses them with the pixel tiles, leaving no block
    loop for cpu_prefetch_weights' fast-stream prefetch (a fast stream without blocks is left
    alone); Zen 4 and AVX2 take the flattened grid's slow stream there."""
    model = pointwise_model(channels, filters, size)
    prefetches, compiled = prefetches_of(model, "llvm")
    assert prefetches
    # of the weights (packed: w_blocked<C>), as address_of(w_blocked<C>[...])
    assert {p.args[0].args[0].buffer.name.split("_blocked")[0] for p in prefetches} == {"w"}
    x = np.random.default_rng(1).standard_normal((1, channels, size, size)).astype("float32")
    w = onnx.numpy_helper.to_array(model.graph.initializer[0])[:, :, 0, 0]
    want = np.einsum("oc,nchw->nohw", w.astype(np.float64), x)
    np.testing.assert_allclose(compiled(x=x)["y"], want, rtol=1e-4, atol=1e-4)


def window_model(channels: int, size: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((channels, channels, 3, 3)) / np.sqrt(9 * channels)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 4)],
        "window",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # onnxruntime's reference reads IR versions up to 13
    return model


def test_a_3x3_convolution_at_7x7_prefetches_three_lines_of_the_next_block_a_step():
    """resnet18's 3x3 convolutions at 7x7 (512 channels; 128 here), on a CPU running AVX-512
    at full width: a channel tile (conv_schedules.py) of 32 output channels, its 7 row tiles
    reading a block's 9 x 32 weights of each input channel: each step brings in 9 * 32 / 7
    of the next block's elements (168 bytes, rounded up), three lines."""
    model = window_model(128, 7)
    prefetches, _ = prefetches_of(model, "llvm -mcpu=znver5")
    assert len(prefetches) == 3
    assert {p.args[0].args[0].buffer.name.split("_blocked")[0] for p in prefetches} == {"w"}
    _, compiled = prefetches_of(model, "llvm")  # this machine's schedule, run
    x = np.random.default_rng(1).standard_normal((1, 128, 7, 7)).astype("float32")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(compiled(x=x)["y"], want, rtol=1e-4, atol=1e-4)


def test_the_c_backend_has_no_prefetch_pass():
    prefetches, _ = prefetches_of(pointwise_model(), "c")
    assert not prefetches
