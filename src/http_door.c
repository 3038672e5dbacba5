/* Floor: services. The HTTP server's front door: a thread of the library's
 * that accepts connections, reads each one's request head (line and
 * headers) without taking it off the socket (MSG_PEEK), answers itself
 * what libmicrohttpd would drop with no answer at all, and hands each whole
 * request to libmicrohttpd, which reads it from the start, once one of its
 * places is free; and ends the connections libmicrohttpd holds past their
 * deadline. No client holds the door, or a place, for another: each
 * connection is looked at only when it has sent more, and every one has
 * deadlines. It allocates nothing: its connections sit in fixed tables. */
#include "output.h"

#ifdef RA_HTTP

#include <errno.h>
#include <fcntl.h>
#include "load.h"
#include "tags.h"
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Connections the door holds at once (more wait in the listening socket's
 * backlog): clients still sending their heads, whole requests waiting for
 * a place, and refused ones being closed. More than libmicrohttpd's places,
 * so that slow clients cannot keep a whole request from reaching it. */
#define DOOR_MAX 64
/* A head longer than this goes to libmicrohttpd, which answers it (414 or
 * 431) as it answers a long one: its connection memory is as large. */
#define HEAD_MAX 32768
/* The whole head must have come, and a place have freed for it, within
 * this long of the accept, however steadily the client sends. */
#define HEAD_DEADLINE_NS (30 * NS_PER_S)
/* A connection libmicrohttpd has started has this long to be answered and
 * its answer read, after which the door shuts it down (libmicrohttpd then
 * closes it). libmicrohttpd's own timeout is of silence, which a client
 * that reads its answer a little at a time never lets come. Shorter than
 * the head's: a request that waits for a place gets one before its own
 * deadline, however the places were held. */
#define ANSWER_DEADLINE_NS (20 * NS_PER_S)
/* Connections of libmicrohttpd's the door times: more than it ever holds
 * (its limit is twice the places). */
#define STARTED_MAX 64
/* After an answer of the door's, the client has this long, and this many
 * bytes of whatever it still sends, to read the answer and close. */
#define LINGER_NS (2 * NS_PER_S)
#define LINGER_BYTES 65536
#define NS_PER_S 1000000000ull

enum stage {
    HEAD,  /* its head is coming in */
    WHOLE, /* its head is in: it waits for one of libmicrohttpd's places */
    LINGER /* answered by the door: what it still sends is read off */
};

struct waiting {
    int fd;
    enum stage stage;
    size_t seen; /* bytes peeked (HEAD), or read off (LINGER) */
    uint64_t accepted_ns, deadline_ns;
    struct sockaddr_storage addr;
    socklen_t addrlen;
};

/* A connection of libmicrohttpd's, from the notice of its start to that
 * of its close, and when it must be done by. */
struct started {
    int fd;
    uint64_t deadline_ns; /* UINT64_MAX once shut down */
};

static struct door {
    struct MHD_Daemon *daemon;
    int listen_fd;
    /* A byte in wake[1] wakes the thread: to stop (stopping set), or when
     * libmicrohttpd closed a connection. Open from the first start to the
     * end of the process: libmicrohttpd's thread may write to it until it
     * is joined, after the door's. */
    int wake[2];
    atomic_bool stopping;
    uint64_t silence_ns;
    unsigned places;  /* libmicrohttpd's connections at most */
    unsigned handed;  /* connections handed over, by the door's thread */
    atomic_uint left; /* of those, closed (libmicrohttpd's thread) */
    pthread_t thread;
    unsigned n;
    struct waiting waiting[DOOR_MAX];
    char buf[HEAD_MAX]; /* the door thread's: a head peeked, bytes read off */
    /* libmicrohttpd's connections, under started_lock, which the door
     * holds while it shuts one down: libmicrohttpd tells of a close before
     * it closes the socket, so an fd in the table is still its socket, not
     * a number reused by whatever the process opened since. */
    struct ra__mutex started_lock;
    unsigned nstarted;
    struct started started[STARTED_MAX];
} door = {.listen_fd = -1,
          .wake = {-1, -1},
          .started_lock = RA__MUTEX_INIT(RA__RANK_DOOR)};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static void drop(unsigned i)
{
    door.waiting[i] = door.waiting[--door.n];
}

static void close_waiting(unsigned i)
{
    close(door.waiting[i].fd);
    drop(i);
}

