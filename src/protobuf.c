/* Floor: services. Protocol buffers' wire format, as much as the pprof
 * output needs: varint and length-delimited fields into a growable buffer
 * (the library's own memory). */
#include <string.h>

#include "prof_dump.h"

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

void ra__pb_raw(struct ra__pb *b, const void *p, size_t n)
{
    if (b->failed)
        return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap == 0 ? 4096 : b->cap;
        uint8_t *grown;
        while (cap - b->len < n)
            cap *= 2;
        grown = ra__meta_realloc(b->data, cap);
        if (grown == NULL) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
}

void ra__pb_varint(struct ra__pb *b, uint64_t v)
{
    uint8_t buf[10];
    size_t n = 0;

    do {
        buf[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    ra__pb_raw(b, buf, n);
}

static void pb_key(struct ra__pb *b, unsigned field, unsigned wire)
{
    ra__pb_varint(b, (uint64_t)field << 3 | wire);
}

void ra__pb_uint(struct ra__pb *b, unsigned field, uint64_t v)
{
    if (v == 0)
        return;
    pb_key(b, field, WIRE_VARINT);
    ra__pb_varint(b, v);
}

void ra__pb_bytes(struct ra__pb *b, unsigned field, const void *p, size_t n)
{
    pb_key(b, field, WIRE_LEN);
    ra__pb_varint(b, n);
    ra__pb_raw(b, p, n);
}

void ra__pb_message(struct ra__pb *b, unsigned field, struct ra__pb *msg)
{
    if (msg->failed)
        b->failed = true;
    ra__pb_bytes(b, field, msg->data, msg->len);
    msg->len = 0;
}

void ra__pb_free(struct ra__pb *b)
{
    ra__meta_free(b->data);
    *b = (struct ra__pb){NULL, 0, 0, false};
}
