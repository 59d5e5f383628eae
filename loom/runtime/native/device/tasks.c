/* Parallel loops on a single-threaded device: the tasks run in turn in the calling thread, in
 * order, stopping at the first that fails (its last error stays for the caller). */
#include "device.h"

int32_t loom_parallel_launch(loom_task_fn fn, void *closure, int32_t num_tasks) {
    if (num_tasks <= 0) num_tasks = loom_get_num_threads();
    for (int32_t task = 0; task < num_tasks; ++task) {
        int32_t status = fn(task, num_tasks, closure);
        if (status != 0) return status;
    }
    return 0;
}

int32_t loom_get_num_threads(void) { return 1; }
