"""The llvm target's convolution and pooling schedules (loom/backend/cpu/conv_schedules.py):
convolutions of many shapes compiled and compared with onnxruntime, and the loops checked for
what the schedule promises (a tile of vector accumulators fed by unguarded contiguous loads,
multiply-adds)."""

import numpy as np
import pytest

import loom
from loom import te
from loom.backend.cpu import conv_schedules
from loom.backend.cpu.pack_conv_weights import HostCPU, pack_conv_weights
from loom.graph.ir import Graph, Node, TensorType
from loom.graph.ops import OPERATORS
from loom.graph.ops.nn import WEIGHT_BLOCK
from loom.graph.passes.infer_types import infer_types
from loom.ir.expr import BufferLoad, Ramp
from loom.ir.stmt import BufferStore, For, ForKind
from loom.ir.visitor import post_order_visit
from loom.te.operation import placeholder
from loom.te.tensor import PlaceholderOp, Reduce

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(0)


def floats(*shape):
    return RNG.standard_normal(shape).astype("float32")


def conv_model(x, w, bias=None, activation=None, **attrs):
    """Conv(x, w[, bias]) followed by `activation` (Relu, Clip to [0, 6], HardSwish)."""
    inits = {"w": w}
    inputs = ["x", "w"]
    if bias is not None:
        inits["b"] = bias
        inputs.append("b")
    nodes = [helper.make_node("Conv", inputs, ["conv" if activation else "out"], **attrs)]
    if activation == "Clip":
        inits.update(lo=np.float32(0), hi=np.float32(6))
        nodes.append(helper.make_node("Clip", ["conv", "lo", "hi"], ["out"]))
    elif activation:
        nodes.append(helper.make_node(activation, ["conv"], ["out"]))
    return make_model(nodes, x, inits)


def make_model(nodes, x, initializers=None):
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_empty_tensor_value_info("out")],
        [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def compiled_matches_onnxruntime(m, x, atol=1e-4, target="llvm"):
    compiled = loom.compile(m, target=target)
    got = compiled(x=x)["out"]
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol)
    return compiled


# (x shape, w shape, attributes, bias, activation)
CONVS = {
    "resnet 3x3": ((1, 64, 56, 56), (64, 64, 3, 3), {"pads": [1] * 4}, True, "Relu"),
    "3x3 no bias": ((1, 16, 20, 24), (32, 16, 3, 3), {"pads": [1] * 4}, False, None),
    "3x3 stride 2": (
        (1, 8, 31, 33),
        (16, 8, 3, 3),
        {"pads": [1] * 4, "strides": [2, 2]},
        True,
        None,
    ),
    "stem 7x7 stride 2": (
        (1, 3, 64, 64),
        (16, 3, 7, 7),
        {"pads": [3] * 4, "strides": [2, 2]},
        True,
        "Relu",
    ),
    "5x5 pads asymmetric": ((1, 4, 23, 37), (8, 4, 5, 5), {"pads": [2, 1, 0, 3]}, True, None),
    "3x3 dilated": (
        (1, 6, 30, 32),
        (12, 6, 3, 3),
        {"pads": [2] * 4, "dilations": [2, 2]},
        True,
        None,
    ),
    "1x1": ((1, 32, 112, 112), (64, 32, 1, 1), {}, True, None),
    "1x1 odd width": ((1, 24, 17, 45), (40, 24, 1, 1), {}, True, "Clip"),
    "1x1 HardSwish": ((1, 48, 20, 20), (96, 48, 1, 1), {}, True, "HardSwish"),
    "depthwise 3x3": (
        (1, 32, 112, 112),
        (32, 1, 3, 3),
        {"pads": [1] * 4, "group": 32},
        True,
        "Clip",
    ),
    "depthwise 3x3 stride 2": (
        (1, 24, 57, 57),
        (24, 1, 3, 3),
        {"pads": [1] * 4, "strides": [2, 2], "group": 24},
        True,
        None,
    ),
    "depthwise 5x5": (
        (1, 16, 40, 40),
        (16, 1, 5, 5),
        {"pads": [2] * 4, "group": 16},
        False,
        "HardSwish",
    ),
    "grouped": ((1, 16, 24, 24), (32, 4, 3, 3), {"pads": [1] * 4, "group": 4}, True, "Relu"),
    "batch 2": ((2, 8, 16, 40), (16, 8, 3, 3), {"pads": [1] * 4}, True, "Relu"),
    "valid, narrow": ((1, 8, 9, 9), (8, 8, 3, 3), {}, True, None),
    "14x14": ((1, 32, 14, 14), (32, 32, 3, 3), {"pads": [1] * 4}, True, None),
    "7x7, half registers": ((1, 32, 7, 7), (48, 32, 3, 3), {"pads": [1] * 4}, True, "Relu"),
    "3 channels stride 2": (
        (1, 3, 45, 50),
        (8, 3, 3, 3),
        {"pads": [1] * 4, "strides": [2, 2]},
        True,
        "Clip",
    ),
    "stride 3, no pads": ((1, 4, 40, 41), (8, 4, 3, 3), {"strides": [3, 3]}, False, None),
    # a flat grid (conv_flat.py): rows of 28 or 14 outputs laid end to end
    "28x28 flat grid": ((1, 16, 28, 28), (16, 16, 3, 3), {"pads": [1] * 4}, True, "Relu"),
    # (12 output channels: no multiple of a register's lanes, 8 with AVX2 or 16 with
    # AVX-512, so no CPU puts them in the lanes (conv_channels.py); 16 are two AVX2
    # registers, which the cost model took there, in tiles of 2 registers x 5 pixels: 8.0
    # outputs a cycle to the grid's 7.6)
    "flat grid, pads asymmetric, dilated": (
        (1, 8, 28, 27),
        (12, 8, 3, 3),
        {"pads": [1, 2, 0, 1], "dilations": [2, 1]},
        True,
        None,
    ),
    # (12 output channels: in the lanes on no CPU; with 32, AVX2 takes a channel tile,
    # STRIDED_FLAT_CHANNEL_GAIN)
    "3x3 stride 2 flat grid": (
        (1, 16, 56, 56),
        (12, 16, 3, 3),
        {"pads": [1] * 4, "strides": [2, 2]},
        True,
        "Relu",
    ),
    # 18 columns: at 14x14 an AVX2 CPU puts the channels in the lanes, reading the data rows
    # first (tests/graph/test_conv_rows_first.py)
    "1x1 flat grid": ((1, 24, 18, 18), (48, 24, 1, 1), {}, False, "Clip"),
    # the grid is the data's own layout (784 lanes computed, 28 rows of 28): no copy
    "1x1 flat grid 28x28": ((1, 48, 28, 28), (16, 48, 1, 1), {}, True, None),
    # more input channels than outputs: the grid reads the data, its rows past the data's
    # last read as zeros (masked), no copy
    "1x1 flat grid 14x14, more inputs": ((1, 48, 14, 14), (24, 48, 1, 1), {}, True, "Clip"),
    "1x1 flat grid 13x13, two images": ((2, 40, 13, 13), (24, 40, 1, 1), {}, False, None),
    # a 1x1 convolution with a stride reads its subsampled data (conv_widen.py)
    # (16 outputs wide: a 14- or 7-wide output puts its channels in the lanes, conv_channels.py)
    "1x1 stride 2": ((1, 32, 32, 32), (64, 32, 1, 1), {"strides": [2, 2]}, True, None),
    "1x1 stride 2 pads": (
        (1, 8, 15, 31),
        (16, 8, 1, 1),
        {"pads": [1, 0, 0, 1], "strides": [2, 2]},
        True,
        None,
    ),
    # output channels in the vector lanes (conv_channels.py): 14 and 7 outputs wide
    "14x14 channels in lanes": ((1, 64, 14, 14), (64, 64, 3, 3), {"pads": [1] * 4}, True, "Relu"),
    "7x7 channels in lanes": ((1, 40, 7, 7), (64, 40, 3, 3), {"pads": [1] * 4}, True, "Relu"),
    "stride 2 channels in lanes": (
        (1, 24, 14, 14),
        (32, 24, 3, 3),
        {"pads": [1] * 4, "strides": [2, 2]},
        False,
        None,
    ),
    "1x1 stride 2 channels in lanes": (
        (1, 48, 13, 13),
        (96, 48, 1, 1),
        {"strides": [2, 2]},
        True,
        "Clip",
    ),
    # a long reduction at 14x14: on AVX2, 8 channels x the whole row (conv_schedules._row_stream)
    "1x1 projection 14x14": ((1, 256, 14, 14), (40, 256, 1, 1), {}, True, "Clip"),
    # on a full-width AVX-512 core, a channel tile of all 32 channels (ONE_BLOCK_CHANNEL_GAIN)
    "1x1 projection to 32 at 28x28": ((1, 144, 28, 28), (32, 144, 1, 1), {}, True, None),
    # on AVX2, the pixels laid end to end (conv_schedules._flat_pixels): the reduction in
    # blocks of 80 steps; in no blocks (262 steps: no divisor from 64 to 128); two images,
    # without and with blocks
    "1x1 7x7 pixels end to end": ((1, 320, 7, 7), (64, 320, 1, 1), {}, True, "Clip"),
    "1x1 7x7 pixels end to end, one block": ((1, 262, 7, 7), (32, 262, 1, 1), {}, False, None),
    "1x1 14x14 pixels end to end, two images": ((2, 96, 14, 14), (48, 96, 1, 1), {}, True, None),
    "1x1 7x7 pixels end to end, two images, blocks": (
        (2, 320, 7, 7),
        (32, 320, 1, 1),
        {},
        True,
        None,
    ),
}
FLAT_PIXELS = [name for name in CONVS if "pixels end to end" in name]
CHANNEL_TILES = [
    "14x14 channels in lanes",
    "7x7 channels in lanes",
    "stride 2 channels in lanes",
    "1x1 stride 2 channels in lanes",
]
FLAT_GRIDS = [
    "28x28 flat grid",
    "flat grid, pads asymmetric, dilated",
    "3x3 stride 2 flat grid",
    "1x1 flat grid",
    "1x1 flat grid 28x28",
    "1x1 flat grid 14x14, more inputs",
    "1x1 flat grid 13x13, two images",
]
MASKED_TAIL = ("1x1 flat grid 14x14, more inputs", "1x1 flat grid 13x13, two images")
"""Grids that read their data past its last row as zeros: `test_a_grid_laid_out_as_the_data_
reads_the_data_itself`."""


