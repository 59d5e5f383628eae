/* Message text without libc: the few printf conversions error messages need.
 *
 * Every integer conversion takes a 64-bit argument (%u uint64_t, %d int64_t, %x uint64_t), so
 * a message reads the same vararg on 32- and 64-bit devices; callers cast.
 *
 * Messages are UTF-8 on the wire, but strings come from untrusted places (a module's string
 * table, a name in a request, a kernel's last error). %s and %b copy well-formed UTF-8 and
 * write any other byte, and control characters but newline and tab, as \xNN; truncation at the
 * capacity never splits a character. */
#include "device.h"

void loom_text_init(loom_text *t, char *buffer, uint32_t capacity) {
    t->data = buffer;
    t->capacity = capacity;
    t->length = 0;
    if (capacity > 0) buffer[0] = 0;
}

static void put(loom_text *t, char c) {
    if (t->length + 1 < t->capacity) {
        t->data[t->length++] = c;
        t->data[t->length] = 0;
    }
}

/* All n bytes, or none if they do not fit. */
static void put_all(loom_text *t, const uint8_t *p, uint32_t n) {
    if (t->length + n >= t->capacity) {
        t->capacity = t->length + 1; /* nothing after a cut character either */
        return;
    }
    for (uint32_t i = 0; i < n; ++i) t->data[t->length++] = (char)p[i];
    t->data[t->length] = 0;
}

/* The length of the well-formed UTF-8 sequence at p (at most n bytes), or 0 (Unicode's table
 * of well-formed byte sequences: no overlong forms, surrogates, or code points past 10FFFF). */
static uint32_t utf8_length(const uint8_t *p, uint64_t n) {
    uint8_t c = p[0];
    uint32_t length;
    uint8_t lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) length = 2;
    else if (c >= 0xe0 && c <= 0xef) length = 3;
    else if (c >= 0xf0 && c <= 0xf4) length = 4;
    else return 0;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
    if (n < length || p[1] < lo || p[1] > hi) return 0;
    for (uint32_t i = 2; i < length; ++i)
        if ((p[i] & 0xc0) != 0x80) return 0;
    return length;
}

static void put_text(loom_text *t, const uint8_t *p, uint64_t n) {
    for (uint64_t i = 0; i < n;) {
        uint32_t length = utf8_length(p + i, n - i);
        if (length == 0 || (length == 1 && p[i] < 0x20 && p[i] != '\n' && p[i] != '\t') ||
            p[i] == 0x7f) {
            uint8_t escape[4] = {'\\', 'x', (uint8_t)"0123456789abcdef"[p[i] >> 4],
                                 (uint8_t)"0123456789abcdef"[p[i] & 0xf]};
            put_all(t, escape, 4);
            i += 1;
        } else {
            put_all(t, p + i, length);
            i += length;
        }
    }
}

static void put_unsigned(loom_text *t, uint64_t v, unsigned base) {
    char digits[24];
    int n = 0;
    do {
        uint64_t q = v / base;
        digits[n++] = "0123456789abcdef"[v - q * base];
        v = q;
    } while (v != 0);
    while (n > 0) put(t, digits[--n]);
}

void loom_text_vformat(loom_text *t, const char *format, va_list ap) {
    for (const char *f = format; *f; ++f) {
        if (*f != '%') {
            put(t, *f);
            continue;
        }
        switch (*++f) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            s = s ? s : "(null)";
            put_text(t, (const uint8_t *)s, loom_strlen(s));
            break;
        }
        case 'b': {
            const uint8_t *p = va_arg(ap, const uint8_t *);
            uint64_t n = va_arg(ap, uint64_t);
            put_text(t, p, n);
            break;
        }
        case 'u':
            put_unsigned(t, va_arg(ap, uint64_t), 10);
            break;
        case 'd': {
            int64_t v = va_arg(ap, int64_t);
            if (v < 0) put(t, '-');
            put_unsigned(t, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, 10);
            break;
        }
        case 'x':
            put(t, '0');
            put(t, 'x');
            put_unsigned(t, va_arg(ap, uint64_t), 16);
            break;
        case '%':
            put(t, '%');
            break;
        default: /* a bad format is a bug here; show it rather than read a vararg */
            put(t, '%');
            if (*f == 0) return;
            put(t, *f);
        }
    }
}

void loom_text_format(loom_text *t, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    loom_text_vformat(t, format, ap);
    va_end(ap);
}

size_t loom_strlen(const char *s) {
    size_t n = 0;
    while (s[n]) ++n;
    return n;
}

int loom_streq_bytes(const char *s, const void *p, uint64_t n) {
    const uint8_t *b = (const uint8_t *)p;
    for (uint64_t i = 0; i < n; ++i)
        if (s[i] == 0 || (uint8_t)s[i] != b[i]) return 0;
    return s[n] == 0;
}
