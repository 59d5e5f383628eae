"""Reading ELF files: machine, flags, sections and symbols (defined and undefined).

Enough of the format for loom's own checks: which symbols an object or shared library leaves
undefined, which machine and ISA version it targets, and where a named section lies.
"""

from __future__ import annotations

import dataclasses
import platform
import struct

from loom.errors import LoomError

MACHINES = {3: "x86", 40: "ARM", 62: "x86-64", 164: "Hexagon", 183: "AArch64", 243: "RISC-V"}
_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_SHN_UNDEF = 0


@dataclasses.dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    address: int


@dataclasses.dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    binding: int  # 0 local, 1 global, 2 weak
    type: int  # 0 none, 1 object, 2 function
    section_index: int
    dynamic: bool = False  # from .dynsym rather than .symtab

    @property
    def undefined(self) -> bool:
        return self.section_index == _SHN_UNDEF


@dataclasses.dataclass(frozen=True)
class ElfFile:
    elf_class: int  # 32 or 64
    type: int  # 1 relocatable, 2 executable, 3 shared object
    machine: int
    flags: int
    sections: tuple[Section, ...]
    symbols: tuple[Symbol, ...]

    @property
    def machine_name(self) -> str:
        return MACHINES.get(self.machine, f"machine {self.machine}")

    def undefined_symbols(self, include_weak: bool = False) -> list[str]:
        """Symbols the file needs from elsewhere, without version suffixes, sorted: those of
        the dynamic symbol table for a shared object (what the dynamic linker resolves), else of
        the symbol table. Weak references may stay unresolved: included only if asked."""
        dynamic = self.type == 3 and any(s.dynamic for s in self.symbols)
        bindings = (1, 2) if include_weak else (1,)
        return sorted(
            {
                s.name.split("@")[0]
                for s in self.symbols
                if s.undefined and s.name and s.binding in bindings and (s.dynamic or not dynamic)
            }
        )

    def section(self, name: str) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None


def parse(data: bytes) -> ElfFile:
    """Parse a little-endian ELF file (32- or 64-bit)."""
    if len(data) < 52 or data[:4] != b"\x7fELF":
        raise LoomError("not an ELF file (bad magic)")
    elf_class = {1: 32, 2: 64}.get(data[4])
    if elf_class is None or data[5] != 1:
        raise LoomError("unsupported ELF file: only little-endian 32/64-bit files are read")
    if elf_class == 64:
        (etype, machine, _, _, _, shoff, flags, _, _, _, shentsize, shnum, shstrndx) = (
            struct.unpack_from("<HHIQQQIHHHHHH", data, 16)
        )
    else:
        (etype, machine, _, _, _, shoff, flags, _, _, _, shentsize, shnum, shstrndx) = (
            struct.unpack_from("<HHIIIIIHHHHHH", data, 16)
        )
    if shoff + shnum * shentsize > len(data):
        raise LoomError("truncated ELF file: the section headers lie past its end")
    raw = []
    for k in range(shnum):
        at = shoff + k * shentsize
        if elf_class == 64:
            name, typ, _, addr, off, size, link, _, _, entsize = struct.unpack_from(
                "<IIQQQQIIQQ", data, at
            )
        else:
            name, typ, _, addr, off, size, link, _, _, entsize = struct.unpack_from(
                "<IIIIIIIIII", data, at
            )
        raw.append((name, typ, addr, off, size, link, entsize))
    names = raw[shstrndx] if shstrndx < len(raw) else None

    def string(table, index: int) -> str:
        start = table[3] + index
        end = data.index(b"\0", start)
        return data[start:end].decode(errors="replace")

    sections = tuple(
        Section(string(names, r[0]) if names else "", r[1], r[3], r[4], r[2]) for r in raw
    )
    symbols = []
    for r in raw:
        if r[1] not in (_SHT_SYMTAB, _SHT_DYNSYM) or not r[6]:
            continue
        strtab = raw[r[5]]
        for k in range(r[4] // r[6]):
            at = r[3] + k * r[6]
            if elf_class == 64:
                name, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", data, at)
            else:
                name, value, size, info, _, shndx = struct.unpack_from("<IIIBBH", data, at)
            symbols.append(
                Symbol(
                    string(strtab, name),
                    value,
                    size,
                    info >> 4,
                    info & 0xF,
                    shndx,
                    r[1] == _SHT_DYNSYM,
                )
            )
    return ElfFile(elf_class, etype, machine, flags, sections, tuple(symbols))


_TRIPLE_MACHINES = {"x86_64": 62, "aarch64": 183, "hexagon": 164, "riscv64": 243, "arm": 40}


def elf_machine_of_triple(triple: str) -> int | None:
    return _TRIPLE_MACHINES.get(triple.split("-")[0])


def host_machine() -> int | None:
    """The ELF machine number of this process's CPU."""
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower())
    return elf_machine_of_triple(arch or platform.machine())
