"""Fixtures for tests that run code under qemu-hexagon: one device session per module, and
sessions that emulate a given Hexagon version (v68+ needs QEMU 10, which `make setup` installs)."""

import os
import shutil

import pytest

import loom
from loom.runtime.device.emulation import INSTALL_QEMU_10, emulation

TOOLS = ("clang", "ld.lld", "qemu-hexagon")


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


requires_hexagon = pytest.mark.skipif(
    bool(missing_tools()),
    reason=f"needs {missing_tools()}: run `make setup` (Debian packages clang, lld, qemu-user)",
)


def qemu_10_missing() -> str | None:
    """Why the v68-v73 tests cannot run here, or None. On CI (CI set) they always run: setup
    installs QEMU 10 there, and a missing one must fail them, not skip them."""
    if missing_tools() or os.environ.get("CI"):
        return None
    emu = emulation("hexagon")
    if 0x73 in emu.hexagon_versions():
        return None
    return f"qemu-hexagon {emu.version} runs Hexagon v66/v67 only; {INSTALL_QEMU_10}"


requires_qemu_10 = pytest.mark.skipif(qemu_10_missing() is not None, reason=str(qemu_10_missing()))


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


@pytest.fixture(scope="module")
def sessions():
    """One session per emulated Hexagon version ("v68" -> a session started with -cpu v68),
    made on first use, closed with the module."""
    made: dict[str, loom.runtime.Session] = {}

    def session(cpu: str):
        if cpu not in made or made[cpu].closed:
            made[cpu] = loom.device("hexagon-sim", cpu=cpu, timeout=120)
        return made[cpu]

    yield session
    for s in made.values():
        s.close()
