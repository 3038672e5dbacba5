/* Floor: services. What the pprof encoder's files share: prof_pprof.c
 * encodes the profile with prof_strings.c's string table and
 * prof_mappings.c's executable mappings. */
#ifndef RA_PROF_PPROF_H
#define RA_PROF_PPROF_H

#include "prof_dump.h"

/* -- prof_strings.c: Profile.string_table ---------------------------------- */
/* The table, encoded as it grows, and an index of its strings (open
 * addressing, at most half full) so that each is written once. Starts
 * zeroed; string 0 must be "" (profile.proto). */
struct ra__prof_strings {
    struct ra__pb enc;
    size_t *at;    /* [i]: offset of string i's bytes in enc.data */
    size_t *len;   /* [i]: its length */
    size_t count, cap;
    size_t *slots; /* i + 1, or 0 for an empty slot */
    size_t nslots; /* a power of two */
};
/* The index of s (n bytes; ra__prof_intern: a C string) in the table,
 * added if new; 0 (the empty string) when out of memory, with
 * st->enc.failed set. */
uint64_t ra__prof_intern_bytes(struct ra__prof_strings *st, const char *s,
                               size_t n);
uint64_t ra__prof_intern(struct ra__prof_strings *st, const char *s);
void ra__prof_strings_free(struct ra__prof_strings *st);

/* -- prof_mappings.c: the executable mappings ------------------------------ */
/* The longest GNU build ID kept: ld writes 16 (md5, uuid) or 20 (sha1)
 * bytes. A longer one (ld --build-id=0x<hex>) is left out, not cut: a cut
 * ID would name another file. */
#define RA__BUILD_ID_MAX 64
/* An executable mapping of /proc/self/maps. */
struct ra__prof_mapping {
    uintptr_t start, limit, offset;
    uint64_t id;       /* 1, 2, ...: the main program's mappings first */
    uint64_t filename; /* in the string table */
    uint64_t build_id; /* in the string table: lowercase hex, "" for none */
    bool main;         /* the program's own file */
    /* Its locations: all, those with a function, those with a line (the
     * encoder's counts). */
    size_t nlocations, nnamed, nlined;
    /* The object's build ID, copied under the loader's lock (0: none). */
    size_t build_id_len;
    unsigned char build_id_raw[RA__BUILD_ID_MAX];
};
struct ra__prof_mappings {
    struct ra__prof_mapping *items; /* ascending, as the kernel lists them */
    size_t count, cap;
};
/* Reads the executable mappings backed by a file (and [vdso]), with their
 * build IDs, their names in st. Returns true when out of memory; an
 * unreadable /proc leaves no mappings. m starts zeroed; the caller frees
 * m->items. */
bool ra__prof_read_mappings(struct ra__prof_mappings *m,
                            struct ra__prof_strings *st);
/* The mapping holding pc, or NULL. */
struct ra__prof_mapping *
ra__prof_find_mapping(const struct ra__prof_mappings *m, uintptr_t pc);

#endif
