/* loom's static memory planner: TVM USMP's greedy placement, the greedy first-fit placement
 * (the same orders, filling gaps), the greedy bottom-up placement (the search's order without
 * backtracking) and the exact search.
 *
 * The search decides whether the free buffers fit under a capacity. It builds "canonical"
 * solutions (MiniMalloc, Moffitt, ASPLOS 2023): buffers are placed in nondecreasing order of
 * offset, each at the lowest aligned offset above the buffers already placed that it meets
 * in time (and clear of pinned buffers). Every packing can be pushed down until each buffer
 * rests at such an offset, so searching these orders alone is complete. Pruning:
 *   - canonical order: the next buffer's (offset, rank) is above the last placed one's;
 *   - dominance: a buffer is not placed at or above the top any other unplaced buffer could
 *     reach where it stands now (that buffer would sit in a gap below it: a pushed-down
 *     packing never has one);
 *   - inference per section (a stretch of time where the same buffers live): the lowest offset
 *     any unplaced buffer there may take, plus their summed sizes, must fit the capacity. A
 *     candidate is first checked against the sections as they are (fits_before_placing: most
 *     fail there, cheaply), then placed and checked where its placement raised floors;
 *   - a placed buffer that no unplaced buffer meets in time ("hatless") constrains nothing:
 *     when its subtree fails, so do its siblings';
 *   - decomposition: when no unplaced buffer spans two adjacent sections, the two sides are
 *     independent problems, solved one after the other and never revisited.
 * Buffers are tried in order of offset, then of a rank (one of six preorders); the preorders
 * take turns under a node limit that doubles, so an easy order is found fast. A search that
 * runs out without hitting a limit proves that nothing fits.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int64_t i64;

enum { NOT_FOUND = 0, FOUND = 1, ABORTED = 2, TIMED_OUT = 3, NO_MEMORY = 4 };

enum { PREORDERS = 6 }; /* three sort keys, each with and without ranking pieces anew */

static i64 align_up(i64 x, i64 a) { return (x + a - 1) / a * a; }

static int cmp_i64(const void *a, const void *b) {
    i64 x = *(const i64 *)a, y = *(const i64 *)b;
    return (x > y) - (x < y);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- greedy first fit */

/* Places buffers in `order`, each at the lowest offset clear of those placed before it that
   it meets in time. A pinned buffer (pinned[i] >= 0) keeps its offset; pinned buffers must come
   first in `order`. The placed buffers are kept sorted by offset, so the walk for a fit sees
   them bottom-up and stops at the first gap large enough. Returns the peak, -1 without
   memory or -2 when `seconds` ran out first. */
i64 loom_planner_first_fit(int n, const i64 *size, const i64 *start, const i64 *end,
                           const i64 *align, const i64 *pinned, const int32_t *order,
                           i64 *offset, double seconds) {
    int *by_offset = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!by_offset) return -1;
    double deadline = now_seconds() + seconds;
    int placed = 0;
    i64 peak = 0;
    for (int k = 0; k < n; k++) {
        /* a placement walks all placed buffers: on large problems look at the clock often */
        if ((k & 63) == 63 && now_seconds() > deadline) {
            free(by_offset);
            return -2;
        }
        int b = order[k];
        if (pinned[b] >= 0) {
            offset[b] = pinned[b];
        } else if (size[b] == 0) {
            offset[b] = 0;
        } else {
            i64 at = 0;
            for (int j = 0; j < placed; j++) {
                int c = by_offset[j];
                if (!(start[c] < end[b] && start[b] < end[c])) continue;
                if (offset[c] >= at + size[b]) break;
                if (offset[c] + size[c] > at) at = align_up(offset[c] + size[c], align[b]);
            }
            offset[b] = at;
        }
        if (offset[b] + size[b] > peak) peak = offset[b] + size[b];
        if (size[b] == 0) continue;
        int lo = 0, hi = placed;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (offset[by_offset[mid]] <= offset[b]) lo = mid + 1; else hi = mid;
        }
        memmove(by_offset + lo + 1, by_offset + lo, sizeof(int) * (size_t)(placed - lo));
        by_offset[lo] = b;
        placed++;
    }
    free(by_offset);
    return peak;
}

/* ---------------------------------------------------------------- greedy bottom-up */

/* The canonical order of the search without backtracking: again and again, of the unplaced
   buffers the one that can sit lowest (ties: the lowest rank) is placed there. Buffers placed
   so far form a skyline over time, the highest top alive at each moment; a buffer can sit no
   lower than the skyline's maximum over its lifetime, and placing it there raises the skyline
   over its lifetime to its top (everything under it is then used or lost). A segment tree over
   the moments answers the maximum and does the raise; a heap keyed by (lowest offset, rank)
   holds the unplaced buffers, and a key gone stale (the skyline rose) is refreshed when popped:
   keys only go up, so the first fresh key popped is the least. Pinned buffers are not in the
   skyline: a buffer's offset is moved up past those it meets, as in the search. */

typedef struct { i64 key; i64 rank; int b; } waiting;

static int comes_before(waiting x, waiting y) {
    return x.key < y.key || (x.key == y.key && x.rank < y.rank);
}

static void heap_push(waiting *heap, int *len, waiting x) {
    int i = (*len)++;
    while (i > 0 && comes_before(x, heap[(i - 1) / 2])) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = x;
}

static waiting heap_pop(waiting *heap, int *len) {
    waiting top = heap[0], x = heap[--(*len)];
    int i = 0, n = *len;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && comes_before(heap[c + 1], heap[c])) c++;
        if (!comes_before(heap[c], x)) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = x;
    return top;
}

