/* The reference NPU's simulator (docs/npu.md): bit exact, and cycle counting.
 *
 * The instructions take no handle, so the NPU is one per process and its state is static.
 * Each instruction checks every operand before it changes anything: a failed instruction
 * returns -1 with loom's last error set, and leaves the memories, the configuration, a
 * pending preload, the counters and the timing model as they were. Each instruction executes
 * at once, in program order; the decoupled timing model (npu_timing.c) says when it would
 * have started and finished, given what it touches and its cost (the latencies and bandwidth
 * of npu_sim.h). */
#include "npu_sim.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "npu_timing.h"

void loom_set_last_error(const char *message); /* loom's host runtime, resolved at load */

static int8_t spad[NPU_SPAD_ROWS][NPU_DIM];
static int32_t acc[NPU_ACC_ROWS][NPU_DIM];

/* What config_ld, config_st and config_ex set; the last values apply. */
struct npu_config {
    int32_t stride_ld, stride_st, multiplier, shift, relu, dataflow, rounding;
};
/* Before any config instruction (and after npu_reset): mvout requantizes as the identity
 * (then saturates), so the multiplier is 1, not 0; halves round up. */
#define DEFAULT_CONFIG {0, 0, 1, 0, 0, NPU_DATAFLOW_WS, NPU_ROUND_HALF_UP}
static struct npu_config config = DEFAULT_CONFIG;

/* What a preload leaves for the compute after it. A compute consumes it, so every compute
 * needs a preload of its own. */
static struct {
    int pending;
    int8_t weights[NPU_DIM][NPU_DIM]; /* W: a copy taken at preload, zero outside b_rows x b_cols */
    int32_t b_rows;                   /* for the macs counter */
    int32_t c_row, c_rows, c_cols;    /* output rows: accumulator row index, count, width */
    int32_t accumulate;
} preloaded;

static int64_t counters[NPU_NCOUNTERS];

/* -- errors ---------------------------------------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2))) /* the compiler checks every message's arguments */
#endif
static int32_t fail(const char *format, ...) {
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    loom_set_last_error(message);
    return -1;
}

/* 0 if lo <= value <= hi, else -1 and "insn: name = value is outside lo .. hi". */
static int32_t check_value(const char *insn, const char *name, int32_t value, int32_t lo,
                           int32_t hi) {
    if (value >= lo && value <= hi) return 0;
    return fail("%s: %s = %d is outside %d .. %d", insn, name, (int)value, (int)lo, (int)hi);
}

/* -- memories -------------------------------------------------------------------------- */

enum npu_memory { SCRATCHPAD = 1, ACCUMULATOR = 2, EITHER = SCRATCHPAD | ACCUMULATOR };

static enum npu_memory memory_of(uint32_t addr) {
    return (addr & NPU_ACC_BASE) ? ACCUMULATOR : SCRATCHPAD;
}

static const char *memory_name(enum npu_memory m) {
    return m == ACCUMULATOR ? "accumulator" : "scratchpad";
}

static int32_t memory_rows(enum npu_memory m) {
    return m == ACCUMULATOR ? NPU_ACC_ROWS : NPU_SPAD_ROWS;
}

static uint32_t memory_base(enum npu_memory m) { return m == ACCUMULATOR ? NPU_ACC_BASE : 0; }

/* Check that `addr` is in a memory `allowed` and names one of its rows, and that the rows
 * addr .. addr + rows - 1 exist (rows >= 0 is checked before). The start must name a row even
 * when rows is 0, so that a wrong address is caught however little it moves. On success,
 * *row is the index of the first row in its memory. */
static int32_t check_rows(const char *insn, const char *operand, uint32_t addr, int32_t rows,
                          enum npu_memory allowed, int32_t *row) {
    enum npu_memory m = memory_of(addr);
    uint32_t index = addr - memory_base(m);
    int32_t size = memory_rows(m);
    if (!(m & allowed)) {
        enum npu_memory want = allowed & ~m;
        return fail("%s: %s = 0x%08x is an address in the %s; it must be in the %s "
                    "(0x%08x .. 0x%08x)",
                    insn, operand, (unsigned)addr, memory_name(m), memory_name(want),
                    (unsigned)memory_base(want),
                    (unsigned)(memory_base(want) + (uint32_t)memory_rows(want) - 1));
    }
    if (index >= (uint32_t)size)
        return fail("%s: %s = 0x%08x is %s row %u, outside 0 .. %d", insn, operand,
                    (unsigned)addr, memory_name(m), (unsigned)index, (int)(size - 1));
    if ((int64_t)index + rows > size)
        return fail("%s: %s = 0x%08x with %d rows reaches %s row %lld, outside 0 .. %d", insn,
                    operand, (unsigned)addr, (int)rows, memory_name(m),
                    (long long)index + rows - 1, (int)(size - 1));
    *row = (int32_t)index;
    return 0;
}