@pytest.mark.parametrize("case", list(CONVS))
def test_convolutions_match_onnxruntime(case):
    x_shape, w_shape, attrs, bias, activation = CONVS[case]
    x = floats(*x_shape)
    w = floats(*w_shape) * np.float32(1 / np.sqrt(np.prod(w_shape[1:])))
    b = floats(w_shape[0]) if bias else None
    compiled_matches_onnxruntime(conv_model(x, w, b, activation, **attrs), x)


POOLS = {
    "max 3x3 stride 2": (
        "MaxPool",
        (1, 16, 56, 56),
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4},
    ),
    "max 3x3 stride 2 ceil": (
        "MaxPool",
        (1, 8, 30, 29),
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 0, 1], "ceil_mode": 1},
    ),
    "max 2x2": ("MaxPool", (2, 8, 32, 48), {"kernel_shape": [2, 2], "strides": [1, 1]}),
    "average 3x3 stride 2 pads": (
        "AveragePool",
        (1, 8, 35, 36),
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4},
    ),
    "average 2x2 stride 2": (
        "AveragePool",
        (1, 16, 40, 40),
        {"kernel_shape": [2, 2], "strides": [2, 2]},
    ),
    "average 3x3 pads": (
        "AveragePool",
        (1, 8, 33, 30),
        {"kernel_shape": [3, 3], "pads": [1] * 4, "count_include_pad": 1},
    ),
    "average 3x3 pads not counted": (
        "AveragePool",
        (1, 8, 33, 30),
        {"kernel_shape": [3, 3], "pads": [1] * 4},
    ),
}


@pytest.mark.parametrize("case", list(POOLS))
def test_poolings_match_onnxruntime(case):
    op, shape, attrs = POOLS[case]
    x = floats(*shape)
    compiled_matches_onnxruntime(make_model([helper.make_node(op, ["x"], ["out"], **attrs)], x), x)


# -- what the schedule promises -------------------------------------------------------------------


def conv_kernel(compiled):
    """The conv kernel's PrimFunc after lowering for the target (parallel tasks included)."""
    lowered = loom.lower(compiled.lowered.module, target=compiled.target)
    return [f for f in lowered if f.name in compiled.kernels or "_task_" in f.name]


def reduction_updates(funcs) -> list[BufferStore]:
    """Vector updates of accumulators: `acc[...] = acc[...] + ...`."""
    found = []

    def record(n):
        if (
            isinstance(n, BufferStore)
            and n.value.dtype.lanes > 1
            and any(ld.buffer is n.buffer for ld in loads_in(n.value))
        ):
            found.append(n)

    for f in funcs:
        post_order_visit(f.body, record)
    return found


def loads_in(e) -> list[BufferLoad]:
    found = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, BufferLoad) else None)
    return found


@pytest.mark.parametrize(
    "case",
    [
        "resnet 3x3",
        "1x1",
        "depthwise 3x3",
        "stem 7x7 stride 2",
        "7x7, half registers",
        *(case for case in FLAT_GRIDS if case not in MASKED_TAIL),
        "1x1 stride 2",
    ],
)
def test_accumulators_are_vectors_fed_by_unguarded_contiguous_loads(case):
    x_shape, w_shape, attrs, bias, activation = CONVS[case]
    x, w = floats(*x_shape), floats(*w_shape)
    compiled = loom.compile(conv_model(x, w, floats(w_shape[0]), activation, **attrs))
    updates = reduction_updates(conv_kernel(compiled))
    assert updates, "no vector accumulator update"
    for store in updates:
        data = [
            ld
            for ld in loads_in(store.value)
            if ld.dtype.lanes > 1 and ld.buffer is not store.buffer
        ]
        # the input (padded, widened, split into the stride's phases beforehand) is read by
        # whole vectors: no mask, no gather
        assert data and all(ld.predicate is None for ld in data), data
        assert all(isinstance(ld.indices[0], Ramp) for ld in data), [ld.indices for ld in data]
    # the tile: several accumulator vectors per reduction step (unrolled)
    assert len(updates) >= 8, len(updates)


