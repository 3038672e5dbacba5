/* Floor: services. The HTTP endpoints (ra_http_start, REGIONALLOC_HTTP):
 * /metrics for Prometheus, /debug/pprof/heap for continuous profilers, the
 * reports, and an opt-in purge, served by libmicrohttpd (loaded at the
 * first start: load_http.c) from a thread of its own behind the front door
 * (http_door.c, a thread of the library's that accepts the connections and
 * waits for each request's head), both with every signal blocked, as is
 * the page's sampler (history.c). Its thread is started through the
 * library's pthread_create as one of the library's threads, and
 * ra_http_start and ra_http_stop are quiet: the server's memory is the
 * library's own (untagged, never hooked or sampled). poll(2),
 * level-triggered: a client that sends half a request and hangs up is
 * noticed at once. One request a connection: every answer closes its
 * connection, so that each request passes the door's deadlines and a
 * connection holds one of the 16 places only while its request is
 * answered. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_address.h"
#include "output.h"

#ifndef RA_HTTP

int ra_http_start(const char *addr)
{
    (void)addr;
    errno = ENOTSUP;
    return -1;
}

int ra_http_stop(void)
{
    errno = ENOTSUP;
    return -1;
}

void ra__http_start_configured(void)
{
    char msg[400];

    snprintf(msg, sizeof msg,
             "regionalloc: REGIONALLOC_HTTP=\"%.64s\": " RA__HTTP_NONE
             "; no server",
             ra__config()->http_addr);
    ra__warn(msg);
}

void ra__http_at_exit(void)
{
}

void ra__http_served(char out[RA__HTTP_ADDR_MAX])
{
    out[0] = '\0';
}

void ra__http_prefork(void)
{
}

void ra__http_postfork_parent(void)
{
}

void ra__http_postfork_child(void)
{
}

#else

#include <arpa/inet.h>
#include "load.h"
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* Requests answered at once; the door holds the others back. */
#define MAX_CONNECTIONS 16
#define CONNECTION_TIMEOUT_S 10 /* of silence, then the connection goes */
#define CONNECTION_MEMORY 32768 /* bounds a request's line and headers */

/* The running server, under http_lock; only ra_http_start and ra_http_stop
 * (and a forked child's handler) change it. */
static struct ra__mutex http_lock = RA__MUTEX_INIT(RA__RANK_HTTP);
static struct MHD_Daemon *daemon_;
static int listen_fd = -1;
/* What it listens on, as HOST:PORT ("" when stopped). */
static char served[RA__HTTP_ADDR_MAX];
/* Set while the server's thread answers: ra_http_stop from there would wait
 * for itself. */
static RA__TLS bool tls_answering;
/* -- requests ---------------------------------------------------------------- */

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

/* 301 to location, a path on this server. */
static enum MHD_Result redirect(struct MHD_Connection *c, const char *location)
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

/* A short text answer: an error, or what a purge did. */
static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned status,
                                    const char *allow, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned status,
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

/* Writes a document with write(f, arg) into memory and sends it. */
static enum MHD_Result respond_with(struct MHD_Connection *c, const char *type,
                                    int (*write)(FILE *f, const void *arg),
                                    const void *arg)
{
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    int rc, e;

    if (f == NULL)
        return respond_text(c, 500, NULL, "out of memory\n");
    rc = write(f, arg);
    e = rc != 0 ? errno : 0; /* fclose may change errno */
    if (fclose(f) != 0 || rc != 0) {
        if (e == 0)
            e = errno;
        free(body);
        if (e == ENOTSUP)
            return respond_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, NULL,
                                "the profiler is off: start it with "
                                "REGIONALLOC_PROF or ra_prof_start()\n");
        return respond_text(c, 500, NULL, "cannot write the document: %s\n",
                            strerror(e));
    }
    return respond(c, MHD_HTTP_OK, type, body, len, NULL);
}

struct document {
    ra_format_t fmt;
    ra_tag_t tag;
    bool tree;      /* the profile of tag's subtree (?tree=NAME) */
    uint64_t since; /* the history after this sample (?since=SEQ) */
    size_t top;     /* the tags a report lists (?top=N) */
};

static int write_report(FILE *f, const void *arg)
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

static int page_of(struct ra__out *o, const struct document *doc)
{
    return ra__page_write(o, doc->top);
}

static int write_page(FILE *f, const void *arg)
{
    return write_own(f, page_of, arg);
}

