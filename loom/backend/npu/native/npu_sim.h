/* The reference NPU (docs/npu.md): its parameters, its instructions and the simulator's
 * control functions. The simulator (npu_sim.c) and a vendor's library provide the same
 * instruction symbols, so code generated for the NPU links against either.
 *
 * Every instruction returns 0, or -1 after setting loom's last error; a failed instruction
 * changes nothing (memories, configuration, pending preload, counters). */
#ifndef LOOM_NPU_SIM_H
#define LOOM_NPU_SIM_H

#include <stdint.h>

/* The systolic array is NPU_DIM x NPU_DIM; a memory row holds NPU_DIM elements. */
#define NPU_DIM 16
#define NPU_SPAD_ROWS 16384 /* int8 rows: scratchpad addresses 0 .. NPU_SPAD_ROWS - 1 */
#define NPU_ACC_ROWS 1024   /* int32 rows: addresses NPU_ACC_BASE + 0 .. NPU_ACC_ROWS - 1 */
#define NPU_ACC_BASE 0x80000000u /* bit 31 selects the accumulator, as in Gemmini */

/* The cycle model's parameters (docs/npu.md, "Cycle model"). */
#define NPU_BANDWIDTH 16 /* DRAM bytes per cycle */
#define NPU_LOAD_LATENCY 8
#define NPU_STORE_LATENCY 8

/* The only dataflow. */
#define NPU_DATAFLOW_WS 0

/* mvout's rounding of x * multiplier / 2^shift (npu_config_st's `rounding`): halves up
 * (toward +infinity, the default) or halves to the even neighbour (as ONNX specifies). */
#define NPU_ROUND_HALF_UP 0
#define NPU_ROUND_HALF_EVEN 1

/* npu_config_st's largest shift: x * multiplier (|.| < 2^62) plus 2^(shift - 1) stays in
 * int64, and every float32 scale ratio down to 2^-39 is exactly multiplier / 2^shift. */
#define NPU_MAX_SHIFT 62

/* Indices into npu_read_counters' output, in the documented order. */
#define NPU_COUNTER_CYCLES 0
#define NPU_COUNTER_BYTES_IN 1
#define NPU_COUNTER_BYTES_OUT 2
#define NPU_COUNTER_MACS 3
#define NPU_COUNTER_MVIN 4
#define NPU_COUNTER_MVOUT 5
#define NPU_COUNTER_PRELOAD 6
#define NPU_COUNTER_COMPUTE 7
#define NPU_COUNTER_CONFIG 8
#define NPU_COUNTER_FENCE 9
#define NPU_COUNTER_SERIAL_CYCLES 10 /* the sum of the instructions' costs */
#define NPU_COUNTER_LOAD_BUSY 11     /* the sum of the load queue's costs */
#define NPU_COUNTER_EXECUTE_BUSY 12  /* rows streamed into the array (sum of a_rows) */
#define NPU_COUNTER_STORE_BUSY 13    /* the sum of the store queue's costs */
#define NPU_NCOUNTERS 14

/* Indices into npu_read_config's output. */
#define NPU_CONFIG_STRIDE_LD 0
#define NPU_CONFIG_STRIDE_ST 1
#define NPU_CONFIG_MULTIPLIER 2
#define NPU_CONFIG_SHIFT 3
#define NPU_CONFIG_RELU 4
#define NPU_CONFIG_DATAFLOW 5
#define NPU_CONFIG_ROUNDING 6
#define NPU_NCONFIG 7

/* Instructions. */
int32_t npu_config_ld(int32_t stride);
int32_t npu_config_st(int32_t stride, int32_t multiplier, int32_t shift, int32_t relu,
                      int32_t rounding);
int32_t npu_config_ex(int32_t dataflow);
int32_t npu_mvin(const void *dram, uint32_t addr, int32_t rows, int32_t cols);
int32_t npu_mvout(void *dram, uint32_t addr, int32_t rows, int32_t cols);
int32_t npu_preload(uint32_t b, int32_t b_rows, int32_t b_cols, uint32_t c, int32_t c_rows,
                    int32_t c_cols, int32_t accumulate);
int32_t npu_compute(uint32_t a, int32_t a_rows, int32_t a_cols);
int32_t npu_fence(void);

/* Ownership of the NPU: there is one, and a kernel's instruction sequence must not interleave
 * with another's. npu_acquire waits until no other thread owns it; npu_release (by the owner
 * only) lets the next one in. */
int32_t npu_acquire(void);
int32_t npu_release(void);

/* Simulator control (not instructions). */
void npu_reset(void);
void npu_read_counters(int64_t out[NPU_NCOUNTERS]);
void npu_read_config(int32_t out[NPU_NCONFIG]);
int32_t npu_read_memory(uint32_t addr, int32_t rows, void *out);

#endif /* LOOM_NPU_SIM_H */
