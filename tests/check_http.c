/* Suite "http": ra_http_start and ra_http_stop, the endpoints' answers to
 * good, bad and hostile requests, the server's memory (the library's own),
 * fork, and REGIONALLOC_HTTP. The real clients (curl, promtool, a
 * Prometheus server, a pprof decoder) are in tests/test_http.sh; here a raw
 * socket speaks for the client, so that any byte can be sent. */
#include <arpa/inet.h>
#include <check.h>
#include <jemalloc/jemalloc.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "regionalloc.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

/* -- a client ------------------------------------------------------------------ */

/* How long a client waits for the server, in seconds. */
static long client_timeout_s = 10;

static int connect_to(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    struct timeval timeout = {client_timeout_s, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends len bytes of request and reads the answer until the server closes
 * (every request says "Connection: close", or is garbage). Returns the
 * status (0: no answer) and the answer's text in a malloc'd *answer. No
 * assertion: usable from any thread or child. */
static int exchange(int port, const char *request, size_t len, char **answer)
{
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap + 1);
    int fd = connect_to(port), status = 0;
    ssize_t n;

    *answer = buf;
    if (buf == NULL)
        return 0;
    buf[0] = '\0';
    if (fd < 0)
        return 0;
    for (size_t sent = 0; sent < len; sent += (size_t)n)
        if ((n = send(fd, request + sent, len - sent, MSG_NOSIGNAL)) <= 0)
            break;
    shutdown(fd, SHUT_WR);
    while ((n = recv(fd, buf + got, cap - got, 0)) > 0) {
        got += (size_t)n;
        if (got == cap) {
            char *grown = realloc(buf, 2 * cap + 1);
            if (grown == NULL)
                break;
            buf = grown;
            cap *= 2;
        }
    }
    close(fd);
    buf[got] = '\0';
    *answer = buf;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
    return status;
}

static int request(int port, const char *method, const char *target,
                   char **answer)
{
    char req[1024];
    int len = snprintf(req, sizeof req,
                       "%s %s HTTP/1.1\r\nHost: localhost\r\n"
                       "Connection: close\r\n\r\n",
                       method, target);

    return exchange(port, req, (size_t)len, answer);
}

/* A request with headers of the caller's (each ending in \r\n), and
 * "Connection: close". Returns the status; the answer in *answer. */
static int request_with(int port, const char *method, const char *target,
                        const char *headers, char **answer)
{
    char req[2048];
    int len = snprintf(req, sizeof req,
                       "%s %s HTTP/1.1\r\n%sConnection: close\r\n\r\n",
                       method, target, headers);

    return exchange(port, req, (size_t)len, answer);
}

/* The status of a request with the caller's headers, its answer dropped. */
static int status_with(int port, const char *method, const char *target,
                       const char *headers)
{
    char *answer;
    int status = request_with(port, method, target, headers, &answer);

    free(answer);
    return status;
}

/* The status of a request, its answer dropped. */
static int status_of(int port, const char *method, const char *target)
{
    char *answer;
    int status = request(port, method, target, &answer);

    free(answer);
    return status;
}

/* Seconds on the monotonic clock. */
static double seconds_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *body_of(const char *answer)
{
    const char *body = strstr(answer, "\r\n\r\n");

    return body != NULL ? body + 4 : "";
}

static int start_loopback(void)
{
    int port = ra_http_start("127.0.0.1:0");

    ck_assert_msg(port > 0, "ra_http_start: %s", strerror(errno));
    return port;
}

/* A port nobody listens on now (the kernel's choice, released). */
static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* -- "start and stop" ----------------------------------------------------------- */

START_TEST(test_http_start_serves_and_stop_stops)
{
    int port = start_loopback(), again;

    ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
    errno = 0;
    ck_assert_int_eq(ra_http_start("127.0.0.1:0"), -1);
    ck_assert_int_eq(errno, EBUSY);
    ck_assert_int_eq(ra_http_stop(), 0);
    ck_assert_int_eq(connect_to(port), -1);
    errno = 0;
    ck_assert_int_eq(ra_http_stop(), -1);
    ck_assert_int_eq(errno, EINVAL);
    /* Again, on the same port: the socket was closed. */
    again = ra_http_start("127.0.0.1:0");
    ck_assert_int_gt(again, 0);
    ck_assert_int_eq(ra_http_stop(), 0);
    {
        char addr[32];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        ck_assert_int_eq(ra_http_start(addr), port);
        ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
        ck_assert_int_eq(ra_http_stop(), 0);
    }
}
END_TEST

START_TEST(test_http_start_rejects_bad_addresses)
{
    static const char *const bad[] = {
        "", "nonsense", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999",
        "127.0.0.1:80x", "::1:80", "[::1]:", "no-such-host.invalid:80",
        "127.0.0.1:-1"};

    errno = 0;
    ck_assert_int_eq(ra_http_start(NULL), -1);
    ck_assert_int_eq(errno, EINVAL);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        ck_assert_msg(ra_http_start(bad[i]) == -1 && errno == EINVAL,
                      "\"%s\": errno %d", bad[i], errno);
    }
}
END_TEST

START_TEST(test_http_start_refuses_remote_addresses)
{
    errno = 0;
    ck_assert_int_eq(ra_http_start("0.0.0.0:0"), -1);
    ck_assert_int_eq(errno, EPERM);
    errno = 0;
    ck_assert_int_eq(ra_http_start("[::]:0"), -1);
    ck_assert(errno == EPERM || errno == EINVAL);
}
END_TEST

static int child_remote_allowed(void)
{
    int port = ra_http_start("0.0.0.0:0");

    TU_REQUIRE(port > 0);
    TU_REQUIRE(status_of(port, "GET", "/metrics") == 200);
    TU_REQUIRE(ra_http_stop() == 0);
    return 0;
}

START_TEST(test_http_remote_allowed_when_asked)
{
    static const char *const env[] = {"REGIONALLOC_HTTP_ALLOW_REMOTE=1", NULL};
    char err[512];

    ck_assert_int_eq(
        tu_run_with_env(env, child_remote_allowed, err, sizeof err), 0);
}
END_TEST

START_TEST(test_http_start_on_a_taken_port_fails)
{
    int port = start_loopback();
    char addr[32];

    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    ck_assert_int_eq(ra_http_stop(), 0);
    {
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port)};
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
        ck_assert_int_eq(listen(fd, 1), 0);
        errno = 0;
        ck_assert_int_eq(ra_http_start(addr), -1);
        ck_assert_int_eq(errno, EADDRINUSE);
        close(fd);
    }
}
END_TEST

static int child_http_in_pass_through(void)
{
    TU_REQUIRE(ra_http_start("127.0.0.1:0") == -1 && errno == ENOTSUP);
    return 0;
}

START_TEST(test_http_not_supported_in_pass_through_mode)
{
    static const char *const env[] = {"REGIONALLOC=0", NULL};
    char err[512];

    ck_assert_int_eq(
        tu_run_with_env(env, child_http_in_pass_through, err, sizeof err), 0);
}
END_TEST

/* -- "endpoints" ------------------------------------------------------------------ */

