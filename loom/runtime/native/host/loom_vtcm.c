/* VTCM on the host: HexagonBackendAllocateVTCM / HexagonBackendFreeVTCM over an aligned arena
 * of $LOOM_VTCM_SIZE bytes (default 256 KiB, v66's VTCM; 1 byte to 1 GiB), so programs that
 * place buffers in local.vtcm run on the host too. Capacity and alignment are enforced as on
 * the device. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../common/loom_arena.h"

void loom_set_last_error(const char *message);
int loom_env_integer(const char *name, long long lo, long long hi, long long fallback,
                     long long *value, char *message, size_t size);

#define DEFAULT_VTCM_BYTES (256u * 1024u)
#define MAX_VTCM_BYTES (1ll << 30)
#define VTCM_REGION_ALIGNMENT 4096

static pthread_mutex_t vtcm_lock = PTHREAD_MUTEX_INITIALIZER;
static loom_arena vtcm;
static void *vtcm_memory;
static int vtcm_ready;

static int vtcm_setup(uint64_t capacity) {
    void *memory = NULL;
    if (posix_memalign(&memory, VTCM_REGION_ALIGNMENT, capacity ? capacity : 1) != 0) return -1;
    free(vtcm_memory);
    vtcm_memory = memory;
    loom_arena_init(&vtcm, memory, capacity);
    vtcm_ready = 1;
    return 0;
}

static void vtcm_ensure(void) {
    if (vtcm_ready) return;
    long long size;
    char message[256];
    if (loom_env_integer("LOOM_VTCM_SIZE", 1, MAX_VTCM_BYTES, DEFAULT_VTCM_BYTES, &size, message,
                         sizeof message) != 0)
        fprintf(stderr, "loom: %s; using %lld bytes\n", message, size);
    vtcm_setup((uint64_t)size);
}

/* 0 if $LOOM_VTCM_SIZE is unset or valid, else -1 and why. */
int32_t loom_vtcm_check_environment(char *message, int32_t size) {
    long long bytes;
    return loom_env_integer("LOOM_VTCM_SIZE", 1, MAX_VTCM_BYTES, DEFAULT_VTCM_BYTES, &bytes,
                            message, (size_t)size) != 0
               ? -1
               : 0;
}

void *loom_vtcm_alloc(uint32_t nbytes, uint32_t alignment) {
    pthread_mutex_lock(&vtcm_lock);
    vtcm_ensure();
    void *p = loom_arena_alloc(&vtcm, nbytes, alignment);
    if (!p) {
        char message[256];
        snprintf(message, sizeof message,
                 "VTCM: cannot allocate %u bytes aligned to %u (capacity %llu, in use %llu, "
                 "largest free block %llu)", nbytes, alignment,
                 (unsigned long long)vtcm.capacity, (unsigned long long)vtcm.in_use,
                 (unsigned long long)loom_arena_largest_free(&vtcm));
        loom_set_last_error(message);
    }
    pthread_mutex_unlock(&vtcm_lock);
    return p;
}

int32_t loom_vtcm_free(void *p) {
    pthread_mutex_lock(&vtcm_lock);
    vtcm_ensure();
    int status = loom_arena_free(&vtcm, p);
    pthread_mutex_unlock(&vtcm_lock);
    if (status != 0) loom_set_last_error("VTCM: free of a pointer that is not an allocated block");
    return status;
}

void *HexagonBackendAllocateVTCM(uint32_t nbytes, uint32_t alignment) {
    return loom_vtcm_alloc(nbytes, alignment);
}

int32_t HexagonBackendFreeVTCM(void *p) { return loom_vtcm_free(p); }

/* Statistics (see loom_arena.h for the order); returns the number written. */
int32_t loom_vtcm_stats(int64_t *out, int32_t n) {
    int64_t all[LOOM_ARENA_NSTATS];
    pthread_mutex_lock(&vtcm_lock);
    vtcm_ensure();
    loom_arena_stats(&vtcm, all);
    pthread_mutex_unlock(&vtcm_lock);
    if (n > LOOM_ARENA_NSTATS) n = LOOM_ARENA_NSTATS;
    for (int i = 0; i < n; ++i) out[i] = all[i];
    return n;
}

/* A new, empty arena of `capacity` bytes (statistics reset); refused while blocks are live. */
int32_t loom_vtcm_configure(int64_t capacity) {
    int32_t status = 0;
    pthread_mutex_lock(&vtcm_lock);
    vtcm_ensure();
    if (capacity <= 0 || vtcm.in_use != 0) {
        loom_set_last_error(capacity <= 0 ? "VTCM: capacity must be positive"
                                          : "VTCM: cannot reconfigure while blocks are allocated");
        status = -1;
    } else if (vtcm_setup((uint64_t)capacity) != 0) {
        loom_set_last_error("VTCM: cannot allocate the arena");
        status = -1;
    }
    pthread_mutex_unlock(&vtcm_lock);
    return status;
}
