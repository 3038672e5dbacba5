/* Floor: tags. load.c, load_http.c, load_dw.c: the libraries the library
 * loads when first needed rather than links (libmicrohttpd for the HTTP
 * endpoints, libdw for the profile's frame names), each reached through a
 * table of its functions. Included by the files that call them, after
 * internal.h. */
#ifndef RA_LOAD_H
#define RA_LOAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* -- load.c: loading one library ------------------------------------------ */
/* A library loaded when first needed, and the table of its functions. */
struct ra__library {
    const char *soname;  /* what dlopen is given: the one the build linked */
    const char *need;    /* what needs it, for the line a failure writes */
    const char *without; /* what the process does without it, ditto */
    size_t table_size;
    /* Fills table with the functions of the loaded library handle; returns
     * true when one is missing (dlerror() says which). */
    bool (*resolve)(void *handle, void *table);
    _Atomic(void *) table; /* the library's memory; NULL until loaded */
    atomic_bool failed;    /* a load failed: never tried again */
};
/* lib's table: the library loaded and its functions resolved the first
 * time (dlopen, RTLD_NOW | RTLD_LOCAL: its symbols and those of what it
 * needs stay out of the program's scope), as the library's own work: quiet
 * (untagged, never hooked or sampled), every signal blocked, the threads it
 * starts the library's, and what it allocates and keeps counted as the
 * library's memory. NULL when it cannot be loaded (the first failure
 * writes one line on stderr, naming the library and why) or when the
 * process has begun to end before it was loaded. Threads that race to load
 * it each load it (dlopen counts references) and the first table stands.
 * Call it with no lock of the library's held (dlopen takes the dynamic
 * linker's lock and runs the library's constructors, which allocate) and
 * never from inside malloc. */
const void *ra__load(struct ra__library *lib);

/* The type of a pointer to function f, as a member named f of a table. */
#define RA__LOAD_POINTER(f) __typeof__(&f) f;
/* In a library's resolve function, whose arguments are named h (the handle)
 * and t (its table, typed): resolves f, or returns true. */
#define RA__LOAD_RESOLVE(f)                                                 \
    if ((t->f = (__typeof__(&f))dlsym(h, #f)) == NULL)                      \
        return true;

/* -- load_http.c: libmicrohttpd ------------------------------------------- */
#ifdef RA_HTTP
#include <microhttpd.h>

/* Every function of libmicrohttpd's that http*.c call. */
#define RA__MHD_FUNCTIONS(X)                                                \
    X(MHD_start_daemon)                                                     \
    X(MHD_stop_daemon)                                                      \
    X(MHD_add_connection)                                                   \
    X(MHD_create_response_from_buffer)                                      \
    X(MHD_add_response_header)                                              \
    X(MHD_queue_response)                                                   \
    X(MHD_destroy_response)                                                 \
    X(MHD_lookup_connection_value)                                          \
    X(MHD_lookup_connection_value_n)                                        \
    X(MHD_get_connection_values)                                            \
    X(MHD_get_connection_values_n)                                          \
    X(MHD_get_connection_info)

struct ra__mhd {
    RA__MHD_FUNCTIONS(RA__LOAD_POINTER)
};
/* libmicrohttpd's functions, the library loaded the first time
 * (ra__load's rules); NULL when it cannot be. */
const struct ra__mhd *ra__mhd(void);
/* A call of libmicrohttpd's MHD_fn, once ra__mhd() has returned a table. */
#define RA__MHD(fn) (ra__mhd()->MHD_##fn)
#endif

/* -- load_dw.c: libdw ------------------------------------------------------ */
#ifdef RA_LIBDW
#include <elfutils/libdwfl.h>

/* Every function of libdw's that symbols.c calls. */
#define RA__DW_FUNCTIONS(X)                                                 \
    X(dwfl_begin)                                                           \
    X(dwfl_end)                                                             \
    X(dwfl_report_begin)                                                    \
    X(dwfl_report_end)                                                      \
    X(dwfl_linux_proc_report)                                               \
    X(dwfl_linux_proc_find_elf)                                             \
    X(dwfl_build_id_find_debuginfo)                                         \
    X(dwfl_addrmodule)                                                      \
    X(dwfl_module_addrinfo)                                                 \
    X(dwfl_module_getsrc)                                                   \
    X(dwfl_module_addrdie)                                                  \
    X(dwfl_lineinfo)                                                        \
    X(dwarf_attr)                                                           \
    X(dwarf_attr_integrate)                                                 \
    X(dwarf_formstring)                                                     \
    X(dwarf_formudata)                                                      \
    X(dwarf_getscopes)                                                      \
    X(dwarf_getscopes_die)                                                  \
    X(dwarf_getsrcfiles)                                                    \
    X(dwarf_filesrc)                                                        \
    X(dwarf_tag)

struct ra__dw {
    RA__DW_FUNCTIONS(RA__LOAD_POINTER)
};
/* libdw's functions, the library (and libelf, which it needs) loaded the
 * first time (ra__load's rules); NULL when it cannot be. */
const struct ra__dw *ra__dw(void);
#endif

#endif /* RA_LOAD_H */