/* The skyline over moments [0, n) (n a power of two): a tree of maxima, bottom-up. A raise
   sets `top` on the O(log n) nodes covering its range, and a node's `max` counts the tops set
   inside it; a moment's height is the highest top set on its leaf or an ancestor. Raises only
   go up, so they never need pushing down. */
typedef struct { int n; i64 *max, *top; } skyline;

static inline i64 max_i64(i64 a, i64 b) { return a > b ? a : b; }

static void sky_cover(skyline *t, int node, i64 v) {
    t->max[node] = max_i64(t->max[node], v);
    t->top[node] = max_i64(t->top[node], v);
}

static void sky_raise(skyline *t, int lo, int hi, i64 v) {
    for (int a = lo + t->n, b = hi + t->n; a < b; a >>= 1, b >>= 1) {
        if (a & 1) sky_cover(t, a++, v);
        if (b & 1) sky_cover(t, --b, v);
    }
    /* the nodes set are all below the ancestors of the first and the last moment */
    for (int i = (lo + t->n) >> 1; i; i >>= 1) t->max[i] = max_i64(t->max[i], v);
    for (int i = (hi - 1 + t->n) >> 1; i; i >>= 1) t->max[i] = max_i64(t->max[i], v);
}

static i64 sky_max(const skyline *t, int lo, int hi) {
    i64 most = 0;
    for (int a = lo + t->n, b = hi + t->n; a < b; a >>= 1, b >>= 1) {
        if (a & 1) most = max_i64(most, t->max[a++]);
        if (b & 1) most = max_i64(most, t->max[--b]);
    }
    /* a top set above the covering nodes: on an ancestor of the first or the last moment */
    for (int i = (lo + t->n) >> 1; i; i >>= 1) most = max_i64(most, t->top[i]);
    for (int i = (hi - 1 + t->n) >> 1; i; i >>= 1) most = max_i64(most, t->top[i]);
    return most;
}

/* Sorts `times[0, count)` into its distinct values, in place, and makes an empty skyline over
   them; returns how many distinct times there are, -1 without memory. */
static int sky_init(skyline *sky, i64 *times, int count) {
    qsort(times, (size_t)count, sizeof(i64), cmp_i64);
    int distinct = 0;
    for (int k = 0; k < count; k++)
        if (distinct == 0 || times[k] != times[distinct - 1]) times[distinct++] = times[k];
    sky->n = 1;
    while (sky->n < distinct - 1) sky->n *= 2;
    sky->max = calloc(2 * (size_t)sky->n, sizeof(i64));
    sky->top = calloc(2 * (size_t)sky->n, sizeof(i64));
    return sky->max && sky->top ? distinct : -1;
}

