"""Hexagon end to end: the VTCM seed program in a hexagon-sim session, failures that must
become exceptions (and leave the next session working), export and load, TCP sessions, and the
same runtime on AArch64. (Versions v68-v73 and HVX float: test_hexagon_versions.py.)"""

import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import loom
from loom import DeviceError, LoomError
from tests.programs import seed_inputs, seed_program

from .conftest import requires_hexagon

pytestmark = requires_hexagon
REPO = pathlib.Path(__file__).resolve().parents[2]
V66 = loom.target.hexagon("v66")


def test_seed_vtcm_program_on_hexagon(dev):
    mod = loom.build(*seed_program(), target=V66, name="alloc_vtcm")
    with tempfile.TemporaryDirectory() as tmp:
        obj = pathlib.Path(tmp) / "alloc_vtcm.o"
        obj.write_bytes(mod.object_code)
        undefined = subprocess.run(
            ["llvm-nm", "-u", str(obj)], capture_output=True, text=True, check=True
        ).stdout.split()
    assert {"HexagonBackendAllocateVTCM", "HexagonBackendFreeVTCM"} <= set(undefined)
    assert mod.extern_symbols["HexagonBackendAllocateVTCM"] == "loom_device_runtime"
    loaded = mod.to_device(dev)  # the device loader resolved every import, or it would refuse
    a, b, expected = seed_inputs()
    A, B = loom.nd.array(a, device=dev), loom.nd.array(b, device=dev)
    C = loom.nd.empty(2048, "int8", device=dev)
    before = dev.stats()["vtcm"]
    loaded["alloc_vtcm"](A, B, C)
    after = dev.stats()["vtcm"]
    np.testing.assert_array_equal(C.numpy(), expected)
    assert after["allocations"] - before["allocations"] == 2
    assert after["frees"] - before["frees"] == 2 and after["in_use"] == 0


def test_in_device_timing(dev):
    mod = loom.build(*seed_program(), target=V66, name="alloc_vtcm")
    a, b, _ = seed_inputs()
    result = mod.to_device(dev).time_evaluator("alloc_vtcm", number=3, repeat=2)(
        a, b, np.zeros(2048, np.int8)
    )
    assert len(result.results) == 2 and 0 < result.mean < 10


def test_unknown_function_and_vtcm_out_of_memory(dev):
    mod = loom.build(*seed_program(), target=V66, name="alloc_vtcm")
    loaded = mod.to_device(dev)
    with pytest.raises(LoomError, match=r"module has no function 'nope'"):
        loaded["nope"]
    with pytest.raises(DeviceError, match=r"LOOKUP failed: .*nope"):
        dev.lookup(loaded.module_id, "nope")  # the device's own answer to a raw lookup
    with pytest.raises(DeviceError, match=r"ALLOC failed: VTCM: cannot allocate 1048576 bytes"):
        loom.nd.empty(1 << 20, "int8", device=dev, memory="vtcm")
    a, b, expected = seed_inputs()  # the session still works
    c = np.zeros(2048, np.int8)
    loaded["alloc_vtcm"](a, b, c)
    np.testing.assert_array_equal(c, expected)


def test_an_unloaded_module_can_no_longer_be_called(dev):
    mod = loom.build(*seed_program(), target=V66, name="alloc_vtcm")
    loaded = mod.to_device(dev)
    a, b, expected = seed_inputs()
    loaded.unload()
    with pytest.raises(DeviceError, match=r"no module \d+ is loaded"):
        loaded["alloc_vtcm"](a, b, np.zeros(2048, np.int8))
    c = np.zeros(2048, np.int8)
    mod.to_device(dev)["alloc_vtcm"](a, b, c)  # loading it again works
    np.testing.assert_array_equal(c, expected)


def test_vtcm_exhausted_at_run_time_frees_what_it_took():
    with loom.device("hexagon-sim", vtcm_size=3000) as small:
        mod = loom.build(*seed_program(), target=V66, name="alloc_vtcm")
        a, b, _ = seed_inputs()
        with pytest.raises(DeviceError, match=r"function returned -1: VTCM: cannot allocate 2048"):
            mod.to_device(small)["alloc_vtcm"](a, b, np.zeros(2048, np.int8))
        stats = small.stats()["vtcm"]
        assert stats["allocations"] == stats["frees"] == 1 and stats["in_use"] == 0


