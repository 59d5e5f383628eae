/* Hexagon: process entry and the raw Linux system call. */
#include "../device.h"

/* The kernel (or qemu-hexagon) enters with r29, the stack pointer, at argc; loom_start gets
 * that address. The ABI wants an 8-byte aligned stack; r30 = 0 ends the frame chain. */
__asm__(".text\n"
        ".globl _start\n"
        ".type _start, @function\n"
        "_start:\n"
        "  r0 = r29\n"
        "  r29 = and(r29, #-8)\n"
        "  r30 = #0\n"
        "  call loom_start\n"
        ".size _start, . - _start\n");

/* trap0(#1): the number in r6, arguments in r0..r5, the result in r0. */
long loom_syscall(long number, long a, long b, long c, long d, long e, long f) {
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r3 __asm__("r3") = d;
    register long r4 __asm__("r4") = e;
    register long r5 __asm__("r5") = f;
    register long r6 __asm__("r6") = number;
    __asm__ volatile("trap0(#1)"
                     : "+r"(r0)
                     : "r"(r1), "r"(r2), "r"(r3), "r"(r4), "r"(r5), "r"(r6)
                     : "memory");
    return r0;
}

const char loom_arch_name[] = "hexagon";
