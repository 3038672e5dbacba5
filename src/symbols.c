/* Floor: services. The names of code addresses, for the profile's readers
 * (prof_names.c): the function, file and line of the call before a return
 * address, with the functions inlined there, from the symbol tables
 * (.symtab: static functions included) and the DWARF of every object
 * mapped in the process, read with elfutils' libdw. A separate debug file
 * is found by build ID under /usr/lib/debug/.build-id/, as Debian's -dbgsym
 * packages install it, never over the network (debuginfod: a dump must not
 * wait on a server). Only dumps call it, in the dumping thread: names are
 * cached per address under a lock of this file's, which no allocation
 * takes. libdw is loaded at the first dump (load_dw.c), or when the
 * profiler starts in a process that dumps at exit; it allocates with
 * malloc, inside the dump's quiet section: what it keeps is counted as the
 * library's own memory. Built without libdw (--without-libdw), or where it
 * cannot be loaded, it knows nothing, and dumps name frames with dladdr's
 * dynamic symbols alone. */
#include "prof_dump.h"

#ifdef RA_LIBDW
#include <dwarf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load.h"

/* Past this many cached addresses the cache starts over: a program has far
 * fewer call sites, so only code loaded and unloaded over and over gets
 * there. */
#define CACHE_MAX (1u << 20)

/* An address's names: nlines lines, then the strings they point to, in one
 * block of the library's memory. */
struct record {
    uintptr_t offset; /* from the outermost function's symbol; 0: none */
    unsigned nlines;
    struct ra__symbol_line lines[];
};

struct entry {
    uintptr_t addr;
    struct record *rec; /* NULL: a free slot */
};

/* The loader's counts of objects loaded and unloaded (dl_iterate_phdr):
 * when they move, what was known of the address space may be wrong. */
struct generation {
    unsigned long long adds, subs;
};

static struct ra__mutex symbols_lock = RA__MUTEX_INIT(RA__RANK_SYMBOLS);
/* Whether the fork handler took the lock (nobody was naming frames). */
static bool locked_for_fork;

/* What follows is under symbols_lock. */
static const struct ra__dw *dw; /* libdw's functions, once loaded */
static Dwfl *dwfl;
static struct generation seen;
static struct entry *cache;
static size_t cache_cap, cache_count;

/* -- libdw's callbacks ---------------------------------------------------- */

/* The object as the maps name it, opened close-on-exec (libdw's own opens
 * are not: a program that forks and executes after a dump would pass the
 * descriptors on); the vDSO and deleted files as libdw finds them. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name,
                    Dwarf_Addr base, char **file_name, Elf **elfp)
{
    if (name != NULL && name[0] == '/') {
        int fd = open(name, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            *file_name = strdup(name);
            if (*file_name != NULL)
                return fd;
            close(fd);
        }
    }
    return dw->dwfl_linux_proc_find_elf(mod, userdata, name, base,
                                        file_name, elfp);
}

/* A separate debug file by build ID only: the path libdw searches by name
 * would do, but its standard callback ends with debuginfod. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
                          const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink,
                          GElf_Word crc, char **debuginfo_file_name)
{
    int fd = dw->dwfl_build_id_find_debuginfo(mod, userdata, modname, base,
                                              file_name, debuglink, crc,
                                              debuginfo_file_name);
    if (fd >= 0)
        (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = find_debuginfo,
};

/* -- the address space --------------------------------------------------- */

static int read_generation(struct dl_phdr_info *info, size_t size, void *ctx)
{
    struct generation *g = ctx;

    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) +
                    sizeof info->dlpi_subs)
        *g = (struct generation){info->dlpi_adds, info->dlpi_subs};
    return 1; /* the counts are the same in every entry */
}

static void forget_names(void)
{
    for (size_t i = 0; i < cache_cap; i++)
        ra__meta_free(cache[i].rec);
    ra__meta_free(cache);
    cache = NULL;
    cache_cap = cache_count = 0;
}

