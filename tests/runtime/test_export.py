"""export_library / load_module: round trips through a new process, .tar exports, corrupt and
foreign files refused before anything runs, loom inspect, cross-compiled exports."""

import json
import pathlib
import subprocess
import sys

import pytest

import loom
from loom import LoomError, te
from loom.runtime import artifact, elf
from loom.runtime.load import read_library
from tests.programs import seed_program
from tests.runtime import blob_module

REPO = pathlib.Path(__file__).resolve().parents[2]
PAYLOAD = b"LOOM-TEST-PAYLOAD:" + bytes(range(256)) * 4


def build_scale(target="llvm"):
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 3.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(i)
    s[B].parallel(o)
    return loom.build(s, [A, B], target=target, name="scale")


def run_in_new_process(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


CALL_SCALE = """
import numpy as np, loom
mod = loom.runtime.load_module({path!r})
a = np.arange(64, dtype=np.float32)
b = np.zeros(64, np.float32)
mod["scale"](a, b)
assert np.array_equal(b, a * np.float32(3) + np.float32(1)), b
print("ok", mod.type_key, [m.type_key for m in mod.imports])
"""


@pytest.mark.parametrize("target", ["llvm", "c"])
@pytest.mark.parametrize("suffix", [".so", ".tar"])
def test_export_then_load_in_a_new_process(tmp_path, suffix, target):
    path = tmp_path / f"scale{suffix}"
    build_scale(target).export_library(path)
    assert run_in_new_process(CALL_SCALE.format(path=str(path))).split() == ["ok", target, "[]"]


def test_a_user_library_linked_by_name_loads_without_its_registration(tmp_path):
    from loom import abi

    source = tmp_path / "myadd.c"
    source.write_text("#include <stdint.h>\nint32_t my_add(int32_t x) { return x + 100; }\n")
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libmyadd.so"), str(source)], check=True
    )
    flags = [f"-L{tmp_path}", "-lmyadd", f"-Wl,-rpath,{tmp_path}"]
    abi.register_library(
        abi.RuntimeLibrary(
            "myadd_test",
            ("cpu",),
            symbols=(abi.parse_declaration("int32 my_add(int32 x)"),),
            link_flags=lambda: flags,
        )
    )
    try:
        A = te.placeholder((4,), "int32", name="A")
        B = te.compute((4,), lambda i: loom.ir.op.call_extern("int32", "my_add", A[i]), name="B")
        path = tmp_path / "uses_myadd.so"
        loom.build(te.create_schedule(B.op), [A, B], name="f").export_library(path)
    finally:
        abi.unregister_library("myadd_test")
    code = f"""
import numpy as np, loom
mod = loom.runtime.load_module({str(path)!r})
a = np.arange(4, dtype=np.int32)
b = np.zeros(4, np.int32)
mod["f"](a, b)
print(b.tolist())
"""
    assert run_in_new_process(code).split() == ["[100,", "101,", "102,", "103]"]


@pytest.mark.parametrize("suffix", [".so", ".tar"])
def test_module_with_a_non_dso_import(tmp_path, suffix):
    host = build_scale()
    host.import_module(blob_module.BlobModule(PAYLOAD, "weights"))
    path = tmp_path / f"with_blob{suffix}"
    host.export_library(path)
    code = (
        "from tests.runtime import blob_module; blob_module.register()\n"
        + CALL_SCALE.format(path=str(path))
        + "blob = mod.imports[0]\n"
        + f"assert blob.data == {PAYLOAD!r} and blob.label == 'weights'\n"
        + "print(blob.signatures['blob_kernel'].describe())\n"
    )
    out = run_in_new_process(code).splitlines()
    assert out == ["ok llvm ['test_blob']", "blob_kernel(x: float32[4])"]


def test_payload_without_a_registered_loader_is_refused_before_loading(tmp_path):
    host = build_scale()
    host.import_module(blob_module.BlobModule(PAYLOAD, "weights"))
    path = tmp_path / "unknown.so"
    host.export_library(path)
    code = f"""
import loom
try:
    loom.runtime.load_module({str(path)!r})
except loom.LoomError as e:
    print(e)
maps = open("/proc/self/maps").read()
print("mapped" if {str(path)!r} in maps else "not mapped")
"""
    message, mapped = run_in_new_process(code).strip().splitlines()
    assert "contains a module of type 'test_blob', which has no registered loader" in message
    assert mapped == "not mapped"  # nothing of a library that fails verification ran


def export_with_blob(tmp_path) -> pathlib.Path:
    blob_module.register()
    host = build_scale()
    host.import_module(blob_module.BlobModule(PAYLOAD, "weights"))
    path = tmp_path / "lib.so"
    host.export_library(path)
    return path


def test_flipped_payload_byte_is_a_checksum_error(tmp_path):
    path = export_with_blob(tmp_path)
    data = bytearray(path.read_bytes())
    at = data.index(PAYLOAD) + 100
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(
        artifact.ArtifactError,
        match=r"payload 0 \(type 'test_blob'\) \(1042 "
        r"bytes\) fails its checksum: the file is "
        r"corrupt",
    ):
        loom.runtime.load_module(path)


