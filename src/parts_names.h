/* Floor: services. What the reports call the process's parts: one list,
 * which the process's own reports (report.c) and the tools that write
 * them again from its live segment (tools/) both expand, so that the text
 * lines, the JSON keys and the Prometheus families are the same wherever
 * they come from. Each list is an X macro over fields named alike in
 * struct ra__process_parts (output.h) and struct ra_shm_parts
 * (shm_layout.h). */
#ifndef RA_PARTS_NAMES_H
#define RA_PARTS_NAMES_H

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
#define RA_PARTS_TEXT_KERNEL "\n         rss_file %s, page tables %s"
#define RA_PARTS_TEXT_CGROUP ", cgroup %s (anon %s, file %s) of %s"
#define RA_PARTS_TEXT_NO_LIMIT "no limit"

#endif
