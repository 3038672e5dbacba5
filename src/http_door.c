/* Floor: services. The HTTP server's front door: a thread of the library's
 * that accepts connections, reads each one's request line without taking it
 * off the socket (MSG_PEEK), answers 400 to a line that libmicrohttpd would
 * drop with no answer at all (one without a space: "garbage", "GET"), and
 * hands every other connection to libmicrohttpd, which reads it from the
 * start. It allocates nothing: its connections sit in a fixed table. */
#include "output.h"

#ifdef RA_HTTP

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Connections that have not sent a whole request line yet; more wait in
 * the listening socket's backlog. */
#define WAITING_MAX 16
/* A request line longer than this goes to libmicrohttpd, which answers it
 * (414) as it answers a long one. */
#define LINE_MAX 4096

struct waiting {
    int fd;
    uint64_t deadline_ns;
    struct sockaddr_storage addr;
    socklen_t addrlen;
};

static struct door {
    struct MHD_Daemon *daemon;
    int listen_fd;
    int wake[2]; /* a byte in wake[1] stops the thread */
    unsigned timeout_s;
    pthread_t thread;
    unsigned nwaiting;
    struct waiting waiting[WAITING_MAX];
} door = {NULL, -1, {-1, -1}, 0, 0, 0, {{0}}};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Closes a connection that sent what is no request: an answer first, then
 * the end of our side, and what the client sent is read off before the
 * close, so that the kernel ends with a FIN, not a reset that could
 * destroy the answer before the client reads it. */
static void refuse(int fd)
{
    static const char answer[] =
        "HTTP/1.1 400 Bad Request\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "Content-Length: 29\r\n"
        "Connection: close\r\n\r\n"
        "not an HTTP/1.x request line\n";
    char sink[512];

    (void)send(fd, answer, sizeof answer - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0)
        ;
    close(fd);
}

static void drop(unsigned i)
{
    door.waiting[i] = door.waiting[--door.nwaiting];
}

static void hand_over(unsigned i)
{
    struct waiting *w = &door.waiting[i];
    int one = 1;

    setsockopt(w->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
    /* Closes the socket itself when it cannot take it. */
    (void)MHD_add_connection(door.daemon, w->fd, (struct sockaddr *)&w->addr,
                             w->addrlen);
    drop(i);
}

/* What came on waiting connection i (revents from poll). */
static void look(unsigned i, short revents)
{
    struct waiting *w = &door.waiting[i];
    char line[LINE_MAX];
    ssize_t n = recv(w->fd, line, sizeof line, MSG_PEEK | MSG_DONTWAIT);
    const char *end;
    int more;

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) { /* gone, having sent nothing */
        close(w->fd);
        drop(i);
        return;
    }
    end = memchr(line, '\n', (size_t)n);
    if (end == NULL && (size_t)n == sizeof line) {
        hand_over(i);
        return;
    }
    if (end == NULL && (revents & (POLLRDHUP | POLLHUP)) == 0) {
        /* Half a line: poll again only once more has come. */
        more = (int)n + 1;
        setsockopt(w->fd, SOL_SOCKET, SO_RCVLOWAT, &more, sizeof more);
        return;
    }
    if (end == NULL || memchr(line, ' ', (size_t)(end - line)) == NULL) {
        refuse(w->fd);
        drop(i);
        return;
    }
    hand_over(i);
}

static void accept_new(void)
{
    while (door.nwaiting < WAITING_MAX) {
        struct waiting *w = &door.waiting[door.nwaiting];
        w->addrlen = sizeof w->addr;
        w->fd = accept4(door.listen_fd, (struct sockaddr *)&w->addr,
                        &w->addrlen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (w->fd < 0)
            return;
        w->deadline_ns = now_ns() + (uint64_t)door.timeout_s * 1000000000u;
        door.nwaiting++;
    }
}

/* Closes the connections that stayed silent past their deadline, and
 * returns poll's timeout until the next one (ms, -1: none). */
static int expire(void)
{
    uint64_t now = now_ns(), next = UINT64_MAX;

    for (unsigned i = door.nwaiting; i-- > 0;) {
        if (door.waiting[i].deadline_ns <= now) {
            close(door.waiting[i].fd);
            drop(i);
        } else if (door.waiting[i].deadline_ns < next) {
            next = door.waiting[i].deadline_ns;
        }
    }
    return next == UINT64_MAX ? -1 : (int)((next - now) / 1000000u + 1);
}

static void *run_door(void *arg)
{
    struct pollfd fds[WAITING_MAX + 2];

    (void)arg;
    for (;;) {
        int timeout = expire();
        unsigned n = door.nwaiting;
        fds[0] = (struct pollfd){door.wake[0], POLLIN, 0};
        fds[1] = (struct pollfd){door.listen_fd,
                                 n < WAITING_MAX ? POLLIN : 0, 0};
        for (unsigned i = 0; i < n; i++)
            fds[i + 2] = (struct pollfd){door.waiting[i].fd,
                                         POLLIN | POLLRDHUP, 0};
        if (poll(fds, n + 2, timeout) < 0 && errno != EINTR)
            break;
        if (fds[0].revents != 0)
            break;
        /* From the end: drop() moves the last connection into the gap. */
        for (unsigned i = n; i-- > 0;)
            if (fds[i + 2].revents != 0)
                look(i, fds[i + 2].revents);
        if (fds[1].revents != 0)
            accept_new();
    }
    return NULL;
}

bool ra__http_door_open(int listen_fd, struct MHD_Daemon *daemon,
                        unsigned timeout_s)
{
    door.daemon = daemon;
    door.listen_fd = listen_fd;
    door.timeout_s = timeout_s;
    door.nwaiting = 0;
    if (pipe2(door.wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return true;
    if (ra__background_start(run_door, NULL, &door.thread)) {
        close(door.wake[0]);
        close(door.wake[1]);
        return true;
    }
    return false;
}

static void close_all(void)
{
    while (door.nwaiting > 0)
        close(door.waiting[--door.nwaiting].fd);
    close(door.wake[0]);
    close(door.wake[1]);
    door.wake[0] = door.wake[1] = -1;
    door.daemon = NULL;
}

void ra__http_door_close(void)
{
    ssize_t written = write(door.wake[1], "", 1);

    (void)written; /* the pipe is empty: the byte fits */
    pthread_join(door.thread, NULL);
    close_all();
}

void ra__http_door_forget(void)
{
    if (door.daemon != NULL)
        close_all();
}

#endif
