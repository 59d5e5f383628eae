/* The module loader, second half: what a dynamic linker does for a mapped module. It reads the
 * dynamic section (the symbol, string and hash tables, the relocation tables), applies every
 * relocation eagerly (DT_RELA and DT_JMPREL alike), resolving an import against the runtime's
 * exports, and finds functions through the DT_HASH table, which stays in the image. */
#include "module.h"

static const char *symbol_name(const module *m, const Elf_Sym *sym) {
    if (sym->st_name >= m->strsz) return 0;
    const char *name = m->strtab + sym->st_name;
    for (uintptr_t i = sym->st_name; i < m->strsz; ++i)
        if (m->strtab[i] == 0) return name;
    return 0; /* not terminated inside the string table */
}

/* -- the dynamic section ------------------------------------------------------------------ */

typedef struct {
    uintptr_t rela, relasz, relaent, jmprel, pltrelsz, pltrel, symtab, syment, strtab, strsz,
        hash;
    int has[DT_PREINIT_ARRAY + 1];
} dynamic_info;

static int read_dynamic(module *m, dynamic_info *d, loom_text *error) {
    const Elf_Dyn *dyn =
        loom_segment_at(m, m->dynamic_vaddr, m->dynamic_size, PF_R, sizeof(uintptr_t));
    uintptr_t count = m->dynamic_size / sizeof(Elf_Dyn);
    if (!dyn) {
        loom_text_format(error, "module's PT_DYNAMIC segment lies outside its loaded segments");
        return -1;
    }
    memset(d, 0, sizeof *d);
    uintptr_t needed = 0;
    for (uintptr_t i = 0; i < count && dyn[i].d_tag != DT_NULL; ++i) {
        uintptr_t v = dyn[i].d_val;
        switch (dyn[i].d_tag) {
        case DT_RELA: d->rela = v; break;
        case DT_RELASZ: d->relasz = v; break;
        case DT_RELAENT: d->relaent = v; break;
        case DT_JMPREL: d->jmprel = v; break;
        case DT_PLTRELSZ: d->pltrelsz = v; break;
        case DT_PLTREL: d->pltrel = v; break;
        case DT_SYMTAB: d->symtab = v; break;
        case DT_SYMENT: d->syment = v; break;
        case DT_STRTAB: d->strtab = v; break;
        case DT_STRSZ: d->strsz = v; break;
        case DT_HASH: d->hash = v; break;
        case DT_NEEDED: needed = v + 1; break;
        default: break;
        }
        if (dyn[i].d_tag >= 0 && dyn[i].d_tag <= DT_PREINIT_ARRAY) d->has[dyn[i].d_tag] = 1;
    }
    if (!d->has[DT_SYMTAB] || !d->has[DT_STRTAB] || !d->has[DT_HASH]) {
        loom_text_format(error, "module has no %s; link it with ld.lld -shared "
                                "--hash-style=sysv",
                         !d->has[DT_HASH] ? "DT_HASH symbol hash table" : "dynamic symbol table");
        return -1;
    }
    m->strtab = loom_segment_at(m, d->strtab, d->strsz, PF_R, 1);
    if (!m->strtab) {
        loom_text_format(error, "module's string table lies outside its segments");
        return -1;
    }
    m->strsz = d->strsz;
    if (needed) {
        const char *lib = needed - 1 < m->strsz ? m->strtab + needed - 1 : "?";
        loom_text_format(error, "module needs the library '%s'; device modules are linked "
                                "without libraries (the runtime provides their imports)",
                         lib);
        return -1;
    }
    if (d->has[DT_INIT] || d->has[DT_INIT_ARRAY] || d->has[DT_PREINIT_ARRAY]) {
        loom_text_format(error, "module has initializers (DT_INIT or DT_INIT_ARRAY), which the "
                                "device runtime does not run");
        return -1;
    }
    if (d->has[DT_REL]) {
        loom_text_format(error, "module has DT_REL relocations; the loader handles DT_RELA");
        return -1;
    }
    if ((d->has[DT_RELAENT] && d->relaent != sizeof(Elf_Rela)) ||
        (d->has[DT_SYMENT] && d->syment != sizeof(Elf_Sym)) ||
        (d->has[DT_JMPREL] && d->pltrel != DT_RELA)) {
        loom_text_format(error, "module's relocation or symbol entries are not this ELF "
                                "class's Elf_Rela / Elf_Sym");
        return -1;
    }
    /* DT_HASH: nbucket, nchain, then the buckets and the chains; nchain counts the symbols */
    const uint32_t *hash = loom_segment_at(m, d->hash, 8, PF_R, 4);
    if (hash) {
        m->nbucket = hash[0];
        m->nsyms = hash[1];
        if ((uint64_t)m->nbucket + m->nsyms > MAX_IMAGE_BYTES / 4 ||
            !loom_segment_at(m, d->hash, 8 + 4 * ((uint64_t)m->nbucket + m->nsyms), PF_R, 4))
            hash = 0;
    }
    m->symtab = loom_segment_at(m, d->symtab, (uint64_t)m->nsyms * sizeof(Elf_Sym), PF_R,
                                sizeof(uintptr_t));
    if (!hash || !m->symtab) {
        loom_text_format(error, "module's symbol hash table or symbol table lies outside its "
                                "segments");
        return -1;
    }
    m->buckets = hash + 2;
    m->chains = m->buckets + m->nbucket;
    return 0;
}

