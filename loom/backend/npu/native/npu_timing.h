/* The NPU's decoupled timing model (docs/npu.md, "Cycle model"), internal to the simulator.
 *
 * Instructions run in three queues, each in order: load (mvin, config_ld), execute (preload,
 * compute, config_ex) and store (mvout, config_st). An instruction waits for every earlier
 * instruction of ANOTHER queue whose footprint conflicts with its own (one writes what the
 * other reads or writes); fence waits for everything. The simulator executes each instruction
 * at once, in program order, and asks this model when it would have started and finished. */
#ifndef LOOM_NPU_TIMING_H
#define LOOM_NPU_TIMING_H

#include <stdint.h>

enum npu_queue { QUEUE_LOAD, QUEUE_EXECUTE, QUEUE_STORE, NQUEUES };

enum npu_access { ACCESS_READ = 1, ACCESS_WRITE = 2 };

enum npu_timed_memory { TIMED_SCRATCHPAD, TIMED_ACCUMULATOR };

/* Rows of one NPU memory an instruction reads and/or writes. */
struct npu_rows_touched {
    enum npu_timed_memory memory;
    int32_t first, count;
    int access; /* ACCESS_READ | ACCESS_WRITE */
};

/* Everything an instruction touches: up to two row ranges and one DRAM byte range. */
struct npu_footprint {
    struct npu_rows_touched rows[2];
    int nrows;
    uintptr_t dram_lo, dram_hi; /* bytes [lo, hi); empty when lo == hi */
    int dram_access;
};

void npu_timing_reset(void);

/* Each returns the instruction's finish time; `cost` is its duration. */
int64_t npu_timing_load_store(enum npu_queue queue, const struct npu_footprint *f, int64_t cost);
int64_t npu_timing_preload(const struct npu_footprint *f);
int64_t npu_timing_compute(const struct npu_footprint *f, int32_t a_rows);
int64_t npu_timing_config_ex(void);
int64_t npu_timing_fence(void);

/* The latest finish of any instruction so far (the `cycles` counter). */
int64_t npu_timing_latest(void);

#endif /* LOOM_NPU_TIMING_H */
