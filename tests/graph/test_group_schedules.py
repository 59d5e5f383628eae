"""The llvm target's schedules for model kernels (loom/backend/cpu/group_schedules.py): every
fusion pattern compiled and compared with onnxruntime, and the loops checked for what the
schedule promises (parallel with enough work, vector code where accesses are contiguous)."""

import numpy as np
import pytest

import loom
from loom.backend.cpu import LLVMBackend, conv_schedules, group_schedules, reduce_schedules
from loom.graph.ir import Graph, Node, TensorType
from loom.graph.ops import OPERATORS
from loom.graph.passes.infer_types import infer_types
from loom.ir.expr import BufferLoad, Call, Ramp
from loom.ir.stmt import BufferStore, For, ForKind
from loom.ir.visitor import post_order_visit
from loom.te.operation import placeholder
from loom.te.schedule import create_schedule
from loom.te.tensor import ComputeOp, Reduce

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(0)


REAL_PARALLEL_MIN_WORK = group_schedules.PARALLEL_MIN_WORK


@pytest.fixture(autouse=True)
def small_parallel_threshold(monkeypatch):
    """Kernels of a few thousand elements run in parallel here, so that the tests stay small
    (test_parallel_only_with_enough_work checks the real threshold)."""
    monkeypatch.setattr(group_schedules, "PARALLEL_MIN_WORK", 1 << 12)
    monkeypatch.setattr(conv_schedules, "CONV_PARALLEL_MIN_WORK", 1 << 12)


def make_model(nodes, inputs, outputs, initializers=None, opset=17):
    """A model of `nodes`; `inputs` are (name, example array) pairs, typed by the arrays."""
    initializers = initializers or {}
    graph = helper.make_graph(
        nodes,
        "m",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
            for n, x in inputs
        ],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def compiled_matches_onnxruntime(m, inputs, rtol=1e-5, atol=1e-5):
    feeds = dict(inputs)
    compiled = loom.compile(m, target="llvm")
    got = compiled(**feeds)
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got.values(), want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return compiled


def kernels(compiled):
    """The kernels' PrimFuncs as scheduled (before the lowering passes), by name."""
    return {f.name: f for f in compiled.lowered.module if f.name in compiled.kernels}


def loop_kinds(func) -> list[ForKind]:
    kinds = []
    post_order_visit(func.body, lambda n: kinds.append(n.kind) if isinstance(n, For) else None)
    return kinds


def vector_accesses(compiled, kernel: str) -> list:
    """The vector loads and stores of `kernel` (and its parallel tasks) after lowering for the
    target: what the code generator gets."""
    lowered = loom.lower(compiled.lowered.module, target=compiled.target)
    found = []

    def record(n):
        if isinstance(n, BufferLoad) and n.dtype.lanes > 1:
            found.append(n)
        elif isinstance(n, BufferStore) and n.value.dtype.lanes > 1:
            found.append(n)

    for f in lowered:
        if f.name == kernel or f.name.startswith(kernel + "_task_"):
            post_order_visit(f.body, record)
    return found


def the_kernel(compiled, *ops):
    """The name of the one kernel computing a group of exactly these operators."""
    names = [g["kernel"] for g in compiled.info.groups if tuple(g["ops"]) == tuple(ops)]
    assert len(names) == 1, (ops, [g["ops"] for g in compiled.info.groups])
    return names[0]


def assert_parallel_and_vector(compiled, kernel, contiguous=True):
    kinds = loop_kinds(kernels(compiled)[kernel])
    assert ForKind.PARALLEL in kinds, kinds
    assert ForKind.VECTORIZED in kinds, kinds
    accesses = vector_accesses(compiled, kernel)
    stores = [a for a in accesses if isinstance(a, BufferStore)]
    assert stores, f"{kernel} has no vector store"
    if contiguous:  # every vector store writes consecutive elements (no scatter)
        assert all(isinstance(s.indices[0], Ramp) for s in stores), stores[0].indices


def floats(*shape):
    return RNG.standard_normal(shape).astype("float32")


# -- element-wise, broadcast, injective -----------------------------------------------------------


