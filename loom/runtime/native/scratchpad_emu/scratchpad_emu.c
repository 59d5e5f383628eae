/* An example accelerator memory: a scratchpad that answers to the device addresses
 * [base, base + size). Host code cannot touch it; it moves data with mvin (host -> scratchpad)
 * and mvout (scratchpad -> host), whose every row is bounds-checked against the range. A
 * failed check sets loom's last error and returns -1: a Python exception, never a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void loom_set_last_error(const char *message);

static uint8_t *memory;
static uint64_t base_address, size_bytes;
static int64_t last[6]; /* direction (0 in, 1 out), host address, device address, rows,
                           row bytes, transfers so far */

int32_t spad_emu_configure(uint64_t base, uint64_t size) {
    uint8_t *m = calloc(size ? size : 1, 1);
    if (!m) {
        loom_set_last_error("scratchpad emulator: cannot allocate its memory");
        return -1;
    }
    free(memory);
    memory = m;
    base_address = base;
    size_bytes = size;
    memset(last, 0, sizeof last);
    return 0;
}

static int check(const char *op, uint64_t device, int32_t rows, int32_t row_bytes,
                 int32_t stride) {
    char message[256];
    if (!memory) {
        loom_set_last_error("scratchpad emulator: not configured (spad_emu_configure)");
        return -1;
    }
    if (rows < 0 || row_bytes < 0) {
        snprintf(message, sizeof message, "%s: negative size (%d rows of %d bytes)", op, rows,
                 row_bytes);
        loom_set_last_error(message);
        return -1;
    }
    for (int32_t r = 0; r < rows; ++r) {
        uint64_t start = device + (uint64_t)((int64_t)r * stride);
        if (start < base_address || start + (uint64_t)row_bytes > base_address + size_bytes) {
            snprintf(message, sizeof message,
                     "%s: device range [0x%llx, 0x%llx) is outside the scratchpad "
                     "[0x%llx, 0x%llx)", op, (unsigned long long)start,
                     (unsigned long long)(start + (uint64_t)row_bytes),
                     (unsigned long long)base_address,
                     (unsigned long long)(base_address + size_bytes));
            loom_set_last_error(message);
            return -1;
        }
    }
    return 0;
}

static void record(int64_t direction, const void *host, uint64_t device, int32_t rows,
                   int32_t row_bytes) {
    last[0] = direction;
    last[1] = (int64_t)(uintptr_t)host;
    last[2] = (int64_t)device;
    last[3] = rows;
    last[4] = row_bytes;
    last[5]++;
}

int32_t mvin(const void *src, uint64_t dst, int32_t rows, int32_t row_bytes,
             int32_t src_stride, int32_t dst_stride) {
    if (check("mvin", dst, rows, row_bytes, dst_stride) != 0) return -1;
    for (int32_t r = 0; r < rows; ++r)
        memcpy(memory + (dst - base_address) + (int64_t)r * dst_stride,
               (const uint8_t *)src + (int64_t)r * src_stride, (size_t)row_bytes);
    record(0, src, dst, rows, row_bytes);
    return 0;
}

int32_t mvout(uint64_t src, void *dst, int32_t rows, int32_t row_bytes, int32_t src_stride,
              int32_t dst_stride) {
    if (check("mvout", src, rows, row_bytes, src_stride) != 0) return -1;
    for (int32_t r = 0; r < rows; ++r)
        memcpy((uint8_t *)dst + (int64_t)r * dst_stride,
               memory + (src - base_address) + (int64_t)r * src_stride, (size_t)row_bytes);
    record(1, dst, src, rows, row_bytes);
    return 0;
}

/* For tests: read device bytes; the last transfer. */
int32_t spad_emu_read(uint64_t address, void *out, uint64_t n) {
    if (check("spad_emu_read", address, 1, (int32_t)n, 0) != 0) return -1;
    memcpy(out, memory + (address - base_address), (size_t)n);
    return 0;
}

void spad_emu_last_transfer(int64_t out[6]) { memcpy(out, last, sizeof last); }
