/* Floor: tags. libdw (elfutils), loaded when a frame is first named (a
 * profile's dump, the dashboard's sites) or when the profiler starts in a
 * process that dumps the profile at exit, which loads nothing: it brings
 * libelf, lzma and bz2 with it. */
#include <dlfcn.h>

#include "internal.h"
#include "load.h"

#ifdef RA_LIBDW

static bool resolve(void *h, void *table)
{
    struct ra__dw *t = table;

    RA__DW_FUNCTIONS(RA__LOAD_RESOLVE)
    return false;
}

static struct ra__library dw = {
    .soname = RA_DW_SONAME,
    .need = "names the profile's frames",
    .without = "frames are named from dynamic symbols alone (dladdr)",
    .table_size = sizeof(struct ra__dw),
    .resolve = resolve,
};

const struct ra__dw *ra__dw(void)
{
    return ra__load(&dw);
}

bool ra__load_symbolizer(void)
{
    return ra__dw() == NULL;
}

#else

bool ra__load_symbolizer(void)
{
    return true;
}

#endif
