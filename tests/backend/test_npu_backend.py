"""The reference NPU through the plug-in API: int8 matmul and conv2d built for target "npu",
run on the simulator, bit for bit; scratchpad placement; capacity and bounds errors; backend
passes seeing the whole module; the cycle model; export and load."""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import loom
from loom import LoomError, te
from loom.backend import npu
from loom.backend.npu import simulator as npu_sim
from loom.runtime.native_lib import cache_dir
from loom.transform import module_pass

from . import npu_reference as ref
from .test_npu_strategies import run_conv

REPO = pathlib.Path(__file__).resolve().parents[2]
DIM = npu_sim.DIM


def operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.integers(-128, 128, (m, k)).astype(np.int8),
        rng.integers(-128, 128, (k, n)).astype(np.int8),
        rng.integers(-20000, 20000, n).astype(np.int32),
    )


@pytest.mark.parametrize("shape", [(16, 16, 16), (20, 37, 50), (5, 3, 7), (64, 48, 40)])
@pytest.mark.parametrize("relu", [False, True])
def test_matmul_bit_exact(shape, relu):
    m, n, k = shape
    sch, args = npu.BACKEND.strategy("matmul", m, n, k, multiplier=11, shift=9, relu=relu)
    mod = loom.build(sch, args, target="npu", name="mm")
    a, b, bias = operands(m, n, k)
    c = np.zeros((m, n), np.int8)
    mod["mm"](a, b, bias, c)
    np.testing.assert_array_equal(c, ref.matmul(a, b, bias, 11, 9, relu))


@pytest.mark.parametrize(
    "data,kernel,stride,padding",
    [
        ((1, 9, 11, 3), (3, 3, 3, 5), 1, 1),
        ((2, 10, 10, 20), (3, 3, 20, 18), 2, 1),
        ((1, 6, 6, 8), (1, 1, 8, 16), 1, 0),
        ((1, 7, 18, 17), (2, 3, 17, 33), 2, 0),
    ],
)
def test_conv2d_bit_exact(data, kernel, stride, padding):
    run_conv(data, kernel, stride, padding)  # checks against the numpy reference


def test_npu_buffers_have_constant_addresses_and_no_host_allocation():
    mod = loom.build(*npu.BACKEND.strategy("matmul", 40, 40, 40), target="npu", name="mm")
    kernel = mod.imports[0]
    assert kernel.type_key == "npu" and kernel.function_names() == ["mm_npu"]
    source = kernel.get_source("c")
    assert "loom_alloc" not in source and "HexagonBackend" not in source
    addresses = {
        name: int(value)
        for name, value in re.findall(
            r"void \*const (\w+) = \(\(void \*\)\(uintptr_t\)UINT64_C\((\d+)\)\);", source
        )
    }
    assert set(addresses) == {"acc", "A_npu_spad", "B_npu_spad"}
    for name, address in addresses.items():
        if name == "acc":
            assert npu_sim.ACC_BASE <= address < npu_sim.ACC_BASE + npu_sim.ACC_ROWS
        else:
            assert 0 <= address < npu_sim.SPAD_ROWS
    assert addresses["A_npu_spad"] != addresses["B_npu_spad"]
    assert "npu.spad" in kernel.memories and "npu.acc" in kernel.memories


def test_tiles_that_overflow_the_scratchpad_fail_at_build_time():
    k = 20000  # resident weights: 20000 x 16 int8 = 320000 bytes, the scratchpad has 262144
    sch, args = npu.BACKEND.strategy("matmul", 16, 16, k, weights="resident")
    with pytest.raises(
        LoomError,
        match=r"buffer B\.npu\.spad needs 320000 bytes but memory "
        r"scope npu\.spad has 262144 bytes",
    ):
        loom.build(sch, args, target="npu", name="mm")
    sch, args = npu.BACKEND.strategy("matmul", 16, 16, 4000, weights="resident")  # fits
    mod = loom.build(sch, args, target="npu", name="mm")
    a, b, bias = operands(16, 16, 4000)
    c = np.zeros((16, 16), np.int8)
    mod["mm"](a, b, bias, c)
    np.testing.assert_array_equal(c, ref.matmul(a, b, bias, 1, 0, False))