static int history_of(struct ra__out *o, const struct document *doc)
{
    return ra__history_write(o, doc->since);
}

static int write_history(FILE *f, const void *arg)
{
    return write_own(f, history_of, arg);
}

static int write_sites(FILE *f, const void *arg)
{
    return ra_prof_dump(f, RA_PROF_FOLDED,
                        ((const struct document *)arg)->tag);
}

static int write_checkpoints(FILE *f, const void *arg)
{
    return ra_checkpoint_report(f, ((const struct document *)arg)->fmt);
}

static int subtree_profile_of(struct ra__out *o, const struct document *doc)
{
    return ra__prof_dump_write_tree(o, RA_PROF_PPROF, doc->tag);
}

static int write_profile(FILE *f, const void *arg)
{
    const struct document *doc = arg;

    if (!doc->tree)
        return ra_prof_dump(f, RA_PROF_PPROF, doc->tag);
    return write_own(f, subtree_profile_of, doc);
}

/* What a request says of key: nothing, the key without a value ("?tag",
 * "?tag="), or a value. */
enum given { ABSENT, NO_VALUE, VALUE };

static enum given argument(struct MHD_Connection *c, const char *key,
                           const char **value)
{
    size_t len = 0;

    *value = NULL;
    if (RA__MHD(lookup_connection_value_n)(c, MHD_GET_ARGUMENT_KIND, key,
                                           strlen(key), value,
                                           &len) != MHD_YES)
        return ABSENT;
    return *value == NULL || len == 0 ? NO_VALUE : VALUE;
}

/* ?format=text|json|prometheus (default text) into *fmt. False if bad. */
static bool format_argument(struct MHD_Connection *c, ra_format_t *fmt)
{
    const char *v;
    enum given g = argument(c, "format", &v);

    *fmt = RA_FORMAT_TEXT;
    if (g == NO_VALUE)
        return false;
    if (g == ABSENT || strcmp(v, "text") == 0)
        return true;
    if (strcmp(v, "json") == 0)
        *fmt = RA_FORMAT_JSON;
    else if (strcmp(v, "prometheus") == 0)
        *fmt = RA_FORMAT_PROMETHEUS;
    else
        return false;
    return true;
}

/* ?detail=1: the report refreshes jemalloc's statistics and shows its own
 * figures (RA_REPORT_DETAIL); ?detail=0 or none: the live figures. False
 * if bad. */
static bool detail_argument(struct MHD_Connection *c, ra_format_t *fmt)
{
    const char *v;
    enum given g = argument(c, "detail", &v);

    if (g == ABSENT || (g == VALUE && strcmp(v, "0") == 0))
        return true;
    if (g != VALUE || strcmp(v, "1") != 0)
        return false;
    *fmt = (ra_format_t)(*fmt | RA_REPORT_DETAIL);
    return true;
}

static const char *type_of(ra_format_t fmt)
{
    fmt = (ra_format_t)(fmt & ~RA_REPORT_DETAIL);
    return fmt == RA_FORMAT_JSON ? "application/json"
           : fmt == RA_FORMAT_PROMETHEUS
               ? "text/plain; version=0.0.4; charset=utf-8"
               : "text/plain; charset=utf-8";
}

/* ?KEY=NAME (key "tag", or "tree") into *tag, or answers: 400 for "?KEY"
 * or "?KEY=" (never "every tag"), 404 for a name no tag has; without it,
 * RA_TAG_ALL when every_tag, else 400. Returns whether *tag is set; else
 * *answered holds what was queued. */
static bool tag_argument_of(struct MHD_Connection *c, const char *key,
                            bool every_tag, ra_tag_t *tag,
                            enum MHD_Result *answered)
{
    const char *name;
    enum given g = argument(c, key, &name);

    *tag = RA_TAG_ALL;
    if (g == ABSENT && every_tag)
        return true;
    if (g != VALUE) {
        *answered = respond_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                                 "?%s needs a tag's name: ?%s=NAME\n", key,
                                 key);
        return false;
    }
    *tag = ra_tag_lookup(name);
    if (*tag != RA_TAG_NONE)
        return true;
    *answered = respond_text(c, MHD_HTTP_NOT_FOUND, NULL,
                             "no tag named \"%s\"\n", name);
    return false;
}

static bool tag_argument(struct MHD_Connection *c, bool every_tag,
                         ra_tag_t *tag, enum MHD_Result *answered)
{
    return tag_argument_of(c, "tag", every_tag, tag, answered);
}

