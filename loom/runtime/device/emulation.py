"""What the installed qemu user emulator runs, and the checks a simulator session makes.

Debian bookworm's qemu-user is QEMU 7.2: its qemu-hexagon models a v67 core only (it has no
`-cpu` models to list, and runs v66/v67 code). QEMU 10 (bookworm-backports, which
scripts/ensure-debian-packages.sh installs) offers `-cpu v66 v67 v68 v69 v71 v73` and runs
integer HVX code of all of them; no QEMU implements HVX floating point. A Hexagon simulator
session emulates one version (`cpu`, by default the newest the emulator has); it refuses a
module built for a newer version, or one with HVX float instructions, with a LoomError saying
why and what to do, rather than start code the emulator cannot run (wrong numbers must never
look like results, and a crashed emulator says little).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import subprocess

from loom.errors import LoomError
from loom.runtime.device.build import elf_flags, emulator, isa_info
from loom.runtime.device.hexagon_code import HEXAGON_VERSIONS, hvx_float_instructions

QEMU_72_HEXAGON = (0x66, 0x67)
"""What a qemu-hexagon without `-cpu` models (QEMU 7.2) runs: it treats v66 code as v67."""

INSTALL_QEMU_10 = (
    "install QEMU 10 as root with `scripts/ensure-debian-packages.sh` (`make setup`; it adds "
    "Debian's bookworm-backports, pinned, and runs `apt-get install -t bookworm-backports "
    "qemu-user`)"
)
"""How to get a qemu-hexagon that runs v68-v73 code (docs/hexagon.md, Set-up)."""


def hexagon_version_name(version: int) -> str:
    return f"v{version:x}"


def parse_hexagon_version(cpu: str) -> int:
    """0x73 for "v73" or "hexagonv73"; a LoomError naming the versions for anything else."""
    text = str(cpu).removeprefix("hexagon")
    match = re.fullmatch(r"v([0-9]{2})", text)
    if match is None or int(match.group(1), 16) not in HEXAGON_VERSIONS:
        known = ", ".join(map(hexagon_version_name, HEXAGON_VERSIONS))
        raise LoomError(f"cpu must be a Hexagon version ({known}), got {cpu!r}")
    return int(match.group(1), 16)


@dataclasses.dataclass(frozen=True)
class Emulation:
    """The qemu user emulator of an ISA on this machine."""

    isa: str
    path: str
    version: str
    """qemu's version ("10.0.2"), or "" when it does not say."""
    cpus: tuple[str, ...]
    """The `-cpu` models it lists (`-cpu help`); () when it lists none."""

    @property
    def major(self) -> int:
        match = re.match(r"(\d+)", self.version)
        return int(match.group(1)) if match else 0

    def hexagon_versions(self) -> tuple[int, ...]:
        """The Hexagon versions it runs: those up to its newest `-cpu` model."""
        listed = [parse_hexagon_version(c) for c in self.cpus if _is_known_hexagon(c)]
        newest = max(listed, default=max(QEMU_72_HEXAGON))
        return tuple(v for v in HEXAGON_VERSIONS if v <= newest)

    def default_cpu(self) -> str | None:
        """The version a Hexagon session emulates unless told: the newest it runs."""
        if self.isa != "hexagon":
            return None
        return hexagon_version_name(max(self.hexagon_versions()))

    def check_cpu(self, cpu: str | None) -> str | None:
        """`cpu` (or the default) validated: a version this emulator runs."""
        if cpu is None:
            return self.default_cpu()
        if self.isa != "hexagon":
            if cpu not in self.cpus:
                raise LoomError(
                    f"cpu {cpu!r} is not a model of {self.path}; it has {', '.join(self.cpus)}"
                )
            return cpu
        version = parse_hexagon_version(cpu)
        if version not in self.hexagon_versions():
            raise LoomError(
                f"cpu {cpu!r}: {self.describe()} runs "
                f"{self.describe_hexagon_versions()} code only; {INSTALL_QEMU_10}"
            )
        return hexagon_version_name(version)

    def cpu_arguments(self, cpu: str | None) -> list[str]:
        """qemu's `-cpu` option for `cpu`, when it has that model (QEMU 7.2 has none: its one
        model runs v66 and v67 code)."""
        return ["-cpu", cpu] if cpu is not None and cpu in self.cpus else []

    def check_module(self, shared_object: bytes, cpu: str | None) -> None:
        """A LoomError if a session emulating `cpu` cannot run this module: built for a newer
        Hexagon version, or with HVX floating-point instructions."""
        if self.isa != "hexagon" or cpu is None:
            return
        version = elf_flags(shared_object) & 0xFFF
        name = hexagon_version_name(version)
        if version not in HEXAGON_VERSIONS:
            known = ", ".join(map(hexagon_version_name, HEXAGON_VERSIONS))
            raise LoomError(
                f"this module is for Hexagon {name}; the device runtime loads modules of {known}"
            )
        if version not in self.hexagon_versions():
            raise LoomError(
                f"this module is for Hexagon {name}, which is compile-only here: "
                f"{self.describe()} runs {self.describe_hexagon_versions()} code only; "
                f"{INSTALL_QEMU_10}"
            )
        if version > parse_hexagon_version(cpu):
            raise LoomError(
                f"this module is for Hexagon {name}, but the session emulates a {cpu} core: "
                f'start it with loom.device("hexagon-sim", cpu="{name}")'
            )
        floats = hvx_float_instructions(shared_object)
        if floats:
            offset, word, example = floats[0]
            raise LoomError(
                f"this module has {len(floats)} HVX floating-point instruction(s) (the first "
                f"at file offset 0x{offset:x}: 0x{word:08x}, of the kind `{example}`), which "
                f"{self.describe()} does not implement: HVX float code is compile-only here. "
                "Float kernels run here as scalar code (a schedule without vectorize, or "
                "-hvx=0) (docs/hexagon.md)"
            )

    def describe(self) -> str:
        return f"{os.path.basename(self.path)} {self.version}".strip()

    def describe_hexagon_versions(self) -> str:
        versions = self.hexagon_versions()
        return f"{hexagon_version_name(versions[0])}-{hexagon_version_name(versions[-1])}"


def _is_known_hexagon(cpu: str) -> bool:
    try:
        parse_hexagon_version(cpu)
    except LoomError:
        return False
    return True


def emulation(isa: str) -> Emulation:
    """The emulator of `isa` on this machine (asked once per installed binary)."""
    info = isa_info(isa)
    path = emulator(isa)
    return _ask(info.name, path, os.stat(path).st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _ask(isa: str, path: str, mtime_ns: int) -> Emulation:
    del mtime_ns  # a key only: a reinstalled emulator is asked again

    def output(*args: str) -> str:
        try:
            proc = subprocess.run(
                [path, *args], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise LoomError(f"cannot run {path} {' '.join(args)}: {e}") from None
        return proc.stdout

    match = re.search(r"version (\d+\.\d+(\.\d+)?)", output("--version"))
    listing = output("-cpu", "help").splitlines()
    cpus = tuple(line.split()[0] for line in listing[1:] if line.startswith("  ") and line.split())
    return Emulation(isa, path, match.group(1) if match else "", cpus)