def test_out_of_range_mvin_is_a_python_exception_from_the_simulator():
    from loom.ir import NOP, AssertStmt, IntImm, PrimFunc, decl_buffer, op

    a = decl_buffer((DIM,), "int8", "A")
    call = op.call_extern(
        "int32",
        "npu_mvin",
        op.call_intrin("handle", "address_of", a[0]),
        IntImm(npu_sim.SPAD_ROWS + 5, "uint32"),
        1,
        DIM,
    )
    func = PrimFunc("bad_mvin", (a,), AssertStmt(op.equal(call, 0), None, NOP))
    mod = loom.build(func, target="c", name="bad_mvin")
    with pytest.raises(LoomError, match=r"bad_mvin failed .*npu_mvin: .*16389.*outside"):
        mod["bad_mvin"](np.zeros(DIM, np.int8))
    npu_sim.config_ld(DIM)  # the simulator keeps working (strides are left from the last run)
    npu_sim.mvin(np.ones((2, DIM), np.int8), 0, 2, DIM)
    np.testing.assert_array_equal(npu_sim.read_memory(0, 2), np.ones((2, DIM), np.int8))


def test_backend_pass_receives_host_function_and_kernels():
    seen = []

    @module_pass(name="record_functions")
    def record(mod):
        seen.append(sorted(mod.names()))
        return mod

    class TracedNPU(npu.NPUBackend):
        name = "npu_traced"

        def passes(self):
            return [("flatten", record), ("build", record)]

    loom.backend.register(TracedNPU())
    assert "npu_traced" in [b.name for b in loom.backend.list()]
    sch, args = npu.BACKEND.strategy("matmul", 16, 16, 16)
    mod = loom.build(sch, args, target="npu_traced", name="main")
    assert seen == [["main", "main_npu_traced"], ["main", "main_npu_traced"]]
    a, b, bias = operands(16, 16, 16)
    c = np.zeros((16, 16), np.int8)
    mod["main"](a, b, bias, c)
    np.testing.assert_array_equal(c, ref.matmul(a, b, bias, 1, 0, False))