def test_truncated_file_is_refused(tmp_path):
    path = export_with_blob(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(artifact.ArtifactError, match=r"truncated"):
        loom.runtime.load_module(path)


def test_newer_format_version_is_refused(tmp_path):
    path = export_with_blob(tmp_path)
    data = bytearray(path.read_bytes())
    section = elf.parse(bytes(data)).section(artifact.SECTION)
    data[section.offset + 8 : section.offset + 12] = (artifact.FORMAT_VERSION + 1).to_bytes(
        4, "little"
    )
    path.write_bytes(bytes(data))
    with pytest.raises(
        artifact.ArtifactError,
        match=r"has loom artifact format version 2; this "
        r"loom reads version 1 at most",
    ):
        loom.runtime.load_module(path)


def test_a_library_that_is_not_from_loom(tmp_path):
    path = tmp_path / "plain.so"
    subprocess.run(
        ["cc", "-shared", "-o", str(path), "-x", "c", "-"],
        input="int f(void){return 1;}",
        text=True,
        check=True,
    )
    with pytest.raises(
        artifact.ArtifactError,
        match=r"is not a loom library: it has no "
        r"\.loom_artifact section",
    ):
        loom.runtime.load_module(path)
    text = tmp_path / "notes.so"
    text.write_text("hello")
    with pytest.raises(artifact.ArtifactError, match=r"not an ELF file"):
        loom.runtime.load_module(text)


def test_artifact_record_round_trip_and_checks():
    blob = artifact.pack({"modules": []}, [("a", b"xyz"), ("b", b"")])
    art = artifact.unpack(blob)
    assert art.payloads == (("a", b"xyz"), ("b", b"")) and art.version == 1
    with pytest.raises(artifact.ArtifactError, match=r"truncated"):
        artifact.unpack(blob[:-1])
    with pytest.raises(artifact.ArtifactError, match=r"bad magic"):
        artifact.unpack(b"NOTLOOM!" + blob[8:])


def seed_library(tmp_path) -> pathlib.Path:
    path = tmp_path / "alloc_vtcm.so"
    loom.build(*seed_program(), name="alloc_vtcm").export_library(path)
    return path


def loom_command() -> str:
    return str(pathlib.Path(sys.executable).parent / "loom")


def test_loom_inspect_shows_tree_signatures_memories_and_symbol_providers(tmp_path):
    path = seed_library(tmp_path)
    out = subprocess.run(
        [loom_command(), "inspect", str(path)], capture_output=True, text=True, check=True
    ).stdout
    assert "x86-64 shared object" in out and "loom artifact format 1" in out
    assert "module tree:\n  llvm (linked code" in out
    assert "[llvm] alloc_vtcm(A: int8[2048], B: int8[2048], C: int8[2048])" in out
    assert "memories used: local.vtcm" in out
    for symbol in ("HexagonBackendAllocateVTCM", "HexagonBackendFreeVTCM"):
        assert any(
            line.split() == [symbol, "<-", "loom_host_runtime"] for line in out.splitlines()
        ), out


def test_loom_inspect_json_parses(tmp_path):
    host = build_scale()
    host.import_module(blob_module.BlobModule(PAYLOAD, "weights"))
    path = tmp_path / "tree.so"
    host.export_library(path)
    out = subprocess.run(
        [loom_command(), "inspect", "--json", str(path)], capture_output=True, text=True, check=True
    ).stdout
    info = json.loads(out)
    assert [m["type_key"] for m in info["modules"]] == ["llvm", "test_blob"]
    assert info["modules"][0]["imports"] == [1] and info["payloads"][0]["bytes"] == len(PAYLOAD)
    assert info["modules"][0]["functions"][0]["name"] == "scale"
    assert {"symbol": "loom_parallel_launch", "provider": "loom_host_runtime"} in info[
        "undefined_symbols"
    ]


def test_loom_help_and_errors(tmp_path):
    help_text = subprocess.run(
        [loom_command(), "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "inspect" in help_text
    missing = subprocess.run(
        [loom_command(), "inspect", str(tmp_path / "none.so")], capture_output=True, text=True
    )
    assert missing.returncode == 1 and "cannot read" in missing.stderr


def test_aarch64_export_is_an_aarch64_elf(tmp_path):
    from loom.backend.cpu import strategies as cpu

    sch, args = cpu.elementwise_kernel(lambda x, y: x + y, (256,), 2)
    mod = loom.build(sch, args, target="llvm -mtriple=aarch64-linux-gnu -mattr=+neon", name="add")
    path = tmp_path / "add_aarch64.so"
    mod.export_library(path)
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and header[4] == 2  # 64-bit
    assert int.from_bytes(header[18:20], "little") == 183  # EM_AARCH64
    assert (
        "ARM aarch64" in subprocess.run(["file", str(path)], capture_output=True, text=True).stdout
    )
    parsed, art, _ = read_library(path)
    assert parsed.machine_name == "AArch64"
    assert art.metadata["modules"][0]["target"].startswith("llvm -mtriple=aarch64")
    loaded = loom.runtime.load_module(path)  # readable here, but not runnable on x86-64
    with pytest.raises(LoomError, match=r"cannot run in this process"):
        loaded["add"]
