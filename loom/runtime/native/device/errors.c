/* The last error: a message a failing runtime function or generated kernel leaves for its
 * caller (docs/architecture.md, decision 4). One buffer: the device runs one task at a time. */
#include "device.h"

#define LOOM_ERROR_BYTES 1024

static char last_error[LOOM_ERROR_BYTES];

void loom_set_last_error(const char *message) {
    loom_text t;
    loom_text_init(&t, last_error, sizeof last_error);
    loom_text_format(&t, "%s", message ? message : "");
}

const char *loom_get_last_error(void) { return last_error; }

void loom_set_last_errorf(const char *format, ...) {
    loom_text t;
    va_list ap;
    loom_text_init(&t, last_error, sizeof last_error);
    va_start(ap, format);
    loom_text_vformat(&t, format, ap);
    va_end(ap);
}
