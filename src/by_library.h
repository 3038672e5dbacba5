/* Floor: ends. by_library.c's declarations: tags by calling object
 * (REGIONALLOC_TAG_BY=library), for the instrumented path, the dlclose
 * wrapper, the reports and the lifecycle. */
#ifndef RA_BY_LIBRARY_H
#define RA_BY_LIBRARY_H

#include "dynsym.h"
#include "internal.h"

/* -- by_library.c: tags by calling object ---------------------------------- */
/* A thread's cache from a return address to its object's tag: direct
 * mapped, RA__LIB_CACHE_WAYS entries, each valid while the loader's
 * generation (dynsym.c's ra__dl_generation, bumped by every dlclose) is
 * the one it was made in. */
#define RA__LIB_CACHE_WAYS 64u
struct ra__lib_cache_entry {
    uintptr_t pc;
    unsigned generation;
    ra_tag_t tag;
};
/* The calling thread's cache, NULL until its first miss (and again after
 * its exit). */
extern RA__TLS struct ra__lib_cache_entry *ra__lib_cache;

/* At load with REGIONALLOC_TAG_BY=library: the tag "libraries" made and
 * the program's path noted. Whether tags by calling object are on (the
 * lifecycle then sets RA__INSTRUMENT_LIBRARY). */
bool ra__by_library_start(void);
/* The tag of the object whose code is at caller, when the cache does not
 * know it: looked up, its tag made at its first allocation (or
 * "libraries" while it cannot be made now). */
ra_tag_t ra__by_library_miss(const void *caller) __attribute__((noinline));
/* The path of the object whose tag is tag, or NULL when tag is no
 * object's. Valid while the process lives. */
const char *ra__by_library_path(ra_tag_t tag);
/* Whether tag is "libraries" or an object's: in use for good, as a
 * thread's base tag is (ra_tag_destroy refuses it). */
bool ra__by_library_holds(ra_tag_t tag);
/* How many objects' allocations go to "libraries" itself (no id was left
 * for their tag), and that tag (RA_TAG_NONE when off). */
unsigned ra__by_library_shared(void);
ra_tag_t ra__by_library_parent(void);
/* At thread exit (init.c): the thread's cache goes. */
void ra__by_library_thread_exit(void);
void ra__by_library_prefork(void);
void ra__by_library_postfork(void);

/* The tag an untagged allocation called from caller goes to, when the
 * thread's cache knows it (a hash, three loads and two compares), else
 * RA_TAG_NONE: then ra__by_library_miss. */
static inline ra_tag_t ra__by_library_cached(const void *caller)
{
    const struct ra__lib_cache_entry *cache = ra__lib_cache;
    uintptr_t pc = (uintptr_t)caller;

    if (RA__LIKELY(cache != NULL)) {
        const struct ra__lib_cache_entry *e =
            &cache[(pc ^ (pc >> 7)) & (RA__LIB_CACHE_WAYS - 1)];
        /* Relaxed: a thread reaches an object loaded after a dlclose only
         * through the loader, whose lock ordered the bump before. */
        if (RA__LIKELY(e->pc == pc &&
                       e->generation ==
                           atomic_load_explicit(&ra__dl_generation,
                                                memory_order_relaxed)))
            return e->tag;
    }
    return RA_TAG_NONE;
}

#endif /* RA_BY_LIBRARY_H */