def test_an_elementwise_chain_is_parallel_and_vectorized():
    x, y = floats(8, 16, 32, 32), floats(8, 16, 32, 32)
    nodes = [
        helper.make_node("Add", ["x", "y"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["s"]),
        helper.make_node("Mul", ["s", "x"], ["m"]),
        helper.make_node("Relu", ["m"], ["out"]),
    ]
    compiled = compiled_matches_onnxruntime(
        make_model(nodes, [("x", x), ("y", y)], ["out"]), [("x", x), ("y", y)]
    )
    assert_parallel_and_vector(compiled, the_kernel(compiled, "Add", "Sigmoid", "Mul", "Relu"))


def test_a_broadcast_add_of_a_channel_bias():
    x = floats(1, 64, 56, 56)
    b = floats(64, 1, 1)
    m = make_model([helper.make_node("Add", ["x", "b"], ["out"])], [("x", x)], ["out"], {"b": b})
    compiled = compiled_matches_onnxruntime(m, [("x", x)])
    assert_parallel_and_vector(compiled, the_kernel(compiled, "Add"))


@pytest.mark.parametrize(
    "shape", [(3, 5, 7), (3, 5, 17, 19), (2, 64, 7, 7), (1, 1, 300007), (64, 1, 1, 4096)]
)
def test_odd_shapes_small_rows_and_tails(shape):
    x = floats(*shape)
    nodes = [helper.make_node("Sqrt", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["out"])]
    x = np.abs(x)
    compiled = compiled_matches_onnxruntime(make_model(nodes, [("x", x)], ["out"]), [("x", x)])
    kernel = the_kernel(compiled, "Sqrt", "Neg")
    kinds = loop_kinds(kernels(compiled)[kernel])
    assert ForKind.VECTORIZED in kinds
    assert (ForKind.PARALLEL in kinds) == (x.size >= group_schedules.PARALLEL_MIN_WORK)
    stores = [a for a in vector_accesses(compiled, kernel) if isinstance(a, BufferStore)]
    assert stores and all(isinstance(s.indices[0], Ramp) for s in stores)


AVX512 = "llvm -mcpu=znver5 -mattr=+avx512f"
"""A CPU with 64-byte registers, for kernels only compiled (this machine may not run them)."""

AVX2 = "llvm -mcpu=haswell -mattr=+avx2"
"""A CPU with 32-byte registers."""


def plane_stores(compiled) -> list[BufferStore]:
    """The vector stores of the one Mul kernel."""
    return [
        a
        for a in vector_accesses(compiled, the_kernel(compiled, "Mul"))
        if isinstance(a, BufferStore)
    ]


def plane_model():
    x = floats(2, 64, 7, 7)
    b = floats(64, 1, 1)
    m = make_model([helper.make_node("Mul", ["x", "b"], ["out"])], [("x", x)], ["out"], {"b": b})
    return m, x


def plane_lanes(vector_bytes: int) -> int:
    """The lanes of a 7x7 plane's stores with registers of `vector_bytes`: the whole plane
    (49 elements) in one vector padded to a power of two, 64 lanes, when it is at most
    group_schedules.VECTOR_REGISTERS registers (4 of AVX-512's 16 floats); else (AVX2: 4
    registers of 8 are 32 lanes) each 7-long row in a vector of its own, padded to 8."""
    if 49 <= group_schedules.VECTOR_REGISTERS * (vector_bytes // 4):
        return 64
    return 8


def test_rows_shorter_than_a_register_share_vectors():
    """Computed for this machine: its stores are those of its registers (plane_lanes), masked
    past the plane's (or the row's) end."""
    m, x = plane_model()
    compiled = compiled_matches_onnxruntime(m, [("x", x)])
    stores = plane_stores(compiled)
    assert [s.value.dtype.lanes for s in stores] == [plane_lanes(compiled.target.vector_bytes)]
    assert isinstance(stores[0].indices[0], Ramp) and stores[0].predicate is not None


@pytest.mark.parametrize("target, lanes", [(AVX512, 64), (AVX2, 8)], ids=["avx512", "avx2"])
def test_rows_shorter_than_a_register_share_vectors_on_each_cpu(target, lanes):
    """Compiled (not run) for pinned CPUs, so that each case is checked on any machine: with
    AVX-512 a whole 7x7 plane per vector, padded to a power of two (49 lanes stored, 15 masked
    off); with AVX2 the plane is longer than the widest vector (32 lanes), so each row is one
    (7 lanes stored, 1 masked off)."""
    m, _ = plane_model()
    compiled = loom.compile(m, target=target)
    assert plane_lanes(compiled.target.vector_bytes) == lanes
    stores = plane_stores(compiled)
    assert [s.value.dtype.lanes for s in stores] == [lanes]
    assert isinstance(stores[0].indices[0], Ramp) and stores[0].predicate is not None


def test_transpose_and_concat():
    x, y = floats(4, 24, 24, 48), floats(4, 8, 24, 48)
    nodes = [
        helper.make_node("Concat", ["x", "y"], ["c"], axis=1),
        helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Sqrt", ["t"], ["out"]),
    ]
    feeds = [("x", np.abs(x)), ("y", np.abs(y))]
    compiled = compiled_matches_onnxruntime(make_model(nodes, feeds, ["out"]), feeds)
    kernel = the_kernel(compiled, "Concat", "Transpose", "Sqrt")
    # the stores are contiguous; the transposed reads are gathers
    assert_parallel_and_vector(compiled, kernel)


def test_integer_and_boolean_kernels():
    a = RNG.integers(-1000, 1000, (8, 32, 33)).astype("int32")
    b = RNG.integers(1, 1000, (8, 32, 33)).astype("int32")
    c = RNG.integers(-(2**40), 2**40, (8, 32, 33)).astype("int64")
    nodes = [
        helper.make_node("Mul", ["a", "b"], ["p"]),
        helper.make_node("Sub", ["p", "a"], ["q"]),
        helper.make_node("Greater", ["q", "b"], ["g"]),
        helper.make_node("Cast", ["q"], ["q64"], to=onnx.TensorProto.INT64),
        helper.make_node("Add", ["q64", "c"], ["s"]),
        helper.make_node("Where", ["g", "s", "c"], ["out"]),
        helper.make_node("Not", ["g"], ["ng"]),
    ]
    feeds = [("a", a), ("b", b), ("c", c)]
    compiled = compiled_matches_onnxruntime(make_model(nodes, feeds, ["out", "ng"]), feeds)
    for name, f in kernels(compiled).items():
        assert ForKind.VECTORIZED in loop_kinds(f), name


def test_integer_division_by_data_vectorizes_with_masked_lanes():
    # 37 columns: the last vector has masked-off lanes, where the divisor must not be 0
    a = RNG.integers(-1000, 1000, (64, 37)).astype("int32")
    b = RNG.integers(1, 50, (64, 37)).astype("int32")
    nodes = [
        helper.make_node("Div", ["a", "b"], ["q"]),
        helper.make_node("Mod", ["a", "b"], ["r"]),
        helper.make_node("Add", ["q", "r"], ["out"]),
    ]
    feeds = [("a", a), ("b", b)]
    compiled = compiled_matches_onnxruntime(make_model(nodes, feeds, ["out"]), feeds)
    for f in kernels(compiled).values():
        assert ForKind.VECTORIZED in loop_kinds(f)


def test_a_tiny_kernel_stays_serial():
    x = floats(2, 3)
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Abs", ["e"], ["out"])]
    compiled = compiled_matches_onnxruntime(make_model(nodes, [("x", x)], ["out"]), [("x", x)])
    for f in kernels(compiled).values():
        assert ForKind.PARALLEL not in loop_kinds(f)


def test_parallel_only_with_enough_work(monkeypatch):
    monkeypatch.setattr(group_schedules, "PARALLEL_MIN_WORK", REAL_PARALLEL_MIN_WORK)
    for size, parallel in ((REAL_PARALLEL_MIN_WORK // 2, False), (REAL_PARALLEL_MIN_WORK, True)):
        x = floats(size // 256, 256)
        m = make_model([helper.make_node("Abs", ["x"], ["out"])], [("x", x)], ["out"])
        compiled = compiled_matches_onnxruntime(m, [("x", x)])
        assert (ForKind.PARALLEL in loop_kinds(kernels(compiled)[compiled.kernels[0]])) == parallel
    # a library call (erf) costs more than an addition: fewer elements are enough
    x = floats(REAL_PARALLEL_MIN_WORK // group_schedules.LIBRARY_CALL_COST // 256, 256)
    m = make_model([helper.make_node("Erf", ["x"], ["out"])], [("x", x)], ["out"])
    compiled = compiled_matches_onnxruntime(m, [("x", x)])
    assert ForKind.PARALLEL in loop_kinds(kernels(compiled)[compiled.kernels[0]])


def test_a_scalar_output():
    x = floats(1)
    m = make_model([helper.make_node("ReduceSum", ["x"], ["out"], keepdims=0)], [("x", x)], ["out"])
    compiled_matches_onnxruntime(m, [("x", x)])


# -- convolutions, matrix products, pooling -------------------------------------------------------


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs",
    [
        ((1, 8, 32, 32), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
        ((2, 16, 33, 31), (12, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ((1, 32, 7, 7), (64, 32, 3, 3), {"pads": [1, 1, 1, 1]}),
        ((1, 16, 14, 14), (64, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
        ((1, 64, 14, 14), (64, 64, 1, 1), {}),
        ((1, 64, 40, 40), (64, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 64}),
        ((1, 64, 80, 80), (64, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 64, "strides": [2, 2]}),
    ],
    ids=["3x3", "stride2", "7x7", "14x14", "1x1", "depthwise", "depthwise-stride2"],
)
def test_conv_bias_relu(x_shape, w_shape, attrs):
    x = floats(*x_shape)
    w = floats(*w_shape) * 0.2
    b = floats(w_shape[0])
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs),
        helper.make_node("Relu", ["c"], ["out"]),
    ]
    m = make_model(nodes, [("x", x)], ["out"], {"w": w, "b": b})
    compiled = compiled_matches_onnxruntime(m, [("x", x)], rtol=1e-4, atol=1e-5)
    kernel = the_kernel(compiled, "Conv", "Relu")
    kinds = loop_kinds(kernels(compiled)[kernel])
    assert ForKind.PARALLEL in kinds
    steps = w_shape[1] * w_shape[2] * w_shape[3]
    strided = attrs.get("strides", [1])[0] > 1
    if strided and steps < group_schedules.STRIDED_MIN_STEPS:
        # conv_schedules.py takes it: a phase copy read contiguously
        # (tests/graph/test_conv_schedules.py)
        assert ForKind.VECTORIZED in kinds
        return
    assert_parallel_and_vector(compiled, kernel)
    loads = [a for a in vector_accesses(compiled, kernel) if isinstance(a, BufferLoad)]
    x_loads = [ld for ld in loads if ld.buffer.name == "x"]
    w_loads = [ld for ld in loads if ld.buffer.name.startswith("w")]  # w, or w_blocked<C> (packed)
    tile = conv_channel_tile(x_shape, w_shape, attrs, compiled.target)
    if tile is not None:
        # conv_channels.py ("7x7" and "14x14" with AVX2 or AVX-512, "1x1" with AVX2 (its pixels
        # end to end) or AVX-512 run at full width: Zen 5, Intel): each step loads the tile's
        # packed weights as contiguous vectors and broadcasts the input, read as vectors only
        # by a copy: padded, or rows first when a row fits a cache line
        # (conv_channels.rows_first) and the pixels are not laid end to end
        assert w_loads
        assert {ld.indices[0].stride.value for ld in w_loads} == {1}
        rows_first = x_shape[3] * 4 <= conv_schedules.ROWS_FIRST_MAX_BYTES and not tile.flat
        assert bool(x_loads) == (any(attrs.get("pads", [0])) or rows_first)
        assert {ld.indices[0].stride.value for ld in x_loads} <= {1}
        return
    # rows of outputs (or a flattened grid): the input's windows are read as vectors (with
    # strides, gathered), the weights broadcast
    assert x_loads
    assert {ld.indices[0].stride.value for ld in x_loads} == {attrs.get("strides", [1])[0]}
    assert not w_loads


def conv_channel_tile(x_shape, w_shape, attrs, target):
    """The tile of output channels in the vector lanes (conv_channels.py) with which
    conv_schedules.py computes Conv(x, w, b) of `attrs` (ONNX's) for `target`, or None, asked
    as pack_conv_weights.py asks it (the weights' block it packs then makes the schedule's
    tile)."""
    attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
    node = Node("Conv", ("x", "w", "b"), ("y",), attrs)
    constants = {"w": np.zeros(w_shape, "float32"), "b": np.zeros(w_shape[:1], "float32")}
    x = {"x": TensorType(x_shape, "float32")}
    graph = infer_types(Graph(("x",), ("y",), (node,), constants, x))
    tensors = [placeholder(graph.type_of(v).shape, name=v) for v in node.inputs]
    outputs = OPERATORS.get("Conv").compute(node, tensors, {}, [graph.type_of("y")])
    s = create_schedule([t.op for t in outputs])
    (stage,) = [
        st for st in s.stages if isinstance(st.op, ComputeOp) and isinstance(st.op.body, Reduce)
    ]
    if not conv_schedules.channels_in_lanes(s, stage, target):
        return None
    return conv_schedules._chosen(s, stage, target)


def test_a_conv_without_bias_is_a_root_reduction():
    x = floats(1, 8, 24, 24)
    w = floats(16, 8, 3, 3)
    m = make_model([helper.make_node("Conv", ["x", "w"], ["out"])], [("x", x)], ["out"], {"w": w})
    compiled = compiled_matches_onnxruntime(m, [("x", x)], rtol=1e-4, atol=1e-5)
    assert_parallel_and_vector(compiled, the_kernel(compiled, "Conv"))


@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm_with_bias(trans_b):
    a = floats(128, 96)
    b = floats(*((80, 96) if trans_b else (96, 80)))
    c = floats(80)
    m = make_model(
        [helper.make_node("Gemm", ["a", "b", "c"], ["out"], transB=trans_b, alpha=0.5)],
        [("a", a)],
        ["out"],
        {"b": b, "c": c},
    )
    compiled = compiled_matches_onnxruntime(m, [("a", a)], rtol=1e-4, atol=1e-4)
    kernel = the_kernel(compiled, "Gemm")
    kinds = loop_kinds(kernels(compiled)[kernel])
    assert ForKind.PARALLEL in kinds
    # without transB, vectors along the output's columns (B's rows); with it, each element is
    # a dot product of two contiguous rows: vector accumulators along them (reduce_schedules.py)
    assert ForKind.VECTORIZED in kinds


def test_a_matrix_product_in_tiles_of_rows_with_a_partial_last_tile():
    a = floats(37, 300)
    b = floats(300, 80)
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["out"])], [("a", a)], ["out"], {"b": b})
    compiled = compiled_matches_onnxruntime(m, [("a", a)], rtol=1e-4, atol=1e-4)
    kernel = the_kernel(compiled, "MatMul")
    # accumulators for several rows of A at once, each reusing the vector of B
    assert ForKind.UNROLLED in loop_kinds(kernels(compiled)[kernel])
    assert_parallel_and_vector(compiled, kernel)


def test_batched_matmul_plus_bias_and_a_vector_product():
    a = floats(8, 64, 48)
    b = floats(48, 40)
    bias = floats(40)
    v = floats(40)
    nodes = [
        helper.make_node("MatMul", ["a", "b"], ["p"]),
        helper.make_node("Add", ["p", "bias"], ["s"]),
        helper.make_node("MatMul", ["s", "v"], ["out"]),
    ]
    m = make_model(nodes, [("a", a)], ["out", "s"], {"b": b, "bias": bias, "v": v})
    compiled = compiled_matches_onnxruntime(m, [("a", a)], rtol=1e-4, atol=1e-4)
    assert_parallel_and_vector(compiled, the_kernel(compiled, "MatMul", "Add"))


@pytest.mark.parametrize(
    "op, attrs",
    [
        ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("MaxPool", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
        ("GlobalAveragePool", {}),
        ("GlobalMaxPool", {}),
    ],
)
def test_pooling(op, attrs):
    x = floats(4, 32, 64, 62)
    nodes = [helper.make_node(op, ["x"], ["p"], **attrs), helper.make_node("Relu", ["p"], ["out"])]
    compiled = compiled_matches_onnxruntime(make_model(nodes, [("x", x)], ["out"]), [("x", x)])
    kinds = [k for f in kernels(compiled).values() for k in loop_kinds(f)]
    assert ForKind.PARALLEL in kinds
    if attrs.get("strides", [1])[0] == 1 and op.startswith(("Max", "Average")):
        assert ForKind.VECTORIZED in kinds


# -- reductions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax(axis):
    x = floats(4, 64, 512)
    m = make_model([helper.make_node("Softmax", ["x"], ["out"], axis=axis)], [("x", x)], ["out"])
    compiled = compiled_matches_onnxruntime(m, [("x", x)], rtol=1e-5, atol=1e-6)
    assert ForKind.PARALLEL in loop_kinds(kernels(compiled)[the_kernel(compiled, "Softmax")])


@pytest.mark.parametrize(
    "op, axes, keepdims, dtype",
    [
        ("ReduceMean", [-1], 1, "float32"),
        ("ReduceMean", [1], 0, "float32"),
        ("ReduceSum", [0, 1], 1, "float32"),
        ("ReduceSum", [0, 2], 1, "float32"),
        ("ReduceMax", [1], 1, "float32"),
        ("ReduceSum", [1], 0, "int64"),
        ("ReduceMin", [-1], 0, "int32"),
    ],
)
def test_reductions(op, axes, keepdims, dtype):
    if dtype == "float32":
        x = floats(48, 96, 160)
    else:
        x = RNG.integers(-1000, 1000, (48, 96, 160)).astype(dtype)
    nodes = [
        helper.make_node(op, ["x", "axes"], ["r"], keepdims=keepdims),
        helper.make_node("Neg", ["r"], ["out"]),
    ]
    m = make_model(nodes, [("x", x)], ["out"], {"axes": np.array(axes, np.int64)}, opset=18)
    compiled = compiled_matches_onnxruntime(m, [("x", x)], rtol=1e-4, atol=1e-4)
    kinds = [k for f in kernels(compiled).values() for k in loop_kinds(f)]
    assert ForKind.PARALLEL in kinds
    # the lanes run along the output's contiguous last axis, or along the reduced row
    assert ForKind.VECTORIZED in kinds


def test_layer_norm_like_chain_of_groups():
    x = floats(1, 128, 256)
    g = floats(256)
    nodes = [
        helper.make_node("ReduceMean", ["x", "axes"], ["mu"]),
        helper.make_node("Sub", ["x", "mu"], ["d"]),
        helper.make_node("Mul", ["d", "d"], ["sq"]),
        helper.make_node("ReduceMean", ["sq", "axes"], ["var"]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", ["d", "sd"], ["n"]),
        helper.make_node("Mul", ["n", "g"], ["out"]),
    ]
    inits = {"axes": np.array([-1], np.int64), "eps": np.array(1e-5, np.float32), "g": g}
    m = make_model(nodes, [("x", x)], ["out"], inits, opset=18)
    compiled_matches_onnxruntime(m, [("x", x)], rtol=1e-4, atol=1e-5)


def test_the_schedule_takes_its_parameters_from_the_target():
    x = floats(4, 16, 32, 32)
    m = make_model([helper.make_node("Exp", ["x"], ["out"])], [("x", x)], ["out"])
    target = "llvm -mtriple=x86_64-unknown-linux-gnu -mcpu=x86-64"  # SSE2: 16-byte registers
    sse = loom.compile(m, target=target)
    np.testing.assert_allclose(sse(x=x)["out"], np.exp(x), rtol=1e-6)
    stores = vector_accesses(sse, sse.kernels[0])
    lanes = {s.value.dtype.lanes for s in stores if isinstance(s, BufferStore)}
    assert lanes == {16}  # four 16-byte registers of float32
    # a convolution with vector accumulators of 16-byte registers
    x = floats(1, 8, 24, 24)
    w = floats(16, 8, 3, 3) * 0.2
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])]
    nodes.append(helper.make_node("Relu", ["c"], ["out"]))
    m = make_model(nodes, [("x", x)], ["out"], {"w": w})
    compiled = loom.compile(m, target=target)
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"x": x})
    np.testing.assert_allclose(compiled(x=x)["out"], want, rtol=1e-4, atol=1e-5)
    kinds = loop_kinds(kernels(compiled)[compiled.kernels[0]])
    assert ForKind.VECTORIZED in kinds and ForKind.PARALLEL in kinds


def _reduce_model(op, x, axes, keepdims=1):
    node = helper.make_node(op, ["x", "axes"], ["out"], keepdims=keepdims)
    return make_model([node], [("x", x)], ["out"], {"axes": np.array(axes, np.int64)}, opset=18)


def _bitwise_cases():
    x = floats(1, 16, 20, 20)
    w = floats(32, 16, 3, 3)
    b = floats(32)
    conv = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])]
    conv.append(helper.make_node("Relu", ["c"], ["out"]))
    strided = [helper.make_node("Conv", ["x", "w"], ["out"], pads=[1, 1, 1, 1], strides=[2, 2])]
    a, m = floats(37, 300), floats(300, 80)
    s = floats(8, 64, 100)
    ints = RNG.integers(-(2**20), 2**20, (8, 64, 100)).astype("int32")
    return {
        "conv": (make_model(conv, [("x", x)], ["out"], {"w": w, "b": b}), [("x", x)]),
        "strided": (make_model(strided, [("x", x)], ["out"], {"w": w}), [("x", x)]),
        "matmul": (
            make_model(
                [helper.make_node("MatMul", ["x", "m"], ["out"])], [("x", a)], ["out"], {"m": m}
            ),
            [("x", a)],
        ),
        "softmax": (
            make_model([helper.make_node("Softmax", ["x"], ["out"], axis=1)], [("x", s)], ["out"]),
            [("x", s)],
        ),
        "sum": (_reduce_model("ReduceSum", s, [0, 1]), [("x", s)]),
        # row reductions in vector accumulators that do not depend on the order
        "max-rows": (_reduce_model("ReduceMax", s, [-1]), [("x", s)]),
        "min-rows": (_reduce_model("ReduceMin", s, [1, 2], keepdims=0), [("x", s)]),
        "int-sum-rows": (_reduce_model("ReduceSum", ints, [-1]), [("x", ints)]),
    }


