/* Checkpoints: ra_checkpoint() and the ring of the last 1024, and
 * ra_checkpoint_report(). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The ring is static so that a checkpoint's own memory is bounded and mostly
 * untouched until used; only the per-tag arrays are allocated (untagged), and
 * a slot's array is reused when the ring wraps. */
static struct ra__checkpoint ring[RA__CHECKPOINTS_KEPT];
static uint64_t recorded;       /* the newest is ring[(recorded - 1) % KEPT] */
static uint64_t last_time_ns;   /* time of the newest checkpoint */
/* Whether the peak RSS was reset after the newest checkpoint; before the
 * first, the peak counts from the process's start, which is the first
 * phase's start too. */
static bool peak_was_reset = true;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;

void ra__checkpoint_lock(void)
{
    if (pthread_mutex_lock(&ring_lock) != 0)
        abort();
}

void ra__checkpoint_unlock(void)
{
    if (pthread_mutex_unlock(&ring_lock) != 0)
        abort();
}

void ra__checkpoint_prefork(void)
{
    ra__checkpoint_lock();
}

void ra__checkpoint_postfork(void)
{
    ra__checkpoint_unlock();
}

uint64_t ra__checkpoint_recorded(void)
{
    return recorded;
}

const struct ra__checkpoint *ra__checkpoint_kept(size_t i)
{
    uint64_t first = recorded > RA__CHECKPOINTS_KEPT
                         ? recorded - RA__CHECKPOINTS_KEPT
                         : 0;

    ra__assert(first + i < recorded);
    return &ring[(first + i) % RA__CHECKPOINTS_KEPT];
}

/* Makes room in slot for ntags per-tag figures. Returns true on failure
 * (ENOMEM; the slot is unchanged). */
static bool reserve_tags(struct ra__checkpoint *slot, unsigned ntags)
{
    size_t *p;

    if (ntags <= slot->capacity)
        return false;
    /* Untagged whatever the caller has pushed; ra_realloc keeps it so. */
    p = slot->tag_allocated == NULL
            ? ra_malloc_tag(RA_TAG_NONE, ntags * sizeof *p)
            : ra_realloc(slot->tag_allocated, ntags * sizeof *p);
    if (p == NULL)
        return true;
    slot->tag_allocated = p;
    slot->capacity = ntags;
    return false;
}

/* Copies label, cut to RA_TAG_NAME_MAX bytes and not inside a UTF-8
 * character. */
static void copy_label(char *dst, const char *label)
{
    size_t len = label == NULL ? 0 : strnlen(label, RA_TAG_NAME_MAX + 1);

    if (len > RA_TAG_NAME_MAX) {
        len = RA_TAG_NAME_MAX;
        /* Back off at most 3 continuation bytes to the character's start. */
        for (unsigned i = 0; i < 3 && ((unsigned char)label[len] & 0xc0) ==
                                          0x80; i++)
            len--;
    }
    if (len > 0)
        memcpy(dst, label, len);
    dst[len] = '\0';
}

/* Takes the checkpoint, ring locked. Returns 0 or -1 with errno ENOMEM. */
static int record(const char *label)
{
    struct ra__checkpoint *slot = &ring[recorded % RA__CHECKPOINTS_KEPT];
    unsigned ntags = ra__tag_published();
    uint64_t now;
    size_t tagged = 0;

    /* Allocate before measuring, so that the figures include it. */
    if (reserve_tags(slot, ntags)) {
        errno = ENOMEM;
        return -1;
    }
    now = ra__clock_ns();
    /* One epoch refresh for the whole snapshot (#2077). */
    ra__stats_refresh();
    for (ra_tag_t t = 1; t <= ntags; t++) {
        slot->tag_allocated[t - 1] = ra__stats_allocated(t);
        tagged += slot->tag_allocated[t - 1];
    }
    ra__stats_global(&slot->global);
    slot->rss = ra__proc_rss();
    slot->peak_rss = ra__proc_peak_rss();
    /* The kernel updates its peak lazily; the peak of a phase is at least
     * what is resident at its end. */
    if (slot->peak_rss < slot->rss)
        slot->peak_rss = slot->rss;
    slot->peak_since_start = !peak_was_reset;
    peak_was_reset = !ra__proc_reset_peak_rss();

    slot->seq = recorded + 1;
    slot->time_ns = now;
    slot->phase_ns = now - last_time_ns;
    slot->tagged = tagged;
    slot->ntags = ntags;
    copy_label(slot->label, label);
    last_time_ns = now;
    recorded++;
    return 0;
}

int ra_checkpoint(const char *label)
{
    ra_tag_t saved;
    int rc;

    if (!ra__init()) {
        errno = ENOTSUP;
        return -1;
    }
    saved = ra__tag_suspend();
    ra__checkpoint_lock();
    rc = record(label);
    ra__checkpoint_unlock();
    ra__tag_resume(saved);
    return rc;
}

int ra_checkpoint_report(FILE *out, ra_format_t fmt)
{
    struct ra__out o = {out, false};
    ra_tag_t saved;
    int rc;

    if (ra__out_check_args(out, fmt) != 0)
        return -1;
    /* The ring stays locked while it is written: a concurrent checkpoint
     * waits rather than change a row between the table's two passes. */
    saved = ra__tag_suspend();
    ra__checkpoint_lock();
    ra__checkpoint_write(&o, fmt);
    ra__checkpoint_unlock();
    rc = ra__out_finish(&o);
    ra__tag_resume(saved);
    return rc;
}
