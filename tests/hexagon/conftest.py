"""Fixtures for tests that run code under qemu-hexagon: one device session per module."""

import shutil

import pytest

import loom

TOOLS = ("clang", "ld.lld", "qemu-hexagon")


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


requires_hexagon = pytest.mark.skipif(
    bool(missing_tools()),
    reason=f"needs {missing_tools()}: run `make setup` (Debian packages clang, lld, qemu-user)",
)


@pytest.fixture(scope="module")
def hexagon_sim():
    if missing_tools():
        pytest.skip(
            f"needs {missing_tools()}: run `make setup` (Debian packages clang, lld, qemu-user)"
        )
    session = loom.device("hexagon-sim", timeout=120)
    yield session
    session.close()


@pytest.fixture
def dev(hexagon_sim):
    """The module's session, restarted if an earlier test killed it."""
    if hexagon_sim.closed:
        hexagon_sim.restart()
    return hexagon_sim
