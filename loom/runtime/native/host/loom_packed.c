/* Calls from compiled code into functions registered by name in the Python process
 * (loom.register_func): TVM's call_packed. Compiled code calls loom_call_packed with the
 * function's name, a text describing each argument ("float32[4,8];int32[16]") and up to
 * LOOM_PACKED_MAX_ARGS data pointers; the dispatcher installed by loom/runtime/packed_callback.py
 * (a ctypes callback) finds the function, wraps the pointers as arrays and calls it. It returns
 * 0, or -1 with the host runtime's last error set. */
#include <stdint.h>
#include <stddef.h>

#define LOOM_PACKED_MAX_ARGS 8

typedef int32_t (*loom_packed_dispatch_fn)(const char *name, const char *types, int32_t nargs,
                                           void **args);

static loom_packed_dispatch_fn dispatch;

void loom_packed_set_dispatch(loom_packed_dispatch_fn fn) { dispatch = fn; }

int32_t loom_call_packed(const char *name, const char *types, int32_t nargs, void *a0, void *a1,
                         void *a2, void *a3, void *a4, void *a5, void *a6, void *a7) {
    void *args[LOOM_PACKED_MAX_ARGS] = {a0, a1, a2, a3, a4, a5, a6, a7};
    if (dispatch == NULL || nargs < 0 || nargs > LOOM_PACKED_MAX_ARGS) {
        return -1;
    }
    return dispatch(name, types, nargs, args);
}
