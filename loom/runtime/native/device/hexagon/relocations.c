/* Hexagon: which ELF files the loader accepts and what their dynamic relocations mean. */
#include "../device.h"

#define EM_HEXAGON 164
#define EF_HEXAGON_MACH 0x3ff

/* Numbers from LLVM's ELFRelocs/Hexagon.def (R_HEX_COPY is 32; 36 is R_HEX_PLT_B22_PCREL, a
 * static relocation). */
enum {
    R_HEX_NONE = 0,
    R_HEX_32 = 6,
    R_HEX_GLOB_DAT = 33,
    R_HEX_JMP_SLOT = 34,
    R_HEX_RELATIVE = 35,
};

/* The ISA version is e_flags' low bits, written in hex digits: 0x66 is v66. The runtime (built
 * for v66) loads modules of v66 to v73, the versions loom targets: a newer core runs older code,
 * and QEMU 10's qemu-hexagon models each of them (-cpu). Which of them the emulator at hand runs
 * (QEMU 7.2: v66 and v67 only) the client checks before it sends a module
 * (loom/runtime/device/emulation.py); the runtime cannot tell the core it runs on. */
static const uint32_t loaded_versions[] = {0x66, 0x67, 0x68, 0x69, 0x71, 0x73};

int loom_arch_check_elf(uint32_t machine, uint32_t flags, loom_text *error) {
    if (machine != EM_HEXAGON) {
        loom_text_format(error, "module is for ELF machine %u, not Hexagon (%u)",
                         (uint64_t)machine, (uint64_t)EM_HEXAGON);
        return -1;
    }
    uint32_t version = flags & EF_HEXAGON_MACH;
    for (size_t i = 0; i < sizeof loaded_versions / sizeof loaded_versions[0]; i++)
        if (version == loaded_versions[i]) return 0;
    char digits[8];
    int n = 0;
    for (int shift = 8; shift >= 0; shift -= 4)
        if ((version >> shift) != 0 || shift == 0)
            digits[n++] = "0123456789abcdef"[(version >> shift) & 0xf];
    digits[n] = 0;
    loom_text_format(error, "module is built for Hexagon v%s (e_flags %x), but this runtime "
                            "loads v66, v67, v68, v69, v71 and v73 code only; compile it for "
                            "one of those",
                     digits, (uint64_t)flags);
    return -1;
}

loom_reloc_kind loom_arch_relocation_kind(uint32_t type) {
    switch (type) {
    case R_HEX_NONE: return LOOM_RELOC_NONE;
    case R_HEX_RELATIVE: return LOOM_RELOC_RELATIVE;
    case R_HEX_32:       /* a data word holding a symbol's address */
    case R_HEX_GLOB_DAT: /* a GOT entry */
    case R_HEX_JMP_SLOT: /* a PLT's GOT entry, bound now rather than lazily */
        return LOOM_RELOC_SYMBOL;
    default: return LOOM_RELOC_UNKNOWN;
    }
}
