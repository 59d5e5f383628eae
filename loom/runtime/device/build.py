"""Building for devices: the freestanding device runtime, and device libraries (modules).

The runtime (loom/runtime/native/device) is compiled with clang for one ISA and linked
statically by ld.lld, once, into loom's cache under a name that hashes its sources and flags.
It runs under the ISA's qemu user emulator (`emulator(isa)`) or on the device itself.

A device library is a position-independent shared object linked without libraries; the
runtime's loader maps it and resolves its imports against the runtime's exports
(docs/device-protocol.md).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import os
import pathlib
import tempfile
from collections.abc import Sequence

from loom import abi
from loom.errors import LoomError
from loom.runtime.native_lib import NATIVE_DIR, cache_dir, find_tool, run

DEVICE_DIR = NATIVE_DIR / "device"
COMMON_DIR = NATIVE_DIR / "common"


@dataclasses.dataclass(frozen=True)
class Isa:
    """An ISA the device runtime is built for: clang's target triple, the flags that pick the
    ISA version (for the runtime and modules alike), ELF e_machine and qemu's emulator."""

    name: str
    triple: str
    isa_flags: tuple[str, ...]
    machine: int
    emulator: str


ISAS: dict[str, Isa] = {
    # v66: the oldest version the runtime serves, whose code every newer core (and each of
    # QEMU's -cpu models) runs, so one runtime build serves modules of v66 to v73. -G0: no
    # small-data (GP-relative) section, which neither a static freestanding program nor a shared
    # object sets up.
    "hexagon": Isa(
        "hexagon",
        "hexagon-unknown-linux-musl",
        ("-mv66", "-G0"),
        164,
        "qemu-hexagon",
    ),
    "aarch64": Isa("aarch64", "aarch64-linux-gnu", (), 183, "qemu-aarch64"),
}

RUNTIME_FLAGS = (
    "-ffreestanding",
    "-fno-builtin",  # memcpy's own loops must not become calls to memcpy
    "-nostdlib",
    "-fno-pic",
    "-O2",
    "-Wall",
    "-Wextra",
)
"""Flags for every runtime source, after the ISA's."""


def isa_info(isa: str) -> Isa:
    try:
        return ISAS[isa]
    except KeyError:
        raise LoomError(
            f"no device runtime for ISA {isa!r}; known ISAs: {', '.join(sorted(ISAS))}"
        ) from None


def runtime_sources(isa: str) -> list[pathlib.Path]:
    """The C files of the runtime for `isa`: the ISA-generic ones, the ISA's own, the arena."""
    info = isa_info(isa)
    return [
        *sorted(DEVICE_DIR.glob("*.c")),
        *sorted((DEVICE_DIR / info.name).glob("*.c")),
        COMMON_DIR / "loom_arena.c",
    ]


def _headers() -> list[pathlib.Path]:
    return [*sorted(DEVICE_DIR.glob("*.h")), COMMON_DIR / "loom_arena.h"]


def runtime_cflags(isa: str) -> list[str]:
    info = isa_info(isa)
    return [f"--target={info.triple}", *info.isa_flags, *RUNTIME_FLAGS]


def runtime_path(isa: str) -> pathlib.Path:
    """The device runtime executable for `isa` ("hexagon" or "aarch64"), built at first use."""
    clang = find_tool("clang", "clang")
    lld = find_tool("ld.lld", "lld")
    flags = runtime_cflags(isa)
    sources = runtime_sources(isa)
    digest = hashlib.sha256()
    for path in [*sources, *_headers()]:
        digest.update(str(path.relative_to(NATIVE_DIR)).encode() + b"\0" + path.read_bytes())
    digest.update(" ".join([clang, lld, *flags]).encode())
    target = cache_dir() / f"loom-device-runtime-{isa}-{digest.hexdigest()[:16]}"
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        objects = [
            pathlib.Path(tmp) / (str(src.relative_to(NATIVE_DIR)).replace("/", "_") + ".o")
            for src in sources
        ]
        # one clang per file (two files may share a name in different folders), in parallel
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            jobs = [
                pool.submit(
                    run,
                    [clang, *flags, "-c", str(src), "-o", str(obj)],
                    f"compiling the {isa} device runtime",
                )
                for src, obj in zip(sources, objects)
            ]
            for job in jobs:
                job.result()
        out = pathlib.Path(tmp) / target.name
        run(
            [lld, "-static", "-o", str(out), *map(str, objects)],
            f"linking the {isa} device runtime",
        )
        out.chmod(0o755)  # qemu-user silently exits 1 on a file without its executable bit
        os.replace(out, target)
    return target


