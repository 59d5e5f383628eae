/* For the ThreadSanitizer stress drivers (tests/thread_sanitizer.py puts tests/ on the include
 * path): run one function on several threads at once. */
#ifndef LOOM_TESTS_STRESS_THREADS_H
#define LOOM_TESTS_STRESS_THREADS_H

#include <pthread.h>

#define STRESS_MAX_THREADS 16

/* Starts `count` threads of `fn`, each given its number 1..count as the argument, waits for all,
 * and returns how many failed (returned non-NULL) or could not start. */
static int run_threads(void *(*fn)(void *), int count) {
    pthread_t threads[STRESS_MAX_THREADS];
    int started = 0, failures = 0;
    if (count > STRESS_MAX_THREADS) return count;
    for (long i = 0; i < count; ++i)
        if (pthread_create(&threads[started], NULL, fn, (void *)(i + 1)) == 0) ++started;
    for (int i = 0; i < started; ++i) {
        void *result;
        pthread_join(threads[i], &result);
        failures += result != NULL;
    }
    return failures + (count - started);
}

#endif /* LOOM_TESTS_STRESS_THREADS_H */