STRIDED_WINDOWS = {
    "depthwise 3x3 stride 2": lambda: conv_model(
        floats(1, 24, 57, 57), floats(24, 1, 3, 3), floats(24), None, **CONVS[CASE_DW2][2]
    ),
    **{
        case: lambda case=case: make_model(
            [helper.make_node(POOLS[case][0], ["x"], ["out"], **POOLS[case][2])],
            floats(*POOLS[case][1]),
        )
        for case in ["max 3x3 stride 2", "max 3x3 stride 2 ceil", "average 3x3 stride 2 pads"]
    },
}
CASE_DW2 = "depthwise 3x3 stride 2"


@pytest.mark.parametrize("case", list(STRIDED_WINDOWS))
def test_strided_windows_of_one_channel_read_their_phases_without_gathers(case):
    """Pooling and depthwise convolutions with a stride: a tile of vector accumulators fed by
    whole-vector loads of the phase copy, and the copy itself reads the strided input
    contiguously (a masked load and a shuffle, not a gather) in the LLVM code."""
    compiled = loom.compile(STRIDED_WINDOWS[case]())
    if not compiled.target.masked_loads_are_safe:
        pytest.skip("the target's strided loads are gathers: left to group_schedules.py")
    reads = [  # each accumulator update's vector reads of the data (not of the accumulator)
        [ld for ld in loads_in(store.value) if ld.buffer is not store.buffer and ld.dtype.lanes > 1]
        for store in reduction_updates(conv_kernel(compiled))
    ]
    reads = [data for data in reads if data]  # (an average's count of valid elements reads none)
    assert len(reads) >= 4, len(reads)
    for data in reads:
        assert all(ld.predicate is None for ld in data), data
        assert all(ld.indices[0].stride.value == 1 for ld in data), [ld.indices for ld in data]
    assert "llvm.masked.gather" not in compiled.module.get_source("ll")


ZEN3 = HostCPU(32, "znver3")
"""AVX2: 16 registers of 8 floats."""

AVX2 = "llvm -mcpu=haswell -mattr=+avx2"
"""A target of 16 registers of 8 floats that runs on any AVX2 machine."""

ZEN4 = HostCPU(64, "znver4")
"""AVX-512 run as two 256-bit halves (conv_schedules.HALF_WIDTH_CORES)."""

ZEN5 = HostCPU(64, "znver5")
"""AVX-512 at full width (as an Intel AVX-512 core)."""

CPUS = {"avx2": ZEN3, "zen4": ZEN4, "zen5": ZEN5}
"""CPUs whose schedules are checked whatever this machine's is (the cost model's choice
depends on the registers: tests/graph/test_pack_conv_weights.py pins them alike)."""


def scheduled_conv(x_shape, w_shape, attrs, target, packed=False):
    """Conv(x, w, b) of `attrs` (ONNX's) as conv_schedules.py schedules it for `target`: the
    schedule and the node (its weights in the blocks pack_conv_weights asks for, if `packed`)."""
    s, node = unscheduled_conv(x_shape, w_shape, attrs, target, packed)
    conv_schedules.schedule(s, target)
    return s, node


def unscheduled_conv(x_shape, w_shape, attrs, target=None, packed=False):
    """The default schedule of Conv(x, w, b) of `attrs`, and its node (see scheduled_conv)."""
    attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
    node = Node("Conv", ("x", "w", "b"), ("conv",), attrs)
    constants = {"w": np.zeros(w_shape, "float32"), "b": np.zeros(w_shape[:1], "float32")}
    graph = Graph(("x",), ("conv",), (node,), constants, {"x": TensorType(x_shape, "float32")})
    graph = infer_types(graph)
    if packed:
        graph = pack_conv_weights(graph, target)
    node = graph.nodes[0]
    tensors = [placeholder(graph.type_of(v).shape, name=v) for v in node.inputs]
    outputs = OPERATORS.get("Conv").compute(node, tensors, {}, [graph.type_of("conv")])
    return te.create_schedule([t.op for t in outputs]), node


def conv_schedule(x_shape, w_shape, attrs, target):
    """The stages of Conv(x, w, b) of `attrs` (ONNX's) as conv_schedules.py schedules them for
    `target`: whether its loops were changed, by name."""
    s, _ = scheduled_conv(x_shape, w_shape, attrs, target)
    return {st.op.name: bool(st.relations) for st in s.stages}


@pytest.mark.parametrize("cpu", list(CPUS))
@pytest.mark.parametrize("case", FLAT_GRIDS)
def test_every_cpu_computes_these_on_a_flat_grid(case, cpu):
    """The flat grids below are each CPU's choice, not only this machine's: the cost model
    (conv_schedules._choose) takes the grid over rows of whole vectors and over channels in
    the lanes for AVX2 and for AVX-512 (half or full width) alike."""
    x_shape, w_shape, attrs, _, _ = CONVS[case]
    stages = conv_schedule(x_shape, w_shape, attrs, CPUS[cpu])
    # the grid's tiles, and their accumulators (the ones test_rows_narrower_than_whole_...
    # finds updated); no channels in the lanes (`conv.sum.lanes`)
    assert stages.get("conv.sum.flat") and "conv.sum.flat.local" in stages, stages
    assert not any(name.endswith(".lanes") for name in stages), stages


def test_a_long_reduction_takes_the_flat_grid_for_more_accumulators():
    """Rows of 56 = 7 vectors of 8 allow no AVX2 tile of rows beyond 8 accumulators, too few
    for a long reduction (conv_schedules.LONG_REDUCTION_STEPS): resnet18's 3x3 convolution of
    64 channels (576 steps) takes the flat grid's tile of 12; of 16 input channels (144
    steps), it keeps its rows."""
    x_shape, w_shape, attrs, _, _ = CONVS["resnet 3x3"]
    assert 64 * 9 >= conv_schedules.LONG_REDUCTION_STEPS > 16 * 9
    long = conv_schedule(x_shape, w_shape, attrs, CPUS["avx2"])
    assert long.get("conv.sum.flat"), long
    short = conv_schedule((1, 16, 56, 56), (64, 16, 3, 3), attrs, CPUS["avx2"])
    assert "conv.sum.flat" not in short, short
    assert not any(name.endswith(".lanes") for name in short), short


def output_splits(x_shape, w_shape, target, **attrs):
    """The weights' block and the factors by which conv_schedules.py splits the output's
    channels and columns for `target` (None: not split)."""
    s, node = scheduled_conv(x_shape, w_shape, attrs, target, packed=True)
    tiled = next(st for st in s.stages if st.op.name == "conv.sum")  # the output's tiles
    _, m, _, ow = tiled.op.axis
    factors = {rel.parent: rel.factor for rel in tiled.relations if hasattr(rel, "factor")}
    return node.attr(WEIGHT_BLOCK), factors.get(m), factors.get(ow)


