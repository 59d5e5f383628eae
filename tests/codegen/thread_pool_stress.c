/* Many short launches on loom's thread pool, with the launcher's stack reused between them,
 * some launches with a failing task. Built with -fsanitize=thread by test_parallel.py: a pool
 * thread that touches a finished launch's job (it lives on the launcher's stack) is reported. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int32_t (*loom_task_fn)(int32_t task, int32_t num_tasks, void *closure);
int32_t loom_parallel_launch(loom_task_fn fn, void *closure, int32_t num_tasks);
void loom_set_last_error(const char *message);
const char *loom_get_last_error(void);

static int32_t count_task(int32_t task, int32_t num_tasks, void *closure) {
    (void)num_tasks;
    __atomic_fetch_add((int64_t *)closure, task + 1, __ATOMIC_RELAXED);
    return 0;
}

static int32_t failing_task(int32_t task, int32_t num_tasks, void *closure) {
    (void)num_tasks;
    (void)closure;
    if (task != 1) return 0;
    loom_set_last_error("task 1 failed");
    return -1;
}

__attribute__((noinline)) static int overwrite_stack(void) {
    volatile char buf[4096];
    memset((char *)buf, 0x5a, sizeof buf);
    return buf[100];
}

int main(void) {
    int64_t sum = 0, expected = 0;
    for (int i = 0; i < 20000; ++i) {
        int32_t tasks = 2 + i % 3;
        if (loom_parallel_launch(count_task, &sum, tasks) != 0) return 2;
        expected += (int64_t)tasks * (tasks + 1) / 2;
        if (i % 100 == 0) {
            if (loom_parallel_launch(failing_task, NULL, 4) == 0) return 3;
            if (strcmp(loom_get_last_error(), "task 1 failed") != 0) return 4;
        }
        overwrite_stack();
    }
    printf("sum %lld expected %lld\n", (long long)sum, (long long)expected);
    return sum == expected ? 0 : 5;
}
