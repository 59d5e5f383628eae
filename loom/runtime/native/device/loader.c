/* The module loader, first half: position-independent ELF shared objects (as `ld.lld -shared
 * --hash-style=sysv` links them, without libraries) mapped into this process, and the table of
 * loaded modules.
 *
 * Loading maps every PT_LOAD segment into one region at the offsets the linker chose, so
 * PC-relative code works unchanged; copies the file's bytes and leaves the tail of each segment
 * zero (.bss); has dynamic.c apply the relocations; and then gives each page its protection.
 *
 * Every offset, size and address in the file is checked before it is used: a truncated or
 * crafted file is an error message, never a wild access. The ISA-specific parts (e_machine,
 * e_flags, relocation numbers) are in <isa>/relocations.c. */
#include "module.h"

#define MAX_MODULES 32
#define MAX_REGION_ALIGNMENT (64u * 1024u)

static module modules[MAX_MODULES];
static uint32_t next_id = 1;

/* -- address checks ----------------------------------------------------------------------- */

void *loom_segment_at(const module *m, uint64_t vaddr, uint64_t n, uint32_t flags,
                      uintptr_t alignment) {
    if ((vaddr & (alignment - 1)) != 0) return 0;
    for (int i = 0; i < m->nsegments; ++i) {
        const segment *s = &m->segments[i];
        if ((s->flags & flags) == flags && vaddr >= s->vaddr && vaddr - s->vaddr <= s->memsz &&
            n <= s->memsz - (vaddr - s->vaddr))
            return (void *)(m->bias + (uintptr_t)vaddr);
    }
    return 0;
}

/* -- the file: header and program headers ------------------------------------------------- */

static int read_headers(module *m, const uint8_t *file, uint64_t size, loom_text *error) {
    Elf_Ehdr eh;
    if (size < 16 || file[0] != 0x7f || file[1] != 'E' || file[2] != 'L' || file[3] != 'F') {
        loom_text_format(error, "module is not an ELF file (%u bytes without the ELF magic)",
                         size);
        return -1;
    }
    if (file[4] != LOOM_ELF_CLASS || file[5] != ELFDATA2LSB) {
        loom_text_format(error, "module is a %s %s-endian ELF file, but this %s runtime loads "
                                "%s little-endian shared objects",
                         file[4] == ELFCLASS64 ? "64-bit" : "32-bit",
                         file[5] == ELFDATA2LSB ? "little" : "big", loom_arch_name,
                         LOOM_ELF_CLASS == ELFCLASS64 ? "64-bit" : "32-bit");
        return -1;
    }
    if (size < sizeof eh) {
        loom_text_format(error, "module is truncated: %u bytes, shorter than its ELF header",
                         size);
        return -1;
    }
    memcpy(&eh, file, sizeof eh);
    if (loom_arch_check_elf(eh.e_machine, eh.e_flags, error) != 0) return -1;
    if (eh.e_type != ET_DYN) {
        loom_text_format(error, "module has ELF type %u, not a shared object (ET_DYN); link it "
                                "with ld.lld -shared",
                         (uint64_t)eh.e_type);
        return -1;
    }
    if (eh.e_phentsize != sizeof(Elf_Phdr) || eh.e_phnum == 0 || eh.e_phoff > size ||
        (uint64_t)eh.e_phnum * sizeof(Elf_Phdr) > size - eh.e_phoff) {
        loom_text_format(error, "module's program headers (%u of %u bytes at offset %u) do not "
                                "lie inside its %u bytes",
                         (uint64_t)eh.e_phnum, (uint64_t)eh.e_phentsize, (uint64_t)eh.e_phoff,
                         size);
        return -1;
    }
    int has_dynamic = 0;
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
        Elf_Phdr ph;
        memcpy(&ph, file + eh.e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_TLS) {
            loom_text_format(error, "module uses thread-local storage (PT_TLS), which the "
                                    "device runtime does not provide");
            return -1;
        }
        if (ph.p_type == PT_DYNAMIC) {
            has_dynamic = 1;
            m->dynamic_vaddr = (uintptr_t)ph.p_vaddr;
            m->dynamic_size = (uintptr_t)ph.p_memsz;
        }
        if (ph.p_type != PT_LOAD || ph.p_memsz == 0) continue;
        if (ph.p_offset > size || ph.p_filesz > size - ph.p_offset || ph.p_filesz > ph.p_memsz ||
            ph.p_memsz > MAX_IMAGE_BYTES || ph.p_vaddr > MAX_IMAGE_BYTES) {
            loom_text_format(error, "module's segment %u (%u bytes of file at offset %u, %u "
                                    "bytes of memory at %x) does not fit its %u bytes or the "
                                    "%u-byte image limit",
                             (uint64_t)i, (uint64_t)ph.p_filesz, (uint64_t)ph.p_offset,
                             (uint64_t)ph.p_memsz, (uint64_t)ph.p_vaddr, size,
                             (uint64_t)MAX_IMAGE_BYTES);
            return -1;
        }
        if (m->nsegments == MAX_SEGMENTS) {
            loom_text_format(error, "module has more than %u PT_LOAD segments",
                             (uint64_t)MAX_SEGMENTS);
            return -1;
        }
        segment *s = &m->segments[m->nsegments++];
        s->vaddr = (uintptr_t)ph.p_vaddr;
        s->memsz = (uintptr_t)ph.p_memsz;
        s->offset = (uintptr_t)ph.p_offset;
        s->filesz = (uintptr_t)ph.p_filesz;
        s->align = (uintptr_t)ph.p_align;
        s->flags = ph.p_flags & (PF_R | PF_W | PF_X);
    }
    if (m->nsegments == 0 || !has_dynamic) {
        loom_text_format(error, "module has no %s; it must be a shared object linked with "
                                "ld.lld -shared",
                         m->nsegments == 0 ? "PT_LOAD segment" : "PT_DYNAMIC segment");
        return -1;
    }
    return 0;
}

