/* loom's device runtime: declarations shared by its files.
 *
 * A freestanding program (no libc) that serves docs/device-protocol.md on its standard input
 * and output, or on one TCP connection. The files, one concept each:
 *
 *   main.c        start-up: argv, regions, transport, then the command loop
 *   syscalls.c    the Linux system calls it needs, over the ISA's raw syscall instruction
 *   memory.c      memcpy / memmove / memset (also exported to modules)
 *   format.c      message text: a tiny printf for error messages
 *   errors.c      the last-error buffer (loom_set_last_error / loom_get_last_error)
 *   regions.c     the heap and the VTCM: mmap'd regions managed by loom_arena
 *   tasks.c       loom_parallel_launch (tasks run in turn) and loom_get_num_threads
 *   exports.c     the symbols modules may import
 *   loader.c      mapping position-independent ELF shared objects; the table of modules
 *   dynamic.c     their dynamic sections: relocations, imports, symbol lookup (module.h)
 *   transport.c   the byte stream: pipes or one accepted TCP connection
 *   protocol.c    framing and the command loop
 *   commands.c    one handler per command
 *   <isa>/        start-up and raw syscalls, ELF machine and relocation types, and the
 *                 compiler support routines generated code calls
 */
#ifndef LOOM_DEVICE_H
#define LOOM_DEVICE_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/loom_arena.h"

#define LOOM_PROTOCOL_VERSION 1
#define LOOM_DEFAULT_VTCM_BYTES (256u * 1024u)
#define LOOM_DEFAULT_HEAP_BYTES (64u * 1024u * 1024u)

/* -- per-ISA (device/<isa>/) -------------------------------------------------------------- */

/* The ISA's name, as HELLO reports it ("hexagon", "aarch64"). */
extern const char loom_arch_name[];
/* One raw Linux system call; returns the kernel's result (-errno on failure). */
long loom_syscall(long number, long a, long b, long c, long d, long e, long f);

/* The C entry point `_start` calls with the initial stack pointer (argc, argv, envp, auxv). */
void loom_start(long *initial_sp) __attribute__((noreturn));

/* -- memory functions (memory.c) ---------------------------------------------------------- */
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int value, size_t n);

/* -- message text (format.c) -------------------------------------------------------------- */
typedef struct {
    char *data;
    uint32_t capacity; /* bytes of data, including the terminating NUL */
    uint32_t length;
} loom_text;

void loom_text_init(loom_text *t, char *buffer, uint32_t capacity);
/* Append formatted text, truncating at the capacity. Conversions, all with explicit widths so
 * a message can never read the wrong vararg: %s a C string, %b a byte string (const void *,
 * uint64_t length), %u a uint64_t in decimal, %d an int64_t, %x a uint64_t as 0x..., %%. */
void loom_text_format(loom_text *t, const char *format, ...);
void loom_text_vformat(loom_text *t, const char *format, va_list ap);
size_t loom_strlen(const char *s);
/* 1 if the NUL-terminated string s equals the n bytes at p. */
int loom_streq_bytes(const char *s, const void *p, uint64_t n);

/* -- the last error (errors.c) ------------------------------------------------------------ */
void loom_set_last_error(const char *message);
const char *loom_get_last_error(void);
void loom_set_last_errorf(const char *format, ...);

/* -- system calls (syscalls.c) ------------------------------------------------------------ */
#define LOOM_PROT_READ 1
#define LOOM_PROT_WRITE 2
#define LOOM_PROT_EXEC 4

long loom_read(int fd, void *buffer, size_t n);
long loom_write(int fd, const void *buffer, size_t n);
int loom_close(int fd);
/* Anonymous private memory, or NULL. */
void *loom_map(size_t n, int prot);
/* Read-write memory: round_up(n, page size) bytes at a multiple of alignment (a power of two),
 * or NULL; loom_unmap(p, n) releases it. */
