/* memcpy, memmove and memset: the runtime uses them and exports them to modules (LLVM turns
 * copy and fill loops, and large struct copies, into calls to them).
 *
 * The build passes -fno-builtin, which stops clang from recognising these loops as the idioms
 * they implement and compiling them into calls to themselves; `no_builtin` says the same here
 * so the file stays correct whatever the flags. Word copies are used only when both pointers
 * are word aligned: Hexagon faults on unaligned word accesses. */
#include "device.h"

typedef uintptr_t word;
#define WORD_BYTES sizeof(word)
#define ALIGNED(p) (((uintptr_t)(p) & (WORD_BYTES - 1)) == 0)

__attribute__((no_builtin)) void *memcpy(void *dst, const void *src, size_t n) {
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *s = (const uint8_t *)src;
    if (ALIGNED(d) && ALIGNED(s)) {
        for (; n >= WORD_BYTES; n -= WORD_BYTES, d += WORD_BYTES, s += WORD_BYTES)
            *(word *)d = *(const word *)s;
    }
    for (; n > 0; --n) *d++ = *s++;
    return dst;
}

/* Copies forward when the destination is below the source, backward otherwise, so an
 * overlapping range is never read after it was written. */
__attribute__((no_builtin)) void *memmove(void *dst, const void *src, size_t n) {
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *s = (const uint8_t *)src;
    if (d == s || n == 0) return dst;
    if ((uintptr_t)d < (uintptr_t)s) return memcpy(dst, src, n);
    d += n;
    s += n;
    if (ALIGNED(d) && ALIGNED(s)) {
        for (; n >= WORD_BYTES; n -= WORD_BYTES) {
            d -= WORD_BYTES;
            s -= WORD_BYTES;
            *(word *)d = *(const word *)s;
        }
    }
    while (n-- > 0) *--d = *--s;
    return dst;
}

__attribute__((no_builtin)) void *memset(void *dst, int value, size_t n) {
    uint8_t *d = (uint8_t *)dst;
    uint8_t byte = (uint8_t)value;
    for (; n > 0 && !ALIGNED(d); --n) *d++ = byte;
    word pattern = (word)0x0101010101010101ull * byte;
    for (; n >= WORD_BYTES; n -= WORD_BYTES, d += WORD_BYTES) *(word *)d = pattern;
    for (; n > 0; --n) *d++ = byte;
    return dst;
}