/* Decimal digits, and nothing else, into *n. False if bad or too large. */
static bool decimal(const char *v, uint64_t *n)
{
    *n = 0;
    if (*v == '\0')
        return false;
    for (; *v != '\0'; v++)
        if (*v < '0' || *v > '9' || __builtin_mul_overflow(*n, 10, n) ||
            __builtin_add_overflow(*n, (uint64_t)(*v - '0'), n))
            return false;
    return true;
}

/* ?since=SEQ (decimal digits) into *since, 0 when absent. False if bad. */
static bool since_argument(struct MHD_Connection *c, uint64_t *since)
{
    const char *v;
    enum given g = argument(c, "since", &v);

    *since = 0;
    if (g == ABSENT)
        return true;
    return g == VALUE && decimal(v, since);
}

/* ?top=N (decimal digits: list the N largest tags, roll the others up) or
 * ?top=all (every tag) into doc->top; absent, the format's default (50 in
 * text and on the page, every tag in JSON and Prometheus). Answers 400 if
 * bad; returns whether doc->top is set, else *answered holds what was
 * queued. */
static bool top_argument(struct MHD_Connection *c, struct document *doc,
                         enum MHD_Result *answered)
{
    const char *v;
    enum given g = argument(c, "top", &v);
    uint64_t n;

    doc->top = ra__report_top_default(
        (ra_format_t)(doc->fmt & ~RA_REPORT_DETAIL));
    if (g == ABSENT)
        return true;
    if (g == VALUE && strcmp(v, "all") == 0) {
        doc->top = RA_REPORT_ALL_TAGS;
        return true;
    }
    if (g == VALUE && decimal(v, &n) && n < RA_REPORT_ALL_TAGS) {
        doc->top = (size_t)n;
        return true;
    }
    *answered = respond_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                             "top must be a number of tags or all, not "
                             "\"%s\"\n",
                             g == VALUE ? v : "");
    return false;
}

/* The page's two sources besides the reports: the chart's samples
 * (?since=SEQ, and ?tag=NAME to sample that tag too) and a tag's
 * allocation sites as folded stacks (?tag=NAME; every tag's without). */
static enum MHD_Result serve_page_data(struct MHD_Connection *c,
                                       const char *url, struct document *doc)
{
    enum MHD_Result answered;
    const char *v;

    if (!tag_argument(c, true, &doc->tag, &answered))
        return answered;
    if (strcmp(url, "/debug/regionalloc/profile") == 0)
        return respond_with(c, "text/plain; charset=utf-8", write_sites,
                            doc);
    if (!since_argument(c, &doc->since))
        return respond_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                            "since must be a sample's number, not \"%s\"\n",
                            argument(c, "since", &v) == VALUE ? v : "");
    if (doc->tag != RA_TAG_ALL)
        ra__history_watch(doc->tag);
    return respond_with(c, "application/json", write_history, doc);
}

static enum MHD_Result bad_detail(struct MHD_Connection *c)
{
    const char *v;

    return respond_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                        "detail must be 0 or 1, not \"%s\"\n",
                        argument(c, "detail", &v) == VALUE ? v : "");
}

static enum MHD_Result serve_get(struct MHD_Connection *c, const char *url)
{
    struct document doc = {RA_FORMAT_PROMETHEUS, RA_TAG_ALL, false, 0,
                           RA_REPORT_ALL_TAGS};
    enum MHD_Result answered;
    const char *v;

