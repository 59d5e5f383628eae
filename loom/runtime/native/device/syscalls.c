/* The Linux system calls the runtime needs, by their asm-generic numbers (Hexagon and AArch64
 * share them), over the ISA's raw syscall in <isa>/start.c. Results are the kernel's: a
 * negative value in [-4095, -1] is -errno. */
#include "device.h"

enum {
    SYS_CLOSE = 57,
    SYS_READ = 63,
    SYS_WRITE = 64,
    SYS_EXIT_GROUP = 94,
    SYS_CLOCK_GETTIME = 113,
    SYS_SOCKET = 198,
    SYS_BIND = 200,
    SYS_LISTEN = 201,
    SYS_ACCEPT = 202,
    SYS_GETSOCKNAME = 204,
    SYS_SETSOCKOPT = 208,
    SYS_MUNMAP = 215,
    SYS_MMAP = 222,
    SYS_MPROTECT = 226,
};

#define LOOM_EINTR 4
#define MAP_PRIVATE 0x02
#define MAP_ANONYMOUS 0x20
#define CLOCK_MONOTONIC 1

uintptr_t loom_page_size = 4096;

static int failed(long result) { return result < 0 && result >= -4095; }

long loom_read(int fd, void *buffer, size_t n) {
    long r;
    do r = loom_syscall(SYS_READ, fd, (long)buffer, (long)n, 0, 0, 0);
    while (r == -LOOM_EINTR);
    return r;
}

long loom_write(int fd, const void *buffer, size_t n) {
    long r;
    do r = loom_syscall(SYS_WRITE, fd, (long)buffer, (long)n, 0, 0, 0);
    while (r == -LOOM_EINTR);
    return r;
}

int loom_close(int fd) { return (int)loom_syscall(SYS_CLOSE, fd, 0, 0, 0, 0, 0); }

void *loom_map(size_t n, int prot) {
    long r = loom_syscall(SYS_MMAP, 0, (long)n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return failed(r) ? 0 : (void *)r;
}

static uintptr_t round_up(uintptr_t v, uintptr_t alignment) {
    return (v + alignment - 1) & ~(alignment - 1);
}

/* Map size + alignment bytes, keep the aligned part (size rounded up to pages), unmap the rest:
 * mmap itself only promises page alignment. */
void *loom_map_aligned(size_t size, size_t alignment) {
    if (alignment < loom_page_size) alignment = loom_page_size;
    uintptr_t kept = round_up(size, loom_page_size);
    if (kept < size || kept + alignment < kept) return 0;
    uint8_t *p = loom_map(kept + alignment, LOOM_PROT_READ | LOOM_PROT_WRITE);
    if (!p) return 0;
    uint8_t *start = (uint8_t *)round_up((uintptr_t)p, alignment);
    if (start > p) loom_unmap(p, (uintptr_t)(start - p));
    if (p + alignment > start) loom_unmap(start + kept, (uintptr_t)(p + alignment - start));
    return start;
}

int loom_unmap(void *p, size_t n) {
    return failed(loom_syscall(SYS_MUNMAP, (long)p, (long)n, 0, 0, 0, 0)) ? -1 : 0;
}

int loom_protect(void *p, size_t n, int prot) {
    return failed(loom_syscall(SYS_MPROTECT, (long)p, (long)n, prot, 0, 0, 0)) ? -1 : 0;
}

/* `long` fields: the kernel's timespec for this syscall number on both 32- and 64-bit ISAs. */
uint64_t loom_now_ns(void) {
    struct {
        long tv_sec;
        long tv_nsec;
    } ts = {0, 0};
    loom_syscall(SYS_CLOCK_GETTIME, CLOCK_MONOTONIC, (long)&ts, 0, 0, 0, 0);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void loom_exit(int status) {
    for (;;) loom_syscall(SYS_EXIT_GROUP, status, 0, 0, 0, 0, 0);
}

void loom_diagnostic(const char *format, ...) {
    char buffer[512];
    loom_text t;
    va_list ap;
    loom_text_init(&t, buffer, sizeof buffer - 1);
    loom_text_format(&t, "loom-device-runtime: ");
    va_start(ap, format);
    loom_text_vformat(&t, format, ap);
    va_end(ap);
    buffer[t.length] = '\n';
    loom_write(2, buffer, t.length + 1);
}

/* -- TCP ---------------------------------------------------------------------------------- */
#define AF_INET 2
#define SOCK_STREAM 1
#define SOL_SOCKET 1
#define SO_REUSEADDR 2

typedef struct {
    uint16_t family;
    uint8_t port_be[2];
    uint32_t address_be;
    uint8_t zero[8];
} sockaddr_in;

int loom_socket_tcp(void) {
    long fd = loom_syscall(SYS_SOCKET, AF_INET, SOCK_STREAM, 0, 0, 0, 0);
    if (failed(fd)) return -1;
    int one = 1; /* a restarted runtime can listen again at once on the same port */
    loom_syscall(SYS_SETSOCKOPT, fd, SOL_SOCKET, SO_REUSEADDR, (long)&one, sizeof one, 0);
    return (int)fd;
}

int loom_bind_ipv4(int fd, uint32_t address_be, uint16_t port) {
    sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.family = AF_INET;
    a.port_be[0] = (uint8_t)(port >> 8);
    a.port_be[1] = (uint8_t)port;
    a.address_be = address_be;
    return failed(loom_syscall(SYS_BIND, fd, (long)&a, sizeof a, 0, 0, 0)) ? -1 : 0;
}

int loom_listen(int fd) { return failed(loom_syscall(SYS_LISTEN, fd, 1, 0, 0, 0, 0)) ? -1 : 0; }

int loom_accept(int fd) {
    long r;
    do r = loom_syscall(SYS_ACCEPT, fd, 0, 0, 0, 0, 0);
    while (r == -LOOM_EINTR);
    return failed(r) ? -1 : (int)r;
}

int loom_bound_port(int fd) {
    sockaddr_in a;
    uint32_t size = sizeof a;
    memset(&a, 0, sizeof a);
    if (failed(loom_syscall(SYS_GETSOCKNAME, fd, (long)&a, (long)&size, 0, 0, 0))) return -1;
    return a.port_be[0] << 8 | a.port_be[1];
}
