/* Floor: services. What the HTTP server's files share: http.c (the
 * server's life) hands each request to http_routes.c, which answers it
 * through http_bodies.c. With RA_HTTP only: libmicrohttpd's types come
 * from load.h. */
#ifndef RA_HTTP_H
#define RA_HTTP_H

#include "load.h"
#include "output.h"

/* What a request asks of a document, from its arguments. */
struct document {
    ra_format_t fmt;
    ra_tag_t tag;
    bool tree;      /* the profile of tag's subtree (?tree=NAME) */
    uint64_t since; /* the history after this sample (?since=SEQ) */
    size_t top;     /* the tags a report lists (?top=N) */
};

/* -- http_routes.c: a request ------------------------------------------- */
/* Answers the request (method on url, HTTP version), its headers in:
 * queues the answer and returns what libmicrohttpd's handler returns. */
enum MHD_Result ra__http_answer(struct MHD_Connection *c, const char *url,
                                const char *method, const char *version);

/* -- http_bodies.c: the answers ------------------------------------------ */
/* 301 to location, a path on this server. Returns MHD_NO when it could
 * not be queued. */
enum MHD_Result ra__http_redirect(struct MHD_Connection *c,
                                  const char *location);
/* A short text answer of status: an error, or what a purge did (allow:
 * the Allow header, NULL for none). Returns MHD_NO when it could not be
 * queued. */
enum MHD_Result ra__http_text(struct MHD_Connection *c, unsigned status,
                              const char *allow, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Writes a document with write(f, arg) into memory and sends it as type:
 * 200, or 503 when the profiler is off (ENOTSUP), 500 when it cannot be
 * written. Returns MHD_NO when nothing could be queued. */
enum MHD_Result ra__http_send(struct MHD_Connection *c, const char *type,
                              int (*write)(FILE *f, const void *arg),
                              const void *arg);
/* The documents, for ra__http_send (arg: a struct document): 0, or -1
 * with errno. The report and the checkpoints in doc->fmt, the dashboard
 * (/debug/regionalloc/), its chart's samples, the allocation sites as
 * folded stacks, the pprof profile (of a tag, or its subtree). */
int ra__http_doc_report(FILE *f, const void *arg);
int ra__http_doc_checkpoints(FILE *f, const void *arg);
int ra__http_doc_dashboard(FILE *f, const void *arg);
int ra__http_doc_history(FILE *f, const void *arg);
int ra__http_doc_sites(FILE *f, const void *arg);
int ra__http_doc_profile(FILE *f, const void *arg);

#endif