@pytest.mark.parametrize(
    "x_shape, filters, kernel, want",
    [
        ((1, 576, 14, 14), 72, 1, (8, 8, 14)),  # a long projection: the whole row
        ((1, 384, 14, 14), 40, 1, (8, 8, 14)),
        ((1, 64, 14, 14), 72, 1, (2, None, 8)),  # an expansion (a short reduction): a grid
        ((1, 256, 12, 12), 40, 1, (4, None, 8)),  # no row of 9 accumulators fits: a grid
        ((1, 256, 14, 14), 256, 3, (16, 16, 2)),  # a 3x3 convolution
    ],
)
def test_a_long_projection_takes_a_whole_row_when_one_row_has_too_few_chains(
    x_shape, filters, kernel, want
):
    """conv_schedules._row_stream on AVX2: a 1x1 convolution of at least LONG_REDUCTION_STEPS
    input channels at 14x14 whose channels are not in blocks of two registers (those lay
    their pixels end to end: `test_avx2_lays_a_small_pointwise_output_end_to_end`) takes 8
    channels x the 14-pixel row (the cost model's 16 x 2 x 2 read two rows' lines a step:
    measured 16-19 % slower), and its weights come in blocks of 8; for an expansion, a row
    of 12 pixels (96 accumulators, no tile of one row has 9 within the budget but the whole
    row's exceed the registers) and a 3x3 convolution, the cost model's tile stays."""
    w_shape = (filters, x_shape[1], kernel, kernel)
    pads = (kernel // 2,) * 4
    assert output_splits(x_shape, w_shape, ZEN3, pads=pads) == want
    if want[2] == 14:  # AVX-512 has the registers for the cost model's own tiles
        assert output_splits(x_shape, w_shape, ZEN4, pads=pads)[2] != 14


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs",
    [
        ((1, 3, 224, 224), (64, 3, 7, 7), {"strides": [2, 2], "pads": [3] * 4}),  # resnet18
        ((1, 32, 112, 112), (16, 32, 1, 1), {}),  # mobilenet_v2's first projection
    ],
)
def test_of_equal_scores_the_tile_holding_fewer_input_vectors_wins(x_shape, w_shape, attrs):
    """On AVX2 4 channels x 1 row x 2 vectors and 2 x 2 x 2 score alike (8 accumulators, 6
    loads a step); the first holds 2 input vectors across a step, not 4 (measured: the stem
    6 % faster so)."""
    s, _ = scheduled_conv(x_shape, w_shape, attrs, ZEN3)
    tiled = next(st for st in s.stages if st.op.name == "conv.sum")
    _, m, oh, ow = tiled.op.axis
    factors = {rel.parent: rel.factor for rel in tiled.relations if hasattr(rel, "factor")}
    assert (factors.get(m), factors.get(oh), factors.get(ow)) == (4, 1, 16), factors


def flat_pixels(x_shape, w_shape, target, **attrs):
    """The weights' block, the pixels the channel tile's accumulators cover (its output's rows
    laid end to end: conv_channels.channels_last) and the steps of its reduction's blocks, as
    conv_schedules.py schedules Conv for `target`; None when the pixels are not end to end."""
    s, node = scheduled_conv(x_shape, w_shape, attrs, target, packed=True)
    lanes = next((st for st in s.stages if st.op.name.endswith(".lanes")), None)
    if lanes is None or len(lanes.op.shape) != 4:  # (n, channel block, pixel, channel)
        return None
    steps = lanes.op.reduce_axis[0]
    blocks = [rel.factor for rel in lanes.relations if getattr(rel, "parent", None) is steps]
    return node.attr(WEIGHT_BLOCK), int(lanes.op.shape[2]), (blocks or [None])[0]


@pytest.mark.parametrize(
    "x_shape, filters, want",
    [
        ((1, 960, 7, 7), 320, (16, 50, 96)),  # 16 channels x 5 pixels, 50 for 49
        ((1, 320, 7, 7), 1280, (16, 50, 80)),
        ((1, 576, 14, 14), 96, (16, 198, 96)),  # x 6 pixels: a long reduction needs 9 chains
        ((1, 64, 14, 14), 384, (16, 196, None)),  # x 4: 8 chains suffice; no blocks
        ((1, 256, 10, 10), 128, (16, 100, 128)),  # ties: blocks of 128 steps, not 64
        ((1, 262, 7, 7), 32, (16, 50, None)),  # no divisor of 262 from 64 to 128
        ((1, 576, 14, 14), 72, None),  # 72 channels: not in blocks of 16
        ((1, 192, 28, 28), 32, None),  # 784 pixels (measured slower)
        ((1, 96, 1, 1), 384, None),  # one pixel
        ((1, 96, 14, 14), 48, None),  # a 3x3 convolution (below)
    ],
)
def test_avx2_lays_a_small_pointwise_output_end_to_end(x_shape, filters, want):
    """conv_schedules._flat_pixels: on AVX2, a 1x1 convolution of stride 1 without padding
    at 7x7 to 14x14 takes two registers of channels x consecutive pixels of its rows laid end
    to end, its long reductions in blocks; Zen 4's AVX-512 keeps its cost model's tiles (a
    full-width core: test_a_full_width_avx512_core_lays_a_long_pointwise_output_end_to_end)."""
    kernel = 3 if (x_shape, filters) == ((1, 96, 14, 14), 48) else 1
    w_shape = (filters, x_shape[1], kernel, kernel)
    assert flat_pixels(x_shape, w_shape, ZEN3) == want
    assert flat_pixels(x_shape, w_shape, ZEN4) is None
    assert flat_pixels(x_shape, w_shape, ZEN3, strides=(2, 2)) is None
    assert flat_pixels(x_shape, w_shape, ZEN3, pads=(1, 1, 1, 1)) is None


@pytest.mark.parametrize(
    "x_shape, filters, want",
    [
        ((1, 384, 14, 14), 64, (32, 196, 96)),  # rows of 14: 2 registers x 7 pixels either way
        ((1, 576, 14, 14), 96, (32, 196, 96)),
        ((1, 960, 7, 7), 160, (32, 49, 96)),
        ((1, 320, 7, 7), 1280, (32, 49, 80)),
        ((1, 64, 14, 14), 384, None),  # a short reduction: no step blocks
        ((1, 384, 10, 10), 256, None),  # rows of 10 admit 2 x 10 pixels: 20 accumulators
    ],
)
def test_a_full_width_avx512_core_lays_a_long_pointwise_output_end_to_end(x_shape, filters, want):
    """conv_schedules._wide_flat_pixels: on a full-width AVX-512 core, a 1x1 convolution of a
    long reduction whose rows admit no wider tile than the flat axis takes the flat tile with
    step blocks (two registers of channels x 7 pixels); Zen 4 (halves) does not."""
    w_shape = (filters, x_shape[1], 1, 1)
    assert flat_pixels(x_shape, w_shape, ZEN5) == want
    assert flat_pixels(x_shape, w_shape, ZEN4) is None


def output_stores(x_shape, w_shape, attrs, cpu, target):
    """(lanes, stride) of the vector stores of Conv(x, w, b)'s output, scheduled for `cpu`."""
    s, _ = scheduled_conv(x_shape, w_shape, attrs, cpu, packed=True)
    args = [st.op.output(0) for st in s.stages if isinstance(st.op, PlaceholderOp)]
    args += [st.op.output(0) for st in s.stages if st.is_output]
    found = set()

    def record(n):
        if isinstance(n, BufferStore) and n.buffer.name == "conv.sum" and n.value.dtype.lanes > 1:
            index = n.indices[0]
            found.add(
                (n.value.dtype.lanes, int(index.stride.value) if isinstance(index, Ramp) else None)
            )

    for f in loom.lower(s, args, target=target):
        post_order_visit(f.body, record)
    return found


