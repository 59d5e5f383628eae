/* One handler per command of docs/device-protocol.md. Each checks its payload's size and every
 * address it is given before touching memory, and answers LOOM_STATUS_OK with a payload or
 * LOOM_STATUS_ERROR with a message (-1: the stream broke while it read its payload). */
#include "device.h"

#define MAX_ARGS 1024
#define MAX_MODULE_BYTES (64u * 1024u * 1024u)
#define MAX_TIME_REPEAT ((LOOM_REPLY_BYTES - 4) / 8)

typedef int32_t (*entry_fn)(void *const *args);

static int fail(loom_reply *r, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    loom_text_vformat(&r->message, format, ap);
    va_end(ap);
    return LOOM_STATUS_ERROR;
}

static int wrong_size(loom_reply *r, const char *command, uint64_t size, const char *expected) {
    return fail(r, "%s payload has %u bytes; it holds %s", command, size, expected);
}

static int memory_kind(uint32_t memory, loom_reply *r) {
    if (memory == LOOM_MEMORY_HEAP || memory == LOOM_MEMORY_VTCM) return 0;
    return fail(r, "unknown memory %u (0 is the heap, 1 the VTCM)", (uint64_t)memory);
}

int loom_cmd_hello(const uint8_t *in, uint64_t size, loom_reply *r) {
    (void)in;
    if (size != 0) return wrong_size(r, "HELLO", size, "nothing");
    uint8_t *out = r->buffer;
    loom_text description;
    loom_put_u32(out, LOOM_PROTOCOL_VERSION);
    loom_put_u32(out + 4, sizeof(void *));
    loom_put_u64(out + 8, loom_region_arena(LOOM_MEMORY_VTCM)->capacity);
    loom_put_u64(out + 16, loom_region_arena(LOOM_MEMORY_HEAP)->capacity);
    loom_text_init(&description, (char *)out + 24, 128);
    loom_text_format(&description, "loom-device-runtime %u %s", (uint64_t)LOOM_PROTOCOL_VERSION,
                     loom_arch_name);
    r->size = 24 + description.length;
    return LOOM_STATUS_OK;
}

int loom_cmd_alloc(const uint8_t *in, uint64_t size, loom_reply *r) {
    if (size != 20) return wrong_size(r, "ALLOC", size, "u64 bytes, u64 alignment, u32 memory");
    uint64_t nbytes = loom_get_u64(in), alignment = loom_get_u64(in + 8);
    uint32_t memory = loom_get_u32(in + 16);
    if (memory_kind(memory, r) != 0) return LOOM_STATUS_ERROR;
    if (alignment & (alignment - 1))
        return fail(r, "alignment %u is not a power of two", alignment);
    void *p = loom_region_alloc((int)memory, nbytes, alignment ? alignment : 1, &r->message);
    if (!p) return LOOM_STATUS_ERROR;
    loom_put_u64(r->buffer, (uint64_t)(uintptr_t)p);
    r->size = 8;
    return LOOM_STATUS_OK;
}

int loom_cmd_free(const uint8_t *in, uint64_t size, loom_reply *r) {
    if (size != 12) return wrong_size(r, "FREE", size, "u64 address, u32 memory");
    uint32_t memory = loom_get_u32(in + 8);
    if (memory_kind(memory, r) != 0) return LOOM_STATUS_ERROR;
    return loom_region_free((int)memory, loom_get_u64(in), &r->message) == 0 ? LOOM_STATUS_OK
                                                                             : LOOM_STATUS_ERROR;
}

/* The data goes straight from the stream into the block, once the range is known to be one. */
int loom_cmd_write(const uint8_t *in, uint64_t size, loom_reply *r) {
    (void)in;
    uint8_t field[8];
    if (size < 8) {
        if (loom_transport_discard(size) != 0) return -1;
        return wrong_size(r, "WRITE", size, "u64 address, then the data");
    }
    if (loom_transport_read(field, 8) != 0) return -1;
    uint64_t address = loom_get_u64(field), n = size - 8;
    if (!loom_region_allocated(address, n)) {
        if (loom_transport_discard(n) != 0) return -1;
        return fail(r, "WRITE of %u bytes at %x is outside every heap and VTCM allocation", n,
                    address);
    }
    return loom_transport_read((void *)(uintptr_t)address, n) == 0 ? LOOM_STATUS_OK : -1;
}

/* The response's payload is the device memory itself: no copy. */
int loom_cmd_read(const uint8_t *in, uint64_t size, loom_reply *r) {
    if (size != 16) return wrong_size(r, "READ", size, "u64 address, u64 bytes");
    uint64_t address = loom_get_u64(in), n = loom_get_u64(in + 8);
    if (!loom_region_allocated(address, n) && !loom_module_readable(address, n))
        return fail(r, "READ of %u bytes at %x is outside every heap and VTCM allocation and "
                       "every loaded module",
                    n, address);
    r->payload = (const uint8_t *)(uintptr_t)address;
    r->size = n;
    return LOOM_STATUS_OK;
}

/* The file goes into a scratch mapping of its size, which is gone once the module is loaded. */
int loom_cmd_load_module(const uint8_t *in, uint64_t size, loom_reply *r) {
    (void)in;
    if (size == 0 || size > MAX_MODULE_BYTES) {
        if (loom_transport_discard(size) != 0) return -1;
        return fail(r, "LOAD_MODULE payload has %u bytes; a module has 1 to %u", size,
                    (uint64_t)MAX_MODULE_BYTES);
    }
    uint8_t *file = loom_map((size_t)size, LOOM_PROT_READ | LOOM_PROT_WRITE);
    if (!file) {
        if (loom_transport_discard(size) != 0) return -1;
        return fail(r, "cannot map %u bytes to receive the module", size);
    }
    if (loom_transport_read(file, size) != 0) return -1;
    uint32_t id = loom_module_load(file, size, &r->message);
    loom_unmap(file, (size_t)size);
    if (id == 0) return LOOM_STATUS_ERROR;
    loom_put_u32(r->buffer, id);
    r->size = 4;
    return LOOM_STATUS_OK;
}

