/* Suite "protobuf (unit)": the wire format the pprof output is made of,
 * checked byte by byte against the encoding rules of
 * protobuf.dev/programming-guides/encoding. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "prof_dump.h"
#include "testutil.h"

static void assert_bytes(const struct ra__pb *b, const uint8_t *want,
                         size_t n)
{
    ck_assert(!b->failed);
    ck_assert_uint_eq(b->len, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(b->data[i] == want[i], "byte %zu: %#x, want %#x", i,
                      b->data[i], want[i]);
}

START_TEST(test_protobuf_unit_varints)
{
    static const uint8_t want[] = {
        0x00,                         /* 0 */
        0x01,                         /* 1 */
        0x7f,                         /* 127 */
        0x80, 0x01,                   /* 128 */
        0x96, 0x01,                   /* 150, the guide's example */
        0xff, 0xff, 0xff, 0xff, 0x0f, /* 2^32 - 1 */
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        /* 2^64 - 1: ten bytes */
    };
    struct ra__pb b = {NULL, 0, 0, false};

    ra__pb_varint(&b, 0);
    ra__pb_varint(&b, 1);
    ra__pb_varint(&b, 127);
    ra__pb_varint(&b, 128);
    ra__pb_varint(&b, 150);
    ra__pb_varint(&b, UINT32_MAX);
    ra__pb_varint(&b, UINT64_MAX);
    assert_bytes(&b, want, sizeof want);
    ra__pb_free(&b);
    ck_assert_ptr_null(b.data);
}
END_TEST

/* Field 1 = 150 is 08 96 01; 0 is left out; field 2 = "testing" is
 * 12 07 then the bytes; field 16 needs a two-byte key. */
START_TEST(test_protobuf_unit_fields)
{
    static const uint8_t want[] = {0x08, 0x96, 0x01, 0x12, 0x07, 't',
                                   'e',  's',  't',  'i',  'n',  'g',
                                   0x80, 0x01, 0x05};
    struct ra__pb b = {NULL, 0, 0, false};

    ra__pb_uint(&b, 1, 150);
    ra__pb_uint(&b, 3, 0);
    ra__pb_bytes(&b, 2, "testing", 7);
    ra__pb_uint(&b, 16, 5);
    assert_bytes(&b, want, sizeof want);
    ra__pb_free(&b);
}
END_TEST

/* A message inside a message: field 3 { field 1 = 150 } is 1a 03 08 96 01,
 * and the inner buffer is emptied for the next one. */
START_TEST(test_protobuf_unit_nested_message)
{
    static const uint8_t want[] = {0x1a, 0x03, 0x08, 0x96, 0x01,
                                   0x1a, 0x02, 0x08, 0x01};
    struct ra__pb outer = {NULL, 0, 0, false}, inner = {NULL, 0, 0, false};

    ra__pb_uint(&inner, 1, 150);
    ra__pb_message(&outer, 3, &inner);
    ck_assert_uint_eq(inner.len, 0);
    ra__pb_uint(&inner, 1, 1);
    ra__pb_message(&outer, 3, &inner);
    assert_bytes(&outer, want, sizeof want);
    ra__pb_free(&outer);
    ra__pb_free(&inner);
}
END_TEST

/* Buffers grow past their first 4 KiB with the contents kept. */
START_TEST(test_protobuf_unit_growth_keeps_bytes)
{
    struct ra__pb b = {NULL, 0, 0, false};
    uint8_t chunk[1000];

    for (unsigned i = 0; i < 100; i++) {
        memset(chunk, (int)i, sizeof chunk);
        ra__pb_raw(&b, chunk, sizeof chunk);
    }
    ck_assert(!b.failed);
    ck_assert_uint_eq(b.len, 100000);
    for (size_t i = 0; i < b.len; i++)
        ck_assert_uint_eq(b.data[i], (uint8_t)(i / 1000));
    ra__pb_free(&b);
}
END_TEST

/* A failed inner message fails the outer one. */
START_TEST(test_protobuf_unit_failure_propagates)
{
    struct ra__pb outer = {NULL, 0, 0, false}, inner = {NULL, 0, 0, true};

    ra__pb_message(&outer, 1, &inner);
    ck_assert(outer.failed);
    ra__pb_uint(&outer, 2, 7);
    ra__pb_free(&outer);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("protobuf (unit)");
    TCase *tc = tcase_create("wire format");

    tcase_add_test(tc, test_protobuf_unit_varints);
    tcase_add_test(tc, test_protobuf_unit_fields);
    tcase_add_test(tc, test_protobuf_unit_nested_message);
    tcase_add_test(tc, test_protobuf_unit_growth_keeps_bytes);
    tcase_add_test(tc, test_protobuf_unit_failure_propagates);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
