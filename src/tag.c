/* Floor: state. Registry of tag names and ids (created, destroyed,
 * recycled), and the thread-local tag stack. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "internal.h"
#include "region.h"

__thread struct ra__tag_stack ra__tag_stack;
unsigned ra__tags_published;
unsigned char ra__tag_live[RA__MAX_TAGS_LIMIT + 1];

/* Names change only under the lock (a destroyed tag's is "", a recycled
 * id's is the new one), and are read under it. */
static char tag_names[RA__MAX_TAGS_LIMIT + 1][RA_TAG_NAME_MAX + 1];
static pthread_mutex_t registry_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
/* Tags created so far, recycled ids counted again, and the count when each
 * live tag was created: a checkpoint taken when the count was at least a
 * tag's saw that tag, not an earlier holder of its id. */
static uint64_t creations;
static uint64_t born[RA__MAX_TAGS_LIMIT + 1];
/* Tag trees: each live tag's depth (1 at the top level), under the
 * registry lock. Its parent is the budgets' (ra__budget_parent), which
 * charge up the tree: set and cleared under the registry lock too. */
static unsigned depths[RA__MAX_TAGS_LIMIT + 1];
/* Each live tag's live children, under the registry lock: a tag with none
 * (every tag of a tag per request) is its whole subtree, found without a
 * walk of every id. */
static unsigned children[RA__MAX_TAGS_LIMIT + 1];
/* Destroyed ids ready for reuse, oldest first (a ring), and which ids are
 * in it; ids passed over for good (new_tag). */
static unsigned free_ids[RA__MAX_TAGS_LIMIT];
static unsigned free_head, free_count;
static bool queued[RA__MAX_TAGS_LIMIT + 1];
static bool passed_over[RA__MAX_TAGS_LIMIT + 1];

void ra__tag_prefork(void)
{
    ra__lock(&registry_lock);
}

void ra__tag_postfork(void)
{
    ra__unlock(&registry_lock);
}

/* Returns the length of name, or 0 when it is not a valid tag name. */
static size_t valid_name_length(const char *name)
{
    size_t len;

    if (name == NULL)
        return 0;
    len = strnlen(name, RA_TAG_NAME_MAX + 1);
    return len > RA_TAG_NAME_MAX ? 0 : len;
}

/* The live tags by name, under the registry lock: chains of ids (0 ends
 * one) from NAME_BUCKETS heads, so that a creation, which must find a live
 * tag of its name first, costs the same at 10 tags as at 4,000 (a scan of
 * every id took 7 us a request at 3,000 tags). */
#define NAME_BUCKETS 4096u
_Static_assert(RA__MAX_TAGS_LIMIT < UINT16_MAX, "ids fit the chains");
static uint16_t name_heads[NAME_BUCKETS];
static uint16_t name_next[RA__MAX_TAGS_LIMIT + 1];

/* FNV-1a. */
static unsigned name_bucket(const char *name)
{
    uint32_t h = 2166136261u;

    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = (h ^ *c) * 16777619u;
    return h & (NAME_BUCKETS - 1);
}

static void name_insert(ra_tag_t tag)
{
    unsigned b = name_bucket(tag_names[tag]);

    name_next[tag] = name_heads[b];
    name_heads[b] = (uint16_t)tag;
}

static void name_remove(ra_tag_t tag)
{
    uint16_t *link = &name_heads[name_bucket(tag_names[tag])];

    while (*link != tag) {
        ra__assert(*link != 0);
        link = &name_next[*link];
    }
    *link = name_next[tag];
}

/* With the registry locked: the live tag called name, or RA_TAG_NONE. */
static ra_tag_t find_tag(const char *name)
{
    for (unsigned t = name_heads[name_bucket(name)]; t != 0; t = name_next[t])
        if (strcmp(tag_names[t], name) == 0)
            return t;
    return RA_TAG_NONE;
}

ra_tag_t ra_tag_lookup(const char *name)
{
    ra_tag_t tag;

    if (valid_name_length(name) == 0) {
        errno = EINVAL;
        return RA_TAG_NONE;
    }
    ra__lock(&registry_lock);
    tag = find_tag(name);
    ra__unlock(&registry_lock);
    if (tag == RA_TAG_NONE)
        errno = ENOENT;
    return tag;
}

/* With the registry locked: a new id, with its arena, or RA_TAG_NONE with
 * errno set. An id whose region another mapping took (given-back space,
 * the region's EEXIST) is published dead and passed over for good: never
 * live, never recycled, failing every call as a destroyed id does, so that
 * one region lost does not stop every creation after it. */