START_TEST(test_http_endpoints_answer)
{
    ra_tag_t tag = tu_tag_create("served");
    void *block = ra_malloc_tag(tag, 3 * MIB);
    int port;
    char *answer;

    ck_assert_ptr_nonnull(block);
    ck_assert_int_eq(ra_checkpoint("one"), 0);
    port = start_loopback();

    ck_assert_int_eq(request(port, "GET", "/metrics", &answer), 200);
    ck_assert_msg(strstr(answer, "Content-Type: text/plain; version=0.0.4") !=
                      NULL, "%s", answer);
    ck_assert_msg(strstr(body_of(answer), "regionalloc_tag_allocated_bytes{"
                                          "tag=\"served\"} 3145728\n") != NULL,
                  "%s", answer);
    free(answer);

    ck_assert_int_eq(request(port, "HEAD", "/metrics", &answer), 200);
    ck_assert_str_eq(body_of(answer), "");
    free(answer);

    ck_assert_int_eq(
        request(port, "GET", "/debug/regionalloc/report?format=json", &answer),
        200);
    ck_assert_msg(strstr(body_of(answer), "\"name\": \"served\"") != NULL,
                  "%s", answer);
    free(answer);
    ck_assert_int_eq(request(port, "GET", "/debug/regionalloc/report", &answer),
                     200);
    ck_assert_msg(strncmp(body_of(answer), "tag ", 4) == 0, "%s", answer);
    free(answer);
    ck_assert_int_eq(
        request(port, "GET",
                "/debug/regionalloc/checkpoints?format=prometheus", &answer),
        200);
    ck_assert_msg(strstr(body_of(answer), "checkpoint=\"one\"") != NULL, "%s",
                  answer);
    free(answer);

    /* The profiler is off: said so, not an empty profile. */
    ck_assert_int_eq(status_of(port, "GET", "/debug/pprof/heap"), 503);
    ck_assert_int_eq(ra_prof_start(1), 0);
    ck_assert_int_eq(request(port, "GET", "/debug/pprof/heap", &answer), 200);
    /* gzip's magic. */
    ck_assert_msg((unsigned char)body_of(answer)[0] == 0x1f &&
                      (unsigned char)body_of(answer)[1] == 0x8b, "%.200s",
                  answer);
    free(answer);
    ck_assert_int_eq(status_of(port, "GET", "/debug/pprof/heap?tag=served"),
                     200);
    ck_assert_int_eq(status_of(port, "GET", "/debug/pprof/allocs"), 200);
    ck_assert_int_eq(ra_http_stop(), 0);
    ra_free(block);
}
END_TEST

/* The endpoints read the live figures; ?detail=1 refreshes jemalloc's
 * statistics once (and nothing else does, the dashboard's sampler
 * included). */
START_TEST(test_http_detail_refreshes_once)
{
    ra_tag_t tag = tu_tag_create("detailed");
    void *block = ra_malloc_tag(tag, 100);
    int port = start_loopback();
    uint64_t before;
    char *answer;

    ck_assert_ptr_nonnull(block);
    /* The first read of a new arena's live page count takes a refresh. */
    ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
    before = tu_jemalloc_epoch();
    ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
    ck_assert_int_eq(status_of(port, "GET", "/metrics?detail=0"), 200);
    ck_assert_int_eq(status_of(port, "GET", "/debug/regionalloc/report"), 200);
    ck_assert_int_eq(status_of(port, "GET", "/debug/regionalloc/"), 200);
    ck_assert_uint_eq(tu_jemalloc_epoch(), before);
    ck_assert_int_eq(request(port, "GET", "/metrics?detail=1", &answer), 200);
    ck_assert_msg(strstr(body_of(answer), "regionalloc_tag_allocated_bytes{"
                                          "tag=\"detailed\"} 112\n") != NULL,
                  "%s", answer);
    free(answer);
    ck_assert_uint_eq(tu_jemalloc_epoch(), before + 1);
    ck_assert_int_eq(status_of(port, "GET",
                               "/debug/regionalloc/report?format=json"
                               "&detail=1"),
                     200);
    ck_assert_uint_eq(tu_jemalloc_epoch(), before + 2);
    ck_assert_int_eq(request(port, "GET", "/metrics?detail=yes", &answer), 400);
    ck_assert_msg(strstr(body_of(answer), "detail must be 0 or 1") != NULL,
                  "%s", answer);
    free(answer);
    ck_assert_int_eq(status_of(port, "GET", "/metrics?detail"), 400);
    ck_assert_int_eq(
        status_of(port, "GET", "/debug/regionalloc/report?detail=2"), 400);
    ck_assert_uint_eq(tu_jemalloc_epoch(), before + 2);
    ck_assert_int_eq(ra_http_stop(), 0);
    ra_free(block);
}
END_TEST

