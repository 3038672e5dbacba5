/* Floor: tags. The tags floor's declarations that few files use: a
 * tag's ids (tag_ids.c), the library's own threads (background.c) and
 * the libraries loaded when first needed (load.c, load_dw.c). The
 * registry and the stack, which every floor reads, are internal.h's. */
#ifndef RA_TAGS_H
#define RA_TAGS_H

#include "internal.h"

/* -- tag_ids.c: a tag's ids ------------------------------------------------ */
/* ra__region_give_back under the registry's ids_lock, when tagging is on: the
 * process's address-space limit was lowered (override_limits.c). Returns
 * whether anything was given back. */
bool ra__tag_give_back_address_space(void);
/* ids published so far (ra__tags_published) rise to tag, never fall. */
void ra__tag_publish(ra_tag_t tag);
/* Fork handlers for ids_lock (taken after the registry's stripes). */
void ra__tag_ids_prefork(void);
void ra__tag_ids_postfork(void);
/* An id for a new tag: the one destroyed longest ago, else a fresh one
 * with its region and first arena (a region another mapping holds passed
 * over, and, when none is fresh, one passed over taken back), or
 * RA_TAG_NONE with errno ENOSPC (none left) or as ra__pool_first_arena.
 * tagging: whether regions are reserved (else ids only). Called with the
 * registry's stripes of the creation locked. */
ra_tag_t ra__tag_ids_take(bool tagging);
/* An id ra__tag_ids_take gave and the creation did not use, back at the
 * queue's front (the next creation takes it), and published. */
void ra__tag_ids_put_back(ra_tag_t tag);
/* Queues a dead tag's id, its region and arena emptied, for reuse by
 * ra_tag_create (oldest first). */
void ra__tag_release_id(ra_tag_t tag);
/* Takes tag out of the queue of ids for reuse, if it is there (no
 * creation took it): whether it was. ra__tag_release_id queues it again. */
bool ra__tag_take_free(ra_tag_t tag);
/* Whether tag, published, is neither live, nor queued, nor passed over:
 * held by a thread between two steps (a creation's, a thread's own), which
 * in a forked child may be a thread that is not there. */
bool ra__tag_in_limbo(ra_tag_t tag);
/* The ids passed over now: their regions' space held by another mapping
 * (the reports' regions lost). */
unsigned ra__tag_passed_over(void);
/* One of the queued ids, a different one at each call (round robin), or
 * RA_TAG_NONE when none is queued: whose kept pages may decay. */
ra_tag_t ra__tag_next_idle(void);

/* -- background.c: the library's own threads ------------------------------ */
/* True on the library's background threads: never given a thread's tag. */
extern RA__TLS bool ra__library_thread;
/* Set around a call that starts threads for the library (libmicrohttpd's):
 * the library's pthread_create makes them the library's. */
extern RA__TLS bool ra__library_spawning;
/* Makes the calling thread the library's for good: quiet, untagged. */
void ra__become_library_thread(void);
/* Around a call that starts the library's threads: every signal blocked
 * (old: the mask to restore) and ra__library_spawning set. */
void ra__spawn_begin(sigset_t *old);
void ra__spawn_end(const sigset_t *old);
/* Starts fn(arg) on a new thread with every signal blocked, quiet for its
 * whole life. Returns true on failure (errno set). */
bool ra__background_start(void *(*fn)(void *), void *arg, pthread_t *thread);
/* The C library's pthread_create, tried again once after a give-back of
 * address space when it says EAGAIN (an address-space limit lowered from
 * outside may be why): what the library's pthread_create and its own
 * threads start with. */
int ra__thread_create(pthread_t *thread, const pthread_attr_t *attr,
                      void *(*fn)(void *), void *arg);
/* Looks the C library's pthread_create up now, holding no lock, so that a
 * thread the library starts under one of its locks (the pressure watcher,
 * under pressure_lock) never calls into the dynamic loader there. */
void ra__thread_create_resolve(void);

/* -- load.c: the libraries loaded when first needed (load.h) -------------- */
/* The process ends (init.c's destructor): no library is loaded from now
 * on. */
void ra__load_stop(void);
/* -- load_dw.c: libdw -------------------------------------------------------- */
/* Loads libdw, which names the profile's frames, if it is not loaded yet
 * (load.h's rules): what a profile dumped at exit does when the profiler
 * starts. Returns true when it is not there (a build without it, a failed
 * load, the process ending). */
bool ra__load_symbolizer(void);

#endif /* RA_TAGS_H */
