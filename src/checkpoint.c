/* Floor: services. Checkpoints: ra_checkpoint() and the ring of the last
 * 1024, and ra_checkpoint_report(), which writes a copy of the ring. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

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
static struct ra__mutex ring_lock = RA__MUTEX_INIT(RA__RANK_RING);

void ra__checkpoint_prefork(void)
{
    ra__lock(&ring_lock);
}

void ra__checkpoint_postfork(void)
{
    ra__unlock(&ring_lock);
}

/* With the ring locked: the i-th kept checkpoint, oldest first. */
static const struct ra__checkpoint *kept_checkpoint(size_t i)
{
    uint64_t first = recorded > RA__CHECKPOINTS_KEPT
                         ? recorded - RA__CHECKPOINTS_KEPT
                         : 0;

    ra__assert_held(&ring_lock);
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
    p = ra__meta_realloc(slot->tag_allocated, ntags * sizeof *p);
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
static int record(const char *label, bool reset_peak)
{
    struct ra__checkpoint *slot = &ring[recorded % RA__CHECKPOINTS_KEPT];
    unsigned ntags = ra__tag_published();
    uint64_t now;
    size_t tagged = 0;
    ra_tag_stats_t row;

    ra__assert_held(&ring_lock);
    /* Allocate before measuring, so that the figures include it. */
    if (reserve_tags(slot, ntags)) {
        errno = ENOMEM;
        return -1;
    }
    now = ra__clock_ns();
    /* Read before the figures: a tag created after it is not in them. */
    slot->creations = ra__tag_creations();
    /* The live figures, no refresh: a pass over the tags, the process's
     * totals the sum of the rows, as in ra_report. */
    ra__stats_read(RA_TAG_NONE, &row, false);
    slot->global = (struct ra__global_stats){0};
    ra__stats_add_total(&slot->global, &row);
    for (ra_tag_t t = 1; t <= ntags; t++) {
        if (ra__tag_valid(t)) {
            ra__stats_read(t, &row, false);
        } else {
            row = (ra_tag_stats_t){0};
        }
        slot->tag_allocated[t - 1] = row.allocated;
        tagged += row.allocated;
        ra__stats_add_total(&slot->global, &row);
    }
    slot->rss = ra__proc_rss();
    slot->peak_rss = ra__proc_peak_rss();
    /* The kernel updates its peak lazily; the peak of a phase is at least
     * what is resident at its end. */
    if (slot->peak_rss < slot->rss)
        slot->peak_rss = slot->rss;
    slot->peak_since_start = !peak_was_reset;
    peak_was_reset = reset_peak && !ra__proc_reset_peak_rss();

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

int ra__checkpoint_take(const char *label, bool reset_peak)
{
    int rc;

    ra__quiet_begin();
    ra__lock(&ring_lock);
    rc = record(label, reset_peak);
    ra__unlock(&ring_lock);
    ra__quiet_end();
    return rc;
}

int ra_checkpoint(const char *label)
{
    if (ra__check_call(true) != 0)
        return -1;
    return ra__checkpoint_take(label, true);
}

bool ra__checkpoint_copy(struct ra__checkpoint_set *set)
{
    size_t figures = 0;
    size_t *pool;

    memset(set, 0, sizeof *set);
    ra__lock(&ring_lock);
    set->recorded = recorded;
    set->kept = recorded < RA__CHECKPOINTS_KEPT ? (size_t)recorded
                                                : RA__CHECKPOINTS_KEPT;
    for (size_t i = 0; i < set->kept; i++) {
        unsigned n = kept_checkpoint(i)->ntags;
        figures += n;
        if (n > set->ntags)
            set->ntags = n;
    }
    set->items = ra__meta_alloc(set->kept * sizeof *set->items);
    pool = ra__meta_alloc((figures + set->ntags + 1) * sizeof *pool);
    if (set->items == NULL || pool == NULL) {
        ra__unlock(&ring_lock);
        ra__meta_free(set->items);
        ra__meta_free(pool);
        set->items = NULL;
        return true;
    }
    set->tag_max = pool;
    pool += set->ntags + 1;
    for (size_t i = 0; i < set->kept; i++) {
        const struct ra__checkpoint *cp = kept_checkpoint(i);
        set->items[i] = *cp;
        set->items[i].tag_allocated = pool;
        if (cp->ntags > 0)
            memcpy(pool, cp->tag_allocated, cp->ntags * sizeof *pool);
        pool += cp->ntags;
    }
    ra__unlock(&ring_lock);
    /* After the copy: an id recycled since is seen recycled, and the
     * figures the copy holds for it are an earlier holder's. */
    set->nholders = ra__tag_published();
    set->holders =
        ra__meta_alloc((set->nholders + 1) * sizeof *set->holders);
    if (set->holders == NULL) {
        ra__checkpoint_set_free(set);
        return true;
    }
    set->nholders = ra__tag_holders(set->holders, set->nholders);
    return false;
}

void ra__checkpoint_set_free(struct ra__checkpoint_set *set)
{
    ra__meta_free(set->items);
    ra__meta_free(set->tag_max);
    ra__meta_free(set->holders);
    set->items = NULL;
    set->tag_max = NULL;
    set->holders = NULL;
}

int ra_checkpoint_report(FILE *out, ra_format_t fmt)
{
    struct ra__out o = RA__OUT_INIT(out, true);
    struct ra__checkpoint_set set;
    int rc;

    if (ra__out_check_args(out, fmt) != 0)
        return -1;
    ra__quiet_begin();
    if (ra__checkpoint_copy(&set)) {
        ra__quiet_end();
        errno = ENOMEM;
        return -1;
    }
    ra__checkpoint_write(&o, fmt, &set);
    rc = ra__out_finish(&o);
    ra__checkpoint_set_free(&set);
    ra__quiet_end();
    return rc;
}