static void set_lowat(int fd, int bytes)
{
    setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes);
}

/* The door's own answers, each closing its connection. */
enum refusal { BAD_REQUEST, TIMEOUT, NO_PLACE };

static const struct {
    const char *status, *body;
} refusals[] = {
    [BAD_REQUEST] = {"400 Bad Request", "not an HTTP/1.x request\n"},
    [TIMEOUT] = {"408 Request Timeout",
                 "the request's head was too slow to come\n"},
    [NO_PLACE] = {"503 Service Unavailable",
                  "the server's connections stayed busy; try again\n"},
};

/* Answers connection i and lingers: the end of our side goes first, and
 * what the client still sends is read off before the close (run_door),
 * so that the kernel ends with a FIN, not a reset that could destroy the
 * answer before the client reads it; but only for so long, and so many
 * bytes, that a client who never stops sending cannot keep the slot. */
static void refuse(unsigned i, enum refusal why)
{
    struct waiting *w = &door.waiting[i];
    char answer[256];
    int len = snprintf(answer, sizeof answer,
                       "HTTP/1.1 %s\r\n"
                       "Content-Type: text/plain; charset=utf-8\r\n"
                       "Content-Length: %zu\r\n"
                       "%s"
                       "Connection: close\r\n\r\n%s",
                       refusals[why].status, strlen(refusals[why].body),
                       why == NO_PLACE ? "Retry-After: 1\r\n" : "",
                       refusals[why].body);

    (void)send(w->fd, answer, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(w->fd, SHUT_WR);
    set_lowat(w->fd, 1);
    w->stage = LINGER;
    w->seen = 0;
    w->deadline_ns = now_ns() + LINGER_NS;
}

/* Reads off one buffer of what lingering connection i sent; closes it
 * when the client is done or has sent too much. */
static void read_off(unsigned i)
{
    struct waiting *w = &door.waiting[i];
    ssize_t n = recv(w->fd, door.buf, sizeof door.buf, MSG_DONTWAIT);

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0 || (w->seen += (size_t)n) > LINGER_BYTES)
        close_waiting(i);
}

/* Gives connection i to libmicrohttpd, which closes it itself when it
 * cannot take it. */
static void hand_over(unsigned i)
{
    struct waiting *w = &door.waiting[i];

    set_lowat(w->fd, 1);
    if (RA__MHD(add_connection)(door.daemon, w->fd,
                                (struct sockaddr *)&w->addr,
                                w->addrlen) == MHD_YES)
        door.handed++;
    drop(i);
}

/* Hands the whole requests over, the oldest first, while libmicrohttpd has
 * places. */
static void admit(void)
{
    for (;;) {
        unsigned left = atomic_load_explicit(&door.left, memory_order_acquire);
        unsigned oldest = DOOR_MAX;

        if (door.handed - left >= door.places)
            return;
        for (unsigned i = 0; i < door.n; i++)
            if (door.waiting[i].stage == WHOLE &&
                (oldest == DOOR_MAX || door.waiting[i].accepted_ns <
                                           door.waiting[oldest].accepted_ns))
                oldest = i;
        if (oldest == DOOR_MAX)
            return;
        hand_over(oldest);
    }
}

/* -- what a head says --------------------------------------------------------- */

enum verdict {
    MORE,   /* not all there yet */
    READY,  /* a whole request: to libmicrohttpd when a place is free */
    ANSWER, /* libmicrohttpd answers it at once (a bad version, too long) */
    REFUSE  /* libmicrohttpd would close it without a word: 400 here */
};

/* Whether the header lines from at on end with an empty one, as
 * libmicrohttpd reads lines: ended by CRLF or a bare LF. */
static bool head_ends(const char *at, const char *end)
{
    while (at < end) {
        if (*at == '\n' || (*at == '\r' && at + 1 < end && at[1] == '\n'))
            return true;
        at = memchr(at, '\n', (size_t)(end - at));
        if (at == NULL)
            return false;
        at++;
    }
    return false;
}

/* The n bytes a client sent first; full: as many as the door looks at;
 * ended: the client will send no more. Empty lines before the request line
 * are ignored (RFC 9112, 2.2), as libmicrohttpd ignores them. */
static enum verdict judge(const char *p, size_t n, bool full, bool ended)
{
    const char *end = p + n, *line = p, *nl;
    size_t len;

