"""Hexagon v66 to v73 under qemu-hexagon: integer HVX kernels built for v68, v69, v71 and v73
run in sessions that emulate that core (`-cpu`) and match numpy (QEMU 10, which `make setup`
installs); HVX floating point (v68+ IEEE and qfloat vector arithmetic) is compile-only: its
instructions are in the code, and loading it into a simulator is a clear LoomError, because no
qemu-hexagon implements them (QEMU 10 aborts on the first one)."""

import re
import shutil
import subprocess

import numpy as np
import pytest

import loom
from loom import DeviceError, LoomError
from loom.backend.hexagon import VERSIONS
from loom.backend.hexagon import strategies as hx
from loom.runtime import elf
from loom.runtime.device import build_device_library, compile_device_object, protocol
from loom.runtime.device.emulation import INSTALL_QEMU_10, Emulation
from loom.runtime.device.hexagon_code import (
    HEXAGON_VERSIONS,
    HVX_FLOAT_ENCODINGS,
    code_segments,
    hvx_float_instructions,
    hvx_float_word,
)

from .conftest import requires_hexagon, requires_qemu_10

NEWER = ["v68", "v69", "v71", "v73"]
HVX = re.compile(r"\bv\d+(:\d+)?(\.\w+)?\s*[+-]?=|vmem\(")  # an HVX register written, or vmem
FLOAT_OPERAND = re.compile(r"\bv\d+(:\d+)?\.(sf|hf|qf32|qf16|bf)\b")


def rand(shape, dtype, seed=0, low=-50, high=50):
    return np.random.default_rng(seed).integers(low, high, shape).astype(dtype)


def integer_kernels(target):
    """(name, schedule and args, inputs, expected) of integer HVX kernels for `target`."""
    a, b = rand((32, 128), "int8", seed=4, low=-128, high=128), rand((128, 128), "int8", seed=5)
    cases = [
        (
            "matmul_int8_k128",
            hx.matmul(32, 128, 128, "int8", "int32", target),
            [a, b],
            a.astype(np.int32) @ b.astype(np.int32),
        )
    ]
    for dt in ("int8", "int16"):
        a, b = rand((8, 32), dt), rand((32, 64), dt, seed=1)
        cases.append(
            (
                f"matmul_{dt}",
                hx.matmul(8, 64, 32, dt, "int32", target),
                [a, b],
                a.astype(np.int32) @ b.astype(np.int32),
            )
        )
        x, y = rand(512, dt, seed=2), rand(512, dt, seed=3)
        with np.errstate(over="ignore"):
            expected = (x * y + x).astype(dt)
        cases.append(
            (
                f"elementwise_{dt}",
                hx.elementwise(lambda p, q: p * q + p, (512,), 2, dt, target),
                [x, y],
                expected,
            )
        )
    return cases


def float_kernel(target, vectorize=True):
    return hx.elementwise(lambda x, y: x * y + x, (256,), 2, "float32", target, vectorize=vectorize)


def test_loom_and_the_runtime_know_the_same_versions():
    assert [f"v{v:x}" for v in HEXAGON_VERSIONS] == list(VERSIONS)


@requires_hexagon
@pytest.mark.parametrize(
    "version", ["v66", *(pytest.param(v, marks=requires_qemu_10) for v in NEWER)]
)
def test_integer_hvx_kernels_run_on_each_version(sessions, version):
    target = loom.target.hexagon(version)
    dev = sessions(version)
    assert dev.cpu == version
    argv = dev.transport.argv
    if dev.emulation.cpus:  # qemu emulates that core (QEMU 7.2 has one model and no -cpu)
        assert argv[argv.index("-cpu") + 1] == version
    for name, sch, inputs, expected in integer_kernels(target):
        mod = loom.build(*sch, target=target, name=name)
        assert elf.parse(mod.shared_object).flags & 0xFFF == int(version[1:], 16)
        assert HVX.search(mod.get_source("asm")), f"{name}: no HVX instruction"
        assert not hvx_float_instructions(mod.shared_object), name  # integer code only
        out = np.zeros(expected.shape, expected.dtype)
        mod.to_device(dev)[name](*inputs, out)
        np.testing.assert_array_equal(out, expected, err_msg=f"{name} on {version}")


