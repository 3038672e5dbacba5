/* Floor: API. What the API floor's files give the floors above
 * (init.c, the services): usage and purge (stats.c), the memory limit
 * (pressure.c), a tag's creation and end (lifetime.c), the malloc
 * family's checks (override.c). */
#ifndef RA_API_H
#define RA_API_H

#include "internal.h"

/* -- stats.c: per-tag usage and purge ------------------------------------- */
/* Refreshes jemalloc's statistics (the "epoch"): it merges every arena
 * (doc/design.md, jemalloc facts), so only what asks for jemalloc's own
 * figures pays it, once per report. */
void ra__stats_refresh(void);
/* Fills *out for tag (RA_TAG_NONE: the untagged arenas) from the live
 * sources (refreshed: jemalloc's figures of pages after the caller's
 * refresh instead of the estimates). The untagged row is jemalloc's as of
 * the last refresh but for allocated (untagged.c's, live) and active. tag
 * must be valid and tagging on. */
void ra__stats_read(ra_tag_t tag, ra_tag_stats_t *out, bool refreshed);
/* allocated and mapped of tag (valid, tagging on), exact and live: what a
 * checkpoint and the page's samples need of ra__stats_read(). */
size_t ra__stats_allocated(ra_tag_t tag);
size_t ra__stats_mapped(ra_tag_t tag);
/* Adds a row's allocated, active, resident and mapped to a process's
 * total: the process's figures are the sum of its rows. */
void ra__stats_add_total(struct ra__global_stats *total,
                         const ra_tag_stats_t *row);
/* Purges asked for tag (RA_TAG_NONE: the untagged arenas) through
 * ra_tag_purge() and ra_purge_all() so far. */
uint64_t ra__stats_purges(ra_tag_t tag);
/* A destroyed tag's count of purges starts again from 0. */
void ra__stats_forget(ra_tag_t tag);


/* -- pressure.c: the process held under a memory limit --------------------- */
enum ra__limit_source {
    RA__LIMIT_NONE,
    RA__LIMIT_CALL,   /* ra_memory_limit_set */
    RA__LIMIT_ENV,    /* REGIONALLOC_MEMORY_LIMIT */
    RA__LIMIT_CGROUP  /* memory.high, else memory.max */
};
struct ra__pressure_figures {
    size_t limit;      /* 0: none */
    size_t resident;   /* at the watcher's last look */
    enum ra__limit_source source;
    ra_pressure_t level;
    uint64_t given_back; /* bytes the resident set fell by its give-backs */
    uint64_t refusals;   /* allocations the pressure refused */
    uint64_t rises;      /* rises that called the callbacks */
};
/* At load: the limit from REGIONALLOC_MEMORY_LIMIT or the cgroup, and its
 * thread, when there is one. */
void ra__pressure_start(void);
void ra__pressure_read(struct ra__pressure_figures *out);
/* Fork handlers: the limit's lock (a leaf); in the child, no watcher. */
void ra__pressure_prefork(void);
void ra__pressure_postfork_parent(void);
void ra__pressure_postfork_child(void);

/* -- lifetime.c: ra_tag_reset and ra_tag_destroy ------------------------------ */
/* Fork handlers for the lock that keeps resets and destroys one at a
 * time; the child's, once every other module's lock is released, also
 * queues the ids that threads which are not in the child held between
 * two steps. */
void ra__lifetime_prefork(void);
void ra__lifetime_postfork(void);
void ra__lifetime_postfork_child(void);

/* -- override.c: the malloc-family symbols -------------------------------- */
/* At load (init.c): warns on stderr, one line, when "malloc" is bound to
 * another object than this library (linked or loaded after jemalloc or the
 * C library), since plain malloc is then untagged. */
#ifdef RA_OVERRIDE
void ra__override_check(void);
#else
static inline void ra__override_check(void) {}
#endif

#endif /* RA_API_H */
