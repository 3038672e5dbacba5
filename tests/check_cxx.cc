// Suite "cxx": operator new/delete, every variant, and the standard
// containers are attributed to the current tag (regionalloc(3), drop-in malloc).
#include <check.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "regionalloc.h"
#include "testutil.h"

namespace {

constexpr std::size_t MIB = std::size_t(1) << 20;

// A size no allocator can serve, hidden from the optimizer.
volatile std::size_t huge_size = SIZE_MAX / 2;

struct alignas(256) Aligned {
    char bytes[300];
};

struct Sized {
    char bytes[1000];
};

ra_tag_t make_tag(const char *name)
{
    errno = 0;
    ra_tag_t tag = ra_tag_create(name);
    ck_assert_msg(tag != RA_TAG_NONE, "ra_tag_create(\"%s\") failed: errno %d",
                  name, errno);
    return tag;
}

ra_tag_stats_t stats_of(ra_tag_t tag)
{
    ra_tag_stats_t st;
    ck_assert_int_eq(ra_tag_stats(tag, &st), 0);
    return st;
}

bool aligned_to(const void *p, std::size_t align)
{
    return reinterpret_cast<std::uintptr_t>(p) % align == 0;
}

} // namespace

// -- operator new ------------------------------------------------------------

START_TEST(test_cxx_new_is_tagged)
{
    ra_tag_t t = make_tag("new");
    int *one;
    int *many;
    char *bytes;
    int rc = ra_tag_push(t);

    one = new int(42);
    many = new int[100]();
    bytes = new char[20000];
    rc |= ra_tag_pop(t);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(ra_tag_of(one), t);
    ck_assert_uint_eq(ra_tag_of(many), t);
    ck_assert_uint_eq(ra_tag_of(bytes), t);
    ck_assert_int_eq(*one, 42);
    ck_assert_int_eq(many[99], 0);
    delete one;
    delete[] many;
    delete[] bytes;
    ra_thread_flush();
    ck_assert_uint_eq(stats_of(t).allocated, 0);
    ck_assert_uint_eq(stats_of(t).nmalloc, 3);
    ck_assert_uint_eq(stats_of(t).ndalloc, 3);
}
END_TEST

START_TEST(test_cxx_nothrow_new_is_tagged)
{
    ra_tag_t t = make_tag("nothrow");
    int *one;
    int *many;
    int rc = ra_tag_push(t);

    one = new (std::nothrow) int(7);
    many = new (std::nothrow) int[1000];
    rc |= ra_tag_pop(t);
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(one);
    ck_assert_ptr_nonnull(many);
    ck_assert_uint_eq(ra_tag_of(one), t);
    ck_assert_uint_eq(ra_tag_of(many), t);
    delete one;
    delete[] many;
    // The nothrow deletes, called directly.
    void *p = ::operator new(64, std::nothrow);
    ck_assert_ptr_nonnull(p);
    ::operator delete(p, std::nothrow);
    p = ::operator new[](64, std::nothrow);
    ck_assert_ptr_nonnull(p);
    ::operator delete[](p, std::nothrow);
}
END_TEST

START_TEST(test_cxx_aligned_new_is_tagged_and_aligned)
{
    ra_tag_t t = make_tag("aligned");
    Aligned *one;
    Aligned *many;
    Aligned *quiet;
    Aligned *quiet_many;
    int rc = ra_tag_push(t);

    one = new Aligned;
    many = new Aligned[5];
    quiet = new (std::nothrow) Aligned;
    quiet_many = new (std::nothrow) Aligned[3];
    rc |= ra_tag_pop(t);
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(quiet);
    ck_assert_ptr_nonnull(quiet_many);
    Aligned *all[] = {one, many, quiet, quiet_many};
    for (Aligned *p : all) {
        ck_assert(aligned_to(p, 256));
        ck_assert_uint_eq(ra_tag_of(p), t);
    }
    for (int i = 0; i < 5; i++)
        ck_assert(aligned_to(&many[i], 256));
    delete one;
    delete[] many;
    delete quiet;
    delete[] quiet_many;
    ra_thread_flush();
    ck_assert_uint_eq(stats_of(t).allocated, 0);
    ck_assert_uint_eq(stats_of(t).ndalloc, 4);
}
END_TEST

