/* Floor: ends. thread_tags.c's declarations: tags by thread name, for the
 * thread wrappers, a tag's end and the lifecycle. */
#ifndef RA_THREAD_TAGS_H
#define RA_THREAD_TAGS_H

#include "internal.h"

/* -- thread_tags.c: tags by thread name ------------------------------------ */
/* REGIONALLOC_THREAD_TAGS. Whether it gives tags (rules and tagging on). A
 * thread was named (by pthread_setname_np or prctl): its base tag follows.
 * At a thread's start (and the main thread's at load), and after a
 * prctl(PR_SET_NAME): the name the kernel has gives its base.
 * ra_tag_destroy's kill of root's subtree: EBUSY (nothing done) when a
 * tag of it is a thread's base, EINVAL when root is not live, else 0 with
 * the subtree, dead, in killed (ra__tag_kill_subtree) and its size in
 * *n. */
bool ra__thread_tags_on(void);
void ra__thread_tags_named(pthread_t thread, const char *name);
/* At thread exit (init.c): the thread leaves the named threads. */
void ra__thread_tags_thread_exit(void);
void ra__thread_tags_start_thread(void);
/* The calling thread will never have a base tag (it is jemalloc's). */
void ra__thread_tags_leave(void);
int ra__thread_tags_kill(ra_tag_t root, ra_tag_t *killed, unsigned *n);
/* ra__thread_tags_kill of a tag without children (ra__tag_kill_leaf): 0,
 * EBUSY (a thread's base), EINVAL, or -1 when it has children. */
int ra__thread_tags_kill_leaf(ra_tag_t tag);
/* Whether one of tags[0, n) is a thread's base tag now (ra_tag_reset's
 * check: a named thread allocates into its base without pushing it). */
bool ra__thread_tags_base_in(const ra_tag_t *tags, unsigned n);
void ra__thread_tags_prefork(void);
void ra__thread_tags_postfork_parent(void);
void ra__thread_tags_postfork_child(void);

#endif /* RA_THREAD_TAGS_H */
