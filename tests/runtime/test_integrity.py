"""Whole-file integrity of exported libraries: every byte of a `.so` or `.tar` is checked before
anything of it is used (docs/export.md, "What is verified").

Every flipped byte of a small export is refused with an ArtifactError by load_module and by
`loom inspect`, and never reaches the dynamic loader or the linker. The flipped files are loaded
in a separate process, so a flip that crashed the loader would fail the test instead of killing
pytest. Behind the checksum, the ELF reader, the artifact reader and the archive reader turn
every defect into an ArtifactError: damaged files whose checksum was rewritten to match are
read, never run, and must give nothing else.
"""

import json
import pathlib
import subprocess
import sys

import pytest

import loom
from loom import te
from loom.cli import inspect_library
from loom.runtime import artifact, elf
from loom.runtime.load import read_archive, read_library
from tests.runtime import blob_module

REPO = pathlib.Path(__file__).resolve().parents[2]
PAYLOAD = b"integrity-test-payload:" + bytes(range(64))

# Byte ranges of an exported file where a flip is allowed to change nothing. None: the seal's
# sha256 covers every byte before the 56-byte trailer (ELF headers, code, padding between
# sections, the artifact, the payloads), and every field of the trailer itself is checked.
HARMLESS_RANGES: list[range] = []


@pytest.fixture(scope="module")
def small_exports(tmp_path_factory) -> dict[str, pathlib.Path]:
    """A small library, as `.so` and `.tar`: host code (`inc`) and a payload module."""
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    mod = loom.build(te.create_schedule(B.op), [A, B], name="inc")
    mod.import_module(blob_module.BlobModule(PAYLOAD, "weights"))
    folder = tmp_path_factory.mktemp("small")
    paths = {suffix: folder / f"small{suffix}" for suffix in (".so", ".tar")}
    for path in paths.values():
        mod.export_library(path)
    return paths


# Runs in a new process: flips each (position, mask) of the file, loads the flipped file with
# load_module and inspects it, and reports every outcome that is not an ArtifactError. Every
# dlopen and every link is recorded; so is whether the flipped file is mapped.
# Then, as a control, the intact file loads, runs, and shows up in both records.
FLIP_SCRIPT = r"""
import ctypes, json, os, pathlib, sys
import _ctypes
import numpy as np
import loom
from loom.cli import inspect_library
from loom.runtime import artifact, load
from tests.runtime import blob_module

blob_module.register()
args = json.loads(sys.stdin.read())
original = pathlib.Path(args["source"]).read_bytes()
target = pathlib.Path(args["work"]) / ("flipped" + pathlib.Path(args["source"]).suffix)

opened, linked, kept = [], [], []


def spy_dlopen(real):
    def dlopen(name, *rest):
        opened.append(str(name))
        return real(name, *rest)

    return dlopen


# every dlopen of this process: ctypes.CDLL's and a direct _ctypes.dlopen
ctypes._dlopen = spy_dlopen(ctypes._dlopen)
_ctypes.dlopen = spy_dlopen(_ctypes.dlopen)
real_link = load.link_objects


def spy_link(objects, output, *rest):
    linked.append(str(output))
    return real_link(objects, output, *rest)


load.link_objects = spy_link


def mapped():
    return str(target) in open("/proc/self/maps").read()


refused, not_refused, mapped_after = 0, [], []
target.write_bytes(original)
progress = os.open(pathlib.Path(args["work"]) / "trying", os.O_RDWR | os.O_CREAT)
with open(target, "r+b") as f:  # one byte changed in place: no truncation, fast
    for pos in args["positions"]:
        os.pwrite(progress, b"%12d" % pos, 0)  # which position a crash happened at
        for mask in args["masks"]:
            os.pwrite(f.fileno(), bytes([original[pos] ^ mask]), pos)
            checks = ("load_module", "inspect") if pos % args["inspect_every"] == 0 else ()
            for what in checks or ("load_module",):
                try:
                    if what == "load_module":
                        kept.append(loom.runtime.load_module(target))  # kept: never unloaded
                    else:
                        inspect_library(str(target))
                except artifact.ArtifactError:
                    refused += 1
                except BaseException as e:
                    not_refused.append([pos, mask, what, f"{type(e).__name__}: {e}"])
                else:
                    not_refused.append([pos, mask, what, "accepted"])
            if args["check_maps_each"] and mapped():
                mapped_after.append(pos)
        os.pwrite(f.fileno(), original[pos : pos + 1], pos)
os.pwrite(progress, b"%12d" % -1, 0)
report = {
    "refused": refused,
    "not_refused": not_refused,
    "opened": list(opened),
    "linked": list(linked),
    "mapped": mapped(),
    "mapped_after": mapped_after,
}
if args["control"]:
    target.write_bytes(original)
    mod = loom.runtime.load_module(target)
    a = np.arange(16, dtype=np.float32)
    b = np.zeros(16, np.float32)
    mod["inc"](a, b)
    report["control_ran"] = bool(np.array_equal(b, a + 1))
    report["control_opened"] = [o for o in opened if o not in report["opened"]]
    report["control_linked"] = [o for o in linked if o not in report["linked"]]
    report["control_mapped"] = mapped() or any(
        o in open("/proc/self/maps").read() for o in report["control_opened"]
    )
print(json.dumps(report))
"""