static ra_tag_t new_tag(bool tagging)
{
    unsigned count = __atomic_load_n(&ra__tags_published, __ATOMIC_RELAXED);
    int arena, saved = errno;

    for (;; count++) {
        if (count >= ra__config()->max_tags) {
            errno = ENOSPC;
            return RA_TAG_NONE;
        }
        if (!tagging)
            return count + 1;
        /* Every id published has its region handed out, and no other. */
        ra__assert(ra__region_count() == count);
        arena = ra__pool_first_arena(count + 1);
        if (arena >= 0)
            break;
        if (errno != EEXIST)
            return RA_TAG_NONE;
        passed_over[count + 1] = true;
        __atomic_store_n(&ra__tags_published, count + 1, __ATOMIC_RELEASE);
    }
    errno = saved; /* a region passed over is no error of the caller's */
    ra__pool_start(count + 1, (unsigned)arena);
    return count + 1;
}

/* With the registry locked: the id destroyed longest ago, its region and
 * arena empty (ra__tag_wipe), or RA_TAG_NONE. */
static ra_tag_t recycled_tag(void)
{
    ra_tag_t tag;

    if (free_count == 0)
        return RA_TAG_NONE;
    tag = free_ids[free_head];
    free_head = (free_head + 1) % RA__MAX_TAGS_LIMIT;
    free_count--;
    queued[tag] = false;
    return tag;
}

/* With the registry locked: the id destroyed longest ago goes back to the
 * front of the queue (a creation that could not finish). */
static void unrecycle(ra_tag_t tag)
{
    free_head = (free_head + RA__MAX_TAGS_LIMIT - 1) % RA__MAX_TAGS_LIMIT;
    free_ids[free_head] = tag;
    free_count++;
    queued[tag] = true;
}

ra_tag_t ra__tag_create(ra_tag_t parent, const char *name, bool anywhere,
                        ra_tag_t *own)
{
    size_t len = valid_name_length(name);
    bool tagging;
    ra_tag_t tag;

    if (len == 0) {
        errno = EINVAL;
        return RA_TAG_NONE;
    }
    tagging = ra__init();
    ra__lock(&registry_lock);
    if (parent != RA_TAG_NONE &&
        (!ra__tag_valid(parent) || depths[parent] >= RA_TAG_DEPTH_MAX)) {
        errno = EINVAL;
        tag = RA_TAG_NONE;
        goto out;
    }
    tag = find_tag(name);
    if (tag != RA_TAG_NONE) {
        if (!anywhere && ra__budget_parent(tag) != parent) {
            errno = EEXIST;
            tag = RA_TAG_NONE;
        }
        goto out;
    }
    tag = own != NULL ? *own : RA_TAG_NONE;
    if (tag == RA_TAG_NONE)
        tag = recycled_tag();
    if (tag == RA_TAG_NONE)
        tag = new_tag(tagging);
    if (tag == RA_TAG_NONE)
        goto out;
    /* A recycled slot's kept pages may not fit an ancestor's budget. */
    if (!ra__budget_attach(tag, parent)) {
        /* The caller's own id stays the caller's; another goes back to
         * the queue's front, a fresh one too: its arena is made, the next
         * creation takes it. */
        if (own == NULL || *own != tag)
            unrecycle(tag);
        if (tag > __atomic_load_n(&ra__tags_published, __ATOMIC_RELAXED))
            __atomic_store_n(&ra__tags_published, tag, __ATOMIC_RELEASE);
        tag = RA_TAG_NONE;
        goto out;
    }
    if (own != NULL && *own == tag)
        *own = RA_TAG_NONE;
    depths[tag] = parent == RA_TAG_NONE ? 1 : depths[parent] + 1;
    children[tag] = 0;
    if (parent != RA_TAG_NONE)
        children[parent]++;
    /* Zero-filled: the bytes after the NUL are published too (the stats
     * segment copies the whole field), and must not be a dead tag's. */
    memset(tag_names[tag], 0, sizeof tag_names[tag]);
    memcpy(tag_names[tag], name, len);
    name_insert(tag);
    born[tag] = __atomic_add_fetch(&creations, 1, __ATOMIC_RELAXED);
    if (tagging) {
        ra__region_name(tag, name);
        ra__budget_apply_config(tag, name);
    }
    __atomic_store_n(&ra__tag_live[tag], 1, __ATOMIC_RELEASE);
    if (tag > __atomic_load_n(&ra__tags_published, __ATOMIC_RELAXED))
        __atomic_store_n(&ra__tags_published, tag, __ATOMIC_RELEASE);
out:
    ra__unlock(&registry_lock);
    return tag;
}