/* The index of `x` in the sorted distinct `times[0, count)`. */
static int time_index(const i64 *times, int count, i64 x) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (times[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* The lowest aligned offset >= base where free buffer b clears the pinned buffers it meets in
   time (`pins`: the nonempty pinned buffers). */
static i64 above_pinned(int b, i64 base, const i64 *size, const i64 *start, const i64 *end,
                        const i64 *align, const i64 *pinned, const int *pins, int npins) {
    i64 at = align_up(base, align[b]);
    int moved = 1;
    while (moved) {
        moved = 0;
        for (int k = 0; k < npins; k++) {
            int p = pins[k];
            if (!(start[p] < end[b] && start[b] < end[p])) continue;
            if (at < pinned[p] + size[p] && pinned[p] < at + size[b]) {
                at = align_up(pinned[p] + size[p], align[b]);
                moved = 1;
            }
        }
    }
    return at;
}

/* Places the free buffers bottom-up (lower `rank` first among equally low ones); pinned
   buffers keep their offset, empty ones go to 0. Returns the peak, -1 without memory or -2
   when `seconds` ran out first. */
i64 loom_planner_bottom_up(int n, const i64 *size, const i64 *start, const i64 *end,
                           const i64 *align, const i64 *pinned, const i64 *rank, i64 *offset,
                           double seconds) {
    double deadline = now_seconds() + seconds;
    size_t nn = (size_t)n + 1;
    i64 *times = malloc(sizeof(i64) * 2 * nn);
    int *lo = malloc(sizeof(int) * nn), *hi = malloc(sizeof(int) * nn);
    int *pins = malloc(sizeof(int) * nn);
    waiting *heap = malloc(sizeof(waiting) * nn);
    skyline sky = {1, NULL, NULL};
    i64 peak = -1;
    if (!times || !lo || !hi || !pins || !heap) goto done;
    int count = 0, npins = 0;
    for (int b = 0; b < n; b++) {
        offset[b] = pinned[b] >= 0 ? pinned[b] : 0;
        if (size[b] == 0) continue;
        if (pinned[b] >= 0) {
            pins[npins++] = b;
            continue;
        }
        times[count++] = start[b];
        times[count++] = end[b];
    }
    int distinct = sky_init(&sky, times, count);
    if (distinct < 0) goto done;
    int len = 0;
    peak = 0;
    for (int b = 0; b < n; b++) {
        if (size[b] > 0 && pinned[b] < 0) {
            lo[b] = time_index(times, distinct, start[b]);
            hi[b] = time_index(times, distinct, end[b]);
            heap_push(heap, &len, (waiting){0, rank[b], b});
        } else if (offset[b] + size[b] > peak) {
            peak = offset[b] + size[b];
        }
    }
    long long pops = 0;
    while (len > 0) {
        if ((++pops & 1023) == 0 && now_seconds() > deadline) {
            peak = -2;
            break;
        }
        waiting x = heap_pop(heap, &len);
        int b = x.b;
        i64 at = sky_max(&sky, lo[b], hi[b]);
        at = npins ? above_pinned(b, at, size, start, end, align, pinned, pins, npins)
                   : align_up(at, align[b]);
        if (at > x.key) {
            x.key = at;
            heap_push(heap, &len, x);
            continue;
        }
        offset[b] = at;
        sky_raise(&sky, lo[b], hi[b], at + size[b]);
        if (at + size[b] > peak) peak = at + size[b];
    }
done:
    free(times);
    free(lo);
    free(hi);
    free(pins);
    free(heap);
    free(sky.max);
    free(sky.top);
    return peak;
}

/* ---------------------------------------------------------------- TVM's greedy rule */

/* TVM USMP's placement (greedy.cc, PostSortAllocation) on lifetimes: buffers in `order`, each
   at the highest end of the buffers placed before it that it meets in time, each end rounded
   up to that buffer's alignment (TVM's rule), then up to the buffer's own alignment (loom's
   plans require it; TVM does not). Gaps below are never filled. Pinned buffers keep their
   offset and come first in `order`; empty buffers go to 0 and block nothing. The ends placed
   so far form a skyline over time, kept in the segment tree of the bottom-up placement.
   Returns the peak, -1 without memory or -2 when `seconds` ran out first. */
i64 loom_planner_tvm_greedy(int n, const i64 *size, const i64 *start, const i64 *end,
                            const i64 *align, const i64 *pinned, const int32_t *order,
                            i64 *offset, double seconds) {
    double deadline = now_seconds() + seconds;
    size_t nn = (size_t)n + 1;
    i64 *times = malloc(sizeof(i64) * 2 * nn);
    skyline sky = {1, NULL, NULL};
    i64 peak = -1;
    if (!times) goto done;
    int count = 0;
    for (int b = 0; b < n; b++) {
        if (size[b] == 0) continue;
        times[count++] = start[b];
        times[count++] = end[b];
    }
    int distinct = sky_init(&sky, times, count);
    if (distinct < 0) goto done;
    peak = 0;
    for (int k = 0; k < n; k++) {
        if ((k & 1023) == 1023 && now_seconds() > deadline) {
            peak = -2;
            break;
        }
        int b = order[k];
        if (size[b] == 0) {
            offset[b] = pinned[b] >= 0 ? pinned[b] : 0;
            continue;
        }
        int lo = time_index(times, distinct, start[b]), hi = time_index(times, distinct, end[b]);
        offset[b] = pinned[b] >= 0 ? pinned[b] : align_up(sky_max(&sky, lo, hi), align[b]);
        sky_raise(&sky, lo, hi, align_up(offset[b] + size[b], align[b]));
        if (offset[b] + size[b] > peak) peak = offset[b] + size[b];
    }
done:
    free(times);
    free(sky.max);
    free(sky.top);
    return peak;
}

/* ---------------------------------------------------------------- the search */

typedef struct { int idx; i64 old; } change;

typedef struct candidate {
    i64 offset;
    i64 beside; /* the most unplaced bytes in a section of the frame b does not live in */
    int rank;
    int b;
} candidate;

typedef struct {
    change *data;
    size_t len, cap;
} trail;

static inline int trail_push(trail *t, int idx, i64 old) {
    if (t->len == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        change *data = realloc(t->data, cap * sizeof(change));
        if (!data) return 0;
        t->data = data;
        t->cap = cap;
    }
    t->data[t->len++] = (change){idx, old};
    return 1;
}

typedef struct {
    /* the problem (free buffers are searched; pinned ones are obstacles) */
    int n;
    const i64 *size, *align, *pinned, *start, *end;
    i64 capacity;
    int heuristic;          /* which preorder ranks the buffers (rank_buffers) */
    int touched_lo, touched_hi; /* the sections the last placement changed */
    int *sec_lo, *sec_hi;   /* sections [lo, hi) each buffer lives in */
    int *ov_at, *ov;        /* free buffers meeting each free buffer in time (CSR) */
    int *pv_at, *pv;        /* pinned buffers meeting each free buffer in time (CSR) */
    int nsec;
    int *sm_at, *sm;        /* free buffers of each section (CSR), the unplaced ones first */
    int *sm_count;          /* per section: how many of its buffers are unplaced */
    int *bs_at, *sm_where;  /* where b is in the list of each section it lives in:
                               sm_where[bs_at[b] + q - sec_lo[b]] (an index into sm) */
    i64 *sec_sum0;          /* summed sizes of each section's free buffers */
    /* the search state */
    int *rank;
    i64 *offset;            /* -1: unplaced */
    i64 *min_offset;
    i64 *floor, *total;     /* per section: lowest offset left, unplaced bytes */
    int *pos;               /* each unplaced buffer's index in its frame's list */
    int *cuts;              /* per pair of adjacent sections: unplaced buffers spanning both */
    struct candidate *cand; /* a stack of candidate lists, one per depth */
    i64 *before, *after;    /* per section: the most unplaced bytes in a section of the frame
                               before it, and in it or after it (dfs, for beside) */
    size_t cand_len, cand_cap;
    long long ticks;        /* nodes since the start, to look at the clock now and then */
    int *witness;           /* per section, an unplaced buffer that may hold its floor down:
                               while it is unplaced and no higher, the floor cannot rise */
    trail offsets_trail, floors_trail;
    /* limits */
    long long nodes, node_limit;
    double deadline;
    i64 *best;              /* the solution found */
} search;

/* The lowest aligned offset >= base where buffer b clears the pinned buffers it meets. */
static i64 clear_of_pinned(const search *s, int b, i64 base) {
    if (s->align[b] == 1 && s->pv_at[b] == s->pv_at[b + 1]) return base;
    i64 at = align_up(base, s->align[b]);
    int moved = 1;
    while (moved) {
        moved = 0;
        for (int k = s->pv_at[b]; k < s->pv_at[b + 1]; k++) {
            int p = s->pv[k];
            i64 lo = s->pinned[p], hi = lo + s->size[p];
            if (at < hi && lo < at + s->size[b]) {
                at = align_up(hi, s->align[b]);
                moved = 1;
            }
        }
    }
    return at;
}

/* Sections: the stretches between consecutive distinct start/end times of free buffers. */
static int build_sections(search *s, const i64 *start, const i64 *end, const int *is_free) {
    int n = s->n, m = 0;
    i64 *times = malloc(sizeof(i64) * (size_t)(2 * n + 1));
    if (!times) return 0;
    for (int b = 0; b < n; b++)
        if (is_free[b]) {
            times[m++] = start[b];
            times[m++] = end[b];
        }
    qsort(times, (size_t)m, sizeof(i64), cmp_i64);
    int u = 0;
    for (int k = 0; k < m; k++)
        if (u == 0 || times[k] != times[u - 1]) times[u++] = times[k];
    s->nsec = u > 1 ? u - 1 : 0;
    for (int b = 0; b < n; b++) {
        if (!is_free[b]) {
            s->sec_lo[b] = s->sec_hi[b] = 0;
            continue;
        }
        /* binary search: index of start and end in times */
        int lo = 0, hi = u - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (times[mid] < start[b]) lo = mid + 1; else hi = mid;
        }
        s->sec_lo[b] = lo;
        lo = 0;
        hi = u - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (times[mid] < end[b]) lo = mid + 1; else hi = mid;
        }
        s->sec_hi[b] = lo;
    }
    free(times);
    int nsec = s->nsec;
    s->sm_at = calloc((size_t)nsec + 1, sizeof(int));
    s->sec_sum0 = calloc((size_t)nsec + 1, sizeof(i64));
    if (!s->sm_at || !s->sec_sum0) return 0;
    for (int b = 0; b < n; b++)
        for (int q = s->sec_lo[b]; q < s->sec_hi[b]; q++) {
            s->sm_at[q + 1]++;
            s->sec_sum0[q] += s->size[b];
        }
    for (int q = 0; q < nsec; q++) s->sm_at[q + 1] += s->sm_at[q];
    s->sm = malloc(sizeof(int) * (size_t)(s->sm_at[nsec] + 1));
    s->sm_count = calloc((size_t)nsec + 1, sizeof(int));
    s->sm_where = malloc(sizeof(int) * (size_t)(s->sm_at[nsec] + 1));
    s->bs_at = calloc((size_t)n + 1, sizeof(int));
    int *fill = malloc(sizeof(int) * (size_t)(nsec + 1));
    if (!s->sm || !s->sm_count || !s->sm_where || !s->bs_at || !fill) {
        free(fill);
        return 0;
    }
    for (int b = 0; b < n; b++) s->bs_at[b + 1] = s->bs_at[b] + s->sec_hi[b] - s->sec_lo[b];
    memcpy(fill, s->sm_at, sizeof(int) * (size_t)nsec);
    for (int b = 0; b < n; b++)
        for (int q = s->sec_lo[b]; q < s->sec_hi[b]; q++) {
            s->sm_where[s->bs_at[b] + q - s->sec_lo[b]] = fill[q];
            s->sm[fill[q]++] = b;
        }
    free(fill);
    return 1;
}

