/* Floor: services. The live stats segment, /dev/shm/regionalloc.<pid>: its
 * fixed layout, shared by the publisher (shm.c) and the reader
 * (tools/segment_read.c). doc/shm.md describes it for readers written
 * elsewhere.
 * Native byte order and alignment (the segment never leaves the machine);
 * every field is a fixed-width integer at a fixed offset, checked below. */
#ifndef RA_SHM_LAYOUT_H
#define RA_SHM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "sizes.h" /* what a memory limit means: ra__limit_in_effect */

#define RA_SHM_MAGIC "RAllocS\0"     /* 8 bytes, the NUL included */
/* 2: records carry their tag's parent and depth (tag trees), the header
 * the HTTP server's address. 3: the header carries the process's parts
 * (and grows to 640 bytes), records their arenas' metadata, when the
 * kernel counted their region, and the publication that last wrote them.
 * A reader of another version refuses the segment. */
#define RA_SHM_VERSION 3u
#define RA_SHM_PREFIX "regionalloc." /* then the pid, in /dev/shm */
/* When a file of another user holds RA_SHM_PREFIX<pid> (which the sticky
 * /dev/shm keeps the process from replacing), the segment is
 * RA_SHM_PREFIX<pid>.<RA_SHM_FALLBACK_LEN letters or digits, at random>;
 * a reader takes the name the process's user owns (doc/shm.md, "Names"). */
#define RA_SHM_FALLBACK_LEN 6
#define RA_SHM_NAME_MAX 64           /* a name's bytes, NUL included */
/* The most records a library writes: the limit of REGIONALLOC_MAX_TAGS. A
 * reader refuses a larger capacity, so that what it reads and allocates
 * stays bounded whatever a file says. */
#define RA_SHM_CAPACITY_MAX 4000u

/* Figures of one tag, or of the untagged arenas, or of the process, as the
 * reports give them. Unused fields are 0. */
struct ra_shm_figures {
    uint64_t allocated, active, resident, rss, mapped, peak_mapped;
    uint64_t dirty, muzzy, retained, reserved;
    uint64_t nmalloc, ndalloc, purges;
    uint64_t limit, soft_limit, limit_failures;
};

/* At offset 0. A reader copies the whole segment between two reads of seq
 * that are equal and even (a seqlock: the publisher makes seq odd, writes,
 * makes it even again); anything else is a torn copy, to read again. */
struct ra_shm_header {
    char magic[8];          /* RA_SHM_MAGIC */
    uint32_t version;       /* RA_SHM_VERSION */
    uint32_t header_size;   /* sizeof(struct ra_shm_header) */
    uint32_t record_size;   /* sizeof(struct ra_shm_record) */
    uint32_t capacity;      /* records after the header */
    uint64_t seq;           /* the seqlock; odd while the publisher writes */
    int32_t pid;            /* the publishing process */
    uint32_t nrecords;      /* records in use: ids 1..nrecords */
    uint64_t interval_ns;   /* between publications */
    uint64_t published;     /* publications so far, the first is 1 */
    uint64_t monotonic_ns;  /* CLOCK_MONOTONIC at the last publication */
    uint64_t realtime_ns;   /* CLOCK_REALTIME at the last publication */
    struct ra_shm_figures untagged; /* jemalloc's ordinary arenas */
    struct ra_shm_figures process;  /* allocated, active, resident, mapped
                                       (jemalloc's totals), rss (the
                                       kernel's); the rest 0 */
    uint64_t library_allocated;     /* the library's own memory */
    /* Where the process serves its HTTP endpoints, "HOST:PORT" (the port a
     * REGIONALLOC_HTTP of port 0 chose), NUL-terminated; "" for none. */
    char http[64];
    /* The memory limit (REGIONALLOC_MEMORY_LIMIT, ra_memory_limit_set or
     * the cgroup's), taken in version 2 from what was the reserved tail: a
     * segment of a library that predates it reads 0 there, which means no
     * limit. */
    struct ra_shm_pressure {
        uint64_t limit;       /* as given; 0: none; at or above
                                 RA__ADDRESS_SPACE (2^56), none in
                                 effect */
        uint64_t resident;    /* at the watcher's last look */
        uint64_t given_back;  /* bytes the give-backs took off the rss */
        uint64_t refusals;    /* allocations refused by the pressure */
        uint32_t level;       /* RA_SHM_PRESSURE_* */
        uint32_t source;      /* RA_SHM_LIMIT_* */
    } pressure;
    /* Bytes of blocks destroyed tags left live, nobody's until their
     * slot's next reset (the JSON report's "leftovers"); also from the
     * reserved tail, 0 in an older library's segment. */
    uint64_t leftovers_allocated;
    /* The parts of the process's RssAnon, as the reports name them. */
    struct ra_shm_parts {
        uint64_t rss_anon, rss_file, page_tables; /* /proc/self/status */
        /* tags + untagged + metadata + library + other == rss_anon, but
         * where the named parts exceed it: then other is 0 and over says
         * by how much. */
        uint64_t tags, untagged, metadata, library, other, over;
        uint64_t at_ns;       /* when counted, on time_ns's clock; 0: not
                                 yet */
        /* The process's cgroup v2 (RA_SHM_PARTS_CGROUP; else 0):
         * memory.current, memory.stat's anon and file, the limit
         * (memory.high, else memory.max; 0: none). */
        uint64_t cgroup_current, cgroup_anon, cgroup_file, cgroup_limit;
        uint32_t flags;       /* RA_SHM_PARTS_* */
        uint32_t reserved;    /* 0 */
    } parts;
    /* The library's clock (nanoseconds since it was loaded) when the
     * publication's figures were read: what parts.at_ns and the records'
     * rss_at_ns are ages from, as the JSON report's time_ns. */
    uint64_t time_ns;
    uint8_t reserved_tail[64];      /* 0; room for later versions */
};

