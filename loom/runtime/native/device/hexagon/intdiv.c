/* Hexagon: integer division. The ISA has no divide instruction; LLVM calls these routines for
 * `/` and `%` on 32- and 64-bit integers (in generated kernels, and in this runtime).
 *
 * Restoring shift-subtract division, written without `/` or `%` (the compiler would turn
 * them back into calls to these very functions). Division by zero is undefined in C; here it
 * gives an all-ones quotient and the dividend as remainder, and never traps. The most negative
 * value divided by -1 wraps, as the two's-complement hardware of other ISAs does. */
#include <stdint.h>

static uint32_t udivmod32(uint32_t n, uint32_t d, uint32_t *remainder) {
    if (d == 0 || n < d) {
        *remainder = n;
        return d == 0 ? 0xffffffffu : 0;
    }
    /* line the divisor's top bit up with the dividend's, then one quotient bit per step */
    int shift = __builtin_clz(d) - __builtin_clz(n);
    uint32_t q = 0;
    d <<= shift;
    for (int i = 0; i <= shift; ++i) {
        q <<= 1;
        if (n >= d) {
            n -= d;
            q |= 1;
        }
        d >>= 1;
    }
    *remainder = n;
    return q;
}

static uint64_t udivmod64(uint64_t n, uint64_t d, uint64_t *remainder) {
    if (d == 0 || n < d) {
        *remainder = n;
        return d == 0 ? ~(uint64_t)0 : 0;
    }
    if ((n >> 32) == 0) { /* both fit 32 bits: the shorter loop */
        uint32_t r;
        uint64_t q = udivmod32((uint32_t)n, (uint32_t)d, &r);
        *remainder = r;
        return q;
    }
    int shift = __builtin_clzll(d) - __builtin_clzll(n);
    uint64_t q = 0;
    d <<= shift;
    for (int i = 0; i <= shift; ++i) {
        q <<= 1;
        if (n >= d) {
            n -= d;
            q |= 1;
        }
        d >>= 1;
    }
    *remainder = n;
    return q;
}

static uint32_t magnitude32(int32_t v) { return v < 0 ? 0u - (uint32_t)v : (uint32_t)v; }
static uint64_t magnitude64(int64_t v) { return v < 0 ? 0u - (uint64_t)v : (uint64_t)v; }

uint32_t __hexagon_udivsi3(uint32_t n, uint32_t d) {
    uint32_t r;
    return udivmod32(n, d, &r);
}

uint32_t __hexagon_umodsi3(uint32_t n, uint32_t d) {
    uint32_t r;
    udivmod32(n, d, &r);
    return r;
}

/* C truncates toward zero: the quotient is negative when the signs differ, and the remainder
 * takes the dividend's sign. */
int32_t __hexagon_divsi3(int32_t n, int32_t d) {
    uint32_t r, q = udivmod32(magnitude32(n), magnitude32(d), &r);
    return (int32_t)((n < 0) != (d < 0) ? 0u - q : q);
}

int32_t __hexagon_modsi3(int32_t n, int32_t d) {
    uint32_t r;
    udivmod32(magnitude32(n), magnitude32(d), &r);
    return (int32_t)(n < 0 ? 0u - r : r);
}

uint64_t __hexagon_udivdi3(uint64_t n, uint64_t d) {
    uint64_t r;
    return udivmod64(n, d, &r);
}

uint64_t __hexagon_umoddi3(uint64_t n, uint64_t d) {
    uint64_t r;
    udivmod64(n, d, &r);
    return r;
}

int64_t __hexagon_divdi3(int64_t n, int64_t d) {
    uint64_t r, q = udivmod64(magnitude64(n), magnitude64(d), &r);
    return (int64_t)((n < 0) != (d < 0) ? 0u - q : q);
}

int64_t __hexagon_moddi3(int64_t n, int64_t d) {
    uint64_t r;
    udivmod64(magnitude64(n), magnitude64(d), &r);
    return (int64_t)(n < 0 ? 0u - r : r);
}
