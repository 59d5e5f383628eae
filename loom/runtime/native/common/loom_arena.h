/* First-fit allocation of aligned blocks inside one memory region, with statistics.
 * Freestanding (no libc, no locks): the host runtime and the device runtimes both use it and
 * serialize calls themselves. */
#ifndef LOOM_ARENA_H
#define LOOM_ARENA_H
#include <stdint.h>

#define LOOM_ARENA_MAX_BLOCKS 512

typedef struct {
    uint64_t offset;
    uint64_t size;
    int used;
} loom_arena_block;

typedef struct {
    uint8_t *base;
    uint64_t capacity;
    int nblocks;
    loom_arena_block blocks[LOOM_ARENA_MAX_BLOCKS]; /* sorted by offset, covering the region */
    uint64_t in_use, peak, allocations, frees, failures;
} loom_arena;

/* Statistics in the order of loom_arena_stats' output array. */
enum { LOOM_ARENA_CAPACITY, LOOM_ARENA_IN_USE, LOOM_ARENA_PEAK, LOOM_ARENA_ALLOCATIONS,
       LOOM_ARENA_FREES, LOOM_ARENA_FAILURES, LOOM_ARENA_LIVE_BLOCKS, LOOM_ARENA_LARGEST_FREE,
       LOOM_ARENA_NSTATS };

void loom_arena_init(loom_arena *a, void *base, uint64_t capacity);
/* A block of nbytes whose address is a multiple of alignment (a power of two), or NULL. */
void *loom_arena_alloc(loom_arena *a, uint64_t nbytes, uint64_t alignment);
/* 0, or -1 if p is not the start of an allocated block. */
int loom_arena_free(loom_arena *a, void *p);
uint64_t loom_arena_largest_free(const loom_arena *a);
void loom_arena_stats(const loom_arena *a, int64_t out[LOOM_ARENA_NSTATS]);
#endif
