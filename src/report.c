/* Floor: services. ra_report: every tag's usage now, from one snapshot and
 * its listing, in the format asked for (report_text.c, report_json.c,
 * report_prometheus.c). */
#include <errno.h>
#include <stddef.h>

#include "output.h"

int ra__report_write(struct ra__out *o, ra_format_t fmt, size_t top)
{
    struct ra__emitter e;
    struct ra__snapshot snap;
    struct ra__listing l;
    bool detail = (fmt & RA_REPORT_DETAIL) != 0, failed = false;

    fmt &= ~RA_REPORT_DETAIL;
    if (ra__snapshot_take(&snap, detail)) {
        errno = ENOMEM;
        return -1;
    }
    if (ra__listing_make(&l, &snap, top)) {
        ra__snapshot_free(&snap);
        errno = ENOMEM;
        return -1;
    }
    ra__emit_init(&e, o);
    switch (fmt) {
    case RA_FORMAT_JSON:
        ra__report_json(&e, &snap, &l);
        break;
    case RA_FORMAT_PROMETHEUS:
        failed = ra__report_prometheus(&e, &snap, &l);
        break;
    default:
        ra__report_text(o, &snap, &l);
        break;
    }
    ra__listing_free(&l);
    ra__snapshot_free(&snap);
    if (failed)
        errno = ENOMEM;
    return failed ? -1 : 0;
}

size_t ra__report_top_default(ra_format_t fmt)
{
    return fmt == RA_FORMAT_TEXT ? RA__TOP_TEXT : RA_REPORT_ALL_TAGS;
}

int ra_report_top(FILE *out, ra_format_t fmt, size_t top)
{
    struct ra__out o = RA__OUT_INIT(out, true);
    int rc;

    if (ra__out_check_args(out, fmt & ~RA_REPORT_DETAIL) != 0)
        return -1;
    ra__quiet_begin();
    rc = ra__report_write(&o, fmt, top);
    if (rc == 0)
        rc = ra__out_finish(&o);
    ra__quiet_end();
    return rc;
}

int ra_report(FILE *out, ra_format_t fmt)
{
    return ra_report_top(out, fmt,
                         ra__report_top_default(fmt & ~RA_REPORT_DETAIL));
}