/* -- relocations -------------------------------------------------------------------------- */

/* S for relocation symbol `index`: the module's own definition, else the runtime's export. */
static int symbol_address(const module *m, uint64_t index, uintptr_t *address,
                          loom_text *error) {
    if (index == 0) {
        *address = 0;
        return 0;
    }
    if (index >= m->nsyms) {
        loom_text_format(error, "module's relocation names symbol %u of %u", index,
                         (uint64_t)m->nsyms);
        return -1;
    }
    const Elf_Sym *sym = &m->symtab[index];
    if (sym->st_shndx != SHN_UNDEF) {
        *address = m->bias + sym->st_value;
        return 0;
    }
    const char *name = symbol_name(m, sym);
    if (!name) {
        loom_text_format(error, "module's symbol %u has a name outside its string table",
                         index);
        return -1;
    }
    *address = (uintptr_t)loom_find_export(name, loom_strlen(name));
    if (*address == 0 && (sym->st_info >> 4) != STB_WEAK) {
        loom_text_format(error, "unresolved symbol '%s' in module: the %s device runtime does "
                                "not export it",
                         name, loom_arch_name);
        return -1;
    }
    return 0;
}

static int relocate(module *m, uintptr_t table, uintptr_t size, loom_text *error) {
    if (size == 0) return 0;
    const Elf_Rela *rela = loom_segment_at(m, table, size, PF_R, sizeof(uintptr_t));
    if (!rela || size % sizeof(Elf_Rela) != 0) {
        loom_text_format(error, "module's relocation table (%u bytes at %x) lies outside its "
                                "segments",
                         (uint64_t)size, (uint64_t)table);
        return -1;
    }
    for (uintptr_t i = 0; i < size / sizeof(Elf_Rela); ++i) {
        uint64_t type = ELF_R_TYPE(rela[i].r_info);
        loom_reloc_kind kind = loom_arch_relocation_kind((uint32_t)type);
        if (kind == LOOM_RELOC_NONE) continue;
        if (kind == LOOM_RELOC_UNKNOWN) {
            loom_text_format(error, "module has relocation type %u (at offset %x), which the %s "
                                    "loader does not handle",
                             type, (uint64_t)rela[i].r_offset, loom_arch_name);
            return -1;
        }
        void *where = loom_segment_at(m, rela[i].r_offset, sizeof(uintptr_t), 0, 1);
        if (!where) {
            loom_text_format(error, "module's relocation at %x lies outside its segments",
                             (uint64_t)rela[i].r_offset);
            return -1;
        }
        uintptr_t value = m->bias;
        if (kind == LOOM_RELOC_SYMBOL &&
            symbol_address(m, ELF_R_SYM(rela[i].r_info), &value, error) != 0)
            return -1;
        value += (uintptr_t)rela[i].r_addend;
        memcpy(where, &value, sizeof value); /* a data relocation need not be aligned */
    }
    return 0;
}

int loom_link_module(module *m, loom_text *error) {
    dynamic_info d;
    if (read_dynamic(m, &d, error) != 0) return -1;
    if (relocate(m, d.rela, d.relasz, error) != 0) return -1;
    return relocate(m, d.jmprel, d.pltrelsz, error);
}

/* -- symbols ------------------------------------------------------------------------------ */

static uint32_t elf_hash(const uint8_t *name, uint64_t n) {
    uint32_t h = 0;
    for (uint64_t i = 0; i < n; ++i) {
        h = (h << 4) + name[i];
        uint32_t g = h & 0xf0000000u;
        if (g) h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

uint64_t loom_find_function(const module *m, const void *name, uint64_t n) {
    if (m->nbucket == 0) return 0;
    /* a chain never visits more symbols than there are: a looping table cannot hang us */
    uint32_t index = m->buckets[elf_hash(name, n) % m->nbucket];
    for (uint32_t steps = 0; index != 0 && index < m->nsyms && steps < m->nsyms; ++steps) {
        const Elf_Sym *sym = &m->symtab[index];
        const char *sym_name = symbol_name(m, sym);
        if (sym_name && loom_streq_bytes(sym_name, name, n) && sym->st_shndx != SHN_UNDEF &&
            (sym->st_info & 0xf) == STT_FUNC && loom_segment_at(m, sym->st_value, 0, PF_X, 1))
            return (uint64_t)(m->bias + sym->st_value);
        index = m->chains[index];
    }
    return 0;
}