void *loom_map_aligned(size_t n, size_t alignment);
int loom_unmap(void *p, size_t n);
int loom_protect(void *p, size_t n, int prot);
uint64_t loom_now_ns(void);
void loom_exit(int status) __attribute__((noreturn));
/* Write a line to standard error (diagnostics; standard output may be the protocol stream). */
void loom_diagnostic(const char *format, ...);
/* The memory page size (from the auxiliary vector; set by loom_start). */
extern uintptr_t loom_page_size;

/* TCP, for --listen: the socket calls by their asm-generic numbers. */
int loom_socket_tcp(void);
int loom_bind_ipv4(int fd, uint32_t address_be, uint16_t port);
int loom_listen(int fd);
int loom_accept(int fd);
int loom_bound_port(int fd);

/* -- heap and VTCM (regions.c) ------------------------------------------------------------ */
enum { LOOM_MEMORY_HEAP = 0, LOOM_MEMORY_VTCM = 1 };

/* Map both regions; 0, or -1 with a message in `error`. */
int loom_regions_init(uint64_t heap_bytes, uint64_t vtcm_bytes, loom_text *error);
/* A block of `memory`, or NULL with a message in `error` (which may be NULL). */
void *loom_region_alloc(int memory, uint64_t nbytes, uint64_t alignment, loom_text *error);
int loom_region_free(int memory, uint64_t address, loom_text *error);
/* 1 if [address, address + n) lies inside one allocated block of the heap or the VTCM. */
int loom_region_allocated(uint64_t address, uint64_t n);
const loom_arena *loom_region_arena(int memory);

void *loom_alloc(int64_t nbytes, int64_t alignment);
void loom_free(void *p);
void *loom_vtcm_alloc(uint32_t nbytes, uint32_t alignment);
int32_t loom_vtcm_free(void *p);
void *HexagonBackendAllocateVTCM(uint32_t nbytes, uint32_t alignment);
int32_t HexagonBackendFreeVTCM(void *p);

/* -- parallel loops (tasks.c) ------------------------------------------------------------- */
typedef int32_t (*loom_task_fn)(int32_t task, int32_t num_tasks, void *closure);
int32_t loom_parallel_launch(loom_task_fn fn, void *closure, int32_t num_tasks);
int32_t loom_get_num_threads(void);

/* -- exports (exports.c, <isa>/exports.c) ------------------------------------------------- */
typedef struct {
    const char *name;
    void *address;
} loom_export;

/* Each table ends with an entry whose name is NULL. */
extern const loom_export loom_arch_exports[];
/* The address of the exported symbol named by the n bytes at name, or NULL. */
void *loom_find_export(const char *name, uint64_t n);

/* -- modules (loader.c, dynamic.c, <isa>/relocations.c) ------------------------------------ */
/* What a dynamic relocation stores in its word, in terms of the load bias B, the symbol's
 * address S and the addend A. */
typedef enum {
    LOOM_RELOC_UNKNOWN, /* the loader refuses the module */
    LOOM_RELOC_NONE,    /* nothing */
    LOOM_RELOC_RELATIVE, /* B + A */
    LOOM_RELOC_SYMBOL,  /* S + A */
} loom_reloc_kind;

/* 0 if an ELF file for e_machine / e_flags can run here, else -1 with a message. */
int loom_arch_check_elf(uint32_t machine, uint32_t flags, loom_text *error);
loom_reloc_kind loom_arch_relocation_kind(uint32_t type);

/* Load the shared object in [file, file + size); its module id (>= 1), or 0 with a message. */
uint32_t loom_module_load(const uint8_t *file, uint64_t size, loom_text *error);
int loom_module_unload(uint32_t id, loom_text *error);
/* The address of the function `name` (n bytes) defined by module `id`, or 0 with a message. */
uint64_t loom_module_lookup(uint32_t id, const void *name, uint64_t n, loom_text *error);
/* 1 if address is in the code of a loaded module (what CALL and TIME may call). */
int loom_module_is_code(uint64_t address);
/* 1 if [address, address + n) lies in a readable segment of a loaded module. */
int loom_module_readable(uint64_t address, uint64_t n);

