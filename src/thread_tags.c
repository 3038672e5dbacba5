/* Floor: ends. Tags by thread name (REGIONALLOC_THREAD_TAGS): a thread
 * whose name matches a rule gets the rule's tag as its base tag, item 0 of
 * its stack, below whatever it pushes. Names come from the intercepted
 * pthread_setname_np and prctl(PR_SET_NAME) (override_thread.c) and, at a
 * thread's start, from the name it inherits from its creator. The allocation
 * paths read the stack's top as always: a base costs them nothing. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "tags.h"
#include "ends.h"
#include "thread_tags.h"

/* A thread whose name can give it a tag: its stack is reachable from the
 * others, so that pthread_setname_np on another thread reaches it. */
struct named_thread {
    struct named_thread *prev, *next;
    pthread_t id;
    /* The kernel's id of the thread, for its name: a pthread_t is reused
     * by the next thread as soon as this one is gone, a tid only once the
     * entry has left the list (the thread's exit takes it out first). */
    pid_t tid;
    struct ra__tag_thread *stack; /* its base is set under named_lock */
};

static struct ra__mutex named_lock = RA__MUTEX_INIT(RA__RANK_NAMED);
static struct named_thread named = {&named, &named, 0, 0, NULL};
static RA__TLS struct named_thread *tls_me;

bool ra__thread_tags_on(void)
{
    return ra__config()->nthread_tags > 0 && ra__init();
}

/* The tag a thread of this name gets: the first rule that matches, its tag
 * created on demand. RA_TAG_NONE: no rule matches, or the tag cannot be
 * created (said once). */
static ra_tag_t tag_for(const char *name)
{
    const struct ra__config *config = ra__config();
    static bool warned;

    for (unsigned i = 0; i < config->nthread_tags; i++) {
        const struct ra__thread_tag_rule *r = &config->thread_tags[i];
        ra_tag_t tag;
        if (fnmatch(r->glob, name, 0) != 0)
            continue;
        if (r->by_name && name[0] == '\0')
            return RA_TAG_NONE;
        tag = ra__purge_create(RA_TAG_NONE, r->by_name ? name : r->tag, true,
                             NULL);
        if (tag == RA_TAG_NONE && !__atomic_exchange_n(&warned, true,
                                                        __ATOMIC_RELAXED)) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "regionalloc: REGIONALLOC_THREAD_TAGS: cannot create "
                     "the tag of thread \"%.16s\": %s; the thread stays "
                     "untagged (said once)", name, strerror(errno));
            ra__warn(msg);
        }
        return tag;
    }
    return RA_TAG_NONE;
}

void ra__thread_tags_thread_exit(void)
{
    struct named_thread *e = tls_me;

    if (e == NULL)
        return;
    ra__lock(&named_lock);
    /* The entry is on the list of named threads, linked both ways. */
    ra__assert(e->prev->next == e && e->next->prev == e);
    e->prev->next = e->next;
    e->next->prev = e->prev;
    ra__unlock(&named_lock);
    tls_me = NULL;
    ra__meta_free(e);
}

/* The calling thread's entry, made on first need; NULL out of memory. */
static struct named_thread *me(void)
{
    struct named_thread *e = tls_me;

    if (e != NULL)
        return e;
    e = ra__meta_calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    if (ra__thread_exit_arm()) {
        ra__meta_free(e);
        return NULL;
    }
    e->id = pthread_self();
    e->tid = (pid_t)syscall(SYS_gettid);
    e->stack = ra__tag_thread_self();
    ra__lock(&named_lock);
    e->next = &named;
    e->prev = named.prev;
    named.prev->next = e;
    named.prev = e;
    ra__assert(e->prev->next == e && e->next->prev == e);
    ra__unlock(&named_lock);
    tls_me = e;
    return e;
}

/* With named_lock held: the entry of thread, or NULL when it has none (it
 * never was named, or it exited). */
static struct named_thread *find_named(pthread_t thread)
{
    ra__assert_held(&named_lock);
    for (struct named_thread *t = named.next; t != &named; t = t->next) {
        ra__assert(t->next->prev == t);
        if (pthread_equal(t->id, thread))
            return t;
    }
    return NULL;
}

/* With named_lock held: whether the thread of e has name now, as the
 * kernel keeps it (15 bytes). A base is only ever written for the name the
 * thread holds when it is written, so that whatever ran between a rename
 * and its base (another rename, the thread's exit and a new thread behind
 * the same pthread_t) the last rename's base is the one that stays. Where
 * the kernel cannot be asked (no /proc), the caller's name is taken. No
 * allocation: open and read are system calls. */
