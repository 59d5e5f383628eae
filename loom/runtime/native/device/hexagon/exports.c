/* Hexagon: the compiler support routines modules may import, beside the runtime API. The list
 * is what LLVM's Hexagon backend calls for v66 code (found by compiling kernels with clang 14
 * and llvmlite's LLVM and reading their undefined symbols): integer division, the
 * floating-point operations v66 has no instruction for, half-precision conversions, and its
 * aligned-memcpy entry. */
#include "../device.h"

uint32_t __hexagon_udivsi3(uint32_t, uint32_t);
uint32_t __hexagon_umodsi3(uint32_t, uint32_t);
int32_t __hexagon_divsi3(int32_t, int32_t);
int32_t __hexagon_modsi3(int32_t, int32_t);
uint64_t __hexagon_udivdi3(uint64_t, uint64_t);
uint64_t __hexagon_umoddi3(uint64_t, uint64_t);
int64_t __hexagon_divdi3(int64_t, int64_t);
int64_t __hexagon_moddi3(int64_t, int64_t);
float __hexagon_divsf3(float, float);
double __hexagon_divdf3(double, double);
double __hexagon_muldf3(double, double);
float __hexagon_sqrtf(float);
double __hexagon_sqrt(double);
float __extendhfsf2(uint16_t);
uint16_t __truncsfhf2(float);
uint16_t __truncdfhf2(double);

/* LLVM calls this for a copy it knows is 8-byte aligned, at least 32 bytes and a multiple of 8
 * (struct copies, copy loops); memcpy's aligned path does exactly that work. */
void *__hexagon_memcpy_likely_aligned_min32bytes_mult8bytes(void *dst, const void *src,
                                                              size_t n) {
    return memcpy(dst, src, n);
}

#define EXPORT(f) {#f, (void *)f}

const loom_export loom_arch_exports[] = {
    EXPORT(__hexagon_udivsi3),
    EXPORT(__hexagon_umodsi3),
    EXPORT(__hexagon_divsi3),
    EXPORT(__hexagon_modsi3),
    EXPORT(__hexagon_udivdi3),
    EXPORT(__hexagon_umoddi3),
    EXPORT(__hexagon_divdi3),
    EXPORT(__hexagon_moddi3),
    EXPORT(__hexagon_divsf3),
    EXPORT(__hexagon_divdf3),
    EXPORT(__hexagon_muldf3),
    EXPORT(__hexagon_sqrtf),
    EXPORT(__hexagon_sqrt),
    /* llvm.sqrt.f64 becomes a call to libm's sqrt on Hexagon; the correctly rounded root is
     * the same function */
    {"sqrt", (void *)__hexagon_sqrt},
    {"sqrtf", (void *)__hexagon_sqrtf},
    EXPORT(__extendhfsf2),
    EXPORT(__truncsfhf2),
    EXPORT(__truncdfhf2),
    EXPORT(__hexagon_memcpy_likely_aligned_min32bytes_mult8bytes),
    {0, 0},
};
