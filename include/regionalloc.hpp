/* libregionalloc for C++17: ra::tag (a tag, created or found by name),
 * ra::tag_scope (a tag pushed for a scope, popped however it is left),
 * ra::tag_allocator (a standard allocator that puts a container's memory in
 * one tag, whatever is pushed), ra::stats_refresh and the memory limit's
 * calls (ra::set_memory_limit, ra::memory_limit, ra::on_pressure,
 * tag::set_priority). Header-only, over the
 * C API of <regionalloc.h>; failures throw std::system_error carrying
 * errno, or std::bad_alloc from the allocator. */
#ifndef REGIONALLOC_HPP
#define REGIONALLOC_HPP

#include <regionalloc.h>

#include <cerrno>
#include <cstddef>
#include <limits>
#include <new>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

namespace ra {

namespace detail {

[[noreturn]] inline void throw_errno(const char *what)
{
    throw std::system_error(errno, std::generic_category(), what);
}

} // namespace detail

/* Refreshes jemalloc's statistics once (ra_stats_refresh): no tag's
 * figures need it, only jemalloc's own (the untagged row, stats.* through
 * mallctl), and it costs in proportion to the arenas of the process.
 * Throws std::system_error (ENOTSUP in pass-through mode). */
inline void stats_refresh()
{
    if (ra_stats_refresh() != 0)
        detail::throw_errno("ra_stats_refresh");
}

/* The memory limit the process is held under (ra_memory_limit_set; 0:
 * none; 2^56 or more: none in effect), and the limit as given from
 * wherever it came. Throws std::system_error (EAGAIN: the library's
 * thread could not start). */
inline void set_memory_limit(std::size_t bytes)
{
    if (ra_memory_limit_set(bytes) != 0)
        detail::throw_errno("ra_memory_limit_set");
}

inline std::size_t memory_limit() noexcept
{
    return ra_memory_limit();
}

/* ra_pressure_callback, for a plain function or a capture-less lambda:
 * called once per rise, on the library's thread, outside its locks.
 * Throws std::system_error (ENOSPC past 16 callbacks). */
inline void on_pressure(void (*cb)(void *ctx, ra_pressure_t level,
                                   std::size_t current, std::size_t limit),
                        void *ctx = nullptr)
{
    if (ra_pressure_callback(cb, ctx) != 0)
        detail::throw_errno("ra_pressure_callback");
}

/* A tag: a value (its id) that is cheap to copy. Tags live until
 * destroyed; a destroyed tag's id fails every call (EINVAL). */
class tag {
public:
    /* Creates the tag called name, or finds it: throws std::system_error
     * (EINVAL for a bad name, ENOSPC with no room left, ENOMEM). */
    explicit tag(const char *name) : id_(ra_tag_create(name))
    {
        if (id_ == RA_TAG_NONE)
            detail::throw_errno("ra_tag_create");
    }

    /* Creates (or finds) name as a child of parent (tag trees): throws
     * std::system_error, EEXIST when the name is taken under another
     * parent, EINVAL for a bad parent or one 8 levels deep. */
    tag(const tag &parent, const char *name)
        : id_(ra_tag_create_in(parent.id(), name))
    {
        if (id_ == RA_TAG_NONE)
            detail::throw_errno("ra_tag_create_in");
    }

    ra_tag_t id() const noexcept { return id_; }

    /* The tag's parent; a tag whose id() is RA_TAG_NONE at the top level. */
    tag parent() const
    {
        ra_tag_t p = ra_tag_parent(id_);
        if (p == RA_TAG_NONE && errno != 0)
            detail::throw_errno("ra_tag_parent");
        return tag(p);
    }

    /* The figures of the tag and its descendants summed. */
    ra_tag_stats_t stats_tree() const
    {
        ra_tag_stats_t s;
        if (ra_tag_stats_tree(id_, &s) != 0)
            detail::throw_errno("ra_tag_stats_tree");
        return s;
    }

    /* The tag's name ("untagged" for the tag of untagged memory). */
    std::string name() const
    {
        const char *n = ra_tag_name(id_);
        if (n == nullptr)
            detail::throw_errno("ra_tag_name");
        return n;
    }

    /* Read live, in time that does not grow with the number of tags;
     * allocated is exact with no flush. */
    ra_tag_stats_t stats() const
    {
        ra_tag_stats_t s;
        if (ra_tag_stats(id_, &s) != 0)
            detail::throw_errno("ra_tag_stats");
        return s;
    }

    /* Committed and allocated bytes and counts, exact now and with no call
     * into jemalloc: cheap enough for every request. */
    ra_tag_usage_t usage() const
    {
        ra_tag_usage_t u;
        if (ra_tag_usage(id_, &u) != 0)
            detail::throw_errno("ra_tag_usage");
        return u;
    }

    void purge() const
    {
        if (ra_tag_purge(id_) != 0)
            detail::throw_errno("ra_tag_purge");
    }

