"""export_library / load_module: round trips through a new process, .tar exports, corrupt and
foreign files refused before anything runs, loom inspect, cross-compiled exports."""

import io
import json
import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest

import loom
from loom import LoomError, abi, te
from loom.cli import format_report, inspect_library
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
    with pytest.raises(artifact.ArtifactError, match=r"fails its whole-file checksum"):
        loom.runtime.load_module(path)
    # behind the whole-file checksum, the payload's own checksum still holds
    path.write_bytes(artifact.seal(bytes(data[: -artifact.SEAL_SIZE])))
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
    path.write_bytes(artifact.seal(bytes(data[: -artifact.SEAL_SIZE])))
    with pytest.raises(
        artifact.ArtifactError,
        match=rf"has loom artifact format version {artifact.FORMAT_VERSION + 1}; this "
        rf"loom reads version {artifact.FORMAT_VERSION} at most",
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
    assert art.payloads == (("a", b"xyz"), ("b", b"")) and art.version == artifact.FORMAT_VERSION
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
    assert (
        "x86-64 shared object" in out and f"loom artifact format {artifact.FORMAT_VERSION}" in out
    )
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


def test_a_file_without_the_whole_file_checksum_is_refused(tmp_path):
    """What a loom that did not checksum whole files wrote: the trailer is missing."""
    path = seed_library(tmp_path)
    path.write_bytes(path.read_bytes()[: -artifact.SEAL_SIZE])
    with pytest.raises(
        artifact.ArtifactError, match=r"does not end with loom's whole-file checksum.*export it"
    ):
        loom.runtime.load_module(path)
    with pytest.raises(artifact.ArtifactError, match=r"whole-file checksum"):
        read_library(path, require_loaders=False)


def test_export_refuses_link_options_for_a_tar(tmp_path):
    with pytest.raises(LoomError, match=r"options= are for a \.so; a \.tar is linked when loaded"):
        build_scale().export_library(tmp_path / "x.tar", options=["-Wl,-z,now"])
    assert not (tmp_path / "x.tar").exists()


# -- .tar exports: verified before any member is used ---------------------------------------------
def tar_members(path: pathlib.Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    body = artifact.unseal(path.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        return [(info, tar.extractfile(info).read()) for info in tar]


def write_tar(path: pathlib.Path, members, after: bytes = b"") -> None:
    """A tar of (TarInfo, bytes or None) members, sealed as export_library seals: what
    someone who can rewrite the checksum could make, so the checks behind it are tested."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            if data is None:
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    path.write_bytes(artifact.seal(out.getvalue() + after))


def _manifest_edit(edit):
    def change(members):
        out = []
        for info, data in members:
            if info.name == "loom_link.json":
                data = edit(json.loads(data))
                data = data if isinstance(data, bytes) else json.dumps(data).encode()
            out.append((info, data))
        return out

    return change


def _rename(old, new):
    return lambda members: [(tarfile.TarInfo(new) if i.name == old else i, d) for i, d in members]


def _special(name, kind, linkname=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return lambda members: [(i, d) for i, d in members if i.name != name] + [(info, None)]


def _replace(name, data):
    return lambda members: [(i, data if i.name == name else d) for i, d in members]


def _other_producer(blob: bytes) -> bytes:
    art = artifact.unpack(blob)
    return artifact.pack(art.metadata | {"producer": "someone else"}, list(art.payloads))


TAMPERINGS = {
    "manifest not JSON": (_manifest_edit(lambda m: b"{objects: "), r"is not valid JSON"),
    "manifest not UTF-8": (_manifest_edit(lambda m: b'{"\xff": 1}'), r"is not valid JSON"),
    "manifest a list": (_manifest_edit(lambda m: [m]), r"malformed: expected an object"),
    "manifest without a key": (
        _manifest_edit(lambda m: {k: v for k, v in m.items() if k != "triple"}),
        r"malformed: expected an object with the keys",
    ),
    "link flags in the manifest": (
        _manifest_edit(lambda m: m | {"link_flags": ["-o", "/tmp/loom-test-elsewhere.so"]}),
        r"malformed: expected an object with the keys .*'link_flags'",
    ),
    "absolute object in the manifest": (
        _manifest_edit(lambda m: m | {"objects": ["/usr/lib/x86_64-linux-gnu/crt1.o"]}),
        r"'objects' must be \.o members ending with loom_artifact\.o",
    ),
    "object listed but absent": (
        _manifest_edit(lambda m: m | {"objects": ["other.o", *m["objects"]]}),
        r"members do not match loom_link\.json: missing \['other\.o'\]",
    ),
    "a member listed twice": (
        _manifest_edit(lambda m: m | {"sources": m["sources"] + m["sources"][:1]}),
        r"a member is listed twice",
    ),
    "format 2": (
        _manifest_edit(lambda m: m | {"format": 2}),
        r"format 2: this loom reads format 1",
    ),
    "format true": (_manifest_edit(lambda m: m | {"format": True}), r"format True"),
    "not a triple": (
        _manifest_edit(lambda m: m | {"triple": "x86_64 -o /tmp/x"}),
        r"triple 'x86_64 -o /tmp/x' is not a target triple",
    ),
    "another machine's triple": (
        _manifest_edit(lambda m: m | {"triple": "aarch64-linux-gnu"}),
        r"member module0_llvm\.o is not a relocatable aarch64-linux-gnu object",
    ),
    "absolute member name": (
        _rename("module0_llvm.o", "/tmp/module0_llvm.o"),
        r"member name '/tmp/module0_llvm\.o' is not a plain file name",
    ),
    "dot-dot member name": (
        _rename("module0_llvm.ll", "../module0_llvm.ll"),
        r"member name '\.\./module0_llvm\.ll' is not a plain file name",
    ),
    "member in a directory": (
        _rename("module0_llvm.ll", "src/module0_llvm.ll"),
        r"member name 'src/module0_llvm\.ll' is not a plain file name",
    ),
    "symlink member": (
        _special("module0_llvm.ll", tarfile.SYMTYPE, "/etc/passwd"),
        r"member 'module0_llvm\.ll' is not a regular file",
    ),
    "hard link member": (
        _special("module0_llvm.ll", tarfile.LNKTYPE, "loom_link.json"),
        r"member 'module0_llvm\.ll' is not a regular file",
    ),
    "directory member": (
        _special("module0_llvm.ll", tarfile.DIRTYPE),
        r"member 'module0_llvm\.ll' is not a regular file",
    ),
    "extra member": (
        lambda members: [*members, (tarfile.TarInfo("notes.txt"), b"hello")],
        r"not listed \['notes\.txt'\]",
    ),
    "missing member": (
        lambda members: [(i, d) for i, d in members if i.name != "module0_llvm.ll"],
        r"missing \['module0_llvm\.ll'\]",
    ),
    "duplicate member": (
        lambda members: [*members, members[-1]],
        r"member 'loom_link\.json' appears twice",
    ),
    "object that is not ELF": (
        _replace("module0_llvm.o", b"not an object"),
        r"member module0_llvm\.o: not an ELF file",
    ),
    "artifact that differs from its object": (
        lambda members: [
            (i, _other_producer(d) if i.name == "loom_artifact.bin" else d) for i, d in members
        ],
        r"loom_artifact\.o does not hold the artifact",
    ),
    "damaged artifact": (
        _replace("loom_artifact.bin", b"LOOMARTF" + b"\xff" * 40),
        r"loom_artifact\.bin.*(truncated|version)",
    ),
}


@pytest.mark.parametrize("case", list(TAMPERINGS))
def test_tar_members_and_manifest_are_checked_before_any_is_used(tmp_path, monkeypatch, case):
    from loom.runtime import load

    path = tmp_path / "scale.tar"
    build_scale().export_library(path)
    tamper, message = TAMPERINGS[case]
    write_tar(path, tamper(tar_members(path)))

    def no_link(*args):
        raise AssertionError(f"linked a refused archive: {args}")

    monkeypatch.setattr(load, "link_objects", no_link)
    with pytest.raises(artifact.ArtifactError, match=message):
        loom.runtime.load_module(path)
    with pytest.raises(artifact.ArtifactError, match=message):  # loom inspect checks the same
        inspect_library(str(path))


def test_tar_with_data_after_its_end_or_not_a_tar(tmp_path):
    path = tmp_path / "scale.tar"
    build_scale().export_library(path)
    write_tar(path, tar_members(path), after=b"\x01" * 512)
    with pytest.raises(artifact.ArtifactError, match=r"data follows the end of the tar"):
        loom.runtime.load_module(path)
    path.write_bytes(artifact.seal(b"plain text, not a tar"))
    with pytest.raises(artifact.ArtifactError, match=r"is not a readable tar archive"):
        loom.runtime.load_module(path)


def test_an_untampered_rewritten_tar_still_loads(tmp_path):
    """The tampering tests' tar writer is faithful: its untouched copy loads and runs."""
    path = tmp_path / "scale.tar"
    build_scale().export_library(path)
    write_tar(path, tar_members(path))
    assert run_in_new_process(CALL_SCALE.format(path=str(path))).split() == ["ok", "llvm", "[]"]


def test_tar_is_linked_with_the_registered_libraries_flags_not_the_files(tmp_path):
    source = tmp_path / "myadd.c"
    source.write_text("#include <stdint.h>\nint32_t my_add(int32_t x) { return x + 100; }\n")
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libmyadd.so"), str(source)], check=True
    )
    register = f"""
from loom import abi
flags = ["-L{tmp_path}", "-lmyadd", "-Wl,-rpath,{tmp_path}"]
abi.register_library(abi.RuntimeLibrary("myadd_test", ("cpu",),
    symbols=(abi.parse_declaration("int32 my_add(int32 x)"),), link_flags=lambda: flags))
"""
    exec(register, {})
    try:
        A = te.placeholder((4,), "int32", name="A")
        B = te.compute((4,), lambda i: loom.ir.op.call_extern("int32", "my_add", A[i]), name="B")
        path = tmp_path / "uses_myadd.tar"
        loom.build(te.create_schedule(B.op), [A, B], name="f").export_library(path)
    finally:
        abi.unregister_library("myadd_test")
    manifest = json.loads(dict((i.name, d) for i, d in tar_members(path))["loom_link.json"])
    assert sorted(manifest) == ["format", "objects", "sources", "triple"]  # no link flags
    call = f"""
import numpy as np, loom
try:
    mod = loom.runtime.load_module({str(path)!r})
except loom.LoomError as e:
    print("refused:", e)
    raise SystemExit
a = np.arange(4, dtype=np.int32)
b = np.zeros(4, np.int32)
mod["f"](a, b)
print(b.tolist())
"""
    unregistered = run_in_new_process(call)
    assert "refused: cannot link" in unregistered and "myadd_test" in unregistered
    assert "import the backend or module that declares them first" in unregistered
    assert run_in_new_process(register + call).split() == ["[100,", "101,", "102,", "103]"]


# -- loom inspect on Hexagon exports and .tar -------------------------------------------------
def module_section(report: str, header: str) -> list[str]:
    """The lines of `loom inspect`'s per-module symbol list under `header`, whitespace
    normalized."""
    lines = report.splitlines()
    start = lines.index(f"  {header}")
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("    "):
            break
        out.append(" ".join(line.split()))
    return out


@pytest.mark.skipif(
    not (shutil.which("clang") and shutil.which("ld.lld")),
    reason="needs clang and ld.lld: run `make setup` (Debian packages clang, lld)",
)
@pytest.mark.parametrize("suffix", [".so", ".tar"])
def test_loom_inspect_shows_the_hexagon_payloads_vtcm_symbols(tmp_path, suffix):
    path = tmp_path / f"seed_hexagon{suffix}"
    program = seed_program()
    loom.build(*program, target=loom.target.hexagon("v66"), name="alloc_vtcm").export_library(path)
    out = subprocess.run(
        [loom_command(), "inspect", str(path)], capture_output=True, text=True, check=True
    ).stdout
    assert "hexagon (payload of" in out and "integrity: sha256 of its first" in out
    hexagon = module_section(out, "[hexagon] payload #0:")
    for symbol in ("HexagonBackendAllocateVTCM", "HexagonBackendFreeVTCM"):
        assert f"{symbol} <- loom_device_runtime" in hexagon, out
    assert module_section(out, "[llvm] linked code:") == ["none"]
    info = inspect_library(str(path))
    assert info["kind"] == ("tar" if suffix == ".tar" else "shared object")
    assert {"symbol": "HexagonBackendAllocateVTCM", "provider": "loom_device_runtime"} in info[
        "modules"
    ][1]["undefined_symbols"]


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_loom_inspect_reads_a_tar_export_as_its_so(tmp_path, target):
    mod = loom.build(*seed_program(), name="alloc_vtcm", target=target)
    mod.export_library(tmp_path / "seed.so")
    mod.export_library(tmp_path / "seed.tar")
    so, tar = (inspect_library(str(tmp_path / f"seed.{s}")) for s in ("so", "tar"))
    assert tar["kind"] == "tar" and tar["machine"] == so["machine"] == "x86-64"
    assert tar["modules"] == so["modules"]
    symbols = {u["symbol"]: u["provider"] for u in so["modules"][0]["undefined_symbols"]}
    assert {"HexagonBackendAllocateVTCM", "HexagonBackendFreeVTCM"} <= set(symbols)
    assert None not in symbols.values(), symbols
    report = format_report(tar)
    assert "loom .tar export of x86-64 objects (linked when loaded)" in report
    assert "HexagonBackendAllocateVTCM <- loom_host_runtime" in module_section(
        report, f"[{target}] linked code:"
    )
