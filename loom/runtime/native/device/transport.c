/* The byte stream the protocol runs over: standard input and output (pipes, as qemu-user
 * passes them through), or one accepted TCP connection for --listen. */
#include "device.h"

static int in_fd = 0, out_fd = 1;

void loom_transport_pipes(void) {
    in_fd = 0;
    out_fd = 1;
}

/* "A.B.C.D" (or "localhost") into a big-endian IPv4 address; 0 or -1. */
static int parse_ipv4(const char *s, uint64_t n, uint32_t *address_be) {
    if (loom_streq_bytes("localhost", s, n)) s = "127.0.0.1", n = 9;
    uint32_t parts[4] = {0, 0, 0, 0};
    int part = 0, digits = 0;
    for (uint64_t i = 0; i < n; ++i) {
        if (s[i] == '.' && digits > 0 && part < 3) {
            ++part;
            digits = 0;
        } else if (s[i] >= '0' && s[i] <= '9' && digits < 3) {
            parts[part] = parts[part] * 10 + (uint32_t)(s[i] - '0');
            ++digits;
        } else {
            return -1;
        }
    }
    if (part != 3 || digits == 0 || parts[0] > 255 || parts[1] > 255 || parts[2] > 255 ||
        parts[3] > 255)
        return -1;
    /* the bytes in network order are the address's bytes in memory order */
    uint8_t bytes[4] = {(uint8_t)parts[0], (uint8_t)parts[1], (uint8_t)parts[2],
                        (uint8_t)parts[3]};
    memcpy(address_be, bytes, 4);
    return 0;
}

int loom_transport_listen(const char *host_port, loom_text *error) {
    uint64_t n = loom_strlen(host_port), colon = n;
    for (uint64_t i = 0; i < n; ++i)
        if (host_port[i] == ':') colon = i;
    uint32_t address_be, port = 0;
    int bad = colon == n || colon + 1 == n || colon + 6 < n ||
              parse_ipv4(host_port, colon, &address_be) != 0;
    for (uint64_t i = colon + 1; !bad && i < n; ++i) {
        bad = host_port[i] < '0' || host_port[i] > '9';
        port = port * 10 + (uint32_t)(host_port[i] - '0');
    }
    if (bad || port > 65535) {
        loom_text_format(error, "--listen wants IPV4:PORT (like 127.0.0.1:5555), not '%s'",
                         host_port);
        return -1;
    }
    int fd = loom_socket_tcp();
    if (fd < 0 || loom_bind_ipv4(fd, address_be, (uint16_t)port) != 0 || loom_listen(fd) != 0) {
        loom_text_format(error, "cannot listen on %s", host_port);
        return -1;
    }
    /* the actual port (port 0 asks the kernel for a free one); a client may wait for this line */
    loom_diagnostic("listening on %b:%u", host_port, colon, (uint64_t)loom_bound_port(fd));
    int connection = loom_accept(fd);
    loom_close(fd);
    if (connection < 0) {
        loom_text_format(error, "accepting a connection on %s failed", host_port);
        return -1;
    }
    in_fd = out_fd = connection;
    return 0;
}

int loom_transport_read(void *buffer, uint64_t n) {
    uint8_t *p = (uint8_t *)buffer;
    while (n > 0) {
        size_t chunk = n > 0x40000000u ? 0x40000000u : (size_t)n;
        long got = loom_read(in_fd, p, chunk);
        if (got <= 0) return -1;
        p += got;
        n -= (uint64_t)got;
    }
    return 0;
}

int loom_transport_write(const void *buffer, uint64_t n) {
    const uint8_t *p = (const uint8_t *)buffer;
    while (n > 0) {
        size_t chunk = n > 0x40000000u ? 0x40000000u : (size_t)n;
        long put = loom_write(out_fd, p, chunk);
        if (put <= 0) return -1;
        p += put;
        n -= (uint64_t)put;
    }
    return 0;
}

int loom_transport_discard(uint64_t n) {
    uint8_t scratch[4096];
    while (n > 0) {
        uint64_t chunk = n > sizeof scratch ? sizeof scratch : n;
        if (loom_transport_read(scratch, chunk) != 0) return -1;
        n -= chunk;
    }
    return 0;
}