/* A Dwfl of the objects mapped now, or NULL (nothing will be named). */
static Dwfl *report_objects(void)
{
    Dwfl *d = dw->dwfl_begin(&callbacks);

    if (d == NULL)
        return NULL;
    dw->dwfl_report_begin(d);
    if (dw->dwfl_linux_proc_report(d, getpid()) != 0 ||
        dw->dwfl_report_end(d, NULL, NULL) != 0) {
        dw->dwfl_end(d);
        return NULL;
    }
    return d;
}

/* Starts over when an object was loaded or unloaded since the names were
 * read: an address may now be another object's. */
static void follow_objects(void)
{
    struct generation now = {0, 0};
    int64_t mark;

    ra__assert_may_call_loader();
    dl_iterate_phdr(read_generation, &now);
    if (dwfl != NULL && now.adds == seen.adds && now.subs == seen.subs)
        return;
    forget_names();
    mark = ra__meta_thread_net();
    if (dwfl != NULL)
        dw->dwfl_end(dwfl);
    dwfl = report_objects();
    ra__meta_count_foreign(ra__meta_thread_net() - mark);
    seen = now;
}

/* -- naming one address --------------------------------------------------- */

/* Up to RA__SYMBOL_LINES lines, innermost first, pointing into libdw's
 * tables (valid while dwfl is). */
struct draft {
    unsigned n;
    struct ra__symbol_line lines[RA__SYMBOL_LINES];
    /* The unit's directory, which relative file names are from. */
    const char *comp_dir;
};

/* A subprogram's or inlined instance's name: the linkage name where there
 * is one (C++'s mangled name, as the symbol tables have it), else the
 * name, from the abstract instance when the DIE is a concrete one. */
static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute a;
    const char *name = dw->dwarf_formstring(
        dw->dwarf_attr_integrate(die, DW_AT_linkage_name, &a));

    if (name == NULL)
        name = dw->dwarf_formstring(
            dw->dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
    if (name == NULL)
        name = dw->dwarf_formstring(
            dw->dwarf_attr_integrate(die, DW_AT_name, &a));
    return name;
}

/* Where an inlined instance was called from: its DW_AT_call_file, an
 * index into its unit's file table, and DW_AT_call_line. */
static void call_site(Dwarf_Die *cu, Dwarf_Die *inlined, const char **file,
                      unsigned *line)
{
    Dwarf_Attribute a;
    Dwarf_Word index, n;
    Dwarf_Files *files;
    size_t nfiles;

    *file = NULL;
    *line = 0;
    if (dw->dwarf_formudata(dw->dwarf_attr(inlined, DW_AT_call_line, &a),
                            &n) == 0)
        *line = n > UINT32_MAX ? 0 : (unsigned)n;
    if (dw->dwarf_formudata(dw->dwarf_attr(inlined, DW_AT_call_file, &a),
                            &index) == 0 &&
        dw->dwarf_getsrcfiles(cu, &files, &nfiles) == 0 && index < nfiles)
        *file = dw->dwarf_filesrc(files, index, NULL, NULL);
}

static void add_line(struct draft *d, const char *function, const char *file,
                     unsigned line)
{
    if (d->n < RA__SYMBOL_LINES)
        d->lines[d->n++] = (struct ra__symbol_line){function, file, line};
}

/* The scopes around pc, innermost first: a line per inlined instance,
 * where the previous line's call sits in it, up to the subprogram, whose
 * name is the symbol table's (what perf and pprof show: a clone's suffix
 * kept) when it has one. dwarf_getscopes follows an inlined instance into
 * its abstract definition, which lies outside the caller; the DIE tree
 * around the innermost scope (dwarf_getscopes_die) is the concrete chain
 * of callers, as eu-addr2line -i walks it. */
