/* Floor: services. What the reports call the tags' figures and the
 * process's parts: one list of each, which the process's own reports
 * (report_text.c, report_json.c, report_prometheus.c) and the tool that
 * writes them again from its live segment (tools/) both expand, so that
 * the text lines, the JSON keys and the
 * Prometheus families are the same wherever they come from. Each list is
 * an X macro over fields named alike in the reports' rows and parts
 * (output.h) and in the segment (shm_layout.h). */
#ifndef RA_REPORT_NAMES_H
#define RA_REPORT_NAMES_H

/* The per-tag families, in the order the reports write them: X(family,
 * the untagged arenas' family or NULL, type, help, field, summed). field
 * is the member of struct ra__usage the family gives (the segment's
 * records carry them all but arenas); summed: a family whose series add
 * up to a whole (bytes held, counts), where the tags a report does not
 * list are one series of their sum (a peak or a limit summed would be
 * none). The untagged arenas get families of their own rather than a
 * tag="untagged" series, which a tag of that name would collide with. */
#define RA_TAG_FAMILIES(X)                                                    \
    X("regionalloc_tag_allocated_bytes",                                     \
      "regionalloc_untagged_allocated_bytes", "gauge",                       \
      "Bytes in live blocks (usable sizes).", allocated, true)               \
    X("regionalloc_tag_active_bytes", "regionalloc_untagged_active_bytes",   \
      "gauge", "Bytes in pages holding live blocks.", active, true)          \
    X("regionalloc_tag_resident_bytes",                                      \
      "regionalloc_untagged_resident_bytes", "gauge",                        \
      "Resident bytes: a tag's as the kernel last counted its region, "      \
      "followed since by its commits; untagged, jemalloc's estimate.",       \
      resident, true)                                                        \
    X("regionalloc_tag_rss_bytes", NULL, "gauge",                            \
      "Resident bytes of the tag's region as the kernel last counted them "  \
      "(pagemap; the zero page not counted).",                               \
      rss, true)                                                             \
    X("regionalloc_tag_metadata_bytes", NULL, "gauge",                       \
      "Of the region's resident bytes, those of its arenas' bookkeeping.",   \
      metadata, true)                                                        \
    X("regionalloc_tag_mapped_bytes", "regionalloc_untagged_mapped_bytes",   \
      "gauge", "Bytes mapped (committed).", mapped, true)                    \
    X("regionalloc_tag_peak_mapped_bytes", NULL, "gauge",                    \
      "High-water mark of the region's committed bytes.", peak_mapped,       \
      false)                                                                 \
    X("regionalloc_tag_dirty_bytes", "regionalloc_untagged_dirty_bytes",     \
      "gauge", "Unused pages not yet returned to the OS.", dirty, true)      \
    X("regionalloc_tag_allocations_total",                                   \
      "regionalloc_untagged_allocations_total", "counter",                   \
      "Allocations made (untagged: blocks handed out by the arenas).",       \
      nmalloc, true)                                                         \
    X("regionalloc_tag_frees_total", "regionalloc_untagged_frees_total",     \
      "counter", "Frees made (untagged: blocks taken back by the arenas).",  \
      ndalloc, true)                                                         \
    X("regionalloc_tag_purges_total", "regionalloc_untagged_purges_total",   \
      "counter", "Purges asked with ra_tag_purge() or ra_purge_all().",      \
      purges, true)                                                          \
    X("regionalloc_tag_limit_bytes", NULL, "gauge",                          \
      "The tag's hard limit on mapped bytes (0: none).", limit, false)       \
    X("regionalloc_tag_soft_limit_bytes", NULL, "gauge",                     \
      "The tag's soft limit on mapped bytes (0: none).", soft_limit, false)  \
    X("regionalloc_tag_limit_failures_total", NULL, "counter",               \
      "Allocations refused by the tag's hard limit.", limit_failures, true)  \
    X("regionalloc_tag_arenas", NULL, "gauge",                               \
      "jemalloc arenas in the tag's pool.", arenas, true)

/* The parts of the process's RssAnon, in the order every report gives
 * them: X(field), whose name is the part's (the JSON key in "parts", the
 * label part="..."). */
#define RA_PARTS_LIST(X) X(tags) X(untagged) X(metadata) X(library) X(other)

/* The family of the parts, a series a part. */
#define RA_PARTS_FAMILY "regionalloc_process_resident_bytes"
#define RA_PARTS_FAMILY_HELP                                                  \
    "The parts of the process's RssAnon, each counted by the kernel "        \
    "(other: what no part names)."

/* The kernel's figures beside them, a family each: X(family, help,
 * field). */
#define RA_PARTS_KERNEL_FAMILIES(X)                                           \
    X("regionalloc_process_rss_anon_bytes",                                  \
      "The process's resident anonymous memory (RssAnon).", rss_anon)        \
    X("regionalloc_process_rss_file_bytes",                                  \
      "The process's resident file pages (RssFile).", rss_file)              \
    X("regionalloc_process_page_tables_bytes",                               \
      "The kernel's page tables for the process (VmPTE).", page_tables)      \
    X("regionalloc_process_parts_over_bytes",                                \
      "How far the named parts exceed RssAnon (0: they do not).", over)

/* The cgroup's, when the process is in one: X(family, field), and their
 * help. */
#define RA_PARTS_CGROUP_FAMILIES(X)                                           \
    X("regionalloc_cgroup_current_bytes", cgroup_current)                    \
    X("regionalloc_cgroup_anon_bytes", cgroup_anon)                          \
    X("regionalloc_cgroup_file_bytes", cgroup_file)                          \
    X("regionalloc_cgroup_limit_bytes", cgroup_limit)
#define RA_PARTS_CGROUP_HELP                                                  \
    "The process's cgroup v2: memory.current, memory.stat's anon and file, " \
    "the limit (memory.high, else memory.max; 0: none)."

/* The text reports' "process:" lines, printf formats whose every %s is a
 * size in bytes as the text shows them: the parts; how far the named parts
 * exceed RssAnon, when they do; the kernel's other figures on a second
 * line; the cgroup's on it, when there is one (its limit, or
 * RA_PARTS_TEXT_NO_LIMIT). */
#define RA_PARTS_TEXT                                                         \
    "process: rss_anon %s = tags %s + untagged %s + metadata %s "            \
    "+ library %s + other %s"
#define RA_PARTS_TEXT_OVER " (the named parts exceed it by %s)"
/* Where jemalloc's mappings are not seen (a build without the override). */
#define RA_PARTS_TEXT_ESTIMATE                                                \
    " (jemalloc's mappings not seen: untagged is its estimate, metadata in it)"
#define RA_PARTS_TEXT_KERNEL "\n         rss_file %s, page tables %s"
#define RA_PARTS_TEXT_CGROUP ", cgroup %s (anon %s, file %s) of %s"
#define RA_PARTS_TEXT_NO_LIMIT "no limit"

#endif
