"""A quantized model split between the NPU and the host: partitioning by the NPU's graph
patterns, its graph passes seeing the whole graph, and results bit-exact with onnxruntime and
with a numpy integer reference of ONNX's requantization (halves to even), including inputs with
exact ties, where the NPU's other rounding (halves up) would differ (docs/models.md,
"Partitioning for a backend")."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import loom
from loom import LoomError
from loom.backend import npu
from loom.backend.npu.graph import fixed_point
from loom.demo import examples_dir, load_example
from loom.graph.passes.partition import REGION, GraphPattern, partition, regions

from . import npu_reference

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

# the model and its integer reference: examples/int8_model.py (make demo runs it)
EXAMPLE = load_example(examples_dir() / "int8_model.py")
int8_model, integer_reference, input_x = (
    EXAMPLE.int8_model,
    EXAMPLE.integer_reference,
    EXAMPLE.input_x,
)
onnxruntime_outputs = EXAMPLE.onnxruntime_outputs


@pytest.fixture(scope="module")
def npu_model():
    return loom.compile(int8_model(), target="npu")


def test_the_int8_model_runs_npu_regions_and_host_kernels_bit_exact(npu_model):
    where = [(g["target"], g["ops"]) for g in npu_model.info.groups]
    assert [ops for target, ops in where if target == "npu"] == [[npu.graph.CONV]] * 2 + [
        [npu.graph.MATMUL]
    ]
    host_ops = {op for target, ops in where if target == "host" for op in ops}
    assert {"MaxPool", "Flatten", "Transpose"} <= host_ops
    model = int8_model()
    for seed in range(6):
        x = input_x(seed)
        got, want = npu_model(x=x), integer_reference(x)
        by_ort = onnxruntime_outputs(model, x)
        for name in ("r1", "c2", "y"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
            np.testing.assert_array_equal(got[name], by_ort[name], err_msg=name)
        assert 0 < np.mean(want["r1"] == 0) < 0.9 and np.abs(want["y"]).max() > 10
    # these inputs have ties: rounding halves up (the NPU's default) would not be onnxruntime's
    for seed in (2, 5):
        x = input_x(seed)
        up, by_ort = integer_reference(x, "half_up"), onnxruntime_outputs(model, x)
        assert np.sum(up["r1"] != by_ort["r1"]) == 1


def test_the_int8_model_with_halves_rounded_up_is_not_onnxruntimes(monkeypatch):
    # the partitioned model built with the NPU's default rounding: the tie in r1 of input 2
    # (acc * 7 / 2^11 exactly n + 1/2, n even) comes out one higher than onnxruntime's
    monkeypatch.setattr(npu.graph, "ROUNDING", "half_up")
    compiled = loom.compile(int8_model(), target="npu")
    x = input_x(EXAMPLE.TIE_SEED)
    got, by_ort = compiled(x=x), onnxruntime_outputs(int8_model(), x)
    differ = got["r1"].astype(int) - by_ort["r1"].astype(int)
    assert differ.min() == 0 and differ.max() == 1 and np.sum(differ) == 1
    np.testing.assert_array_equal(got["r1"], integer_reference(x, "half_up")["r1"])


def test_the_npu_kernels_run_on_the_simulator(npu_model):
    kernels = [m for m in npu_model.module.walk() if m.type_key == "npu"]
    assert len(kernels) == 1
    assert sum(name.endswith("_npu") for name in kernels[0].function_names()) == 3


def test_the_backends_graph_pass_sees_the_whole_graph():
    seen = []

    def record(graph):
        seen.extend((n.op, n.name) for n in graph.nodes)
        return graph

    npu.BACKEND.extra_graph_passes.append(("partitioned", record))
    try:
        loom.compile(int8_model(), target="npu")
    finally:
        npu.BACKEND.extra_graph_passes.remove(("partitioned", record))
    names = {name for _, name in seen}
    assert {"pool", "flatten"} <= names  # host nodes
    assert [op for op, _ in seen].count(REGION) == 3
    assert [op for op, _ in seen].count("Transpose") == 4  # NCHW <-> NHWC around each conv


def test_on_the_host_the_int8_model_matches_onnxruntime():
    m = int8_model()
    host = loom.compile(m, target="llvm")
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = input_x(5)
    want = dict(zip(("y", "r1", "c2"), session.run(None, {"x": x})))
    got = host(x=x)
    assert got["y"].dtype == np.int8
    np.testing.assert_array_equal(got["r1"], want["r1"])  # QLinearConv: as onnxruntime
    # onnxruntime runs the QDQ convolution as QLinearConv too; float rounding may differ by 1
    for name in ("c2", "y"):
        assert np.abs(got[name].astype(int) - want[name].astype(int)).max() <= 1
        assert np.mean(got[name] != want[name]) < 0.05


def test_a_node_the_npu_cannot_take_stays_on_the_host():
    # the first conv's weights with zero point 2: the NPU's weights are symmetric, so that conv
    # stays on the host; the others still go
    m = int8_model(w_zero=2)
    compiled = loom.compile(m, target="npu")
    groups = [(g["target"], g["ops"]) for g in compiled.info.groups]
    assert [ops for target, ops in groups if target == "npu"] == [
        [npu.graph.CONV],
        [npu.graph.MATMUL],
    ]
    assert ("host", ["QLinearConv", "Relu"]) in groups
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = input_x(1)
    want = session.run(None, {"x": x})
    got = compiled(x=x)
    for name, value in zip(("y", "r1", "c2"), want):  # the host's QLinearConv as onnxruntime's
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_fixed_point_requantization_scales_are_exact():
    assert fixed_point(7 * 2**-11) == (7, 11)
    assert fixed_point(1.0) == (1, 0)
    assert fixed_point(3.0) == (3, 0)
    assert fixed_point(float(np.float32(0.1))) == (13421773, 27)  # 0.1 in float32, exactly
    assert fixed_point(2.0**-62) == (1, 62) and fixed_point(2.0**31 - 1) == (2**31 - 1, 0)
    tiny = float(np.float32(1.1 * 2**-39))  # 24 significant bits, the last one 2^-62
    assert fixed_point(tiny) == (int(tiny * 2**62), 62) and fixed_point(tiny)[0] % 2 == 1
    # no multiplier / 2^shift is exactly these: the NPU would round another ratio
    assert fixed_point(0.1) is None  # a double's 53 bits: 31 fit a multiplier
    assert fixed_point(float(np.float32(1.1 * 2**-40))) is None  # needs a shift of 63
    assert fixed_point(2.0**-63) is None and fixed_point(2.0**31) is None
    assert fixed_point(2.0**40) is None and fixed_point(0.0) is None
    assert fixed_point(float("nan")) is None


def test_bad_graph_patterns_are_refused():
    with pytest.raises(LoomError, match="pattern's name must be an identifier"):
        GraphPattern("not a name", ("Conv",))
    with pytest.raises(LoomError, match="ops must be operator names"):
        GraphPattern("p", ())

    class Bad:
        name = "bad"

        def graph_patterns(self):
            return ["Conv"]

    g = loom.frontend.from_onnx(int8_model())
    with pytest.raises(LoomError, match="graph_patterns\\(\\) must give GraphPatterns"):
        partition(g, Bad())
    assert regions(partition(g, None)) == []


# -- exact ties: small models whose requantization scale is 3/4 ------------------------------------

# x_scale 0.75 * w_scale 0.5 / y_scale 0.5 = 3/4 (multiplier 3, shift 2): acc * 3/4 is an exact
# half whenever acc = 2 (mod 4), a quarter of the outputs; halves up and to even differ at half
# of those, positive and negative. Small values keep |acc * 3| far below 2^24 (float32-exact)
# and the outputs inside int8.
TIE_SCALES = {"x_s": 0.75, "w_s": 0.5, "y_s": 0.5, "b_s": 0.375}


def tie_model(form: str, relu: bool):
    """x -> one int8 convolution (x (1, 4, 6, 6), 8 3x3 filters, padding 1) or matrix product
    (x (5, 20) @ (20, 7)) -> y, as QLinear* or in the QDQ form, optionally with Relu."""
    rng = np.random.default_rng(11)
    conv = form.endswith("conv")
    x_shape, w_shape = ((1, 4, 6, 6), (8, 4, 3, 3)) if conv else ((5, 20), (20, 7))
    y_shape = (1, 8, 6, 6) if conv else (5, 7)
    w = rng.integers(-3, 4, w_shape).astype(np.int8)
    bias = rng.integers(-30, 30, w_shape[0]).astype(np.int32)
    consts = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in TIE_SCALES.items()]
    consts += [numpy_helper.from_array(np.array(0, np.int8), "z")]
    consts += [numpy_helper.from_array(np.array(0, np.int32), "z32")]
    consts += [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")]
    node, pads = helper.make_node, {"pads": [1, 1, 1, 1]} if conv else {}
    out = "r" if relu else "y"
    if form == "qlinear_conv":
        inputs = ["x", "x_s", "z", "w", "w_s", "z", "y_s", "z", "b"]
        nodes = [node("QLinearConv", inputs, [out], **pads)]
    elif form == "qlinear_matmul":
        nodes = [node("QLinearMatMul", ["x", "x_s", "z", "w", "w_s", "z", "y_s", "z"], [out])]
    else:  # the QDQ form: onnxruntime computes it in float32 and quantizes (exact here)
        nodes = [
            node("DequantizeLinear", ["x", "x_s", "z"], ["xf"]),
            node("DequantizeLinear", ["w", "w_s", "z"], ["wf"]),
        ]
        if conv:
            nodes += [node("DequantizeLinear", ["b", "b_s", "z32"], ["bf"])]
            nodes += [node("Conv", ["xf", "wf", "bf"], ["yf"], **pads)]
        else:
            nodes += [node("MatMul", ["xf", "wf"], ["yf"])]
        if relu:
            nodes += [node("Relu", ["yf"], ["rf"])]
        nodes += [node("QuantizeLinear", ["rf" if relu else "yf", "y_s", "z"], ["y"])]
    if relu and form.startswith("qlinear"):
        nodes += [node("Relu", ["r"], ["y"])]
    graph = helper.make_graph(
        nodes,
        f"ties_{form}",
        [helper.make_tensor_value_info("x", TensorProto.INT8, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, y_shape)],
        consts,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.checker.check_model(m, full_check=True)
    return m, x_shape


def run_on_npu_and_onnxruntime(form: str, relu: bool):
    m, x_shape = tie_model(form, relu)
    compiled = loom.compile(m, target="npu")
    assert [g["target"] for g in compiled.info.groups].count("npu") == 1
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(12).integers(-6, 7, x_shape).astype(np.int8)
    return compiled(x=x)["y"], session.run(None, {"x": x})[0]


FORMS = ["qlinear_conv", "qlinear_matmul", "qdq_conv", "qdq_matmul"]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("form", FORMS)
def test_exact_ties_on_the_npu_are_onnxruntimes(form, relu):
    got, want = run_on_npu_and_onnxruntime(form, relu)
    np.testing.assert_array_equal(got, want)
    assert np.ptp(want.astype(int)) > 10 and np.abs(want.astype(int)).max() < 127  # unsaturated


@pytest.mark.parametrize("form", FORMS)
def test_with_halves_rounded_up_the_ties_differ_from_onnxruntime(form, monkeypatch):
    # the same partitioned model with the NPU's other rounding: the test above would fail
    monkeypatch.setattr(npu.graph, "ROUNDING", "half_up")
    got, want = run_on_npu_and_onnxruntime(form, False)
    differ = got.astype(int) - want.astype(int)
    assert set(np.unique(differ)) == {0, 1}  # one unit up, at the ties with an even floor
    assert 0.05 < np.mean(differ != 0) < 0.25  # a quarter are ties, half of them differ
    negative_ties = (differ != 0) & (want < 0)
    assert negative_ties.any()  # -1.5 -> -1 instead of -2


def test_a_scale_ratio_that_is_not_a_multiplier_over_a_power_of_two_stays_on_the_host():
    # 2^-30 * 2^-20 / 0.75 in float32 is 1/3 * 2^-48, 24 significant bits below 2^-48: its
    # lowest bit is 2^-73 (the NPU shifts by 62 at most)
    m, _ = tie_model("qlinear_matmul", False)
    for init in m.graph.initializer:
        if init.name in ("x_s", "w_s", "y_s"):
            value = {"x_s": 2.0**-30, "w_s": 2.0**-20, "y_s": 0.75}[init.name]
            init.CopyFrom(numpy_helper.from_array(np.array(value, np.float32), init.name))
    compiled = loom.compile(m, target="npu")
    assert [g["target"] for g in compiled.info.groups] == ["host"]
    graph = loom.frontend.from_onnx(m)
    assert "is not exactly a multiplier / 2^shift" in npu.graph.PATTERNS[-1].check(
        graph.nodes[:1], graph
    )


def test_beyond_float32_exactness_the_npu_keeps_to_onnxs_exact_rounding():
    # scale 0.004237865... = 4550373 / 2^30 (float32); acc = 29378: |acc * M| ~ 2^37 >= 2^24.
    # Exactly, acc * scale = 124.50000084...: ONNX's value is 125 (so says its reference
    # implementation, in float64). onnxruntime's float32 product rounds to 124.5, a tie it
    # rounds to even: 124. The NPU computes the exact value; loom's host follows onnxruntime.
    scale = np.float32(0.004237865097820759)
    assert fixed_point(float(scale)) == (4550373, 30)
    consts = [numpy_helper.from_array(np.array(scale, np.float32), "x_s")]
    consts += [numpy_helper.from_array(np.array(1.0, np.float32), "one")]
    consts += [numpy_helper.from_array(np.array(0, np.int8), "z")]
    consts += [numpy_helper.from_array(np.ones((1, 1, 1, 1), np.int8), "w")]
    consts += [numpy_helper.from_array(np.array([29377], np.int32), "b")]
    inputs = ["x", "x_s", "z", "w", "one", "z", "one", "z", "b"]
    graph = helper.make_graph(
        [helper.make_node("QLinearConv", inputs, ["y"])],
        "near_tie",
        [helper.make_tensor_value_info("x", TensorProto.INT8, (1, 1, 1, 2))],
        [helper.make_tensor_value_info("y", TensorProto.INT8, (1, 1, 1, 2))],
        consts,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    x = np.array([[[[1, -1]]]], np.int8)  # acc 29378 (a near-tie) and 29376 (124.49...)
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": x})[0].ravel().tolist() == [124, 124]
    reference = pytest.importorskip("onnx.reference").ReferenceEvaluator(m)
    assert reference.run(None, {"x": x})[0].ravel().tolist() == [125, 124]
    compiled = loom.compile(m, target="npu")
    assert "npu" in [g["target"] for g in compiled.info.groups]
    assert compiled(x=x)["y"].ravel().tolist() == [125, 124]


def test_a_typical_scale_ratio_needs_a_shift_beyond_31_and_runs_on_the_npu():
    # 0.001 * 0.003 / 0.02 in float32 = 5153961 / 2^35: exact with the NPU's shift up to 62
    m, x_shape = tie_model("qlinear_matmul", False)
    scales = {"x_s": 0.001, "w_s": 0.003, "y_s": 0.02}
    for init in m.graph.initializer:
        if init.name in scales:
            value = np.array(scales[init.name], np.float32)
            init.CopyFrom(numpy_helper.from_array(value, init.name))
    ratio = np.float32(0.001) * np.float32(0.003) / np.float32(0.02)
    assert fixed_point(float(ratio)) == (5153961, 35)
    compiled = loom.compile(m, target="npu")
    assert [g["target"] for g in compiled.info.groups] == ["npu"]
    x = np.random.default_rng(3).integers(-128, 128, x_shape).astype(np.int8)
    w = numpy_helper.to_array(next(i for i in m.graph.initializer if i.name == "w"))
    acc = x.astype(np.int64) @ w.astype(np.int64)
    got = compiled(x=x)["y"]
    np.testing.assert_array_equal(
        got, npu_reference.requantize(acc, 5153961, 35, False, "half_even")
    )
    # |acc * M| >= 2^24 here, so onnxruntime's float32 product is rounded; on these inputs no
    # exact value lies near a half, and onnxruntime's result is the same
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    assert np.abs(acc).max() * 5153961 >= 2**24
    np.testing.assert_array_equal(got, session.run(None, {"x": x})[0])
