/* Floor: services. The HTTP server's requests: the checks every request
 * passes first (its body's framing, its Host, NUL bytes), the routes, and
 * the arguments they take (?format, ?detail, ?top, ?tag, ?tree, ?since). */
#include "output.h"

#ifdef RA_HTTP

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "http_address.h"

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
        *answered = ra__http_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                                  "?%s needs a tag's name: ?%s=NAME\n", key,
                                  key);
        return false;
    }
    *tag = ra_tag_lookup(name);
    if (*tag != RA_TAG_NONE)
        return true;
    *answered = ra__http_text(c, MHD_HTTP_NOT_FOUND, NULL,
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
 * text and on the dashboard, every tag in JSON and Prometheus). Answers 400 if
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
    *answered = ra__http_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                              "top must be a number of tags or all, not "
                              "\"%s\"\n",
                              g == VALUE ? v : "");
    return false;
}

/* The dashboard's two sources besides the reports: the chart's samples
 * (?since=SEQ, and ?tag=NAME to sample that tag too) and a tag's
 * allocation sites as folded stacks (?tag=NAME; every tag's without). */
static enum MHD_Result serve_dashboard_data(struct MHD_Connection *c,
                                            const char *url,
                                            struct document *doc)
{
    enum MHD_Result answered;
    const char *v;

    if (!tag_argument(c, true, &doc->tag, &answered))
        return answered;
    if (strcmp(url, "/debug/regionalloc/profile") == 0)
        return ra__http_send(c, "text/plain; charset=utf-8",
                             ra__http_doc_sites, doc);
    if (!since_argument(c, &doc->since))
        return ra__http_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                             "since must be a sample's number, not \"%s\"\n",
                             argument(c, "since", &v) == VALUE ? v : "");
    if (doc->tag != RA_TAG_ALL)
        ra__history_watch(doc->tag);
    return ra__http_send(c, "application/json", ra__http_doc_history, doc);
}

static enum MHD_Result bad_detail(struct MHD_Connection *c)
{
    const char *v;

    return ra__http_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                         "detail must be 0 or 1, not \"%s\"\n",
                         argument(c, "detail", &v) == VALUE ? v : "");
}

/* The profile: Go's net/http/pprof serves the same at /heap and
 * /allocs; continuous profilers scrape /allocs by default. ?tree=NAME:
 * the tag and its descendants (tag trees). */
static enum MHD_Result serve_profile(struct MHD_Connection *c,
                                     struct document *doc)
{
    enum MHD_Result answered;
    const char *v;

    doc->tree = argument(c, "tree", &v) != ABSENT;
    if (doc->tree && argument(c, "tag", &v) != ABSENT)
        return ra__http_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                             "?tag and ?tree exclude each other\n");
    if (!tag_argument_of(c, doc->tree ? "tree" : "tag", true, &doc->tag,
                         &answered))
        return answered;
    return ra__http_send(c, "application/octet-stream",
                         ra__http_doc_profile, doc);
}

/* The report (report: true) or the checkpoints, in ?format. */
static enum MHD_Result serve_report(struct MHD_Connection *c, bool report,
                                    struct document *doc)
{
    enum MHD_Result answered;
    const char *v;

    if (!format_argument(c, &doc->fmt))
        return ra__http_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                             "format must be text, json or prometheus, "
                             "not \"%s\"\n",
                             argument(c, "format", &v) == VALUE ? v : "");
    if (report && !detail_argument(c, &doc->fmt))
        return bad_detail(c);
    if (report && !top_argument(c, doc, &answered))
        return answered;
    return ra__http_send(c, type_of(doc->fmt),
                         report ? ra__http_doc_report
                                : ra__http_doc_checkpoints,
                         doc);
}

static enum MHD_Result serve_get(struct MHD_Connection *c, const char *url)
{
    struct document doc = {RA_FORMAT_PROMETHEUS, RA_TAG_ALL, false, 0,
                           RA_REPORT_ALL_TAGS};
    enum MHD_Result answered;