    /* The tag's pool of arenas: the most its new threads are spread over
     * (1: one arena), and the jemalloc indices of those it has. */
    /* Its priority under memory pressure (lower gives way first;
     * negative: refused new memory at high). */
    void set_priority(int priority) const
    {
        if (ra_tag_set_priority(id_, priority) != 0)
            detail::throw_errno("ra_tag_set_priority");
    }

    void set_arenas(unsigned max) const
    {
        if (ra_tag_set_arenas(id_, max) != 0)
            detail::throw_errno("ra_tag_set_arenas");
    }

    std::vector<unsigned> arenas() const
    {
        std::vector<unsigned> out(64);
        int n = ra_tag_arenas(id_, out.data(), static_cast<unsigned>(out.size()));
        if (n < 0)
            detail::throw_errno("ra_tag_arenas");
        out.resize(static_cast<std::size_t>(n) < out.size()
                       ? static_cast<std::size_t>(n)
                       : out.size());
        return out;
    }

    /* Resident bytes of the tag's region, as the kernel counts them. */
    std::size_t rss() const
    {
        std::size_t bytes = 0;
        if (ra_tag_rss(id_, &bytes) != 0)
            detail::throw_errno("ra_tag_rss");
        return bytes;
    }

    /* The tag owning p, found from the address alone; its id is
     * RA_TAG_NONE for untagged memory. */
    static tag of(const void *p) noexcept { return tag(ra_tag_of(p)); }

    friend bool operator==(tag a, tag b) noexcept { return a.id_ == b.id_; }
    friend bool operator!=(tag a, tag b) noexcept { return a.id_ != b.id_; }

private:
    explicit tag(ra_tag_t id) noexcept : id_(id) {}

    ra_tag_t id_;
};

/* Pushes a tag on the calling thread's stack for the scope's lifetime and
 * pops it when the scope is left, by return or by exception. Every
 * allocation of the thread meanwhile (new, the containers', malloc from
 * other libraries) belongs to the tag. Throws std::system_error
 * (EOVERFLOW when the stack is full). Not copyable, not movable: a push and
 * its pop belong to one thread and one scope. */
class tag_scope {
public:
    explicit tag_scope(const tag &t) : id_(t.id())
    {
        if (ra_tag_push(id_) != 0)
            detail::throw_errno("ra_tag_push");
    }

    ~tag_scope() { ra_tag_pop(id_); }

    tag_scope(const tag_scope &) = delete;
    tag_scope &operator=(const tag_scope &) = delete;

private:
    ra_tag_t id_;
};

/* A standard allocator whose blocks belong to one tag, whatever the
 * allocating thread has pushed: a container built with it keeps its memory
 * in the tag for its whole life. Allocators of the same tag are equal
 * (any may free the others' blocks); moving, copying and swapping
 * containers carry the allocator along. */
template <class T>
class tag_allocator {
public:
    using value_type = T;
    using propagate_on_container_copy_assignment = std::true_type;
    using propagate_on_container_move_assignment = std::true_type;
    using propagate_on_container_swap = std::true_type;
    using is_always_equal = std::false_type;

    explicit tag_allocator(const tag &t) noexcept : id_(t.id()) {}

    template <class U>
    tag_allocator(const tag_allocator<U> &other) noexcept : id_(other.id())
    {
    }

    ra_tag_t id() const noexcept { return id_; }

    T *allocate(std::size_t n)
    {
        void *p;

        if (n > std::numeric_limits<std::size_t>::max() / sizeof(T))
            throw std::bad_array_new_length();
        if (alignof(T) <= alignof(std::max_align_t)) {
            p = ra_malloc_tag(id_, n * sizeof(T));
        } else {
            /* Over-aligned: there is no aligned allocation by tag, so the
             * tag is pushed for the one call. */
            if (ra_tag_push(id_) != 0)
                throw std::bad_alloc();
            p = ra_aligned_alloc(alignof(T), round_up(n * sizeof(T)));
            ra_tag_pop(id_);
        }
        if (p == nullptr)
            throw std::bad_alloc();
        return static_cast<T *>(p);
    }

    void deallocate(T *p, std::size_t n) noexcept
    {
        if (alignof(T) <= alignof(std::max_align_t))
            ra_free_sized(p, n * sizeof(T));
        else
            ra_free(p);
    }

private:
    /* aligned_alloc wants a multiple of the alignment. */
    static std::size_t round_up(std::size_t bytes)
    {
        if (bytes > std::numeric_limits<std::size_t>::max() - alignof(T))
            throw std::bad_alloc();
        return (bytes + alignof(T) - 1) / alignof(T) * alignof(T);
    }

    ra_tag_t id_;
};

template <class T, class U>
bool operator==(const tag_allocator<T> &a, const tag_allocator<U> &b) noexcept
{
    return a.id() == b.id();
}

template <class T, class U>
bool operator!=(const tag_allocator<T> &a, const tag_allocator<U> &b) noexcept
{
    return a.id() != b.id();
}

} // namespace ra

#endif
