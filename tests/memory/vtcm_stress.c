/* Four threads allocate, fill and free blocks of the host's VTCM arena at once. Built with
 * -fsanitize=thread by test_memory_scopes.py: allocator state touched outside its lock is
 * reported as a race. Prints the arena statistics (loom_arena.h order) at the end. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "stress_threads.h"

#define THREADS 4
#define ROUNDS 5000

void *HexagonBackendAllocateVTCM(uint32_t nbytes, uint32_t alignment);
int32_t HexagonBackendFreeVTCM(void *p);
int32_t loom_vtcm_stats(int64_t *out, int32_t n);

static void *run(void *arg) {
    for (int round = 0; round < ROUNDS; ++round) {
        uint32_t nbytes = 1024 + (uint32_t)(round % 7) * 128;
        uint8_t *p = HexagonBackendAllocateVTCM(nbytes, 128);
        if (!p || (uintptr_t)p % 128 != 0) return arg;
        memset(p, round, nbytes);
        if (HexagonBackendFreeVTCM(p) != 0) return arg;
    }
    return NULL;
}

int main(void) {
    int failures = run_threads(run, THREADS);
    int64_t stats[16];
    int n = loom_vtcm_stats(stats, 16);
    printf("failures %d stats", failures);
    for (int i = 0; i < n; ++i) printf(" %lld", (long long)stats[i]);
    printf("\n");
    return failures != 0;
}