ra_tag_t ra_tag_parent(ra_tag_t tag)
{
    ra_tag_t parent = RA_TAG_NONE;

    ra__lock(&registry_lock);
    if (ra__tag_valid(tag)) {
        parent = ra__budget_parent(tag);
        errno = 0;
    } else {
        errno = EINVAL;
    }
    ra__unlock(&registry_lock);
    return parent;
}

/* With the registry locked: whether tag (live) is root or below it. */
static bool in_subtree(ra_tag_t tag, ra_tag_t root)
{
    for (; tag != RA_TAG_NONE; tag = ra__budget_parent(tag))
        if (tag == root)
            return true;
    return false;
}

/* With the registry locked: root's live subtree into out, deepest first
 * (a tag always before its parent); returns how many. */
static unsigned subtree_locked(ra_tag_t root, ra_tag_t *out)
{
    unsigned count = __atomic_load_n(&ra__tags_published, __ATOMIC_RELAXED);
    unsigned n = 0;

    if (children[root] == 0) {
        out[0] = root;
        return 1;
    }
    for (unsigned d = RA_TAG_DEPTH_MAX; d >= 1; d--)
        for (ra_tag_t t = 1; t <= count; t++)
            if (ra__tag_live[t] && depths[t] == d && in_subtree(t, root))
                out[n++] = t;
    return n;
}

bool ra__tag_in_subtree(ra_tag_t tag, ra_tag_t root)
{
    bool in;

    ra__lock(&registry_lock);
    in = ra__tag_valid(tag) && in_subtree(tag, root);
    ra__unlock(&registry_lock);
    return in;
}

unsigned ra__tag_subtree(ra_tag_t root, ra_tag_t *out)
{
    unsigned n;

    ra__lock(&registry_lock);
    n = ra__tag_valid(root) ? subtree_locked(root, out) : 0;
    ra__unlock(&registry_lock);
    return n;
}

/* With the registry locked: tag dead, its name free. */
static void kill_locked(ra_tag_t tag)
{
    __atomic_store_n(&ra__tag_live[tag], 0, __ATOMIC_RELEASE);
    name_remove(tag);
    memset(tag_names[tag], 0, sizeof tag_names[tag]);
}

unsigned ra__tag_kill_subtree(ra_tag_t root, ra_tag_t *out)
{
    unsigned n = 0;

    ra__lock(&registry_lock);
    if (ra__tag_valid(root)) {
        ra_tag_t parent = ra__budget_parent(root);
        n = subtree_locked(root, out);
        /* The subtree's tags go with it: only the root's parent loses a
         * live child. */
        if (parent != RA_TAG_NONE)
            children[parent]--;
        for (unsigned i = 0; i < n; i++)
            kill_locked(out[i]);
    }
    ra__unlock(&registry_lock);
    return n;
}

int ra__tag_kill_leaf(ra_tag_t tag)
{
    int rc = 0;

    ra__lock(&registry_lock);
    if (!ra__tag_valid(tag)) {
        rc = EINVAL;
    } else if (children[tag] != 0) {
        rc = -1;
    } else {
        ra_tag_t parent = ra__budget_parent(tag);
        if (parent != RA_TAG_NONE)
            children[parent]--;
        kill_locked(tag);
    }
    ra__unlock(&registry_lock);
    return rc;
}

bool ra__tag_give_back_address_space(void)
{
    bool given;

    if (!atomic_load_explicit(&ra__tagging, memory_order_acquire))
        return false;
    /* No region is handed to a new tag meanwhile. */
    ra__lock(&registry_lock);
    given = ra__region_give_back();
    ra__unlock(&registry_lock);
    return given;
}

/* The next free id that ra__tag_next_idle names, as a position counted from
 * free_head. */
static unsigned idle_cursor;

void ra__tag_release_id(ra_tag_t tag)
{
    ra__lock(&registry_lock);
    ra__assert(!queued[tag]);
    free_ids[(free_head + free_count) % RA__MAX_TAGS_LIMIT] = tag;
    free_count++;
    queued[tag] = true;
    ra__unlock(&registry_lock);
}

