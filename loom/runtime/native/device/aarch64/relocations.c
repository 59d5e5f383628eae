/* AArch64: which ELF files the loader accepts and what their dynamic relocations mean. */
#include "../device.h"

#define EM_AARCH64 183

enum {
    R_AARCH64_NONE = 0,
    R_AARCH64_ABS64 = 257,
    R_AARCH64_GLOB_DAT = 1025,
    R_AARCH64_JUMP_SLOT = 1026,
    R_AARCH64_RELATIVE = 1027,
};

int loom_arch_check_elf(uint32_t machine, uint32_t flags, loom_text *error) {
    (void)flags; /* AArch64 defines no e_flags */
    if (machine != EM_AARCH64) {
        loom_text_format(error, "module is for ELF machine %u, not AArch64 (%u)",
                         (uint64_t)machine, (uint64_t)EM_AARCH64);
        return -1;
    }
    return 0;
}

loom_reloc_kind loom_arch_relocation_kind(uint32_t type) {
    switch (type) {
    case R_AARCH64_NONE: return LOOM_RELOC_NONE;
    case R_AARCH64_RELATIVE: return LOOM_RELOC_RELATIVE;
    case R_AARCH64_ABS64:     /* a data word holding a symbol's address */
    case R_AARCH64_GLOB_DAT:  /* a GOT entry */
    case R_AARCH64_JUMP_SLOT: /* a PLT's GOT entry, bound now rather than lazily */
        return LOOM_RELOC_SYMBOL;
    default: return LOOM_RELOC_UNKNOWN;
    }
}
