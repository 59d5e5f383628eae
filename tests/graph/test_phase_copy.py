"""The per-channel copy of a strided depthwise convolution's or pooling's data
(loom/backend/cpu/conv_schedules.py, `_unroll_phases` and COPY_STACK_BYTES): split into the
stride's phases (conv_widen.py), its phases and row vectors unrolled (its rows too when the
plane is small), on the stack when it is small. Convolutions and poolings of odd sizes, with
padding on one side only, channels not a multiple of the vector lanes, large and small planes,
compared with onnxruntime; and the loops checked for what the schedule promises."""

import numpy as np
import pytest

import loom
from loom.backend.cpu import conv_schedules
from loom.ir.expr import BufferLoad, Call, Min, Select, Var
from loom.ir.stmt import Allocate, BufferStore, For, ForKind
from loom.ir.visitor import post_order_visit

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from tests.graph.test_conv_schedules import conv_model, make_model  # noqa: E402

RNG = np.random.default_rng(7)


def floats(*shape):
    return RNG.standard_normal(shape).astype("float32")


def depthwise(x, kernel, activation=None, **attrs):
    """A depthwise Conv of `x` with a bias, then `activation` (Clip to [0, 6] or Relu)."""
    channels = x.shape[1]
    w = floats(channels, 1, kernel, kernel) * np.float32(1 / kernel)
    return conv_model(x, w, floats(channels), activation, group=channels, **attrs)


def pooling(op, x, **attrs):
    return make_model([helper.make_node(op, ["x"], ["out"], **attrs)], x, {})


def matches_onnxruntime(m, x):
    compiled = loom.compile(m, target="llvm")
    got = compiled(x=x)["out"]
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return compiled


# (x shape, kernel, activation, attributes)
DEPTHWISE = {
    # mobilenet_v2's shapes, smaller: a plane whose rows are unrolled, one whose are not
    "3x3/2 14x14 (rows unrolled)": ((1, 24, 14, 14), 3, "Clip", {"pads": [1] * 4}),
    "3x3/2 56x56": ((1, 8, 56, 56), 3, "Clip", {"pads": [1] * 4}),
    "3x3/2 112x112 (copy on the stack)": ((1, 3, 112, 112), 3, "Clip", {"pads": [1] * 4}),
    "odd sizes": ((1, 5, 15, 29), 3, "Relu", {"pads": [1] * 4}),
    "odd sizes, 5x5": ((1, 19, 31, 17), 5, None, {"pads": [2] * 4}),
    "pads on the left and top only": ((1, 6, 16, 16), 3, None, {"pads": [1, 1, 0, 0]}),
    "pads on the right and bottom only": ((1, 6, 17, 17), 3, "Clip", {"pads": [0, 0, 1, 1]}),
    "pads uneven": ((1, 7, 21, 22), 3, None, {"pads": [0, 2, 1, 0]}),
    "no pads": ((1, 17, 23, 24), 3, None, {}),
    "channels not a multiple of the lanes": ((1, 21, 28, 28), 3, "Clip", {"pads": [1] * 4}),
    "two images": ((2, 9, 20, 20), 3, "Relu", {"pads": [1] * 4}),
    "stride 3": ((1, 4, 25, 26), 3, None, {"pads": [1] * 4, "strides": [3, 3]}),
    "strides 2 and 1": ((1, 4, 18, 19), 3, None, {"pads": [1] * 4, "strides": [1, 2]}),
}


@pytest.mark.parametrize("case", list(DEPTHWISE))
def test_strided_depthwise_convolutions_match_onnxruntime(case):
    shape, kernel, activation, attrs = DEPTHWISE[case]
    attrs = {"strides": [2, 2], **attrs}
    x = floats(*shape)
    matches_onnxruntime(depthwise(x, kernel, activation, **attrs), x)


POOLS = {
    "max 3x3/2 odd": ("MaxPool", (1, 5, 27, 23), {"kernel_shape": [3, 3], "pads": [1] * 4}),
    "max 3x3/2 pads right": (
        "MaxPool",
        (1, 3, 20, 20),
        {"kernel_shape": [3, 3], "pads": [0, 0, 1, 1]},
    ),
    "max 3x3/2 rows unrolled": (
        "MaxPool",
        (1, 9, 12, 12),
        {"kernel_shape": [3, 3], "pads": [1] * 4},
    ),
    "average 3x3/2 pads left": (
        "AveragePool",
        (1, 4, 19, 21),
        {"kernel_shape": [3, 3], "pads": [1, 1, 0, 0], "count_include_pad": 1},
    ),
    "average 2x2/2 odd": ("AveragePool", (1, 6, 15, 17), {"kernel_shape": [2, 2]}),
}


@pytest.mark.parametrize("case", list(POOLS))
def test_strided_poolings_match_onnxruntime(case):
    op, shape, attrs = POOLS[case]
    x = floats(*shape)
    matches_onnxruntime(pooling(op, x, strides=[2, 2], **attrs), x)


def phase_copy(compiled):
    """The phase copy's Allocate and the loops (name -> kind) that store into it, of the
    convolution's kernel as loom.compile lowered it (before the target's passes)."""
    func = next(f for f in compiled.lowered.module if f.name in compiled.kernels)
    allocs, loops = [], {}
    post_order_visit(
        func.body,
        lambda n: (
            allocs.append(n)
            if isinstance(n, Allocate) and n.buffer.name.endswith(".phases")
            else None
        ),
    )
    assert len(allocs) == 1, [a.buffer.name for a in allocs]
    copy = allocs[0].buffer

    def record(n):
        if isinstance(n, For):
            stores = []
            post_order_visit(
                n.body,
                lambda s: (
                    stores.append(s)
                    if isinstance(s, BufferStore) and s.buffer.name == copy.name
                    else None
                ),
            )
            if stores:
                loops[n.loop_var.name] = n.kind

    post_order_visit(func.body, record)
    return allocs[0], loops