/* -- the image: one region holding every segment ------------------------------------------ */

static uintptr_t page_down(uintptr_t v) { return v & ~(loom_page_size - 1); }
static uintptr_t page_up(uintptr_t v) { return page_down(v + loom_page_size - 1); }

static int map_image(module *m, const uint8_t *file, loom_text *error) {
    uintptr_t lo = UINTPTR_MAX, hi = 0, alignment = loom_page_size;
    for (int i = 0; i < m->nsegments; ++i) {
        const segment *s = &m->segments[i];
        if (s->vaddr < lo) lo = s->vaddr;
        if (s->vaddr + s->memsz > hi) hi = s->vaddr + s->memsz;
        /* keep the linker's segment alignment (code may rely on it), up to a sane cap */
        while (alignment < s->align && alignment < MAX_REGION_ALIGNMENT) alignment <<= 1;
    }
    lo = page_down(lo);
    if (hi - lo > MAX_IMAGE_BYTES) {
        loom_text_format(error, "module's segments span %u bytes, more than the %u-byte limit",
                         (uint64_t)(hi - lo), (uint64_t)MAX_IMAGE_BYTES);
        return -1;
    }
    m->region_size = page_up(hi - lo);
    m->region = loom_map_aligned(m->region_size, alignment);
    if (!m->region) {
        loom_text_format(error, "cannot map %u bytes for the module", (uint64_t)m->region_size);
        return -1;
    }
    m->bias = (uintptr_t)m->region - lo;
    /* the mapping is zero-filled: copying the file bytes leaves each segment's tail zero */
    for (int i = 0; i < m->nsegments; ++i) {
        const segment *s = &m->segments[i];
        memcpy((void *)(m->bias + s->vaddr), file + s->offset, s->filesz);
    }
    return 0;
}

/* -- protection --------------------------------------------------------------------------- */

static int prot_of(uint32_t flags) {
    return (flags & PF_R ? LOOM_PROT_READ : 0) | (flags & PF_W ? LOOM_PROT_WRITE : 0) |
           (flags & PF_X ? LOOM_PROT_EXEC : 0);
}

/* Each page gets the union of the protections of the segments on it (segments linked for a
 * smaller page size than the device's share pages); pages between segments get none, so a
 * stray access there faults. The region is cut at every segment's page boundaries, and each
 * piece between two cuts is protected once. */