@pytest.mark.parametrize(
    "x_shape, w_shape, want",
    [
        ((1, 64, 56, 56), (64, 64, 3, 3), {(8, 1)}),  # 32 channels x 8 pixels: a channel's 8
        ((1, 128, 28, 28), (128, 128, 3, 3), {(4, 1)}),  # 2 rows x 4 pixels
        ((1, 256, 14, 14), (256, 256, 3, 3), {(16, 196)}),  # 7 pixels: a pixel's 16 channels
    ],
)
def test_a_channel_tile_of_whole_vectors_of_pixels_stores_a_channels_pixels(x_shape, w_shape, want):
    """conv_schedules.PIXEL_VECTOR_WIDTHS: a channel tile whose rows are 4, 8 or 16 pixels
    stores each channel's pixels as one vector; of 7, each pixel's channels across the planes."""
    attrs = {"pads": [1] * 4}
    assert output_stores(x_shape, w_shape, attrs, ZEN5, "llvm -mcpu=znver5") == want


@pytest.mark.parametrize(
    "x_shape, filters, channel_tile",
    [
        ((1, 192, 28, 28), 32, True),  # a grid of 2 channels a tile: the data read 16 times
        ((1, 96, 28, 28), 32, True),
        ((1, 32, 28, 28), 192, False),  # the channel tile would compute 32 of 192 channels
        ((1, 64, 56, 56), 32, False),  # a grid of 4 channels a tile (measured faster)
    ],
)
def test_a_channel_tile_of_all_the_channels_wins_ties_against_tiles_of_two(
    x_shape, filters, channel_tile
):
    """conv_schedules.ONE_BLOCK_CHANNEL_GAIN on a full-width AVX-512 core; Zen 4 keeps the
    grid. The channel tile's 2 x 4 pixels of 32 channels shares out bands of rows at two
    threads (0.6 M of work: over CONV_PARALLEL_MIN_WORK)."""
    w_shape = (filters, x_shape[1], 1, 1)
    stages = conv_schedule(x_shape, w_shape, {}, ZEN5)
    assert ("conv.sum.lanes" in stages) == channel_tile, stages
    assert "conv.sum.lanes" not in conv_schedule(x_shape, w_shape, {}, ZEN4)
    if channel_tile:
        assert parallel_loops(x_shape, w_shape, {}, ZEN5, packed=True)


AVX512 = "llvm -mcpu=skylake-avx512"
"""A full-width AVX-512 target that runs on any AVX-512 machine."""


def test_a_wide_flat_tile_with_a_residual_matches_onnxruntime():
    """mobilenet_v2's projection 384 -> 64 at 14x14 with its residual Add, compiled for a
    full-width AVX-512 core (the flat tile in step blocks), at 1 and 2 threads."""
    with open("/proc/cpuinfo") as cpuinfo:
        if " avx512f" not in cpuinfo.read():
            pytest.skip("this machine runs no AVX-512 code")
    x_shape, w_shape = (1, 384, 14, 14), (64, 384, 1, 1)
    assert flat_pixels(x_shape, w_shape, HostCPU(64, "skylake-avx512")) == (32, 196, 96)
    x = floats(*x_shape)
    inits = {
        "w": floats(*w_shape) * np.float32(1 / np.sqrt(384)),
        "b": floats(64),
        "r": floats(1, 64, 14, 14),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["conv"]),
        helper.make_node("Add", ["conv", "r"], ["out"]),
    ]
    before = loom.runtime.num_threads()
    try:
        loom.runtime.set_num_threads(1)
        compiled = compiled_matches_onnxruntime(make_model(nodes, x, inits), x, target=AVX512)
        one = compiled(x=x)["out"]
        loom.runtime.set_num_threads(2)
        np.testing.assert_allclose(compiled(x=x)["out"], one, rtol=1e-6, atol=1e-6)
    finally:
        loom.runtime.set_num_threads(before)


def epilogue_stores(x_shape, filters):
    """(lanes, stride) of the vector stores of a 1x1 Conv's output, scheduled for Zen 3."""
    return output_stores(x_shape, (filters, x_shape[1], 1, 1), {}, ZEN3, AVX2)


@pytest.mark.parametrize(
    "x_shape, filters, want",
    [
        ((1, 64, 14, 14), 384, {(4, 1)}),  # no step blocks: a channel's 4 pixels
        ((1, 576, 14, 14), 96, {(8, 196)}),  # step blocks: 8 channels a register, 8 planes
    ],
)
def test_a_flat_pixel_tile_stores_a_channels_pixels_as_one_vector(x_shape, filters, want):
    """conv_schedules._schedule_flat_pixels: without step blocks the epilogue stores each
    channel's pixels (consecutive in the output) as one vector; with them, one channel a lane."""
    assert epilogue_stores(x_shape, filters) == want


@pytest.mark.parametrize("case", FLAT_PIXELS)
def test_pixels_end_to_end_match_onnxruntime_on_avx2(case):
    """The CONVS cases of `_flat_pixels`, compiled for AVX2 whatever this machine's vectors
    (test_convolutions_match_onnxruntime compiles them for this machine)."""
    with open("/proc/cpuinfo") as cpuinfo:
        if " avx2" not in cpuinfo.read():
            pytest.skip("this machine runs no AVX2 code")
    x_shape, w_shape, attrs, bias, activation = CONVS[case]
    x = floats(*x_shape)
    w = floats(*w_shape) * np.float32(1 / np.sqrt(np.prod(w_shape[1:])))
    b = floats(w_shape[0]) if bias else None
    assert flat_pixels(x_shape, w_shape, ZEN3, **attrs) is not None
    compiled_matches_onnxruntime(conv_model(x, w, b, activation, **attrs), x, target=AVX2)


@pytest.mark.parametrize("cpu, want", [("avx2", False), ("zen4", True), ("zen5", False)])
def test_avx2_takes_a_channel_tile_over_a_strided_flat_grid_of_as_good_a_score(cpu, want):
    """resnet18's 3x3/2 convolution 64 -> 128 from 56x56: the flat grid's tile (4 channels x 3
    vectors) scores 7.7 on AVX2, the channel tile (16 channels x 4 pixels) 8.0, less than
    CHANNEL_MIN_GAIN better; against a strided grid STRIDED_FLAT_CHANNEL_GAIN suffices there
    (measured 1.2 times faster). Zen 4 keeps the grid; a full-width AVX-512 core takes the
    channel tile too, whose loads split no cache line (SPLIT_LOADS_CHANNEL_GAIN)."""
    x_shape, w_shape = (1, 64, 56, 56), (128, 64, 3, 3)
    attrs = {"pads": [1] * 4, "strides": [2, 2]}
    stages = conv_schedule(x_shape, w_shape, attrs, CPUS[cpu])
    assert bool(stages.get("conv.sum.flat")) == want, stages
    if cpu == "avx2":
        assert output_splits(x_shape, w_shape, CPUS[cpu], pads=(1,) * 4, strides=(2, 2)) == (
            16,
            16,
            4,
        )