/* The pairs of buffers whose lifetimes meet: free-free into ov, free-pinned into pv. */
static int build_overlaps(search *s, const i64 *start, const i64 *end, const int *is_free) {
    int n = s->n;
    s->ov_at = calloc((size_t)n + 1, sizeof(int));
    s->pv_at = calloc((size_t)n + 1, sizeof(int));
    if (!s->ov_at || !s->pv_at) return 0;
    for (int pass = 0; pass < 2; pass++) {
        int *ov_fill = NULL, *pv_fill = NULL;
        if (pass == 1) {
            for (int b = 0; b < n; b++) {
                s->ov_at[b + 1] += s->ov_at[b];
                s->pv_at[b + 1] += s->pv_at[b];
            }
            s->ov = malloc(sizeof(int) * (size_t)(s->ov_at[n] + 1));
            s->pv = malloc(sizeof(int) * (size_t)(s->pv_at[n] + 1));
            ov_fill = malloc(sizeof(int) * (size_t)(n + 1));
            pv_fill = malloc(sizeof(int) * (size_t)(n + 1));
            if (!s->ov || !s->pv || !ov_fill || !pv_fill) {
                free(ov_fill);
                free(pv_fill);
                return 0;
            }
            memcpy(ov_fill, s->ov_at, sizeof(int) * (size_t)n);
            memcpy(pv_fill, s->pv_at, sizeof(int) * (size_t)n);
        }
        for (int b = 0; b < n; b++) {
            if (!is_free[b]) continue;
            for (int c = 0; c < n; c++) {
                if (c == b || !s->size[c] || !(start[c] < end[b] && start[b] < end[c])) continue;
                if (pass == 0) {
                    if (is_free[c]) s->ov_at[b + 1]++; else s->pv_at[b + 1]++;
                } else {
                    if (is_free[c]) s->ov[ov_fill[b]++] = c; else s->pv[pv_fill[b]++] = c;
                }
            }
        }
        free(ov_fill);
        free(pv_fill);
    }
    return 1;
}

/* Raises the floor of sections [lo, hi), where lowest offsets rose: no unplaced buffer there
   can go below the least of them. */
