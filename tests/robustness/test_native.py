"""Inputs that used to crash the process (a segfault, an LLVM abort, the dynamic loader running a
damaged file), each run in a fresh interpreter: it must survive, raise a clear error, and still
build and run a kernel afterwards."""

import os

import pytest

from tests.hexagon.conftest import requires_hexagon
from tests.robustness.harness import isolated

OUT_OF_BOUNDS = """
A = te.placeholder((16,), name="A")
C = te.compute((16,), lambda i: A[{index}], name="C")
loom.build(te.create_schedule(C.op), [A, C])
"""


@pytest.mark.parametrize(
    "index, values",
    [("i + 1000000", r"\[1000000, 1000015\]"), ("i + 1", r"\[1, 16\]"), ("i - 1", r"\[-1, 14\]")],
)
def test_reads_outside_a_tensor_are_build_errors(index, values):
    isolated(OUT_OF_BOUNDS.format(index=index)).refused(
        "LoweringError", rf"stage C reads A\[.*\] out of bounds: .* takes the values {values}"
    )


def test_a_data_dependent_index_is_checked_when_the_kernel_runs():
    isolated(
        """
        A = te.placeholder((16,), name="A")
        B = te.placeholder((4,), name="B", dtype="int32")
        C = te.compute((4,), lambda i: A[B[i]], name="C")
        mod = loom.build(te.create_schedule(C.op), [A, B, C])
        index = np.array([0, 1, 2, 1 << 30], np.int32)
        mod(np.zeros(16, np.float32), index, np.zeros(4, np.float32))
        """
    ).refused("LoomError", r"stage C reads A\[B\[i\]\]: index B\[i\] of dimension 0 is outside")


@pytest.mark.parametrize(
    "target, match",
    [
        ("llvm -mcpu=haswel", r"unknown CPU -mcpu=haswel .*closest: haswell"),
        ("llvm -mattr=+avx9", r"avx9"),
        ("llvm -mtriple=x86_64-unknown-linux-gnu -mcpu=i386", r"i386"),
    ],
)
def test_targets_that_aborted_llvm(target, match):
    isolated(
        f"""
        A = te.placeholder((8,), name="A")
        B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
        loom.build(te.create_schedule(B.op), [A, B], target={target!r})
        """
    ).refused("LoomError", match)


def test_a_huge_unroll_is_refused():
    isolated(
        """
        A = te.placeholder((200000,), name="A")
        B = te.compute((200000,), lambda i: A[i] + 1.0, name="B")
        s = te.create_schedule(B.op)
        s[B].unroll(B.op.axis[0])
        loom.build(s, [A, B])
        """
    ).refused("LoomError", r"makes 200000 copies of its body, more than the limit")


@pytest.mark.parametrize(
    "variable, value",
    [("LOOM_NUM_THREADS", "abc"), ("LOOM_NUM_THREADS", "0"), ("LOOM_VTCM_SIZE", "-5")],
)
def test_bad_environment_variables(variable, value):
    env = {**os.environ, variable: value}
    outcome = isolated("loom.runtime.num_threads()", env=env)
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.error == "LoomError" and f"${variable} is {value!r}" in outcome.message
    assert outcome.clear


@pytest.mark.parametrize(
    "content, match",
    [
        (b"", r"not an ELF file|checksum"),
        (b"\x7fELF" + bytes(range(256)) * 4, r"checksum|ELF"),
        (b"not a library at all", r"not an ELF file|checksum"),
    ],
)
def test_damaged_files_are_refused_before_anything_runs(tmp_path, content, match):
    path = tmp_path / "damaged.so"
    path.write_bytes(content)
    isolated(f"loom.runtime.load_module({str(path)!r})").refused("ArtifactError", match)


def test_a_truncated_export_is_refused(tmp_path):
    path = tmp_path / "k.so"
    built = isolated(
        f"""
        A = te.placeholder((8,), name="A")
        B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
        loom.build(te.create_schedule(B.op), [A, B]).export_library({str(path)!r})
        """
    )
    assert built.error is None and built.still_works, built.stderr
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    isolated(f"loom.runtime.load_module({str(path)!r})").refused("ArtifactError", r".")


@requires_hexagon
def test_hvx_float_code_does_not_reach_the_emulator():
    isolated(
        """
        A = te.placeholder((64,), name="A", dtype="float32")
        B = te.compute((64,), lambda i: A[i] * 2.0 + 1.0, name="B")
        s = te.create_schedule(B.op)
        s[B].vectorize(B.op.axis[0])  # HVX float: no qemu-hexagon implements it
        mod = loom.build(s, [A, B], target=loom.target.hexagon("v73"))
        with loom.device("hexagon-sim") as dev:
            mod.to_device(dev)
        """
    ).refused("LoomError", r"compile-only here")