    if (strcmp(url, "/metrics") == 0) {
        if (!detail_argument(c, &doc.fmt))
            return bad_detail(c);
        if (!top_argument(c, &doc, &answered))
            return answered;
        return respond_with(c, type_of(doc.fmt), write_report, &doc);
    }
    /* The page a person opens; its address without the slash leads to
     * it, so that its relative links resolve. It lists tags as the text
     * report does. */
    if (strcmp(url, "/debug/regionalloc/") == 0) {
        doc.fmt = RA_FORMAT_TEXT;
        if (!top_argument(c, &doc, &answered))
            return answered;
        return respond_with(c, "text/html; charset=utf-8", write_page, &doc);
    }
    if (strcmp(url, "/debug/regionalloc") == 0)
        return redirect(c, "/debug/regionalloc/");
    if (strcmp(url, "/debug/regionalloc/history") == 0 ||
        strcmp(url, "/debug/regionalloc/profile") == 0)
        return serve_page_data(c, url, &doc);
    /* Go's net/http/pprof serves the same profile at both; continuous
     * profilers scrape /allocs by default. */
    if (strcmp(url, "/debug/pprof/heap") == 0 ||
        strcmp(url, "/debug/pprof/allocs") == 0) {
        /* ?tree=NAME: the tag and its descendants (tag trees). */
        doc.tree = argument(c, "tree", &v) != ABSENT;
        if (doc.tree && argument(c, "tag", &v) != ABSENT)
            return respond_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                                "?tag and ?tree exclude each other\n");
        if (!tag_argument_of(c, doc.tree ? "tree" : "tag", true, &doc.tag,
                             &answered))
            return answered;
        return respond_with(c, "application/octet-stream", write_profile,
                            &doc);
    }
    if (strcmp(url, "/debug/regionalloc/report") == 0 ||
        strcmp(url, "/debug/regionalloc/checkpoints") == 0) {
        if (!format_argument(c, &doc.fmt))
            return respond_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                                "format must be text, json or prometheus, "
                                "not \"%s\"\n",
                                argument(c, "format", &v) == VALUE ? v : "");
        if (strcmp(url, "/debug/regionalloc/report") == 0 &&
            !detail_argument(c, &doc.fmt))
            return bad_detail(c);
        if (strcmp(url, "/debug/regionalloc/report") == 0 &&
            !top_argument(c, &doc, &answered))
            return answered;
        return respond_with(c, type_of(doc.fmt),
                            strcmp(url, "/debug/regionalloc/report") == 0
                                ? write_report
                                : write_checkpoints,
                            &doc);
    }
    return respond_text(c, MHD_HTTP_NOT_FOUND, NULL, "no such page: %s\n",
                        url);
}

/* A page in a browser may send a POST to a loopback address, but not a
 * header of its own to another origin without a preflight, which the
 * server never grants: the header is what a purge needs. */
static enum MHD_Result serve_purge(struct MHD_Connection *c)
{
    const char *write = RA__MHD(lookup_connection_value)(
        c, MHD_HEADER_KIND, "X-Regionalloc-Write");
    enum MHD_Result answered;
    ra_tag_t tag;

    if (write == NULL || strcmp(write, "1") != 0)
        return respond_text(c, MHD_HTTP_FORBIDDEN, NULL,
                            "a purge needs the header "
                            "X-Regionalloc-Write: 1\n");
    if (!tag_argument(c, false, &tag, &answered))
        return answered;
    if (ra_tag_purge(tag) != 0)
        return respond_text(c, 500, NULL, "ra_tag_purge: %s\n",
                            strerror(errno));
    return respond_text(c, MHD_HTTP_OK, NULL, "purged\n");
}

static bool is_read_path(const char *url)
{
    return strcmp(url, "/metrics") == 0 ||
           strcmp(url, "/debug/pprof/heap") == 0 ||
           strcmp(url, "/debug/pprof/allocs") == 0 ||
           strcmp(url, "/debug/regionalloc/report") == 0 ||
           strcmp(url, "/debug/regionalloc/checkpoints") == 0 ||
           strcmp(url, "/debug/regionalloc/history") == 0 ||
           strcmp(url, "/debug/regionalloc/profile") == 0 ||
           strcmp(url, "/debug/regionalloc/") == 0 ||
           strcmp(url, "/debug/regionalloc") == 0;
}

/* A Host header that names this machine's loopback: localhost (any case),
 * an address of 127.0.0.0/8 or [::1], each with an optional port. A name
 * that an attacker's DNS points to 127.0.0.1 (rebinding) is not one. */
static bool is_loopback_host(const char *host)
{
    char name[64];
    const char *port;
    size_t n;
    struct in_addr v4;
    struct in6_addr v6;

    if (host[0] == '[') {
        const char *close = strchr(host, ']');
        if (close == NULL || (n = (size_t)(close - host - 1)) >= sizeof name)
            return false;
        memcpy(name, host + 1, n);
        name[n] = '\0';
        port = close + 1;
        return (port[0] == '\0' ||
                (port[0] == ':' && ra__http_is_port(port + 1))) &&
               inet_pton(AF_INET6, name, &v6) == 1 &&
               (IN6_IS_ADDR_LOOPBACK(&v6) ||
                (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127));
    }
    port = strchr(host, ':');
    n = port != NULL ? (size_t)(port - host) : strlen(host);
    if (n >= sizeof name || (port != NULL && !ra__http_is_port(port + 1)))
        return false;
    memcpy(name, host, n);
    name[n] = '\0';
    return strcasecmp(name, "localhost") == 0 ||
           (inet_pton(AF_INET, name, &v4) == 1 &&
            (ntohl(v4.s_addr) >> 24) == 127);
}