@pytest.mark.parametrize("cpu, lanes", [("avx2", False), ("zen4", False), ("zen5", True)])
def test_a_full_width_avx512_core_takes_channels_in_the_lanes_where_grid_loads_split_lines(
    cpu, lanes
):
    """resnet18's 3x3 convolution of 64 channels at 56x56: the flat grid's input vectors, as
    wide as a cache line on AVX-512, start at every lane offset of the window and cross a line
    at nearly every load; the channel tile (16.0 useful lanes a cycle, the grid's 15.6) loads
    none that cross one and wins from an equal score on a core that runs 512 bits at once
    (SPLIT_LOADS_CHANNEL_GAIN: measured 0.99x onnxruntime against the grid's 0.91x on an Intel
    Xeon). Zen 4 (halves) and AVX2 keep the grid."""
    x_shape, w_shape, attrs, _, _ = CONVS["resnet 3x3"]
    stages = conv_schedule(x_shape, w_shape, attrs, CPUS[cpu])
    assert any(name.endswith(".lanes") for name in stages) == lanes, stages


def test_a_short_reduction_keeps_its_tile_of_rows_on_full_width_avx512():
    """mobilenet_v2's stem, 3x3/2 of 3 channels (27 steps, under SPLIT_LOADS_MIN_STEPS): its
    channel tile was 1.5 times slower than its tile of rows."""
    attrs = {"pads": [1] * 4, "strides": [2, 2]}
    assert 3 * 9 < conv_schedules.SPLIT_LOADS_MIN_STEPS
    stages = conv_schedule((1, 3, 224, 224), (32, 3, 3, 3), attrs, CPUS["zen5"])
    assert not any(name.endswith(".lanes") for name in stages), stages


def test_near_ties_of_grid_tiles_go_to_fewer_l1_accesses_when_loads_split_lines():
    """24 channels at 20x20 (ppocrv4_det) has no channel tile; its grid's tiles of 6 channels
    x 3 vectors and 8 x 3 score within FLAT_SPLIT_BAND of each other, and the 8 make fewer L1
    accesses a multiply-add (FLAT_SPLIT_BAND), on a full-width AVX-512 core."""
    chosen = {cpu: chosen_tile((1, 24, 20, 20), (24, 24, 3, 3), CPUS[cpu]) for cpu in CPUS}
    assert chosen["zen5"][0].channels == 8, chosen
    assert chosen["zen4"][0].channels == 6, chosen  # its halves: no split loads counted


def tile_loops(x_shape, w_shape, target):
    """The loops of a 1x1 convolution's output stage around its register tile, outermost
    first."""
    s, _ = scheduled_conv(x_shape, w_shape, {}, target)
    (stage,) = [st for st in s.stages if st.op.name == "conv.sum"]
    return [v.var.name for v in stage.leaf_iter_vars if ".inner" not in v.var.name]


@pytest.mark.parametrize("cpu", list(CPUS))
def test_a_short_reduction_streaming_its_output_runs_each_channel_tile_over_all_rows(cpu):
    """mobilenet_v2's 1x1 16 -> 96 at 112x112: a 4.8 MB output (STREAMED_OUTPUT_BYTES) of 16
    steps (SHORT_REDUCTION_STEPS) from 784 KB of data (STREAMED_REREAD_BYTES): the channel
    tiles outermost (in the parallel loop), each over all the row tiles; the pointwise
    32 -> 64 at 112x112 reads 1.6 MB of data, which each channel tile would read again from
    memory: its row tiles stay outside, every channel tile inside reusing a row's data."""
    assert tile_loops((1, 16, 112, 112), (96, 16, 1, 1), CPUS[cpu]) == [
        "o0.o1.outer.fused",
        "o2.outer",
        "o3.outer",
    ]
    assert tile_loops((1, 32, 112, 112), (64, 32, 1, 1), CPUS[cpu]) == [
        "o0.o2.outer.fused",
        "o3.outer",
        "o1.outer",
    ]


def test_threads_of_a_channel_tile_with_few_blocks_share_out_bands_of_rows():
    """resnet18's 3x3 convolution of 64 channels at 56x56 in channel tiles of 32 (2 blocks,
    under MIN_PARALLEL_ITERATIONS): the parallel loop runs the row tiles outermost, so that each
    thread reads its band of the input (and of a residual), not the whole of it (a thread per
    block had run resnet18 1.1x slower at two threads)."""
    x_shape, w_shape, attrs, _, _ = CONVS["resnet 3x3"]
    s, _ = scheduled_conv(x_shape, w_shape, attrs, CPUS["zen5"])
    (stage,) = [st for st in s.stages if st.op.name == "conv.sum"]
    assert 64 // 32 < conv_schedules.MIN_PARALLEL_ITERATIONS
    assert stage.leaf_iter_vars[0].var.name == "o0.o2.outer.fused.o1.outer.fused.o3.outer.fused"
    # in a model, its padded copy too: each thread writes the rows it reads
    x, w = floats(*x_shape), floats(*w_shape)
    compiled = loom.compile(conv_model(x, w, floats(64), "Relu", **attrs), "llvm -mcpu=znver5")
    loops = [f.attr("parallel_loop", None) for f in conv_kernel(compiled)]
    assert loops[1:] == [
        "i0.i2.fused",
        "index0.index2.outer.fused.index1.outer.fused.index3.outer.fused",
    ]


def test_bands_of_rows_with_a_residual_match_onnxruntime():
    x, w, r = floats(1, 64, 56, 56), floats(64, 64, 3, 3), floats(1, 64, 56, 56)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4),
            helper.make_node("Add", ["c", "r"], ["a"]),
            helper.make_node("Relu", ["a"], ["y"]),
        ],
        "residual",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x.shape)),
            helper.make_tensor_value_info("r", onnx.TensorProto.FLOAT, list(r.shape)),
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(floats(64), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    compiled = loom.compile(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x, "r": r})[0]
    before = loom.runtime.num_threads()
    try:
        for threads in (1, 2):
            loom.runtime.set_num_threads(threads)
            np.testing.assert_allclose(compiled(x=x, r=r)["y"], want, rtol=1e-4, atol=1e-4)
    finally:
        loom.runtime.set_num_threads(before)


def parallel_loops(x_shape, w_shape, attrs, target, packed=False) -> list[str]:
    """The names of the parallel loops of Conv(x, w, b)'s schedule for `target`."""
    s, _ = scheduled_conv(x_shape, w_shape, attrs, target, packed)
    kinds = [(v, k) for st in s.stages for v, k in st.loop_kinds.items()]
    return [v.var.name for v, k in kinds if k == ForKind.PARALLEL]


@pytest.mark.parametrize("cpu", list(CPUS))
def test_convolutions_run_in_parallel_from_a_quarter_of_the_elementwise_work(cpu):
    """mobilenet_v2's depthwise 3x3 of 32 channels at 112x112 (451 K operations, under
    group_schedules.PARALLEL_MIN_WORK, over CONV_PARALLEL_MIN_WORK) runs in parallel; the same
    at 28x28 (28 K) does not."""
    attrs = {"pads": [1] * 4, "group": 32}
    assert parallel_loops((1, 32, 112, 112), (32, 1, 3, 3), attrs, CPUS[cpu])
    assert not parallel_loops((1, 32, 28, 28), (32, 1, 3, 3), attrs, CPUS[cpu])


