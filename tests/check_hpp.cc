// Suite "C++ API": <regionalloc.hpp>, ra::tag, ra::tag_scope and
// ra::tag_allocator. Built with and without the malloc override: the header
// uses the ra_ functions only.
#include <check.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "regionalloc.hpp"
#include "testutil.h"

namespace {

constexpr std::size_t MIB = std::size_t(1) << 20;

template <class T>
using tagged_vector = std::vector<T, ra::tag_allocator<T>>;
using tagged_string =
    std::basic_string<char, std::char_traits<char>, ra::tag_allocator<char>>;
template <class K, class V>
using tagged_map = std::map<K, V, std::less<K>,
                            ra::tag_allocator<std::pair<const K, V>>>;

struct alignas(64) line {
    char bytes[64];
};

struct alignas(4096) page {
    char bytes[100];
};

// The errno a call that must throw std::system_error threw with, or -1.
template <class F>
int thrown_errno(F &&f)
{
    try {
        f();
    } catch (const std::system_error &e) {
        return e.code().value();
    }
    return -1;
}

} // namespace

// -- tag ---------------------------------------------------------------------

START_TEST(test_hpp_tag_creates_or_finds)
{
    ra::tag a("hpp-a"), again("hpp-a"), b("hpp-b");

    ck_assert(a == again);
    ck_assert(a != b);
    ck_assert_uint_eq(a.id(), ra_tag_lookup("hpp-a"));
    ck_assert(a.name() == "hpp-a");
    ck_assert_int_eq(thrown_errno([] { ra::tag bad(""); }), EINVAL);
    ck_assert_int_eq(thrown_errno([] { ra::tag bad(nullptr); }), EINVAL);
}
END_TEST

START_TEST(test_hpp_tag_stats_purge_rss_of)
{
    ra::tag t("hpp-stats");
    void *p = ra_malloc_tag(t.id(), 4 * MIB);
    ra_tag_stats_t st;

    ck_assert_ptr_nonnull(p);
    st = t.stats();
    ck_assert_uint_eq(st.allocated, 4 * MIB);
    ck_assert(ra::tag::of(p) == t);
    ck_assert_uint_eq(ra::tag::of(&st).id(), RA_TAG_NONE);
    // usage() agrees with stats(): both read the live figures.
    ck_assert_uint_eq(t.usage().allocated, 4 * MIB);
    ck_assert_uint_eq(t.usage().mapped, st.mapped);
    ck_assert_uint_eq(t.usage().nmalloc, st.nmalloc);
    // A refresh of jemalloc's statistics changes none of them.
    ra::stats_refresh();
    ck_assert_uint_eq(t.usage().allocated, 4 * MIB);
    ck_assert_uint_eq(t.stats().allocated, 4 * MIB);
    std::memset(p, 1, 4 * MIB); // resident now, as the kernel counts
    ck_assert_uint_ge(t.rss(), 4 * MIB);
    ra_free(p);
    t.purge();
    ck_assert_uint_eq(t.stats().dirty, 0);
    // One thread, one arena; the bound is the tag's to set.
    ck_assert_uint_eq(t.arenas().size(), 1);
    t.set_arenas(1);
    ck_assert_int_eq(thrown_errno([&] { t.set_arenas(0); }), EINVAL);
    // The memory limit's calls: a priority, a limit far above what the
    // suite holds (the watcher runs, nothing refused), a callback.
    t.set_priority(-1);
    ra::set_memory_limit(std::size_t{1} << 40);
    ck_assert_uint_eq(ra::memory_limit(), std::size_t{1} << 40);
    ra::on_pressure([](void *, ra_pressure_t, std::size_t, std::size_t) {});
    ck_assert_int_eq(thrown_errno([] { ra::on_pressure(nullptr); }), EINVAL);
    ra::set_memory_limit(0);
    ck_assert_uint_eq(ra::memory_limit(), 0);
    ck_assert_int_eq(ra_tag_destroy(t.id()), 0);
    ck_assert_int_eq(thrown_errno([&] { t.set_priority(1); }), EINVAL);
    // A destroyed tag's id fails every call.
    ck_assert_int_eq(thrown_errno([&] { (void)t.stats(); }), EINVAL);
    ck_assert_int_eq(thrown_errno([&] { (void)t.usage(); }), EINVAL);
    ck_assert_int_eq(thrown_errno([&] { t.purge(); }), EINVAL);
    ck_assert_int_eq(thrown_errno([&] { (void)t.arenas(); }), EINVAL);
    ck_assert_int_eq(thrown_errno([&] { (void)t.name(); }), ENOENT);
}
END_TEST