START_TEST(test_cxx_explicit_aligned_operators)
{
    ra_tag_t t = make_tag("explicit-aligned");
    constexpr std::size_t aligns[] = {16, 64, 4096, 65536, 2 * MIB};
    void *p[5];
    void *q[5];
    void *r[5];
    void *s[5];
    int rc = ra_tag_push(t);

    for (int i = 0; i < 5; i++) {
        std::align_val_t a{aligns[i]};
        p[i] = ::operator new(100, a);
        q[i] = ::operator new[](aligns[i] + 1, a);
        r[i] = ::operator new(100, a, std::nothrow);
        s[i] = ::operator new[](100, a, std::nothrow);
    }
    rc |= ra_tag_pop(t);
    ck_assert_int_eq(rc, 0);
    for (int i = 0; i < 5; i++) {
        void *blocks[] = {p[i], q[i], r[i], s[i]};
        for (void *b : blocks) {
            ck_assert_ptr_nonnull(b);
            ck_assert_msg(aligned_to(b, aligns[i]), "%p not aligned to %zu",
                          b, aligns[i]);
            ck_assert_uint_eq(ra_tag_of(b), t);
        }
        std::align_val_t a{aligns[i]};
        ::operator delete(p[i], a);
        ::operator delete[](q[i], aligns[i] + 1, a);
        ::operator delete(r[i], a, std::nothrow);
        ::operator delete[](s[i], a, std::nothrow);
    }
    ra_thread_flush();
    ck_assert_uint_eq(stats_of(t).allocated, 0);
    ck_assert_uint_eq(stats_of(t).ndalloc, 20);
}
END_TEST

START_TEST(test_cxx_sized_delete_frees)
{
    ra_tag_t t = make_tag("sized");
    Sized *one;
    Sized *many;
    void *raw;
    void *raw_many;
    int rc = ra_tag_push(t);

    one = new Sized;
    many = new Sized[4];
    raw = ::operator new(5000);
    raw_many = ::operator new[](70000);
    rc |= ra_tag_pop(t);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(ra_tag_of(one), t);
    ck_assert_uint_eq(ra_tag_of(many), t);
    ck_assert_uint_eq(ra_tag_of(raw), t);
    ck_assert_uint_eq(ra_tag_of(raw_many), t);
    delete one; // operator delete(void *, size_t): -fsized-deallocation
    delete[] many;
    ::operator delete(raw, 5000);
    ::operator delete[](raw_many, 70000);
    ra_thread_flush();
    ra_tag_stats_t st = stats_of(t);
    ck_assert_uint_eq(st.allocated, 0);
    ck_assert_uint_eq(st.nmalloc, 4);
    ck_assert_uint_eq(st.ndalloc, 4);
}
END_TEST

START_TEST(test_cxx_untagged_new_is_none)
{
    make_tag("unused");
    int *one = new int(1);
    int *many = new int[5000];
    Aligned *aligned = new Aligned;

    ck_assert_uint_eq(ra_tag_of(one), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of(many), RA_TAG_NONE);
    ck_assert_uint_eq(ra_tag_of(aligned), RA_TAG_NONE);
    ck_assert(aligned_to(aligned, 256));
    delete one;
    delete[] many;
    delete aligned;
}
END_TEST

START_TEST(test_cxx_new_zero_is_unique)
{
    void *a = ::operator new(0);
    void *b = ::operator new(0);
    char *c = new char[0];

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_ne(a, b);
    ck_assert_ptr_nonnull(c);
    ::operator delete(a);
    ::operator delete(b);
    delete[] c;
}
END_TEST

// -- failure -----------------------------------------------------------------

START_TEST(test_cxx_huge_new_throws_bad_alloc)
{
    ra_tag_t t = make_tag("huge");
    int thrown = 0;

    for (int tagged = 0; tagged < 2; tagged++) {
        if (tagged)
            ck_assert_int_eq(ra_tag_push(t), 0);
        try {
            char *p = new char[huge_size];
            p[0] = 1;
            delete[] p;
        } catch (const std::bad_alloc &) {
            thrown++;
        }
        try {
            void *p = ::operator new(huge_size);
            ::operator delete(p);
        } catch (const std::bad_alloc &) {
            thrown++;
        }
        try {
            void *p = ::operator new(huge_size, std::align_val_t{64});
            ::operator delete(p, std::align_val_t{64});
        } catch (const std::bad_alloc &) {
            thrown++;
        }
        if (tagged)
            ck_assert_int_eq(ra_tag_pop(t), 0);
    }
    ck_assert_int_eq(thrown, 6);
}
END_TEST

