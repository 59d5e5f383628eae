/* Framing (docs/device-protocol.md): read a request header, bring its payload in, run the
 * command's handler, send exactly one response. Sizes from the wire are never trusted: a
 * payload larger than its command can use is read and thrown away, then refused, so the next
 * request is still found; only a bad magic leaves the stream unframed. */
#include "device.h"

/* Enough for every command but WRITE and LOAD_MODULE (which stream their payloads): a CALL
 * with thousands of arguments, a LOOKUP of a long name. */
#define SMALL_PAYLOAD_LIMIT 65536

typedef struct {
    const char *name;
    loom_command_fn run;
    int streams; /* the handler reads its own payload from the stream */
} command;

static const command commands[LOOM_CMD_COUNT] = {
    [LOOM_CMD_HELLO] = {"HELLO", loom_cmd_hello, 0},
    [LOOM_CMD_ALLOC] = {"ALLOC", loom_cmd_alloc, 0},
    [LOOM_CMD_FREE] = {"FREE", loom_cmd_free, 0},
    [LOOM_CMD_WRITE] = {"WRITE", loom_cmd_write, 1},
    [LOOM_CMD_READ] = {"READ", loom_cmd_read, 0},
    [LOOM_CMD_LOAD_MODULE] = {"LOAD_MODULE", loom_cmd_load_module, 1},
    [LOOM_CMD_LOOKUP] = {"LOOKUP", loom_cmd_lookup, 0},
    [LOOM_CMD_CALL] = {"CALL", loom_cmd_call, 0},
    [LOOM_CMD_TIME] = {"TIME", loom_cmd_time, 0},
    [LOOM_CMD_STATS] = {"STATS", loom_cmd_stats, 0},
    [LOOM_CMD_UNLOAD_MODULE] = {"UNLOAD_MODULE", loom_cmd_unload_module, 0},
    [LOOM_CMD_QUIT] = {"QUIT", loom_cmd_quit, 0},
};

int loom_quit_requested;

static uint8_t request_payload[SMALL_PAYLOAD_LIMIT];
static uint8_t reply_payload[LOOM_REPLY_BYTES];
static char reply_message[1280]; /* room for the last error (1024) and what frames it */

static int send_response(uint32_t status, const void *payload, uint64_t size) {
    uint8_t header[16] = {'L', 'M', 'R', 'S'};
    loom_put_u32(header + 4, status);
    loom_put_u64(header + 8, size);
    if (loom_transport_write(header, sizeof header) != 0) return -1;
    return loom_transport_write(payload, size);
}

/* One request: 0 when it was answered, 1 when the stream ended between requests (the client
 * closed it), -1 when it ended or broke inside one. */
static int serve_one(void) {
    uint8_t header[16];
    if (loom_transport_read(header, 1) != 0) return 1;
    if (loom_transport_read(header + 1, sizeof header - 1) != 0) return -1;
    uint32_t number = loom_get_u32(header + 4);
    uint64_t size = loom_get_u64(header + 8);
    loom_reply reply = {.payload = reply_payload, .size = 0, .buffer = reply_payload};
    loom_text_init(&reply.message, reply_message, sizeof reply_message);
    int status = LOOM_STATUS_ERROR;

    if (header[0] != 'L' || header[1] != 'M' || header[2] != 'R' || header[3] != 'Q') {
        /* the length cannot be trusted either: nothing is skipped */
        loom_text_format(&reply.message, "request header starts with %x, not the magic 'LMRQ'; "
                                         "the stream is out of step, close the session",
                         (uint64_t)loom_get_u32(header));
    } else if (number >= LOOM_CMD_COUNT) {
        if (loom_transport_discard(size) != 0) return -1;
        loom_text_format(&reply.message, "unknown command %u (this runtime knows 0 to %u)",
                         (uint64_t)number, (uint64_t)(LOOM_CMD_COUNT - 1));
    } else if (commands[number].streams) {
        status = commands[number].run(0, size, &reply);
    } else if (size > SMALL_PAYLOAD_LIMIT) {
        if (loom_transport_discard(size) != 0) return -1;
        loom_text_format(&reply.message, "%s payload of %u bytes is larger than the %u bytes "
                                         "it can use",
                         commands[number].name, size, (uint64_t)SMALL_PAYLOAD_LIMIT);
    } else {
        if (loom_transport_read(request_payload, size) != 0) return -1;
        status = commands[number].run(request_payload, size, &reply);
    }
    if (status < 0) return -1;
    if (status == LOOM_STATUS_OK)
        return send_response(LOOM_STATUS_OK, reply.payload, reply.size);
    return send_response(LOOM_STATUS_ERROR, reply.message.data, reply.message.length);
}

int loom_serve(void) {
    while (!loom_quit_requested) {
        int status = serve_one();
        if (status == 1) return 0;
        if (status < 0) {
            loom_diagnostic("the stream ended or failed inside a request");
            return 1;
        }
    }
    return 0;
}