/* -- arithmetic ------------------------------------------------------------------------ */

static int64_t ceil_div(int64_t n, int64_t d) { return (n + d - 1) / d; }

static int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

/* int32 two's-complement wrap of a uint32 (the conversion itself is implementation-defined
 * in C for values above INT32_MAX). */
static int32_t wrap_int32(uint32_t u) {
    return u <= (uint32_t)INT32_MAX ? (int32_t)u : -(int32_t)(UINT32_MAX - u) - 1;
}

/* floor(v / 2^shift): an arithmetic right shift that does not rely on how the compiler
 * shifts negative numbers (implementation-defined in C). ~v is >= 0 when v < 0. */
static int64_t shift_right(int64_t v, int32_t shift) {
    return v >= 0 ? v >> shift : ~(~v >> shift);
}

/* mvout's requantization, in int64: |x * M| < 2^62 and 2^(S-1) <= 2^61, so nothing overflows. The rounded
 * quotient is floor((x * M + 2^(S-1)) / 2^S) (halves up), or with halves to even the same
 * less one at an exact half whose floor is even: floor((x * M + 2^(S-1) - 1 + q_odd) / 2^S),
 * q_odd the lowest bit of floor(x * M / 2^S). */
static int8_t requantize(int32_t x) {
    int64_t y = (int64_t)x * config.multiplier;
    if (config.shift > 0) {
        int64_t half = (int64_t)1 << (config.shift - 1);
        if (config.rounding == NPU_ROUND_HALF_EVEN)
            y += half - 1 + (int64_t)((uint64_t)shift_right(y, config.shift) & 1u);
        else
            y += half;
    }
    y = shift_right(y, config.shift);
    if (y < -128) y = -128;
    if (y > 127) y = 127;
    if (config.relu && y < 0) y = 0;
    return (int8_t)y;
}

/* -- counters -------------------------------------------------------------------------- */

/* Count an instruction that ran: one more of its kind, its cost in the serialized count,
 * and `cycles` is the latest finish the timing model has seen. */
static void retire(int counter, int64_t cost) {
    counters[counter] += 1;
    counters[NPU_COUNTER_SERIAL_CYCLES] += cost;
    counters[NPU_COUNTER_CYCLES] = npu_timing_latest();
}

static const struct npu_footprint NOTHING = {0};

/* An instruction of the load or store queue: timed, its cost added to the queue's busy
 * counter, counted. */
static void retire_transfer(int counter, enum npu_queue queue, const struct npu_footprint *f,
                            int64_t cost) {
    npu_timing_load_store(queue, f, cost);
    counters[queue == QUEUE_LOAD ? NPU_COUNTER_LOAD_BUSY : NPU_COUNTER_STORE_BUSY] += cost;
    retire(counter, cost);
}

/* The DRAM bytes of `rows` rows of `row_bytes`, `stride` apart from `dram` (negative strides
 * walk back): [lo, hi), empty when rows is 0. */
static void dram_range(struct npu_footprint *f, const void *dram, int32_t rows,
                       int64_t row_bytes, int64_t stride, int access) {
    if (rows == 0) return;
    int64_t last = (int64_t)(rows - 1) * stride;
    f->dram_lo = (uintptr_t)dram + (uintptr_t)(last < 0 ? last : 0);
    f->dram_hi = (uintptr_t)dram + (uintptr_t)((last > 0 ? last : 0) + row_bytes);
    f->dram_access = access;
}

static struct npu_rows_touched rows_touched(enum npu_memory m, int32_t first, int32_t count,
                                            int access) {
    enum npu_timed_memory timed = m == ACCUMULATOR ? TIMED_ACCUMULATOR : TIMED_SCRATCHPAD;
    return (struct npu_rows_touched){timed, first, count, access};
}

/* -- configuration --------------------------------------------------------------------- */

