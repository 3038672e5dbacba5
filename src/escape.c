/* Floor: services. Escaping of tag names and checkpoint labels for the text,
 * JSON and Prometheus outputs. Every format goes through here, so that a
 * name is escaped the same way wherever it appears and no user byte ever
 * reaches a printf format. */
#include <string.h>

#include "output.h"

static bool is_continuation(unsigned char c)
{
    return (c & 0xc0) == 0x80;
}

/* Length (1 to 4) of the well-formed UTF-8 sequence that starts at s, or 0
 * when the bytes there are not one: a stray continuation byte, an overlong
 * form, a surrogate, a code point beyond U+10FFFF or a cut sequence (the NUL
 * is never a continuation byte, so nothing is read past it). */
static size_t utf8_sequence(const unsigned char *s)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return is_continuation(s[1]) ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (c == 0xe0)
            lo = 0xa0; /* no overlong forms */
        else if (c == 0xed)
            hi = 0x9f; /* no UTF-16 surrogates */
        return s[1] >= lo && s[1] <= hi && is_continuation(s[2]) ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* nothing beyond U+10FFFF */
        return s[1] >= lo && s[1] <= hi && is_continuation(s[2]) &&
                       is_continuation(s[3])
                   ? 4
                   : 0;
    }
    return 0;
}

/* The escape of byte c in style, into seq (at least 8 bytes), or NULL when
 * c (a byte of a well-formed character) is written as it is. invalid: c is
 * not part of a well-formed UTF-8 sequence. */
static const char *escape_byte(char *seq, unsigned char c, bool invalid,
                               enum ra__escape_style style)
{
    static const char hex[] = "0123456789abcdef";
    const char *prefix;
    size_t n;

    if (style == RA__ESCAPE_HTML)
        switch (c) {
        case '&':
            return "&amp;";
        case '<':
            return "&lt;";
        case '>':
            return "&gt;";
        case '"':
            return "&quot;";
        case '\'':
            return "&#39;";
        default:
            break;
        }
    switch (c) {
    case '\\':
        return "\\\\";
    case '"':
        return style == RA__ESCAPE_TEXT ? NULL : "\\\"";
    case '\n':
        return "\\n";
    case '\t':
        if (style != RA__ESCAPE_PROMETHEUS)
            return "\\t";
        break;
    case '\r':
        if (style != RA__ESCAPE_PROMETHEUS)
            return "\\r";
        break;
    default:
        break;
    }
    if (!invalid && c >= 0x20 && c != 0x7f)
        return NULL;
    /* A control byte, DEL, or a byte that is not valid UTF-8. Prometheus
     * label values must be UTF-8 and its escapes are only \\ \" \n: such a
     * byte becomes the four characters \xNN, whose backslash is itself
     * escaped in the exposition. */
    switch (style) {
    case RA__ESCAPE_JSON:
        prefix = "\\u00";
        break;
    case RA__ESCAPE_PROMETHEUS:
        prefix = "\\\\x";
        break;
    default:
        prefix = "\\x";
        break;
    }
    n = strlen(prefix);
    memcpy(seq, prefix, n);
    seq[n] = hex[c >> 4];
    seq[n + 1] = hex[c & 0xf];
    seq[n + 2] = '\0';
    return seq;
}

size_t ra__escape(char *buf, size_t len, const char *s,
                  enum ra__escape_style style)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t out = 0;

    while (*p != '\0') {
        size_t n = utf8_sequence(p);
        char seq[8];
        const char *esc =
            n <= 1 ? escape_byte(seq, *p, n == 0, style) : NULL;
        size_t elen;

        if (esc == NULL) {
            /* A printable ASCII byte or a whole well-formed character. */
            elen = n;
            esc = (const char *)p;
        } else {
            elen = strlen(esc);
            n = 1;
        }
        if (out + elen >= len)
            break;
        memcpy(buf + out, esc, elen);
        out += elen;
        p += n;
    }
    buf[out] = '\0';
    return out;
}

size_t ra__text_width(const char *s)
{
    size_t width = 0;

    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
        width += !is_continuation(*p);
    return width;
}