struct header_count {
    const char *name;
    unsigned n;
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind,
                                    const char *key, const char *value)
{
    struct header_count *count = cls;

    (void)kind;
    (void)value;
    if (strcasecmp(key, count->name) == 0)
        count->n++;
    return MHD_YES;
}

/* How many times the request carries the header name. */
static unsigned headers_named(struct MHD_Connection *c, const char *name)
{
    struct header_count count = {name, 0};

    RA__MHD(get_connection_values)(c, MHD_HEADER_KIND, count_header, &count);
    return count.n;
}

static enum MHD_Result find_nul(void *cls, enum MHD_ValueKind kind,
                                const char *key, size_t key_size,
                                const char *value, size_t value_size)
{
    (void)kind;
    if (memchr(key, '\0', key_size) == NULL &&
        (value == NULL || memchr(value, '\0', value_size) == NULL))
        return MHD_YES;
    *(bool *)cls = true;
    return MHD_NO;
}

/* Whether a key or value of the query holds a NUL byte ("%00"): none of
 * ours can, and read as a C string it would say something else ("5%00"
 * is not the sample number 5). */
static bool argument_holds_nul(struct MHD_Connection *c)
{
    bool found = false;

    RA__MHD(get_connection_values_n)(c, MHD_GET_ARGUMENT_KIND, find_nul,
                                     &found);
    return found;
}

/* The status a request's Host earns before anything else is looked at: 0
 * (go on), 400 (an HTTP/1.1 request without exactly one, non-empty Host)
 * or 403 (a Host that is not loopback, unless remote clients are
 * allowed). */
static unsigned host_status(struct MHD_Connection *c, const char *version)
{
    const char *host = RA__MHD(lookup_connection_value)(
        c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);

    if (headers_named(c, MHD_HTTP_HEADER_HOST) > 1 ||
        (host != NULL && host[0] == '\0'))
        return MHD_HTTP_BAD_REQUEST;
    if (host == NULL)
        return strcmp(version, MHD_HTTP_VERSION_1_0) == 0
                   ? 0
                   : MHD_HTTP_BAD_REQUEST;
    if (!ra__config()->http_allow_remote && !is_loopback_host(host))
        return MHD_HTTP_FORBIDDEN;
    return 0;
}

/* Answers a request whose body could not be delimited, were it read: a
 * Transfer-Encoding other than chunked is a body that ends with the
 * connection, and of two Content-Lengths neither can be trusted. 501 (RFC
 * 9112, 6.1) and 400 (6.3); and 400 for an argument with a NUL byte.
 * Returns true if it answered (*answered: what answer returns). */
static bool first_look(struct MHD_Connection *c, enum MHD_Result *answered)
{
    const char *coding = RA__MHD(lookup_connection_value)(
        c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);

    if (coding != NULL &&
        (strcasecmp(coding, "chunked") != 0 ||
         headers_named(c, MHD_HTTP_HEADER_TRANSFER_ENCODING) > 1))
        *answered = respond_text(c, MHD_HTTP_NOT_IMPLEMENTED, NULL,
                                 "Transfer-Encoding \"%s\" is not "
                                 "implemented: chunked alone is\n",
                                 coding);
    else if (headers_named(c, MHD_HTTP_HEADER_CONTENT_LENGTH) > 1)
        *answered = respond_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                                 "a request has one Content-Length at most\n");
    else if (argument_holds_nul(c))
        *answered = respond_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                                 "an argument holds a NUL byte (%%00)\n");
    else
        return false;
    return true;
}

/* libmicrohttpd calls it once the headers are in, a body, if any, still
 * to come, and every request is answered then: no endpoint takes a body,
 * and an answer queued before it makes libmicrohttpd drop the body unread
 * and close the connection once the answer is out. So a body sent slowly,
 * or without end (a large Content-Length, chunks that never end), holds a
 * place no longer than its answer does. */
