/* Floor: tags. The libraries the library loads when first needed rather
 * than links (load.h): a program that never serves HTTP or names a frame
 * maps none of them, nor what they need (gnutls and its eight, libelf,
 * lzma, bz2), and never meets their symbols. Each is loaded on the thread
 * that first needs it, made the library's for the time of the load. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>

#include "dynsym.h"
#include "internal.h"
#include "tags.h"
#include "load.h"

/* Set by the process's end: a load then would run constructors in a
 * process whose destructors have begun, for a report that can do without
 * (frames named by dladdr). */
static atomic_bool stopped;

void ra__load_stop(void)
{
    atomic_store_explicit(&stopped, true, memory_order_relaxed);
}

/* The first failure's line, once per library. */
static void tell_failure(struct ra__library *lib, const char *why)
{
    char msg[512];

    if (atomic_exchange(&lib->failed, true))
        return;
    snprintf(msg, sizeof msg, "regionalloc: cannot load %s, which %s: %s; %s",
             lib->soname, lib->need, why, lib->without);
    ra__warn(msg);
}

static void say_dlerror(char *why, size_t len)
{
    const char *e = dlerror();

    snprintf(why, len, "%s", e != NULL ? e : "no reason given");
}

/* dlopen and dlsym of lib into a new table, or NULL with why in why[].
 * The calling thread is the library's for the time of it. */
static void *open_library(struct ra__library *lib, char *why, size_t len)
{
    sigset_t old;
    void *handle, *table = NULL;
    int64_t mark;

    /* Quiet: what dlopen and the constructors allocate is the library's,
     * whatever tag the caller has pushed. No signal handler of the
     * program's runs inside the quiet section, and a thread a constructor
     * starts is the library's (ra__spawn_begin). */
    ra__quiet_begin();
    ra__spawn_begin(&old);
    mark = ra__meta_thread_net();
    handle = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        say_dlerror(why, len);
    } else if ((table = ra__meta_calloc(1, lib->table_size)) == NULL) {
        snprintf(why, len, "out of memory");
        ra__dynsym_dlclose(handle);
    } else if (lib->resolve(handle, table)) {
        say_dlerror(why, len);
        ra__meta_free(table);
        table = NULL;
        ra__dynsym_dlclose(handle);
    }
    /* Else the library stays loaded for the process's life: its code runs
     * on the server's threads, its tables hold what it read. */
    ra__meta_count_foreign(ra__meta_thread_net() - mark);
    ra__spawn_end(&old);
    ra__quiet_end();
    return table;
}

const void *ra__load(struct ra__library *lib)
{
    void *table = atomic_load_explicit(&lib->table, memory_order_acquire);
    void *none = NULL;
    char why[400];

    if (table != NULL)
        return table;
    if (atomic_load_explicit(&lib->failed, memory_order_relaxed) ||
        atomic_load_explicit(&stopped, memory_order_relaxed))
        return NULL;
    /* No lock of ours is held while a library loads (load.h). */
    ra__assert_no_lock_held();
    table = open_library(lib, why, sizeof why);
    if (table == NULL) {
        tell_failure(lib, why);
        return NULL;
    }
    /* A thread that loaded it first stands; this one's reference to the
     * library stays counted, which costs nothing. */
    if (!atomic_compare_exchange_strong_explicit(
            &lib->table, &none, table, memory_order_acq_rel,
            memory_order_acquire)) {
        ra__meta_free(table);
        table = none;
    }
    return table;
}
