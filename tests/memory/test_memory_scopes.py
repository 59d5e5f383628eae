"""Memory scopes: VTCM-style runtime allocation, fixed-address accelerator memory, pragma
rules and declared extern symbols (the two seed questions answered end to end)."""

import pathlib
import re
import subprocess
import tempfile

import numpy as np
import pytest

import loom
from loom import LoomError, memory, te
from loom.memory import scratchpad_emu
from loom.runtime import host_runtime
from loom.transform import PassContext, prim_func_pass
from tests.programs import SCRATCHPAD_BASE, seed_inputs, seed_program
from tests.thread_sanitizer import assert_race_free


def test_registry_lists_builtins_and_rejects_unknown_scopes():
    names = [s.name for s in memory.list()]
    for builtin in ("global", "local", "shared", "local.vtcm", "global.vtcm"):
        assert builtin in names
    vtcm = memory.get("local.vtcm")
    assert vtcm.strategy == memory.RuntimeAllocator(
        "HexagonBackendAllocateVTCM", "HexagonBackendFreeVTCM"
    )
    with pytest.raises(
        LoomError,
        match=r"unknown memory scope 'local.vtcn' \(did you mean "
        r"local.vtcm.*registered: global, global.vtcm",
    ):
        memory.get("local.vtcn")
    with pytest.raises(LoomError, match=r"already registered"):
        memory.register(memory.MemoryScope("global", memory.Stack()))
    with pytest.raises(ValueError, match=r"alignment must be a power of two"):
        memory.MemoryScope("odd", memory.Stack(), alignment=48)


def test_unknown_scope_in_a_schedule_is_a_build_error():
    A = te.placeholder((8,), name="A")
    T = te.compute((8,), lambda i: A[i] + 1.0, name="T")
    C = te.compute((8,), lambda i: T[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[T].set_scope("local.tcm")
    with pytest.raises(LoomError, match=r"unknown memory scope 'local.tcm'.*registered:"):
        loom.build(s, [A, C])


def test_seed_program_lowers_to_vtcm_calls_with_null_checks_and_frees():
    s, args = seed_program()
    text = str(loom.lower(s, args, name="alloc_vtcm", target="llvm"))
    for buf in ("A_buf", "B_buf"):
        assert re.search(
            rf'let {buf}: handle = call_extern\("HexagonBackendAllocateVTCM", '
            rf"uint32\(2048\), uint32\(128\), dtype=handle\);",
            text,
        ), text
        assert f"assert(!@isnullptr({buf}), last error);" in text
        assert f'defer {{ call_extern("HexagonBackendFreeVTCM", {buf}, dtype=int32) }}' in text
    assert "allocate(" not in text  # no special-scope allocation is left


def test_seed_program_runs_on_the_host_with_a_user_pass():
    seen = []

    @prim_func_pass
    def observe(func):
        seen.append(func.name)
        return func

    s, args = seed_program()
    with PassContext(config={"tir.add_lower_pass": [(1, observe)]}):
        mod = loom.build(s, args, name="alloc_vtcm")
    assert seen == ["alloc_vtcm"]
    a, b, expected = seed_inputs()
    c = np.zeros_like(a)
    before = loom.runtime.vtcm_stats()
    mod["alloc_vtcm"](a, b, c)
    after = loom.runtime.vtcm_stats()
    np.testing.assert_array_equal(c, expected)
    assert after["allocations"] - before["allocations"] == 2
    assert after["frees"] - before["frees"] == 2
    assert after["in_use"] == 0


def test_object_leaves_allocator_symbols_undefined_and_the_report_names_their_provider():
    s, args = seed_program()
    mod = loom.build(s, args, name="alloc_vtcm")
    with tempfile.TemporaryDirectory() as tmp:
        obj = pathlib.Path(tmp) / "alloc_vtcm.o"
        obj.write_bytes(mod.object_code)
        undefined = subprocess.run(
            ["nm", "-u", str(obj)], capture_output=True, text=True, check=True
        ).stdout.split()
    assert "HexagonBackendAllocateVTCM" in undefined and "HexagonBackendFreeVTCM" in undefined
    assert mod.extern_symbols["HexagonBackendAllocateVTCM"] == "loom_host_runtime"
    assert mod.extern_symbols["HexagonBackendFreeVTCM"] == "loom_host_runtime"
    assert re.search(r"HexagonBackendFreeVTCM\s+<- loom_host_runtime", mod.build_report())


def test_allocation_failure_is_an_exception_and_nothing_leaks():
    loom.runtime.configure_vtcm(3000)  # room for A_buf (2048 bytes), not for B_buf as well
    try:
        s, args = seed_program()
        mod = loom.build(s, args, name="alloc_vtcm")
        a, b, _ = seed_inputs()
        c = np.zeros_like(a)
        with pytest.raises(
            LoomError,
            match=r"alloc_vtcm failed .*VTCM: cannot allocate 2048 "
            r"bytes aligned to 128 \(capacity 3000",
        ):
            mod["alloc_vtcm"](a, b, c)
        stats = loom.runtime.vtcm_stats()
        assert stats["allocations"] == 1 and stats["failures"] == 1
        assert stats["frees"] == 1 and stats["in_use"] == 0  # A_buf freed on the error path
    finally:
        loom.runtime.configure_vtcm(256 * 1024)


def test_undeclared_extern_symbol_is_a_build_error_naming_it():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: loom.ir.op.call_extern("float32", "loom_aloc", A[i]), name="B")
    with pytest.raises(
        LoomError,
        match=r"function uses_undeclared calls extern symbol "
        r"'loom_aloc', which no runtime library declares.*"
        r"similar declared symbols: loom_alloc "
        r"\(loom_host_runtime\)",
    ):
        loom.build(te.create_schedule(B.op), [A, B], name="uses_undeclared")


def test_extern_call_with_wrong_argument_types_is_refused():
    A = te.placeholder((4,), name="A")
    B = te.compute(
        (4,), lambda i: loom.ir.op.call_extern("float32", "expf", A[i].astype("float64")), name="B"
    )
    with pytest.raises(
        LoomError,
        match=r"calls float expf\(float x\) \(from libm\) with "
        r"argument types \['float64'\], expected \['float32'\]",
    ):
        loom.build(te.create_schedule(B.op), [A, B])


def test_declared_libm_symbol_is_callable():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: loom.ir.op.call_extern("float32", "expf", A[i]), name="B")
    mod = loom.build(te.create_schedule(B.op), [A, B], name="call_expf")
    a = np.linspace(0, 1, 4, dtype=np.float32)
    b = np.zeros(4, np.float32)
    mod["call_expf"](a, b)
    np.testing.assert_allclose(b, np.exp(a), rtol=1e-6)
    assert mod.extern_symbols["expf"] == "libm"


