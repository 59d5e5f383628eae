"""The CPU's pack_conv_weights graph pass (loom/backend/cpu/pack_conv_weights.py) and Conv's
`loom.weight_block` layout (loom/graph/ops/nn.py): weights in blocks of the register tile's
output channels, results unchanged, and each tile's weight loads free of divisions."""

import numpy as np
import pytest

import loom
from loom.backend.cpu import LLVM, conv_schedules
from loom.backend.cpu.pack_conv_weights import (
    MAX_FILTER_BYTES,
    HostCPU,
    conv_channel_tile,
    host_cpu,
    pack_conv_weights,
)
from loom.graph.ir import Graph, Node, TensorType
from loom.graph.ops import OPERATORS
from loom.graph.ops.nn import WEIGHT_BLOCK, block_weights, conv_evaluate, unblock_weights
from loom.graph.passes.infer_types import infer_types
from loom.ir.expr import BufferLoad, Div, FloorDiv, FloorMod, Mod, Ramp, ShiftRight, Var
from loom.ir.visitor import post_order_visit
from loom.model import lower_model
from loom.target import Target
from loom.te.operation import placeholder
from loom.te.schedule import create_schedule
from loom.te.tensor import ComputeOp, Reduce

RNG = np.random.default_rng(0)


def floats(*shape):
    return RNG.standard_normal(shape).astype("float32")


def conv_graph(x_shape, w, bias=True, nodes=None, outputs=("y",), **attrs):
    """Conv(x, w[, b]) (or `nodes`) over constant weights, typed."""
    constants = {"w": w}
    inputs = ("x", "w")
    if bias:
        constants["b"] = floats(w.shape[0])
        inputs += ("b",)
    nodes = nodes or (Node("Conv", inputs, ("y",), attrs),)
    graph = Graph(("x",), outputs, nodes, constants, {"x": TensorType(x_shape, "float32")})
    return infer_types(graph)


def reference(graph: Graph, x: np.ndarray) -> np.ndarray:
    node = graph.nodes[0]
    return conv_evaluate(node, [x, *(graph.constants[v] for v in node.inputs[1:])])[0]


def test_block_weights_round_trip_and_layout():
    w = floats(12, 3, 2, 5)
    blocked = block_weights(w, 4)
    assert blocked.shape == (3, 3, 2, 5, 4)
    assert blocked.flags.c_contiguous
    assert blocked[2, 1, 0, 3, 1] == w[2 * 4 + 1, 1, 0, 3]
    assert np.array_equal(unblock_weights(blocked, 4), w)
    with pytest.raises(ValueError, match="block=5 must divide the 12 filters"):
        block_weights(w, 5)


