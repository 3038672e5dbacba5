/* Floor: tags. Registry of tag names (created, destroyed, found by name),
 * their trees, creation numbers and identities; the ids they take are
 * tag_ids.c's, the thread-local stack tag_stack.c's. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "internal.h"
#include "tags.h"
#include "region.h"


/* The registry has no lock of all tags on a tag's creation and end: a tag
 * per request would queue every thread on it (with one mutex, most of the
 * time two threads serving requests spent creating and destroying tags
 * went to the futex calls of its contention). A name's stripe (of
 * STRIPES, by its hash) guards the chain of its hash and the fields of
 * each live tag whose name is in that chain (its entry, and its
 * liveness); an entry names its stripe while the tag lives. ids_lock
 * guards the queue of free ids and the handing
 * out of fresh ones; it is taken under a stripe, never the other way. A
 * view of the whole registry (a tree, the holders of every id) takes every
 * stripe, in order. Stripes are spin locks that yield: held for a few
 * loads and stores on a request's path, and more than 64 mutexes held at
 * once at a fork is more than ThreadSanitizer follows. */
#define STRIPES 64u
/* The live tags by name: chains of ids (0 ends one) from NAME_BUCKETS
 * heads, so that a creation, which must find a live tag of its name first,
 * costs the same at 10 tags as at 4,000 (a scan of every id took 7 us a
 * request at 3,000 tags). Bucket b is stripe b % STRIPES's, whose heads
 * sit beside its lock: two threads that create and destroy tags on
 * different stripes share no line. */
#define NAME_BUCKETS 4096u
static struct stripe {
    alignas(64) struct ra__spin held;
    uint16_t heads[NAME_BUCKETS / STRIPES];
} stripes[STRIPES] = {
    [0 ... STRIPES - 1] = {.held = RA__SPIN_INIT(RA__RANK_STRIPE)}};

/* Each id's fields, under its stripe, a cache line of their own: a
 * request's creation and end write them, and ids side by side would
 * otherwise share lines between the threads that hold them. */
static struct entry {
    /* "" for a dead tag, the new holder's for a recycled id; the bytes
     * after the NUL are zero too (the stats segment copies the field). */
    alignas(64) char name[RA_TAG_NAME_MAX + 1];
    /* The creation count when the tag was created: a checkpoint taken
     * when the count was at least a tag's saw that tag, not an earlier
     * holder of its id. */
    uint64_t born;
    /* Tag trees: the depth (1 at the top level) and the live children (a
     * tag with none, every tag of a tag per request, is its whole
     * subtree, found without a walk of every id). The parent is the
     * budgets' (ra__budget_parent), which charge up the tree: set and
     * cleared under the stripe too. */
    unsigned depth, children;
    /* The next id of the name's chain. */
    uint16_t next;
    /* The stripe of the live tag's name. */
    _Atomic uint8_t stripe;
} entries[RA__MAX_TAGS_LIMIT + 1];
/* Creation numbers (born): each tag gets one, larger than every tag's
 * created before the last mark (ra__tag_creations, a checkpoint's) and
 * never another tag's. Threads take them in blocks of BORN_BLOCK and a
 * mark closes every thread's block: one counter written by every
 * creation was the one line all threads serving requests shared (half of
 * ra_tag_create's time on 2 threads), and would cap a process at some
 * ten million creations a second on a machine whose sockets exchange a
 * line in 100 ns. */
#define BORN_BLOCK 64u
static _Atomic uint64_t creations; /* numbers handed out in blocks */
static _Atomic uint64_t marks;
static RA__TLS uint64_t tls_born_next, tls_born_end, tls_born_marks;
static void stripe_lock(unsigned i)
{
    ra__spin_lock(&stripes[i].held);
}

static void stripe_unlock(unsigned i)
{
    ra__spin_unlock(&stripes[i].held);
}

static void all_stripes_lock(void)
{
    for (unsigned i = 0; i < STRIPES; i++)
        stripe_lock(i);
}

