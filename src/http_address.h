/* The HTTP server's address (http_address.c, compiled into the library and
 * into tools/regionalloc, so that regionalloc run --http refuses exactly
 * the addresses the library would not serve on): REGIONALLOC_HTTP's,
 * ra_http_start's. No dependency on the rest of the library. */
#ifndef RA_HTTP_ADDRESS_H
#define RA_HTTP_ADDRESS_H

#include <stdbool.h>
#include <sys/socket.h>

/* An address's bytes, at most. */
#define RA__HTTP_ADDR_LEN 255

/* Why a build without libmicrohttpd serves nothing. */
#define RA__HTTP_NONE                                                        \
    "this build has no HTTP endpoints (configured --without-http, or "       \
    "libmicrohttpd was missing)"

/* Whether p is a port: 1 to 5 digits, at most 65535, nothing after. */
bool ra__http_is_port(const char *p);
/* addr's syntax: "HOST:PORT" or "[IPV6]:PORT", the port 0 to 65535 (1 to 5
 * digits), at most RA__HTTP_ADDR_LEN bytes. NULL when valid, with its host
 * in host (127.0.0.1 for an empty one) and its port in *port (in addr);
 * else why not ("the port is not a number from 0 to 65535"), the outputs
 * untouched. */
const char *ra__http_split(const char *addr, char host[RA__HTTP_ADDR_LEN + 1],
                           const char **port);
/* A listening socket on addr (non-blocking, close-on-exec, SO_REUSEADDR),
 * its address in *bound: addr's host resolved, a loopback address unless
 * allow_remote. Returns the socket; or -1 with why not in *why and errno
 * EINVAL (addr malformed, or a host that does not resolve), EPERM (not a
 * loopback address) or what socket, bind, listen or getsockname said. */
int ra__http_listen(const char *addr, bool allow_remote,
                    struct sockaddr_storage *bound, const char **why);
/* What the library would make of addr, as regionalloc run --http checks
 * it: NULL when the library would serve there (a socket opened and closed
 * again, so that a port taken is seen), else why not. A build without the
 * endpoints refuses a well-formed addr with RA__HTTP_NONE. */
const char *ra__http_check(const char *addr, bool allow_remote);

#endif
