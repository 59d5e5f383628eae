/* The device's two memories: the heap (loom_alloc, ALLOC memory 0) and the VTCM (the Hexagon
 * allocators, ALLOC memory 1). Each is one anonymous mapping managed by the first-fit
 * loom_arena, so STATS reports the same statistics as the host's VTCM emulation, and READ and
 * WRITE can check that an address range lies inside one allocated block.
 *
 * The VTCM region is aligned to its size rounded up to a power of two (capped, at least 2048),
 * as real VTCM is, so an alignment up to that is honoured without wasting the region. */
#include "device.h"

#define VTCM_MIN_ALIGNMENT 2048u
#define VTCM_MAX_ALIGNMENT (16u * 1024u * 1024u)

static loom_arena heap, vtcm;

int loom_regions_init(uint64_t heap_bytes, uint64_t vtcm_bytes, loom_text *error) {
    if (heap_bytes == 0 || vtcm_bytes == 0 || heap_bytes > UINTPTR_MAX / 2 ||
        vtcm_bytes > UINTPTR_MAX / 2) {
        loom_text_format(error, "region sizes must be positive and fit the address space "
                                "(heap %u, VTCM %u bytes)", heap_bytes, vtcm_bytes);
        return -1;
    }
    uintptr_t vtcm_alignment = VTCM_MIN_ALIGNMENT;
    while (vtcm_alignment < vtcm_bytes && vtcm_alignment < VTCM_MAX_ALIGNMENT)
        vtcm_alignment <<= 1;
    void *h = loom_map_aligned((uintptr_t)heap_bytes, loom_page_size);
    void *v = loom_map_aligned((uintptr_t)vtcm_bytes, vtcm_alignment);
    if (!h || !v) {
        loom_text_format(error, "cannot map the %s region (%u bytes)", h ? "VTCM" : "heap",
                         h ? vtcm_bytes : heap_bytes);
        return -1;
    }
    loom_arena_init(&heap, h, heap_bytes);
    loom_arena_init(&vtcm, v, vtcm_bytes);
    return 0;
}

const loom_arena *loom_region_arena(int memory) {
    return memory == LOOM_MEMORY_VTCM ? &vtcm : &heap;
}

static const char *region_name(int memory) { return memory == LOOM_MEMORY_VTCM ? "VTCM" : "heap"; }

void *loom_region_alloc(int memory, uint64_t nbytes, uint64_t alignment, loom_text *error) {
    loom_arena *a = memory == LOOM_MEMORY_VTCM ? &vtcm : &heap;
    /* a size from the wire may be near 2**64, where the arena's arithmetic would wrap */
    void *p = 0;
    if (nbytes <= a->capacity)
        p = loom_arena_alloc(a, nbytes, alignment);
    else
        a->failures++;
    if (!p && error) {
        /* the shape of the host's message (loom_vtcm.c), so errors read the same everywhere */
        loom_text_format(error,
                         "%s: cannot allocate %u bytes aligned to %u (capacity %u, in use %u, "
                         "largest free block %u)",
                         region_name(memory), nbytes, alignment, a->capacity, a->in_use,
                         loom_arena_largest_free(a));
    }
    return p;
}

int loom_region_free(int memory, uint64_t address, loom_text *error) {
    loom_arena *a = memory == LOOM_MEMORY_VTCM ? &vtcm : &heap;
    if (address > UINTPTR_MAX || loom_arena_free(a, (void *)(uintptr_t)address) != 0) {
        if (error)
            loom_text_format(error, "%s: free of %x, which is not an allocated block",
                             region_name(memory), address);
        return -1;
    }
    return 0;
}

static int inside_block(const loom_arena *a, uint64_t address, uint64_t n) {
    uint64_t base = (uint64_t)(uintptr_t)a->base;
    if (address < base || address - base > a->capacity) return 0;
    uint64_t offset = address - base;
    for (int i = 0; i < a->nblocks; ++i) {
        const loom_arena_block *b = &a->blocks[i];
        if (b->used && offset >= b->offset && offset - b->offset <= b->size &&
            n <= b->size - (offset - b->offset))
            return 1;
    }
    return 0;
}

int loom_region_allocated(uint64_t address, uint64_t n) {
    return inside_block(&heap, address, n) || inside_block(&vtcm, address, n);
}

/* -- the exported allocators -------------------------------------------------------------- */

void *loom_alloc(int64_t nbytes, int64_t alignment) {
    char buffer[256];
    loom_text message;
    if (alignment < (int64_t)sizeof(void *)) alignment = sizeof(void *);
    if (nbytes <= 0) nbytes = 1;
    if (alignment & (alignment - 1)) {
        loom_set_last_errorf("loom_alloc: alignment %d is not a power of two", alignment);
        return 0;
    }
    loom_text_init(&message, buffer, sizeof buffer);
    void *p = loom_region_alloc(LOOM_MEMORY_HEAP, (uint64_t)nbytes, (uint64_t)alignment,
                                &message);
    if (!p) loom_set_last_error(buffer);
    return p;
}

/* Like free(): NULL is allowed, and a pointer that is not a block is ignored (it cannot be
 * reported: loom_free returns nothing). */
void loom_free(void *p) {
    if (p) loom_arena_free(&heap, p);
}

void *loom_vtcm_alloc(uint32_t nbytes, uint32_t alignment) {
    char buffer[256];
    loom_text message;
    loom_text_init(&message, buffer, sizeof buffer);
    void *p = loom_region_alloc(LOOM_MEMORY_VTCM, nbytes, alignment, &message);
    if (!p) loom_set_last_error(buffer);
    return p;
}

int32_t loom_vtcm_free(void *p) {
    if (loom_arena_free(&vtcm, p) != 0) {
        loom_set_last_error("VTCM: free of a pointer that is not an allocated block");
        return -1;
    }
    return 0;
}

void *HexagonBackendAllocateVTCM(uint32_t nbytes, uint32_t alignment) {
    return loom_vtcm_alloc(nbytes, alignment);
}

int32_t HexagonBackendFreeVTCM(void *p) { return loom_vtcm_free(p); }