static int raise_floors(search *s, int lo, int hi) {
    for (int q = lo; q < hi; q++) {
        int w = s->witness[q];
        if (w >= 0 && s->offset[w] < 0 && s->min_offset[w] <= s->floor[q]) continue;
        i64 least = INT64_MAX;
        const int *unplaced = s->sm + s->sm_at[q];
        for (int m = 0; m < s->sm_count[q]; m++) {
            int d = unplaced[m];
            if (s->min_offset[d] < least) {
                least = s->min_offset[d];
                s->witness[q] = d;
            }
        }
        if (least != INT64_MAX && least > s->floor[q]) {
            if (!trail_push(&s->floors_trail, q, s->floor[q])) return 0;
            s->floor[q] = least;
        }
    }
    return 1;
}

/* Takes placed buffer b out of the unplaced part of its sections' lists: swapped with the
   last unplaced one, so that restoring is a count going up again (undone in reverse order). */
static void sections_remove(search *s, int b) {
    int *where = s->sm_where + s->bs_at[b] - s->sec_lo[b];
    for (int q = s->sec_lo[b]; q < s->sec_hi[b]; q++) {
        int last = s->sm_at[q] + --s->sm_count[q], at = where[q], d = s->sm[last];
        s->sm[at] = d;
        s->sm_where[s->bs_at[d] + q - s->sec_lo[d]] = at;
        s->sm[last] = b;
        where[q] = last;
    }
}

static void sections_restore(search *s, int b) {
    for (int q = s->sec_lo[b]; q < s->sec_hi[b]; q++) s->sm_count[q]++;
}

/* ---------------------------------------------------------------- preorders */

typedef struct { i64 key[3]; int b; } ranked;

static int cmp_ranked(const void *x, const void *y) {
    const ranked *a = x, *b = y;
    for (int k = 0; k < 3; k++)
        if (a->key[k] != b->key[k]) return a->key[k] < b->key[k] ? 1 : -1; /* descending */
    return (a->b > b->b) - (a->b < b->b);
}

/* Ranks the buffers of `list` by three keys, descending: preorder 0 (and 3) by (width, area,
   section total), 1 (and 4) by (section total, area, width), 2 (and 5) by (section total,
   width, area); the section total of a buffer is the most unplaced bytes in one of its
   sections now. */
static int rank_buffers(search *s, const int *list, int count) {
    ranked *r = malloc(sizeof(ranked) * (size_t)(count + 1));
    if (!r) return 0;
    for (int k = 0; k < count; k++) {
        int b = list[k];
        i64 width = s->end[b] - s->start[b], area = width * s->size[b], total = 0;
        for (int q = s->sec_lo[b]; q < s->sec_hi[b]; q++)
            if (s->total[q] > total) total = s->total[q];
        i64 keys[3][3] = {{width, area, total}, {total, area, width}, {total, width, area}};
        memcpy(r[k].key, keys[s->heuristic % 3], sizeof(r[k].key));
        r[k].b = b;
    }
    qsort(r, (size_t)count, sizeof(ranked), cmp_ranked);
    for (int k = 0; k < count; k++) s->rank[r[k].b] = k;
    free(r);
    return 1;
}

static inline int candidate_before(candidate x, candidate y) {
    return x.offset < y.offset || (x.offset == y.offset && x.rank < y.rank);
}

/* Sorts candidates by (offset, rank), a total order (ranks differ): Shell sort with Ciura's
   gaps, in place and with the comparison inlined (qsort's calls and copies took a tenth of the
   search). */
static void sort_candidates(candidate *list, int count) {
    static const int gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof(gaps) / sizeof(gaps[0]); g++) {
        int gap = gaps[g];
        for (int i = gap; i < count; i++) {
            candidate v = list[i];
            int j = i;
            while (j >= gap && candidate_before(v, list[j - gap])) {
                list[j] = list[j - gap];
                j -= gap;
            }
            list[j] = v;
        }
    }
}

/* The buffers left to place in one independent sub-problem, and its sections. Placing a
   buffer can cut a frame in time (no unplaced buffer spans two adjacent sections): each piece
   is then solved on its own, in a frame of its own, and no piece is searched again when
   another fails (they share nothing). */
typedef struct {
    int *list;
    int count;
    int sec_first, sec_last;
} frame;

/* Whether sections [lo, hi) still fit: each one's floor (at least `offset`, since later
   buffers go no lower) plus its unplaced bytes. */
static int sections_fit(const search *s, i64 offset, int lo, int hi) {
    for (int q = lo; q < hi; q++) {
        i64 floor = s->floor[q] > offset ? s->floor[q] : offset;
        if (s->total[q] && floor + s->total[q] > s->capacity) return 0;
    }
    return 1;
}

/* Removals are undone in reverse order, so a removed buffer waits just past the list's end. */
static void frame_remove(search *s, frame *f, int b) {
    int at = s->pos[b], last = f->list[--f->count];
    f->list[at] = last;
    s->pos[last] = at;
    f->list[f->count] = b;
    s->pos[b] = f->count;
}

static void frame_restore(frame *f) { f->count++; }

/* Places b at `at` and propagates; *covered says whether any unplaced buffer meets b in time.
   Returns 0 without memory. */