int loom_cmd_lookup(const uint8_t *in, uint64_t size, loom_reply *r) {
    if (size < 4) return wrong_size(r, "LOOKUP", size, "u32 module id, then the name");
    uint64_t address = loom_module_lookup(loom_get_u32(in), in + 4, size - 4, &r->message);
    if (address == 0) return LOOM_STATUS_ERROR;
    loom_put_u64(r->buffer, address);
    r->size = 8;
    return LOOM_STATUS_OK;
}

/* args[] for an entry point: each argument a device address (docs/architecture.md, decision 4). */
static void *args[MAX_ARGS];

/* Check `function` and the `n` u64 arguments at `in`, and fill args[]; 0 or an error. */
static int prepare_call(const char *command, uint64_t function, uint64_t n, const uint8_t *in,
                        loom_reply *r) {
    if (n > MAX_ARGS) return fail(r, "%s with %u arguments; at most %u", command, n,
                                  (uint64_t)MAX_ARGS);
    if (!loom_module_is_code(function))
        return fail(r, "%s of %x, which is not in the code of a loaded module", command,
                    function);
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t a = loom_get_u64(in + 8 * i);
        if (a > UINTPTR_MAX)
            return fail(r, "%s argument %u is %x, wider than a %u-byte device address", command,
                        i, a, (uint64_t)sizeof(void *));
        args[i] = (void *)(uintptr_t)a;
    }
    return 0;
}

static int call_failed(loom_reply *r, int32_t status) {
    const char *error = loom_get_last_error();
    return fail(r, "function returned %d: %s", (int64_t)status,
                error[0] ? error : "(it set no error message)");
}

int loom_cmd_call(const uint8_t *in, uint64_t size, loom_reply *r) {
    if (size < 12 || size - 12 != 8 * (uint64_t)loom_get_u32(in + 8))
        return wrong_size(r, "CALL", size, "u64 function, u32 n, n x u64 argument");
    uint64_t function = loom_get_u64(in);
    if (prepare_call("CALL", function, loom_get_u32(in + 8), in + 12, r) != 0)
        return LOOM_STATUS_ERROR;
    loom_set_last_error("");
    int32_t status = ((entry_fn)(uintptr_t)function)(args);
    if (status != 0) return call_failed(r, status);
    loom_put_u32(r->buffer, 0);
    r->size = 4;
    return LOOM_STATUS_OK;
}

int loom_cmd_time(const uint8_t *in, uint64_t size, loom_reply *r) {
    if (size < 20 || size - 20 != 8 * (uint64_t)loom_get_u32(in + 16))
        return wrong_size(r, "TIME", size,
                          "u64 function, u32 number, u32 repeat, u32 n, n x u64 argument");
    uint64_t function = loom_get_u64(in);
    uint32_t number = loom_get_u32(in + 8), repeat = loom_get_u32(in + 12);
    if (number == 0 || repeat == 0 || repeat > MAX_TIME_REPEAT)
        return fail(r, "TIME wants number >= 1 and 1 <= repeat <= %u (got %u and %u)",
                    (uint64_t)MAX_TIME_REPEAT, (uint64_t)number, (uint64_t)repeat);
    if (prepare_call("TIME", function, loom_get_u32(in + 16), in + 20, r) != 0)
        return LOOM_STATUS_ERROR;
    entry_fn f = (entry_fn)(uintptr_t)function;
    loom_set_last_error("");
    loom_put_u32(r->buffer, repeat);
    for (uint32_t k = 0; k < repeat; ++k) {
        uint64_t start = loom_now_ns();
        for (uint32_t i = 0; i < number; ++i) {
            int32_t status = f(args);
            if (status != 0) return call_failed(r, status);
        }
        loom_put_u64(r->buffer + 4 + 8 * k, loom_now_ns() - start);
    }
    r->size = 4 + 8 * (uint64_t)repeat;
    return LOOM_STATUS_OK;
}

int loom_cmd_stats(const uint8_t *in, uint64_t size, loom_reply *r) {
    (void)in;
    if (size != 0) return wrong_size(r, "STATS", size, "nothing");
    int64_t stats[LOOM_ARENA_NSTATS];
    const int memories[2] = {LOOM_MEMORY_VTCM, LOOM_MEMORY_HEAP};
    for (int m = 0; m < 2; ++m) {
        loom_arena_stats(loom_region_arena(memories[m]), stats);
        for (int i = 0; i < LOOM_ARENA_NSTATS; ++i)
            loom_put_u64(r->buffer + 8 * (m * LOOM_ARENA_NSTATS + i), (uint64_t)stats[i]);
    }
    r->size = 2 * 8 * LOOM_ARENA_NSTATS;
    return LOOM_STATUS_OK;
}

int loom_cmd_unload_module(const uint8_t *in, uint64_t size, loom_reply *r) {
    if (size != 4) return wrong_size(r, "UNLOAD_MODULE", size, "u32 module id");
    return loom_module_unload(loom_get_u32(in), &r->message) == 0 ? LOOM_STATUS_OK
                                                                  : LOOM_STATUS_ERROR;
}

int loom_cmd_quit(const uint8_t *in, uint64_t size, loom_reply *r) {
    (void)in;
    if (size != 0) return wrong_size(r, "QUIT", size, "nothing");
    loom_quit_requested = 1;
    return LOOM_STATUS_OK;
}