bool ra__tag_take_free(ra_tag_t tag)
{
    bool found = false;

    ra__lock(&registry_lock);
    for (unsigned i = 0; i < free_count && !found; i++) {
        unsigned at = (free_head + i) % RA__MAX_TAGS_LIMIT;
        if (free_ids[at] != tag)
            continue;
        /* The ids after it move up one: the queue keeps its order. */
        for (unsigned j = i; j + 1 < free_count; j++)
            free_ids[(free_head + j) % RA__MAX_TAGS_LIMIT] =
                free_ids[(free_head + j + 1) % RA__MAX_TAGS_LIMIT];
        free_count--;
        queued[tag] = false;
        found = true;
    }
    ra__unlock(&registry_lock);
    return found;
}

bool ra__tag_in_limbo(ra_tag_t tag)
{
    bool limbo;

    ra__lock(&registry_lock);
    limbo = tag <= __atomic_load_n(&ra__tags_published, __ATOMIC_RELAXED) &&
            !ra__tag_live[tag] && !queued[tag] && !passed_over[tag];
    ra__unlock(&registry_lock);
    return limbo;
}

ra_tag_t ra__tag_next_idle(void)
{
    ra_tag_t tag = RA_TAG_NONE;

    ra__lock(&registry_lock);
    if (free_count != 0) {
        idle_cursor %= free_count;
        tag = free_ids[(free_head + idle_cursor++) % RA__MAX_TAGS_LIMIT];
    }
    ra__unlock(&registry_lock);
    return tag;
}

bool ra__tag_identity(ra_tag_t tag, char name[RA_TAG_NAME_MAX + 1],
                      uint64_t *born_at)
{
    bool live;

    ra__lock(&registry_lock);
    live = ra__tag_valid(tag);
    memcpy(name, live ? tag_names[tag] : "", live ? RA_TAG_NAME_MAX + 1 : 1);
    if (born_at != NULL)
        *born_at = live ? born[tag] : UINT64_MAX;
    ra__unlock(&registry_lock);
    return live;
}

unsigned ra__tag_holders(struct ra__tag_holder *out, unsigned n)
{
    unsigned published;

    ra__lock(&registry_lock);
    published = __atomic_load_n(&ra__tags_published, __ATOMIC_RELAXED);
    if (n > published)
        n = published;
    for (ra_tag_t t = 1; t <= n; t++) {
        struct ra__tag_holder *h = &out[t];
        h->live = ra__tag_live[t] != 0;
        h->parent = h->live ? ra__budget_parent(t) : RA_TAG_NONE;
        h->born = h->live ? born[t] : UINT64_MAX;
        memcpy(h->name, h->live ? tag_names[t] : "",
               h->live ? sizeof h->name : 1);
    }
    ra__unlock(&registry_lock);
    return n;
}

uint64_t ra__tag_creations(void)
{
    return __atomic_load_n(&creations, __ATOMIC_RELAXED);
}

const char *ra__tag_label(ra_tag_t tag, char buf[RA_TAG_NAME_MAX + 1])
{
    return ra__tag_identity(tag, buf, NULL) ? buf : "(destroyed)";
}

/* The string is the registry's own: it changes if the tag is destroyed
 * (and its id recycled), as the man page says. */
const char *ra_tag_name(ra_tag_t tag)
{
    if (tag == RA_TAG_NONE)
        return "untagged";
    if (tag > ra__tag_published()) {
        errno = EINVAL;
        return NULL;
    }
    if (!ra__tag_valid(tag)) {
        errno = ENOENT;
        return NULL;
    }
    return tag_names[tag];
}

unsigned ra_tag_count(void)
{
    return ra__tag_published();
}

/* Sets errno for a push or pop that cannot be done. Returns -1. */
RA__COLD static int stack_error(int error)
{
    errno = error;
    return -1;
}

int(ra_tag_push)(ra_tag_t tag)
{
    struct ra__tag_stack *s = &ra__tag_stack;
    unsigned depth = s->depth;

    /* tag - 1 wraps for RA_TAG_NONE: one compare checks both ends. */
    if (RA__UNLIKELY(tag - 1u >= ra__tag_published()) ||
        RA__UNLIKELY(!__atomic_load_n(&ra__tag_live[tag], __ATOMIC_ACQUIRE)))
        return stack_error(EINVAL);
    if (RA__UNLIKELY(depth >= RA_TAG_STACK_MAX))
        return stack_error(EOVERFLOW);
    s->items[depth + 1] = tag;
    s->depth = depth + 1;
    s->top = tag;
    ra__assert(s->depth <= RA_TAG_STACK_MAX && ra__tag_valid(s->top));
    return 0;
}

