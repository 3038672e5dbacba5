/* Floor: services. The process's executable mappings as the pprof
 * encoder lists them: read from /proc/self/maps, the main program's first,
 * each with its object's GNU build ID (read from the loaded objects' notes
 * with dl_iterate_phdr). */
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "prof_pprof.h"

/* What reading /proc/self/maps fills in. */
struct mapping_reader {
    struct ra__prof_mappings *m;
    struct ra__prof_strings *st;
    const char *exe;
    bool failed; /* out of memory */
};

/* ra__proc_maps callback: keeps the executable mappings backed by a file
 * (and [vdso]). */
static bool add_mapping(char *line, size_t len, void *ctx)
{
    struct mapping_reader *r = ctx;
    struct ra__prof_mappings *m = r->m;
    uintptr_t start, limit, offset;
    char perms[5];
    int path_at = -1;
    const char *path;

    (void)len;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %" SCNxPTR " %*s %*s %n",
               &start, &limit, perms, &offset, &path_at) < 4 ||
        path_at < 0 || perms[2] != 'x')
        return false;
    path = line + path_at;
    if (*path == '\0')
        return false;
    if (m->count == m->cap) {
        size_t cap = m->cap == 0 ? 64 : m->cap * 2;
        struct ra__prof_mapping *grown =
            ra__meta_realloc(m->items, cap * sizeof *grown);
        if (grown == NULL) {
            r->failed = true;
            return true;
        }
        m->items = grown;
        m->cap = cap;
    }
    m->items[m->count++] = (struct ra__prof_mapping){
        .start = start, .limit = limit, .offset = offset,
        .filename = ra__prof_intern(r->st, path),
        .main = strcmp(path, r->exe) == 0};
    return false;
}

/* The index of the first mapping that ends after addr; m->count if none. */
static size_t first_ending_after(const struct ra__prof_mappings *m,
                                 uintptr_t addr)
{
    size_t lo = 0, hi = m->count;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->items[mid].limit <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* -- build IDs -------------------------------------------------------------------- */

/* The desc of the first NT_GNU_BUILD_ID note of the n bytes of notes at p,
 * its length in *len; NULL if none. Each field is padded to align, the
 * segment's: 4, or 8 for the 8-aligned PT_NOTE (.note.gnu.property) that
 * recent linkers put apart from the 4-aligned build ID. Stops at a note
 * that overruns the segment. */
static const unsigned char *scan_notes(const unsigned char *p, size_t n,
                                       size_t align, size_t *len)
{
    size_t at = 0;

    while (n - at >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) nh;
        size_t name_at = at + sizeof nh, desc_at;

        memcpy(&nh, p + at, sizeof nh);
        if (nh.n_namesz > n - name_at)
            break;
        desc_at = name_at + ((nh.n_namesz + align - 1) & ~(align - 1));
        if (desc_at > n || nh.n_descsz > n - desc_at)
            break;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == sizeof "GNU" &&
            memcmp(p + name_at, "GNU", sizeof "GNU") == 0) {
            *len = nh.n_descsz;
            return p + desc_at;
        }
        at = desc_at + ((nh.n_descsz + align - 1) & ~(align - 1));
        if (at > n)
            break;
    }
    return NULL;
}

/* Whether the object maps the n bytes at its address vaddr from its file:
 * a PT_NOTE is read in memory only then, as nothing obliges the linker to
 * put it inside a loaded segment. */
static bool is_loaded(const struct dl_phdr_info *info, uintptr_t vaddr,
                      size_t n)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && vaddr >= ph->p_vaddr &&
            vaddr - ph->p_vaddr <= ph->p_filesz &&
            n <= ph->p_filesz - (vaddr - ph->p_vaddr))
            return true;
    }
    return false;
}

/* dl_iterate_phdr callback: copies the object's build ID into the mappings
 * that overlap its PT_LOAD segments (the main program, whose dlpi_name is
 * "", and [vdso] included). It runs under the loader's lock, so it reads
 * headers and writes into ctx only: no allocation, no lock. */
static int copy_build_id(struct dl_phdr_info *info, size_t size, void *ctx)
{
    struct ra__prof_mappings *m = ctx;
    const unsigned char *id = NULL;
    size_t len = 0;

    (void)size;
    for (int i = 0; i < info->dlpi_phnum && id == NULL; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE && is_loaded(info, ph->p_vaddr, ph->p_filesz))
            id = scan_notes((const unsigned char *)(info->dlpi_addr +
                                                    ph->p_vaddr),
                            ph->p_filesz, ph->p_align == 8 ? 8 : 4, &len);
    }
    if (id == NULL || len == 0 || len > RA__BUILD_ID_MAX)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;

        if (ph->p_type != PT_LOAD || ph->p_memsz == 0)
            continue;
        /* The first mapping that ends after lo, then those that start
         * before hi: the segment's bytes lie in its object's pages only. */
        for (size_t j = first_ending_after(m, lo);
             j < m->count && m->items[j].start < hi; j++) {
            memcpy(m->items[j].build_id_raw, id, len);
            m->items[j].build_id_len = len;
        }
    }
    return 0;
}

/* Gives each mapping its object's build ID, as hex in the string table.
 * Objects are matched by address, not by path: the program's dlpi_name is
 * "", and a path may be a link or deleted. A mapping no loaded object
 * covers (a file mapped by hand, one dlclose'd since /proc/self/maps was
 * read) gets none. */
static void name_build_ids(struct ra__prof_mappings *m,
                           struct ra__prof_strings *st)
{
    static const char digits[] = "0123456789abcdef";

    ra__assert_may_call_loader();
    dl_iterate_phdr(copy_build_id, m);
    for (size_t i = 0; i < m->count; i++) {
        struct ra__prof_mapping *mp = &m->items[i];
        char hex[2 * RA__BUILD_ID_MAX];

        if (mp->build_id_len == 0)
            continue;
        for (size_t k = 0; k < mp->build_id_len; k++) {
            hex[2 * k] = digits[mp->build_id_raw[k] >> 4];
            hex[2 * k + 1] = digits[mp->build_id_raw[k] & 15];
        }
        mp->build_id = ra__prof_intern_bytes(st, hex, 2 * mp->build_id_len);
    }
}

bool ra__prof_read_mappings(struct ra__prof_mappings *m,
                            struct ra__prof_strings *st)
{
    char exe[PATH_MAX];
    ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    struct mapping_reader r = {m, st, exe, false};
    uint64_t next_id = 1;

    exe[exe_len > 0 ? exe_len : 0] = '\0';
    ra__proc_maps(add_mapping, &r);
    if (r.failed)
        return true;
    /* "mapping[0] will be the main binary" (profile.proto). */
    for (size_t i = 0; i < m->count; i++)
        if (m->items[i].main)
            m->items[i].id = next_id++;
    for (size_t i = 0; i < m->count; i++)
        if (!m->items[i].main)
            m->items[i].id = next_id++;
    name_build_ids(m, st);
    return st->enc.failed;
}

struct ra__prof_mapping *
ra__prof_find_mapping(const struct ra__prof_mappings *m, uintptr_t pc)
{
    size_t i = first_ending_after(m, pc);

    return i < m->count && m->items[i].start <= pc ? &m->items[i] : NULL;
}
