/* Floor: backend. jemalloc's own functions, found in jemalloc's library: the
 * library exports malloc, free, mallocx and the rest under the same names,
 * so a call by name would reach its own definitions. */
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RA__JEMALLOC_NAMES_ALLOWED
#include "backend.h"

#include "dynsym.h"
#include "internal.h"

/* Until the lookup has run, each pointer is a function that runs it and
 * calls on: the first calls can come from other libraries' constructors,
 * before this library's own. The lookup allocates nothing and takes no lock
 * of ours, so it may run inside malloc, on any thread, any number of
 * times: every run stores the same values. */
static void look_up_jemalloc(void);

static void *first_malloc(size_t size)
{
    look_up_jemalloc();
    return ra__je_malloc(size);
}

static void first_free(void *ptr)
{
    look_up_jemalloc();
    ra__je_free(ptr);
}

static void *first_calloc(size_t n, size_t size)
{
    look_up_jemalloc();
    return ra__je_calloc(n, size);
}

static void *first_realloc(void *ptr, size_t size)
{
    look_up_jemalloc();
    return ra__je_realloc(ptr, size);
}

static void *first_aligned_alloc(size_t align, size_t size)
{
    look_up_jemalloc();
    return ra__je_aligned_alloc(align, size);
}

static size_t first_usable_size(void *ptr)
{
    look_up_jemalloc();
    return ra__je_usable_size(ptr);
}

static void *first_mallocx(size_t size, int flags)
{
    look_up_jemalloc();
    return ra__je_mallocx(size, flags);
}

static void *first_rallocx(void *ptr, size_t size, int flags)
{
    look_up_jemalloc();
    return ra__je_rallocx(ptr, size, flags);
}

static size_t first_xallocx(void *ptr, size_t size, size_t extra, int flags)
{
    look_up_jemalloc();
    return ra__je_xallocx(ptr, size, extra, flags);
}

static size_t first_sallocx(const void *ptr, int flags)
{
    look_up_jemalloc();
    return ra__je_sallocx(ptr, flags);
}

static void first_dallocx(void *ptr, int flags)
{
    look_up_jemalloc();
    ra__je_dallocx(ptr, flags);
}

static void first_sdallocx(void *ptr, size_t size, int flags)
{
    look_up_jemalloc();
    ra__je_sdallocx(ptr, size, flags);
}

static size_t first_nallocx(size_t size, int flags)
{
    look_up_jemalloc();
    return ra__je_nallocx(size, flags);
}

struct ra__jemalloc ra__je = {
    first_malloc,  first_free,    first_calloc,  first_realloc,
    first_aligned_alloc, first_usable_size, first_mallocx, first_rallocx,
    first_xallocx, first_sallocx, first_dallocx, first_sdallocx,
    first_nallocx,
};

/* dl_iterate_phdr callback: stops at the first object, in load order, that
 * defines mallctl, a name the library never defines: jemalloc's. */
static int find_jemalloc_object(struct dl_phdr_info *info, size_t size,
                                void *ctx)
{
    struct ra__dynsym *d = ctx;

    (void)size;
    return !ra__dynsym_open(d, info) &&
           ra__dynsym_find(d, "mallctl") != NULL;
}

#define STORE(member, value)                                                \
    atomic_store_explicit(&ra__je.member, value, memory_order_relaxed)

#ifndef RA_OVERRIDE
/* Without the override, jemalloc's non-standard names are jemalloc's: a
 * jemalloc linked into the program, whose symbols are not in a dynamic
 * table, is still reached. Untagged blocks then go through the same API. */
static void *fallback_malloc(size_t size)
{
    return mallocx(size == 0 ? 1 : size, 0);
}

static void fallback_free(void *ptr)
{
    if (ptr != NULL)
        dallocx(ptr, 0);
}

static void *fallback_calloc(size_t n, size_t size)
{
    size_t total;

    if (__builtin_mul_overflow(n, size, &total))
        return NULL;
    return mallocx(total == 0 ? 1 : total, MALLOCX_ZERO);
}

static void *fallback_aligned_alloc(size_t align, size_t size)
{
    return mallocx(size == 0 ? 1 : size, MALLOCX_ALIGN(align));
}

