"""HVX floating-point instructions in Hexagon machine code, found by their encodings.

From v68 on, HVX has IEEE (`.sf`, `.hf`, v73's `.bf`) and "qfloat" (`.qf32`, `.qf16`) vector
arithmetic: LLVM's Hexagon back end emits it for float vectors of a v68+ target with HVX.
qemu-hexagon implements none of it (QEMU 10 stops with "decode_insns: code should not be
reached"), so a simulator session refuses a module that has any, naming the instruction, rather
than start it and die (docs/hexagon.md). Looking at the machine code, not at how the module was
built, works for every module: one built in this process, one exported and loaded again, a raw
shared object.

`HVX_FLOAT_ENCODINGS` was derived by decoding every word of HVX's opcode space (ICLASS 1 with
bit 27 set: bits 26:16, 13 and 7:0 enumerated) with LLVM 19's Hexagon disassembler for v73 with
`+hvx-qfloat,+hvx-ieee-fp`, keeping the instructions whose operands have a float type, and
grouping them by their fixed bits; it was checked on 200,000 random HVX words (no word
classified differently from the disassembler). Parse bits (15:14) are outside every mask; a
word whose parse bits are 00 begins a duplex of two scalar sub-instructions and is never HVX.
"""

from __future__ import annotations

import struct

import numpy as np

from loom.errors import LoomError

HEXAGON_VERSIONS = (0x66, 0x67, 0x68, 0x69, 0x71, 0x73)
"""Hexagon ISA versions (ELF e_flags) the device runtime loads modules of."""