def test_pass_packs_by_the_tile_and_drops_the_original():
    graph = conv_graph((1, 16, 20, 20), floats(32, 16, 3, 3), pads=(1, 1, 1, 1))
    block = conv_channel_tile(graph.nodes[0], graph)
    assert block is not None and block > 1 and 32 % block == 0
    packed = pack_conv_weights(graph)
    node = packed.nodes[0]
    assert node.attr(WEIGHT_BLOCK) == block
    assert "w" not in packed.constants
    w = packed.constants[node.inputs[1]]
    assert w.shape == (32 // block, 16, 3, 3, block)
    assert np.array_equal(unblock_weights(w, block), graph.constants["w"])
    # the packed node has the same type and computes the same values (numpy evaluation)
    assert infer_types(packed).type_of("y") == graph.type_of("y")
    x = floats(1, 16, 20, 20)
    assert np.array_equal(reference(packed, x), reference(graph, x))
    # packing is done once: a second run changes nothing
    assert pack_conv_weights(packed) is packed


def test_shared_weights_are_packed_once_and_kept_for_other_readers():
    w = floats(16, 16, 3, 3)
    nodes = (
        Node("Conv", ("x", "w"), ("a",), {"pads": (1, 1, 1, 1)}),
        Node("Conv", ("a", "w"), ("y",), {"pads": (1, 1, 1, 1)}),
    )
    graph = conv_graph((1, 16, 12, 12), w, bias=False, nodes=nodes)
    packed = pack_conv_weights(graph)
    assert packed.nodes[0].inputs[1] == packed.nodes[1].inputs[1] != "w"
    assert set(packed.constants) == {packed.nodes[0].inputs[1]}
    # a reader that is not a packed Conv (here: a graph output) keeps the original
    kept = pack_conv_weights(conv_graph((1, 16, 12, 12), w, False, nodes, ("y", "w")))
    assert "w" in kept.constants and kept.nodes[0].inputs[1] != "w"


def test_one_channel_tiles_keep_their_layout():
    """Depthwise convolutions' tiles have one channel: their layout is one stream already."""
    graph = conv_graph((1, 8, 16, 16), floats(8, 1, 3, 3), pads=(1, 1, 1, 1), group=8)
    assert conv_channel_tile(graph.nodes[0], graph) == 1
    assert pack_conv_weights(graph) is graph


ZEN4 = HostCPU(64, "znver4")
"""AVX-512 run as two 256-bit halves (conv_schedules.HALF_WIDTH_CORES): half registers cost
half, so a 7-wide row is one vector of 8 lanes and the tile keeps its channels out of the
lanes where a full-width core puts them in (ZEN5)."""

ZEN5 = HostCPU(64, "znver5")
"""AVX-512 at full width (as an Intel AVX-512 core)."""

ZEN3 = HostCPU(32, "znver3")
"""AVX2 (32-byte registers, 16 of them), as Haswell with -mattr=+avx2."""


def test_long_filters_keep_their_layout():
    """Filters longer than MAX_FILTER_BYTES stay as ONNX lays them out (one stream per channel
    of the tile, each long enough for the prefetcher), for a tile of rows of outputs (Zen 4's
    for these 7-wide outputs); a tile with its channels in the lanes (Zen 5's, 16 of them)
    loads them as vectors: packed whatever their length."""
    short = conv_graph((1, 224, 7, 7), floats(16, 224, 3, 3), pads=(1, 1, 1, 1))
    assert short.constants["w"][0].nbytes <= MAX_FILTER_BYTES
    long = conv_graph((1, 256, 7, 7), floats(16, 256, 3, 3), pads=(1, 1, 1, 1))
    assert long.constants["w"][0].nbytes > MAX_FILTER_BYTES
    assert not conv_schedules.channels_in_lanes(*_conv_stage(long), ZEN4)
    assert pack_conv_weights(short, ZEN4) is not short
    assert conv_channel_tile(long.nodes[0], long, ZEN4) > 1
    assert pack_conv_weights(long, ZEN4) is long
    assert conv_schedules.channels_in_lanes(*_conv_stage(long), ZEN5)
    for graph in (short, long):
        (node,) = pack_conv_weights(graph, ZEN5).nodes
        assert node.attr(WEIGHT_BLOCK) == conv_channel_tile(graph.nodes[0], graph, ZEN5) == 16


def test_long_filters_are_packed_for_channels_in_the_lanes():
    """A tile with its output channels in the vector lanes (conv_channels.py, chosen for 7-wide
    outputs with 16-lane registers) loads each step's weights as vectors: packed whatever
    their length."""
    graph = conv_graph((1, 256, 7, 7), floats(64, 256, 3, 3), pads=(1, 1, 1, 1))
    assert graph.constants["w"][0].nbytes > MAX_FILTER_BYTES
    stage = _conv_stage(graph)
    if not conv_schedules.channels_in_lanes(*stage, host_cpu()):
        pytest.skip("this machine's tile keeps the channels out of the lanes")
    packed = pack_conv_weights(graph)
    (node,) = packed.nodes
    assert node.attr(WEIGHT_BLOCK) == conv_channel_tile(graph.nodes[0], graph)
    assert packed.constants[node.inputs[1]].shape[-1] == node.attr(WEIGHT_BLOCK)


def _conv_stage(graph: Graph):
    """The schedule of `graph`'s Conv and its reduction stage, as pack_conv_weights asks."""
    node = graph.nodes[0]
    tensors = [
        placeholder(graph.type_of(v).shape, name=f"in{k}") for k, v in enumerate(node.inputs)
    ]
    outputs = OPERATORS.get("Conv").compute(node, tensors, {}, [graph.type_of("y")])
    s = create_schedule([t.op for t in outputs])
    (stage,) = [
        st for st in s.stages if isinstance(st.op, ComputeOp) and isinstance(st.op.body, Reduce)
    ]
    return s, stage


def test_bad_weight_block_is_refused():
    graph = conv_graph((1, 4, 8, 8), floats(8, 4, 3, 3))
    node = graph.nodes[0].replace(attrs={WEIGHT_BLOCK: 4})
    with pytest.raises(
        loom.LoomError, match=r"loom.weight_block=4 needs W as \[blocks, channels, \*kernel, 4\]"
    ):
        infer_types(graph.with_nodes([node]))
    zero = graph.with_nodes([node.replace(attrs={WEIGHT_BLOCK: 0})])
    with pytest.raises(loom.LoomError, match=r"loom\.weight_block=0 must be a positive integer"):
        infer_types(zero)
    # an ONNX model's Conv may not set it
    assert "loom.weight_block not supported" in loom.graph.ops.unsupported(node)


def _weight_loads(module, name: str) -> list[BufferLoad]:
    loads = []
    for func in module.functions:
        post_order_visit(
            func.body,
            lambda e: loads.append(e) if isinstance(e, BufferLoad) and e.buffer.name == name else 0,
        )
    return loads


def _divides(e) -> bool:
    """Whether `e` divides anything but a fused tile loop's index (which a channel tile's
    parallel loop over blocks, rows and columns divides once per tile to find its block)."""
    found = []
    kinds = (Div, Mod, FloorDiv, FloorMod, ShiftRight)

    def visit(n):
        if isinstance(n, kinds) and not (isinstance(n.a, Var) and n.a.name.endswith(".fused")):
            found.append(n)

    post_order_visit(e, visit)
    return bool(found)


CASES = [
    # (input shape, W shape, attrs): rows of whole vectors, a flattened grid (28x28, 14x14:
    # conv_flat.py), strided, 1x1, grouped, with and without bias
    ((1, 64, 56, 56), (64, 64, 3, 3), {"pads": (1, 1, 1, 1)}),
    ((1, 32, 28, 28), (32, 32, 3, 3), {"pads": (1, 1, 1, 1)}),
    ((1, 32, 14, 14), (48, 32, 1, 1), {}),
    ((1, 16, 29, 29), (32, 16, 3, 3), {"strides": (2, 2)}),
    ((1, 16, 20, 20), (32, 8, 3, 3), {"pads": (1, 1, 1, 1), "group": 2}),
    ((1, 24, 7, 7), (40, 24, 3, 3), {"pads": (1, 1, 1, 1)}),
    # output channels in the vector lanes (conv_channels.py), filters over MAX_FILTER_BYTES
    ((1, 256, 14, 14), (256, 256, 3, 3), {"pads": (1, 1, 1, 1)}),
    ((1, 128, 14, 14), (256, 128, 3, 3), {"pads": (1, 1, 1, 1), "strides": (2, 2)}),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", CASES)
def test_compiled_results_and_contiguous_weight_loads(x_shape, w_shape, attrs):
    """Compiled for the llvm target (whose backend runs the pass), each case reads packed
    weights through loads whose index has no division (the tile's split of the output channels
    by the block makes `m // C` and `m % C` its loop variables) and no gather, and computes
    what numpy computes."""
    graph = conv_graph(x_shape, floats(*w_shape), **attrs)
    compiled = loom.compile(graph, target="llvm")
    (node,) = [n for n in compiled.graph.nodes if n.op == "Conv" or n.op == "loom.fused"]
    assert node.op == "Conv" and node.attr(WEIGHT_BLOCK) is not None
    x = floats(*x_shape)
    atol = 1e-4 * max(1, np.prod(w_shape[1:]) / 256)  # long sums of N(0, 1) products: rounding
    np.testing.assert_allclose(compiled(x=x)["y"], reference(graph, x), rtol=1e-4, atol=atol)
    lowered = lower_model(graph, target="llvm")
    loads = _weight_loads(lowered.module, node.inputs[1].replace(".", "_"))
    assert loads
    for load in loads:
        assert not any(_divides(i) for i in load.indices), load
        assert not any(isinstance(i, Ramp) and i.stride.value != 1 for i in load.indices), load


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs, packed_for",
    [
        # each block within x86-64's 12 accumulator registers (a larger one is read through
        # a division: test_a_block_unlike_the_tile_divides)
        # blocks of 4 channels; x86-64's own tile 2
        ((1, 8, 112, 112), (32, 8, 3, 3), {"pads": (1, 1, 1, 1)}, ZEN4),
        (*CASES[1], ZEN5),  # 8 (x86-64 takes them in its lanes); its own 2
        (*CASES[-1], ZEN3),  # 8, in the lanes (x86-64 takes them as rows); its own 4
    ],
    ids=["112x112, Zen 4", "28x28, Zen 5", "14x14 stride 2, AVX2"],
)
def test_another_cpus_tile_takes_the_block(x_shape, w_shape, attrs, packed_for):
    """Weights packed for one CPU's tiles (`packed_for`), then compiled for a target whose own
    tile would have other channels (x86-64: SSE2's 16-byte vectors): its pass keeps
    the block and its tiles take the block's channels, reading the weights without a division
    too.

    Both CPUs are pinned, so that the tiles differ on any machine: the block packed for this
    machine's CPU can be the target's own, and
    compiled for the target without packing first, the target's pass packs for its own tile
    (Backend.graph_passes(target)), which then has nothing else to take."""
    target = Target("llvm -mcpu=x86-64")
    graph = conv_graph(x_shape, floats(*w_shape), **attrs)
    block = conv_channel_tile(graph.nodes[0], graph, packed_for)
    assert block != conv_channel_tile(graph.nodes[0], graph, target)
    packed = pack_conv_weights(graph, packed_for)
    assert packed.nodes[0].attr(WEIGHT_BLOCK) == block
    lowered = lower_model(packed, target=target)
    (node,) = lowered.graph.nodes
    assert node.attr(WEIGHT_BLOCK) == block
    loads = _weight_loads(lowered.module, node.inputs[1].replace(".", "_"))
    assert loads and not any(_divides(i) for load in loads for i in load.indices)
    x = floats(*x_shape)
    got = loom.compile(packed, target=target)(x=x)["y"]
    np.testing.assert_allclose(got, reference(graph, x), rtol=1e-4, atol=1e-4)


def test_a_block_unlike_the_tile_divides():
    """The checks above can fail: weights packed in blocks the tile cannot take (more
    channels than its accumulators allow) are read through a division (still correct)."""
    graph = conv_graph((1, 16, 20, 20), floats(128, 16, 3, 3), pads=(1, 1, 1, 1))
    block = 64
    node = graph.nodes[0]
    w = block_weights(graph.constants["w"], block)
    blocked = graph.with_nodes(
        [node.replace(inputs=("x", "wb", "b"), attrs={**node.attrs, WEIGHT_BLOCK: block})],
        {"wb": w, "b": graph.constants["b"]},
    )
    lowered = lower_model(blocked, target="llvm")
    loads = _weight_loads(lowered.module, "wb")
    assert any(_divides(i) for load in loads for i in load.indices)
    x = floats(1, 16, 20, 20)
    compiled = loom.compile(blocked, target="llvm")
    np.testing.assert_allclose(compiled(x=x)["y"], reference(graph, x), rtol=1e-4, atol=1e-4)


def test_the_cpu_backend_registers_the_pass_and_the_c_backend_does_not():
    target = Target("llvm -mcpu=haswell")
    [(phase, graph_pass)] = LLVM.graph_passes(target)
    assert phase == "simplified" and graph_pass.func is pack_conv_weights
    assert graph_pass.keywords == {"target": target}
    graph = conv_graph((1, 16, 12, 12), floats(16, 16, 3, 3), pads=(1, 1, 1, 1))
    x = floats(1, 16, 12, 12)
    compiled = loom.compile(graph, target="c")
    assert compiled.graph.nodes[0].attr(WEIGHT_BLOCK) is None
    np.testing.assert_allclose(compiled(x=x)["y"], reference(graph, x), rtol=1e-4, atol=1e-4)


def test_this_machines_cpu_answers_as_the_host_target():
    """Without a target the pass asks for this machine's tiles: those of target "llvm"."""
    for x_shape, w_shape, attrs in CASES:
        graph = conv_graph(x_shape, floats(*w_shape), **attrs)
        host = conv_channel_tile(graph.nodes[0], graph, Target("llvm"))
        assert conv_channel_tile(graph.nodes[0], graph) == host