int32_t npu_config_ld(int32_t stride) {
    config.stride_ld = stride; /* any value: 0 broadcasts one DRAM row, negative walks back */
    retire_transfer(NPU_COUNTER_CONFIG, QUEUE_LOAD, &NOTHING, 1);
    return 0;
}

int32_t npu_config_st(int32_t stride, int32_t multiplier, int32_t shift, int32_t relu,
                      int32_t rounding) {
    const char *insn = "npu_config_st";
    if (check_value(insn, "multiplier", multiplier, 0, INT32_MAX) ||
        check_value(insn, "shift", shift, 0, NPU_MAX_SHIFT) || check_value(insn, "relu", relu, 0, 1))
        return -1;
    if (rounding != NPU_ROUND_HALF_UP && rounding != NPU_ROUND_HALF_EVEN)
        return fail("npu_config_st: rounding = %d is outside 0 .. 1 (%d rounds halves up, %d "
                    "halves to even)",
                    (int)rounding, NPU_ROUND_HALF_UP, NPU_ROUND_HALF_EVEN);
    config.stride_st = stride;
    config.multiplier = multiplier;
    config.shift = shift;
    config.relu = relu;
    config.rounding = rounding;
    retire_transfer(NPU_COUNTER_CONFIG, QUEUE_STORE, &NOTHING, 1);
    return 0;
}

int32_t npu_config_ex(int32_t dataflow) {
    if (dataflow != NPU_DATAFLOW_WS)
        return fail("npu_config_ex: dataflow = %d is outside 0 .. 0 (0, weight stationary, is "
                    "the only dataflow)",
                    (int)dataflow);
    config.dataflow = dataflow;
    npu_timing_config_ex();
    retire(NPU_COUNTER_CONFIG, 1);
    return 0;
}

/* -- data movement --------------------------------------------------------------------- */

/* Shared checks of mvin and mvout: the counts, the address range, the DRAM pointer. */
static int32_t check_move(const char *insn, const void *dram, uint32_t addr, int32_t rows,
                          int32_t cols, enum npu_memory allowed, int32_t *row) {
    if (check_value(insn, "cols", cols, 1, NPU_DIM) ||
        check_value(insn, "rows", rows, 0, memory_rows(memory_of(addr))) ||
        check_rows(insn, "addr", addr, rows, allowed, row))
        return -1;
    if (dram == NULL && rows > 0) return fail("%s: dram is NULL (with %d rows)", insn, (int)rows);
    return 0;
}

int32_t npu_mvin(const void *dram, uint32_t addr, int32_t rows, int32_t cols) {
    int32_t row;
    if (check_move("npu_mvin", dram, addr, rows, cols, EITHER, &row)) return -1;
    const uint8_t *src = dram;
    int64_t stride = config.stride_ld;
    int64_t element = memory_of(addr) == ACCUMULATOR ? 4 : 1;
    for (int32_t r = 0; r < rows; ++r) {
        /* Columns cols .. DIM - 1 become 0, so a partial tile reads as zero-padded. */
        if (element == 4) {
            memcpy(acc[row + r], src + r * stride, (size_t)cols * 4);
            memset(&acc[row + r][cols], 0, (size_t)(NPU_DIM - cols) * 4);
        } else {
            memcpy(spad[row + r], src + r * stride, (size_t)cols);
            memset(&spad[row + r][cols], 0, (size_t)(NPU_DIM - cols));
        }
    }
    /* With stride 0 the NPU reads the one DRAM row once and writes it to every destination
     * row, one row per cycle after the first (a broadcast, e.g. a bias into every row). */
    int64_t row_bytes = (int64_t)cols * element;
    int broadcast = stride == 0 && rows > 0;
    int64_t bytes = broadcast ? row_bytes : (int64_t)rows * row_bytes;
    int64_t cycles = NPU_LOAD_LATENCY + ceil_div(bytes, NPU_BANDWIDTH);
    if (broadcast) cycles += rows - 1;
    struct npu_footprint f = {.nrows = 1};
    f.rows[0] = rows_touched(memory_of(addr), row, rows, ACCESS_WRITE);
    dram_range(&f, dram, rows, row_bytes, stride, ACCESS_READ);
    counters[NPU_COUNTER_BYTES_IN] += bytes;
    retire_transfer(NPU_COUNTER_MVIN, QUEUE_LOAD, &f, cycles);
    return 0;
}

