/* Floor: ends. Tags by calling object (REGIONALLOC_TAG_BY=library): an
 * allocation made with no tag goes to the tag of the ELF object whose code
 * called the allocation entry, "libraries/<file name>", a child of the tag
 * "libraries". The lifecycle sets RA__INSTRUMENT_LIBRARY, a bit of the
 * instrumentation word above every count of hooks, so the fast paths are
 * the same instructions when it is off and every allocation takes
 * ra__alloc_instrumented (alloc_hooked.c) when it is on. Every entry
 * reaches that by tail calls, so its return address is the entry's
 * caller's; posix_memalign and operator new, which cannot, pass theirs
 * (ra__alloc_from). There each thread's cache from return address to tag
 * answers (by_library.h, inline); a miss asks the loader which object
 * holds the address (_dl_find_object: no lock, no allocation) and this
 * file's table of objects, by path, for its tag, made at the object's
 * first allocation. dlclose bumps the loader's generation (dynsym.c)
 * before and after the real one, and a cache entry of another generation
 * is a miss: an address that a later dlopen reuses never names the
 * closed object, whose tag stays while its blocks live. The tags are
 * never destroyed (EBUSY), so a cached id is always live. An allocation
 * waits for the table's lock only when another thread holds it (making a
 * tag, or forking): when the calling thread holds it itself (its tag's
 * creation allocates, or another fork handler allocates after the
 * library's took its locks), the allocation goes to "libraries" and the
 * object's tag is made at a later one. A constructor's allocation runs
 * inside dlopen with the loader's lock held: the lookup takes no lock of
 * the loader's, and nothing of ours calls into the loader holding a lock
 * that the making of a tag takes (lock.h's RA__RANK_LOADER, checked in the
 * debug build). */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "budget.h"
#include "by_library.h"
#include "dynsym.h"
#include "ends.h"

#define PARENT_NAME "libraries"
/* "libraries/" before the file name. */
#define PREFIX PARENT_NAME "/"
#define PREFIX_LEN (sizeof PREFIX - 1)

/* One object, by path: its tag once made. shared: no id was left for it,
 * and its allocations go to "libraries" for good. */
struct object {
    char *path;
    char name[RA_TAG_NAME_MAX + 1];
    ra_tag_t tag;
    bool shared;
};

RA__TLS struct ra__lib_cache_entry *ra__lib_cache;
/* The thread has left (its cache went): no new one. */
static RA__TLS bool tls_gone;
/* The thread holds objects_lock: an allocation of its own must not wait. */
static RA__TLS bool tls_holds;

static struct ra__mutex objects_lock = RA__MUTEX_INIT(RA__RANK_OBJECTS);
static struct object *objects;      /* under objects_lock */
static unsigned nobjects, capacity; /* under objects_lock */
static _Atomic unsigned nshared;
static ra_tag_t parent_tag; /* "libraries", set once at start */
/* The program's own path: the loader names it "". */
static char program_path[4096];

bool ra__by_library_start(void)
{
    ssize_t n;

    if (!ra__config()->tag_by_library || !ra__init())
        return false;
    parent_tag = ra__purge_create(RA_TAG_NONE, PARENT_NAME, false, NULL);
    if (parent_tag == RA_TAG_NONE) {
        ra__warn("regionalloc: REGIONALLOC_TAG_BY=library: the tag "
                 "\"" PARENT_NAME "\" cannot be made; no tags by calling "
                 "object");
        return false;
    }
    n = readlink("/proc/self/exe", program_path, sizeof program_path - 1);
    program_path[n > 0 ? n : 0] = '\0';
    return true;
}

/* The object called path, added when it is not known yet; NULL when the
 * table cannot grow. Under objects_lock. */
static struct object *object_of(const char *path)
{
    struct object *o;
    size_t len;

    for (unsigned i = 0; i < nobjects; i++)
        if (strcmp(objects[i].path, path) == 0)
            return &objects[i];
    if (nobjects == capacity) {
        unsigned more = capacity == 0 ? 64 : capacity * 2;
        struct object *grown =
            ra__meta_realloc(objects, more * sizeof *objects);
        if (grown == NULL)
            return NULL;
        objects = grown;
        capacity = more;
    }
    len = strlen(path);
    o = &objects[nobjects];
    o->path = ra__meta_alloc(len + 1);
    if (o->path == NULL)
        return NULL;
    memcpy(o->path, path, len + 1);
    o->name[0] = '\0';
    o->tag = RA_TAG_NONE;
    o->shared = false;
    nobjects++;
    return o;
}

/* Whether another object of the table was given name. Under objects_lock. */
static bool name_taken(const struct object *self, const char *name)
{
    for (unsigned i = 0; i < nobjects; i++)
        if (&objects[i] != self && strcmp(objects[i].name, name) == 0)
            return true;
    return false;
}

/* Candidate n of o's name: "libraries/<file name>" for the first, then
 * "libraries/<file name>~n", the file name cut so that it fits. */
static void candidate_name(const struct object *o, unsigned n, char *out)
{
    const char *base = strrchr(o->path, '/');
    char suffix[16] = "";
    size_t room;

    base = base != NULL ? base + 1 : o->path;
    if (base[0] == '\0')
        base = "program";
    if (n > 1)
        snprintf(suffix, sizeof suffix, "~%u", n);
    room = RA_TAG_NAME_MAX - PREFIX_LEN - strlen(suffix);
    snprintf(out, RA_TAG_NAME_MAX + 1, "%s%.*s%s", PREFIX, (int)room, base,
             suffix);
}

