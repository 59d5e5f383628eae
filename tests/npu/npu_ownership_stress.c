/* Four threads take turns on the one simulated NPU: each acquires it, runs a 16x16x16 product
 * (mvin, preload, compute, mvout), checks its own result and releases. Built with
 * -fsanitize=thread by test_npu_simulator.py: an instruction sequence that is not ordered by
 * npu_acquire/npu_release against another thread's is reported as a race. */
#include <stdio.h>
#include <string.h>

#include "npu_sim.h"
#include "stress_threads.h"

#define THREADS 4
#define ROUNDS 500

void loom_set_last_error(const char *message) { fprintf(stderr, "npu: %s\n", message); }

static void *run(void *arg) {
    long id = (long)arg;
    int8_t a[NPU_DIM][NPU_DIM], b[NPU_DIM][NPU_DIM], c[NPU_DIM][NPU_DIM];
    memset(a, (int)id + 1, sizeof a);
    memset(b, 1, sizeof b);
    for (int round = 0; round < ROUNDS; ++round) {
        if (npu_acquire() != 0) return arg;
        int failed = npu_config_ld(NPU_DIM) ||
                     npu_config_st(NPU_DIM, 1, 0, 0, NPU_ROUND_HALF_UP) ||
                     npu_mvin(a, 0, NPU_DIM, NPU_DIM) || npu_mvin(b, NPU_DIM, NPU_DIM, NPU_DIM) ||
                     npu_preload(NPU_DIM, NPU_DIM, NPU_DIM, NPU_ACC_BASE, NPU_DIM, NPU_DIM, 0) ||
                     npu_compute(0, NPU_DIM, NPU_DIM) ||
                     npu_mvout(c, NPU_ACC_BASE, NPU_DIM, NPU_DIM) || npu_fence();
        /* every element is the sum of 16 products (id + 1) * 1 */
        failed = failed || c[3][5] != (int8_t)(NPU_DIM * (id + 1));
        if (npu_release() != 0 || failed) return arg;
    }
    return NULL;
}

int main(void) {
    int failures = run_threads(run, THREADS);
    int64_t counters[NPU_NCOUNTERS];
    npu_read_counters(counters);
    printf("failures %d macs %lld\n", failures, (long long)counters[NPU_COUNTER_MACS]);
    return failures != 0;
}
