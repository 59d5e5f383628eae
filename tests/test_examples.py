"""The examples `make demo` runs: every one matches its numpy reference, on the host and on the
simulated devices."""

import re
import subprocess
import sys

from loom import demo

from .hexagon.conftest import requires_hexagon


def test_host_examples_match_numpy():
    """In a fresh interpreter, as `make demo` runs them: only what the examples import is
    loaded, so a registration that depends on import order shows here."""
    paths = [str(demo.examples_dir() / name) for name in demo.EXAMPLES]
    run = "import sys; from loom import demo; sys.exit(demo.main(sys.argv[1:]))"
    out = subprocess.run(
        [sys.executable, "-c", run, *paths], capture_output=True, text=True, check=True
    ).stdout
    assert f"{len(paths)} of {len(paths)} runs match" in out


@requires_hexagon
def test_hexagon_examples_run_under_qemu(capsys):
    examples = [demo.load_example(demo.examples_dir() / name) for name in demo.EXAMPLES]
    marked = [e for e in examples if getattr(e, "HEXAGON", False)]
    assert marked and demo.run_on_hexagon(marked) == [True] * len(marked)
    assert "HexagonBackendAllocateVTCM  <- loom_device_runtime" in capsys.readouterr().out


def test_npu_example_prints_utilization_for_a_shape_not_a_multiple_of_dim():
    out = subprocess.run(
        [sys.executable, str(demo.examples_dir() / "npu_matmul.py"), "40", "24", "70"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "matches the numpy integer reference" in out
    assert "array utilization" in out and "void *const acc = " in out
    cycles, serial = map(int, re.search(r"cycles (\d+) with .*?; (\d+) serialized", out).groups())
    assert 0 < cycles <= serial
    assert f"minimum {40 * 70 + 70 * 24 + 4 * 24} (each operand once)" in out
    assert "busy cycles per queue: load " in out


def test_int8_model_example_splits_the_model_and_matches_its_integer_reference():
    out = subprocess.run(
        [sys.executable, str(demo.examples_dir() / "int8_model.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--- simulator: matches the numpy integer reference" in out
    assert "--- simulator: matches onnxruntime" in out
    assert "npu.conv2d  [npu]" in out and "MaxPool  [host]" in out