int32_t npu_mvout(void *dram, uint32_t addr, int32_t rows, int32_t cols) {
    int32_t row;
    if (check_move("npu_mvout", dram, addr, rows, cols, ACCUMULATOR, &row)) return -1;
    uint8_t *dst = dram;
    int64_t stride = config.stride_st;
    for (int32_t r = 0; r < rows; ++r) {
        int8_t out[NPU_DIM];
        for (int32_t j = 0; j < cols; ++j) out[j] = requantize(acc[row + r][j]);
        /* With stride 0 every row lands on the same DRAM row: the last one stays. */
        memcpy(dst + r * stride, out, (size_t)cols);
    }
    int64_t bytes = (int64_t)rows * cols;
    struct npu_footprint f = {.nrows = 1};
    f.rows[0] = rows_touched(ACCUMULATOR, row, rows, ACCESS_READ);
    dram_range(&f, dram, rows, cols, stride, ACCESS_WRITE);
    counters[NPU_COUNTER_BYTES_OUT] += bytes;
    retire_transfer(NPU_COUNTER_MVOUT, QUEUE_STORE, &f,
                    NPU_STORE_LATENCY + ceil_div(bytes, NPU_BANDWIDTH));
    return 0;
}

/* -- the systolic array ---------------------------------------------------------------- */

int32_t npu_preload(uint32_t b, int32_t b_rows, int32_t b_cols, uint32_t c, int32_t c_rows,
                    int32_t c_cols, int32_t accumulate) {
    const char *insn = "npu_preload";
    int32_t b_row, c_row;
    if (check_value(insn, "b_rows", b_rows, 0, NPU_DIM) ||
        check_value(insn, "b_cols", b_cols, 0, NPU_DIM) ||
        check_value(insn, "c_rows", c_rows, 0, NPU_ACC_ROWS) ||
        check_value(insn, "c_cols", c_cols, 0, NPU_DIM) ||
        check_value(insn, "accumulate", accumulate, 0, 1) ||
        check_rows(insn, "b", b, b_rows, SCRATCHPAD, &b_row) ||
        check_rows(insn, "c", c, c_rows, ACCUMULATOR, &c_row))
        return -1;
    /* The weights shift into the array now: a later mvin over rows b.. does not change them. */
    memset(preloaded.weights, 0, sizeof preloaded.weights);
    for (int32_t k = 0; k < b_rows; ++k)
        memcpy(preloaded.weights[k], spad[b_row + k], (size_t)b_cols);
    preloaded.pending = 1;
    preloaded.b_rows = b_rows;
    preloaded.c_row = c_row;
    preloaded.c_rows = c_rows;
    preloaded.c_cols = c_cols;
    preloaded.accumulate = accumulate;
    struct npu_footprint f = {.nrows = 1};
    f.rows[0] = rows_touched(SCRATCHPAD, b_row, b_rows, ACCESS_READ);
    npu_timing_preload(&f);
    retire(NPU_COUNTER_PRELOAD, NPU_DIM);
    return 0;
}

/* One output row: out[j] = (accumulate ? out[j] : 0) + sum over k of a[k] * W[k][j] for
 * j < c_cols, wrapping like int32 hardware (in uint32: signed overflow is undefined in C).
 * Columns c_cols .. DIM - 1 are not touched. */
static void multiply_row(const int8_t a[NPU_DIM], int32_t out[NPU_DIM]) {
    for (int32_t j = 0; j < preloaded.c_cols; ++j) {
        uint32_t sum = preloaded.accumulate ? (uint32_t)out[j] : 0u;
        for (int32_t k = 0; k < NPU_DIM; ++k)
            sum += (uint32_t)((int32_t)a[k] * (int32_t)preloaded.weights[k][j]);
        out[j] = wrap_int32(sum);
    }
}