/* o's tag made, under a name no other object has and no tag outside
 * "libraries" has; when no id is left, o shares "libraries". Under
 * objects_lock. */
static void make_tag(struct object *o)
{
    char name[RA_TAG_NAME_MAX + 1];

    ra__assert(tls_holds && o->tag == RA_TAG_NONE && !o->shared);
    for (unsigned n = 1; n < 1000; n++) {
        candidate_name(o, n, name);
        if (name_taken(o, name))
            continue;
        o->tag = ra__purge_create(parent_tag, name, false, NULL);
        if (o->tag != RA_TAG_NONE) {
            ra__assert(ra_tag_parent(o->tag) == parent_tag);
            memcpy(o->name, name, sizeof name);
            return;
        }
        if (errno != EEXIST)
            break;
    }
    o->shared = true;
    atomic_fetch_add_explicit(&nshared, 1, memory_order_relaxed);
}

/* The tag of the object that map names; *lasting: whether it may be
 * cached (not while its tag waits to be made). */
static ra_tag_t object_tag(const struct link_map *map, bool *lasting)
{
    const char *path = map->l_name != NULL && map->l_name[0] != '\0'
                           ? map->l_name
                           : program_path;
    struct object *o;
    ra_tag_t tag = parent_tag;

    *lasting = false;
    if (tls_holds)
        return parent_tag;
    ra__lock(&objects_lock);
    tls_holds = true;
    o = object_of(path);
    if (o != NULL) {
        if (o->tag == RA_TAG_NONE && !o->shared)
            make_tag(o);
        if (o->tag != RA_TAG_NONE)
            tag = o->tag;
        *lasting = true;
    }
    tls_holds = false;
    ra__unlock(&objects_lock);
    return tag;
}

/* The calling thread's cache, made at its first miss; NULL once it left
 * or when it cannot be had. */
static struct ra__lib_cache_entry *thread_cache(void)
{
    struct ra__lib_cache_entry *cache = ra__lib_cache;

    if (cache != NULL || tls_gone)
        return cache;
    cache = ra__meta_calloc(RA__LIB_CACHE_WAYS, sizeof *cache);
    if (cache == NULL)
        return NULL;
    /* Published before the key is armed: pthread_setspecific may calloc
     * (a key of index 32 or more, a thread's first), and that allocation's
     * miss must find this cache, not make another and arm again. */
    ra__lib_cache = cache;
    if (ra__thread_exit_arm()) {
        ra__lib_cache = NULL;
        ra__meta_free(cache);
        return NULL;
    }
    return cache;
}

ra_tag_t ra__by_library_miss(const void *caller)
{
    /* Read before the lookup: an entry made from a lookup that a dlclose
     * overtook is stale at once. */
    unsigned generation =
        atomic_load_explicit(&ra__dl_generation, memory_order_acquire);
    uintptr_t pc = (uintptr_t)caller;
    struct dl_find_object found;
    struct ra__lib_cache_entry *cache;
    bool lasting = true;
    ra_tag_t tag = parent_tag;

    /* Code in no object (generated at run time) counts in "libraries". */
    if (_dl_find_object((void *)pc, &found) == 0)
        tag = object_tag(found.dlfo_link_map, &lasting);
    cache = lasting ? thread_cache() : NULL;
    if (cache != NULL) {
        struct ra__lib_cache_entry *e =
            &cache[(pc ^ (pc >> 7)) & (RA__LIB_CACHE_WAYS - 1)];
        e->pc = pc;
        e->generation = generation;
        e->tag = tag;
    }
    return tag;
}

const char *ra__by_library_path(ra_tag_t tag)
{
    const char *path = NULL;

    if (tag == RA_TAG_NONE || parent_tag == RA_TAG_NONE)
        return NULL;
    ra__lock(&objects_lock);
    for (unsigned i = 0; i < nobjects && path == NULL; i++)
        if (objects[i].tag == tag)
            path = objects[i].path;
    ra__unlock(&objects_lock);
    return path;
}

bool ra__by_library_holds(ra_tag_t tag)
{
    bool held = tag != RA_TAG_NONE && tag == parent_tag;

    /* An object's tag is a child of "libraries" for good: any other tag
     * (every request's, at its destroy) is answered without the lock. */
    if (held || parent_tag == RA_TAG_NONE ||
        ra__budget_parent(tag) != parent_tag)
        return held;
    ra__lock(&objects_lock);
    for (unsigned i = 0; i < nobjects && !held; i++)
        held = objects[i].tag == tag;
    ra__unlock(&objects_lock);
    return held;
}

unsigned ra__by_library_shared(void)
{
    return atomic_load_explicit(&nshared, memory_order_relaxed);
}

ra_tag_t ra__by_library_parent(void)
{
    return parent_tag;
}

void ra__by_library_thread_exit(void)
{
    struct ra__lib_cache_entry *cache = ra__lib_cache;

    tls_gone = true;
    ra__lib_cache = NULL;
    ra__meta_free(cache);
}

void ra__by_library_prefork(void)
{
    ra__lock(&objects_lock);
    tls_holds = true;
}

/* Both sides unlock: the forking thread took the lock, and in the child it
 * is that thread. Made anew instead, the lock would stay held in the eyes of
 * ThreadSanitizer, which then sees every later lock taken inside it. */
void ra__by_library_postfork(void)
{
    tls_holds = false;
    ra__unlock(&objects_lock);
}