@requires_hexagon
@requires_qemu_10
def test_older_code_runs_on_a_newer_core_and_not_the_other_way(sessions):
    v66, v73 = loom.target.hexagon("v66"), loom.target.hexagon("v73")
    name, sch, inputs, expected = integer_kernels(v66)[0]
    out = np.zeros(expected.shape, expected.dtype)
    loom.build(*sch, target=v66, name=name).to_device(sessions("v73"))[name](*inputs, out)
    np.testing.assert_array_equal(out, expected)
    newer = loom.build(*integer_kernels(v73)[0][1], target=v73, name=name)
    with pytest.raises(
        LoomError,
        match=r"module is for Hexagon v73, but the session emulates a v68 core: start it with "
        r'loom.device\("hexagon-sim", cpu="v73"\)',
    ):
        newer.to_device(sessions("v68"))


@requires_hexagon
@requires_qemu_10
def test_the_default_session_emulates_the_newest_version(dev):
    assert dev.cpu == "v73" and dev.emulation.major >= 10
    assert "v73 under qemu-hexagon" in repr(dev)


@requires_hexagon
def test_unknown_cpu_is_refused():
    with pytest.raises(LoomError, match=r"cpu must be a Hexagon version \(v66, .*v73\), got 'v70'"):
        loom.device("hexagon-sim", cpu="v70")