int32_t npu_compute(uint32_t a, int32_t a_rows, int32_t a_cols) {
    const char *insn = "npu_compute";
    int32_t a_row;
    if (check_value(insn, "a_rows", a_rows, 0, NPU_SPAD_ROWS) ||
        check_value(insn, "a_cols", a_cols, 0, NPU_DIM) ||
        check_rows(insn, "a", a, a_rows, SCRATCHPAD, &a_row))
        return -1;
    if (!preloaded.pending)
        return fail("npu_compute: no preload since the last compute (every compute needs a "
                    "preload of its own)");
    int32_t rows = min32(a_rows, preloaded.c_rows);
    for (int32_t r = 0; r < rows; ++r) {
        int8_t row[NPU_DIM] = {0}; /* A[r][k] is 0 for k >= a_cols */
        memcpy(row, spad[a_row + r], (size_t)a_cols);
        multiply_row(row, acc[preloaded.c_row + r]);
    }
    preloaded.pending = 0;
    counters[NPU_COUNTER_MACS] +=
        (int64_t)rows * preloaded.c_cols * min32(a_cols, preloaded.b_rows);
    struct npu_footprint f = {.nrows = 2};
    f.rows[0] = rows_touched(SCRATCHPAD, a_row, a_rows, ACCESS_READ);
    f.rows[1] = rows_touched(ACCUMULATOR, preloaded.c_row, rows,
                             ACCESS_WRITE | (preloaded.accumulate ? ACCESS_READ : 0));
    npu_timing_compute(&f, a_rows);
    counters[NPU_COUNTER_EXECUTE_BUSY] += a_rows;
    /* Rows stream into the array one per cycle, then the pipeline drains. */
    retire(NPU_COUNTER_COMPUTE, a_rows > 0 ? a_rows + NPU_DIM - 1 : 0);
    return 0;
}

int32_t npu_fence(void) {
    npu_timing_fence(); /* later instructions start after everything before has finished */
    retire(NPU_COUNTER_FENCE, 0);
    return 0;
}

/* -- ownership ------------------------------------------------------------------------- */

static pthread_mutex_t ownership = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t released = PTHREAD_COND_INITIALIZER;
static int owned;
static pthread_t owner;

int32_t npu_acquire(void) {
    pthread_mutex_lock(&ownership);
    if (owned && pthread_equal(owner, pthread_self())) {
        pthread_mutex_unlock(&ownership);
        return fail("npu_acquire: this thread already owns the NPU");
    }
    while (owned)
        pthread_cond_wait(&released, &ownership);
    owned = 1;
    owner = pthread_self();
    pthread_mutex_unlock(&ownership);
    return 0;
}

int32_t npu_release(void) {
    pthread_mutex_lock(&ownership);
    if (!owned || !pthread_equal(owner, pthread_self())) {
        pthread_mutex_unlock(&ownership);
        return fail("npu_release: this thread does not own the NPU");
    }
    owned = 0;
    pthread_cond_signal(&released);
    pthread_mutex_unlock(&ownership);
    return 0;
}

/* -- simulator control ----------------------------------------------------------------- */

void npu_reset(void) {
    memset(spad, 0, sizeof spad);
    memset(acc, 0, sizeof acc);
    memset(&preloaded, 0, sizeof preloaded);
    memset(counters, 0, sizeof counters);
    config = (struct npu_config)DEFAULT_CONFIG;
    npu_timing_reset();
}

void npu_read_counters(int64_t out[NPU_NCOUNTERS]) { memcpy(out, counters, sizeof counters); }

void npu_read_config(int32_t out[NPU_NCONFIG]) {
    out[NPU_CONFIG_STRIDE_LD] = config.stride_ld;
    out[NPU_CONFIG_STRIDE_ST] = config.stride_st;
    out[NPU_CONFIG_MULTIPLIER] = config.multiplier;
    out[NPU_CONFIG_SHIFT] = config.shift;
    out[NPU_CONFIG_RELU] = config.relu;
    out[NPU_CONFIG_DATAFLOW] = config.dataflow;
    out[NPU_CONFIG_ROUNDING] = config.rounding;
}

int32_t npu_read_memory(uint32_t addr, int32_t rows, void *out) {
    const char *insn = "npu_read_memory";
    enum npu_memory m = memory_of(addr);
    int32_t row;
    if (check_value(insn, "rows", rows, 0, memory_rows(m)) ||
        check_rows(insn, "addr", addr, rows, EITHER, &row))
        return -1;
    if (out == NULL && rows > 0) return fail("%s: out is NULL (with %d rows)", insn, (int)rows);
    if (m == ACCUMULATOR)
        memcpy(out, acc[row], (size_t)rows * sizeof acc[0]);
    else
        memcpy(out, spad[row], (size_t)rows * sizeof spad[0]);
    return 0;
}