    while (line < end && (*line == '\n' || (*line == '\r' && line + 1 < end &&
                                            line[1] == '\n')))
        line += *line == '\n' ? 1 : 2;
    nl = memchr(line, '\n', (size_t)(end - line));
    if (nl == NULL)
        /* Past the door's look, a line that is not only empty lines is
         * libmicrohttpd's to refuse (414). */
        return ended || (full && line == end) ? REFUSE
               : full                         ? ANSWER
                                              : MORE;
    len = (size_t)(nl - line) - (nl[-1] == '\r');
    /* No method (a space first) or no space at all: libmicrohttpd closes
     * the connection without an answer. */
    if (line[0] == ' ' || memchr(line, ' ', len) == NULL)
        return REFUSE;
    /* A line that does not end in HTTP/1.x is answered at once (400 or
     * 505), before any header. */
    if (len < 9 || memcmp(line + len - 9, " HTTP/1.", 8) != 0 ||
        line[len - 1] < '0' || line[len - 1] > '9')
        return ANSWER;
    if (head_ends(nl + 1, end))
        return READY;
    return ended ? REFUSE : full ? ANSWER : MORE;
}

/* What came on connection i, still sending its head (revents from poll). */
static void look(unsigned i, short revents)
{
    struct waiting *w = &door.waiting[i];
    ssize_t n = recv(w->fd, door.buf, sizeof door.buf, MSG_PEEK | MSG_DONTWAIT);
    bool ended = (revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) { /* gone, having sent nothing */
        close_waiting(i);
        return;
    }
    switch (judge(door.buf, (size_t)n, (size_t)n == sizeof door.buf, ended)) {
    case MORE:
        /* Not silent: the silence starts again. Poll again only once more
         * has come (poll would report the same bytes again and again). */
        if ((size_t)n > w->seen)
            w->deadline_ns = now_ns() + door.silence_ns;
        if (w->deadline_ns > w->accepted_ns + HEAD_DEADLINE_NS)
            w->deadline_ns = w->accepted_ns + HEAD_DEADLINE_NS;
        w->seen = (size_t)n;
        set_lowat(w->fd, (int)n + 1);
        return;
    case READY:
    case ANSWER:
        w->stage = WHOLE;
        w->deadline_ns = w->accepted_ns + HEAD_DEADLINE_NS;
        return;
    case REFUSE:
        refuse(i, BAD_REQUEST);
        return;
    }
}

/* -- the thread ------------------------------------------------------------------ */