def copy_program(nbytes: int, pragma: bool = True):
    A = te.placeholder((nbytes,), name="A", dtype="uint8")
    A_spad = te.compute(A.shape, lambda i: A[i], name="A_spad")
    C = te.compute(A.shape, lambda i: A_spad[i], name="C")
    s = te.create_schedule(C.op)
    s[A_spad].set_scope("spad")
    if pragma:
        s[A_spad].pragma(s[A_spad].op.axis[0], "mvin")
        s[C].pragma(C.op.axis[0], "mvout")
    return s, [A, C]


def test_fixed_address_buffer_is_placed_inside_the_range(spad):
    mod = loom.build(*copy_program(512), name="copy512")
    a = np.arange(512, dtype=np.uint32).astype(np.uint8)
    c = np.zeros_like(a)
    mod["copy512"](a, c)
    used = scratchpad_emu.last_transfer()["device_address"]
    assert SCRATCHPAD_BASE <= used and used + 512 <= SCRATCHPAD_BASE + 1024
    np.testing.assert_array_equal(c, a)


def test_fixed_address_buffer_over_capacity_is_a_build_error(spad):
    with pytest.raises(
        LoomError,
        match=r"buffer A_spad needs 2048 bytes but memory scope spad "
        r"has 1024 bytes",
    ):
        loom.build(*copy_program(2048), name="copy2k")


def test_buffers_that_together_overflow_the_scope(spad):
    A = te.placeholder((600,), name="A", dtype="uint8")
    P = te.compute(A.shape, lambda i: A[i], name="P")
    Q = te.compute(A.shape, lambda i: P[i], name="Q")  # spad -> spad copy: the device's own
    C = te.compute(A.shape, lambda i: Q[i], name="C")
    s = te.create_schedule(C.op)
    for t, rule in ((P, "mvin"), (C, "mvout")):
        s[t].pragma(s[t].op.axis[0], rule)
    s[P].set_scope("spad")
    s[Q].set_scope("spad")
    with pytest.raises(
        LoomError,
        match=r"pool spad has 1024 bytes, but its buffers need 1208 \(lower bound 1200; the "
        r"largest: Q of two: 600, P of two: 600\)",
    ):
        loom.lower(s, [A, C], name="two", target="llvm")


