"""Short row reductions padded to whole vectors (loom/backend/cpu/reduce_schedules.py,
`_padded_row`): a row of 49 (GlobalAveragePool over 7x7) or 100 elements is reduced over 64 or
128, the elements past its end the reducer's identity. Results compared with onnxruntime for
every reducer, rows whose values make a wrong identity show (all negative for a maximum, all
positive for a minimum, NaN and infinities), integers; and the accumulators checked for what
the padding promises: whole-vector updates, the last vector a masked load."""

import numpy as np
import pytest

import loom
from loom.backend.cpu import reduce_schedules
from loom.ir.expr import BufferLoad
from loom.ir.stmt import Allocate, BufferStore, For
from loom.ir.visitor import children

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(11)


def model(op, x, axes=None, keepdims=1):
    """One node `op` of `x`; a Reduce* over `axes` (opset 18: the axes are an input)."""
    inits, inputs, attrs = [], ["x"], {}
    if axes is not None:
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        inputs.append("axes")
        attrs["keepdims"] = keepdims
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["out"], **attrs)],
        "m",
        [helper.make_tensor_value_info("x", elem, x.shape)],
        [helper.make_empty_tensor_value_info("out")],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def matches_onnxruntime(m, x, rtol=1e-5, atol=1e-5):
    compiled = loom.compile(m, target="llvm")
    got = compiled(x=x)["out"]
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return compiled


def floats(*shape):
    return RNG.standard_normal(shape).astype("float32")


@pytest.mark.parametrize(
    "op, shape",
    [
        ("GlobalAveragePool", (1, 1280, 7, 7)),  # mobilenet_v2's: rows of 49
        ("GlobalAveragePool", (2, 40, 9, 11)),  # 99
        ("GlobalMaxPool", (1, 64, 7, 7)),
        ("GlobalAveragePool", (1, 8, 14, 14)),  # 196: whole vectors of 4, not padded
    ],
)
def test_global_poolings_match_onnxruntime(op, shape):
    x = floats(*shape)
    matches_onnxruntime(model(op, x), x)


ROWS = [33, 49, 50, 63, 100, 150, 250]


