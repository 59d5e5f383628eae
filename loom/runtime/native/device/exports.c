/* The symbols a module may import: the runtime API of docs/device-protocol.md and the memory
 * functions here, plus the ISA's compiler support routines (<isa>/exports.c). A module that
 * imports anything else is refused when it loads, naming the symbol. */
#include "device.h"

#define EXPORT(f) {#f, (void *)f}

static const loom_export runtime_exports[] = {
    EXPORT(loom_set_last_error),
    EXPORT(loom_get_last_error),
    EXPORT(loom_alloc),
    EXPORT(loom_free),
    EXPORT(loom_parallel_launch),
    EXPORT(loom_get_num_threads),
    EXPORT(HexagonBackendAllocateVTCM),
    EXPORT(HexagonBackendFreeVTCM),
    EXPORT(loom_vtcm_alloc),
    EXPORT(loom_vtcm_free),
    EXPORT(memcpy),
    EXPORT(memmove),
    EXPORT(memset),
    {0, 0},
};

static void *find_in(const loom_export *table, const char *name, uint64_t n) {
    for (; table->name; ++table)
        if (loom_streq_bytes(table->name, name, n)) return table->address;
    return 0;
}

void *loom_find_export(const char *name, uint64_t n) {
    void *p = find_in(runtime_exports, name, n);
    return p ? p : find_in(loom_arch_exports, name, n);
}