def objdump_floats(shared_object: bytes, version: str, tmp_path) -> list[str] | None:
    """The HVX float instructions llvm-objdump finds, or None when it cannot decode this
    version (Debian bookworm's llvm-objdump 14 knows v68 and v69)."""
    tool = shutil.which("llvm-objdump")
    if tool is None or version not in ("v68", "v69"):
        return None
    path = tmp_path / f"float_{version}.so"
    path.write_bytes(shared_object)
    out = subprocess.run(
        [
            tool,
            "-d",
            f"--mcpu=hexagon{version}",
            f"--mattr=+hvx{version},+hvx-length128b,+hvx-qfloat,+hvx-ieee-fp",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if FLOAT_OPERAND.search(line)]


@requires_hexagon
@pytest.mark.parametrize("version", ["v68", "v69", "v73"])
def test_hvx_float_is_compile_only(dev, version, tmp_path):
    target = loom.target.hexagon(version)
    mod = loom.build(*float_kernel(target), target=target, name="f")
    asm_floats = [line for line in mod.get_source("asm").splitlines() if FLOAT_OPERAND.search(line)]
    assert any("qf32 = vmpy(" in line for line in asm_floats)  # LLVM emitted HVX float
    found = hvx_float_instructions(mod.shared_object)
    assert len(found) == len(asm_floats)
    disassembled = objdump_floats(mod.shared_object, version, tmp_path)
    if disassembled is not None:  # the machine code, decoded by LLVM's disassembler
        assert len(disassembled) == len(found)
        words = {int(line.split("\t")[2][:8], 16) for line in disassembled}
        assert words == {word for _, word, _ in found}
    runs = int(version[1:], 16) in dev.emulation.hexagon_versions()  # QEMU 7.2: v66/v67 only
    reason = (
        r"this module has \d+ HVX floating-point instruction\(s\) .* which qemu-hexagon \S+ "
        r"does not implement: HVX float code is compile-only here"
        if runs
        else rf"this module is for Hexagon {version}, which is compile-only here"
    )
    with pytest.raises(LoomError, match=reason):
        mod.to_device(dev)
    # the check reads the machine code, so an exported module loaded again is refused too
    mod.export_library(tmp_path / "float.so")
    with pytest.raises(LoomError, match=reason):
        loom.runtime.load_module(tmp_path / "float.so").to_device(dev)
    # the same kernel as scalar code runs, and the session goes on
    scalar = loom.build(*float_kernel(target, vectorize=False), target=target, name="f")
    assert not hvx_float_instructions(scalar.shared_object)
    if runs:
        x = np.linspace(-2, 2, 256, dtype=np.float32)
        y = np.linspace(3, -1, 256, dtype=np.float32)
        out = np.zeros(256, np.float32)
        scalar.to_device(dev)["f"](x, y, out)
        np.testing.assert_allclose(out, x.astype(np.float64) * y + x, rtol=1e-6, atol=1e-7)


@requires_hexagon
@requires_qemu_10
def test_hvx_float_past_the_check_is_a_device_error_not_a_hang(tmp_path):
    """What the check spares: the raw LOAD_MODULE gets the module in, and its call kills qemu,
    which the session reports (with qemu's message) instead of hanging."""
    target = loom.target.hexagon("v73")
    mod = loom.build(*float_kernel(target), target=target, name="f")
    with loom.device("hexagon-sim", timeout=60) as dev:
        module_id = protocol.unpack_module_id(
            dev.request(protocol.Command.LOAD_MODULE, mod.shared_object)
        )
        f = dev.lookup(module_id, "f")
        buffers = [dev.alloc(1024) for _ in range(3)]
        with pytest.raises(
            DeviceError, match=r"(?s)the device runtime exited with status -?\d+ during CALL.*"
        ) as failure:
            dev.call(f, buffers)
        assert dev.closed
        assert "decode_insns: code should not be reached" in str(failure.value)


@requires_hexagon
def test_hvx_float_encodings_agree_with_the_disassembler(tmp_path):
    """Each group's instruction, as llvm-objdump 14 decodes it (for v69, which it knows: v73's
    .bf and conversions it does not), has float operands; no instruction of an integer
    kernel on any version is taken for HVX float."""
    tool = shutil.which("llvm-objdump")
    if tool is None:
        pytest.skip("needs llvm-objdump (Debian package llvm; `make setup` installs it)")
    words = [value | (3 << 14) for _, value, _ in HVX_FLOAT_ENCODINGS]  # parse bits: end
    source = tmp_path / "words.s"
    source.write_text(".text\n" + "".join(f".word 0x{w:08x}\n" for w in words))
    obj = tmp_path / "words.o"
    subprocess.run(
        ["clang", "--target=hexagon-unknown-linux-musl", "-c", str(source), "-o", str(obj)],
        check=True,
    )
    out = subprocess.run(
        [
            tool,
            "-d",
            "--mcpu=hexagonv69",
            "--mattr=+hvxv69,+hvx-length128b,+hvx-qfloat,+hvx-ieee-fp",
            str(obj),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    decoded = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and re.fullmatch(r"[0-9a-f]{8}", parts[2][:8]):
            decoded[int(parts[2][:8], 16)] = " ".join(parts[2:])[8:]
    known = [w for w in words if "unknown" not in decoded[w]]
    assert len(known) >= 60
    for w in known:
        assert FLOAT_OPERAND.search(decoded[w]), (hex(w), decoded[w])
        assert hvx_float_word(w) is not None
    assert hvx_float_word(words[0] & ~(3 << 14)) is None  # a duplex word is never HVX
    for version in VERSIONS:
        target = loom.target.hexagon(version)
        for name, sch, _, _ in integer_kernels(target):
            mod = loom.build(*sch, target=target, name=name)
            assert not hvx_float_instructions(mod.shared_object), (version, name)


QEMU_72 = Emulation("hexagon", "/usr/bin/qemu-hexagon", "7.2.22", ())


def test_under_qemu_7_newer_versions_are_compile_only_with_the_command_that_fixes_it():
    """What a machine without QEMU 10 says (QEMU 7.2 lists no -cpu models)."""
    assert QEMU_72.hexagon_versions() == (0x66, 0x67)
    assert QEMU_72.default_cpu() == "v67" and QEMU_72.cpu_arguments("v67") == []
    with pytest.raises(LoomError, match=re.escape(INSTALL_QEMU_10)):
        QEMU_72.check_cpu("v73")
    v68 = loom.target.hexagon("v68")
    mod = loom.build(*integer_kernels(v68)[0][1], target=v68, name="k")
    with pytest.raises(
        LoomError,
        match=r"this module is for Hexagon v68, which is compile-only here: qemu-hexagon 7.2.22 "
        r"runs v66-v67 code only; install QEMU 10 as root with "
        r"`scripts/ensure-debian-packages.sh`",
    ):
        QEMU_72.check_module(mod.shared_object, "v67")
    v66 = loom.target.hexagon("v66")
    QEMU_72.check_module(loom.build(*integer_kernels(v66)[0][1], target=v66).shared_object, "v67")


@requires_hexagon
def test_a_version_the_runtime_does_not_load_is_refused_by_the_session(dev, tmp_path):
    source = tmp_path / "one.c"
    source.write_text("int one(void) { return 1; }\n")
    obj = compile_device_object(source, tmp_path / "one.o", "hexagon", ["-mv65"])
    library = build_device_library([obj], tmp_path / "one.so", "hexagon").read_bytes()
    with pytest.raises(
        LoomError,
        match=r"this module is for Hexagon v65; the device runtime loads modules of v66, v67, "
        r"v68, v69, v71, v73",
    ):
        dev.load_module(library)


def test_a_truncated_module_is_refused_with_a_loom_error():
    """A file cut before its code segment: a LoomError naming the segment, not numpy's."""
    v73 = loom.target.hexagon("v73")
    so = loom.build(*integer_kernels(v73)[0][1], target=v73).shared_object
    (offset, _), *_ = code_segments(so)
    with pytest.raises(LoomError, match=r"program header \d+: its segment .* outside the file"):
        hvx_float_instructions(so[: offset - 16])