# (mask, value, an instruction of the group): a word w is HVX float when w & mask == value
HVX_FLOAT_ENCODINGS: tuple[tuple[int, int, str], ...] = (
    (0xFFE020E0, 0x1C402020, "v1:0.sf += vmpy(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1C402040, "v0.hf += vmpy(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1C402060, "v0.sf += vdmpy(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1C602000, "v0.hf = vfmin(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1C602020, "v0.sf = vfmin(v0.sf,v0.sf)"),
    (0xFFE020E0, 0x1C602040, "v0.hf = vfmax(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1C602060, "v0.sf = vfmax(v0.sf,v0.sf)"),
    (0xFFE020FC, 0x1C802030, "q0 |= vcmp.gt(v0.sf,v0.sf)"),
    (0xFFE020FC, 0x1C802034, "q0 |= vcmp.gt(v0.hf,v0.hf)"),
    (0xFFE020FC, 0x1C802038, "q0 |= vcmp.gt(v0.bf,v0.bf)"),
    (0xFFE020FC, 0x1C802070, "q0 = vcmp.gt(v0.sf,v0.sf)"),
    (0xFFE020FC, 0x1C802074, "q0 = vcmp.gt(v0.hf,v0.hf)"),
    (0xFFE020FC, 0x1C802078, "q0 = vcmp.gt(v0.bf,v0.bf)"),
    (0xFFE020FC, 0x1C8020C8, "q0 &= vcmp.gt(v0.sf,v0.sf)"),
    (0xFFE020FC, 0x1C8020CC, "q0 &= vcmp.gt(v0.hf,v0.hf)"),
    (0xFFE020FC, 0x1C8020D0, "q0 &= vcmp.gt(v0.bf,v0.bf)"),
    (0xFFE020FC, 0x1C8020E8, "q0 ^= vcmp.gt(v0.sf,v0.sf)"),
    (0xFFE020FC, 0x1C8020EC, "q0 ^= vcmp.gt(v0.hf,v0.hf)"),
    (0xFFE020FC, 0x1C8020F0, "q0 ^= vcmp.gt(v0.bf,v0.bf)"),
    (0xFFE020E0, 0x1D002000, "v1:0.sf += vmpy(v0.bf,v0.bf)"),
    (0xFFE020E0, 0x1D402000, "v0.bf = vmin(v0.bf,v0.bf)"),
    (0xFFE020E0, 0x1D402060, "v0.bf = vcvt(v0.sf,v0.sf)"),
    (0xFFE020E0, 0x1D402080, "v1:0.sf = vmpy(v0.bf,v0.bf)"),
    (0xFFE020E0, 0x1D4020A0, "v1:0.sf = vsub(v0.bf,v0.bf)"),
    (0xFFE020E0, 0x1D4020C0, "v1:0.sf = vadd(v0.bf,v0.bf)"),
    (0xFFE020E0, 0x1D4020E0, "v0.bf = vmax(v0.bf,v0.bf)"),
    (0xFFFF20E0, 0x1E042000, "v0.sf = v0.qf32"),
    (0xFFFF20E0, 0x1E042020, "v1:0.hf = vcvt(v0.ub)"),
    (0xFFFF20E0, 0x1E042040, "v1:0.hf = vcvt(v0.b)"),
    (0xFFFF20E0, 0x1E042060, "v0.hf = v0.qf16"),
    (0xFFFF20E0, 0x1E042080, "v1:0.sf = vcvt(v0.hf)"),
    (0xFFFF20E0, 0x1E0420A0, "v0.hf = vcvt(v0.uh)"),
    (0xFFFF20E0, 0x1E0420C0, "v0.hf = v1:0.qf32"),
    (0xFFFF20E0, 0x1E0420E0, "v0.hf = vcvt(v0.h)"),
    (0xFFFF20E0, 0x1E052000, "v0.uh = vcvt(v0.hf)"),
    (0xFFFF20E0, 0x1E052020, "v0.w = v0.sf"),
    (0xFFFF20E0, 0x1E052040, "v0.h = v0.hf"),
    (0xFFFF20E0, 0x1E052060, "v0.sf = v0.w"),
    (0xFFFF20E0, 0x1E052080, "v0.hf = v0.h"),
    (0xFFFF20E0, 0x1E062000, "v0.h = vcvt(v0.hf)"),
    (0xFFFF20E0, 0x1E062040, "v0.hf = vfneg(v0.hf)"),
    (0xFFFF20E0, 0x1E062060, "v0.sf = vfneg(v0.sf)"),
    (0xFFFF20E0, 0x1E062080, "v0.hf = vabs(v0.hf)"),
    (0xFFFF20E0, 0x1E0620A0, "v0.sf = vabs(v0.sf)"),
    (0xFFE020E0, 0x1F602000, "v0.hf = vsub(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1F602020, "v0.hf = vcvt(v0.sf,v0.sf)"),
    (0xFFE020E0, 0x1F602040, "v0.qf16 = vadd(v0.qf16,v0.qf16)"),
    (0xFFE020E0, 0x1F602060, "v0.qf16 = vadd(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1F602080, "v0.qf16 = vadd(v0.qf16,v0.hf)"),
    (0xFFE020E0, 0x1F6020A0, "v0.qf16 = vsub(v0.qf16,v0.qf16)"),
    (0xFFE020E0, 0x1F6020C0, "v0.qf16 = vsub(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1F6020E0, "v0.qf16 = vsub(v0.qf16,v0.hf)"),
    (0xFFE020E0, 0x1F802000, "v1:0.qf32 = vmpy(v0.qf16,v0.hf)"),
    (0xFFE020E0, 0x1F802020, "v0.sf = vmpy(v0.sf,v0.sf)"),
    (0xFFE020E0, 0x1F802040, "v1:0.sf = vmpy(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1F802060, "v0.hf = vmpy(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1F802080, "v1:0.sf = vadd(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1F8020A0, "v1:0.sf = vsub(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1F8020C0, "v0.sf = vadd(v0.sf,v0.sf)"),
    (0xFFE020E0, 0x1F8020E0, "v0.sf = vsub(v0.sf,v0.sf)"),
    (0xFFE020E0, 0x1FA02000, "v0.qf32 = vadd(v0.qf32,v0.qf32)"),
    (0xFFE020E0, 0x1FA02020, "v0.qf32 = vadd(v0.sf,v0.sf)"),
    (0xFFE020E0, 0x1FA02040, "v0.qf32 = vadd(v0.qf32,v0.sf)"),
    (0xFFE020E0, 0x1FA02060, "v0.qf32 = vsub(v0.qf32,v0.qf32)"),
    (0xFFE020E0, 0x1FA02080, "v0.qf32 = vsub(v0.sf,v0.sf)"),
    (0xFFE020E0, 0x1FA020A0, "v0.qf32 = vsub(v0.qf32,v0.sf)"),
    (0xFFE020E0, 0x1FA020C0, "v0.sf = vdmpy(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1FA020E0, "v0.hf = vadd(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1FC02020, "v0.sf = vmax(v0.sf,v0.sf)"),
    (0xFFE020E0, 0x1FC02040, "v0.sf = vmin(v0.sf,v0.sf)"),
    (0xFFE020E0, 0x1FC02060, "v0.hf = vmax(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1FC02080, "v0.hf = vmin(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1FC020A0, "v0.ub = vcvt(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1FC020C0, "v0.b = vcvt(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1FE02000, "v0.qf32 = vmpy(v0.qf32,v0.qf32)"),
    (0xFFE020E0, 0x1FE02020, "v0.qf32 = vmpy(v0.sf,v0.sf)"),
    (0xFFE020E0, 0x1FE02060, "v0.qf16 = vmpy(v0.qf16,v0.qf16)"),
    (0xFFE020E0, 0x1FE02080, "v0.qf16 = vmpy(v0.hf,v0.hf)"),
    (0xFFE020E0, 0x1FE020A0, "v0.qf16 = vmpy(v0.qf16,v0.hf)"),
    (0xFFE020E0, 0x1FE020C0, "v1:0.qf32 = vmpy(v0.qf16,v0.qf16)"),
    (0xFFE020E0, 0x1FE020E0, "v1:0.qf32 = vmpy(v0.hf,v0.hf)"),
)

_PT_LOAD = 1
_PF_X = 1


def code_segments(shared_object: bytes) -> list[tuple[int, int]]:
    """(file offset, bytes) of each executable segment of a 32-bit little-endian ELF file."""
    data = shared_object
    if data[:4] != b"\x7fELF" or len(data) < 52 or data[4] != 1 or data[5] != 1:
        raise LoomError("not a 32-bit little-endian ELF file (a Hexagon module)")
    (phoff,) = struct.unpack_from("<I", data, 28)
    phentsize, phnum = struct.unpack_from("<HH", data, 42)
    segments = []
    for k in range(phnum):
        at = phoff + k * phentsize
        if at + 32 > len(data):
            raise LoomError(f"program header {k} lies outside the file")
        p_type, p_offset, _, _, p_filesz, _, p_flags, _ = struct.unpack_from("<8I", data, at)
        if p_type == _PT_LOAD and p_flags & _PF_X:
            if p_offset > len(data):
                raise LoomError(
                    f"program header {k}: its segment (offset 0x{p_offset:x}) lies outside "
                    f"the file ({len(data)} bytes)"
                )
            segments.append((p_offset, min(p_filesz, max(0, len(data) - p_offset))))
    return segments


def hvx_float_word(word: int) -> str | None:
    """An instruction of the HVX float group `word` belongs to, or None."""
    if (word >> 14) & 3 == 0:  # a duplex: two scalar sub-instructions
        return None
    for mask, value, example in HVX_FLOAT_ENCODINGS:
        if word & mask == value:
            return example
    return None


_MASKS = np.array([mask for mask, _, _ in HVX_FLOAT_ENCODINGS], np.uint32)
_VALUES = np.array([value for _, value, _ in HVX_FLOAT_ENCODINGS], np.uint32)


def hvx_float_instructions(shared_object: bytes) -> list[tuple[int, int, str]]:
    """(file offset, word, an instruction of its group) of each HVX floating-point instruction
    in the executable segments of a Hexagon shared object (instructions are 4-byte aligned)."""
    found = []
    for offset, size in code_segments(shared_object):
        start = offset + (-offset % 4)
        count = max(0, (offset + size - start) // 4)
        words = np.frombuffer(shared_object, "<u4", count, start)
        # HVX compute instructions (ICLASS 1, bit 27 set; not a duplex), then every rule at once
        where = np.flatnonzero(((words >> 27) == 0b00011) & (((words >> 14) & 3) != 0))
        hits = ((words[where, None] & _MASKS) == _VALUES).any(axis=1)
        for k in where[hits]:
            word = int(words[k])
            found.append((start + 4 * int(k), word, hvx_float_word(word)))
    return found