// -- tag_scope ---------------------------------------------------------------

START_TEST(test_hpp_scope_pushes_and_pops_on_exception)
{
    ra::tag t("hpp-scope");
    bool caught = false;

    {
        ra::tag_scope s(t);
        // ra_malloc rather than new: without the malloc override, new is
        // not the library's.
        void *p = ra_malloc(16);
        bool in = ra_tag_current() == t.id() && ra::tag::of(p) == t;
        ra_free(p);
        ck_assert(in);
    }
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
    try {
        ra::tag_scope s(t);
        throw std::runtime_error("leaves the scope");
    } catch (const std::runtime_error &) {
        caught = true;
    }
    ck_assert(caught);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

START_TEST(test_hpp_scope_on_a_full_stack_throws_eoverflow)
{
    ra::tag t("hpp-deep");
    int pushed = 0, e;

    while (ra_tag_push(t.id()) == 0)
        pushed++;
    e = thrown_errno([&] { ra::tag_scope s(t); });
    while (pushed-- > 0)
        ra_tag_pop(t.id());
    ck_assert_int_eq(e, EOVERFLOW);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

// -- tag_allocator -----------------------------------------------------------

// Every block of a container built with the allocator of tag a stays in a
// while another tag is pushed.
START_TEST(test_hpp_allocator_keeps_containers_in_their_tag)
{
    ra::tag a("hpp-home"), b("hpp-pushed");
    ra::tag_allocator<int> alloc(a);
    tagged_vector<int> v(alloc);
    tagged_map<int, tagged_string> m(alloc);
    tagged_string s(alloc);
    bool in_a = true;

    {
        ra::tag_scope pushed(b);
        for (int i = 0; i < 10000; i++)
            v.push_back(i);
        for (int i = 0; i < 100; i++)
            m.emplace(i, tagged_string(200, 'x', alloc));
        s.assign(5000, 'y');
        in_a = ra::tag::of(v.data()) == a && ra::tag::of(s.data()) == a;
        for (const auto &kv : m)
            in_a = in_a && ra::tag::of(&kv) == a &&
                   ra::tag::of(kv.second.data()) == a;
    }
    ck_assert(in_a);
    ck_assert_uint_eq(v.size(), 10000);
    ck_assert_uint_eq(b.stats().nmalloc, 0);
}
END_TEST

START_TEST(test_hpp_allocators_equal_iff_same_tag)
{
    ra::tag a("hpp-eq-a"), b("hpp-eq-b");
    ra::tag_allocator<int> ia(a), ib(b);
    ra::tag_allocator<double> da(ia);

    ck_assert(ia == ra::tag_allocator<int>(a));
    ck_assert(ia != ib);
    ck_assert(da == ia);
    ck_assert(!(da != ia));
    ck_assert_uint_eq(da.id(), a.id());
}
END_TEST

// Moved and swapped containers carry their allocator: the blocks stay in
// the tag they were allocated in, and each is freed by its own tag's
// allocator.
START_TEST(test_hpp_allocator_propagates_on_move_and_swap)
{
    ra::tag a("hpp-mv-a"), b("hpp-mv-b");
    tagged_vector<int> va{ra::tag_allocator<int>(a)};
    tagged_vector<int> vb{ra::tag_allocator<int>(b)};

    va.assign(1000, 1);
    vb.assign(2000, 2);
    va.swap(vb);
    ck_assert(ra::tag::of(va.data()) == b);
    ck_assert_uint_eq(va.get_allocator().id(), b.id());
    vb = std::move(va);
    ck_assert(ra::tag::of(vb.data()) == b);
    ck_assert_uint_eq(vb.size(), 2000);
}
END_TEST

START_TEST(test_hpp_allocator_over_aligned_types)
{
    ra::tag t("hpp-aligned");
    tagged_vector<line> lines{ra::tag_allocator<line>(t)};
    tagged_vector<page> pages{ra::tag_allocator<page>(t)};

    lines.resize(1000);
    pages.resize(10);
    ck_assert_uint_eq(reinterpret_cast<std::uintptr_t>(lines.data()) % 64, 0);
    ck_assert_uint_eq(reinterpret_cast<std::uintptr_t>(pages.data()) % 4096,
                      0);
    ck_assert(ra::tag::of(lines.data()) == t);
    ck_assert(ra::tag::of(pages.data()) == t);
    ck_assert_uint_eq(ra_tag_current(), RA_TAG_NONE);
}
END_TEST

START_TEST(test_hpp_allocator_failures_throw_bad_alloc)
{
    ra::tag t("hpp-limit");
    ra::tag_allocator<char> alloc(t);
    ra_tag_limit_t limit = {8 * MIB, 0, nullptr, nullptr};
    bool bad_alloc = false, bad_length = false;

    ck_assert_int_eq(ra_tag_set_limit(t.id(), &limit), 0);
    try {
        (void)alloc.allocate(64 * MIB);
    } catch (const std::bad_alloc &) {
        bad_alloc = true;
    }
    try {
        (void)ra::tag_allocator<line>(t).allocate(SIZE_MAX / 8);
    } catch (const std::bad_array_new_length &) {
        bad_length = true;
    }
    ck_assert(bad_alloc);
    ck_assert(bad_length);
}
END_TEST

START_TEST(test_hpp_tag_trees)
{
    ra::tag tenant("hpp-tenant");
    ra::tag query(tenant, "hpp-query");
    void *p;

    ck_assert(query.parent() == tenant);
    ck_assert_uint_eq(tenant.parent().id(), RA_TAG_NONE);
    ck_assert(ra::tag(tenant, "hpp-query") == query);
    ck_assert_int_eq(thrown_errno([&] { ra::tag(query, "hpp-tenant"); }),
                     EEXIST);
    p = ra_malloc_tag(query.id(), 1 << 20);
    ck_assert_ptr_nonnull(p);
    ra_thread_flush();
    ck_assert_uint_eq(tenant.stats_tree().allocated,
                      tenant.stats().allocated + query.stats().allocated);
    ra_free(p);
    ck_assert_int_eq(ra_tag_destroy(tenant.id()), 0);
    ck_assert_int_eq(thrown_errno([&] { (void)query.parent(); }), EINVAL);
}
END_TEST

static Suite *hpp_suite(void)
{
    Suite *s = suite_create("C++ API");
    TCase *tc;

    tc = tcase_create("tag");
    tcase_add_test(tc, test_hpp_tag_creates_or_finds);
    tcase_add_test(tc, test_hpp_tag_stats_purge_rss_of);
    suite_add_tcase(s, tc);

    tc = tcase_create("tag_scope");
    tcase_add_test(tc, test_hpp_scope_pushes_and_pops_on_exception);
    tcase_add_test(tc, test_hpp_scope_on_a_full_stack_throws_eoverflow);
    suite_add_tcase(s, tc);

    tc = tcase_create("tag_allocator");
    tcase_add_test(tc, test_hpp_allocator_keeps_containers_in_their_tag);
    tcase_add_test(tc, test_hpp_allocators_equal_iff_same_tag);
    tcase_add_test(tc, test_hpp_allocator_propagates_on_move_and_swap);
    tcase_add_test(tc, test_hpp_allocator_over_aligned_types);
    tcase_add_test(tc, test_hpp_allocator_failures_throw_bad_alloc);
    tcase_add_test(tc, test_hpp_tag_trees);
    suite_add_tcase(s, tc);
    return s;
}

int main()
{
    return tu_run_suite(hpp_suite());
}