static int place(search *s, frame *f, int b, i64 at, int *covered) {
    s->offset[b] = at;
    frame_remove(s, f, b);
    i64 top = at + s->size[b];
    int lo = s->sec_lo[b], hi = s->sec_hi[b];
    *covered = 0;
    for (int k = s->ov_at[b]; k < s->ov_at[b + 1]; k++) {
        int c = s->ov[k];
        if (s->offset[c] >= 0) continue;
        *covered = 1;
        if (s->min_offset[c] >= top) continue;
        if (!trail_push(&s->offsets_trail, c, s->min_offset[c])) return 0;
        s->min_offset[c] = clear_of_pinned(s, c, top);
        /* every such c meets b, so the sections to revisit form one stretch */
        if (s->sec_lo[c] < lo) lo = s->sec_lo[c];
        if (s->sec_hi[c] > hi) hi = s->sec_hi[c];
    }
    for (int q = s->sec_lo[b]; q < s->sec_hi[b]; q++) {
        if (!trail_push(&s->floors_trail, q, s->floor[q])) return 0;
        s->floor[q] = top;
        s->total[q] -= s->size[b];
    }
    for (int q = s->sec_lo[b]; q + 1 < s->sec_hi[b]; q++) s->cuts[q]--;
    sections_remove(s, b);
    s->touched_lo = lo;
    s->touched_hi = hi;
    return raise_floors(s, lo, hi);
}

static void unplace(search *s, frame *f, int b, size_t offsets_mark, size_t floors_mark) {
    for (int q = s->sec_lo[b]; q + 1 < s->sec_hi[b]; q++) s->cuts[q]++;
    for (int q = s->sec_lo[b]; q < s->sec_hi[b]; q++) s->total[q] += s->size[b];
    sections_restore(s, b);
    /* the lengths in locals: written through i64 pointers, they would be reloaded each time */
    const change *floors = s->floors_trail.data, *offsets = s->offsets_trail.data;
    for (size_t k = s->floors_trail.len; k > floors_mark; k--)
        s->floor[floors[k - 1].idx] = floors[k - 1].old;
    s->floors_trail.len = floors_mark;
    for (size_t k = s->offsets_trail.len; k > offsets_mark; k--)
        s->min_offset[offsets[k - 1].idx] = offsets[k - 1].old;
    s->offsets_trail.len = offsets_mark;
    frame_restore(f);
    s->offset[b] = -1;
}

static int dfs(search *s, frame *f, i64 last_offset, int last_rank);

/* Solves each piece of frame `f` that a cut left after placing `b`, each from scratch (offset
   order restarts: the pieces are independent). Returns -1 when `b` cut nothing. */
static int decompose(search *s, frame *f, int b) {
    int first_cut = -1;
    if (f->count == 0) return -1; /* a leaf: dfs records it */
    for (int q = s->sec_lo[b]; q + 1 < s->sec_hi[b]; q++)
        if (s->cuts[q] == 0 && q + 1 > f->sec_first && q + 1 < f->sec_last) {
            first_cut = q;
            break;
        }
    if (first_cut < 0) return -1;
    /* the pieces: group the frame's unplaced buffers by first section, split at zero cuts */
    int n = f->count;
    int *pieces = malloc(sizeof(int) * (size_t)(n + 1));
    int *saved_rank = malloc(sizeof(int) * (size_t)(n + 1));
    int *ranked_ids = malloc(sizeof(int) * (size_t)(n + 1));
    if (!pieces || !saved_rank || !ranked_ids) {
        free(pieces);
        free(saved_rank);
        free(ranked_ids);
        return NO_MEMORY;
    }
    memcpy(pieces, f->list, sizeof(int) * (size_t)n);
    /* insertion by first section is enough: pieces are small and this is rare */
    for (int i = 1; i < n; i++) {
        int v = pieces[i], j = i - 1;
        while (j >= 0 && s->sec_lo[pieces[j]] > s->sec_lo[v]) {
            pieces[j + 1] = pieces[j];
            j--;
        }
        pieces[j + 1] = v;
    }
    int status = FOUND, k = 0;
    while (k < n && status == FOUND) {
        int from = k, reach = s->sec_hi[pieces[k]];
        while (k < n && s->sec_lo[pieces[k]] < reach) {
            if (s->sec_hi[pieces[k]] > reach) reach = s->sec_hi[pieces[k]];
            k++;
        }
        frame piece = {pieces + from, k - from, s->sec_lo[pieces[from]], reach};
        for (int i = 0; i < piece.count; i++) {
            s->pos[piece.list[i]] = i;
            saved_rank[from + i] = s->rank[piece.list[i]];
        }
        /* the search permutes piece.list: remember whose rank is whose */
        memcpy(ranked_ids + from, piece.list, sizeof(int) * (size_t)piece.count);
        /* a piece is a new problem: the first three preorders rank its buffers anew by what
           is left of it, the last three keep their ranks (each wins on some instances) */
        if (s->heuristic < 3 && !rank_buffers(s, piece.list, piece.count)) status = NO_MEMORY;
        else if (!sections_fit(s, 0, piece.sec_first, piece.sec_last))
            status = NOT_FOUND;
        else status = dfs(s, &piece, -1, -1);
        for (int i = 0; i < piece.count; i++) s->rank[ranked_ids[from + i]] = saved_rank[from + i];
    }
    for (int i = 0; i < f->count; i++) s->pos[f->list[i]] = i;
    free(pieces);
    free(saved_rank);
    free(ranked_ids);
    return status;
}

/* Whether candidate c can leave every section of the frame fitting, judged before placing
   it: the sections b does not live in must hold their unplaced bytes above c's offset (later
   buffers go no lower), and b's own ones above b's top. Most candidates fail here (the offset
   rose past what some section needs), which spares placing them. Every section fit (floor plus
   bytes) before, and a placement changes floors only in the sections it touches, which are
   checked after it (sections_fit): together as exact as checking every section of the frame
   after placing b. *covered: whether any unplaced buffer meets b in time (bytes are left in
   one of its sections: free buffers are nonempty). */