/* -- the byte stream (transport.c) -------------------------------------------------------- */
void loom_transport_pipes(void);
/* Listen on "HOST:PORT" (an IPv4 address or localhost), accept one connection; 0 or -1. */
int loom_transport_listen(const char *host_port, loom_text *error);
/* 0, or -1 at the end of the stream or on an error. */
int loom_transport_read(void *buffer, uint64_t n);
int loom_transport_write(const void *buffer, uint64_t n);
int loom_transport_discard(uint64_t n);

/* -- the protocol (protocol.c, commands.c) ------------------------------------------------ */
enum {
    LOOM_CMD_HELLO = 0,
    LOOM_CMD_ALLOC = 1,
    LOOM_CMD_FREE = 2,
    LOOM_CMD_WRITE = 3,
    LOOM_CMD_READ = 4,
    LOOM_CMD_LOAD_MODULE = 5,
    LOOM_CMD_LOOKUP = 6,
    LOOM_CMD_CALL = 7,
    LOOM_CMD_TIME = 8,
    LOOM_CMD_STATS = 9,
    LOOM_CMD_UNLOAD_MODULE = 10,
    LOOM_CMD_QUIT = 11,
    LOOM_CMD_COUNT
};

enum { LOOM_STATUS_OK = 0, LOOM_STATUS_ERROR = 1 };

/* What a command answers: a payload (in `buffer`, or elsewhere, as READ's bytes are) or an
 * error message. */
typedef struct {
    const uint8_t *payload;
    uint64_t size;
    uint8_t *buffer; /* LOOM_REPLY_BYTES bytes a handler may fill */
    loom_text message;
} loom_reply;

#define LOOM_REPLY_BYTES 16384

/* A handler gets the request's payload in memory (except WRITE and LOAD_MODULE, which read it
 * from the stream themselves: `in` is NULL and `size` bytes are waiting) and returns a status. */
typedef int (*loom_command_fn)(const uint8_t *in, uint64_t size, loom_reply *reply);

int loom_cmd_hello(const uint8_t *in, uint64_t size, loom_reply *reply);
int loom_cmd_alloc(const uint8_t *in, uint64_t size, loom_reply *reply);
int loom_cmd_free(const uint8_t *in, uint64_t size, loom_reply *reply);
int loom_cmd_write(const uint8_t *in, uint64_t size, loom_reply *reply);
int loom_cmd_read(const uint8_t *in, uint64_t size, loom_reply *reply);
int loom_cmd_load_module(const uint8_t *in, uint64_t size, loom_reply *reply);
int loom_cmd_lookup(const uint8_t *in, uint64_t size, loom_reply *reply);
int loom_cmd_call(const uint8_t *in, uint64_t size, loom_reply *reply);
int loom_cmd_time(const uint8_t *in, uint64_t size, loom_reply *reply);
int loom_cmd_stats(const uint8_t *in, uint64_t size, loom_reply *reply);
int loom_cmd_unload_module(const uint8_t *in, uint64_t size, loom_reply *reply);
int loom_cmd_quit(const uint8_t *in, uint64_t size, loom_reply *reply);

/* Serve requests until QUIT or the end of the stream; returns the exit status. */
int loom_serve(void);
/* Set by QUIT: the loop exits after sending the response. */
extern int loom_quit_requested;

/* Little-endian fields at any alignment (Hexagon traps on unaligned loads). */
static inline uint32_t loom_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t loom_get_u64(const uint8_t *p) {
    return (uint64_t)loom_get_u32(p) | (uint64_t)loom_get_u32(p + 4) << 32;
}
static inline void loom_put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline void loom_put_u64(uint8_t *p, uint64_t v) {
    loom_put_u32(p, (uint32_t)v);
    loom_put_u32(p + 4, (uint32_t)(v >> 32));
}
#endif