BITWISE = list(_bitwise_cases())


@pytest.mark.parametrize("case", BITWISE)
def test_results_are_the_default_schedules_bit_for_bit(case, monkeypatch):
    """Every schedule that only reorders independent elements, or reduces with an
    order-free combiner (max, min, integer sums), gives the default schedule's bits."""
    m, feeds = _bitwise_cases()[case]
    scheduled = loom.compile(m, target="llvm")(**dict(feeds))["out"]
    monkeypatch.setattr(LLVMBackend, "schedule_group", lambda *args: None)
    default = loom.compile(m, target="llvm")(**dict(feeds))["out"]
    np.testing.assert_array_equal(scheduled, default)


@pytest.mark.parametrize("shape", [(64, 1024), (96, 1000), (5, 3, 77)])
def test_reassociated_row_sums_stay_within_their_error_bound(shape, monkeypatch):
    """A float sum over a row is reassociated (vector accumulators, then a tree: docs/
    schedules.md, "rfactor"), so it is not bit-for-bit the default's sequential sum. Both
    orders are within (steps) * 2^-24 * sum(|x|) of the exact sum, so they differ by at most
    the sum of their bounds: n - 1 steps in order, n / lanes + log2(lanes) reassociated."""
    x = floats(*shape) * 100
    m = _reduce_model("ReduceSum", x, [-1], keepdims=0)
    scheduled = loom.compile(m, target="llvm")(x=x)["out"]
    monkeypatch.setattr(LLVMBackend, "schedule_group", lambda *args: None)
    default = loom.compile(m, target="llvm")(x=x)["out"]
    n, lanes = shape[-1], accumulator_lanes()
    size = np.abs(x.astype(np.float64)).sum(axis=-1) * 2.0**-24 * 1.01  # 1%: second order
    depth = n / lanes + np.log2(lanes)  # the additions an element goes through
    exact = x.astype(np.float64).sum(axis=-1)
    assert np.all(np.abs(scheduled - exact) <= depth * size)
    assert np.all(np.abs(scheduled - default) <= (depth + n - 1) * size)
    assert not np.array_equal(scheduled, default)  # the order did change