static int fits_before_placing(const search *s, const candidate *c, int *covered) {
    int b = c->b;
    i64 size = s->size[b], room = s->capacity - c->offset - size;
    int any = 0, fits = c->offset + c->beside <= s->capacity;
    for (int q = s->sec_lo[b]; q < s->sec_hi[b]; q++) {
        i64 left = s->total[q] - size;
        any |= left != 0;
        fits &= left <= room;
    }
    *covered = any;
    return fits;
}

/* Tries the candidates stored at s->cand[base, base + count) in order. */
static int try_candidates(search *s, frame *f, size_t base, int count) {
    for (int k = 0; k < count; k++) {
        candidate c = s->cand[base + (size_t)k]; /* copied: deeper levels may grow s->cand */
        size_t om = s->offsets_trail.len, fm = s->floors_trail.len;
        int covered, status = NOT_FOUND;
        if (!place(s, f, c.b, c.offset, &covered)) return NO_MEMORY;
        if (sections_fit(s, c.offset, s->touched_lo, s->touched_hi)) {
            status = decompose(s, f, c.b);
            if (status < 0) status = dfs(s, f, c.offset, c.rank);
        }
        unplace(s, f, c.b, om, fm);
        if (status != NOT_FOUND) return status;
        /* nothing left meets b in time, so b constrains no one: placing another buffer first
           cannot help where placing b first failed (MiniMalloc's "hatless" pruning) */
        if (!covered) break;
    }
    return NOT_FOUND;
}

/* s->before and s->after for the sections of frame f (see the search's fields). */
static void most_bytes_around(search *s, const frame *f) {
    i64 most = 0;
    for (int q = f->sec_first; q < f->sec_last; q++) {
        s->before[q] = most;
        most = max_i64(most, s->total[q]);
    }
    s->before[f->sec_last] = most;
    most = 0;
    for (int q = f->sec_last; q > f->sec_first; q--) {
        s->after[q] = most;
        most = max_i64(most, s->total[q - 1]);
    }
    s->after[f->sec_first] = most;
}

static int dfs(search *s, frame *f, i64 last_offset, int last_rank) {
    if (++s->nodes > s->node_limit) return ABORTED;
    /* a node of a large problem can take milliseconds: look at the clock often */
    if ((++s->ticks & 15) == 0 && now_seconds() > s->deadline) return TIMED_OUT;
    if (f->count == 0) {
        for (int b = 0; b < s->n; b++)
            if (s->offset[b] >= 0) s->best[b] = s->offset[b];
        return FOUND;
    }
    i64 min_top = INT64_MAX;
    for (int k = 0; k < f->count; k++) {
        int c = f->list[k];
        i64 t = s->min_offset[c] + s->size[c];
        if (t < min_top) min_top = t;
    }
    size_t base = s->cand_len;
    if (base + (size_t)f->count > s->cand_cap) {
        size_t cap = 2 * (base + (size_t)f->count);
        candidate *grown = realloc(s->cand, cap * sizeof(candidate));
        if (!grown) return NO_MEMORY;
        s->cand = grown;
        s->cand_cap = cap;
    }
    most_bytes_around(s, f);
    int count = 0;
    candidate stop = {INT64_MAX, 0, 0, -1}; /* the first hatless candidate that fails */
    for (int k = 0; k < f->count; k++) {
        int c = f->list[k];
        i64 at = s->min_offset[c];
        if (at >= min_top) continue; /* dominated: another buffer fits wholly below */
        if (at < last_offset || (at == last_offset && s->rank[c] < last_rank)) continue;
        if (at + s->size[c] > s->capacity) continue;
        i64 beside = max_i64(s->before[s->sec_lo[c]], s->after[s->sec_hi[c]]);
        candidate x = {at, beside, s->rank[c], c};
        int covered;
        /* the state is the same for each candidate tried here (each placement is undone), so
           those that fail can be dropped now, unsorted; but try_candidates would stop at the
           first that fails uncovered (hatless), so no later one may be tried */
        if (fits_before_placing(s, &x, &covered)) s->cand[base + (size_t)count++] = x;
        else if (!covered && candidate_before(x, stop)) stop = x;
    }
    if (stop.b >= 0) {
        int kept = 0;
        for (int k = 0; k < count; k++)
            if (candidate_before(s->cand[base + (size_t)k], stop))
                s->cand[base + (size_t)kept++] = s->cand[base + (size_t)k];
        count = kept;
    }
    if (count == 0) return NOT_FOUND;
    sort_candidates(s->cand + base, count);
    s->cand_len = base + (size_t)count;
    int status = try_candidates(s, f, base, count);
    s->cand_len = base;
    return status;
}

/* ---------------------------------------------------------------- one part, one order */

/* Resets the state to "only pinned buffers placed" for the buffers of one part (a stretch of
   time no buffer crosses) and searches it. */
static int solve_part(search *s, int *part, int count, int sec_first, int sec_last) {
    frame f = {part, count, sec_first, sec_last};
    for (int k = 0; k < count; k++) {
        int b = part[k];
        s->offset[b] = -1;
        s->min_offset[b] = clear_of_pinned(s, b, 0);
        s->pos[b] = k;
    }
    for (int q = sec_first; q < sec_last; q++) {
        s->floor[q] = 0;
        s->total[q] = s->sec_sum0[q];
        s->cuts[q] = 0;
        s->sm_count[q] = s->sm_at[q + 1] - s->sm_at[q];
    }
    for (int k = 0; k < count; k++)
        for (int q = s->sec_lo[part[k]]; q + 1 < s->sec_hi[part[k]]; q++) s->cuts[q]++;
    s->offsets_trail.len = s->floors_trail.len = 0;
    if (!rank_buffers(s, part, count) || !raise_floors(s, sec_first, sec_last)) return NO_MEMORY;
    if (!sections_fit(s, 0, sec_first, sec_last)) return NOT_FOUND;
    s->cand_len = 0;
    int status = dfs(s, &f, -1, -1);
    /* leave the part's buffers placed as found, so later parts see them as not unplaced */
    for (int k = 0; k < count; k++) s->offset[part[k]] = s->best[part[k]];
    return status;
}

