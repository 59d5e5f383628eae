"""`loom compile`, `loom run`, `loom inspect` and `loom plan` on an ONNX model."""

import numpy as np
import pytest

from loom.cli import main
from tests.graph.test_compile import onnxruntime_run, small_cnn

onnx = pytest.importorskip("onnx")


def test_compile_run_and_inspect_a_model(tmp_path, capsys):
    model_path, lib, out = tmp_path / "cnn.onnx", tmp_path / "cnn.so", tmp_path / "out"
    m = small_cnn()
    onnx.save(m, model_path)
    x = np.random.default_rng(3).standard_normal((2, 3, 8, 8)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    assert main(["compile", str(model_path), "-o", str(lib)]) == 0
    assert "cnn_run is declared in" in capsys.readouterr().out
    assert "int32_t cnn_run(const cnn_inputs *inputs" in (tmp_path / "cnn.h").read_text()
    assert (
        main(["run", str(lib), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(out)]) == 0
    )
    assert capsys.readouterr().out.startswith("y: float32[2, 10] [")
    (want,) = onnxruntime_run(m, {"x": x})
    np.testing.assert_allclose(np.load(out / "y.npy"), want, rtol=1e-4, atol=1e-6)
    assert main(["inspect", str(lib)]) == 0
    report = capsys.readouterr().out
    assert "inputs: x: float32[2, 3, 8, 8]" in report
    assert "Conv + Relu  [llvm" in report
    assert "memory pools (C entry point cnn_run):" in report
    assert "    workspace: workspace, given by the caller, " in report
    assert "    constants: constant, in the library, " in report


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_plan_prints_a_line_per_pool_and_draws_them(tmp_path, capsys):
    model_path, picture = tmp_path / "cnn.onnx", tmp_path / "plan.png"
    onnx.save(small_cnn(), model_path)
    pools = ["--pool", "dram:access=cpu", "--pool", "weights:kind=constant"]
    assert main(["plan", str(model_path), "-o", str(picture), *pools]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("pool dram: ") and "lower bound" in lines[0]
    assert lines[1].startswith("pool weights: ")
    assert lines[2] == f"written to {picture}"
    width, height = png_size(picture)
    assert width > 0 and height > 0
    with pytest.raises(SystemExit):
        main(["plan", str(model_path), "--pool", "dram:speed=3"])
    assert "is not one of size=" in capsys.readouterr().err


def test_bad_arguments_are_clear_errors(tmp_path, capsys):
    model_path = tmp_path / "cnn.onnx"
    onnx.save(small_cnn(), model_path)
    assert main(["compile", str(model_path), "-o", str(tmp_path / "a.so"), "--shape", "x=1,2"]) == 1
    assert "has rank 2, but input x has rank 4" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compile", str(model_path), "-o", "a.so", "--shape", "x"])
    assert "--shape takes NAME=D0,D1" in capsys.readouterr().err
    assert main(["compile", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "b.so")]) == 1
    assert "missing.onnx" in capsys.readouterr().err
