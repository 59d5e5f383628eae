/* loom's host runtime: the last error, workspace memory, and a thread pool for parallel loops.
 *
 * Generated kernels call these functions; Python loads this library once (RTLD_GLOBAL) and the
 * kernels link against it. A parallel launch from inside a parallel task, or while another
 * thread's launch is running, runs its tasks serially in the calling thread: nested parallel
 * loops never deadlock and never oversubscribe the machine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#define LOOM_ERROR_SIZE 1024
#define LOOM_MAX_THREADS 256

static __thread char last_error[LOOM_ERROR_SIZE];

void loom_set_last_error(const char *message) {
    snprintf(last_error, sizeof last_error, "%s", message ? message : "");
}

const char *loom_get_last_error(void) { return last_error; }

/* Workspace memory: aligned, reported through the last error when it cannot be had. */
void *loom_alloc(int64_t nbytes, int64_t alignment) {
    void *p = NULL;
    if (alignment < (int64_t)sizeof(void *)) alignment = sizeof(void *);
    if (nbytes <= 0) nbytes = 1;
    if (posix_memalign(&p, (size_t)alignment, (size_t)nbytes) != 0) {
        snprintf(last_error, sizeof last_error,
                 "loom_alloc: cannot allocate %lld bytes aligned to %lld",
                 (long long)nbytes, (long long)alignment);
        return NULL;
    }
    return p;
}

void loom_free(void *p) { free(p); }

/* -- environment ------------------------------------------------------------------------ */
/* $name as a decimal integer in [lo, hi]: 0 with *value set (to `fallback` when the variable is
 * unset or empty), or -1 with *value = fallback and a message naming the variable and the
 * values it takes. Nothing but digits is accepted: no sign, space, suffix or overflow. */
int loom_env_integer(const char *name, long long lo, long long hi, long long fallback,
                     long long *value, char *message, size_t size) {
    const char *text = getenv(name);
    *value = fallback;
    if (!text || !*text) return 0;
    char *end = (char *)text;
    long long v = 0;
    errno = 0;
    if (*text >= '0' && *text <= '9') v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
        snprintf(message, size, "$%s is '%.64s': it must be a whole number from %lld to %lld",
                 name, text, lo, hi);
        return -1;
    }
    *value = v;
    return 0;
}

/* 0 if $LOOM_NUM_THREADS is unset or valid, else -1 and why (loom_vtcm.c checks
 * $LOOM_VTCM_SIZE: loom_vtcm_check_environment). */
int32_t loom_check_environment(char *message, int32_t size) {
    long long n;
    return loom_env_integer("LOOM_NUM_THREADS", 1, LOOM_MAX_THREADS, 1, &n, message,
                            (size_t)size) != 0
               ? -1
               : 0;
}

/* -- thread pool ------------------------------------------------------------------------ */
typedef int32_t (*loom_task_fn)(int32_t task, int32_t num_tasks, void *closure);

typedef struct {
    loom_task_fn fn;
    void *closure;
    int32_t num_tasks;
    atomic_int next_task;
    atomic_int done_tasks;
    atomic_int failed;
    atomic_int workers; /* pool threads holding this job; changed under pool_lock */
    unsigned fp_modes; /* the launcher's floating-point modes, which its tasks run with */
    char error[LOOM_ERROR_SIZE];
} job_t;

/* A thread's floating-point modes that a model may change for its run (x86's MXCSR: flush to
 * zero, denormals are zero; fast_math.py, -fp-flush-denormals): a pool thread runs a job's
 * tasks with its launcher's, then goes back to its own. */
static unsigned fp_modes_get(void) {
#if defined(__x86_64__) || defined(__i386__)
    return _mm_getcsr();
#else
    return 0;
#endif
}

static void fp_modes_set(unsigned modes) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(modes);
#else
    (void)modes;
#endif
}

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t work_done = PTHREAD_COND_INITIALIZER;
static job_t *current_job;
static _Atomic uint64_t generation; /* written under pool_lock; read without it to spin */
static int pool_size = 1;          /* threads including the caller */
static atomic_int active_threads;  /* threads a launch uses by default */
static __thread int in_parallel_task;

static void run_tasks(job_t *job) {
    int task;
    in_parallel_task = 1;
    while ((task = atomic_fetch_add(&job->next_task, 1)) < job->num_tasks) {
        if (job->fn(task, job->num_tasks, job->closure) != 0 &&
            atomic_exchange(&job->failed, 1) == 0) {
            snprintf(job->error, sizeof job->error, "%s", last_error);
        }
        if (atomic_fetch_add(&job->done_tasks, 1) + 1 == job->num_tasks) {
            pthread_mutex_lock(&pool_lock);
            pthread_cond_broadcast(&work_done);
            pthread_mutex_unlock(&pool_lock);
        }
    }
    in_parallel_task = 0;
}

/* How long an idle thread (a worker waiting for work, a launcher for its workers) polls before
 * it sleeps on a condition variable: a model's kernels launch one after another, microseconds
 * apart, and a sleeping thread takes tens of microseconds to wake. */
#define SPIN_NANOSECONDS 100000

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
}

