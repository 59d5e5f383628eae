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

/* The ISA version is e_flags' low bits, written in hex digits: 0x66 is v66. The runtime accepts
 * v66 and v67 code only: qemu-hexagon 7.2 models a v67 core and cannot decode newer
 * instructions (v68's, or HVX's newer floating-point forms); loading such a module would give
 * wrong numbers or a crash, never a clear error. */
int loom_arch_check_elf(uint32_t machine, uint32_t flags, loom_text *error) {
    if (machine != EM_HEXAGON) {
        loom_text_format(error, "module is for ELF machine %u, not Hexagon (%u)",
                         (uint64_t)machine, (uint64_t)EM_HEXAGON);
        return -1;
    }
    uint32_t version = flags & EF_HEXAGON_MACH;
    if (version != 0x66 && version != 0x67) {
        char digits[8];
        int n = 0;
        for (int shift = 8; shift >= 0; shift -= 4)
            if ((version >> shift) != 0 || shift == 0)
                digits[n++] = "0123456789abcdef"[(version >> shift) & 0xf];
        digits[n] = 0;
        loom_text_format(error, "module is built for Hexagon v%s (e_flags %x), but this runtime "
                                "runs v66 and v67 code only (the ISA versions qemu-hexagon "
                                "executes); compile it with -mv66",
                         digits, (uint64_t)flags);
        return -1;
    }
    return 0;
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