static int protect(module *m, loom_text *error) {
    uintptr_t cuts[2 * MAX_SEGMENTS + 2];
    int ncuts = 0;
    cuts[ncuts++] = (uintptr_t)m->region;
    cuts[ncuts++] = (uintptr_t)m->region + m->region_size;
    for (int i = 0; i < m->nsegments; ++i) {
        cuts[ncuts++] = page_down(m->bias + m->segments[i].vaddr);
        cuts[ncuts++] = page_up(m->bias + m->segments[i].vaddr + m->segments[i].memsz);
    }
    for (int i = 1; i < ncuts; ++i) /* insertion sort: a handful of cuts */
        for (int j = i; j > 0 && cuts[j - 1] > cuts[j]; --j) {
            uintptr_t t = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = t;
        }
    int status = 0;
    for (int k = 0; k + 1 < ncuts; ++k) {
        uintptr_t lo = cuts[k], hi = cuts[k + 1];
        if (lo == hi) continue;
        uint32_t flags = 0;
        for (int i = 0; i < m->nsegments; ++i) {
            const segment *s = &m->segments[i];
            if (page_down(m->bias + s->vaddr) < hi && page_up(m->bias + s->vaddr + s->memsz) > lo)
                flags |= s->flags;
        }
        status |= loom_protect((void *)lo, hi - lo, prot_of(flags));
    }
    if (status != 0) loom_text_format(error, "cannot set the protection of the module's pages");
    return status;
}

/* -- the module table --------------------------------------------------------------------- */

static module *find_module(uint32_t id, loom_text *error) {
    for (int i = 0; id != 0 && i < MAX_MODULES; ++i)
        if (modules[i].id == id) return &modules[i];
    if (error) loom_text_format(error, "no module %u is loaded", (uint64_t)id);
    return 0;
}

uint32_t loom_module_load(const uint8_t *file, uint64_t size, loom_text *error) {
    module *slot = 0;
    for (int i = 0; i < MAX_MODULES && !slot; ++i)
        if (modules[i].id == 0) slot = &modules[i];
    if (!slot) {
        loom_text_format(error, "%u modules are loaded, the most the runtime holds; unload one",
                         (uint64_t)MAX_MODULES);
        return 0;
    }
    module m;
    memset(&m, 0, sizeof m);
    if (read_headers(&m, file, size, error) != 0) return 0;
    if (map_image(&m, file, error) != 0) return 0;
    if (loom_link_module(&m, error) != 0 || protect(&m, error) != 0) {
        loom_unmap(m.region, m.region_size);
        return 0;
    }
    m.id = next_id++;
    *slot = m;
    return m.id;
}

int loom_module_unload(uint32_t id, loom_text *error) {
    module *m = find_module(id, error);
    if (!m) return -1;
    loom_unmap(m->region, m->region_size);
    memset(m, 0, sizeof *m);
    return 0;
}

uint64_t loom_module_lookup(uint32_t id, const void *name, uint64_t n, loom_text *error) {
    module *m = find_module(id, error);
    if (!m) return 0;
    uint64_t address = loom_find_function(m, name, n);
    if (address == 0)
        loom_text_format(error, "module %u has no function '%b'", (uint64_t)id, name, n);
    return address;
}

/* 1 if [address, address + n) lies in a segment of a loaded module with all of `flags`. The
 * file's address is the runtime address minus the bias, modulo the word size, as the bias may
 * have wrapped. */
static int in_any_module(uint64_t address, uint64_t n, uint32_t flags) {
    if (address > UINTPTR_MAX) return 0;
    for (int i = 0; i < MAX_MODULES; ++i) {
        const module *m = &modules[i];
        if (m->id != 0 && loom_segment_at(m, (uintptr_t)address - m->bias, n, flags, 1)) return 1;
    }
    return 0;
}

int loom_module_is_code(uint64_t address) { return in_any_module(address, 1, PF_X); }

int loom_module_readable(uint64_t address, uint64_t n) {
    return in_any_module(address, n, PF_R);
}