def test_pragma_mvin_program_of_the_question(spad):
    A = te.placeholder((4, 4, 1, 8), dtype="uint8", name="A")
    A_spad = te.compute(A.shape, lambda *i: A(*i), name="A_spad")
    C = te.compute(A.shape, lambda *i: A_spad(*i), name="C")
    s = te.create_schedule(C.op)
    s[A_spad].set_scope("spad")
    s[A_spad].pragma(s[A_spad].op.axis[0], "mvin")
    s[C].pragma(C.op.axis[0], "mvout")
    text = str(loom.lower(s, [A, C], name="move", target="llvm"))
    assert text.count('call_extern("mvin"') == 1 and "for (" not in text
    assert re.search(
        r'call_extern\("mvin", @address_of\(A\[0\]\), cast\(uint64, '
        r"@address_of\(A_spad\[0\]\)\), 1, 128, 128, 128",
        text,
    ), text
    mod = loom.build(s, [A, C], name="move")
    a = np.random.default_rng(0).integers(0, 256, A.shape).astype(np.uint8)
    c = np.zeros_like(a)
    mod["move"](a, c)
    assert scratchpad_emu.read(SCRATCHPAD_BASE, 128) == a.tobytes()  # the device-side bytes
    np.testing.assert_array_equal(c, a)


def test_pragma_on_a_nest_that_is_not_a_copy(spad):
    A = te.placeholder((16,), name="A", dtype="uint8")
    A_spad = te.compute(A.shape, lambda i: A[i] * 2, name="A_spad")
    C = te.compute(A.shape, lambda i: A_spad[i], name="C")
    s = te.create_schedule(C.op)
    s[A_spad].set_scope("spad")
    s[A_spad].pragma(s[A_spad].op.axis[0], "mvin")
    s[C].pragma(C.op.axis[0], "mvout")
    with pytest.raises(
        LoomError,
        match=r"pragma 'mvin': the loop nest must be a copy between two"
        r" buffers \(dst\[...\] = src\[...\]\), found a store of "
        r"Mul",
    ):
        loom.build(s, [A, C])


def test_strided_copy_becomes_a_two_dimensional_transfer(spad):
    A = te.placeholder((8, 16), name="A", dtype="uint8")
    A_spad = te.compute((8, 4), lambda i, j: A[i, j + 2], name="A_spad")  # 4 of every 16 bytes
    C = te.compute((8, 4), lambda i, j: A_spad[i, j], name="C")
    s = te.create_schedule(C.op)
    s[A_spad].set_scope("spad")
    s[A_spad].pragma(s[A_spad].op.axis[0], "mvin")
    s[C].pragma(C.op.axis[0], "mvout")
    text = str(loom.lower(s, [A, C], name="strided", target="llvm"))
    assert re.search(r'call_extern\("mvin", @address_of\(A\[2\]\), .*, 8, 4, 16, 4, dtype', text)
    mod = loom.build(s, [A, C], name="strided")
    a = np.arange(128, dtype=np.uint8).reshape(8, 16)
    c = np.zeros((8, 4), np.uint8)
    mod["strided"](a, c)
    np.testing.assert_array_equal(c, a[:, 2:6])


def test_host_code_may_not_touch_the_scratchpad(spad):
    with pytest.raises(
        LoomError,
        match=r"function nomove runs on cpu but writes buffer A_spad in "
        r"memory scope spad, which only \['scratchpad_emu'\] can "
        r"access",
    ):
        loom.build(*copy_program(64, pragma=False), name="nomove")


def test_pragma_rule_checks_the_address_spaces_it_copies_between(spad):
    A = te.placeholder((64,), name="A", dtype="uint8")
    P = te.compute(A.shape, lambda i: A[i], name="P")
    Q = te.compute(A.shape, lambda i: P[i], name="Q")
    C = te.compute(A.shape, lambda i: Q[i], name="C")
    s = te.create_schedule(C.op)
    s[P].set_scope("spad")
    s[Q].set_scope("spad")
    s[P].pragma(s[P].op.axis[0], "mvin")
    s[Q].pragma(s[Q].op.axis[0], "mvin")  # scratchpad -> scratchpad is not an mvin
    s[C].pragma(C.op.axis[0], "mvout")
    with pytest.raises(
        LoomError,
        match=r"pragma 'mvin': the copy reads P in scope spad \(address "
        r"space scratchpad\), but the rule reads address space "
        r"host",
    ):
        loom.build(s, [A, C])