def emulator(isa: str) -> str:
    """The qemu user-mode emulator that runs `isa` code on this machine."""
    return find_tool(isa_info(isa).emulator, "qemu-user")


def module_cflags(isa: str) -> list[str]:
    """clang flags for C compiled into a device library: freestanding, position-independent.
    (On Hexagon, -G0 is the small-data threshold 0 a shared object needs; clang already passes
    it to LLVM for -fPIC, and a second `-mllvm -hexagon-small-data-threshold=0` is an error.)"""
    info = isa_info(isa)
    return [f"--target={info.triple}", *info.isa_flags, "-ffreestanding", "-fPIC", "-O2"]


def compile_device_object(
    source: pathlib.Path, output: pathlib.Path, isa: str, flags: Sequence[str] = ()
) -> pathlib.Path:
    """Compile one C file for a device library of `isa`; `flags` come after module_cflags."""
    clang = find_tool("clang", "clang")
    run(
        [clang, *module_cflags(isa), *flags, "-c", str(source), "-o", str(output)],
        f"compiling {source.name} for {isa}",
    )
    return pathlib.Path(output)


def build_device_library(
    objects: Sequence[pathlib.Path], output: pathlib.Path, isa: str
) -> pathlib.Path:
    """Link `objects` into a device library for `isa`: a shared object without libraries,
    with a DT_HASH table (the loader's symbol lookup). ld.lld's default segment alignment
    (64 KiB for both ISAs) is kept: qemu-hexagon's pages are 64 KiB, and segments that share a
    page would share its protection."""
    info = isa_info(isa)
    lld = find_tool("ld.lld", "lld")
    output = pathlib.Path(output)
    run(
        [
            lld,
            "-shared",
            "--hash-style=sysv",
            "-o",
            str(output),
            *map(str, objects),
        ],
        f"linking the {isa} device library {output.name}",
    )
    with output.open("rb") as f:
        header = f.read(20)
    machine = int.from_bytes(header[18:20], "little")
    if machine != info.machine:
        raise LoomError(
            f"{output} is for ELF machine {machine}, not {isa} ({info.machine}): its objects "
            f"were compiled for another ISA"
        )
    return output


def link_shared_object(object_code: bytes, isa: str) -> bytes:
    """Link one object into a device shared object (ld.lld -shared, no libraries)."""
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        obj = pathlib.Path(tmp) / "module.o"
        obj.write_bytes(object_code)
        out = pathlib.Path(tmp) / "module.so"
        build_device_library([obj], out, isa)
        return out.read_bytes()


def elf_flags(data: bytes) -> int:
    """The e_flags word of an ELF file's header (for Hexagon: the ISA version, 0x66 = v66)."""
    if data[:4] != b"\x7fELF" or len(data) < 52:
        raise LoomError("not an ELF file")
    offset = 36 if data[4] == 1 else 48  # ELFCLASS32 or ELFCLASS64
    return int.from_bytes(data[offset : offset + 4], "little")


DEVICE_RUNTIME = abi.register_library(
    abi.RuntimeLibrary(
        "loom_device_runtime",
        ("hexagon",),
        symbols=(
            *abi.RUNTIME_SYMBOLS,
            abi.parse_declaration("handle memcpy(handle dst, handle src, uint32 n)"),
            abi.parse_declaration("handle memmove(handle dst, handle src, uint32 n)"),
            abi.parse_declaration("handle memset(handle dst, int32 value, uint32 n)"),
        ),
        doc="loom's freestanding device runtime (loom/runtime/native/device): modules loaded into "
        "a device session resolve their imports against it",
    )
)