def test_killed_device_process_and_a_new_session():
    dev = loom.device("hexagon-sim")
    mod = loom.build(*seed_program(), target=V66, name="alloc_vtcm")
    loaded = mod.to_device(dev)
    dev.transport.proc.kill()
    a, b, expected = seed_inputs()
    with pytest.raises(
        DeviceError,
        match=r"the device runtime exited with status -9 during "
        r"(LOOKUP|ALLOC|CALL)",
    ):
        loaded["alloc_vtcm"](a, b, np.zeros(2048, np.int8))
    with pytest.raises(DeviceError, match=r"session hexagon-sim is closed"):
        dev.stats()
    dev.restart()
    c = np.zeros(2048, np.int8)
    mod.to_device(dev)["alloc_vtcm"](a, b, c)
    np.testing.assert_array_equal(c, expected)
    dev.close()


def test_hung_device_times_out():
    dev = loom.device("hexagon-sim", timeout=2)
    try:
        os.kill(dev.transport.proc.pid, 19)  # SIGSTOP: alive, but it never answers
        start = time.monotonic()
        with pytest.raises(DeviceError, match=r"no reply to STATS within 2 s"):
            dev.stats()
        assert time.monotonic() - start < 30
    finally:
        dev.close()


def test_export_load_in_a_new_process_then_to_device(tmp_path):
    path = tmp_path / "seed_hexagon.so"
    loom.build(*seed_program(), target=V66, name="alloc_vtcm").export_library(path)
    info = subprocess.run(
        [str(pathlib.Path(sys.executable).parent / "loom"), "inspect", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "hexagon (payload of" in info
    code = f"""
import numpy as np, loom
mod = loom.runtime.load_module({str(path)!r})
with loom.device("hexagon-sim") as dev:
    a = (np.arange(2048) % 200 - 100).astype(np.int8)
    b = np.ones(2048, np.int8)
    c = np.zeros(2048, np.int8)
    mod.to_device(dev)["alloc_vtcm"](a, b, c)
    assert np.array_equal(c, (a.astype(np.int16) + 1).astype(np.int8))
print("ok", [m.type_key for m in mod.walk()])
"""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok ['llvm', 'hexagon']"


def test_tcp_session(tmp_path):
    from loom.runtime.device import emulator, runtime_path

    proc = subprocess.Popen(
        [emulator("hexagon"), str(runtime_path("hexagon")), "--listen", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        port = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", line).group(1))
        dev = loom.device("hexagon", host="127.0.0.1", port=port)
        mod = loom.build(*seed_program(), target=V66, name="alloc_vtcm")
        a, b, expected = seed_inputs()
        c = np.zeros(2048, np.int8)
        mod.to_device(dev)["alloc_vtcm"](a, b, c)
        np.testing.assert_array_equal(c, expected)
        dev.close()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()


def test_aarch64_runtime_loads_the_aarch64_export(tmp_path):
    from loom.backend.cpu import strategies as cpu

    sch, args = cpu.elementwise_kernel(lambda x, y: x * y + 1.0, (1000,), 2)
    path = tmp_path / "mul_aarch64.so"
    loom.build(
        sch, args, target="llvm -mtriple=aarch64-linux-gnu -mattr=+neon", name="muladd"
    ).export_library(path)
    mod = loom.runtime.load_module(path)
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    y = np.linspace(2, 3, 1000, dtype=np.float32)
    out = np.zeros(1000, np.float32)
    with loom.device("aarch64-sim") as dev:
        assert dev.isa == "aarch64"
        mod.to_device(dev)["muladd"](x, y, out)
    exact = x.astype(np.float64) * y + 1  # one rounding: -fp-contract=1 fuses the multiply-add
    np.testing.assert_allclose(out, exact, rtol=1e-6, atol=1e-7)
