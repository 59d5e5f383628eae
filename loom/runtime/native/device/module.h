/* A loaded module, shared by the loader's two halves: loader.c maps the file into memory and
 * keeps the table of modules; dynamic.c reads the dynamic section, applies the relocations and
 * looks symbols up. */
#ifndef LOOM_DEVICE_MODULE_H
#define LOOM_DEVICE_MODULE_H
#include "device.h"
#include "elf.h"

#define MAX_SEGMENTS 16
#define MAX_IMAGE_BYTES (256u * 1024u * 1024u)

/* A PT_LOAD segment, checked against the file and the image limit. */
typedef struct {
    uintptr_t vaddr, memsz; /* in the file's address space; runtime address = bias + vaddr */
    uintptr_t offset, filesz, align;
    uint32_t flags; /* PF_R | PF_W | PF_X */
} segment;

typedef struct {
    uint32_t id; /* 0: a free slot */
    uint8_t *region;
    uintptr_t region_size;
    uintptr_t bias;
    segment segments[MAX_SEGMENTS];
    int nsegments;
    uintptr_t dynamic_vaddr, dynamic_size; /* PT_DYNAMIC */
    const Elf_Sym *symtab;
    uint32_t nsyms;
    const char *strtab;
    uintptr_t strsz;
    const uint32_t *buckets, *chains;
    uint32_t nbucket;
} module;

/* The runtime address of [vaddr, vaddr + n) if it lies inside one segment that has all of
 * `flags` and is aligned to `alignment`, else NULL. */
void *loom_segment_at(const module *m, uint64_t vaddr, uint64_t n, uint32_t flags,
                      uintptr_t alignment);
/* Read the dynamic section of a mapped module and apply its relocations; 0 or -1. */
int loom_link_module(module *m, loom_text *error);
/* The address of the function `name` (n bytes) the module defines, or 0. */
uint64_t loom_find_function(const module *m, const void *name, uint64_t n);
#endif
