"""The compile cache (docs/native.md, "Compile cache"): an unchanged kernel built again skips
lowering (in this process), LLVM and linking (in this process or from the disk), a changed one
never gets the old code, and the cache can be turned off."""

import ctypes
import os

import numpy as np
import pytest

import loom
from loom import driver, lowering_cache, te
from loom.codegen import llvm as llvm_codegen
from loom.ir import fingerprint as fp
from loom.ir.expr import Var
from loom.runtime import compile_cache, linker
from loom.transform import PassContext


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """A cache of the test's own, empty in memory and on disk."""
    monkeypatch.setenv("LOOM_KERNEL_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.delenv("LOOM_CACHE", raising=False)
    compile_cache.clear_memory()
    lowering_cache.clear()
    yield tmp_path / "kernels"
    compile_cache.clear_memory()
    lowering_cache.clear()


@pytest.fixture
def work(monkeypatch):
    """Counts of the work a build does: lowering a schedule, LLVM, the linker."""
    counts = {"lower": 0, "llvm": 0, "link": 0}

    def spy(module, name, what):
        real = getattr(module, name)

        def counted(*args, **kwargs):
            counts[what] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    spy(driver, "lower_schedule", "lower")
    spy(llvm_codegen, "optimize", "llvm")
    spy(linker, "run", "link")
    return counts


def axpy(n=64, scale=3.0, name="y"):
    x = te.placeholder((n,), "float32", "x")
    y = te.compute((n,), lambda i: x[i] * scale + 1.0, name)
    s = te.create_schedule(y.op)
    return s, [x, y]


def run(mod, n=64, fn="f"):
    x = np.arange(n, dtype="float32")
    y = np.zeros(n, "float32")
    mod[fn](x, y)
    return x, y


def test_an_unchanged_kernel_is_built_again_without_lowering_llvm_or_linking(work):
    first = loom.build(*axpy(), name="f")
    assert work == {"lower": 1, "llvm": 1, "link": 1}
    again = loom.build(*axpy(), name="f")  # a new schedule, built alike
    assert work == {"lower": 1, "llvm": 1, "link": 1}
    x, y = run(again)
    np.testing.assert_allclose(y, x * 3 + 1)
    assert again.get_source("asm") == first.get_source("asm")
    assert again.get_source("ir") == first.get_source("ir")


def test_a_changed_kernel_is_compiled_again(work):
    loom.build(*axpy(scale=3.0), name="f")
    mod = loom.build(*axpy(scale=5.0), name="f")
    assert work["llvm"] == 2
    x, y = run(mod)
    np.testing.assert_allclose(y, x * 5 + 1)
    loom.build(*axpy(scale=5.0), name="g")  # the name is a symbol of the object code
    loom.build(*axpy(scale=5.0, name="z"), name="f")  # so are buffer names, in messages
    loom.build(*axpy(scale=5.0), name="f", target="llvm -mattr=-avx512f")
    assert work["llvm"] == 5


def test_a_schedule_changed_after_a_build_is_lowered_again(work):
    s, args = axpy(n=256)
    loom.build(s, args, name="f")
    outer, inner = s[args[1]].split(args[1].op.axis[0], factor=16)
    s[args[1]].vectorize(inner)
    mod = loom.build(s, args, name="f")
    assert work["lower"] == 2 and work["llvm"] == 2
    assert "ramp(" in mod.get_source("ir")
    x, y = run(mod, n=256)
    np.testing.assert_allclose(y, x * 3 + 1)


def test_the_pass_context_is_part_of_the_key(work):
    s, args = axpy(n=256)
    s[args[1]].vectorize(s[args[1]].split(args[1].op.axis[0], factor=16)[1])
    vectorized = loom.build(s, args, name="f")
    with PassContext(config={"tir.disable_vectorize": True}):
        serial = loom.build(s, args, name="f")
    assert work["lower"] == 2
    assert "ramp(" in vectorized.get_source("ir") and "ramp(" not in serial.get_source("ir")


def test_the_disk_cache_serves_another_process(work, cache_dir):
    loom.build(*axpy(), name="f")
    kinds = sorted(p.name for p in cache_dir.iterdir())
    assert kinds == ["llvm-object", "shared-library"]
    compile_cache.clear_memory()  # as a new process: only the disk is left
    lowering_cache.clear()
    mod = loom.build(*axpy(), name="f")
    assert work == {"lower": 2, "llvm": 1, "link": 1}  # lowered again; no LLVM, no linking
    x, y = run(mod)
    np.testing.assert_allclose(y, x * 3 + 1)


def test_a_damaged_entry_is_a_miss(work, cache_dir):
    loom.build(*axpy(), name="f")
    [entry] = [p for p in (cache_dir / "llvm-object").rglob("*") if p.is_file()]
    data = bytearray(entry.read_bytes())
    data[-1] ^= 0xFF
    entry.write_bytes(bytes(data))
    compile_cache.clear_memory()
    lowering_cache.clear()
    mod = loom.build(*axpy(), name="f")
    assert work["llvm"] == 2
    x, y = run(mod)
    np.testing.assert_allclose(y, x * 3 + 1)


def test_loom_cache_0_turns_it_off(work, cache_dir, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE", "0")
    loom.build(*axpy(), name="f")
    loom.build(*axpy(), name="f")
    assert work == {"lower": 2, "llvm": 2, "link": 2}
    assert not cache_dir.exists()


def test_kernels_from_one_entry_are_separate_libraries():
    first = loom.build(*axpy(), name="f")
    second = loom.build(*axpy(), name="f")
    assert first.library.path != second.library.path

    def address(mod):
        return ctypes.cast(mod.library.function("f"), ctypes.c_void_p).value

    assert address(first) != address(second)  # each has its own code and globals


def test_fingerprints_are_structural():
    def program(scale, name="y"):
        s, args = axpy(scale=scale, name=name)
        return loom.lower(s, args, name="f")

    assert fp.fingerprint(program(2.0)) == fp.fingerprint(program(2.0))
    assert fp.fingerprint(program(2.0)) != fp.fingerprint(program(3.0))
    assert fp.fingerprint(program(2.0)) != fp.fingerprint(program(2.0, name="z"))
    x, y = Var("x"), Var("y")
    assert fp.fingerprint(x + y) != fp.fingerprint(x + x)
    assert fp.fingerprint(x + y) == fp.fingerprint(Var("x") + Var("y"))


def test_what_cannot_be_walked_is_not_fingerprinted():
    assert fp.fingerprint((Var("x"), lambda: 0)) is None
    key, alive = fp.process_fingerprint((Var("x"), abs))
    assert alive == [abs]  # a function counts by identity, in this process only
    assert fp.process_fingerprint((Var("x"), abs))[0] == key
    assert fp.process_fingerprint((Var("x"), len))[0] != key
    assert fp.process_fingerprint(object()) is None


def _entry_files(folder):
    return sorted(p.name for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))


def test_prune_removes_the_least_recently_used_entries(cache_dir):
    keys = [compile_cache.key_of("prune", str(i)) for i in range(8)]
    for i, key in enumerate(keys):
        compile_cache.put("test-kind", key, bytes(1000))
        path = cache_dir / "test-kind" / key[:2] / key
        os.utime(path, (1000 + i, 1000 + i))  # written in order, a second apart
    compile_cache.clear_memory()
    assert compile_cache.get("test-kind", keys[0]) is not None  # read: now the newest
    removed = compile_cache.prune(limit=5000 + 1100)  # > 5 entries: down to 3/4 of the limit
    left = _entry_files(cache_dir)
    assert removed == (8 - len(left)) * (1000 + 43)  # each file: header + payload
    assert keys[0] in left and keys[7] in left
    assert keys[1] not in left and keys[2] not in left
    assert sum((cache_dir / "test-kind" / k[:2] / k).stat().st_size for k in left) <= 6100 * 3 // 4


def test_writing_prunes_to_loom_cache_max_mb(cache_dir, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_MAX_MB", str(20_000 / 2**20))  # 20,000 bytes
    for i in range(60):
        compile_cache.put("test-kind", compile_cache.key_of("written", str(i)), bytes(1000))
    total = sum(p.stat().st_size for p in cache_dir.rglob("*") if p.is_file())
    assert total <= 20_000 + 20_000 // 16 + 1043  # pruned at least every sixteenth of the room
    assert compile_cache.get("test-kind", compile_cache.key_of("written", "59")) is not None


@pytest.mark.parametrize("value", ["0", "-3", "lots", ""])
def test_a_bad_loom_cache_max_mb_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv("LOOM_CACHE_MAX_MB", value)
    with pytest.raises(ValueError, match="LOOM_CACHE_MAX_MB must be a positive number"):
        compile_cache.max_bytes()