static void name_scopes(struct draft *d, Dwarf_Die *cu, Dwarf_Addr pc,
                        const char *symbol, const char *file, unsigned line)
{
    Dwarf_Die *scopes = NULL, innermost;
    int n = dw->dwarf_getscopes(cu, pc, &scopes);

    if (n > 0) {
        innermost = scopes[0];
        free(scopes);
        scopes = NULL;
        n = dw->dwarf_getscopes_die(&innermost, &scopes);
    }
    for (int i = 0; i < n; i++) {
        int tag = dw->dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_subprogram) {
            add_line(d, symbol != NULL ? symbol : die_name(&scopes[i]), file,
                     line);
            free(scopes);
            return;
        }
        if (tag == DW_TAG_inlined_subroutine) {
            add_line(d, die_name(&scopes[i]), file, line);
            call_site(cu, &scopes[i], &file, &line);
        }
    }
    free(scopes);
    /* No subprogram around pc in the unit: the unit's range only spans pc
     * (a crt file's _start between two sections of a -O2 unit), and the
     * line found is a neighbour's. The symbol alone. */
    if (symbol != NULL)
        add_line(d, symbol, NULL, 0);
}

/* What libdw knows of the call before return address addr. *offset: addr
 * less the symbol's start, when one was found. */
static void draft_names(struct draft *d, uintptr_t addr, uintptr_t *offset)
{
    Dwarf_Addr pc = addr - 1, bias = 0;
    Dwfl_Module *mod = dw->dwfl_addrmodule(dwfl, pc);
    GElf_Off symbol_offset;
    GElf_Sym sym;
    const char *symbol, *file = NULL;
    Dwfl_Line *src;
    Dwarf_Die *cu;
    int line = 0;

    d->n = 0;
    d->comp_dir = NULL;
    if (mod == NULL)
        return;
    symbol = dw->dwfl_module_addrinfo(mod, pc, &symbol_offset, &sym, NULL,
                                      NULL, NULL);
    if (symbol != NULL && symbol[0] == '\0')
        symbol = NULL;
    if (symbol != NULL)
        *offset = (uintptr_t)symbol_offset + 1;
    src = dw->dwfl_module_getsrc(mod, pc);
    if (src != NULL)
        file = dw->dwfl_lineinfo(src, NULL, &line, NULL, NULL, NULL);
    if (file == NULL || line < 0)
        line = 0;
    cu = dw->dwfl_module_addrdie(mod, pc, &bias);
    if (cu != NULL) {
        Dwarf_Attribute a;
        d->comp_dir =
            dw->dwarf_formstring(dw->dwarf_attr(cu, DW_AT_comp_dir, &a));
        name_scopes(d, cu, pc - bias, symbol, file, (unsigned)line);
    }
    else if (symbol != NULL)
        add_line(d, symbol, NULL, 0);
}

/* How long s is as kept: a symbol without its version ("@@GLIBC_2.34",
 * which no reader wants in a frame's name). */
static size_t kept_length(const char *s, bool symbol)
{
    const char *at = symbol ? strchr(s, '@') : NULL;

    return at != NULL && at != s ? (size_t)(at - s) : strlen(s);
}

/* Appends s (n bytes) and a NUL at *text, which moves past them. */
static const char *put(char **text, const char *s, size_t n)
{
    char *at = *text;

    memcpy(at, s, n);
    at[n] = '\0';
    *text += n + 1;
    return at;
}

/* The draft copied into one block of the library's memory, a relative
 * file name joined to its unit's directory (what pprof -list opens). */
static struct record *keep(const struct draft *d, uintptr_t offset)
{
    size_t size = sizeof(struct record) + d->n * sizeof(d->lines[0]);
    size_t dir = d->comp_dir != NULL ? strlen(d->comp_dir) : 0;
    struct record *r;
    char *text;

    for (unsigned i = 0; i < d->n; i++) {
        if (d->lines[i].function != NULL)
            size += kept_length(d->lines[i].function, true) + 1;
        if (d->lines[i].file != NULL)
            size += dir + 1 + strlen(d->lines[i].file) + 1;
    }
    r = ra__meta_alloc(size);
    if (r == NULL)
        return NULL;
    r->offset = offset;
    r->nlines = d->n;
    text = (char *)&r->lines[d->n];
    for (unsigned i = 0; i < d->n; i++) {
        const struct ra__symbol_line *l = &d->lines[i];
        const char *function = NULL, *file = NULL;
        if (l->function != NULL)
            function = put(&text, l->function, kept_length(l->function, true));
        if (l->file != NULL && l->file[0] != '/' && dir != 0) {
            file = put(&text, d->comp_dir, dir);
            text[-1] = '/';
            put(&text, l->file, strlen(l->file));
        } else if (l->file != NULL) {
            file = put(&text, l->file, strlen(l->file));
        }
        r->lines[i] = (struct ra__symbol_line){function, file, l->line};
    }
    return r;
}