def test_a_small_planes_phase_copy_is_unrolled_on_the_stack():
    """14x14 input: 15 rows x 2 phases x one vector, at most MAX_UNROLLED_PHASE_PLANE."""
    x = floats(1, 24, 14, 14)
    compiled = matches_onnxruntime(depthwise(x, 3, "Clip", strides=[2, 2], pads=[1] * 4), x)
    alloc, loops = phase_copy(compiled)
    assert alloc.buffer.scope == "local"
    rows, phases, _ = (d.value for d in alloc.buffer.shape[2:])
    assert rows * phases <= conv_schedules.MAX_UNROLLED_PHASE_PLANE
    assert loops["h"] == ForKind.UNROLLED, loops
    assert loops["p"] == ForKind.UNROLLED, loops
    assert ForKind.VECTORIZED in loops.values(), loops


def test_a_large_planes_phase_copy_unrolls_its_phases_and_vectors_but_not_its_rows():
    x = floats(1, 8, 56, 56)
    compiled = matches_onnxruntime(depthwise(x, 3, "Clip", strides=[2, 2], pads=[1] * 4), x)
    alloc, loops = phase_copy(compiled)
    assert alloc.buffer.scope == "local"  # 57 x 2 x 29 floats: 13 KB
    assert loops["h"] == ForKind.SERIAL, loops
    assert loops["p"] == ForKind.UNROLLED, loops
    assert loops["j.outer"] == ForKind.UNROLLED, loops  # two vectors of 16 (or four of 8)
    assert loops["j.inner"] == ForKind.VECTORIZED, loops


def test_a_phase_copy_larger_than_the_stack_share_stays_on_the_heap():
    """A copy over COPY_STACK_BYTES (one channel of a 180x180 image: 181 x 2 x 91 floats,
    132 KB) is a workspace allocation, not a stack buffer."""
    x = floats(1, 2, 180, 180)
    compiled = matches_onnxruntime(depthwise(x, 3, None, strides=[2, 2], pads=[1] * 4), x)
    alloc, _ = phase_copy(compiled)
    nbytes = np.prod([d.value for d in alloc.buffer.shape]) * 4
    assert nbytes > conv_schedules.COPY_STACK_BYTES
    assert alloc.buffer.scope == "global"


def test_a_small_stack_limit_keeps_the_copy_on_the_heap():
    """The copy takes at most an eighth of the target's stack limit."""
    x = floats(1, 4, 28, 28)
    m = depthwise(x, 3, "Clip", strides=[2, 2], pads=[1] * 4)
    small = loom.compile(m, target="llvm -stack-limit=16384")
    alloc, _ = phase_copy(small)
    assert alloc.buffer.scope == "global"  # 29 x 2 x 17 floats: 3.9 KB > 16 KB / 8
    got = small(x=x)["out"]
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def copy_stores(compiled):
    """The values stored into the phase copy of the convolution's kernel (before the
    target's passes)."""
    func = next(f for f in compiled.lowered.module if f.name in compiled.kernels)
    found = []
    post_order_visit(
        func.body,
        lambda n: (
            found.append(n.value)
            if isinstance(n, BufferStore) and n.buffer.name.endswith(".phases")
            else None
        ),
    )
    return found


def test_the_copys_padding_rows_are_a_select_and_its_loads_guarded_by_columns_only():
    """conv_widen._read: the row conditions of the padding (h >= 1) leave the lazy guard of
    the data's load for a select; the row index is clamped into the data."""
    x = floats(1, 8, 30, 30)
    compiled = matches_onnxruntime(depthwise(x, 3, "Clip", strides=[2, 2], pads=[1] * 4), x)
    (value,) = copy_stores(compiled)
    selects, guards, loads = [], [], []

    def record(n):
        if isinstance(n, Select):
            selects.append(n)
        elif isinstance(n, Call) and n.op == "if_then_else":
            guards.append(n)
        elif isinstance(n, BufferLoad) and n.buffer.name == "x":
            loads.append(n)

    post_order_visit(value, record)
    assert selects and any(_reads_var(s.condition, "h") for s in selects), value
    assert guards and not any(_reads_var(g.args[0], "h") for g in guards), value
    assert loads and all(
        any(isinstance(i, Min) for i in _subexpressions(ld.indices)) for ld in loads
    ), loads


def _subexpressions(indices):
    found = []
    for index in indices:
        post_order_visit(index, found.append)
    return found


def _reads_var(e, name):
    return any(isinstance(n, Var) and n.name == name for n in _subexpressions([e]))


@pytest.mark.parametrize("stride", [1, 2])
def test_inf_and_nan_in_the_first_and_last_rows_do_not_leak_into_the_padding(stride):
    """The clamped row index reads the data's first or last row where the padding is: the
    select must drop it (inf * 0 would be NaN)."""
    x = floats(1, 6, 28, 28)
    x[0, :, 0, ::3] = np.inf
    x[0, :, -1, 1::3] = -np.inf
    x[0, :, 0, 2::5] = np.nan
    x[0, 2, -1, :] = np.nan
    matches_onnxruntime(depthwise(x, 3, None, strides=[stride, stride], pads=[1] * 4), x)
