/* Start-up: read the command line and the auxiliary vector, map the heap and the VTCM, open
 * the stream, then serve until QUIT or the end of the stream.
 *
 *   loom-device-runtime [--listen HOST:PORT] [--vtcm BYTES] [--heap BYTES]
 *
 * Without --listen the protocol runs on standard input and output; diagnostics go to standard
 * error. Exit status: 0 after QUIT or when the client closes the stream between requests, 1
 * when the stream breaks inside a request, 2 for a bad command line or start-up failure. */
#include "device.h"

#define AT_NULL 0
#define AT_PAGESZ 6

static const char usage[] = "usage: loom-device-runtime [--listen HOST:PORT] [--vtcm BYTES] "
                            "[--heap BYTES]";

static int parse_bytes(const char *s, uint64_t *out) {
    uint64_t v = 0;
    if (!s || !*s) return -1;
    for (; *s; ++s) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10) return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

/* A start-up failure: the reason and the usage on standard error, exit status 2. */
static void die(const char *format, const char *value) __attribute__((noreturn));
static void die(const char *format, const char *value) {
    char buffer[512];
    loom_text t;
    loom_text_init(&t, buffer, sizeof buffer);
    loom_text_format(&t, format, value);
    loom_diagnostic("%s\n%s", buffer, usage);
    loom_exit(2);
}

void loom_start(long *initial_sp) {
    long argc = initial_sp[0];
    char **argv = (char **)(initial_sp + 1);
    char **envp = argv + argc + 1;
    while (*envp) ++envp;
    for (long *aux = (long *)(envp + 1); aux[0] != AT_NULL; aux += 2)
        if (aux[0] == AT_PAGESZ && aux[1] > 0) loom_page_size = (uintptr_t)aux[1];

    const char *listen = 0;
    uint64_t vtcm_bytes = LOOM_DEFAULT_VTCM_BYTES, heap_bytes = LOOM_DEFAULT_HEAP_BYTES;
    for (long i = 1; i < argc; i += 2) {
        const char *option = argv[i], *value = argv[i + 1]; /* argv[argc] is NULL */
        if (!value) die("%s wants a value", option);
        if (loom_streq_bytes("--listen", option, 8)) {
            listen = value;
        } else if (loom_streq_bytes("--vtcm", option, 6)) {
            if (parse_bytes(value, &vtcm_bytes) != 0) die("--vtcm wants bytes, not '%s'", value);
        } else if (loom_streq_bytes("--heap", option, 6)) {
            if (parse_bytes(value, &heap_bytes) != 0) die("--heap wants bytes, not '%s'", value);
        } else {
            die("unknown argument '%s'", option);
        }
    }

    char buffer[256];
    loom_text error;
    loom_text_init(&error, buffer, sizeof buffer);
    if (loom_regions_init(heap_bytes, vtcm_bytes, &error) != 0) die("%s", buffer);
    if (listen) {
        if (loom_transport_listen(listen, &error) != 0) die("%s", buffer);
    } else {
        loom_transport_pipes();
    }
    loom_exit(loom_serve());
}