    if (strcmp(url, "/metrics") == 0) {
        if (!detail_argument(c, &doc.fmt))
            return bad_detail(c);
        if (!top_argument(c, &doc, &answered))
            return answered;
        return ra__http_send(c, type_of(doc.fmt), ra__http_doc_report, &doc);
    }
    /* The dashboard a person opens; its address without the slash leads
     * to it, so that its relative links resolve. It lists tags as the text
     * report does. */
    if (strcmp(url, "/debug/regionalloc/") == 0) {
        doc.fmt = RA_FORMAT_TEXT;
        if (!top_argument(c, &doc, &answered))
            return answered;
        return ra__http_send(c, "text/html; charset=utf-8",
                             ra__http_doc_dashboard, &doc);
    }
    if (strcmp(url, "/debug/regionalloc") == 0)
        return ra__http_redirect(c, "/debug/regionalloc/");
    if (strcmp(url, "/debug/regionalloc/history") == 0 ||
        strcmp(url, "/debug/regionalloc/profile") == 0)
        return serve_dashboard_data(c, url, &doc);
    if (strcmp(url, "/debug/pprof/heap") == 0 ||
        strcmp(url, "/debug/pprof/allocs") == 0)
        return serve_profile(c, &doc);
    if (strcmp(url, "/debug/regionalloc/report") == 0 ||
        strcmp(url, "/debug/regionalloc/checkpoints") == 0)
        return serve_report(c, strcmp(url, "/debug/regionalloc/report") == 0,
                            &doc);
    return ra__http_text(c, MHD_HTTP_NOT_FOUND, NULL, "no such page: %s\n",
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
        return ra__http_text(c, MHD_HTTP_FORBIDDEN, NULL,
                             "a purge needs the header "
                             "X-Regionalloc-Write: 1\n");
    if (!tag_argument(c, false, &tag, &answered))
        return answered;
    if (ra_tag_purge(tag) != 0)
        return ra__http_text(c, 500, NULL, "ra_tag_purge: %s\n",
                             strerror(errno));
    return ra__http_text(c, MHD_HTTP_OK, NULL, "purged\n");
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
        *answered = ra__http_text(c, MHD_HTTP_NOT_IMPLEMENTED, NULL,
                                  "Transfer-Encoding \"%s\" is not "
                                  "implemented: chunked alone is\n",
                                  coding);
    else if (headers_named(c, MHD_HTTP_HEADER_CONTENT_LENGTH) > 1)
        *answered =
            ra__http_text(c, MHD_HTTP_BAD_REQUEST, NULL,
                          "a request has one Content-Length at most\n");
    else if (argument_holds_nul(c))
        *answered = ra__http_text(c, MHD_HTTP_BAD_REQUEST, NULL,
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
enum MHD_Result ra__http_answer(struct MHD_Connection *c, const char *url,
                                const char *method, const char *version)
{
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    bool purge = strcmp(url, "/debug/regionalloc/purge") == 0;
    enum MHD_Result answered;
    unsigned refused;

    if (first_look(c, &answered))
        return answered;
    refused = host_status(c, version);
    if (refused == MHD_HTTP_BAD_REQUEST)
        return ra__http_text(c, refused, NULL,
                             "an HTTP/1.1 request needs one Host header\n");
    if (refused != 0)
        return ra__http_text(c, refused, NULL,
                             "this server answers requests for a loopback "
                             "host only (localhost, 127.0.0.1, [::1])\n");
    if (purge) {
        if (strcmp(method, "POST") == 0 && ra__config()->http_write)
            return serve_purge(c);
        if (ra__config()->http_write)
            return ra__http_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "POST",
                                 "purge takes POST\n");
        return ra__http_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "",
                             "purge is off: set REGIONALLOC_HTTP_WRITE=1 to "
                             "allow it\n");
    }
    if (get)
        return serve_get(c, url);
    if (is_read_path(url))
        return ra__http_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET, HEAD",
                             "%s takes GET\n", url);
    return ra__http_text(c, MHD_HTTP_NOT_FOUND, NULL, "no such page: %s\n",
                         url);
}

#endif
