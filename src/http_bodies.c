/* Floor: services. The HTTP endpoints' bodies: each document written into
 * memory by the library's writers and sent, or a short text answer (an
 * error, what a purge did), or a redirect; every answer closes its
 * connection. */
#include "output.h"

#ifdef RA_HTTP

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status,
                               const char *type, char *body, size_t len,
                               const char *allow)
{
    struct MHD_Response *r =
        RA__MHD(create_response_from_buffer)(len, body,
                                             MHD_RESPMEM_MUST_FREE);
    enum MHD_Result ok;

    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    RA__MHD(add_response_header)(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    RA__MHD(add_response_header)(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (allow != NULL)
        RA__MHD(add_response_header)(r, MHD_HTTP_HEADER_ALLOW, allow);
    ok = RA__MHD(queue_response)(c, status, r);
    RA__MHD(destroy_response)(r);
    return ok;
}

enum MHD_Result ra__http_redirect(struct MHD_Connection *c,
                                  const char *location)
{
    struct MHD_Response *r =
        RA__MHD(create_response_from_buffer)(0, NULL,
                                             MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ok;

    if (r == NULL)
        return MHD_NO;
    RA__MHD(add_response_header)(r, MHD_HTTP_HEADER_LOCATION, location);
    RA__MHD(add_response_header)(r, MHD_HTTP_HEADER_CONNECTION, "close");
    ok = RA__MHD(queue_response)(c, MHD_HTTP_MOVED_PERMANENTLY, r);
    RA__MHD(destroy_response)(r);
    return ok;
}

enum MHD_Result ra__http_text(struct MHD_Connection *c, unsigned status,
                              const char *allow, const char *fmt, ...)
{
    char *body = NULL;
    va_list ap;
    int len;

    va_start(ap, fmt);
    len = vasprintf(&body, fmt, ap);
    va_end(ap);
    if (len < 0)
        return MHD_NO;
    return respond(c, status, "text/plain; charset=utf-8", body,
                   (size_t)len, allow);
}

enum MHD_Result ra__http_send(struct MHD_Connection *c, const char *type,
                              int (*write)(FILE *f, const void *arg),
                              const void *arg)
{
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    int rc, e;

    if (f == NULL)
        return ra__http_text(c, 500, NULL, "out of memory\n");
    rc = write(f, arg);
    e = rc != 0 ? errno : 0; /* fclose may change errno */
    if (fclose(f) != 0 || rc != 0) {
        if (e == 0)
            e = errno;
        free(body);
        if (e == ENOTSUP)
            return ra__http_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, NULL,
                                 "the profiler is off: start it with "
                                 "REGIONALLOC_PROF or ra_prof_start()\n");
        return ra__http_text(c, 500, NULL, "cannot write the document: %s\n",
                             strerror(e));
    }
    return respond(c, MHD_HTTP_OK, type, body, len, NULL);
}

int ra__http_doc_report(FILE *f, const void *arg)
{
    const struct document *doc = arg;

    return ra_report_top(f, doc->fmt, doc->top);
}

/* Runs write(o, doc), an errno-returning writer of the library's, into f. */
static int write_own(FILE *f,
                     int (*write)(struct ra__out *o,
                                  const struct document *doc),
                     const struct document *doc)
{
    struct ra__out o = RA__OUT_INIT(f, false);
    int err = write(&o, doc);

    if (err == 0 && ra__out_finish(&o) != 0)
        err = EIO;
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}

static int dashboard_of(struct ra__out *o, const struct document *doc)
{
    return ra__dashboard_write(o, doc->top);
}

int ra__http_doc_dashboard(FILE *f, const void *arg)
{
    return write_own(f, dashboard_of, arg);
}

static int history_of(struct ra__out *o, const struct document *doc)
{
    return ra__history_write(o, doc->since);
}

int ra__http_doc_history(FILE *f, const void *arg)
{
    return write_own(f, history_of, arg);
}

int ra__http_doc_sites(FILE *f, const void *arg)
{
    return ra_prof_dump(f, RA_PROF_FOLDED,
                        ((const struct document *)arg)->tag);
}

int ra__http_doc_checkpoints(FILE *f, const void *arg)
{
    return ra_checkpoint_report(f, ((const struct document *)arg)->fmt);
}

static int subtree_profile_of(struct ra__out *o, const struct document *doc)
{
    return ra__prof_dump_write_tree(o, RA_PROF_PPROF, doc->tag);
}

int ra__http_doc_profile(FILE *f, const void *arg)
{
    const struct document *doc = arg;

    if (!doc->tree)
        return ra_prof_dump(f, RA_PROF_PPROF, doc->tag);
    return write_own(f, subtree_profile_of, doc);
}

#endif