@pytest.mark.parametrize("length", ROWS)
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL2"])
def test_sums_over_short_rows_match_onnxruntime(op, length):
    x = floats(13, length)
    matches_onnxruntime(model(op, x, [-1]), x, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("length", ROWS)
def test_a_product_pads_with_one(length):
    x = (1 + floats(9, length) * 0.01).astype("float32")
    matches_onnxruntime(model("ReduceProd", x, [-1]), x)


@pytest.mark.parametrize("length", ROWS)
def test_a_maximum_of_negative_rows_pads_with_the_lowest_value(length):
    """Padding with 0 would make every row's maximum 0 here."""
    x = -np.abs(floats(11, length)) - 1
    matches_onnxruntime(model("ReduceMax", x, [-1]), x)


@pytest.mark.parametrize("length", ROWS)
def test_a_minimum_of_positive_rows_pads_with_the_highest_value(length):
    x = np.abs(floats(11, length)) + 1
    matches_onnxruntime(model("ReduceMin", x, [-1]), x)


def test_nan_and_infinities_in_the_last_vector_reach_the_result():
    x = floats(6, 49)
    x[0, 48] = np.nan  # the one element of the masked vector
    x[1, 47] = np.inf
    x[2, 48] = -np.inf
    x[3, 0] = np.nan
    x[4, :] = -np.inf  # a row of the identity itself
    for op in ("ReduceMax", "ReduceMin", "ReduceSum"):
        compiled = loom.compile(model(op, x, [-1]), target="llvm")
        got = compiled(x=x)["out"].ravel()
        want = {"ReduceMax": np.max, "ReduceMin": np.min, "ReduceSum": np.sum}[op](x, axis=-1)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin"])
def test_integer_rows(op, dtype):
    x = RNG.integers(-1000, 1000, (10, 49)).astype(dtype)
    matches_onnxruntime(model(op, x, [-1]), x, rtol=0, atol=0)


def test_two_axes_and_one_outside_the_row():
    """A row of two axes (7 x 7) padded to 64, with an axis outside it reduced too."""
    x = floats(3, 5, 7, 7)
    matches_onnxruntime(model("ReduceSum", x, [0, 2, 3]), x, rtol=1e-5, atol=1e-4)


def row_accesses(compiled):
    """The kernel's vector updates of its accumulators (`.rf`) and its vector loads of the
    data, each load with how many times it runs per row: the iterations of the loops around
    it inside the row's accumulators (their allocation)."""
    lowered = loom.lower(compiled.lowered.module, target=compiled.target)
    stores, loads = [], []

    def walk(n, trips, in_row):
        if isinstance(n, Allocate):
            in_row = True
        elif isinstance(n, For) and in_row:
            trips *= int(n.extent.value)
        elif isinstance(n, BufferStore) and ".rf" in n.buffer.name and n.value.dtype.lanes > 1:
            stores.append(n)
        elif isinstance(n, BufferLoad) and n.buffer.name == "x" and n.dtype.lanes > 1:
            loads.append((n, trips))
        for child in children(n):
            walk(child, trips, in_row)

    for f in lowered:
        if f.name in compiled.kernels or "_task_" in f.name:
            walk(f.body, 1, False)
    return stores, loads


def assert_whole_vectors_and_a_masked_last_load(compiled):
    """GlobalAveragePool over 7x7: each row of 49 padded to 64 and reduced in the
    accumulators' vectors, ACCUMULATOR_REGISTERS registers (at most the row): one vector of 64
    lanes with AVX-512, two of 32 (a loop over them) with AVX2."""
    register = compiled.target.vector_bytes // 4
    lanes = min(64, reduce_schedules.ACCUMULATOR_REGISTERS * register)
    stores, loads = row_accesses(compiled)
    assert stores and loads
    assert all(st.predicate is None for st in stores), stores  # no masked accumulator update
    assert {st.value.dtype.lanes for st in stores} >= {lanes}, stores
    assert {ld.dtype.lanes for ld, _ in loads} == {lanes}, loads
    # the padded row read as vectors, each of its 64 elements once (the last 15 masked off)
    assert sum(ld.dtype.lanes * trips for ld, trips in loads) == 64, loads
    assert any(ld.predicate is not None for ld, _ in loads), loads  # its end: a masked load


def test_the_accumulators_take_whole_vectors_and_the_row_a_masked_last_load():
    x = floats(1, 256, 7, 7)
    assert_whole_vectors_and_a_masked_last_load(
        matches_onnxruntime(model("GlobalAveragePool", x), x)
    )


@pytest.mark.parametrize(
    "target, vector_bytes",
    [("llvm -mcpu=znver5 -mattr=+avx512f", 64), ("llvm -mcpu=haswell -mattr=+avx2", 32)],
    ids=["avx512", "avx2"],
)
def test_the_accumulators_take_whole_vectors_on_each_cpu(target, vector_bytes):
    """As above, compiled (not run: this machine may not have AVX-512) for pinned CPUs, so
    that the accumulators of both register widths are checked on any machine."""
    x = floats(1, 256, 7, 7)
    compiled = loom.compile(model("GlobalAveragePool", x), target=target)
    assert compiled.target.vector_bytes == vector_bytes
    assert_whole_vectors_and_a_masked_last_load(compiled)


def test_long_rows_are_not_padded():
    """A row of PADDED_ROW_VECTORS accumulator vectors or more keeps its length (its masked
    last vector is one step of many)."""
    x = floats(4, 1000)
    compiled = matches_onnxruntime(model("ReduceSum", x, [-1]), x, rtol=1e-5, atol=1e-4)
    func = next(f for f in compiled.lowered.module if f.name in compiled.kernels)
    extents = []

    def record(n):
        if isinstance(n, loom.ir.stmt.For):
            extents.append(int(n.extent.value))

    loom.ir.visitor.post_order_visit(func.body, record)
    assert 1000 >= reduce_schedules.PADDED_ROW_VECTORS * 64  # 64: the accumulators' lanes
    assert 1024 not in extents, extents