def test_weights_outweighing_the_input_are_shared_out_by_blocks():
    """mobilenet_v2's 576 -> 160 at 7x7 on a full-width AVX-512 core: 5 blocks of 32 channels
    in the lanes (under MIN_PARALLEL_ITERATIONS), 368 KB of weights against 113 KB of input:
    the parallel loop is the blocks' own (each thread reads its blocks, and
    cpu_prefetch_weights finds the block loop), not bands of rows fused with them."""
    loops = parallel_loops((1, 576, 7, 7), (160, 576, 1, 1), {}, CPUS["zen5"], packed=True)
    assert loops == ["o0.o1.outer.fused"], loops


def test_channel_tiles_over_all_rows_match_onnxruntime():
    x, w = floats(1, 16, 112, 112), floats(96, 16, 1, 1)
    compiled_matches_onnxruntime(conv_model(x, w, floats(96), "Clip"), x)


def chosen_tile(x_shape, w_shape, target):
    """conv_schedules' choice for a 3x3 convolution (pads 1) of these shapes on `target`."""
    s, _ = unscheduled_conv(x_shape, w_shape, {"pads": (1,) * 4})
    (stage,) = [st for st in s.stages if st.op.name == "conv.sum"]
    return conv_schedules._chosen(s, stage, target)


@pytest.mark.parametrize("case", FLAT_GRIDS)
def test_rows_narrower_than_whole_vectors_are_computed_on_a_flat_grid(case):
    """28 = 3.5 vectors of 8: the accumulators are the flat grid's (`conv.sum.flat`), fed by
    the data's flat copy (`.flat`), the epilogue reading the grid. On any x86 CPU: see
    test_every_cpu_computes_these_on_a_flat_grid."""
    x_shape, w_shape, attrs, bias, activation = CONVS[case]
    x, w = floats(*x_shape), floats(*w_shape)
    compiled = loom.compile(conv_model(x, w, floats(w_shape[0]), activation, **attrs))
    updates = reduction_updates(conv_kernel(compiled))
    assert updates and all(st.buffer.name == "conv.sum.flat.local" for st in updates), updates
    copied = {".flat"} if case not in READ_AS_IS else {"x"}  # see the test below
    for st in updates:
        data = [ld for ld in loads_in(st.value) if ld.buffer is not st.buffer]
        assert data and all(
            any(ld.buffer.name.endswith(c) for c in copied) for ld in data if ld.dtype.lanes > 1
        ), [ld.buffer.name for ld in data]


READ_AS_IS = (
    "1x1 flat grid 28x28",
    "1x1 flat grid 14x14, more inputs",
    "1x1 flat grid 13x13, two images",
)


@pytest.mark.parametrize(
    "case, copied", [(case, False) for case in READ_AS_IS] + [("1x1 flat grid", True)]
)
def test_a_grid_laid_out_as_the_data_reads_the_data_itself(case, copied):
    """A 1x1 convolution without padding whose computed lanes stay inside the data (28x28:
    784 lanes, whole tiles) reads its argument; so does one whose grid reads past the data's
    last row (14x14: 196 outputs, 200 lanes computed) when the data has at least as many
    channels as the output (the lanes past it read as zeros); with fewer (24 -> 48), from a
    copy with zero rows."""
    x_shape, w_shape, attrs, bias, activation = CONVS[case]
    x, w = floats(*x_shape), floats(*w_shape)
    m = conv_model(x, w, floats(w_shape[0]) if bias else None, activation, **attrs)
    compiled = compiled_matches_onnxruntime(m, x)
    func = next(f for f in compiled.lowered.module if f.name in compiled.kernels)
    buffers = set()
    post_order_visit(
        func.body, lambda n: buffers.add(n.buffer.name) if isinstance(n, BufferStore) else None
    )
    assert any(name.endswith("x.flat") for name in buffers) == copied, buffers
    # the data is read by whole contiguous vectors (masked past its last row), not gathered
    data = [
        ld
        for st in reduction_updates(conv_kernel(compiled))
        for ld in loads_in(st.value)
        if ld.dtype.lanes > 1 and ld.buffer is not st.buffer
    ]
    assert data and all(isinstance(ld.indices[0], Ramp) for ld in data), data
    assert any(ld.predicate is not None for ld in data) == (case in MASKED_TAIL), data


@pytest.mark.parametrize("case", CHANNEL_TILES)
def test_narrow_outputs_put_their_channels_in_the_lanes(case):
    """14- and 7-wide outputs (resnet18's last stages): the accumulators are `.lanes`
    vectors of output channels, each update one contiguous unmasked weight vector (packed in
    blocks of the tile's channels) times one input element broadcast; several per step."""
    x_shape, w_shape, attrs, bias, activation = CONVS[case]
    x, w = floats(*x_shape), floats(*w_shape)
    b = floats(w_shape[0]) if bias else None
    compiled = loom.compile(conv_model(x, w, b, activation, **attrs), target="llvm")
    if compiled.target.vector_bytes != 64:
        pytest.skip("the cost model picks this tile for 16-lane registers")
    updates = reduction_updates(conv_kernel(compiled))
    assert len(updates) >= 7, len(updates)
    for st in updates:
        assert st.buffer.name.endswith(".lanes"), st.buffer.name
        reads = [ld for ld in loads_in(st.value) if ld.buffer is not st.buffer]
        vectors = [ld for ld in reads if ld.dtype.lanes > 1]
        assert len(vectors) == 1 and vectors[0].predicate is None, vectors
        assert isinstance(vectors[0].indices[0], Ramp) and vectors[0].indices[0].stride.value == 1
        assert "blocked" in vectors[0].buffer.name, vectors[0].buffer.name
        assert [ld for ld in reads if ld.dtype.lanes == 1], "no broadcast input element"


@pytest.mark.parametrize("case", ["1x1 stride 2", "1x1 stride 2 pads"])
def test_a_strided_1x1_convolution_reads_its_subsampled_data(case):
    """Not the stride's phases (it reads only one of them, a quarter of their cache lines)."""
    x_shape, w_shape, attrs, bias, activation = CONVS[case]
    x, w = floats(*x_shape), floats(*w_shape)
    compiled = loom.compile(conv_model(x, w, None, None, **attrs))
    updates = reduction_updates(conv_kernel(compiled))
    assert updates
    for st in updates:
        data = [ld for ld in loads_in(st.value) if ld.buffer is not st.buffer]
        assert data and all(ld.buffer.name.endswith(".sub") for ld in data if ld.dtype.lanes > 1)