def accumulator_lanes() -> int:
    """The float32 lanes of a row's accumulators on this machine's llvm target."""
    target = loom.target.Target("llvm")
    return reduce_schedules.ACCUMULATOR_REGISTERS * group_schedules._vector_bytes(target) // 4


# -- row reductions (reduce_schedules.py) ---------------------------------------------------------


@pytest.mark.parametrize(
    "op, shape, axes, keepdims, dtype",
    [
        ("ReduceSum", (64, 1024), [-1], 0, "float32"),
        ("ReduceMean", (33, 1000), [-1], 1, "float32"),  # a ragged row: the last vector masked
        ("ReduceMax", (7, 5, 49), [-1], 1, "float32"),
        ("ReduceMin", (4, 6, 7, 7), [2, 3], 0, "float32"),  # two axes, one contiguous row
        ("ReduceSum", (3, 40, 37), [0, 2], 1, "float32"),  # a row and an axis outside it
        ("ReduceMean", (2, 3, 300), [1, 2], 0, "float32"),
        ("ReduceProd", (8, 100), [-1], 1, "float32"),
        ("ReduceSumSquare", (32, 256), [-1], 1, "float32"),
        ("ReduceL2", (16, 130), [-1], 0, "float32"),
        ("ReduceLogSumExp", (16, 500), [-1], 1, "float32"),
        ("ReduceSum", (3, 1000), [0, 1], 0, "float32"),  # one row of 3000: a scalar
        ("ReduceSum", (16, 300), [-1], 0, "int32"),
        ("ReduceMax", (16, 300), [-1], 1, "int64"),
        ("ReduceMin", (9, 200), [1], 1, "int32"),
    ],
)
def test_row_reductions(op, shape, axes, keepdims, dtype):
    if dtype == "float32":
        x = floats(*shape)
        if op == "ReduceProd":
            x = (1 + x * 0.01).astype("float32")
    else:
        x = RNG.integers(-1000, 1000, shape).astype(dtype)
    m = _reduce_model(op, x, axes, keepdims)
    compiled = compiled_matches_onnxruntime(m, [("x", x)], rtol=1e-5, atol=1e-4)
    kernel = compiled.kernels[0]
    assert ForKind.VECTORIZED in loop_kinds(kernels(compiled)[kernel])
    loads = [a for a in vector_accesses(compiled, kernel) if isinstance(a, BufferLoad)]
    assert any(ld.buffer.name == "x" and ld.indices[0].stride.value == 1 for ld in loads)


