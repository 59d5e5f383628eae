/* The NPU's decoupled timing model (npu_timing.h; docs/npu.md, "Cycle model").
 *
 * Dependencies are tracked per location, per queue, so that conflicts inside one queue (which
 * its order alone resolves) add no wait:
 * - every scratchpad and accumulator row keeps, for each queue, the latest finish of an
 *   instruction of that queue that wrote it and of one that read it;
 * - DRAM keeps, per queue, the list of its recent transfers (byte range, access, finish),
 *   pruned of those finishing before the other queues could next start (they can no longer
 *   delay anything).
 * Only the latest finish per location and queue matters: an instruction waits for the latest
 * conflicting finish of each other queue. The work per instruction is proportional to the rows
 * it touches and to the other queues' transfers still in flight. */
#include "npu_timing.h"

#include <stdlib.h>
#include <string.h>

#include "npu_sim.h"

struct row_times {
    int64_t written[NQUEUES], read[NQUEUES];
};

static struct row_times spad_times[NPU_SPAD_ROWS];
static struct row_times acc_times[NPU_ACC_ROWS];

struct dram_entry {
    uintptr_t lo, hi;
    int64_t finish;
    int access;
};

/* The DRAM transfers of one queue, oldest first. A queue runs in order, so their finishes
 * only grow along the list: the entries that can no longer delay anything (finishing before
 * the other queues could next start) are a prefix, dropped by moving `head`, and a search
 * from the newest end can stop at the first conflict or at the first entry too old to
 * matter. */
struct dram_list {
    struct dram_entry *items;
    size_t head, length, capacity;
};

static struct dram_list dram[NQUEUES];

/* The queues' in-order state, the weight buffers and the last fence. */
static struct {
    int64_t queue_finish[NQUEUES]; /* load and store: the previous instruction's finish */
    int64_t preload_finish;        /* the last preload's finish */
    int64_t stream_end_last;       /* stream end of the last compute, C_{i-1} */
    int64_t stream_end_before;     /* and of the one before it, C_{i-2} */
    int64_t config_ex_finish;      /* no preload or compute starts before it */
    int64_t fence;                 /* no instruction starts before it */
    int64_t latest;                /* the latest finish of any instruction */
} state;

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static struct row_times *times_of(enum npu_timed_memory m) {
    return m == TIMED_ACCUMULATOR ? acc_times : spad_times;
}

void npu_timing_reset(void) {
    memset(spad_times, 0, sizeof spad_times);
    memset(acc_times, 0, sizeof acc_times);
    memset(&state, 0, sizeof state);
    for (int q = 0; q < NQUEUES; ++q) free(dram[q].items);
    memset(dram, 0, sizeof dram);
}

int64_t npu_timing_latest(void) { return state.latest; }

/* -- dependencies ---------------------------------------------------------------------- */

static int conflicts(int access, int other) {
    return (access & ACCESS_WRITE) || (other & ACCESS_WRITE);
}

/* The earliest time an instruction of `queue` could start from now on. */
static int64_t queue_floor(enum npu_queue queue) {
    return max64(state.queue_finish[queue], state.fence);
}

/* The latest finish of the entries of `list` that conflict with the DRAM bytes of `f`, or 0;
 * entries finishing at or before `floor` (when the instruction could start anyway) are not
 * looked at. */
static int64_t dram_ready(const struct dram_list *list, const struct npu_footprint *f,
                          int64_t floor) {
    for (size_t i = list->length; i-- > list->head;) {
        const struct dram_entry *e = &list->items[i];
        if (e->finish <= floor) break; /* and so are all the older ones */
        if (e->lo < f->dram_hi && f->dram_lo < e->hi && conflicts(f->dram_access, e->access))
            return e->finish; /* the newest conflict finishes last */
    }
    return 0;
}

/* The latest finish of the earlier instructions of other queues that conflict with a
 * footprint `f` issued to `queue`. */
static int64_t ready(enum npu_queue queue, const struct npu_footprint *f) {
    int64_t t = 0;
    for (int i = 0; i < f->nrows; ++i) {
        const struct npu_rows_touched *touched = &f->rows[i];
        const struct row_times *rows = times_of(touched->memory) + touched->first;
        int writes = touched->access & ACCESS_WRITE;
        for (int32_t r = 0; r < touched->count; ++r)
            for (int q = 0; q < NQUEUES; ++q) {
                if (q == (int)queue) continue;
                t = max64(t, rows[r].written[q]); /* RAW, WAW */
                if (writes) t = max64(t, rows[r].read[q]); /* WAR */
            }
    }
    if (f->dram_hi > f->dram_lo)
        for (int q = 0; q < NQUEUES; ++q)
            if (q != (int)queue) t = max64(t, dram_ready(&dram[q], f, queue_floor(queue)));
    return t;
}