static void accept_new(void)
{
    while (door.n < DOOR_MAX) {
        struct waiting *w = &door.waiting[door.n];
        w->addrlen = sizeof w->addr;
        w->fd = accept4(door.listen_fd, (struct sockaddr *)&w->addr,
                        &w->addrlen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (w->fd < 0)
            return;
        w->stage = HEAD;
        w->seen = 0;
        w->accepted_ns = now_ns();
        w->deadline_ns = w->accepted_ns + door.silence_ns;
        door.n++;
    }
}

/* Shuts down the connections libmicrohttpd has held past their deadline:
 * it sees their end at once and closes them. Returns the next deadline
 * (UINT64_MAX: none). */
static uint64_t cut_overdue(uint64_t now)
{
    uint64_t next = UINT64_MAX;

    ra__lock(&door.started_lock);
    for (unsigned i = 0; i < door.nstarted; i++) {
        struct started *c = &door.started[i];
        if (c->deadline_ns <= now) {
            shutdown(c->fd, SHUT_RDWR);
            c->deadline_ns = UINT64_MAX;
        } else if (c->deadline_ns < next) {
            next = c->deadline_ns;
        }
    }
    ra__unlock(&door.started_lock);
    return next;
}

/* Acts on the deadlines that have passed: a head too slow is answered 408,
 * a whole request that found no place 503, a lingering connection closed,
 * one of libmicrohttpd's shut down. Returns poll's timeout until the next
 * one (ms, -1: none). */
static int expire(void)
{
    uint64_t now = now_ns(), next = cut_overdue(now);

    for (unsigned i = door.n; i-- > 0;) {
        struct waiting *w = &door.waiting[i];
        if (w->deadline_ns > now) {
            if (w->deadline_ns < next)
                next = w->deadline_ns;
        } else if (w->stage == LINGER) {
            close_waiting(i);
        } else {
            refuse(i, w->stage == HEAD ? TIMEOUT : NO_PLACE);
            if (w->deadline_ns < next)
                next = w->deadline_ns;
        }
    }
    return next == UINT64_MAX ? -1 : (int)((next - now) / 1000000u + 1);
}

/* What poll watches on a connection: a head's or a lingering connection's
 * bytes; for a whole request, nothing but its errors (a client that has
 * said all and shut its side still waits for the answer). */
static short events_of(const struct waiting *w)
{
    return w->stage == WHOLE ? 0 : POLLIN | POLLRDHUP;
}

static void serve(const struct pollfd *fds, unsigned n)
{
    /* From the end: drop() moves the last connection into the gap. */
    for (unsigned i = n; i-- > 0;) {
        short revents = fds[i].revents;
        if (revents == 0)
            continue;
        if (door.waiting[i].stage == HEAD)
            look(i, revents);
        else if (door.waiting[i].stage == LINGER)
            read_off(i);
        else
            close_waiting(i); /* gone before its answer */
    }
}

static void *run_door(void *arg)
{
    struct pollfd fds[DOOR_MAX + 2];
    char bytes[64];

    (void)arg;
    for (;;) {
        int timeout;
        unsigned n;
        /* A place first: a request whose deadline has come is handed over
         * rather than refused, when it can be. */
        admit();
        timeout = expire();
        n = door.n;
        fds[0] = (struct pollfd){door.wake[0], POLLIN, 0};
        fds[1] = (struct pollfd){door.listen_fd,
                                 n < DOOR_MAX ? POLLIN : 0, 0};
        for (unsigned i = 0; i < n; i++)
            fds[i + 2] = (struct pollfd){door.waiting[i].fd,
                                         events_of(&door.waiting[i]), 0};
        if (poll(fds, n + 2, timeout) < 0 && errno != EINTR)
            break;
        if (fds[0].revents != 0) {
            while (read(door.wake[0], bytes, sizeof bytes) > 0)
                ;
            if (atomic_load(&door.stopping))
                break;
        }
        serve(fds + 2, n);
        if (fds[1].revents != 0)
            accept_new();
    }
    return NULL;
}

static void wake_door(void)
{
    ssize_t written = write(door.wake[1], "", 1);

    (void)written; /* a full pipe wakes the thread as well */
}

void ra__http_door_started(int fd)
{
    ra__lock(&door.started_lock);
    if (door.nstarted < STARTED_MAX)
        door.started[door.nstarted++] =
            (struct started){fd, now_ns() + ANSWER_DEADLINE_NS};
    ra__unlock(&door.started_lock);
    wake_door(); /* its poll's timeout may be longer, or none */
}

void ra__http_door_left(int fd)
{
    ra__lock(&door.started_lock);
    for (unsigned i = 0; i < door.nstarted; i++)
        if (door.started[i].fd == fd) {
            door.started[i] = door.started[--door.nstarted];
            break;
        }
    ra__unlock(&door.started_lock);
    atomic_fetch_add_explicit(&door.left, 1, memory_order_release);
    wake_door();
}

bool ra__http_door_open(int listen_fd, struct MHD_Daemon *daemon,
                        unsigned places, unsigned silence_s)
{
    if (door.wake[0] < 0 && pipe2(door.wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return true;
    door.daemon = daemon;
    door.listen_fd = listen_fd;
    door.places = places;
    door.silence_ns = (uint64_t)silence_s * NS_PER_S;
    door.handed = 0;
    door.nstarted = 0;
    atomic_store(&door.left, 0);
    atomic_store(&door.stopping, false);
    door.n = 0;
    if (ra__background_start(run_door, NULL, &door.thread)) {
        door.daemon = NULL;
        return true;
    }
    return false;
}

static void close_connections(void)
{
    while (door.n > 0)
        close(door.waiting[--door.n].fd);
    door.daemon = NULL;
}

void ra__http_door_close(void)
{
    atomic_store(&door.stopping, true);
    wake_door();
    pthread_join(door.thread, NULL);
    close_connections();
}

void ra__http_door_forget(void)
{
    /* The parent's threads may have held the lock at the fork. */
    ra__mutex_remake(&door.started_lock);
    door.nstarted = 0;
    if (door.daemon != NULL)
        close_connections();
    /* The pipe is shared with the parent's door: the child makes its own. */
    if (door.wake[0] >= 0) {
        close(door.wake[0]);
        close(door.wake[1]);
        door.wake[0] = door.wake[1] = -1;
    }
}

#endif