/* -- the cache ------------------------------------------------------------ */

static size_t slot_of(uintptr_t addr, size_t cap)
{
    return (size_t)((addr * 0x9e3779b97f4a7c15u) >> 20) & (cap - 1);
}

static struct entry *find(uintptr_t addr)
{
    if (cache_cap == 0)
        return NULL;
    for (size_t i = slot_of(addr, cache_cap);; i = (i + 1) & (cache_cap - 1))
        if (cache[i].rec == NULL || cache[i].addr == addr)
            return &cache[i];
}

/* Room for one more entry at a load of at most a half. Returns true when
 * out of memory. */
static bool fit_one_more(void)
{
    size_t cap = cache_cap == 0 ? 256 : cache_cap * 2;
    struct entry *old = cache, *grown;
    size_t old_cap = cache_cap;

    if (cache_count >= CACHE_MAX)
        forget_names();
    if (2 * (cache_count + 1) <= cache_cap)
        return false;
    grown = ra__meta_calloc(cap, sizeof *grown);
    if (grown == NULL)
        return true;
    cache = grown;
    cache_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].rec != NULL)
            *find(old[i].addr) = old[i];
    ra__meta_free(old);
    return false;
}

/* -- the interface -------------------------------------------------------- */

void ra__symbols_begin(void)
{
    /* Loaded before the lock is taken: no lock of ours is held while a
     * library loads (load.h). */
    const struct ra__dw *loaded = ra__dw();

    ra__lock(&symbols_lock);
    dw = loaded;
    if (dw != NULL)
        follow_objects();
}

unsigned ra__symbols_lookup(uintptr_t addr,
                            const struct ra__symbol_line **lines,
                            uintptr_t *offset)
{
    struct entry *e;
    struct draft d;
    int64_t mark;

    *offset = 0;
    if (dwfl == NULL || addr == 0)
        return 0;
    e = find(addr);
    if (e == NULL || e->rec == NULL) {
        uintptr_t symbol_offset = 0;
        struct record *r;
        if (fit_one_more())
            return 0;
        mark = ra__meta_thread_net();
        draft_names(&d, addr, &symbol_offset);
        ra__meta_count_foreign(ra__meta_thread_net() - mark);
        r = keep(&d, symbol_offset);
        if (r == NULL)
            return 0;
        e = find(addr);
        *e = (struct entry){addr, r};
        cache_count++;
    }
    *offset = e->rec->offset;
    *lines = e->rec->lines;
    return e->rec->nlines;
}

void ra__symbols_end(void)
{
    ra__unlock(&symbols_lock);
}

/* A fork while a dump names frames: the child cannot know where that dump
 * left libdw's tables, and starts from nothing (what they hold stays
 * allocated in it). Otherwise the child keeps the names: its address space
 * is the parent's. The handler never waits for a dump. */
void ra__symbols_prefork(void)
{
    locked_for_fork = ra__trylock(&symbols_lock);
}

void ra__symbols_postfork_parent(void)
{
    if (locked_for_fork)
        ra__unlock(&symbols_lock);
}

void ra__symbols_postfork_child(void)
{
    if (locked_for_fork) {
        ra__unlock(&symbols_lock);
        return;
    }
    ra__mutex_remake(&symbols_lock);
    dwfl = NULL;
    cache = NULL;
    cache_cap = cache_count = 0;
    seen = (struct generation){0, 0};
}

#else /* !RA_LIBDW */

void ra__symbols_begin(void)
{
}

unsigned ra__symbols_lookup(uintptr_t addr,
                            const struct ra__symbol_line **lines,
                            uintptr_t *offset)
{
    (void)addr;
    (void)lines;
    *offset = 0;
    return 0;
}

void ra__symbols_end(void)
{
}

void ra__symbols_prefork(void)
{
}

void ra__symbols_postfork_parent(void)
{
}

void ra__symbols_postfork_child(void)
{
}

#endif /* RA_LIBDW */
