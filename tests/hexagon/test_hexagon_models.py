"""Whole models compiled for Hexagon v66 and run under qemu-hexagon: a float convolution block
against onnxruntime, the int8 network of tests/backend/test_npu_model.py against the host, and
`loom compile` / `loom run` / `loom inspect` of that network for hexagon and for the NPU."""

import numpy as np
import pytest

import loom
from loom import LoomError
from loom.cli import main
from tests.backend.test_npu_model import input_x, int8_model  # examples/int8_model.py

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def conv_block():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3, 3, 3)).astype("float32")
    b = rng.standard_normal(8).astype("float32")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Add", ["p", "p"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 8, 8))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_a_float_model_runs_on_hexagon(dev):
    m = conv_block()
    compiled = loom.compile(m, target=loom.target.hexagon("v66"))
    with pytest.raises(LoomError, match="runs on a hexagon device"):
        compiled(x=np.zeros((1, 3, 8, 8), "float32"))
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype("float32")
    got = compiled.on(dev)(x=x)["y"]
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_the_int8_model_runs_on_hexagon_as_on_the_host(dev):
    m = int8_model()
    on_hexagon = loom.compile(m, target=loom.target.hexagon("v66")).on(dev)
    on_host = loom.compile(m, target="llvm")
    x = input_x(2)
    got, want = on_hexagon(x=x), on_host(x=x)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("target", ["hexagon", "npu"])
def test_loom_compile_run_and_inspect_a_device_model(target, tmp_path, capsys):
    # a Hexagon model runs in the emulator's session; an NPU model on the host with the NPU
    model_path, lib, out = tmp_path / "int8.onnx", tmp_path / "int8.so", tmp_path / "out"
    onnx.save(int8_model(), model_path)
    x = input_x(3)
    np.save(tmp_path / "x.npy", x)
    assert main(["compile", str(model_path), "-o", str(lib), "--target", target]) == 0
    capsys.readouterr()
    assert (
        main(["run", str(lib), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(out)]) == 0
    )
    want = loom.compile(int8_model(), target="llvm")(x=x)
    np.testing.assert_array_equal(np.load(out / "r1.npy"), want["r1"])  # no halfway values here
    assert main(["inspect", str(lib)]) == 0
    report = capsys.readouterr().out
    if target == "npu":
        assert "npu.conv2d  [npu]" in report and "MaxPool  [host]" in report
    else:
        assert "MaxPool  [hexagon -mcpu=v66" in report