def test_runtime_bounds_check_of_the_emulated_device(spad):
    memory.register(
        memory.MemoryScope(
            "spad.big",
            memory.FixedAddress(SCRATCHPAD_BASE, 4096, 8, "scratchpad"),
            alignment=16,
            accessible_from=("scratchpad_emu",),
        )
    )
    try:
        A = te.placeholder((1024,), name="A", dtype="uint8")
        P = te.compute(A.shape, lambda i: A[i], name="P")
        Q = te.compute(A.shape, lambda i: A[i], name="Q")
        C = te.compute(A.shape, lambda i: Q[i], name="C")
        D = te.compute(A.shape, lambda i: P[i], name="D")
        s = te.create_schedule([C.op, D.op])
        for t in (P, Q):
            s[t].set_scope("spad.big")
            s[t].pragma(s[t].op.axis[0], "mvin")
        for t in (C, D):
            s[t].pragma(t.op.axis[0], "mvout")
        mod = loom.build(s, [A, C, D], name="overflow")
        a = np.ones(1024, np.uint8)
        with pytest.raises(
            LoomError,
            match=r"mvin: device range \[0x40000400, 0x40000800\) is "
            r"outside the scratchpad \[0x40000000, 0x40000400\)",
        ):
            mod["overflow"](a, np.zeros(1024, np.uint8), np.zeros(1024, np.uint8))
    finally:
        memory.unregister("spad.big")


def test_global_scope_uses_the_host_heap_allocator():
    A = te.placeholder((64,), name="A")
    T = te.compute((64,), lambda i: A[i] + 1.0, name="T")
    C = te.compute((64,), lambda i: T[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    text = str(loom.lower(s, [A, C], name="heap", target="llvm"))
    assert 'let T: handle = call_extern("loom_alloc", int64(256), int64(64), dtype=handle)' in text
    assert 'defer { call_extern("loom_free", T, dtype=int32) }' in text


def test_guarded_tile_copies_become_shorter_transfers(spad):
    A = te.placeholder((20,), name="A", dtype="uint8")
    A_spad = te.compute(A.shape, lambda i: A[i], name="A_spad")
    C = te.compute(A.shape, lambda i: A_spad[i], name="C")
    s = te.create_schedule(C.op)
    s[A_spad].set_scope("spad")
    outer, inner = s[A_spad].split(s[A_spad].op.axis[0], factor=8)  # tiles of 8, 8 and 4
    s[A_spad].pragma(inner, "mvin")
    s[C].pragma(C.op.axis[0], "mvout")
    text = str(loom.lower(s, [A, C], name="tiles", target="llvm"))
    assert re.search(
        r'call_extern\("mvin", .*, 1, min\(\(20 - \(i.outer \* 8\)\), 8\)', text
    ) or re.search(r'call_extern\("mvin", .*, 1, min\(8, \(20 - \(i.outer \* 8\)\)\)', text), text
    before = scratchpad_emu.last_transfer()["count"]
    mod = loom.build(s, [A, C], name="tiles")
    a = np.arange(20, dtype=np.uint8) + 100
    c = np.zeros(20, np.uint8)
    mod["tiles"](a, c)
    np.testing.assert_array_equal(c, a)
    assert scratchpad_emu.last_transfer()["count"] - before == 4  # three mvin, one mvout


def test_vtcm_allocator_is_race_free_across_threads(tmp_path):
    """Kernels on several threads (a parallel loop, or Python threads) share the one arena."""
    sources = [pathlib.Path(__file__).with_name("vtcm_stress.c"), *host_runtime.SOURCES]
    [out] = assert_race_free(tmp_path / "vtcm_stress", sources)
    stats = dict(zip(host_runtime.ARENA_STATS, map(int, out.split()[3:]), strict=True))
    assert out.startswith("failures 0 ")
    assert stats["allocations"] == stats["frees"] == 4 * 5000 and stats["in_use"] == 0
