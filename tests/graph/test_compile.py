"""loom.compile end to end: ONNX models built here, compiled for llvm, against onnxruntime."""

import re

import numpy as np
import pytest

import loom
from loom.graph.passes.fuse import FUSED

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(0)


def model(nodes, inputs, outputs, initializers, opset=17):
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def small_cnn(size: int = 8):
    """Conv 3 -> 8 (3x3) + ReLU + MaxPool 2x2 + Gemm + Softmax on a batch of 2 `size` x `size`
    images (`size` even)."""
    w1 = RNG.standard_normal((8, 3, 3, 3)).astype("float32") * 0.3
    b1 = RNG.standard_normal(8).astype("float32")
    w2 = RNG.standard_normal((10, 8 * (size // 2) ** 2)).astype("float32") * 0.1
    b2 = RNG.standard_normal(10).astype("float32")
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Shape", ["p1"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["p1", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "w2", "b2"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y"], axis=1),
    ]
    inits = {
        "w1": w1,
        "b1": b1,
        "w2": w2,
        "b2": b2,
        "zero": np.array(0, np.int64),
        "axes": np.array([0], np.int64),
        "minus1": np.array([-1], np.int64),
    }
    return model(nodes, [("x", [2, 3, size, size])], ["y"], inits)


def onnxruntime_run(m, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def test_a_model_compiled_to_c_matches_onnxruntime():
    m = small_cnn()
    x = RNG.standard_normal((2, 3, 8, 8)).astype("float32")
    compiled = loom.compile(m, target="c")  # C for the host's compiler
    np.testing.assert_allclose(compiled(x=x)["y"], onnxruntime_run(m, {"x": x})[0], rtol=1e-4)
    assert {g["target"] for g in compiled.info.groups} == {str(compiled.target)}


def test_a_small_cnn_matches_onnxruntime():
    m = small_cnn()
    x = RNG.standard_normal((2, 3, 8, 8)).astype("float32")
    compiled = loom.compile(m, target="llvm")
    got = compiled(x=x)["y"]
    (want,) = onnxruntime_run(m, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    # the shape computation folded away; conv+relu is one kernel
    ops = [n.op for n in compiled.graph.nodes]
    assert "Shape" not in ops and "Gather" not in ops
    fused = [n.attr("body") for n in compiled.graph.nodes if n.op == FUSED]
    assert any([k.op for k in b.nodes] == ["Conv", "Relu"] for b in fused)
    assert len(compiled.kernels) < len(m.graph.node)


def test_inputs_are_checked_by_name_shape_and_dtype():
    compiled = loom.compile(small_cnn())
    x = np.zeros((2, 3, 8, 8), "float32")
    with pytest.raises(TypeError, match="unknown input 'z'"):
        compiled(z=x)
    with pytest.raises(TypeError, match="missing inputs"):
        compiled()
    with pytest.raises(ValueError, match=r"input 'x' must be float32\[2, 3, 8, 8\]"):
        compiled(x=x.astype("float64"))


def test_an_output_that_is_an_input_or_a_constant_is_copied():
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    m = model(nodes, [("x", [4])], ["y", "x", "c"], {"c": np.arange(3, dtype="float32")})
    x = np.array([-1, 2, -3, 4], "float32")
    out = loom.compile(m)(x)
    np.testing.assert_array_equal(out["y"], np.maximum(x, 0))
    np.testing.assert_array_equal(out["x"], x)
    np.testing.assert_array_equal(out["c"], np.arange(3, dtype="float32"))


def test_an_exported_model_runs_in_a_new_process(tmp_path):
    import subprocess
    import sys

    m = small_cnn()
    compiled = loom.compile(m)
    path = tmp_path / "cnn.so"
    compiled.export_library(path)
    x = RNG.standard_normal((2, 3, 8, 8)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    code = (
        "import sys, numpy as np\n"
        "from loom.runtime.load import load_module\n"
        "from loom.runtime.model import Model\n"
        f"model = Model(load_module({str(path)!r}))\n"
        f"y = model(x=np.load({str(tmp_path / 'x.npy')!r}))['y']\n"
        f"np.save({str(tmp_path / 'y.npy')!r}, y)\n"
        "print(sorted(m for m in sys.modules if m.startswith('loom.') and "
        "m.split('.')[1] in ('codegen', 'transform', 'graph', 'te')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"  # the runtime alone ran it
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), compiled(x=x)["y"])


def test_zero_dimensional_inputs_and_outputs():
    nodes = [helper.make_node("Add", ["x", "s"], ["y"]), helper.make_node("Neg", ["s"], ["t"])]
    m = model(nodes, [("x", [3]), ("s", [])], ["y", "t"], {})
    out = loom.compile(m)(np.ones(3, "float32"), np.array(2, "float32"))
    np.testing.assert_array_equal(out["y"], np.full(3, 3, "float32"))
    assert out["t"].shape == () and out["t"] == -2


def test_a_model_with_hundreds_of_intermediate_values_compiles():
    # main's intermediates are workspace parameters, not nested allocations: a nest ~200 deep
    # overflowed the recursion of the IR's passes
    n = 220
    nodes = [helper.make_node("MatMul", [f"h{k}", f"w{k}"], [f"h{k + 1}"]) for k in range(n)]
    inits = {f"w{k}": np.eye(4, dtype="float32") * (1 + (k == 0)) for k in range(n)}
    compiled = loom.compile(model(nodes, [("h0", [1, 4])], [f"h{n}"], inits))
    x = np.arange(4, dtype="float32")[None]
    np.testing.assert_array_equal(compiled(h0=x)[f"h{n}"], 2 * x)
    assert len(compiled.memory_plan["workspace"].placed) == n - 1
    # a chain: only two intermediate values (16 bytes each, 64-byte aligned) are alive at once
    assert compiled.memory_plan["workspace"].size == 64 + 16


def test_a_conv_bias_relu_group_keeps_its_sums_local():
    """The conv's sums never go to memory: they are local accumulators that the bias and ReLU
    read inside the same nest; the one global buffer is the conv schedule's padded copy of the
    input (loom/backend/cpu/conv_schedules.py).

    That is the tile of rows of whole vectors; its rows are 16 wide here, whole vectors on
    every x86 CPU (one of AVX-512's 16 lanes, two of AVX2's 8), so each takes it. At 8 wide
    a CPU that runs AVX-512 at full width (Zen 5, Intel) computes a flattened grid instead
    (conv_flat.py: 8 of its 16 lanes would be wasted), whose sums are a global grid that the
    epilogue copies out; Zen 4, whose half registers cost half, kept rows of 8."""
    compiled = loom.compile(small_cnn(size=16))
    (kernel,) = [f for f in compiled.lowered.module if f.name.endswith("conv_relu")]
    text = str(loom.lower(loom.ir.IRModule((kernel,))))
    scopes = re.findall(r"allocate\((\S+): Pointer\((\w+) ", text)
    assert ("conv.sum", "local") in scopes
    assert [name for name, scope in scopes if scope == "global"] == ["conv.pad"]


def test_a_models_name_names_its_functions_and_must_be_a_c_identifier():
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    m = model(nodes, [("x", [1, 4])], ["y"], {})
    compiled = loom.compile(m, name="tiny_relu")
    assert compiled.info.main == "tiny_relu" and compiled.info.name == "tiny_relu"
    assert "int32_t tiny_relu_run(" in compiled.c_header()
    with pytest.raises(loom.LoomError, match=r"name='main' would clash with a C program's main"):
        loom.compile(m, name="main")
    with pytest.raises(loom.LoomError, match=r"a model's name must be a C identifier"):
        loom.compile(m, name="tiny-relu")