static enum MHD_Result answer(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    bool purge = strcmp(url, "/debug/regionalloc/purge") == 0;
    enum MHD_Result answered;
    unsigned refused;

    (void)cls;
    (void)upload_data;
    (void)upload_data_size;
    (void)req_cls;
    tls_answering = true;
    if (first_look(c, &answered))
        return answered;
    refused = host_status(c, version);
    if (refused == MHD_HTTP_BAD_REQUEST)
        return respond_text(c, refused, NULL,
                            "an HTTP/1.1 request needs one Host header\n");
    if (refused != 0)
        return respond_text(c, refused, NULL,
                            "this server answers requests for a loopback "
                            "host only (localhost, 127.0.0.1, [::1])\n");
    if (purge) {
        if (strcmp(method, "POST") == 0 && ra__config()->http_write)
            return serve_purge(c);
        if (ra__config()->http_write)
            return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "POST",
                                "purge takes POST\n");
        return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "",
                            "purge is off: set REGIONALLOC_HTTP_WRITE=1 to "
                            "allow it\n");
    }
    if (get)
        return serve_get(c, url);
    if (is_read_path(url))
        return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET, HEAD",
                            "%s takes GET\n", url);
    return respond_text(c, MHD_HTTP_NOT_FOUND, NULL, "no such page: %s\n",
                        url);
}

static void log_nothing(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    (void)fmt;
    (void)ap;
}

/* A connection started: the door times it. A connection closed (told
 * before libmicrohttpd closes its socket): the door may hand the next
 * request over. */
static void notify_connection(void *cls, struct MHD_Connection *c,
                              void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
    const union MHD_ConnectionInfo *info =
        RA__MHD(get_connection_info)(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = info != NULL ? info->connect_fd : -1;

    (void)cls;
    (void)socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED && fd >= 0)
        ra__http_door_started(fd);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        ra__http_door_left(fd);
}

/* -- the address --------------------------------------------------------------- */

/* With http_lock held: served becomes the bound address, as a client
 * writes it (brackets around an IPv6 host). */
static void name_bound(const struct sockaddr_storage *bound, int port)
{
    char host[INET6_ADDRSTRLEN] = "?";
    bool v6 = bound->ss_family == AF_INET6;
    const void *in =
        v6 ? (const void *)&((const struct sockaddr_in6 *)bound)->sin6_addr
           : (const void *)&((const struct sockaddr_in *)bound)->sin_addr;

    ra__assert_held(&http_lock);
    if (inet_ntop(bound->ss_family, in, host, sizeof host) == NULL)
        snprintf(host, sizeof host, "?");
    snprintf(served, sizeof served, v6 ? "[%s]:%d" : "%s:%d", host, port);
}

/* A listening socket for addr, REGIONALLOC_HTTP_ALLOW_REMOTE's rule
 * applied (http_address.c, which regionalloc run --http shares); its port
 * in *port. -1 with why not in *why and errno (ra__http_listen's). */
static int open_listener(const char *addr, int *port, const char **why)
{
    struct sockaddr_storage bound;
    int fd;

    if (addr == NULL) {
        *why = "no address";
        errno = EINVAL;
        return -1;
    }
    fd = ra__http_listen(addr, ra__config()->http_allow_remote, &bound, why);
    if (fd < 0)
        return -1;
    *port = ntohs(bound.ss_family == AF_INET6
                      ? ((struct sockaddr_in6 *)&bound)->sin6_port
                      : ((struct sockaddr_in *)&bound)->sin_port);
    name_bound(&bound, *port);
    return fd;
}

/* -- start and stop ------------------------------------------------------------ */

void ra__http_served(char out[RA__HTTP_ADDR_MAX])
{
    ra__lock(&http_lock);
    memcpy(out, served, RA__HTTP_ADDR_MAX);
    ra__unlock(&http_lock);
}

/* ra_http_start's work, with http_lock held; on failure, why not in
 * *why when the address is at fault. */