/* The earliest time an instruction of a queue other than `queue` could start from now on. */
static int64_t others_floor(enum npu_queue queue) {
    int64_t floor = INT64_MAX;
    for (int q = 0; q < NQUEUES; ++q)
        if (q != (int)queue && q != QUEUE_EXECUTE) /* the execute queue never touches DRAM */
            floor = floor < queue_floor(q) ? floor : queue_floor(q);
    return floor;
}

static void record_dram(enum npu_queue queue, const struct npu_footprint *f, int64_t finish) {
    struct dram_list *list = &dram[queue];
    int64_t floor = others_floor(queue);
    while (list->head < list->length && list->items[list->head].finish <= floor) ++list->head;
    if (list->length == list->capacity && list->head >= list->length / 2) {
        /* reuse the dropped prefix once it is half the list (amortized constant work) */
        memmove(list->items, list->items + list->head,
                (list->length - list->head) * sizeof *list->items);
        list->length -= list->head;
        list->head = 0;
    }
    if (list->length == list->capacity) {
        size_t capacity = list->capacity ? 2 * list->capacity : 64;
        struct dram_entry *items = realloc(list->items, capacity * sizeof *items);
        if (items == NULL) abort(); /* a few bytes per transfer: out of memory is fatal */
        list->items = items;
        list->capacity = capacity;
    }
    list->items[list->length++] = (struct dram_entry){f->dram_lo, f->dram_hi, finish,
                                                      f->dram_access};
}

/* Remember that an instruction of `queue` with footprint `f` finishes at `finish`. */
static void record(enum npu_queue queue, const struct npu_footprint *f, int64_t finish) {
    for (int i = 0; i < f->nrows; ++i) {
        const struct npu_rows_touched *touched = &f->rows[i];
        struct row_times *rows = times_of(touched->memory) + touched->first;
        for (int32_t r = 0; r < touched->count; ++r) {
            if (touched->access & ACCESS_READ)
                rows[r].read[queue] = max64(rows[r].read[queue], finish);
            if (touched->access & ACCESS_WRITE)
                rows[r].written[queue] = max64(rows[r].written[queue], finish);
        }
    }
    if (f->dram_hi > f->dram_lo) record_dram(queue, f, finish);
    state.latest = max64(state.latest, finish);
}

/* -- the queues ------------------------------------------------------------------------ */

int64_t npu_timing_load_store(enum npu_queue queue, const struct npu_footprint *f, int64_t cost) {
    int64_t start = max64(ready(queue, f), queue_floor(queue));
    int64_t finish = start + cost;
    state.queue_finish[queue] = finish;
    record(queue, f, finish);
    return finish;
}

/* The execute queue has two weight buffers: preload P_i fills the one compute C_{i-2} used,
 * so it waits for C_{i-2}'s rows to have entered the array, not for C_{i-1}. */
int64_t npu_timing_preload(const struct npu_footprint *f) {
    int64_t start = max64(ready(QUEUE_EXECUTE, f), state.preload_finish);
    start = max64(start, max64(state.stream_end_before, state.config_ex_finish));
    start = max64(start, state.fence);
    int64_t finish = start + NPU_DIM;
    state.preload_finish = finish;
    record(QUEUE_EXECUTE, f, finish);
    return finish;
}

/* C_i's rows enter the array one per cycle after its preload and after C_{i-1}'s last row;
 * its last result leaves DIM - 1 cycles after its last row entered. */
int64_t npu_timing_compute(const struct npu_footprint *f, int32_t a_rows) {
    int64_t start = max64(ready(QUEUE_EXECUTE, f), state.preload_finish);
    start = max64(start, max64(state.stream_end_last, state.config_ex_finish));
    start = max64(start, state.fence);
    int64_t stream_end = start + a_rows;
    int64_t finish = a_rows > 0 ? stream_end + NPU_DIM - 1 : start;
    state.stream_end_before = state.stream_end_last;
    state.stream_end_last = stream_end;
    record(QUEUE_EXECUTE, f, finish);
    return finish;
}

int64_t npu_timing_config_ex(void) {
    int64_t start = max64(state.preload_finish, state.stream_end_last);
    start = max64(start, max64(state.config_ex_finish, state.fence));
    state.config_ex_finish = start + 1;
    state.latest = max64(state.latest, start + 1);
    return start + 1;
}

/* A fence completes when everything before it has finished; nothing after it starts
 * earlier. */
int64_t npu_timing_fence(void) {
    state.fence = state.latest;
    return state.fence;
}