/* Polls until `done(arg)` or SPIN_NANOSECONDS pass; whether it is done. */
static int spin_until(int (*done)(const void *), const void *arg) {
    uint64_t deadline = 0;
    for (unsigned i = 0;; ++i) {
        if (done(arg)) return 1;
        cpu_relax();
        if ((i & 255) == 255) {
            uint64_t t = now_ns();
            if (deadline == 0) deadline = t + SPIN_NANOSECONDS;
            else if (t >= deadline) return 0;
        }
    }
}

static int new_generation(const void *seen) {
    return atomic_load_explicit(&generation, memory_order_acquire) != *(const uint64_t *)seen;
}

static void *worker_main(void *arg) {
    (void)arg;
    uint64_t seen = 0;
    for (;;) {
        spin_until(new_generation, &seen);
        pthread_mutex_lock(&pool_lock);
        while (generation == seen) pthread_cond_wait(&work_ready, &pool_lock);
        seen = generation;
        job_t *job = current_job;
        if (job) job->workers++;
        pthread_mutex_unlock(&pool_lock);
        if (!job) continue;
        unsigned own_modes = fp_modes_get();
        fp_modes_set(job->fp_modes);
        run_tasks(job);
        fp_modes_set(own_modes);
        /* The job lives on the launcher's stack: the launcher returns only after every worker
         * that picked it up has let go of it here. */
        pthread_mutex_lock(&pool_lock);
        if (--job->workers == 0) pthread_cond_broadcast(&work_done);
        pthread_mutex_unlock(&pool_lock);
    }
    return NULL;
}

static int machine_threads(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void pool_init(void) {
    int machine = machine_threads();
    if (machine > LOOM_MAX_THREADS) machine = LOOM_MAX_THREADS;
    long long wanted;
    char message[256];
    if (loom_env_integer("LOOM_NUM_THREADS", 1, LOOM_MAX_THREADS, machine, &wanted, message,
                         sizeof message) != 0)
        fprintf(stderr, "loom: %s; using %d threads\n", message, machine);
    int n = (int)wanted;
    pool_size = n;
    atomic_store(&active_threads, n);
    for (int i = 1; i < n; ++i) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 8u << 20);
        if (pthread_create(&t, &attr, worker_main, NULL) == 0) {
            pthread_detach(t);
        } else {
            pool_size = i;
            atomic_store(&active_threads, i);
            pthread_attr_destroy(&attr);
            break;
        }
        pthread_attr_destroy(&attr);
    }
}

int32_t loom_get_num_threads(void) {
    pthread_once(&pool_once, pool_init);
    return atomic_load(&active_threads);
}

/* Use at most n threads (1..pool size) in later launches; returns the number now used. */
int32_t loom_set_num_threads(int32_t n) {
    pthread_once(&pool_once, pool_init);
    if (n < 1) n = 1;
    if (n > pool_size) n = pool_size;
    atomic_store(&active_threads, n);
    return n;
}

static int32_t run_serially(loom_task_fn fn, void *closure, int32_t num_tasks) {
    int saved = in_parallel_task;
    in_parallel_task = 1;
    int32_t status = 0;
    for (int32_t t = 0; t < num_tasks && status == 0; ++t) status = fn(t, num_tasks, closure);
    in_parallel_task = saved;
    return status;
}

/* Whether every task of the job ran and every worker that took it let go of it. */
static int job_finished(const void *arg) {
    const job_t *job = arg;
    return atomic_load(&job->done_tasks) >= job->num_tasks && atomic_load(&job->workers) == 0;
}

/* Run fn(task, num_tasks, closure) for task in [0, num_tasks) on the pool; num_tasks <= 0
 * means one task per active thread. Returns 0, or non-zero with the first failing task's
 * error as the last error. */
int32_t loom_parallel_launch(loom_task_fn fn, void *closure, int32_t num_tasks) {
    pthread_once(&pool_once, pool_init);
    int threads = atomic_load(&active_threads);
    if (num_tasks <= 0) num_tasks = threads;
    if (threads <= 1 || num_tasks == 1 || in_parallel_task ||
        pthread_mutex_trylock(&launch_lock) != 0) {
        return run_serially(fn, closure, num_tasks);
    }
    job_t job = {.fn = fn, .closure = closure, .num_tasks = num_tasks, .fp_modes = fp_modes_get()};
    atomic_init(&job.next_task, 0);
    atomic_init(&job.done_tasks, 0);
    atomic_init(&job.failed, 0);
    atomic_init(&job.workers, 0);
    pthread_mutex_lock(&pool_lock);
    current_job = &job;
    generation++;
    pthread_cond_broadcast(&work_ready);
    pthread_mutex_unlock(&pool_lock);
    run_tasks(&job);
    spin_until(job_finished, &job);
    pthread_mutex_lock(&pool_lock);
    while (!job_finished(&job)) {
        pthread_cond_wait(&work_done, &pool_lock);
    }
    current_job = NULL;
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&launch_lock);
    if (atomic_load(&job.failed)) {
        snprintf(last_error, sizeof last_error, "%s", job.error);
        return -1;
    }
    return 0;
}