static int start_locked(const char *addr, const char **why)
{
    struct MHD_Daemon *d;
    sigset_t old;
    int fd, port = 0, e;

    ra__assert_held(&http_lock);
    if (daemon_ != NULL) {
        errno = EBUSY;
        return -1;
    }
    fd = open_listener(addr, &port, why);
    if (fd < 0)
        return -1;
    /* libmicrohttpd gets its connections from the front door
     * (http_door.c), which answers what it would drop unanswered and
     * keeps to MAX_CONNECTIONS by counting the closes it is told of.
     * libmicrohttpd's own limit, twice that, is never reached: one that
     * closed a connection counts it a moment after telling, and would
     * reset a connection handed over in that moment. */
    ra__spawn_begin(&old);
    d = RA__MHD(start_daemon)(
        MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_NO_LISTEN_SOCKET |
            MHD_USE_ITC,
        0, NULL, NULL, answer, NULL, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(2 * MAX_CONNECTIONS), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)CONNECTION_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)CONNECTION_MEMORY, MHD_OPTION_NOTIFY_CONNECTION,
        notify_connection, NULL, MHD_OPTION_EXTERNAL_LOGGER, log_nothing,
        NULL, MHD_OPTION_END);
    ra__spawn_end(&old);
    if (d == NULL) {
        e = ENOMEM;
        goto fail;
    }
    /* The chart's samples, before any request can ask for them. */
    if (ra__history_start()) {
        e = errno;
        goto fail_daemon;
    }
    if (ra__http_door_open(fd, d, MAX_CONNECTIONS, CONNECTION_TIMEOUT_S)) {
        e = errno;
        ra__history_stop();
        goto fail_daemon;
    }
    daemon_ = d;
    listen_fd = fd;
    return port;
fail_daemon:
    RA__MHD(stop_daemon)(d);
fail:
    close(fd);
    served[0] = '\0';
    errno = e;
    return -1;
}

/* ra_http_start, with why it failed in *why (NULL: errno says; "": a line
 * on stderr has said it). libmicrohttpd is loaded at the first start,
 * before the lock (no lock of ours is held while a library loads); when it
 * cannot be, the loader's line says why and the start fails as in a build
 * without the server. */
static int start(const char *addr, const char **why)
{
    int port;

    *why = NULL;
    if (ra__check_call(true) != 0)
        return -1;
    if (ra__mhd() == NULL) {
        *why = "";
        errno = ENOTSUP;
        return -1;
    }
    ra__quiet_begin();
    ra__lock(&http_lock);
    port = start_locked(addr, why);
    ra__unlock(&http_lock);
    ra__quiet_end();
    return port;
}

int ra_http_start(const char *addr)
{
    const char *why;

    return start(addr, &why);
}

int ra_http_stop(void)
{
    int rc = 0;

    ra__quiet_begin();
    ra__lock(&http_lock);
    if (daemon_ == NULL) {
        errno = EINVAL;
        rc = -1;
    } else if (tls_answering) {
        errno = EDEADLK;
        rc = -1;
    } else {
        ra__http_door_close(); /* no new connection reaches the daemon */
        RA__MHD(stop_daemon)(daemon_); /* joins its thread */
        ra__history_stop();
        close(listen_fd);
        daemon_ = NULL;
        listen_fd = -1;
        served[0] = '\0';
    }
    ra__unlock(&http_lock);
    ra__quiet_end();
    return rc;
}

void ra__http_start_configured(void)
{
    const char *addr = ra__config()->http_addr, *why;
    char msg[400];

    if (start(addr, &why) >= 0) {
        /* served: written before the start returned, by this thread. */
        if (ra__config()->http_announce) {
            snprintf(msg, sizeof msg,
                     "regionalloc: serving http://%s/debug/regionalloc/ "
                     "(pid %ld)",
                     served, (long)getpid());
            ra__warn(msg);
        }
        return;
    }
    if (why != NULL && why[0] == '\0')
        return;
    snprintf(msg, sizeof msg, "regionalloc: REGIONALLOC_HTTP=\"%.64s\": %s; "
             "no server", addr, why != NULL ? why : strerror(errno));
    ra__warn(msg);
}

void ra__http_at_exit(void)
{
    if (daemon_ != NULL)
        (void)ra_http_stop();
}

/* The outermost lock: a thread that holds it may be joining the server,
 * whose requests take the others. Held across the fork so that the child
 * finds the server whole, started or stopped (a fork nested in another's
 * handlers runs none of these: init.c). */
void ra__http_prefork(void)
{
    ra__lock(&http_lock);
}

void ra__http_postfork_parent(void)
{
    ra__unlock(&http_lock);
}

/* In a forked child the server's thread does not exist: forget the server
 * (its structures are the parent's, never touched again), and close the
 * listening socket so that the child does not hold the port. */
void ra__http_postfork_child(void)
{
    ra__http_door_forget();
    if (listen_fd >= 0)
        close(listen_fd);
    listen_fd = -1;
    daemon_ = NULL;
    served[0] = '\0';
    ra__unlock(&http_lock);
}

#endif
