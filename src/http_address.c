/* Floor: OS (calls nothing above it, so that tools/regionalloc compiles it
 * too). The HTTP server's address: its syntax, its host resolved, the
 * loopback rule, and the listening socket, which the library serves on
 * and regionalloc run --http opens and closes again before the program
 * runs: an address the tool let through and the library refused (a port
 * above 65535, a bare IPv6 address, a port taken) ran the program without
 * its server, after one line from the library. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_address.h"

bool ra__http_is_port(const char *p)
{
    size_t n = strspn(p, "0123456789");

    return n >= 1 && n <= 5 && p[n] == '\0' && atoi(p) <= 65535;
}

const char *ra__http_split(const char *addr, char host[RA__HTTP_ADDR_LEN + 1],
                           const char **port)
{
    size_t len = strnlen(addr, RA__HTTP_ADDR_LEN + 1), n;
    const char *colon = strrchr(addr, ':'), *h = addr;

    if (len == 0)
        return "empty; expected HOST:PORT";
    if (len > RA__HTTP_ADDR_LEN)
        return "longer than 255 bytes";
    if (colon == NULL)
        return "expected HOST:PORT or [IPV6]:PORT";
    n = (size_t)(colon - addr);
    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
        h++;
        n -= 2;
    } else if (memchr(addr, ':', n) != NULL) {
        return "an IPv6 address goes in brackets, as [::1]:PORT";
    }
    if (!ra__http_is_port(colon + 1))
        return "the port is not a number from 0 to 65535";
    if (n == 0) {
        h = "127.0.0.1";
        n = strlen(h);
    }
    memcpy(host, h, n);
    host[n] = '\0';
    *port = colon + 1;
    return NULL;
}

static bool is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) ||
               (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

/* addr's first address, resolved; NULL with why and errno set. */
static struct addrinfo *resolve(const char *addr, bool allow_remote,
                                const char **why)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char host[RA__HTTP_ADDR_LEN + 1];
    const char *port;

    *why = ra__http_split(addr, host, &port);
    if (*why != NULL) {
        errno = EINVAL;
        return NULL;
    }
    if (getaddrinfo(host, port, &hints, &ai) != 0 || ai == NULL) {
        *why = "the host does not resolve";
        errno = EINVAL;
        return NULL;
    }
    if (!is_loopback(ai->ai_addr) && !allow_remote) {
        freeaddrinfo(ai);
        *why = "not a loopback address (set REGIONALLOC_HTTP_ALLOW_REMOTE=1 "
               "to allow it)";
        errno = EPERM;
        return NULL;
    }
    return ai;
}

int ra__http_listen(const char *addr, bool allow_remote,
                    struct sockaddr_storage *bound, const char **why)
{
    struct addrinfo *ai = resolve(addr, allow_remote, why);
    socklen_t boundlen = sizeof *bound;
    int fd, one = 1, e;

    if (ai == NULL)
        return -1;
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)bound, &boundlen) != 0) {
        e = errno;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        *why = strerror(e);
        errno = e;
        return -1;
    }
    freeaddrinfo(ai);
    *why = NULL;
    return fd;
}

#ifdef RA_HTTP
const char *ra__http_check(const char *addr, bool allow_remote)
{
    struct sockaddr_storage bound;
    const char *why;
    int fd = ra__http_listen(addr, allow_remote, &bound, &why);

    if (fd >= 0)
        close(fd);
    return why;
}
#else
const char *ra__http_check(const char *addr, bool allow_remote)
{
    char host[RA__HTTP_ADDR_LEN + 1];
    const char *port, *why = ra__http_split(addr, host, &port);

    (void)allow_remote;
    return why != NULL ? why : RA__HTTP_NONE;
}
#endif