/* ra_shm_parts' flags. */
#define RA_SHM_PARTS_CGROUP 1u   /* the process is in a cgroup v2: the
                                    cgroup_* fields are its */
#define RA_SHM_PARTS_MEASURED 2u /* untagged and metadata are the kernel's
                                    counts of jemalloc's mappings, not
                                    jemalloc's estimate */

/* ra_shm_pressure's level and source. */
#define RA_SHM_PRESSURE_NONE 0u  /* below high (90% of the limit) */
#define RA_SHM_PRESSURE_HIGH 1u
#define RA_SHM_PRESSURE_LIMIT 2u
#define RA_SHM_LIMIT_NONE 0u
#define RA_SHM_LIMIT_CALL 1u     /* ra_memory_limit_set */
#define RA_SHM_LIMIT_ENV 2u      /* REGIONALLOC_MEMORY_LIMIT */
#define RA_SHM_LIMIT_CGROUP 3u   /* memory.high, else memory.max */

#define RA_SHM_RECORD_LIVE 1u /* flags: the id names a live tag */

/* Record i describes tag id i + 1. */
struct ra_shm_record {
    uint32_t id;
    uint32_t flags;                /* RA_SHM_RECORD_LIVE, or 0: no tag */
    char name[RA_SHM_NAME_MAX];    /* NUL-terminated, as given; "" if dead */
    struct ra_shm_figures figures;
    uint32_t parent;               /* the parent's id, 0 at the top level */
    uint32_t depth;                /* 1 at the top level; 0 if dead */
    int32_t priority;              /* ra_tag_set_priority's; 0 by default */
    uint32_t reserved;             /* 0 */
    /* Of figures.rss, the bytes of the tag's arenas' metadata; and when
     * the kernel counted the region, on the header's time_ns clock (0: not
     * yet counted, and rss and metadata 0). */
    uint64_t metadata, rss_at_ns;
    /* The publication (the header's published) that last wrote the
     * record: the publisher rewrites a record only when what it holds
     * changed. */
    uint64_t written;
    uint8_t reserved_tail[16];     /* 0 */
};

_Static_assert(sizeof(struct ra_shm_figures) == 128, "figures layout");
_Static_assert(sizeof(struct ra_shm_parts) == 120, "parts layout");
_Static_assert(sizeof(struct ra_shm_header) == 640, "header layout");
_Static_assert(offsetof(struct ra_shm_header, seq) == 24, "seq offset");
_Static_assert(offsetof(struct ra_shm_header, untagged) == 72,
               "untagged offset");
_Static_assert(offsetof(struct ra_shm_header, pressure) == 400,
               "pressure offset");
_Static_assert(offsetof(struct ra_shm_header, leftovers_allocated) == 440,
               "leftovers offset");
_Static_assert(offsetof(struct ra_shm_header, parts) == 448, "parts offset");
_Static_assert(offsetof(struct ra_shm_header, time_ns) == 568,
               "time offset");
_Static_assert(sizeof(struct ra_shm_record) == 256, "record layout");
_Static_assert(offsetof(struct ra_shm_record, figures) == 72,
               "figures offset");
_Static_assert(offsetof(struct ra_shm_record, parent) == 200,
               "parent offset");
_Static_assert(offsetof(struct ra_shm_record, priority) == 208,
               "priority offset");
_Static_assert(offsetof(struct ra_shm_record, metadata) == 216,
               "metadata offset");
_Static_assert(offsetof(struct ra_shm_record, written) == 232,
               "written offset");

/* The segment's size for capacity records. */
static inline size_t ra_shm_size(uint32_t capacity)
{
    return sizeof(struct ra_shm_header) +
           (size_t)capacity * sizeof(struct ra_shm_record);
}

#endif