def test_max_pooling_takes_the_larger_of_the_maximum_and_the_next_element():
    """`acc > x ? acc : x` (x86's maxps, as onnxruntime computes it; ONNX does not say how
    MaxPool treats NaN): a NaN followed in its window by numbers is dropped, one window's
    last element, a NaN, is the result."""
    x = np.arange(1 * 2 * 8 * 64, dtype="float32").reshape(1, 2, 8, 64)
    x[0, 0, 0, 0] = np.nan  # the first element of the first window
    x[0, 1, 1, 1] = np.nan  # the last element of the first window (2x2) of channel 1
    node = helper.make_node("MaxPool", ["x"], ["out"], kernel_shape=[2, 2], strides=[2, 2])
    got = loom.compile(make_model([node], x), target="llvm")(x=x)["out"]
    assert got[0, 0, 0, 0] == x[0, 0, 1, 1]
    assert np.isnan(got[0, 1, 0, 0])
    want = x.reshape(1, 2, 4, 2, 32, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(got[0, 0, 1:], want[0, 0, 1:])


def test_the_conv_loop_is_multiply_adds_on_full_vectors():
    """A regression to scalar code, or to vectors LLVM splits into pieces, fails here."""
    x, w = floats(1, 64, 56, 56), floats(64, 64, 3, 3)
    compiled = loom.compile(conv_model(x, w, floats(64), "Relu", pads=[1] * 4))
    target = compiled.target
    if "avx512f" not in str(target) and not getattr(target, "vector_bytes", 0) >= 32:
        pytest.skip("a host without AVX2 or AVX-512")
    asm = compiled.module.get_source("asm")
    fmas = [line for line in asm.splitlines() if "vfmadd" in line and "ps" in line]
    assert len(fmas) >= 64, len(fmas)
    assert all("%xmm" not in line for line in fmas), [ln for ln in fmas if "%xmm" in ln][:4]


def test_a_wide_window_keeps_its_rows_a_loop_when_unrolled_they_would_spill():
    """resnet18's 7x7/2 stem on AVX2: 8 accumulators x 49 window steps unrolled spilled 64
    vectors to the stack (conv_schedules.MAX_UNROLLED_STEPS); its columns unroll, its rows
    stay a loop."""
    attrs = {"kernel_shape": [7, 7], "strides": [2, 2], "pads": [3] * 4}
    s, _ = scheduled_conv((1, 3, 224, 224), (64, 3, 7, 7), attrs, CPUS["avx2"])
    local = next(st for st in s.stages if st.op.name == "conv.sum.local")
    kinds = {iv.name: kind for iv, kind in local.loop_kinds.items()}
    assert [r.var.name for r in local.op.reduce_axis] == ["rc", "rk0", "rk1"]
    assert kinds.get("rk1") == ForKind.UNROLLED and "rk0" not in kinds, kinds
    # a 3x3 window (its flat grid's 12 accumulators x 9 steps) stays unrolled whole
    attrs = {"kernel_shape": [3, 3], "pads": [1] * 4}
    s, _ = scheduled_conv((1, 64, 56, 56), (64, 64, 3, 3), attrs, CPUS["avx2"])
    local = next(st for st in s.stages if st.op.name.endswith(".local"))
    kinds = {iv.name: kind for iv, kind in local.loop_kinds.items()}
    assert kinds.get("rk0") == kinds.get("rk1") == ForKind.UNROLLED, kinds


def test_the_padded_input_is_computed_once_outside_the_reduction():
    x, w = floats(1, 16, 30, 32), floats(16, 16, 3, 3)
    compiled = loom.compile(conv_model(x, w, None, None, pads=[1] * 4))
    funcs = conv_kernel(compiled)
    updates = reduction_updates(funcs)
    assert updates
    assert all(
        "pad" in ld.buffer.name
        for st in updates
        for ld in loads_in(st.value)
        if ld.dtype.lanes > 1 and ld.buffer is not st.buffer
    )


def test_the_reduction_loops_are_outside_the_tile():
    x, w = floats(1, 16, 32, 32), floats(32, 16, 3, 3)
    compiled = loom.compile(conv_model(x, w, floats(32), "Relu", pads=[1] * 4))
    func = next(f for f in compiled.lowered.module if f.name in compiled.kernels)
    order = []  # loop names from the outside in, along the reduction's nest
    post_order_visit(
        func.body, lambda n: order.append((n.loop_var.name, n.kind)) if isinstance(n, For) else None
    )
    names = [name for name, _ in order]
    # post order: inner loops first; the vector loop of the accumulators comes before rc
    rc = names.index("rc")
    inner = order[:rc]
    assert any(kind == ForKind.VECTORIZED for _, kind in inner), order
    assert any(kind == ForKind.UNROLLED for _, kind in inner), order


# -- what it recognizes ---------------------------------------------------------------------------


def test_a_matrix_product_is_not_a_convolution():
    a = te.placeholder((64, 64), "float32", name="a")
    b = te.placeholder((64, 64), "float32", name="b")
    k = te.reduce_axis(64, "k")
    c = te.compute((64, 64), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    s = te.create_schedule(c.op)
    conv_schedules.schedule(s, loom.target.Target("llvm"))
    assert not s[c].relations and not s[c].loop_kinds


def test_a_four_dimensional_reduction_without_a_window_is_left_alone():
    x = te.placeholder((1, 8, 16, 16), "float32", name="x")
    r = te.reduce_axis(8, "r")
    y = te.compute((1, 8, 16, 16), lambda n, c, h, w: te.sum(x[n, r, h, 0], axis=r), name="y")
    s = te.create_schedule(y.op)
    assert isinstance(y.op.body, Reduce)
    conv_schedules.schedule(s, loom.target.Target("llvm"))
    assert not s[y].relations and not s[y].loop_kinds


def flipped_window():
    """A 3x3 convolution of 8 channels into 12 at 28x28 whose window is read backwards; its
    schedule, the data, weights and output tensors.

    12 output channels: no multiple of a register's lanes (8 with AVX2, 16 with AVX-512), so
    every CPU computes it on the flat grid; 16 are two AVX2 registers of channels in the
    lanes (conv_channels.py: 8.0 outputs a cycle to the grid's 7.5)."""
    x = te.placeholder((1, 8, 30, 30), "float32", name="x")
    w = te.placeholder((12, 8, 3, 3), "float32", name="w")
    rc, kh, kw = te.reduce_axis(8, "rc"), te.reduce_axis(3, "kh"), te.reduce_axis(3, "kw")
    y = te.compute(
        (1, 12, 28, 28),
        lambda n, m, oh, ow: te.sum(
            x[n, rc, oh + 2 - kh, ow + 2 - kw] * w[m, rc, kh, kw], axis=[rc, kh, kw]
        ),
        name="y",
    )
    return te.create_schedule(y.op), x, w, y


def on_a_flat_grid(s) -> bool:
    return any(st.op.name == "y.flat" and st.relations for st in s.stages)


@pytest.mark.parametrize("cpu", list(CPUS))
def test_every_cpu_computes_the_flipped_window_on_a_flat_grid(cpu):
    s, *_ = flipped_window()
    conv_schedules.schedule(s, CPUS[cpu])
    assert on_a_flat_grid(s)


def test_a_flipped_window_on_a_flat_grid():
    """A window read backwards (`x[oh + 2 - kh]`, as a transposed convolution reads): the
    flat grid's copy must still cover its reach (its offsets are largest at kh = 0)."""
    s, x, w, y = flipped_window()
    conv_schedules.schedule(s, loom.target.Target("llvm"))
    assert on_a_flat_grid(s)
    f = loom.build(s, [x, w, y], target="llvm", name="flipped")
    xs, ws = floats(1, 8, 30, 30), floats(12, 8, 3, 3)
    got = np.zeros((1, 12, 28, 28), "float32")
    f(xs, ws, got)
    windows = np.lib.stride_tricks.sliding_window_view(xs[0], (3, 3), axis=(1, 2))
    want = np.einsum("chwij,mcij->mhw", windows[:, :, :, ::-1, ::-1], ws)[None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
