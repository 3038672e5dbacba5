/* What a Prometheus scrape of /metrics costs a process with 256 tags: one
 * GET over loopback, from a client thread of the same process, against
 * ra_report(RA_FORMAT_PROMETHEUS) into memory, which is the work the
 * server does for it (the baseline). One op is one scrape. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regionalloc.h>

#include "benchutil.h"

#define NTAGS 256
#define SCRAPES 20

static int port;

static double report_in_memory(void *arg)
{
    double t0 = bench_now_ns();

    (void)arg;
    for (int i = 0; i < SCRAPES; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (f == NULL || ra_report(f, RA_FORMAT_PROMETHEUS) != 0)
            bench_die("ra_report");
        fclose(f);
        free(buf);
    }
    return (bench_now_ns() - t0) / 1e6 / SCRAPES;
}

/* One GET /metrics, read to the end; the bytes received. */
static size_t scrape_once(void)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Connection: close\r\n\r\n";
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    char buf[65536];
    size_t got = 0;
    ssize_t n;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        send(fd, req, sizeof req - 1, 0) != (ssize_t)(sizeof req - 1))
        bench_die("connect/send to the server");
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0)
        got += (size_t)n;
    close(fd);
    return got;
}

static double scrape_over_http(void *arg)
{
    double t0 = bench_now_ns();

    (void)arg;
    for (int i = 0; i < SCRAPES; i++)
        if (scrape_once() < 1000)
            bench_die("a short answer from /metrics");
    return (bench_now_ns() - t0) / 1e6 / SCRAPES;
}

int main(void)
{
    struct bench_contender c[] = {
        {"ra_report(prometheus) in memory (baseline)", report_in_memory,
         NULL, NULL},
        {"GET /metrics over loopback", scrape_over_http, NULL, NULL},
    };

    if (!ra_enabled())
        bench_die("pass-through mode: no tags to report");
    for (int i = 0; i < NTAGS; i++) {
        char name[32];
        ra_tag_t tag;
        snprintf(name, sizeof name, "tag-%03d", i);
        if ((tag = ra_tag_create(name)) == RA_TAG_NONE ||
            ra_malloc_tag(tag, 1000 + (size_t)i * 100) == NULL)
            bench_die("ra_tag_create");
    }
    port = ra_http_start("127.0.0.1:0");
    if (port < 0) {
        bench_row_missing("/metrics with 256 tags", c[1].name,
                          "no HTTP endpoints in this build");
        return 0;
    }
    bench_compare("/metrics with 256 tags", "ms/scrape", c, 2, 0);
    bench_note("a /metrics page with 256 tags is %zu bytes", scrape_once());
    ra_http_stop();
    return 0;
}