static void *fallback_realloc(void *ptr, size_t size)
{
    return rallocx(ptr, size, 0);
}

static size_t fallback_usable_size(void *ptr)
{
    return sallocx(ptr, 0);
}

static void use_fallbacks(void)
{
    STORE(malloc_fn, fallback_malloc);
    STORE(free_fn, fallback_free);
    STORE(calloc_fn, fallback_calloc);
    STORE(realloc_fn, fallback_realloc);
    STORE(aligned_alloc_fn, fallback_aligned_alloc);
    STORE(usable_size_fn, fallback_usable_size);
    STORE(mallocx_fn, mallocx);
    STORE(rallocx_fn, rallocx);
    STORE(xallocx_fn, xallocx);
    STORE(sallocx_fn, sallocx);
    STORE(dallocx_fn, dallocx);
    STORE(sdallocx_fn, sdallocx);
    STORE(nallocx_fn, nallocx);
}
#else
/* With the override, nothing else reaches jemalloc: say why and stop. */
static void use_fallbacks(void)
{
    ra__warn("regionalloc: cannot find jemalloc's own functions in its "
             "shared library (is jemalloc linked statically?); aborting");
    abort();
}
#endif

static void look_up_jemalloc(void)
{
    struct ra__dynsym d;
    bool found;
    void *f[13];
    static const char *const names[13] = {
        "malloc",  "free",    "calloc",  "realloc", "aligned_alloc",
        "malloc_usable_size", "mallocx", "rallocx", "xallocx", "sallocx",
        "dallocx", "sdallocx", "nallocx"};

    ra__assert_may_call_loader();
    found = dl_iterate_phdr(find_jemalloc_object, &d) != 0;
    for (int i = 0; i < 13; i++) {
        f[i] = found ? ra__dynsym_find(&d, names[i]) : NULL;
        if (f[i] == NULL) {
            use_fallbacks();
            return;
        }
    }
    STORE(malloc_fn, (void *(*)(size_t))f[0]);
    STORE(free_fn, (void (*)(void *))f[1]);
    STORE(calloc_fn, (void *(*)(size_t, size_t))f[2]);
    STORE(realloc_fn, (void *(*)(void *, size_t))f[3]);
    STORE(aligned_alloc_fn, (void *(*)(size_t, size_t))f[4]);
    STORE(usable_size_fn, (size_t(*)(void *))f[5]);
    STORE(mallocx_fn, (void *(*)(size_t, int))f[6]);
    STORE(rallocx_fn, (void *(*)(void *, size_t, int))f[7]);
    STORE(xallocx_fn, (size_t(*)(void *, size_t, size_t, int))f[8]);
    STORE(sallocx_fn, (size_t(*)(const void *, int))f[9]);
    STORE(dallocx_fn, (void (*)(void *, int))f[10]);
    STORE(sdallocx_fn, (void (*)(void *, size_t, int))f[11]);
    STORE(nallocx_fn, (size_t(*)(size_t, int))f[12]);
}

bool ra__jemalloc_owns(const void *addr)
{
    Dl_info in, je;

    if (RA__JE(mallocx) == first_mallocx)
        look_up_jemalloc();
    ra__assert_may_call_loader();
    return addr != NULL && dladdr(addr, &in) != 0 &&
           dladdr((void *)RA__JE(mallocx), &je) != 0 &&
           in.dli_fbase == je.dli_fbase;
}

/* The code of the object find_jemalloc_object stops at: its executable
 * segment (ctx's range, written when found). */
struct code_range {
    struct ra__dynsym d;
    uintptr_t start, end;
};

static int find_jemalloc_code(struct dl_phdr_info *info, size_t size,
                              void *ctx)
{
    struct code_range *c = ctx;

    if (!find_jemalloc_object(info, size, &c->d))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            c->start = info->dlpi_addr + ph->p_vaddr;
            c->end = c->start + ph->p_memsz;
        }
    }
    return 1;
}

bool ra__jemalloc_code(uintptr_t *start, uintptr_t *end)
{
    struct code_range c = {.start = 0, .end = 0};

    ra__assert_may_call_loader();
    if (dl_iterate_phdr(find_jemalloc_code, &c) == 0 || c.start == 0)
        return true;
    *start = c.start;
    *end = c.end;
    return false;
}