def expected_matmul_counters(m, n, k):
    """The counters the cycle model of docs/npu.md gives for the matmul strategy's instruction
    stream (all sizes multiples of DIM, A in one block of m rows): each DIM-column slice of A
    once (config_ld + mvin of m rows); per DIM-column tile of C a broadcast bias mvin into m
    accumulator rows, then per DIM x DIM tile of B an mvin of it, a preload and a compute
    streaming all m rows, then one mvout of m rows. `serial_cycles` is the sum of the costs."""
    bw, load, store = npu_sim.BANDWIDTH, npu_sim.LOAD_LATENCY, npu_sim.STORE_LATENCY
    ntiles, ktiles = n // DIM, k // DIM
    mvin_a = load + -(-m * DIM // bw)  # m rows of DIM int8
    mvin_bias = load + -(-DIM * 4 // bw) + m - 1  # one DRAM row, m accumulator rows
    mvin_b = load + -(-DIM * DIM // bw)
    per_k = (1 + mvin_b) + DIM + (m + DIM - 1)  # config_ld + mvin, preload, compute
    per_tile = (1 + mvin_bias) + ktiles * per_k + (1 + store + -(-m * DIM // bw))
    return {
        "serial_cycles": ktiles * (1 + mvin_a) + ntiles * per_tile,
        "execute_busy": ntiles * ktiles * m,  # rows streamed into the array
        "macs": m * n * k,
        "mvin": ktiles + ntiles * (1 + ktiles),
        "mvout": ntiles,
        "preload": ntiles * ktiles,
        "compute": ntiles * ktiles,
        "config": ktiles + ntiles * (1 + ktiles + 1),
        "bytes_in": m * k + k * n + ntiles * DIM * 4,  # each operand once, a bias row per tile
        "bytes_out": m * n,
        "fence": 1,  # the kernel's last instruction
    }


def run_matmul_counters(m, n, k, **options):
    mod = loom.build(
        *npu.BACKEND.strategy("matmul", m, n, k, multiplier=3, shift=8, **options),
        target="npu",
        name="mm",
    )
    a, b, bias = operands(m, n, k)
    c = np.zeros((m, n), np.int8)
    npu_sim.reset()
    mod["mm"](a, b, bias, c)
    np.testing.assert_array_equal(c, ref.matmul(a, b, bias, 3, 8, False))
    return npu_sim.counters()


def test_counters_follow_the_cycle_model_on_a_256_cube_matmul():
    m = n = k = 256
    counters = run_matmul_counters(m, n, k)
    expected = expected_matmul_counters(m, n, k)
    assert {name: counters[name] for name in expected} == expected
    # the loads and stores overlap the computes: the array streams rows most of the time
    assert counters["execute_busy"] <= counters["cycles"] < counters["serial_cycles"]
    assert npu_sim.utilization(counters) == pytest.approx(
        m * n * k / (counters["cycles"] * DIM * DIM)
    )
    assert npu_sim.utilization(counters) >= 0.85


def test_without_double_buffers_the_loads_wait_for_the_computes():
    """One copy of each staged buffer: the next tile's mvin must wait (WAR) for the computes
    reading the current one, so the queues overlap less and the same instructions take longer."""
    doubled = run_matmul_counters(64, 64, 64)
    single = run_matmul_counters(64, 64, 64, double_buffer=False)
    assert single["serial_cycles"] == doubled["serial_cycles"]
    assert doubled["cycles"] < single["cycles"]


def test_export_with_npu_import_then_load_in_a_new_process(tmp_path):
    path = tmp_path / "npu_matmul.so"
    loom.build(
        *npu.BACKEND.strategy("matmul", 20, 24, 33, multiplier=5, shift=7), target="npu", name="mm"
    ).export_library(path)
    code = f"""
import numpy as np, loom
from tests.backend import npu_reference as ref
mod = loom.runtime.load_module({str(path)!r})
rng = np.random.default_rng(2)
a = rng.integers(-128, 128, (20, 33)).astype(np.int8)
b = rng.integers(-128, 128, (33, 24)).astype(np.int8)
bias = rng.integers(-999, 999, 24).astype(np.int32)
c = np.zeros((20, 24), np.int8)
mod["mm"](a, b, bias, c)
assert np.array_equal(c, ref.matmul(a, b, bias, 5, 7, False))
print([m.type_key for m in mod.walk()], mod.imports[0].function_names())
"""
    library = path.read_bytes()  # no DT_NEEDED or RUNPATH naming a file of this machine
    assert b"libnpu_sim" not in library and str(cache_dir()).encode() not in library
    # a new process with an empty cache: the simulator is built again there, then loaded
    env = {**os.environ, "LOOM_CACHE_DIR": str(tmp_path / "another_cache")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['c', 'npu'] ['mm_npu']"


def test_npu_requantize_matches_the_interpreter():
    """The requantize expression means the same in loom's IR as in the NPU's mvout."""
    X = te.placeholder((64,), "int32", name="X")
    Y = te.compute((64,), lambda i: npu.requantize(X[i], 12345, 13, True), name="Y")
    x = np.random.default_rng(0).integers(-(2**31), 2**31 - 1, 64).astype(np.int32)
    y = np.zeros(64, np.int8)
    loom.ir.interpret(loom.lower(te.create_schedule(Y.op), [X, Y]), x, y)
    np.testing.assert_array_equal(y, ref.requantize(x, 12345, 13, True))


def test_lower_for_the_npu_gives_what_its_code_generation_receives():
    mod = loom.lower(*npu.BACKEND.strategy("matmul", 16, 16, 16), name="mm", target="npu")
    assert mod.names() == ["mm", "mm_npu"]
    assert mod["mm_npu"].attr(loom.backend.KERNEL_ATTR) == "npu"
    text = str(mod)
    assert 'call_func("mm_npu", A, B, bias, C)' in text
    assert 'call_extern("npu_compute"' in text and "loom_alloc" not in text
