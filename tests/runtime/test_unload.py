"""A module's shared library is unloaded when the last reference to it goes: a process that
builds many kernels (a tuner, a notebook, a server) keeps a bounded number of memory maps, and a
kernel that can still be called keeps its code loaded (loom/runtime/library.py)."""

import ctypes
import gc
import pathlib

import numpy as np
import pytest

import loom
from loom import te
from loom.runtime import linker
from loom.target import Target

pytestmark = pytest.mark.skipif(
    not pathlib.Path("/proc/self/maps").exists(), reason="counts maps in /proc/self/maps (Linux)"
)

A_VALUES = np.arange(4, dtype="float32")


def maps_of(path: str) -> int:
    """The memory maps of this process that map the file `path` (deleted or not)."""
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if f" {path}" in line)


def all_maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def add_constant(k: int, target="llvm"):
    """A kernel of its own for each `k`: B = A + k."""
    A = te.placeholder((4,), "float32", "A")
    B = te.compute((4,), lambda i: A[i] + float(k), "B")
    return loom.build(te.create_schedule(B.op), [A, B], target, name="add")


def check_adds(fn, k: int) -> None:
    b = np.empty(4, "float32")
    fn(A_VALUES, b)
    np.testing.assert_array_equal(b, A_VALUES + k)


def test_a_dropped_module_returns_its_maps_at_once():
    mod = add_constant(1)
    timer = mod.time_evaluator("add", number=1, repeat=1)
    check_adds(mod, 1)
    timer(A_VALUES, np.empty(4, "float32"))
    path = mod.library.path
    assert maps_of(path) > 0
    gc.disable()  # no reference cycle holds the library: dropping the last reference unloads it
    try:
        del mod, timer
        assert maps_of(path) == 0
    finally:
        gc.enable()


def test_a_kept_function_keeps_its_library_after_its_module_is_dropped():
    mod = add_constant(2)
    fn, cfunc, timer = mod["add"], mod["add"].cfunc, mod.time_evaluator("add", number=1, repeat=1)
    path = mod.library.path
    del mod
    gc.collect()
    check_adds(fn, 2)  # still loaded: a call after unloading would crash the process
    timer(A_VALUES, np.empty(4, "float32"))
    del fn, timer
    gc.collect()
    assert maps_of(path) > 0  # the bare ctypes pointer keeps it too
    a, b = loom.nd.array(A_VALUES), loom.nd.empty((4,), "float32")  # aligned as the code assumes
    assert cfunc((ctypes.c_void_p * 2)(a.ctypes.data, b.ctypes.data)) == 0
    np.testing.assert_array_equal(b, A_VALUES + 2)
    del cfunc
    gc.collect()
    assert maps_of(path) == 0


def test_a_library_loaded_twice_stays_until_both_modules_are_dropped(tmp_path):
    add_constant(3).export_library(tmp_path / "add.so")
    first = loom.runtime.load_module(tmp_path / "add.so")
    second = loom.runtime.load_module(tmp_path / "add.so")
    path = first.library.path
    del first
    gc.collect()
    assert maps_of(path) > 0  # the loader counts both opens
    check_adds(second, 3)
    del second
    gc.collect()
    assert maps_of(path) == 0


def test_code_calling_only_libraries_loom_has_loaded_is_linked_alone(monkeypatch):
    # what keeps a small build cheap (the ten thousand builds below rely on it): the linker
    # reads the C library and libm only for code that calls them
    monkeypatch.setenv("LOOM_CACHE", "0")  # count the linker's runs: a cached link has none
    linkers = []
    run = linker.run

    def record(command, what):
        linkers.append(pathlib.Path(command[0]).name)
        run(command, what)

    monkeypatch.setattr(linker, "run", record)
    check_adds(add_constant(5), 5)  # calls nothing
    # float64: loom computes float32 exp itself (loom/codegen/llvm/vecmath.py)
    A = te.placeholder((4,), "float64", "A")
    B = te.compute((4,), lambda i: te.exp(A[i]), "B")
    mod = loom.build(te.create_schedule(B.op), [A, B], name="exp64")
    assert mod.extern_symbols == {"exp": "libm"}
    b = np.empty(4, "float64")
    mod(A_VALUES.astype("float64"), b)
    np.testing.assert_allclose(b, np.exp(A_VALUES.astype("float64")), rtol=1e-12)
    assert linkers == [pathlib.Path(linker.host_linker()).name, "cc"]


@pytest.mark.slow
def test_ten_thousand_kernels_build_and_run_in_one_process():
    # Each kernel is its own build (lowered, compiled by LLVM, linked, loaded), called, checked
    # and dropped; before libraries were unloaded, dlopen failed after about 8,000 of them, and
    # the maps counted every thousand show a leak long before that (20,000 builds took 6 minutes
    # of a 15-minute suite on a Zen 3 machine: 10,000 keep both checks).
    # -opt-level=0: the test is about loading; LLVM's optimizations would add half to its time.
    target = Target("llvm -opt-level=0")
    check_adds(add_constant(0, target), 0)  # everything loom loads once is loaded now
    gc.collect()
    start = all_maps()
    for k in range(10_000):
        check_adds(add_constant(k, target), k)
        if k % 1000 == 999:  # a leak of one map per kernel shows after the first thousand
            assert all_maps() < start + 50, f"{all_maps() - start} more maps after {k + 1} builds"
