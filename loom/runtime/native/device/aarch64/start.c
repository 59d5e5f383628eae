/* AArch64: process entry and the raw Linux system call. */
#include "../device.h"

/* The kernel (or qemu-aarch64) enters with sp at argc, already 16-byte aligned; loom_start
 * gets that address. x29 = 0 and x30 = 0 end the frame chain. */
__asm__(".text\n"
        ".globl _start\n"
        ".type _start, %function\n"
        "_start:\n"
        "  mov x29, #0\n"
        "  mov x30, #0\n"
        "  mov x0, sp\n"
        "  bl loom_start\n"
        ".size _start, . - _start\n");

/* svc #0: the number in x8, arguments in x0..x5, the result in x0. */
long loom_syscall(long number, long a, long b, long c, long d, long e, long f) {
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    register long x8 __asm__("x8") = number;
    __asm__ volatile("svc #0"
                     : "+r"(x0)
                     : "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5), "r"(x8)
                     : "memory");
    return x0;
}

const char loom_arch_name[] = "aarch64";