int(ra_tag_pop)(ra_tag_t tag)
{
    struct ra__tag_stack *s = &ra__tag_stack;
    unsigned depth = s->depth;

    /* Only created tags are ever pushed, so a tag on top is valid. */
    if (RA__UNLIKELY(tag == RA_TAG_NONE || depth == 0 ||
                     s->items[depth] != tag))
        return stack_error(EINVAL);
    s->depth = depth - 1;
    s->top = s->items[depth - 1];
    return 0;
}

ra_tag_t ra_tag_current(void)
{
    return ra__tag_stack.top;
}

/* -- who writes a thread's top ----------------------------------------------
 * The thread itself (push, pop, suspension) with plain stores, and another
 * thread that gives it a new base (ra__tag_set_base) with a compare-and-
 * swap. The suspension count and the top change together under a
 * per-thread lock that only those two take, for a few instructions: so a
 * base given while the tag is suspended never becomes the top inside the
 * suspension, and the suspension's end reads the base as it is then. */
struct ra__tag_thread {
    struct ra__tag_stack *stack;
    atomic_flag lock;
    unsigned suspended; /* nesting depth of ra__tag_suspend */
};

static RA__TLS struct ra__tag_thread tls_thread = {NULL, ATOMIC_FLAG_INIT, 0};

/* Held for a few instructions at a time: spinning beats sleeping. */
static void lock_thread(struct ra__tag_thread *t)
{
    while (atomic_flag_test_and_set_explicit(&t->lock, memory_order_acquire)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

static void unlock_thread(struct ra__tag_thread *t)
{
    atomic_flag_clear_explicit(&t->lock, memory_order_release);
}

struct ra__tag_thread *ra__tag_thread_self(void)
{
    tls_thread.stack = &ra__tag_stack;
    return &tls_thread;
}

static ra_tag_t load_tag(const ra_tag_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

void ra__tag_suspend(void)
{
    struct ra__tag_thread *t = &tls_thread;

    lock_thread(t);
    if (t->suspended++ == 0)
        __atomic_store_n(&ra__tag_stack.top, RA_TAG_NONE, __ATOMIC_RELAXED);
    unlock_thread(t);
}

void ra__tag_resume(void)
{
    struct ra__tag_thread *t = &tls_thread;
    struct ra__tag_stack *s = &ra__tag_stack;

    lock_thread(t);
    ra__assert(t->suspended > 0 && s->depth <= RA_TAG_STACK_MAX);
    if (--t->suspended == 0)
        __atomic_store_n(&s->top, load_tag(&s->items[s->depth]),
                         __ATOMIC_RELAXED);
    unlock_thread(t);
}

/* The top is the base whenever nothing is pushed (and the tag is not
 * suspended); any other value there is stale (a pop that read the base
 * just before a rename stored it) and is replaced. The top is read before
 * the depth: a push stores the depth first, so a top that a push wrote is
 * seen with its depth, and left alone. */
void ra__tag_set_base(struct ra__tag_thread *t, ra_tag_t tag)
{
    struct ra__tag_stack *s = t->stack;

    lock_thread(t);
    __atomic_store_n(&s->items[0], tag, __ATOMIC_RELAXED);
    if (t->suspended == 0) {
        if (t == &tls_thread) {
            if (s->depth == 0)
                s->top = tag;
        } else {
            ra_tag_t top;
            atomic_thread_fence(memory_order_seq_cst);
            top = __atomic_load_n(&s->top, __ATOMIC_ACQUIRE);
            if (top != tag && __atomic_load_n(&s->depth, __ATOMIC_RELAXED) == 0)
                __atomic_compare_exchange_n(&s->top, &top, tag, false,
                                            __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED);
        }
    }
    unlock_thread(t);
}

bool ra__tag_thread_holds(struct ra__tag_thread *t, ra_tag_t tag)
{
    const struct ra__tag_stack *s = t->stack;

    return load_tag(&s->items[0]) == tag ||
           (__atomic_load_n(&s->depth, __ATOMIC_RELAXED) == 0 &&
            load_tag(&s->top) == tag);
}

ra_tag_t ra__tag_scope_begin(ra_tag_t tag)
{
    return ra_tag_push(tag) == 0 ? tag : RA_TAG_NONE;
}

void ra__tag_scope_end(const ra_tag_t *pushed)
{
    int saved = errno;

    if (*pushed != RA_TAG_NONE)
        ra_tag_pop(*pushed);
    errno = saved;
}