def run_flips(
    source: pathlib.Path,
    work: pathlib.Path,
    positions,
    masks=(0xFF,),
    control=False,
    check_maps_each=False,
    inspect_every=1,
) -> dict:
    """Flip each position of `source` in one new process (see FLIP_SCRIPT); a crash of that
    process fails the test with the position it was trying."""
    args = {
        "source": str(source),
        "work": str(work),
        "positions": list(positions),
        "masks": list(masks),
        "control": control,
        "check_maps_each": check_maps_each,
        "inspect_every": inspect_every,
    }
    out = subprocess.run(
        [sys.executable, "-c", FLIP_SCRIPT],
        input=json.dumps(args),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    trying = work / "trying"
    last = int(trying.read_text()) if trying.exists() else None
    last = {None: "before any flip", -1: "after the flips"}.get(last, f"flipping byte {last}")
    assert out.returncode == 0, (
        f"the process loading flipped copies of {source.name} "
        + (f"crashed with signal {-out.returncode}" if out.returncode < 0 else "failed")
        + f" ({last}):\n{out.stderr[-3000:]}"
    )
    return json.loads(out.stdout.splitlines()[-1])


def sections_of(data: bytes) -> dict[str, range]:
    """The file range of every section of an ELF file that has bytes in the file."""
    return {
        s.name: range(s.offset, s.offset + s.size)
        for s in elf.parse(data).sections
        if s.type != 8 and s.size  # not SHT_NOBITS, not empty
    }


def allowed_harmless(pos: int) -> bool:
    return any(pos in r for r in HARMLESS_RANGES)


def test_every_flipped_byte_of_a_library_is_refused_before_it_is_opened(small_exports, tmp_path):
    source = small_exports[".so"]
    data = source.read_bytes()
    positions = range(len(data))  # every byte: ELF headers, every section, gaps, the trailer
    sections = sections_of(data)
    for name in (".text", ".dynamic", ".dynsym", ".rela.dyn", artifact.SECTION):
        assert name in sections, sorted(sections)  # the sections the flips must reach
    report = run_flips(source, tmp_path, positions, control=True, inspect_every=4)
    not_refused = [r for r in report["not_refused"] if not allowed_harmless(r[0])]
    assert not not_refused, not_refused[:20]
    # refused by load_module, and by `loom inspect` for every 4th position
    assert report["refused"] == len(positions) + len(positions[::4])
    assert report["opened"] == [] and report["linked"] == [] and not report["mapped"]
    # the control: the intact file is opened (so the records above would have seen a flip)
    assert report["control_ran"] and report["control_mapped"]
    assert any(o.endswith("flipped.so") for o in report["control_opened"])


def test_a_flip_in_each_section_never_reaches_the_dynamic_loader(small_exports, tmp_path):
    """The sections whose flips used to crash the process or be accepted: one flip in each,
    the process checked for the file in its mappings after each (no spy on ctypes)."""
    source = small_exports[".so"]
    data = source.read_bytes()
    sections = sections_of(data)
    wanted = [".text", ".plt", ".dynamic", ".rela.dyn", ".rela.plt", ".dynsym", ".dynstr"]
    positions = [sections[n].start + len(sections[n]) // 2 for n in wanted if n in sections]
    positions += [
        sections[artifact.SECTION].start + 20,  # the artifact's total length
        len(data) - artifact.SEAL_SIZE - 1,  # the last byte before the trailer
        len(data) - 40,  # the trailer's covered length
        len(data) - 1,  # the trailer's sha256
    ]
    report = run_flips(source, tmp_path, positions, check_maps_each=True)
    assert report["not_refused"] == [] and report["mapped_after"] == []
    assert report["refused"] == len(positions) * 2


def test_every_flipped_byte_of_a_tar_export_is_refused_before_it_is_linked(small_exports, tmp_path):
    source = small_exports[".tar"]
    data = source.read_bytes()
    end = tar_end(data)
    # every byte of every member's header and contents and of the trailer, every 8th of the
    # zeros that pad the archive to a whole tar record
    positions = [*range(end), *range(end, len(data) - artifact.SEAL_SIZE, 8)]
    positions += range(len(data) - artifact.SEAL_SIZE, len(data))
    report = run_flips(source, tmp_path, positions, control=True, inspect_every=4)
    assert [r for r in report["not_refused"] if not allowed_harmless(r[0])] == []
    assert report["refused"] == len(positions) + len([p for p in positions if p % 4 == 0])
    assert report["opened"] == [] and report["linked"] == []
    # the control: the intact archive is linked (or found linked in loom's cache) and opened
    assert report["control_ran"] and report["control_mapped"]
    assert any(pathlib.Path(o).name.startswith("flipped-") for o in report["control_opened"])


def tar_member_size(data: bytes, header: int) -> int:
    return int(data[header + 124 : header + 136].rstrip(b"\0 ") or b"0", 8)


def tar_headers(data: bytes) -> list[range]:
    """The 512-byte header block of each member of a plain tar."""
    headers, at = [], 0
    while at < len(data) and any(data[at : at + 512]):
        headers.append(range(at, at + 512))
        at += 512 + (tar_member_size(data, at) + 511) // 512 * 512
    return headers


def tar_end(data: bytes) -> int:
    """Where the last member's contents end (the end-of-archive zeros follow)."""
    last = tar_headers(data)[-1]
    return last.stop + tar_member_size(data, last.start)


def dense_positions(data: bytes, structure: list[range], stride: int) -> list[int]:
    """The positions of the `structure` ranges (headers, tables; a range's step thins it)
    and every `stride`-th byte."""
    picked = set(range(0, len(data), stride))
    for r in structure:
        picked.update(p for p in r if p < len(data))
    return sorted(picked)


def resealed_outcomes(path: pathlib.Path, body: bytes, positions, read) -> dict[str, int]:
    """Flip each position of `body`, seal it again (as if the damage came before the
    checksum was computed), and read it with `read` (and `loom inspect`, for every 4th): count
    the outcomes; anything but success or an ArtifactError fails."""
    counts = {"read": 0, "refused": 0}
    path.write_bytes(artifact.seal(body))
    for k, pos in enumerate(positions):
        data = bytearray(body)
        data[pos] ^= 0xFF
        with open(path, "r+b") as f:  # the same length: rewritten in place, no truncation
            f.write(artifact.seal(bytes(data)))
        for fn in (read, inspect_library) if k % 4 == 0 else (read,):
            try:
                fn(str(path))
                counts["read"] += 1
            except artifact.ArtifactError:
                counts["refused"] += 1
            except Exception as e:
                pytest.fail(f"flipping byte {pos} gave {type(e).__name__}: {e}")
    return counts


def test_damage_behind_the_checksum_of_a_library_is_an_artifact_error(small_exports, tmp_path):
    body = artifact.unseal(small_exports[".so"].read_bytes())
    parsed = elf.parse(body)
    sections = sections_of(body)
    program_headers = range(64, 64 + 56 * int.from_bytes(body[56:58], "little"), 2)
    section_headers = range(int.from_bytes(body[40:48], "little"), len(body), 2)
    tables = [
        range(sections[name].start, sections[name].stop, 4)
        for name in (".dynsym", ".dynstr", ".dynamic", ".symtab", ".strtab", ".shstrtab")
        if name in sections
    ]
    starts = [range(r.start, r.start + 8) for r in sections.values()]
    art = parsed.section(artifact.SECTION)
    artifact_header = range(art.offset, art.offset + 72)  # header, metadata length and sha256
    structure = [range(64), program_headers, section_headers, *tables, *starts, artifact_header]
    positions = dense_positions(body, structure, stride=37)
    assert len(positions) >= 500
    covered = {name for name, r in sections.items() if any(p in r for p in positions)}
    assert covered == set(sections)  # every section gets flips
    counts = resealed_outcomes(
        tmp_path / "resealed.so", body, positions, lambda p: read_library(p, False)
    )
    assert counts["refused"] > 0 and counts["read"] > 0  # both outcomes happen: a real test


def test_damage_behind_the_checksum_of_a_tar_is_an_artifact_error(small_exports, tmp_path):
    body = artifact.unseal(small_exports[".tar"].read_bytes())
    headers = tar_headers(body)
    # the fields of every member's header (name, mode, ids, size, time, checksum, type, link
    # name, magic) byte by byte, the rest of it thinned; the manifest (the last member)
    fields = [range(h.start, h.start + 265) for h in headers]
    fields += [range(h.start + 265, h.stop, 8) for h in headers]
    manifest = range(headers[-1].stop, tar_end(body))
    positions = dense_positions(body, [*fields, manifest], stride=61)
    assert len(positions) >= 500 and len(headers) >= 5
    counts = resealed_outcomes(
        tmp_path / "resealed.tar", body, positions, lambda p: read_archive(p, False)
    )
    assert counts["refused"] > 0 and counts["read"] > 0


def test_loom_inspect_refuses_a_flipped_text_byte(small_exports, tmp_path):
    data = bytearray(small_exports[".so"].read_bytes())
    text = sections_of(bytes(data))[".text"]
    data[text.start + 1] ^= 0x01
    path = tmp_path / "flipped_text.so"
    path.write_bytes(bytes(data))
    out = subprocess.run(
        [str(pathlib.Path(sys.executable).parent / "loom"), "inspect", str(path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and out.stdout == ""
    assert "fails its whole-file checksum" in out.stderr and "the file is corrupt" in out.stderr