static bool has_name(const struct named_thread *e, const char *name)
{
    char path[64], now[17] = "";
    ssize_t n;
    int fd;

    ra__assert_held(&named_lock);
    if (e == tls_me) {
        if (syscall(SYS_prctl, PR_GET_NAME, (unsigned long)now, 0UL, 0UL,
                    0UL) != 0)
            return true;
    } else {
        snprintf(path, sizeof path, "/proc/self/task/%ld/comm", (long)e->tid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return errno != ENOENT; /* ENOENT: the thread is gone */
        n = read(fd, now, sizeof now - 1);
        close(fd);
        if (n < 0)
            return true;
        now[n] = '\0';
        now[strcspn(now, "\n")] = '\0';
    }
    return strncmp(now, name, 15) == 0;
}

/* Gives thread (whose entry is mine, when it is the calling thread) the
 * base tag of name. The tag is made with no lock held (its creation takes
 * the registry's, and may purge), and the entry is found again after it:
 * another thread may have exited meanwhile and freed its entry, and a new
 * thread may stand behind the same pthread_t; neither, nor a thread renamed
 * again meanwhile, takes this name's base (has_name). A tag destroyed in
 * between is not given. */
static void name_thread(pthread_t thread, struct named_thread *mine,
                        const char *name)
{
    ra_tag_t tag = tag_for(name);
    struct named_thread *e;

    /* mine is the calling thread's own entry, or none. */
    ra__assert(mine == NULL || mine == tls_me);
    ra__lock(&named_lock);
    e = mine != NULL ? mine : find_named(thread);
    if (tag != RA_TAG_NONE && !ra__tag_valid(tag))
        tag = RA_TAG_NONE;
    if (e != NULL && has_name(e, name))
        ra__tag_set_base(e->stack, tag);
    ra__unlock(&named_lock);
}

void ra__thread_tags_named(pthread_t thread, const char *name)
{
    struct named_thread *mine = NULL;
    bool known;

    if (ra__library_thread || !ra__thread_tags_on())
        return;
    if (pthread_equal(thread, pthread_self())) {
        mine = me();
        known = mine != NULL;
    } else {
        /* No tag is made for a thread that cannot take it. */
        ra__lock(&named_lock);
        known = find_named(thread) != NULL;
        ra__unlock(&named_lock);
    }
    if (known)
        name_thread(thread, mine, name);
}

void ra__thread_tags_start_thread(void)
{
    char name[17] = "";

    if (ra__library_thread || !ra__thread_tags_on())
        return;
    if (syscall(SYS_prctl, PR_GET_NAME, (unsigned long)name, 0UL, 0UL, 0UL) ==
        0)
        ra__thread_tags_named(pthread_self(), name);
}

void ra__thread_tags_leave(void)
{
    if (tls_me == NULL)
        return;
    ra__lock(&named_lock);
    ra__tag_set_base(tls_me->stack, RA_TAG_NONE);
    ra__unlock(&named_lock);
}

bool ra__thread_tags_base_in(const ra_tag_t *tags, unsigned n)
{
    bool used = false;

    ra__lock(&named_lock);
    for (unsigned i = 0; i < n && !used; i++)
        for (struct named_thread *t = named.next; t != &named && !used;
             t = t->next)
            used = ra__tag_thread_holds(t->stack, tags[i]);
    ra__unlock(&named_lock);
    return used;
}

int ra__thread_tags_kill(ra_tag_t root, ra_tag_t *killed, unsigned *n)
{
    bool used = false;
    unsigned count;

    /* Under the lock a naming takes to give a base: no thread gets a tag
     * of the subtree between the check and its death (a child created
     * meanwhile is nobody's base either). */
    ra__lock(&named_lock);
    /* No thread has a base (no REGIONALLOC_THREAD_TAGS, the usual case):
     * nothing to check, and the registry is not asked for the subtree
     * twice. */
    count = named.next == &named ? 0 : ra__tag_subtree(root, killed);
    for (unsigned i = 0; i < count && !used; i++)
        for (struct named_thread *t = named.next; t != &named && !used;
             t = t->next)
            used = ra__tag_thread_holds(t->stack, killed[i]);
    if (!used)
        count = ra__tag_kill_subtree(root, killed);
    ra__unlock(&named_lock);
    *n = count;
    return used ? EBUSY : count == 0 ? EINVAL : 0;
}

int ra__thread_tags_kill_leaf(ra_tag_t tag)
{
    bool used = false;
    int rc;

    /* Without REGIONALLOC_THREAD_TAGS no thread ever has a base: a
     * request's end takes no lock of the named threads. */
    if (ra__config()->nthread_tags == 0)
        return ra__tag_kill_leaf(tag);
    ra__lock(&named_lock);
    for (struct named_thread *t = named.next; t != &named && !used;
         t = t->next)
        used = ra__tag_thread_holds(t->stack, tag);
    rc = used ? EBUSY : ra__tag_kill_leaf(tag);
    ra__unlock(&named_lock);
    return rc;
}

void ra__thread_tags_prefork(void)
{
    ra__lock(&named_lock);
}

void ra__thread_tags_postfork_parent(void)
{
    ra__unlock(&named_lock);
}

/* Only the forking thread lives on in the child, under a tid of its own. */
void ra__thread_tags_postfork_child(void)
{
    struct named_thread *t = named.next;

    if (tls_me != NULL)
        tls_me->tid = (pid_t)syscall(SYS_gettid);
    while (t != &named) {
        struct named_thread *next = t->next;
        if (t != tls_me) {
            t->prev->next = next;
            next->prev = t->prev;
            ra__meta_free(t);
        }
        t = next;
    }
    ra__unlock(&named_lock);
}