static void free_search(search *s) {
    free(s->sec_lo); free(s->sec_hi); free(s->ov_at); free(s->ov); free(s->pv_at);
    free(s->pv); free(s->sm_at); free(s->sm);
    free(s->sm_count); free(s->sm_where); free(s->bs_at); free(s->sec_sum0); free(s->rank);
    free(s->offset); free(s->min_offset); free(s->floor); free(s->total); free(s->cuts);
    free(s->pos); free(s->witness); free(s->cand); free(s->before); free(s->after);
    free(s->offsets_trail.data); free(s->floors_trail.data);
}

/* Decides whether the free buffers (pinned[i] < 0, size > 0) fit in [0, capacity) around the
   pinned ones. Returns FOUND (offsets written for the free buffers), NOT_FOUND (proven: no
   packing fits), TIMED_OUT, ABORTED (node_limit reached) or NO_MEMORY. `stats[0]` receives the
   nodes visited. */
int loom_planner_decide(int n, const i64 *size, const i64 *start, const i64 *end,
                        const i64 *align, const i64 *pinned, i64 capacity, double seconds,
                        long long node_limit, i64 *offset, long long *stats) {
    search s;
    memset(&s, 0, sizeof(s));
    s.n = n;
    s.size = size;
    s.align = align;
    s.pinned = pinned;
    s.start = start;
    s.end = end;
    s.capacity = capacity;
    s.deadline = now_seconds() + seconds;
    stats[0] = 0;
    int *is_free = calloc((size_t)n + 1, sizeof(int));
    size_t nn = (size_t)n + 1;
    s.sec_lo = calloc(nn, sizeof(int));
    s.sec_hi = calloc(nn, sizeof(int));
    s.rank = calloc(nn, sizeof(int));
    s.offset = calloc(nn, sizeof(i64));
    s.min_offset = calloc(nn, sizeof(i64));
    s.pos = calloc(nn, sizeof(int));
    int *part = calloc(nn, sizeof(int));
    int *order = calloc(nn, sizeof(int));
    s.best = offset;
    int status = NO_MEMORY;
    if (!is_free || !s.sec_lo || !s.sec_hi || !s.rank || !s.offset || !s.min_offset ||
        !s.pos || !part || !order)
        goto done;
    for (int b = 0; b < n; b++) {
        is_free[b] = pinned[b] < 0 && size[b] > 0;
        s.offset[b] = is_free[b] ? -1 : (pinned[b] >= 0 ? pinned[b] : 0);
    }
    if (!build_sections(&s, start, end, is_free) || !build_overlaps(&s, start, end, is_free))
        goto done;
    size_t ns = (size_t)s.nsec + 1;
    s.floor = calloc(ns, sizeof(i64));
    s.total = calloc(ns, sizeof(i64));
    s.witness = malloc(ns * sizeof(int));
    s.before = malloc(ns * sizeof(i64));
    s.after = malloc(ns * sizeof(i64));
    s.cuts = calloc(ns, sizeof(int));
    if (!s.floor || !s.total || !s.witness || !s.cuts || !s.before || !s.after) goto done;
    for (size_t q = 0; q < ns; q++) s.witness[q] = -1;

    /* parts: buffers sorted by start; a part ends where no buffer crosses */
    int nfree = 0;
    for (int b = 0; b < n; b++)
        if (is_free[b]) order[nfree++] = b;
    /* sort free buffers by first section (counting sort over sections) */
    {
        int *bucket = calloc(ns + 1, sizeof(int));
        int *sorted = calloc(nn, sizeof(int));
        if (!bucket || !sorted) { free(bucket); free(sorted); goto done; }
        for (int k = 0; k < nfree; k++) bucket[s.sec_lo[order[k]] + 1]++;
        for (size_t q = 0; q < ns; q++) bucket[q + 1] += bucket[q];
        for (int k = 0; k < nfree; k++) sorted[bucket[s.sec_lo[order[k]]]++] = order[k];
        memcpy(order, sorted, sizeof(int) * (size_t)nfree);
        free(bucket);
        free(sorted);
    }
    int k = 0;
    status = FOUND;
    while (k < nfree && status == FOUND) {
        int first = k, reach = s.sec_hi[order[k]];
        while (k < nfree && s.sec_lo[order[k]] < reach) {
            if (s.sec_hi[order[k]] > reach) reach = s.sec_hi[order[k]];
            k++;
        }
        int count = k - first;
        memcpy(part, order + first, sizeof(int) * (size_t)count);
        int sec_first = s.sec_lo[part[0]];
        /* round robin over the preorders, doubling the node budget each round */
        long long budget = count > 8 ? count : 8;
        for (;;) {
            int heuristic;
            long long round_budget = budget;
            if (node_limit > 0 && round_budget > node_limit) round_budget = node_limit;
            for (heuristic = 0; heuristic < PREORDERS; heuristic++) {
                s.heuristic = heuristic;
                s.nodes = 0;
                s.node_limit = round_budget;
                status = solve_part(&s, part, count, sec_first, reach);
                stats[0] += s.nodes;
                if (status != ABORTED) break;
            }
            if (status != ABORTED) break;
            if (node_limit > 0 && budget >= node_limit) break;
            budget *= 2;
        }
    }
done:
    free(is_free);
    free(part);
    free(order);
    free_search(&s);
    return status;
}
