"""TVM's tensor-expression tutorials run to the end with `import loom as tvm` (issue 18): the
scripts of examples/tvm_tutorials/ follow "Working with Operators Using Tensor Expression",
"Schedule Primitives", "Reduction", "Scan and Recurrent Kernel" and "How to optimize GEMM on
CPU", with only the GPU cells left out. Each checks its results against numpy itself; here each
runs in a fresh interpreter, as a user runs it, and must exit 0. (tests/test_examples.py runs
only the examples `loom.demo` lists, so these run once, here.)"""

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import loom as tvm
import loom.testing

TUTORIALS = pathlib.Path(__file__).resolve().parents[2] / "examples" / "tvm_tutorials"
SCRIPTS = ["get_started.py", "schedule_primitives.py", "reduction.py", "scan.py", "opt_gemm.py"]


def test_every_tutorial_script_is_listed():
    assert sorted(p.name for p in TUTORIALS.glob("*.py")) == sorted(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_tutorial_runs_to_the_end(script, tmp_path):
    run = subprocess.run(
        [sys.executable, str(TUTORIALS / script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # whatever a script writes stays out of the checkout
        timeout=300,
    )
    assert run.returncode == 0, f"{script} failed:\n{run.stderr[-3000:]}"
    assert "main" in run.stdout  # every tutorial prints the function tvm.lower made


def test_testing_assert_allclose_is_tvms():
    """`tvm.testing.assert_allclose`, which the tutorials check with: TVM's tolerances (1e-7),
    and shapes must be equal, not merely broadcast."""
    a = tvm.nd.array(np.ones(3, "float32"), tvm.cpu(0))
    tvm.testing.assert_allclose(a.numpy(), np.ones(3))
    with pytest.raises(AssertionError, match=r"shapes differ: actual \(3, 1\), desired \(3,\)"):
        tvm.testing.assert_allclose(np.ones((3, 1)), np.ones(3))
    with pytest.raises(AssertionError):
        tvm.testing.assert_allclose(np.float32([1.0]), np.float32([1.0 + 1e-6]))
