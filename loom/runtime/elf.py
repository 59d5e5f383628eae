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
    """Parse a little-endian ELF file (32- or 64-bit). Every defect found (a header, table or
    string that lies outside the file, an impossible entry size) is a LoomError naming it."""
    try:
        return _parse(data)
    except (struct.error, IndexError, ValueError, OverflowError) as e:  # a check missed below
        raise LoomError(f"malformed ELF file: {e}") from None


_NOBITS = 8
_HEADER = {64: "<HHIQQQIHHHHHH", 32: "<HHIIIIIHHHHHH"}
_SECTION = {64: struct.Struct("<IIQQQQIIQQ"), 32: struct.Struct("<IIIIIIIIII")}
_SYMBOL = {64: struct.Struct("<IBBHQQ"), 32: struct.Struct("<IIIBBH")}


def _parse(data: bytes) -> ElfFile:
    if len(data) < 52 or data[:4] != b"\x7fELF":
        raise LoomError("not an ELF file (bad magic)")
    elf_class = {1: 32, 2: 64}.get(data[4])
    if elf_class is None or data[5] != 1:
        raise LoomError("unsupported ELF file: only little-endian 32/64-bit files are read")
    if len(data) < (64 if elf_class == 64 else 52):
        raise LoomError("truncated ELF file: its header lies past its end")
    (etype, machine, _, _, _, shoff, flags, _, _, _, shentsize, shnum, shstrndx) = (
        struct.unpack_from(_HEADER[elf_class], data, 16)
    )
    entry = _SECTION[elf_class]
    if shnum and shentsize < entry.size:
        raise LoomError(f"malformed ELF file: section header entries of {shentsize} bytes")
    if shoff + shnum * shentsize > len(data):
        raise LoomError("truncated ELF file: the section headers lie past its end")
    raw = []
    for k in range(shnum):
        name, typ, _, addr, off, size, link, _, _, entsize = entry.unpack_from(
            data, shoff + k * shentsize
        )
        if typ != _NOBITS and off + size > len(data):
            raise LoomError(f"truncated ELF file: section {k} lies past its end")
        raw.append((name, typ, addr, off, size, link, entsize))
    if shnum and shstrndx >= shnum:
        raise LoomError(f"malformed ELF file: section name table {shstrndx} of {shnum}")
    names = raw[shstrndx] if shnum else None

    def string(table, index: int, what: str) -> str:
        if table[1] == _NOBITS or index >= table[4]:
            raise LoomError(f"malformed ELF file: {what} lies outside its string table")
        start = table[3] + index
        end = data.find(b"\0", start, table[3] + table[4])
        if end < 0:
            raise LoomError(f"malformed ELF file: {what} is not terminated in its string table")
        return data[start:end].decode(errors="replace")

    sections = tuple(
        Section(
            string(names, r[0], f"the name of section {k}") if names else "",
            r[1],
            r[3],
            r[4],
            r[2],
        )
        for k, r in enumerate(raw)
    )
    symbols = []
    sym = _SYMBOL[elf_class]
    for k, r in enumerate(raw):
        if r[1] not in (_SHT_SYMTAB, _SHT_DYNSYM) or not r[6]:
            continue
        if r[6] < sym.size or r[5] >= len(raw):
            raise LoomError(f"malformed ELF file: symbol table {k} (entries of {r[6]} bytes)")
        strtab = raw[r[5]]
        for j in range(r[4] // r[6]):
            at = r[3] + j * r[6]
            if elf_class == 64:
                name, info, _, shndx, value, size = sym.unpack_from(data, at)
            else:
                name, value, size, info, _, shndx = sym.unpack_from(data, at)
            symbols.append(
                Symbol(
                    string(strtab, name, f"the name of symbol {j} of section {k}"),
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
