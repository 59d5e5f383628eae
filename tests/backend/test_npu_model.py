"""A quantized model split between the NPU and the host: partitioning by the NPU's graph
patterns, its graph passes seeing the whole graph, and results bit-exact with a numpy integer
reference (docs/models.md, "Partitioning for a backend")."""

import numpy as np
import pytest

import loom
from loom import LoomError
from loom.backend import npu
from loom.backend.npu.graph import fixed_point
from loom.demo import examples_dir, load_example
from loom.graph.passes.partition import REGION, GraphPattern, partition, regions

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

# the model and its integer reference: examples/int8_model.py (make demo runs it)
EXAMPLE = load_example(examples_dir() / "int8_model.py")
int8_model, integer_reference, input_x = (
    EXAMPLE.int8_model,
    EXAMPLE.integer_reference,
    EXAMPLE.input_x,
)


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
    for seed in range(3):
        x = input_x(seed)
        got, want = npu_model(x=x), integer_reference(x)
        for name in ("r1", "c2", "y"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        assert 0 < np.mean(want["r1"] == 0) < 0.9 and np.abs(want["y"]).max() > 10


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
    want = session.run(None, {"x": x})[0].astype(int)
    got = compiled(x=x)["y"].astype(int)
    assert np.abs(got - want).max() <= 2  # the matmul rounds halves up on the NPU


def test_fixed_point_requantization_scales():
    assert fixed_point(7 * 2**-11) == (7, 11)
    assert fixed_point(1.0) == (1, 0)
    assert fixed_point(3.0) == (3, 0)
    m, s = fixed_point(0.1)
    assert s == 31 and abs(m / 2**s - 0.1) <= 2**-32  # the NPU shifts by 31 at most
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