static void all_stripes_unlock(void)
{
    for (unsigned i = STRIPES; i-- > 0;)
        stripe_unlock(i);
}

/* Every stripe held, as a view of the whole registry wants. */
static void assert_all_stripes_held(void)
{
    for (unsigned i = 0; i < STRIPES; i++)
        ra__assert_held(&stripes[i].held);
}

/* Locks stripes a and b (the same or not), lower first. */
static void two_stripes_lock(unsigned a, unsigned b)
{
    stripe_lock(a < b ? a : b);
    if (a != b)
        stripe_lock(a < b ? b : a);
}

static void two_stripes_unlock(unsigned a, unsigned b)
{
    stripe_unlock(a);
    if (a != b)
        stripe_unlock(b);
}

void ra__tag_prefork(void)
{
    all_stripes_lock();
    ra__tag_ids_prefork();
}

void ra__tag_postfork(void)
{
    ra__tag_ids_postfork();
    all_stripes_unlock();
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

_Static_assert(RA__MAX_TAGS_LIMIT < UINT16_MAX, "ids fit the chains");

/* FNV-1a. */
static unsigned name_bucket(const char *name)
{
    uint32_t h = 2166136261u;

    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = (h ^ *c) * 16777619u;
    return h & (NAME_BUCKETS - 1);
}

static unsigned stripe_of_name(const char *name)
{
    return name_bucket(name) % STRIPES;
}

/* Locks the stripe of tag, a live tag's (or, if it is dead, of the name
 * it last had: the caller then finds it dead). Returns the stripe. */
static unsigned lock_tag(ra_tag_t tag)
{
    for (;;) {
        unsigned st = atomic_load_explicit(&entries[tag].stripe,
                                           memory_order_relaxed);
        stripe_lock(st);
        if (atomic_load_explicit(&entries[tag].stripe, memory_order_relaxed) ==
            st)
            return st;
        stripe_unlock(st);
    }
}

/* The head of the chain of name's bucket. */
static uint16_t *head_of(const char *name)
{
    unsigned b = name_bucket(name);

    return &stripes[b % STRIPES].heads[b / STRIPES];
}

/* With tag's stripe locked. */
static void name_insert(ra_tag_t tag)
{
    uint16_t *head = head_of(entries[tag].name);

    ra__assert_held(&stripes[stripe_of_name(entries[tag].name)].held);
    entries[tag].next = *head;
    *head = (uint16_t)tag;
}

static void name_remove(ra_tag_t tag)
{
    uint16_t *link = head_of(entries[tag].name);

    ra__assert_held(&stripes[stripe_of_name(entries[tag].name)].held);
    while (*link != tag) {
        ra__assert(*link != 0);
        link = &entries[*link].next;
    }
    *link = entries[tag].next;
}

/* With the stripe of name locked: the live tag called name, or
 * RA_TAG_NONE. */
static ra_tag_t find_tag(const char *name)
{
    ra__assert_held(&stripes[stripe_of_name(name)].held);
    for (unsigned t = *head_of(name); t != 0; t = entries[t].next)
        if (strcmp(entries[t].name, name) == 0)
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
    stripe_lock(stripe_of_name(name));
    tag = find_tag(name);
    stripe_unlock(stripe_of_name(name));
    if (tag == RA_TAG_NONE)
        errno = ENOENT;
    return tag;
}

/* The next creation number of this thread's block, a new block when it
 * is used up or a mark came since it was taken. */
static uint64_t next_born(void)
{
    uint64_t m = atomic_load(&marks);

    if (tls_born_next == tls_born_end || tls_born_marks != m) {
        tls_born_next = atomic_fetch_add(&creations, BORN_BLOCK) + 1;
        tls_born_end = tls_born_next + BORN_BLOCK;
        tls_born_marks = m;
    }
    return tls_born_next++;
}

/* Locks the stripe of name, st, and the stripe of parent (when not
 * RA_TAG_NONE: its depth and children), into *pst. */
static void lock_for_creation(unsigned st, ra_tag_t parent, unsigned *pst)
{
    for (;;) {
        *pst = parent == RA_TAG_NONE
                   ? st
                   : atomic_load_explicit(&entries[parent].stripe,
                                          memory_order_relaxed);
        two_stripes_lock(st, *pst);
        if (parent == RA_TAG_NONE ||
            atomic_load_explicit(&entries[parent].stripe,
                                 memory_order_relaxed) == *pst)
            return;
        two_stripes_unlock(st, *pst);
    }
}

/* With the stripes locked: an id for a new tag, the caller's own first
 * (*own set to RA_TAG_NONE when taken), or RA_TAG_NONE with errno set. */
static ra_tag_t id_for(ra_tag_t *own, bool tagging)
{
    ra_tag_t tag = own != NULL ? *own : RA_TAG_NONE;

    ra__assert_rank_held(RA__RANK_STRIPE);
    if (tag != RA_TAG_NONE) {
        *own = RA_TAG_NONE;
        return tag;
    }
    return ra__tag_ids_take(tagging);
}

/* With the stripes locked: an id that id_for gave, unused. */
static void id_unused(ra_tag_t tag, ra_tag_t *own, bool was_own)
{
    ra__assert_rank_held(RA__RANK_STRIPE);
    if (was_own)
        *own = tag;
    else
        ra__tag_ids_put_back(tag);
}

/* With the stripes locked: whether tag (an id just taken for name) fits
 * its budgets, REGIONALLOC_LIMITS' for name and its ancestors' (to which
 * it is attached when it does). What a recycled slot keeps may not: unless
 * the caller purged tag since its last try (purged), *unfit names it, for
 * the caller to purge and try again. */
static bool fits_budgets(ra_tag_t tag, ra_tag_t parent, const char *name,
                         bool tagging, ra_tag_t purged, ra_tag_t *unfit)
{
    if (tagging && tag != purged && !ra__budget_config_fits(tag, name)) {
        *unfit = tag;
        errno = ENOMEM;
        return false;
    }
    if (ra__budget_attach(tag, parent))
        return true;
    if (tag != purged)
        *unfit = tag;
    return false;
}

/* With the stripes locked, parent valid and name not live: tag (an id
 * just taken) made name's, a child of parent. */
static void enter(ra_tag_t tag, ra_tag_t parent, const char *name,
                  size_t len, unsigned st, bool tagging)
{
    /* Invariant 12: an id taken is not live; a live name names one tag;
     * trees stop at RA_TAG_DEPTH_MAX. */
    ra__assert(!ra__tag_live[tag] && find_tag(name) == RA_TAG_NONE);
    ra__assert(parent == RA_TAG_NONE ||
               (ra__tag_live[parent] &&
                entries[parent].depth < RA_TAG_DEPTH_MAX));
    entries[tag].depth = parent == RA_TAG_NONE ? 1 : entries[parent].depth + 1;
    entries[tag].children = 0;
    if (parent != RA_TAG_NONE)
        entries[parent].children++;
    /* Zero-filled: the bytes after the NUL are published too (the stats
     * segment copies the whole field), and must not be a dead tag's. */
    memset(entries[tag].name, 0, sizeof entries[tag].name);
    memcpy(entries[tag].name, name, len);
    atomic_store_explicit(&entries[tag].stripe, (uint8_t)st,
                          memory_order_relaxed);
    name_insert(tag);
    entries[tag].born = next_born();
    if (tagging)
        ra__budget_apply_config(tag, name);
    __atomic_store_n(&ra__tag_live[tag], 1, __ATOMIC_RELEASE);
    ra__tag_publish(tag);
}

ra_tag_t ra__tag_create(ra_tag_t parent, const char *name, bool anywhere,
                        ra_tag_t *own, ra_tag_t *unfit)
{
    size_t len = valid_name_length(name);
    bool tagging, made = false, was_own = own != NULL && *own != RA_TAG_NONE;
    ra_tag_t tag, purged = *unfit;
    unsigned st, pst;

    *unfit = RA_TAG_NONE;
    /* Checked again under the stripes; first so that a parent beyond
     * every id is not read. */
    if (len == 0 || (parent != RA_TAG_NONE && parent > ra__tag_published())) {
        errno = EINVAL;
        return RA_TAG_NONE;
    }
    tagging = ra__init();
    st = stripe_of_name(name);
    lock_for_creation(st, parent, &pst);
    if (parent != RA_TAG_NONE &&
        (!ra__tag_valid(parent) ||
         entries[parent].depth >= RA_TAG_DEPTH_MAX)) {
        errno = EINVAL;
        tag = RA_TAG_NONE;
    } else if ((tag = find_tag(name)) != RA_TAG_NONE) {
        if (!anywhere && ra__budget_parent(tag) != parent) {
            errno = EEXIST;
            tag = RA_TAG_NONE;
        }
    } else if ((tag = id_for(own, tagging)) != RA_TAG_NONE) {
        made = fits_budgets(tag, parent, name, tagging, purged, unfit);
        if (made)
            enter(tag, parent, name, len, st, tagging);
        else
            id_unused(tag, own, was_own);
        tag = made ? tag : RA_TAG_NONE;
    }
    two_stripes_unlock(st, pst);
    /* A system call where the kernel names regions: under no lock of ours.
     * Only a destroy of this tag, whose caller saw the creation return,
     * could name the region again. */
    if (made && tagging)
        ra__region_name(tag, name);
    return tag;
}

ra_tag_t ra_tag_parent(ra_tag_t tag)
{
    ra_tag_t parent = RA_TAG_NONE;
    unsigned st;

    if (tag == RA_TAG_NONE || tag > ra__tag_published()) {
        errno = EINVAL;
        return RA_TAG_NONE;
    }
    st = lock_tag(tag);
    if (ra__tag_valid(tag)) {
        parent = ra__budget_parent(tag);
        errno = 0;
    } else {
        errno = EINVAL;
    }
    stripe_unlock(st);
    return parent;
}

/* Whether tag (live) is root or below it. */
static bool in_subtree(ra_tag_t tag, ra_tag_t root)
{
    for (; tag != RA_TAG_NONE; tag = ra__budget_parent(tag))
        if (tag == root)
            return true;
    return false;
}

/* With every stripe locked: root's live subtree into out, deepest first
 * (a tag always before its parent); returns how many. */
static unsigned subtree_locked(ra_tag_t root, ra_tag_t *out)
{
    unsigned count = __atomic_load_n(&ra__tags_published, __ATOMIC_RELAXED);
    unsigned n = 0;

    assert_all_stripes_held();
    if (entries[root].children == 0) {
        out[0] = root;
        return 1;
    }
    for (unsigned d = RA_TAG_DEPTH_MAX; d >= 1; d--)
        for (ra_tag_t t = 1; t <= count; t++)
            if (ra__tag_live[t] && entries[t].depth == d &&
                in_subtree(t, root))
                out[n++] = t;
    /* Deepest first: the root, shallowest, comes last. */
    ra__assert(n >= 1 && out[n - 1] == root);
    return n;
}

/* No lock: a tag's liveness and its parent link are atomics, and a reader
 * of a tree that changes meanwhile gets one of its states (a tag's
 * statistics summed over a subtree, a purge of one). */
bool ra__tag_in_subtree(ra_tag_t tag, ra_tag_t root)
{
    return ra__tag_valid(tag) && in_subtree(tag, root);
}

unsigned ra__tag_subtree(ra_tag_t root, ra_tag_t *out)
{
    unsigned n;

    all_stripes_lock();
    n = ra__tag_valid(root) ? subtree_locked(root, out) : 0;
    all_stripes_unlock();
    return n;
}

/* With tag's stripe locked: tag dead, its name free. */
static void kill_locked(ra_tag_t tag)
{
    ra__assert_held(&stripes[stripe_of_name(entries[tag].name)].held);
    /* Invariant 12: only a live tag dies, and only once. */
    ra__assert(ra__tag_live[tag]);
    __atomic_store_n(&ra__tag_live[tag], 0, __ATOMIC_RELEASE);
    name_remove(tag);
    memset(entries[tag].name, 0, sizeof entries[tag].name);
}

unsigned ra__tag_kill_subtree(ra_tag_t root, ra_tag_t *out)
{
    unsigned n = 0;

    all_stripes_lock();
    if (ra__tag_valid(root)) {
        ra_tag_t parent = ra__budget_parent(root);
        n = subtree_locked(root, out);
        /* The subtree's tags go with it: only the root's parent loses a
         * live child. */
        if (parent != RA_TAG_NONE) {
            ra__assert(entries[parent].children > 0);
            entries[parent].children--;
        }
        for (unsigned i = 0; i < n; i++)
            kill_locked(out[i]);
    }
    all_stripes_unlock();
    return n;
}

int ra__tag_kill_leaf(ra_tag_t tag)
{
    ra_tag_t parent;
    unsigned st, pst;
    int rc = 0;

    /* The tag's stripe and its parent's (one child fewer). A live tag's
     * parent does not change; a dead one's ends the loop as it finds it. */
    for (;;) {
        st = atomic_load_explicit(&entries[tag].stripe, memory_order_relaxed);
        parent = ra__budget_parent(tag);
        pst = parent == RA_TAG_NONE
                  ? st
                  : atomic_load_explicit(&entries[parent].stripe,
                                         memory_order_relaxed);
        two_stripes_lock(st, pst);
        if (atomic_load_explicit(&entries[tag].stripe, memory_order_relaxed) ==
                st &&
            ra__budget_parent(tag) == parent &&
            (parent == RA_TAG_NONE ||
             atomic_load_explicit(&entries[parent].stripe,
                                  memory_order_relaxed) == pst))
            break;
        two_stripes_unlock(st, pst);
    }
    if (!ra__tag_valid(tag)) {
        rc = EINVAL;
    } else if (entries[tag].children != 0) {
        rc = -1;
    } else {
        /* A live child is counted in its live parent. */
        ra__assert(parent == RA_TAG_NONE || entries[parent].children > 0);
        if (parent != RA_TAG_NONE)
            entries[parent].children--;
        kill_locked(tag);
    }
    two_stripes_unlock(st, pst);
    return rc;
}

bool ra__tag_identity(ra_tag_t tag, char name[RA_TAG_NAME_MAX + 1],
                      uint64_t *born_at)
{
    bool live = false;
    unsigned st;

    if (tag != RA_TAG_NONE && tag <= ra__tag_published()) {
        st = lock_tag(tag);
        live = ra__tag_valid(tag);
        if (live)
            memcpy(name, entries[tag].name, RA_TAG_NAME_MAX + 1);
        if (live && born_at != NULL)
            *born_at = entries[tag].born;
        stripe_unlock(st);
    }
    if (!live) {
        name[0] = '\0';
        if (born_at != NULL)
            *born_at = UINT64_MAX;
    }
    return live;
}

unsigned ra__tag_holders(struct ra__tag_holder *out, unsigned n)
{
    unsigned published;

    all_stripes_lock();
    published = __atomic_load_n(&ra__tags_published, __ATOMIC_RELAXED);
    if (n > published)
        n = published;
    for (ra_tag_t t = 1; t <= n; t++) {
        struct ra__tag_holder *h = &out[t];
        h->live = ra__tag_live[t] != 0;
        h->parent = h->live ? ra__budget_parent(t) : RA_TAG_NONE;
        h->born = h->live ? entries[t].born : UINT64_MAX;
        memcpy(h->name, h->live ? entries[t].name : "",
               h->live ? sizeof h->name : 1);
    }
    all_stripes_unlock();
    return n;
}

uint64_t ra__tag_creations(void)
{
    atomic_fetch_add(&marks, 1);
    return atomic_load(&creations);
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
    return entries[tag].name;
}

unsigned ra_tag_count(void)
{
    return ra__tag_published();
}
