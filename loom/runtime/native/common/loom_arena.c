#include "loom_arena.h"

static void remove_block(loom_arena *a, int i) {
    for (int k = i; k + 1 < a->nblocks; ++k) a->blocks[k] = a->blocks[k + 1];
    a->nblocks--;
}

static int insert_block(loom_arena *a, int i, uint64_t offset, uint64_t size, int used) {
    if (a->nblocks >= LOOM_ARENA_MAX_BLOCKS) return -1;
    for (int k = a->nblocks; k > i; --k) a->blocks[k] = a->blocks[k - 1];
    a->blocks[i].offset = offset;
    a->blocks[i].size = size;
    a->blocks[i].used = used;
    a->nblocks++;
    return 0;
}

void loom_arena_init(loom_arena *a, void *base, uint64_t capacity) {
    a->base = (uint8_t *)base;
    a->capacity = capacity;
    a->nblocks = 1;
    a->blocks[0].offset = 0;
    a->blocks[0].size = capacity;
    a->blocks[0].used = 0;
    a->in_use = a->peak = a->allocations = a->frees = a->failures = 0;
}

void *loom_arena_alloc(loom_arena *a, uint64_t nbytes, uint64_t alignment) {
    if (nbytes == 0) nbytes = 1;
    if (alignment == 0 || (alignment & (alignment - 1))) alignment = 1;
    for (int i = 0; i < a->nblocks; ++i) {
        loom_arena_block b = a->blocks[i];
        if (b.used) continue;
        uint64_t address = (uint64_t)(uintptr_t)(a->base + b.offset);
        uint64_t pad = (alignment - address % alignment) % alignment;
        if (pad + nbytes > b.size) continue;
        /* a free block becomes [pad][used nbytes][rest]; each split needs a table entry */
        int needed = (pad > 0) + (b.size - pad - nbytes > 0);
        if (a->nblocks + needed > LOOM_ARENA_MAX_BLOCKS) break;
        int at = i;
        remove_block(a, i);
        if (pad > 0) insert_block(a, at++, b.offset, pad, 0);
        insert_block(a, at++, b.offset + pad, nbytes, 1);
        if (b.size - pad - nbytes > 0)
            insert_block(a, at, b.offset + pad + nbytes, b.size - pad - nbytes, 0);
        a->in_use += nbytes;
        if (a->in_use > a->peak) a->peak = a->in_use;
        a->allocations++;
        return a->base + b.offset + pad;
    }
    a->failures++;
    return 0;
}

int loom_arena_free(loom_arena *a, void *p) {
    uint8_t *q = (uint8_t *)p;
    if (q < a->base || q >= a->base + a->capacity) return -1;
    uint64_t offset = (uint64_t)(q - a->base);
    for (int i = 0; i < a->nblocks; ++i) {
        if (a->blocks[i].offset != offset || !a->blocks[i].used) continue;
        a->blocks[i].used = 0;
        a->in_use -= a->blocks[i].size;
        a->frees++;
        if (i + 1 < a->nblocks && !a->blocks[i + 1].used) {
            a->blocks[i].size += a->blocks[i + 1].size;
            remove_block(a, i + 1);
        }
        if (i > 0 && !a->blocks[i - 1].used) {
            a->blocks[i - 1].size += a->blocks[i].size;
            remove_block(a, i);
        }
        return 0;
    }
    return -1;
}

uint64_t loom_arena_largest_free(const loom_arena *a) {
    uint64_t best = 0;
    for (int i = 0; i < a->nblocks; ++i)
        if (!a->blocks[i].used && a->blocks[i].size > best) best = a->blocks[i].size;
    return best;
}

void loom_arena_stats(const loom_arena *a, int64_t out[LOOM_ARENA_NSTATS]) {
    int live = 0;
    for (int i = 0; i < a->nblocks; ++i) live += a->blocks[i].used;
    out[LOOM_ARENA_CAPACITY] = (int64_t)a->capacity;
    out[LOOM_ARENA_IN_USE] = (int64_t)a->in_use;
    out[LOOM_ARENA_PEAK] = (int64_t)a->peak;
    out[LOOM_ARENA_ALLOCATIONS] = (int64_t)a->allocations;
    out[LOOM_ARENA_FREES] = (int64_t)a->frees;
    out[LOOM_ARENA_FAILURES] = (int64_t)a->failures;
    out[LOOM_ARENA_LIVE_BLOCKS] = live;
    out[LOOM_ARENA_LARGEST_FREE] = (int64_t)loom_arena_largest_free(a);
}
