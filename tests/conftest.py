"""Shared test fixtures: golden files for printed IR, the example scratchpad."""

import atexit
import os
import pathlib
import shutil
import tempfile

import pytest
from hypothesis import settings

# Everything loom registers when imported (target kinds, memories, passes, config keys, loaders)
# is registered before the first snapshot, so restoring one never removes it.
import loom.driver
import loom.packaging  # noqa: F401
from loom import registry
from loom.memory import scratchpad_emu
from tests.programs import SCRATCHPAD_BASE

# the compile cache (docs/native.md, "Compile cache") of this test process alone, read when a
# kernel is built: no test depends on the kernels a developer built before, and each xdist
# worker has its own
_KERNELS = tempfile.mkdtemp(prefix="loom-test-kernels-")
os.environ["LOOM_KERNEL_CACHE_DIR"] = _KERNELS
atexit.register(shutil.rmtree, _KERNELS, ignore_errors=True)

# the summaries of onnx's node tests and of the real models, as plugins of this root conftest so
# that the process that reports (the controller under pytest-xdist) has their hooks
pytest_plugins = ["tests.frontend.node_summary", "tests.models.summary"]

# Property tests draw the same examples on every run (so CI is reproducible); run
# `pytest --hypothesis-profile=explore` to search with new random examples.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile("ci")

GOLDEN_DIR = pathlib.Path(__file__).parent / "golden"


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/*.txt from the current output instead of comparing",
    )


@pytest.fixture(autouse=True)
def no_registration_left_behind():
    """Every registry (memory scopes, pragma rules, runtime libraries, loaders, target kinds) is
    put back as it was after each test."""
    saved = registry.snapshot_all()
    yield
    registry.restore_all(saved)


@pytest.fixture
def golden(request):
    """golden(name, text): compare text with tests/golden/<name>.txt (or rewrite it with
    --update-golden). Review every rewritten file: a golden file is a claim about the output."""
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = GOLDEN_DIR / f"{name}.txt"
        text = text.rstrip("\n") + "\n"
        if update:
            path.write_text(text)
            return
        if not path.exists():
            pytest.fail(f"no golden file {path}; run pytest --update-golden and review it")
        assert text == path.read_text(), f"printed IR differs from {path}"

    return check


@pytest.fixture
def spad():
    """The example accelerator: a 1 KiB scratchpad at SCRATCHPAD_BASE, scope 'spad', rules
    mvin/mvout."""
    scope = scratchpad_emu.setup(base=SCRATCHPAD_BASE, size=1024)
    yield scope
    scratchpad_emu.teardown()
