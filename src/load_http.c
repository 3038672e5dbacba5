/* Floor: tags. libmicrohttpd, loaded when the HTTP server first starts
 * (REGIONALLOC_HTTP at load, ra_http_start): it brings gnutls and eight
 * more libraries with it, which a program that never serves pays for in
 * start-up time and memory. */
#include <dlfcn.h>

#include "internal.h"
#include "load.h"

#ifdef RA_HTTP

static bool resolve(void *h, void *table)
{
    struct ra__mhd *t = table;

    RA__MHD_FUNCTIONS(RA__LOAD_RESOLVE)
    return false;
}

static struct ra__library mhd = {
    .soname = RA_MHD_SONAME,
    .need = "the HTTP endpoints need",
    .without = "no server (ra_http_start fails with ENOTSUP)",
    .table_size = sizeof(struct ra__mhd),
    .resolve = resolve,
};

const struct ra__mhd *ra__mhd(void)
{
    return ra__load(&mhd);
}

#endif