START_TEST(test_http_bad_paths_methods_and_arguments)
{
    int port = start_loopback();
    char *answer;

    ck_assert_int_eq(status_of(port, "GET", "/"), 404);
    ck_assert_int_eq(status_of(port, "GET", "/metrics/"), 404);
    ck_assert_int_eq(status_of(port, "GET", "/debug/pprof/heap?tag=nobody"),
                     404);
    ck_assert_int_eq(
        status_of(port, "GET", "/debug/regionalloc/report?format=xml"), 400);
    ck_assert_int_eq(request(port, "PUT", "/metrics", &answer), 405);
    ck_assert_msg(strstr(answer, "Allow: GET, HEAD") != NULL, "%s", answer);
    free(answer);
    ck_assert_int_eq(status_of(port, "DELETE", "/debug/regionalloc/report"),
                     405);
    ck_assert_int_eq(status_of(port, "POST", "/metrics"), 405);
    /* Without REGIONALLOC_HTTP_WRITE=1 the purge is refused. */
    ck_assert_int_eq(status_of(port, "POST", "/debug/regionalloc/purge?tag=x"),
                     405);
    ck_assert_int_eq(status_of(port, "GET", "/debug/regionalloc/purge?tag=x"),
                     405);
    ck_assert_int_eq(status_of(port, "POST", "/elsewhere"), 404);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* What a purge must carry (a loopback Host, the write header). */
#define WRITE_HEADERS "Host: localhost\r\nX-Regionalloc-Write: 1\r\n"

static int child_purge_allowed(void)
{
    ra_tag_t tag = ra_tag_create("purged");
    void *blocks[64];
    ra_tag_stats_t st;
    int port;

    for (int i = 0; i < 64; i++)
        TU_REQUIRE((blocks[i] = ra_malloc_tag(tag, 64 << 10)) != NULL);
    for (int i = 0; i < 64; i++)
        ra_free(blocks[i]);
    ra_thread_flush();
    TU_REQUIRE(ra_tag_stats(tag, &st) == 0 && st.dirty > 0);
    port = ra_http_start("127.0.0.1:0");
    TU_REQUIRE(port > 0);
    TU_REQUIRE(status_with(port, "POST", "/debug/regionalloc/purge?tag=purged",
                           WRITE_HEADERS) == 200);
    TU_REQUIRE(ra_tag_stats(tag, &st) == 0 && st.dirty == 0);
    TU_REQUIRE(status_with(port, "POST", "/debug/regionalloc/purge?tag=none",
                           WRITE_HEADERS) == 404);
    TU_REQUIRE(status_with(port, "POST", "/debug/regionalloc/purge",
                           WRITE_HEADERS) == 400);
    TU_REQUIRE(status_of(port, "GET", "/debug/regionalloc/purge?tag=purged") ==
               405);
    TU_REQUIRE(ra_http_stop() == 0);
    return 0;
}

START_TEST(test_http_purge_when_allowed)
{
    static const char *const env[] = {"REGIONALLOC_HTTP_WRITE=1", NULL};
    char err[512];

    ck_assert_int_eq(
        tu_run_with_env(env, child_purge_allowed, err, sizeof err), 0);
}
END_TEST

/* -- "hostile clients" -------------------------------------------------------------- */

START_TEST(test_http_survives_garbage_and_oversized_requests)
{
    static const struct {
        const char *bytes;
        size_t len;
    } garbage[] = {
#define BYTES(s) {s, sizeof s - 1}
        BYTES("hello\r\n\r\n"),
        BYTES("GET\r\n\r\n"),
        BYTES("GET /metrics HTTP/9.9\r\n\r\n"),
        BYTES("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"),
        BYTES("\x00\x01\x02\xff\xfe\r\n\r\n\x00\x00"),
        BYTES("GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n"),
        BYTES("GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
              "zz\r\n"),
#undef BYTES
    };
    int port = start_loopback();
    size_t big = 1 << 20;
    char *huge = malloc(big), *answer;
    int status;

    ck_assert_ptr_nonnull(huge);
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        status = exchange(port, garbage[i].bytes, garbage[i].len, &answer);
        free(answer);
        ck_assert_msg((status >= 400 && status < 500) || status == 505,
                      "garbage %zu: status %d", i, status);
        ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
    }
    /* A line, a header and a body far past the limits. */
    memset(huge, 'a', big);
    memcpy(huge, "GET /", 5);
    status = exchange(port, huge, big, &answer);
    free(answer);
    ck_assert_msg(status == 0 || (status >= 400 && status < 500),
                  "huge line: %d", status);
    snprintf(huge, big, "GET /metrics HTTP/1.1\r\nHost: x\r\nX: ");
    memset(huge + strlen(huge), 'b', big - strlen(huge));
    status = exchange(port, huge, big, &answer);
    free(answer);
    ck_assert_msg(status == 0 || (status >= 400 && status < 500),
                  "huge header: %d", status);
    ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
    free(huge);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* What cannot be parsed as a request is answered, with 400, never met by a
 * silent close: a line without a target, bytes that are no request, an
 * HTTP/1.1 request without Host, a request with two. */
START_TEST(test_http_malformed_requests_are_answered_400)
{
    static const struct {
        const char *bytes;
        size_t len;
    } bad[] = {
#define BYTES(s) {s, sizeof s - 1}
        BYTES("garbage\r\n\r\n"),
        BYTES("GET\r\n\r\n"),
        BYTES("GET\n\n"),
        BYTES("\x00\x01\x02\xff\xfe\r\n\r\n"),
        BYTES("GET /metrics HTTP/1.1\r\n\r\n"),
        BYTES("GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
              "Host: 127.0.0.1\r\n\r\n"),
        BYTES("GET /metrics HTTP/1.1\r\nHost:\r\n\r\n"),
#undef BYTES
    };
    int port = start_loopback();
    char *answer;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int status = exchange(port, bad[i].bytes, bad[i].len, &answer);
        ck_assert_msg(status == 400, "request %zu: status %d: %s", i,
                      status, answer);
        free(answer);
    }
    /* HTTP/1.0 needs no Host. */
    ck_assert_int_eq(exchange(port, "GET /metrics HTTP/1.0\r\n\r\n", 25,
                              &answer),
                     200);
    free(answer);
    ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* The Content-Length an answer announces, or 0. */
static size_t content_length(const char *answer)
{
    const char *at = strstr(answer, "Content-Length: ");

    return at != NULL ? (size_t)strtoull(at + 16, NULL, 10) : 0;
}

/* GET /debug/regionalloc/: the dashboard, self-contained, the tags as a tree
 * with their figures; names escaped for HTML; the address without the
 * slash leads to it. */
START_TEST(test_http_dashboard_of_the_tags)
{
    int port = start_loopback();
    ra_tag_t tenant = tu_tag_create("tenant <&>");
    ra_tag_t query = ra_tag_create_in(tenant, "query");
    ra_tag_t nasty = tu_tag_create(TU_NASTY);
    ra_tag_limit_t limit = {.hard = 64 * MIB, .soft = 2 * MIB};
    void *p = ra_malloc_tag(query, 4 * MIB);
    char *answer;
    const char *body, *row_t, *row_q;

    ck_assert_uint_ne(query, RA_TAG_NONE);
    ck_assert_uint_ne(nasty, RA_TAG_NONE);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(ra_tag_set_limit(tenant, &limit), 0);
    ck_assert_int_eq(request(port, "GET", "/debug/regionalloc/", &answer),
                     200);
    ck_assert_msg(strstr(answer, "Content-Type: text/html; charset=utf-8") !=
                      NULL, "%.300s", answer);
    body = body_of(answer);
    ck_assert(strncmp(body, "<!DOCTYPE html>", 15) == 0);
    /* Nothing from another host: no absolute URL, no script or style
     * fetched. */
    ck_assert_ptr_null(strstr(body, "http://"));
    ck_assert_ptr_null(strstr(body, "https://"));
    ck_assert_ptr_null(strstr(body, "src="));
    ck_assert_ptr_null(strstr(body, "<link"));
    /* The names escaped; the child after and indented under its parent. */
    row_t = strstr(body, "<tr data-tag=\"tenant &lt;&amp;&gt;\" data-id=");
    row_q = strstr(body, "<tr data-tag=\"query\" data-id=");
    ck_assert_ptr_nonnull(row_t);
    ck_assert_ptr_nonnull(row_q);
    ck_assert(row_t < row_q);
    ck_assert_ptr_nonnull(strstr(row_q, "padding-left:24px"));
    ck_assert_ptr_null(strstr(body, "tenant <&>"));
    ck_assert_ptr_null(strstr(body, "\"q%s"));
    /* The tenant's budget bar: past its soft limit, warning-coloured. */
    ck_assert_ptr_nonnull(strstr(row_t, "bar warn"));
    ck_assert_ptr_nonnull(strstr(row_q, "4.0 MiB"));
    ck_assert_ptr_nonnull(strstr(row_q, "data-bytes=\"4194304\""));
    /* Its links to pprof: the name as a query value; a subtree's link for
     * a parent only. */
    ck_assert_ptr_nonnull(strstr(
        row_t, "<a href=\"/debug/pprof/heap?tag=tenant%20%3C%26%3E\">pprof</a> "
               "<a href=\"/debug/pprof/heap?tree=tenant%20%3C%26%3E\">"));
    ck_assert_ptr_nonnull(strstr(row_q, "?tag=query\">pprof</a></td>"));
    /* The live part waits for its script; the checkpoints are a table in
     * text until then. */
    ck_assert_ptr_nonnull(strstr(body, "<section id=\"live\" hidden>"));
    ck_assert_ptr_nonnull(strstr(body, "<div id=\"checkpoints\"><pre>"));
    ck_assert_ptr_nonnull(strstr(body, "<script>"));
    /* The embedded script never ends its element early. */
    ck_assert_ptr_null(strstr(strstr(body, "</script>") + 1, "</script"));
    free(answer);
    ck_assert_int_eq(request(port, "GET", "/debug/regionalloc", &answer),
                     301);
    ck_assert_ptr_nonnull(strstr(answer, "Location: /debug/regionalloc/\r\n"));
    free(answer);
    ck_assert_int_eq(status_of(port, "POST", "/debug/regionalloc/"), 405);
    ra_free(p);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* GET /debug/regionalloc/history: the samples the dashboard draws, a
 * sample a second from the server's start; ?since; errors. */
START_TEST(test_http_history_of_samples)
{
    int port = start_loopback();
    ra_tag_t tag = tu_tag_create("charted");
    void *p = ra_malloc_tag(tag, 3 * MIB);
    char *answer, want[80];
    const char *body;

    ck_assert_ptr_nonnull(p);
    /* The first sample is taken when the server starts, the next a second
     * later; a deadline, not a duration, so that a slow machine passes. */
    for (int tries = 0; tries < 300; tries++) {
        ck_assert_int_eq(
            request(port, "GET", "/debug/regionalloc/history", &answer), 200);
        if (strstr(answer, "\"seq\": 2,") != NULL)
            break;
        free(answer);
        answer = NULL;
        usleep(50000);
    }
    ck_assert_ptr_nonnull(answer);
    ck_assert_ptr_nonnull(strstr(answer, "Content-Type: application/json"));
    body = body_of(answer);
    ck_assert_ptr_nonnull(
        strstr(body, "\"schema\": \"regionalloc-history-1\""));
    ck_assert_ptr_nonnull(strstr(body, "\"interval_ns\": 1000000000"));
    ck_assert_ptr_nonnull(strstr(body, "{\"seq\": 1, "));
    snprintf(want, sizeof want, "{\"id\": %u, \"born\": ", tag);
    ck_assert_msg(strstr(body, want) != NULL, "%s", body);
    snprintf(want, sizeof want, "\"allocated\": %zu, ", (size_t)3 * MIB);
    ck_assert_ptr_nonnull(strstr(body, want));
    free(answer);
    ck_assert_int_eq(request(port, "GET",
                             "/debug/regionalloc/history?since=1&tag=charted",
                             &answer),
                     200);
    ck_assert_ptr_null(strstr(body_of(answer), "{\"seq\": 1, "));
    ck_assert_ptr_nonnull(strstr(body_of(answer), "{\"seq\": 2, "));
    free(answer);
    ck_assert_int_eq(status_of(port, "GET",
                               "/debug/regionalloc/history?since=-1"),
                     400);
    ck_assert_int_eq(status_of(port, "GET",
                               "/debug/regionalloc/history?since=1x"),
                     400);
    ck_assert_int_eq(
        status_of(port, "GET",
                  "/debug/regionalloc/history?since=99999999999999999999"),
        400);
    ck_assert_int_eq(status_of(port, "GET", "/debug/regionalloc/history?since"),
                     400);
    ck_assert_int_eq(
        status_of(port, "GET", "/debug/regionalloc/history?tag=nobody"), 404);
    ck_assert_int_eq(status_of(port, "POST", "/debug/regionalloc/history"),
                     405);
    ra_free(p);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* GET /debug/regionalloc/profile: a tag's allocation sites as folded
 * stacks for the dashboard's icicle; 503 while the profiler is off. */
START_TEST(test_http_sites_of_a_tag)
{
    int port = start_loopback();
    ra_tag_t tag = tu_tag_create("sited"), other = tu_tag_create("other");
    void *p, *q;
    char *answer;

    ck_assert_int_eq(status_of(port, "GET", "/debug/regionalloc/profile"),
                     503);
    ck_assert_int_eq(ra_prof_start(1), 0);
    p = ra_malloc_tag(tag, 64 * 1024);
    q = ra_malloc_tag(other, 64 * 1024);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(request(port, "GET",
                             "/debug/regionalloc/profile?tag=sited", &answer),
                     200);
    ck_assert_ptr_nonnull(strstr(body_of(answer), "tag:sited;"));
    ck_assert_ptr_null(strstr(body_of(answer), "tag:other;"));
    free(answer);
    ck_assert_int_eq(
        request(port, "GET", "/debug/regionalloc/profile", &answer), 200);
    ck_assert_ptr_nonnull(strstr(body_of(answer), "tag:sited;"));
    ck_assert_ptr_nonnull(strstr(body_of(answer), "tag:other;"));
    free(answer);
    ck_assert_int_eq(
        status_of(port, "GET", "/debug/regionalloc/profile?tag=nobody"), 404);
    ck_assert_int_eq(status_of(port, "GET", "/debug/regionalloc/profile?tag"),
                     400);
    ra_free(p);
    ra_free(q);
    ck_assert_int_eq(ra_prof_stop(), 0);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* ?tree=NAME: the profile of a tag and its descendants. */
START_TEST(test_http_profile_of_a_subtree)
{
    int port = start_loopback();
    ra_tag_t parent = tu_tag_create("tenant");
    ra_tag_t child = ra_tag_create_in(parent, "query");
    void *blocks[64];
    char *answer;
    size_t of_tag, of_tree;

    ck_assert_uint_ne(child, RA_TAG_NONE);
    ck_assert_int_eq(ra_prof_start(1), 0);
    for (unsigned i = 0; i < 64; i++)
        ck_assert_ptr_nonnull(blocks[i] = ra_malloc_tag(child, 4096));
    /* The parent's own profile has no samples; its subtree's has the
     * child's. */
    ck_assert_int_eq(
        request(port, "GET", "/debug/pprof/heap?tag=tenant", &answer), 200);
    of_tag = content_length(answer);
    free(answer);
    ck_assert_int_eq(
        request(port, "GET", "/debug/pprof/heap?tree=tenant", &answer), 200);
    of_tree = content_length(answer);
    ck_assert_msg((unsigned char)body_of(answer)[0] == 0x1f, "%.200s", answer);
    free(answer);
    ck_assert_msg(of_tree > of_tag, "tree %zu bytes, tag %zu", of_tree,
                  of_tag);
    ck_assert_int_eq(status_of(port, "GET", "/debug/pprof/heap?tree=query"),
                     200);
    ck_assert_int_eq(status_of(port, "GET", "/debug/pprof/heap?tree=nobody"),
                     404);
    ck_assert_int_eq(
        status_of(port, "GET", "/debug/pprof/heap?tag=query&tree=tenant"),
        400);
    for (unsigned i = 0; i < 64; i++)
        ra_free(blocks[i]);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* A key that needs a value, given without one, is 400, not "every tag". */
START_TEST(test_http_arguments_without_values_are_400)
{
    static const char *const bad[] = {
        "/debug/pprof/heap?tag", "/debug/pprof/heap?tag=",
        "/debug/pprof/heap?tree", "/debug/pprof/heap?tree=",
        "/debug/pprof/allocs?tag", "/debug/pprof/allocs?tag=",
        "/debug/regionalloc/report?format",
        "/debug/regionalloc/report?format=",
        "/debug/regionalloc/checkpoints?format="};
    int port = start_loopback();

    ck_assert_int_eq(ra_prof_start(4096), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(status_of(port, "GET", bad[i]) == 400, "%s: %d",
                      bad[i], status_of(port, "GET", bad[i]));
    ck_assert_int_eq(status_of(port, "GET", "/debug/pprof/heap"), 200);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* A loopback server is not a web site: a Host that is not a loopback name
 * or address (DNS rebinding: a page of evil.example whose name now points
 * to 127.0.0.1) is refused, whatever the path; loopback ones, with any
 * port, are served. */
START_TEST(test_http_foreign_host_is_refused_403)
{
    static const char *const foreign[] = {
        "Host: evil.example\r\n", "Host: evil.example:8080\r\n",
        "Host: localhost.evil.example\r\n", "Host: 127.0.0.1.nip.io\r\n",
        "Host: 10.0.0.1\r\n", "Host: [::2]:80\r\n",
        "Host: 127.0.0.1:99999\r\n", "Host: 127.1\r\n"};
    static const char *const loopback[] = {
        "Host: localhost\r\n",    "Host: LocalHost:9090\r\n",
        "Host: 127.0.0.1\r\n",    "Host: 127.0.0.1:80\r\n",
        "Host: 127.1.2.3:5\r\n",  "Host: [::1]\r\n",
        "Host: [::1]:9090\r\n"};
    static const char *const paths[] = {"/metrics", "/debug/pprof/heap",
                                        "/debug/regionalloc/report",
                                        "/debug/regionalloc/checkpoints",
                                        "/debug/regionalloc/"};
    int port = start_loopback();

    ck_assert_int_eq(ra_prof_start(4096), 0);
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++)
        for (size_t j = 0; j < sizeof paths / sizeof paths[0]; j++)
            ck_assert_msg(status_with(port, "GET", paths[j], foreign[i]) ==
                              403,
                          "%s %s", paths[j], foreign[i]);
    for (size_t i = 0; i < sizeof loopback / sizeof loopback[0]; i++)
        ck_assert_msg(status_with(port, "GET", "/metrics", loopback[i]) ==
                          200,
                      "%s", loopback[i]);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

static int child_foreign_host_allowed_when_remote_is(void)
{
    int port = ra_http_start("127.0.0.1:0");

    TU_REQUIRE(port > 0);
    TU_REQUIRE(status_with(port, "GET", "/metrics",
                           "Host: metrics.example.com:9100\r\n") == 200);
    TU_REQUIRE(ra_http_stop() == 0);
    return 0;
}

START_TEST(test_http_foreign_host_allowed_with_allow_remote)
{
    static const char *const env[] = {"REGIONALLOC_HTTP_ALLOW_REMOTE=1", NULL};
    char err[512];

    ck_assert_int_eq(tu_run_with_env(env,
                                     child_foreign_host_allowed_when_remote_is,
                                     err, sizeof err),
                     0);
}
END_TEST

/* A page in the user's browser can send a POST to loopback, but not a
 * custom header cross-site without a preflight, which is never granted:
 * a purge needs X-Regionalloc-Write: 1. */
static int child_purge_needs_the_write_header(void)
{
    ra_tag_t tag = ra_tag_create("guarded");
    char *answer;
    int port;

    TU_REQUIRE(tag != RA_TAG_NONE);
    port = ra_http_start("127.0.0.1:0");
    TU_REQUIRE(port > 0);
    /* The cross-site form post of the attack. */
    TU_REQUIRE(status_with(port, "POST", "/debug/regionalloc/purge?tag=guarded",
                           "Host: evil.example\r\n"
                           "Origin: http://evil.example\r\n") == 403);
    TU_REQUIRE(status_with(port, "POST", "/debug/regionalloc/purge?tag=guarded",
                           "Host: localhost\r\n"
                           "Origin: http://evil.example\r\n") == 403);
    TU_REQUIRE(status_with(port, "POST", "/debug/regionalloc/purge?tag=guarded",
                           "Host: localhost\r\n"
                           "X-Regionalloc-Write: 0\r\n") == 403);
    TU_REQUIRE(status_with(port, "POST", "/debug/regionalloc/purge?tag=guarded",
                           "Host: localhost\r\n"
                           "X-Regionalloc-Write: 1\r\n") == 200);
    TU_REQUIRE(status_with(port, "POST", "/debug/regionalloc/purge?tag=",
                           "Host: localhost\r\n"
                           "X-Regionalloc-Write: 1\r\n") == 400);
    TU_REQUIRE(status_with(port, "POST", "/debug/regionalloc/purge?tag",
                           "Host: localhost\r\n"
                           "X-Regionalloc-Write: 1\r\n") == 400);
    /* A preflight grants nothing: no Access-Control-Allow-* at all. */
    request_with(port, "OPTIONS", "/debug/regionalloc/purge?tag=guarded",
                 "Host: localhost\r\nOrigin: http://evil.example\r\n"
                 "Access-Control-Request-Method: POST\r\n"
                 "Access-Control-Request-Headers: x-regionalloc-write\r\n",
                 &answer);
    TU_REQUIRE(strncmp(answer, "HTTP/1.1 2", 10) != 0);
    TU_REQUIRE(strcasestr(answer, "Access-Control-Allow") == NULL);
    free(answer);
    TU_REQUIRE(ra_http_stop() == 0);
    return 0;
}

START_TEST(test_http_purge_needs_the_write_header)
{
    static const char *const env[] = {"REGIONALLOC_HTTP_WRITE=1", NULL};
    char err[512];

    ck_assert_int_eq(tu_run_with_env(env, child_purge_needs_the_write_header,
                                     err, sizeof err),
                     0);
}
END_TEST

/* More clients at once than the server answers (16): half of them
 * stalled in the middle of a request and kept open, the others whole
 * requests. The stalled ones wait at the door, which closes them after
 * 10 s of silence, so a client that comes after them is served (it waits
 * up to 30 s: not a measure of speed). */
START_TEST(test_http_survives_many_and_stalled_clients)
{
    enum { CLIENTS = 32 };
    static const char whole[] =
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    int port = start_loopback(), fds[CLIENTS];

    for (int i = 0; i < CLIENTS; i++) {
        fds[i] = connect_to(port);
        if (fds[i] < 0)
            continue;
        if (i % 2 == 0)
            (void)!send(fds[i], "GET /metr", 9, MSG_NOSIGNAL);
        else
            (void)!send(fds[i], whole, sizeof whole - 1, MSG_NOSIGNAL);
    }
    client_timeout_s = 30;
    ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
    client_timeout_s = 10;
    for (int i = 0; i < CLIENTS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* What libmicrohttpd (0.9.75) leaves unanswered, or answers wrongly, is
 * answered at once: a line that starts with a space (no method), a line of
 * a space, a Transfer-Encoding other than chunked (it would wait for a
 * body ending with the connection), two Content-Lengths, an argument with
 * a NUL byte in it; and empty lines before the request line are ignored
 * (RFC 9112, 2.2). The client waits 5 s: the connection's timeout, which
 * used to end some of these, is 10. */
START_TEST(test_http_requests_libmicrohttpd_leaves_unanswered_are_answered)
{
    static const struct {
        const char *bytes;
        int status;
    } cases[] = {
        {" GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", 400},
        {" \r\n\r\n", 400},
        {"GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
         "Transfer-Encoding: xchunked\r\n\r\n",
         501},
        {"POST /metrics HTTP/1.1\r\nHost: localhost\r\n"
         "Transfer-Encoding: gzip, chunked\r\n\r\n",
         501},
        {"GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
         "Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
         400},
        {"GET /debug/regionalloc/history?since=5%00 HTTP/1.1\r\n"
         "Host: localhost\r\n\r\n",
         400},
        {"GET /debug/regionalloc/report?format=json%00 HTTP/1.1\r\n"
         "Host: localhost\r\n\r\n",
         400},
        {"\r\nGET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", 200},
        {"\n\r\n\nGET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", 200},
        {"GET /debug/regionalloc/history?since=5 HTTP/1.1\r\n"
         "Host: localhost\r\n\r\n",
         200},
    };
    int port = start_loopback();
    char *answer;

    client_timeout_s = 5;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* Without shutting our side: a client that waits for the answer. */
        int fd = connect_to(port), status = 0;
        char buf[512] = "";
        ssize_t n;
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(send(fd, cases[i].bytes, strlen(cases[i].bytes),
                              MSG_NOSIGNAL),
                         (ssize_t)strlen(cases[i].bytes));
        n = recv(fd, buf, sizeof buf - 1, 0);
        close(fd);
        if (n > 0 && sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
            status = 0;
        ck_assert_msg(status == cases[i].status, "request %zu: %d, not %d: %s",
                      i, status, cases[i].status, buf);
    }
    client_timeout_s = 10;
    ck_assert_int_eq(request(port, "GET", "/metrics", &answer), 200);
    free(answer);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

struct flood {
    int port;
    atomic_size_t sent;
    atomic_bool ended; /* the server ended the connection */
    double seconds;    /* until then */
};

/* A refused request line, then bytes as fast as the server takes them, for
 * 20 s at most: in sends of 1 MiB, which keep the server's queue full. */
static void *flood_after_a_refused_line(void *arg)
{
    static char junk[1 << 20];
    struct flood *f = arg;
    int fd = connect_to(f->port);
    double start = seconds_now();

    memset(junk, 'x', sizeof junk);
    memcpy(junk, "garbage\r\n", 9);
    if (fd < 0) {
        atomic_store(&f->ended, true);
        return NULL;
    }
    while (seconds_now() - start < 20) {
        ssize_t n = send(fd, junk, sizeof junk, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            atomic_store(&f->ended, true);
            break;
        }
        if (n > 0)
            atomic_fetch_add(&f->sent, (size_t)n);
    }
    f->seconds = seconds_now() - start;
    close(fd);
    return NULL;
}

/* A client that keeps sending after a line the door refused holds no one
 * up: another is answered within 2 s (not a measure of speed: the flood
 * would last 20 s), and the flood itself is ended by the server, which
 * reads off what a refused client sends only for so long. */
START_TEST(test_http_a_flood_after_a_refused_line_stalls_no_one)
{
    struct flood f = {.port = start_loopback()};
    pthread_t t;
    int status;

    ck_assert_int_eq(pthread_create(&t, NULL, flood_after_a_refused_line, &f),
                     0);
    /* Well into the flood, or past it. */
    while (atomic_load(&f.sent) < 4 * MIB && !atomic_load(&f.ended))
        usleep(1000);
    client_timeout_s = 2;
    status = status_of(f.port, "GET", "/metrics");
    client_timeout_s = 10;
    pthread_join(t, NULL);
    ck_assert_msg(status == 200, "another client, during the flood: %d",
                  status);
    ck_assert_msg(atomic_load(&f.ended) && f.seconds < 10,
                  "the flood went on for %.1f s (%zu bytes), not ended",
                  f.seconds, atomic_load(&f.sent));
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* The server answers 16 requests at a time; clients that have sent a
 * request line and stall in their headers take none of those places: a
 * 17th client, whole, is answered at once, not reset (the door holds a
 * request until its head has come). */
START_TEST(test_http_clients_stalled_in_their_headers_leave_room)
{
    enum { STALLED = 24 };
    static const char part[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Sl";
    int port = start_loopback(), fds[STALLED], status;

    for (int i = 0; i < STALLED; i++) {
        fds[i] = connect_to(port);
        ck_assert_int_ge(fds[i], 0);
        ck_assert_int_eq(send(fds[i], part, sizeof part - 1, MSG_NOSIGNAL),
                         (ssize_t)sizeof part - 1);
    }
    usleep(200000); /* all of them seen by the server */
    client_timeout_s = 5;
    status = status_of(port, "GET", "/metrics");
    client_timeout_s = 10;
    for (int i = 0; i < STALLED; i++)
        close(fds[i]);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* Whether the server has answered or closed fd (nothing more to wait for). */
static bool server_spoke(int fd)
{
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};

    return poll(&p, 1, 0) == 1;
}

/* A client that sends its head slowly but steadily is not silent: it is
 * not closed 10 s after it came, in its request line (the timeout is of
 * silence); but it cannot hold its connection for good either, with an
 * endless header: 30 s after it came, its head still not whole, it is
 * answered 408. */
START_TEST(test_http_a_slow_head_is_timed_by_silence_then_bounded)
{
    /* 16 s of request line at a byte every 200 ms. */
    static const char head[] =
        "GET /metrics?padding=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        " HTTP/1.1\r\nHost: localhost\r\n";
    int port = start_loopback(), fd = connect_to(port), status = 0;
    double start = seconds_now(), spoke = 0;
    char buf[512] = "";
    size_t i = 0;

    ck_assert_int_ge(fd, 0);
    /* A byte every 200 ms: the line, then one endless header. */
    while (seconds_now() - start < 45) {
        char byte = i < sizeof head - 1 ? head[i] : 'x';
        if (i == sizeof head - 1)
            byte = 'X';
        i++;
        if (server_spoke(fd) ||
            send(fd, &byte, 1, MSG_NOSIGNAL) != 1) {
            spoke = seconds_now() - start;
            break;
        }
        usleep(200000);
    }
    if (recv(fd, buf, sizeof buf - 1, 0) > 0 &&
        sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
    close(fd);
    ck_assert_msg(spoke != 0, "a head that never ends held on for 45 s");
    ck_assert_msg(spoke > 20, "a steady client was cut off after %.1f s",
                  spoke);
    ck_assert_msg(spoke < 40, "a head that never ends held on for %.1f s",
                  spoke);
    ck_assert_msg(status == 408, "status %d: %s", status, buf);
    ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* More clients than the server's 16 places send a request's head and a
 * body they never finish: a Content-Length far past what comes, chunks
 * that never end, a body on a POST to the purge. No endpoint reads a body:
 * each is answered at its head, while the client holds its connection
 * open (before, each held a place until its body came, and the others got
 * 503), and another client is answered 200 after them. The client waits
 * up to 10 s for each answer: a cap, not a measure. */
START_TEST(test_http_slow_bodies_hold_no_place)
{
    enum { SLOW = 20 };
    static const char *const heads[] = {
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
        "Content-Length: 100000\r\n\r\nx",
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
        "Transfer-Encoding: chunked\r\n\r\n100\r\nab",
        "POST /debug/regionalloc/purge HTTP/1.1\r\nHost: localhost\r\n"
        "X-Regionalloc-Write: 1\r\nContent-Length: 100000\r\n\r\nx",
    };
    static const int statuses[] = {200, 200, 405};
    int port = start_loopback(), fds[SLOW];

    for (int i = 0; i < SLOW; i++) {
        const char *head = heads[i % 3];
        fds[i] = connect_to(port);
        ck_assert_int_ge(fds[i], 0);
        ck_assert_int_eq(send(fds[i], head, strlen(head), MSG_NOSIGNAL),
                         (ssize_t)strlen(head));
    }
    for (int i = 0; i < SLOW; i++) {
        char buf[256] = "";
        int status = 0;
        if (recv(fds[i], buf, sizeof buf - 1, 0) <= 0 ||
            sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
            status = 0;
        ck_assert_msg(status == statuses[i % 3],
                      "slow body %d: %d, not %d, in 10 s: %s", i, status,
                      statuses[i % 3], buf);
    }
    ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
    for (int i = 0; i < SLOW; i++)
        close(fds[i]);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* A client that reads its answer a little at a time: a window of a few
 * KiB and segments of 536 bytes, which keep the server's send buffer as
 * small (it is sized from them), 512 bytes read every 100 ms, enough for
 * libmicrohttpd to send some every few seconds, never silent for its 10. */
static int connect_slow_reader(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), rcvbuf = 2048, mss = 536;
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
                              "Connection: close\r\n\r\n";

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)sizeof req - 1) {
        close(fd);
        return -1;
    }
    return fd;
}

struct slow_readers {
    int fds[20];
    atomic_size_t got[20]; /* bytes read */
    atomic_bool ended[20]; /* the server ended the connection */
    atomic_bool stop;
};

/* Reads what is left of fd's answer at once, until the server's end (10 s
 * at most): the bytes read in all, the slow reads' included. */
static size_t drain(int fd, size_t got)
{
    struct timeval timeout = {10, 0};
    char buf[65536];
    ssize_t n;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0)
        got += (size_t)n;
    return got;
}

/* Reads 512 bytes of each connection every 100 ms, until every one has
 * ended, stop is set, or 60 s. */
static void *read_slowly(void *arg)
{
    struct slow_readers *r = arg;
    double start = seconds_now();
    char buf[512];
    bool live = true;

    while (live && !atomic_load(&r->stop) && seconds_now() - start < 60) {
        live = false;
        for (int i = 0; i < 20; i++) {
            ssize_t n;
            if (atomic_load(&r->ended[i]))
                continue;
            n = recv(r->fds[i], buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0)
                atomic_fetch_add(&r->got[i], (size_t)n);
            else if (n == 0 || (errno != EAGAIN && errno != EINTR))
                atomic_store(&r->ended[i], true);
            live |= !atomic_load(&r->ended[i]);
        }
        usleep(100000);
    }
    return NULL;
}

/* The places are held by clients that read their answers slowly and
 * steadily (libmicrohttpd's timeout, of silence, never comes): each is
 * shut down 20 s after it started, before the 30 s a request waits for a
 * place, so that another client is answered 200, not 503 (before, the
 * slow readers held the places for the 40 s and more their answers took);
 * read at once afterwards, their answers end short. 250 tags of long
 * names make /metrics some 500 KiB, more than the kernel's send buffer
 * takes off libmicrohttpd's hands (some 200 KiB, for such a window). */
START_TEST(test_http_slow_readers_are_cut_at_the_answers_deadline)
{
    static struct slow_readers r;
    char name[64], *whole;
    size_t size, started = 0, cut = 0;
    pthread_t t;
    int port, status;

    for (int i = 0; i < 250; i++) {
        snprintf(name, sizeof name, "%03d-a-tag-name-as-long-as-a-name-may-"
                 "be-sixty-three-bytes-xxxxx", i);
        tu_tag_create(name);
    }
    port = start_loopback();
    ck_assert_int_eq(request(port, "GET", "/metrics", &whole), 200);
    size = strlen(whole);
    free(whole);
    ck_assert_msg(size > 400000, "/metrics is %zu bytes", size);
    for (int i = 0; i < 20; i++)
        ck_assert_int_ge(r.fds[i] = connect_slow_reader(port), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, read_slowly, &r), 0);
    /* The 16 places taken (a cap of 10 s, not a measure). */
    for (double start = seconds_now();
         started < 16 && seconds_now() - start < 10; usleep(10000)) {
        started = 0;
        for (int i = 0; i < 20; i++)
            started += atomic_load(&r.got[i]) > 0;
    }
    ck_assert_uint_ge(started, 16);
    client_timeout_s = 40;
    status = status_of(port, "GET", "/metrics");
    client_timeout_s = 10;
    atomic_store(&r.stop, true);
    pthread_join(t, NULL);
    for (int i = 0; i < 20; i++) {
        cut += drain(r.fds[i], atomic_load(&r.got[i])) < size;
        close(r.fds[i]);
    }
    ck_assert_msg(status == 200, "a client after 16 slow readers: %d", status);
    ck_assert_msg(cut >= 16, "%zu slow readers cut short, not 16", cut);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* -- "memory" --------------------------------------------------------------------- */

static _Atomic unsigned hook_events;

static void count_event(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)ctx;
    (void)tag;
    (void)ptr;
    (void)size;
    hook_events++;
}

/* The client is another process: in this one, only the server's thread
 * works while the requests run, and it is the library's: hooks see
 * nothing, the pushed tag gains nothing. */
START_TEST(test_http_memory_is_the_librarys_own)
{
    ra_tag_t tag = tu_tag_create("pushed");
    ra_hooks_t hooks = {count_event, count_event, NULL};
    ra_tag_stats_t before, after;
    int port, status = -1, id;
    pid_t child;

    ck_assert_int_eq(ra_prof_start(1), 0);
    port = start_loopback();
    ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200); /* warm */
    before = tu_tag_stats(tag);
    /* No assertion until the hook is removed: a passing one allocates. */
    id = ra_hooks_install(&hooks);
    tu_tag_push(tag);
    child = fork();
    if (child == 0) {
        static const char *const targets[] = {
            "/metrics", "/debug/pprof/heap", "/debug/regionalloc/report",
            "/debug/regionalloc/report?format=json",
            "/debug/regionalloc/checkpoints", "/debug/regionalloc/",
            "/debug/regionalloc/history?tag=pushed",
            "/debug/regionalloc/profile?tag=pushed", "/nowhere"};
        for (int round = 0; round < 5; round++)
            for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
                if (status_of(port, "GET", targets[i]) == 0)
                    _exit(1);
        _exit(0);
    }
    if (child > 0)
        waitpid(child, &status, 0);
    tu_tag_pop(tag);
    ra_hooks_remove(id);
    ck_assert_int_ge(id, 0);
    ck_assert_int_gt(child, 0);
    ck_assert_int_eq(status, 0);
    ck_assert_uint_eq(hook_events, 0);
    after = tu_tag_stats(tag);
    ck_assert_uint_eq(after.nmalloc, before.nmalloc);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* libmicrohttpd, and gnutls with it, are not in a process that has not
 * served: they load at the first start, as the library's own work, which
 * hooks do not see and the tag the caller pushed does not gain. */
START_TEST(test_http_libmicrohttpd_loads_at_the_first_start_quietly)
{
    ra_tag_t tag = tu_tag_create("pushed");
    ra_hooks_t hooks = {count_event, count_event, NULL};
    ra_tag_stats_t before, after;
    int port, id;

    ck_assert_msg(!tu_object_mapped("libmicrohttpd") &&
                      !tu_object_mapped("libgnutls"),
                  "libmicrohttpd or gnutls mapped before any start");
    before = tu_tag_stats(tag);
    /* No assertion until the hook is removed: a passing one allocates. */
    id = ra_hooks_install(&hooks);
    tu_tag_push(tag);
    port = ra_http_start("127.0.0.1:0");
    tu_tag_pop(tag);
    ra_hooks_remove(id);
    ck_assert_int_ge(id, 0);
    ck_assert_int_gt(port, 0);
    ck_assert_uint_eq(hook_events, 0);
    after = tu_tag_stats(tag);
    ck_assert_uint_eq(after.nmalloc, before.nmalloc);
    ck_assert(tu_object_mapped("libmicrohttpd"));
    ck_assert(tu_object_mapped("libgnutls"));
    ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* -- "fork" ----------------------------------------------------------------------- */

static _Atomic int hammer_port;
static atomic_bool hammer_stop;

static void *hammer(void *arg)
{
    (void)arg;
    while (!hammer_stop)
        (void)status_of(hammer_port, "GET", "/metrics");
    return NULL;
}

/* A child forked while requests are served has no server, holds no port,
 * does not deadlock, and may start its own. */
START_TEST(test_http_forked_child_has_no_server)
{
    int port = start_loopback(), status = -1, ready[2];
    pthread_t t;
    pid_t child;
    char byte;

    hammer_port = port;
    ck_assert_int_eq(pthread_create(&t, NULL, hammer, NULL), 0);
    for (int i = 0; i < 20; i++) {
        child = fork();
        if (child == 0) {
            char *report = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&report, &len);
            int mine;
            if (ra_http_stop() != -1 || errno != EINVAL)
                _exit(2);
            if (f == NULL || ra_report(f, RA_FORMAT_TEXT) != 0)
                _exit(3);
            fclose(f);
            free(report);
            mine = ra_http_start("127.0.0.1:0");
            if (mine <= 0 || mine == port ||
                status_of(mine, "GET", "/metrics") != 200 ||
                ra_http_stop() != 0)
                _exit(4);
            _exit(0);
        }
        ck_assert_int_gt(child, 0);
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "child %d: status %#x", i, status);
    }
    hammer_stop = true;
    pthread_join(t, NULL);
    /* A sleeping child does not keep the parent's port. The parent waits
     * until the child runs: until then the child's copy of the listening
     * socket, which the library closes in the child's fork handler, still
     * holds the port (a loaded machine may schedule the parent first). */
    ck_assert_int_eq(pipe(ready), 0);
    child = fork();
    if (child == 0) {
        close(ready[0]);
        if (write(ready[1], "r", 1) != 1)
            _exit(1);
        sleep(30);
        _exit(0);
    }
    close(ready[1]);
    ck_assert_int_eq(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    ck_assert_int_eq(ra_http_stop(), 0);
    {
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port)};
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        status = bind(fd, (struct sockaddr *)&a, sizeof a);
        close(fd);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    ck_assert_int_eq(status, 0);
}
END_TEST

/* The library reads /proc/self/statm for a checkpoint while it holds the
 * checkpoints' lock, whose fork handler comes right after the server's.
 * The program's own open(2) comes first for the library's calls: this one
 * can hold such a checkpoint there, so that a fork waits in its handlers
 * with the server's lock held, as long as the test likes. */
static atomic_int statm_hold; /* 1: the next open of statm waits in 2 */

static int open_as_libc(const char *path, int flags, va_list ap)
{
    int mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? va_arg(ap, int) : 0;
    int waiting = 1;

    if (strcmp(path, "/proc/self/statm") == 0 &&
        atomic_compare_exchange_strong(&statm_hold, &waiting, 2))
        while (atomic_load(&statm_hold) == 2)
            usleep(1000);
    return openat(AT_FDCWD, path, flags, mode);
}

int open(const char *path, int flags, ...);

int open(const char *path, int flags, ...)
{
    va_list ap;
    int fd;

    va_start(ap, flags);
    fd = open_as_libc(path, flags, ap);
    va_end(ap);
    return fd;
}

/* The same, for a library built with 64-bit file offsets. */
int open64(const char *path, int flags, ...) __attribute__((alias("open")));

static pid_t forker_tid;
static atomic_bool fork_armed, forking, in_handler;
static _Atomic int nested_status = -1;

/* Registered after the library's handlers, so run before them. */
static void mark_forking(void)
{
    if (atomic_load(&fork_armed))
        atomic_store(&forking, true);
}

/* glibc's tst-mallocfork2: a signal handler that forks. */
static void fork_in_handler(int sig)
{
    int status;
    pid_t child;

    (void)sig;
    atomic_store(&in_handler, true);
    child = fork();
    if (child == 0)
        _exit(0);
    if (child > 0 && waitpid(child, &status, 0) == child)
        nested_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void *checkpoint_held_in_statm(void *arg)
{
    (void)arg;
    (void)ra_checkpoint("held");
    return NULL;
}

/* Whether the forking thread sleeps (on a lock: nothing else it does
 * between its first fork handler and the checkpoints' lock sleeps). */
static bool forker_sleeps(void)
{
    char path[64], stat[512];
    const char *after;
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)forker_tid);
    f = fopen(path, "r");
    if (f == NULL)
        return false;
    n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    after = strrchr(stat, ')');
    return after != NULL && after[1] == ' ' && after[2] == 'S';
}

/* Once the fork waits in its handlers, signals the forking thread, whose
 * handler forks; then lets the checkpoint go on. */
static void *signal_the_forker(void *arg)
{
    pthread_t forker = *(pthread_t *)arg;

    while (!atomic_load(&forking) || !forker_sleeps())
        usleep(1000);
    pthread_kill(forker, SIGUSR1);
    while (!atomic_load(&in_handler))
        usleep(1000);
    usleep(50000); /* the nested fork on its way to the held lock */
    atomic_store(&statm_hold, 0);
    return NULL;
}

/* A fork inside a fork: a signal handler that forks while a fork runs its
 * handlers, having taken the server's lock (glibc's tst-mallocfork2). The
 * nested fork must not wait for that lock, which its own thread holds: it
 * goes through once the lock that the outer fork waits for is free, and
 * both forks end. (The nested fork would still wait forever for a lock the
 * outer one had taken further on, which this test stays clear of.) */
START_TEST(test_http_fork_in_a_signal_handler_during_a_fork)
{
    struct sigaction on_usr1 = {.sa_handler = fork_in_handler}, old;
    int port = start_loopback(), status = -1;
    pthread_t self = pthread_self(), checkpointer, signaller;
    pid_t child;

    forker_tid = (pid_t)syscall(SYS_gettid);
    ck_assert_int_eq(pthread_atfork(mark_forking, NULL, NULL), 0);
    ck_assert_int_eq(sigaction(SIGUSR1, &on_usr1, &old), 0);
    atomic_store(&statm_hold, 1);
    ck_assert_int_eq(
        pthread_create(&checkpointer, NULL, checkpoint_held_in_statm, NULL),
        0);
    while (atomic_load(&statm_hold) != 2)
        usleep(1000);
    atomic_store(&fork_armed, true);
    ck_assert_int_eq(
        pthread_create(&signaller, NULL, signal_the_forker, &self), 0);
    child = fork();
    if (child == 0)
        _exit(0);
    atomic_store(&fork_armed, false);
    ck_assert_int_gt(child, 0);
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    pthread_join(signaller, NULL);
    pthread_join(checkpointer, NULL);
    sigaction(SIGUSR1, &old, NULL);
    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(nested_status, 0);
    /* The lock is free again, and the server whole. */
    ck_assert_int_eq(status_of(port, "GET", "/metrics"), 200);
    ck_assert_int_eq(ra_http_stop(), 0);
}
END_TEST

/* -- "environment" -------------------------------------------------------------- */

static int env_port;

static int child_served_from_the_environment(void)
{
    char *answer;

    /* Started at load, before main. */
    TU_REQUIRE(request(env_port, "GET", "/metrics", &answer) == 200);
    TU_REQUIRE(strstr(answer, "regionalloc_untagged_allocated_bytes") != NULL);
    free(answer);
    errno = 0;
    TU_REQUIRE(ra_http_start("127.0.0.1:0") == -1 && errno == EBUSY);
    return 0;
}

static int child_not_loopback(void)
{
    errno = 0;
    /* No server was started: a new one may be. */
    TU_REQUIRE(ra_http_stop() == -1 && errno == EINVAL);
    return 0;
}

/* libmicrohttpd cannot be loaded: REGIONALLOC_HTTP's start at load failed,
 * and every start fails as in a build without the server; the rest of the
 * library works. */
static int child_cannot_load(void)
{
    ra_tag_t tag = ra_tag_create("after");
    void *p;

    for (int i = 0; i < 2; i++) {
        errno = 0;
        TU_REQUIRE(ra_http_start("127.0.0.1:0") == -1 && errno == ENOTSUP);
    }
    errno = 0;
    TU_REQUIRE(ra_http_stop() == -1 && errno == EINVAL);
    TU_REQUIRE(!tu_object_mapped("libmicrohttpd"));
    TU_REQUIRE(tag != RA_TAG_NONE);
    p = ra_malloc_tag(tag, 100);
    TU_REQUIRE(p != NULL && ra_tag_of(p) == tag);
    ra_free(p);
    return 0;
}

static const struct tu_child children[] = {
    {"served", child_served_from_the_environment},
    {"not-loopback", child_not_loopback},
    {"cannot-load", child_cannot_load},
    {NULL, NULL},
};

START_TEST(test_http_started_by_the_environment)
{
    char var[64], port_var[32], err[2048];
    const char *env[] = {var, port_var, NULL};

    env_port = free_port();
    snprintf(var, sizeof var, "REGIONALLOC_HTTP=127.0.0.1:%d", env_port);
    snprintf(port_var, sizeof port_var, "TEST_HTTP_PORT=%d", env_port);
    ck_assert_msg(tu_exec_self(env, "served", err, sizeof err) == 0, "%s",
                  err);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
}
END_TEST

START_TEST(test_http_environment_refuses_remote_with_one_line)
{
    static const char *const env[] = {"REGIONALLOC_HTTP=0.0.0.0:0", NULL};
    char err[2048];

    ck_assert_int_eq(tu_exec_self(env, "not-loopback", err, sizeof err), 0);
    ck_assert_msg(tu_count_lines(err) == 1 &&
                      strstr(err, "REGIONALLOC_HTTP_ALLOW_REMOTE") != NULL,
                  "stderr: %s", err);
}
END_TEST

/* One line on stderr, for REGIONALLOC_HTTP's start and the three that
 * follow: the loader's, naming the library. */
START_TEST(test_http_a_library_that_cannot_load_is_one_line)
{
    static const char *const env[] = {"REGIONALLOC_HTTP=127.0.0.1:0", NULL};
    char err[2048];

    ck_assert_msg(tu_exec_self_with_broken(RA_MHD_SONAME, env, "cannot-load",
                                           err, sizeof err) == 0,
                  "%s", err);
    ck_assert_msg(tu_count_lines(err) == 1 &&
                      strstr(err, "regionalloc: cannot load " RA_MHD_SONAME
                                  ", which the HTTP endpoints need: ") !=
                          NULL,
                  "stderr: %s", err);
}
END_TEST

static TCase *hostile_clients_case(void)
{
    TCase *tc = tcase_create("hostile clients");

    tcase_add_test(tc, test_http_survives_garbage_and_oversized_requests);
    tcase_add_test(tc, test_http_malformed_requests_are_answered_400);
    tcase_add_test(tc, test_http_survives_many_and_stalled_clients);
    tcase_add_test(tc,
                   test_http_requests_libmicrohttpd_leaves_unanswered_are_answered);
    tcase_add_test(tc, test_http_a_flood_after_a_refused_line_stalls_no_one);
    tcase_add_test(tc, test_http_clients_stalled_in_their_headers_leave_room);
    tcase_add_test(tc, test_http_a_slow_head_is_timed_by_silence_then_bounded);
    tcase_add_test(tc, test_http_slow_bodies_hold_no_place);
    tcase_add_test(tc, test_http_slow_readers_are_cut_at_the_answers_deadline);
    tcase_set_timeout(tc, 60);
    return tc;
}

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc;

    tc = tcase_create("start and stop");
    tcase_add_test(tc, test_http_start_serves_and_stop_stops);
    tcase_add_test(tc, test_http_start_rejects_bad_addresses);
    tcase_add_test(tc, test_http_start_refuses_remote_addresses);
    tcase_add_test(tc, test_http_remote_allowed_when_asked);
    tcase_add_test(tc, test_http_start_on_a_taken_port_fails);
    tcase_add_test(tc, test_http_not_supported_in_pass_through_mode);
    suite_add_tcase(s, tc);

    tc = tcase_create("endpoints");
    tcase_add_test(tc, test_http_endpoints_answer);
    tcase_add_test(tc, test_http_detail_refreshes_once);
    tcase_add_test(tc, test_http_bad_paths_methods_and_arguments);
    tcase_add_test(tc, test_http_purge_when_allowed);
    tcase_add_test(tc, test_http_arguments_without_values_are_400);
    tcase_add_test(tc, test_http_profile_of_a_subtree);
    tcase_add_test(tc, test_http_dashboard_of_the_tags);
    tcase_add_test(tc, test_http_history_of_samples);
    tcase_add_test(tc, test_http_sites_of_a_tag);
    suite_add_tcase(s, tc);

    tc = tcase_create("browsers");
    tcase_add_test(tc, test_http_foreign_host_is_refused_403);
    tcase_add_test(tc, test_http_foreign_host_allowed_with_allow_remote);
    tcase_add_test(tc, test_http_purge_needs_the_write_header);
    suite_add_tcase(s, tc);

    suite_add_tcase(s, hostile_clients_case());

    tc = tcase_create("memory");
    tcase_add_test(tc, test_http_memory_is_the_librarys_own);
    tcase_add_test(tc, test_http_libmicrohttpd_loads_at_the_first_start_quietly);
    suite_add_tcase(s, tc);

    tc = tcase_create("fork");
    tcase_add_test(tc, test_http_forked_child_has_no_server);
    tcase_set_timeout(tc, 60);
    /* ThreadSanitizer cannot follow a fork among threads. */
    tcase_set_tags(tc, "multithreaded-fork");
    suite_add_tcase(s, tc);

    tc = tcase_create("fork inside a fork");
    tcase_add_test(tc, test_http_fork_in_a_signal_handler_during_a_fork);
    /* A hang, before the fix: not worth a minute. */
    tcase_set_timeout(tc, 20);
    tcase_set_tags(tc, "multithreaded-fork");
    suite_add_tcase(s, tc);

    tc = tcase_create("environment");
    tcase_add_test(tc, test_http_started_by_the_environment);
    tcase_add_test(tc, test_http_environment_refuses_remote_with_one_line);
    tcase_add_test(tc, test_http_a_library_that_cannot_load_is_one_line);
    /* Exact about stderr, which a sanitizer's address space changes (the
     * reservation is made smaller, and says so). */
    tcase_set_tags(tc, "exact-stderr");
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    const char *port = getenv("TEST_HTTP_PORT");

    if (port != NULL)
        env_port = atoi(port);
    tu_child_main(argc, argv, children);
    return tu_run_suite(http_suite());
}