START_TEST(test_cxx_huge_nothrow_new_is_null)
{
    ra_tag_t t = make_tag("huge-nothrow");

    ck_assert_ptr_null(new (std::nothrow) char[huge_size]);
    ck_assert_ptr_null(::operator new(huge_size, std::nothrow));
    ck_assert_ptr_null(::operator new[](huge_size, std::nothrow));
    ck_assert_ptr_null(
        ::operator new(huge_size, std::align_val_t{4096}, std::nothrow));
    ck_assert_int_eq(ra_tag_push(t), 0);
    ck_assert_ptr_null(new (std::nothrow) char[huge_size]);
    ck_assert_ptr_null(
        ::operator new[](huge_size, std::align_val_t{64}, std::nothrow));
    ck_assert_int_eq(ra_tag_pop(t), 0);
}
END_TEST

int handler_calls;

void give_up_on_third_call()
{
    if (++handler_calls == 3)
        std::set_new_handler(nullptr);
}

START_TEST(test_cxx_new_handler_is_called_until_removed)
{
    bool thrown = false;

    handler_calls = 0;
    std::set_new_handler(give_up_on_third_call);
    try {
        void *p = ::operator new(huge_size);
        ::operator delete(p);
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    ck_assert(thrown);
    ck_assert_int_eq(handler_calls, 3);
    // nothrow new runs the handler too, then returns null.
    handler_calls = 0;
    std::set_new_handler(give_up_on_third_call);
    ck_assert_ptr_null(::operator new(huge_size, std::nothrow));
    ck_assert_int_eq(handler_calls, 3);
}
END_TEST

// A tag's hard limit reaches C++ as std::bad_alloc, the process goes on,
// and memory given back serves again.
START_TEST(test_cxx_budget_throws_bad_alloc_and_recovers)
{
    ra_tag_t t = make_tag("budget");
    ra_tag_limit_t limit = {16 * MIB, 0, nullptr, nullptr};
    std::vector<char *> blocks;
    std::vector<int> grown;
    bool block_thrown = false, growth_thrown = false;
    std::size_t kept_size = 0;

    ck_assert_int_eq(ra_tag_set_limit(t, &limit), 0);
    blocks.reserve(64); // untagged, and never regrown below
    ck_assert_int_eq(ra_tag_push(t), 0);
    try {
        while (blocks.size() < 64) {
            blocks.push_back(new char[MIB]);
            std::memset(blocks.back(), 7, MIB);
        }
    } catch (const std::bad_alloc &) {
        block_thrown = true;
    }
    for (std::size_t i = 0; i < blocks.size(); i += 2)
        delete[] blocks[i];
    try {
        for (int i = 0;; i++) {
            kept_size = grown.size();
            grown.push_back(i);
        }
    } catch (const std::bad_alloc &) {
        growth_thrown = true;
    }
    ck_assert_int_eq(ra_tag_pop(t), 0);

    ck_assert(block_thrown);
    ck_assert_uint_ge(blocks.size(), 8);
    ck_assert_uint_lt(blocks.size(), 16);
    ck_assert(growth_thrown);
    // The vector whose growth failed still holds what it had.
    ck_assert_uint_eq(grown.size(), kept_size);
    for (std::size_t i = 0; i < grown.size(); i += 4099)
        ck_assert_int_eq(grown[i], static_cast<int>(i));
    ck_assert_uint_le(stats_of(t).peak_mapped, 16 * MIB);
    grown.clear();
    grown.shrink_to_fit();
    for (std::size_t i = 1; i < blocks.size(); i += 2)
        delete[] blocks[i];
    char *again = static_cast<char *>(ra_malloc_tag(t, 8 * MIB));
    ck_assert_ptr_nonnull(again);
    ra_free(again);
}
END_TEST

// -- containers --------------------------------------------------------------

START_TEST(test_cxx_vector_growth_is_tagged)
{
    ra_tag_t t = make_tag("vector");
    std::vector<int> v;
    unsigned reallocations = 0;
    unsigned wrong = 0;

    {
        RA_TAG_SCOPE(t);
        const int *data = nullptr;
        for (int i = 0; i < 100000; i++) {
            v.push_back(i);
            if (v.data() != data) {
                data = v.data();
                reallocations++;
                wrong += ra_tag_of(data) != t;
            }
        }
    }
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
    ck_assert_uint_ge(reallocations, 10);
    ck_assert_uint_eq(wrong, 0);
    ck_assert_uint_eq(ra_tag_of(v.data()), t);
    ck_assert_int_eq(v[99999], 99999);
    // Growth after the scope follows the stack (now empty), not the owner.
    v.resize(v.capacity() + 1);
    ck_assert_uint_eq(ra_tag_of(v.data()), RA_TAG_NONE);
    ck_assert_int_eq(v[99999], 99999);
    std::vector<int>().swap(v);
    ra_thread_flush();
    ck_assert_uint_eq(stats_of(t).allocated, 0);
}
END_TEST

START_TEST(test_cxx_string_growth_is_tagged)
{
    ra_tag_t t = make_tag("string");
    std::string s;
    unsigned wrong = 0;
    unsigned heap_buffers = 0;

    {
        RA_TAG_SCOPE(t);
        const char *data = s.data();
        for (int i = 0; i < 20000; i++) {
            s.push_back(static_cast<char>('a' + i % 26));
            if (s.data() != data) {
                data = s.data();
                heap_buffers++;
                wrong += ra_tag_of(data) != t;
            }
        }
    }
    ck_assert_uint_ge(heap_buffers, 5);
    ck_assert_uint_eq(wrong, 0);
    ck_assert_uint_eq(ra_tag_of(s.data()), t);
    ck_assert_uint_eq(s.size(), 20000);
    ck_assert_int_eq(s[19999], 'a' + 19999 % 26);
    std::string copy = s; // made untagged
    ck_assert_uint_eq(ra_tag_of(copy.data()), RA_TAG_NONE);
    ck_assert(copy == s);
}
END_TEST

START_TEST(test_cxx_scopes_nest_across_containers)
{
    ra_tag_t outer = make_tag("outer");
    ra_tag_t inner = make_tag("inner");
    std::vector<std::string> names;

    {
        RA_TAG_SCOPE(outer);
        names.reserve(16);
        {
            RA_TAG_SCOPE(inner);
            names.emplace_back(100, 'x');
        }
        names.emplace_back(100, 'y');
    }
    ck_assert_uint_eq(ra_tag_of(names.data()), outer);
    ck_assert_uint_eq(ra_tag_of(names[0].data()), inner);
    ck_assert_uint_eq(ra_tag_of(names[1].data()), outer);
}
END_TEST

static Suite *cxx_suite(void)
{
    Suite *s = suite_create("cxx");
    TCase *tc;

    tc = tcase_create("operator new");
    tcase_add_test(tc, test_cxx_new_is_tagged);
    tcase_add_test(tc, test_cxx_nothrow_new_is_tagged);
    tcase_add_test(tc, test_cxx_aligned_new_is_tagged_and_aligned);
    tcase_add_test(tc, test_cxx_explicit_aligned_operators);
    tcase_add_test(tc, test_cxx_sized_delete_frees);
    tcase_add_test(tc, test_cxx_untagged_new_is_none);
    tcase_add_test(tc, test_cxx_new_zero_is_unique);
    suite_add_tcase(s, tc);

    tc = tcase_create("failure");
    tcase_add_test(tc, test_cxx_huge_new_throws_bad_alloc);
    tcase_add_test(tc, test_cxx_huge_nothrow_new_is_null);
    tcase_add_test(tc, test_cxx_new_handler_is_called_until_removed);
    tcase_add_test(tc, test_cxx_budget_throws_bad_alloc_and_recovers);
    suite_add_tcase(s, tc);

    tc = tcase_create("containers");
    tcase_add_test(tc, test_cxx_vector_growth_is_tagged);
    tcase_add_test(tc, test_cxx_string_growth_is_tagged);
    tcase_add_test(tc, test_cxx_scopes_nest_across_containers);
    suite_add_tcase(s, tc);

    return s;
}

int main()
{
    return tu_run_suite(cxx_suite());
}
