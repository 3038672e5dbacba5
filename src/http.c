/* Floor: services. The HTTP server's life (ra_http_start, ra_http_stop,
 * REGIONALLOC_HTTP, the fork): /metrics for Prometheus, /debug/pprof/heap
 * for continuous profilers, the reports, and an opt-in purge
 * (http_routes.c, http_bodies.c), served by libmicrohttpd (loaded at the
 * first start: load_http.c) from a thread of its own behind the front door
 * (http_door.c, a thread of the library's that accepts the connections and
 * waits for each request's head), both with every signal blocked, as is
 * the dashboard's sampler (history.c). Its thread is started through the
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
#include "http.h"
#include "tags.h"
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

/* libmicrohttpd's handler of a request (http_routes.c), marked as the
 * server's thread's work. */
static enum MHD_Result answer(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
    (void)cls;
    (void)upload_data;
    (void)upload_data_size;
    (void)req_cls;
    tls_answering = true;
    return ra__http_answer(c, url, method, version);
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
