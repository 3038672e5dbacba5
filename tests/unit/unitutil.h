/* What the unit suites share: a report output into memory. */
#ifndef RA_UNITUTIL_H
#define RA_UNITUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "output.h"

/* An ra__out writing into memory; uo_text() closes it and returns what was
 * written (free() it). */
struct unit_out {
    struct ra__out out;
    char *buf;
    size_t len;
};

static inline void uo_open(struct unit_out *u)
{
    FILE *f;

    u->buf = NULL;
    u->len = 0;
    f = open_memstream(&u->buf, &u->len);
    ck_assert_ptr_nonnull(f);
    u->out = (struct ra__out)RA__OUT_INIT(f, false);
}

static inline char *uo_text(struct unit_out *u)
{
    ck_assert_int_eq(ra__out_finish(&u->out), 0);
    ck_assert_int_eq(fclose(u->out.file), 0);
    return u->buf;
}

#endif