def test_a_row_reduction_runs_in_vector_accumulators():
    x = floats(64, 1024)
    m = _reduce_model("ReduceSum", x, [-1], keepdims=0)
    compiled = compiled_matches_onnxruntime(m, [("x", x)], rtol=1e-5, atol=1e-4)
    kernel = compiled.kernels[0]
    assert ForKind.PARALLEL in loop_kinds(kernels(compiled)[kernel])
    accesses = vector_accesses(compiled, kernel)
    # each step adds a vector of the row (ACCUMULATOR_REGISTERS registers) to the accumulators
    x_loads = [a for a in accesses if isinstance(a, BufferLoad) and a.buffer.name == "x"]
    assert [ld.dtype.lanes for ld in x_loads] == [accumulator_lanes()]
    assert isinstance(x_loads[0].indices[0], Ramp) and x_loads[0].indices[0].stride.value == 1
    partials = [a for a in accesses if isinstance(a, BufferStore) and ".rf" in a.buffer.name]
    assert {a.buffer.scope for a in partials} == {"local"}  # in registers, per row


@pytest.mark.parametrize("shape", [(4, 64, 512), (3, 7, 1000), (2, 77)])
def test_softmax_over_rows_is_one_pass_per_row(shape):
    x = floats(*shape)
    m = make_model([helper.make_node("Softmax", ["x"], ["out"], axis=-1)], [("x", x)], ["out"])
    compiled = compiled_matches_onnxruntime(m, [("x", x)], rtol=1e-5, atol=1e-6)
    kernel = the_kernel(compiled, "Softmax")
    # the maximum, the exponentials (once), their sum and the quotients in one loop over rows
    lowered = loom.lower(compiled.lowered.module, target=compiled.target)
    exps = []
    for f in lowered:
        if f.name == kernel or f.name.startswith(kernel + "_task_"):
            post_order_visit(
                f.body, lambda n: exps.append(n) if isinstance(n, Call) and n.op == "exp" else 0
            )
    assert len({e.dtype.lanes for e in exps}) == 1 and exps[0].dtype.lanes > 1
    stores = [a for a in vector_accesses(compiled, kernel) if isinstance(a, BufferStore)]
    assert {"softmax", "softmax.exp"} <= {a.buffer.name for a in stores}


@pytest.mark.parametrize("shape", [(2, 50, 768), (3, 100)])
def test_layer_normalization(shape):
    x = floats(*shape)
    scale, bias = floats(shape[-1]), floats(shape[-1])
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["out"], axis=-1)
    m = make_model([node], [("x", x)], ["out"], {"scale": scale, "bias": bias})
    compiled = compiled_matches_onnxruntime(m, [("x", x)], rtol=1e-4, atol=1e-4)
    kernel = compiled.kernels[0]
    kinds = loop_kinds(kernels(compiled)[kernel])
    assert kinds.count(ForKind.PARALLEL) == (x.size >= 4096) and ForKind.VECTORIZED in kinds
    accesses = vector_accesses(compiled, kernel)
    loads = [a for a in accesses if isinstance(a, BufferLoad)]
    assert any(ld.buffer.name == "x" and ld.indices[0].stride.value == 1 for ld in loads)
    # the moments are computed per row, inside the loop over the rows
    moments = {a.buffer.name: a.buffer.scope for a in accesses if "layer_norm." in a.buffer.name}
    assert {"layer_norm.sum.rf", "layer_norm.squares.rf"} <= set(moments)
    assert set(moments.values()) == {"local"}
