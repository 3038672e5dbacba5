/* regionalloc: one command to watch a program nobody changed.
 *
 *   regionalloc run [OPTIONS] -- PROGRAM [ARGS...]
 *   regionalloc top [regionalloc-top's OPTIONS] [PID]
 *   regionalloc report PID [--format text|json|prometheus] [--dir DIR]
 *
 * run sets the library's environment (doc/regionalloc.1), each value
 * checked first by the library's own syntax (src/sizes.c, values.c and
 * http_address.c, compiled in: what the library would refuse or ignore is
 * refused here, exit 2), and executes the program in its own place: the
 * same process, so its exit status, its signals and its pid are the
 * program's, and that pid, passed on, tells the program from the children
 * it starts. The library is found next to this tool (the build tree's
 * .libs, the install prefix's lib directories) or at the libdir it was
 * configured with, and named in LD_PRELOAD as tools/preload.c says. top
 * and report hand over to regionalloc-top, found the same way; report's
 * Prometheus text is written here from the live segment, with the names
 * and labels of the process's own /metrics. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_address.h"
#include "report_names.h"
#include "preload.h"
#include "segment.h"
#include "sizes.h"
#include "values.h"

#define PROGRAM "regionalloc"

#ifndef RA_LIBDIR
#define RA_LIBDIR "/usr/local/lib"
#endif
#ifndef RA_SONAME
#define RA_SONAME "libregionalloc.so"
#endif

static void print_usage(FILE *out)
{
    fputs("usage: " PROGRAM " run [OPTIONS] -- PROGRAM [ARGS...]\n"
          "       " PROGRAM " top [regionalloc-top's options] [PID]\n"
          "       " PROGRAM " report PID [--format text|json|prometheus] "
          "[--dir DIR]\n"
          "\n"
          "run's options:\n"
          "      --thread-tags[=SPEC]  tag threads by name (default: on, "
          "SPEC *)\n"
          "      --no-thread-tags      do not\n"
          "      --http[=ADDR]         serve the page and /metrics (default "
          "127.0.0.1:0);\n"
          "                            the page's URL is printed on stderr\n"
          "      --report[=FILE]       write the per-tag report at exit "
          "(default stderr)\n"
          "      --format FORMAT       the report's format: text, json or "
          "prometheus\n"
          "      --checkpoints[=FILE]  write the checkpoint table at exit\n"
          "      --prof[=RATE]         sample allocation sites every RATE "
          "bytes (default 512K)\n"
          "      --limits SPEC         budgets by tag name, as "
          "REGIONALLOC_LIMITS\n"
          "      --memory-limit SIZE   hold the process under SIZE, or "
          "N% of its cgroup's\n"
          "                            limit (REGIONALLOC_MEMORY_LIMIT)\n"
          "      --no-shm              do not publish the live segment\n"
          "      --children            watch the program's children too: "
          "a report each\n"
          "                            (FILE.PID), a server, a segment\n"
          "  -h, --help                print this help and exit\n",
          out);
}

/* Exits 2 after one line on what is wrong and the usage. */
__attribute__((noreturn)) static void usage_error(const char *what,
                                                  const char *arg)
{
    if (arg != NULL)
        fprintf(stderr, PROGRAM ": %s '%s'\n", what, arg);
    else
        fprintf(stderr, PROGRAM ": %s\n", what);
    print_usage(stderr);
    exit(2);
}

/* -- where the library and the other tool are ------------------------------ */

/* The directory this program runs from, without the trailing slash: "" if
 * unknown. */
static void own_directory(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    char *slash;

    buf[n > 0 ? n : 0] = '\0';
    slash = strrchr(buf, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        buf[0] = '\0';
}

static bool readable(const char *path)
{
    return access(path, R_OK) == 0;
}

/* The library to preload: REGIONALLOC_LIBRARY if set, else the build
 * tree's (this tool is in tools/, the library in .libs/), else the
 * install's (lib/ next to bin/, or the configured libdir). */
static bool find_library(char *buf, size_t size)
{
    const char *set = getenv("REGIONALLOC_LIBRARY");
    char dir[PATH_MAX];
    const char *tries[] = {"%s/../.libs/" RA_SONAME, "%s/../lib/" RA_SONAME,
                           "%s/../lib64/" RA_SONAME};

    if (set != NULL && set[0] != '\0') {
        snprintf(buf, size, "%s", set);
        return readable(buf);
    }
    own_directory(dir, sizeof dir);
    for (size_t i = 0; dir[0] != '\0' && i < sizeof tries / sizeof tries[0];
         i++) {
        snprintf(buf, size, tries[i], dir);
        if (readable(buf))
            return true;
    }
    snprintf(buf, size, "%s/%s", RA_LIBDIR, RA_SONAME);
    return readable(buf);
}

/* Executes regionalloc-top with args (argv[0] included): the one next to
 * this tool, else the one on PATH. Returns only on failure. */
static int exec_top(char **args)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];

    own_directory(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/regionalloc-top", dir);
    if (dir[0] != '\0' && access(path, X_OK) == 0)
        execv(path, args);
    execvp("regionalloc-top", args);
    fprintf(stderr, PROGRAM ": cannot run regionalloc-top: %s\n",
            strerror(errno));
    return 127;
}

/* -- run ------------------------------------------------------------------- */

/* SIGPIPE as run found it. run's own lines on stderr (a bad option, a
 * program or library not found) must not end it with SIGPIPE when stderr
 * is a pipe that nobody reads: it exits 2, 126 or 127 as it says. SIGPIPE
 * is ignored while run runs, and given back before the program is
 * executed, which would inherit an ignored signal. */
static struct sigaction sigpipe_found;

static void ignore_sigpipe(void)
{
    struct sigaction ignore = {.sa_handler = SIG_IGN};

    sigemptyset(&ignore.sa_mask);
    (void)sigaction(SIGPIPE, &ignore, &sigpipe_found);
}

static void restore_sigpipe(void)
{
    (void)sigaction(SIGPIPE, &sigpipe_found, NULL);
}

static void set(const char *var, const char *value)
{
    if (setenv(var, value, 1) != 0) {
        fprintf(stderr, PROGRAM ": %s: %s\n", var, strerror(errno));
        exit(127);
    }
}

/* Exits 2 when why is not NULL: what the library would refuse or ignore is
 * refused here, by the library's own syntax (src/sizes.c, values.c,
 * http_address.c), after the option, the part of its value at fault (len
 * bytes at at) and why, and the usage. */
static void refuse(const char *option, const char *at, size_t len,
                   const char *why)
{
    if (why == NULL)
        return;
    fprintf(stderr, PROGRAM ": %s '%.*s': %s\n", option,
            len > INT_MAX ? INT_MAX : (int)len, at, why);
    print_usage(stderr);
    exit(2);
}

/* The checks of run's options that set the library's variables, by the
 * library's own syntax: NULL when the library takes the value, else why
 * not. */
static const char *check_format(const char *value)
{
    ra_format_t format;

    return ra__parse_format(value, &format);
}

static const char *check_prof(const char *value)
{
    size_t interval;

    return ra__parse_prof_interval(value, &interval);
}

static const char *check_memory_limit(const char *value)
{
    size_t bytes;
    unsigned percent;

    return ra__parse_memory_limit(value, &bytes, &percent);
}

/* The library's rule (REGIONALLOC_HTTP_ALLOW_REMOTE=1 allows a remote
 * address) and its socket, opened and closed again: a port taken or an
 * address this machine does not have is refused here too. */
static const char *check_http(const char *value)
{
    const char *allow = getenv("REGIONALLOC_HTTP_ALLOW_REMOTE");

    return ra__http_check(value, allow != NULL && strcmp(allow, "1") == 0);
}

/* run's options that set a variable of the library's, by index. */
enum run_value {
    V_THREAD_TAGS, V_HTTP, V_REPORT, V_FORMAT, V_CHECKPOINTS, V_PROF,
    V_LIMITS, V_MEMORY_LIMIT, V_COUNT
};

static const struct run_option {
    const char *name; /* without the "--" */
    int has_arg;
    const char *given; /* the value of the option given without one */
    const char *var;
    /* The value's check; a list's names the entry at fault. */
    const char *(*check)(const char *value);
    const char *(*check_list)(const char *spec, const char **at,
                              size_t *len);
} run_options[V_COUNT] = {
    [V_THREAD_TAGS] = {"thread-tags", optional_argument, "*",
                       "REGIONALLOC_THREAD_TAGS", NULL,
                       ra__check_thread_tags},
    [V_HTTP] = {"http", optional_argument, "127.0.0.1:0", "REGIONALLOC_HTTP",
                check_http, NULL},
    [V_REPORT] = {"report", optional_argument, "stderr", "REGIONALLOC_STATS",
                  ra__parse_output, NULL},
    [V_FORMAT] = {"format", required_argument, NULL,
                  "REGIONALLOC_STATS_FORMAT", check_format, NULL},
    [V_CHECKPOINTS] = {"checkpoints", optional_argument, "stderr",
                       "REGIONALLOC_CHECKPOINTS", ra__parse_output, NULL},
    [V_PROF] = {"prof", optional_argument, "512K", "REGIONALLOC_PROF",
                check_prof, NULL},
    [V_LIMITS] = {"limits", required_argument, NULL, "REGIONALLOC_LIMITS",
                  NULL, ra__check_limits},
    [V_MEMORY_LIMIT] = {"memory-limit", required_argument, NULL,
                        "REGIONALLOC_MEMORY_LIMIT", check_memory_limit, NULL},
};

/* getopt_long's values: run_options[i] is OPT_VALUE + i. */
enum {
    OPT_VALUE = 256,
    OPT_NO_THREAD_TAGS = OPT_VALUE + V_COUNT,
    OPT_NO_SHM,
    OPT_CHILDREN
};
#define RUN_GETOPT_OPTIONS (V_COUNT + 5)

static void run_getopt_options(struct option out[RUN_GETOPT_OPTIONS])
{
    static const struct option flags[] = {
        {"no-thread-tags", no_argument, NULL, OPT_NO_THREAD_TAGS},
        {"no-shm", no_argument, NULL, OPT_NO_SHM},
        {"children", no_argument, NULL, OPT_CHILDREN},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    _Static_assert(V_COUNT + sizeof flags / sizeof flags[0] ==
                       RUN_GETOPT_OPTIONS,
                   "room for every option");

    for (unsigned i = 0; i < V_COUNT; i++)
        out[i] = (struct option){run_options[i].name, run_options[i].has_arg,
                                 NULL, OPT_VALUE + (int)i};
    memcpy(out + V_COUNT, flags, sizeof flags);
}

/* values[i] becomes option i's value (its default when given none), or
 * the process exits 2 (refuse). */
static void take_value(const char **values, unsigned i, const char *arg)
{
    const struct run_option *o = &run_options[i];
    /* A required argument is never NULL; "" keeps the analyzers sure. */
    const char *value = arg != NULL ? arg : o->given != NULL ? o->given : "";
    const char *at = value, *why;
    size_t len = strlen(value);
    char option[32];

    /* Checked first: a list's check moves at and len to the entry. */
    why = o->check_list != NULL ? o->check_list(value, &at, &len)
                                : o->check(value);
    snprintf(option, sizeof option, "--%s", o->name);
    refuse(option, at, len, why);
    values[i] = value;
}

/* Sets LD_PRELOAD to library, after an existing LD_PRELOAD (kept).
 * Returns 0, or 127 after a line on stderr: a library LD_PRELOAD cannot
 * name would leave the program unwatched without a word. */
static int set_preload(const char *library)
{
    char name[PATH_MAX], why[PATH_MAX + 256], *preload;
    const char *old = getenv("LD_PRELOAD");
    size_t n;

    if (preload_name(library, name, sizeof name, why, sizeof why)) {
        fprintf(stderr, PROGRAM ": cannot preload %s: LD_PRELOAD splits "
                "paths at spaces and colons, and %s\n", library, why);
        return 127;
    }
    if (old == NULL || old[0] == '\0') {
        set("LD_PRELOAD", name);
        return 0;
    }
    n = strlen(old) + 1 + strlen(name) + 1;
    preload = malloc(n);
    if (preload == NULL) {
        perror(PROGRAM);
        return 127;
    }
    snprintf(preload, n, "%s:%s", old, name);
    set("LD_PRELOAD", preload);
    free(preload); /* setenv copied it */
    return 0;
}

/* The library's environment for the program (doc/regionalloc.1). */
static void set_environment(const char *const *values, bool shm,
                            bool children)
{
    char pid[32];

    /* This process becomes the program: its pid is the program's. */
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    set("REGIONALLOC_PROGRAM_PID", pid);
    if (children)
        set("REGIONALLOC_CHILDREN", "1");
    for (unsigned i = 0; i < V_COUNT; i++)
        if (values[i] != NULL)
            set(run_options[i].var, values[i]);
    if (values[V_HTTP] != NULL)
        set("REGIONALLOC_HTTP_ANNOUNCE", "1");
    if (shm)
        set("REGIONALLOC_SHM", "1");
}

static int run(int argc, char **argv)
{
    struct option options[RUN_GETOPT_OPTIONS];
    const char *values[V_COUNT] = {[V_THREAD_TAGS] = "*"};
    bool shm = true, children = false;
    char library[PATH_MAX];
    int c, rc;

    run_getopt_options(options);
    opterr = 0;
    /* '+': the options end at the program's name even without "--". */
    while ((c = getopt_long(argc, argv, "+:h", options, NULL)) != -1) {
        if (c >= OPT_VALUE && c < OPT_VALUE + V_COUNT) {
            take_value(values, (unsigned)(c - OPT_VALUE), optarg);
            continue;
        }
        switch (c) {
        case OPT_NO_THREAD_TAGS:
            values[V_THREAD_TAGS] = NULL;
            break;
        case OPT_NO_SHM:
            shm = false;
            break;
        case OPT_CHILDREN:
            children = true;
            break;
        case 'h':
            print_usage(stdout);
            return 0;
        case ':':
            usage_error("missing the value of", argv[optind - 1]);
        default:
            usage_error("unknown option", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        usage_error("run: no program given", NULL);
    if (values[V_FORMAT] != NULL && values[V_REPORT] == NULL)
        values[V_REPORT] = "stderr";
    if (!find_library(library, sizeof library)) {
        fprintf(stderr, PROGRAM ": cannot find %s (looked next to this "
                "program and in %s; set REGIONALLOC_LIBRARY to its path)\n",
                RA_SONAME, RA_LIBDIR);
        return 127;
    }
    rc = set_preload(library);
    if (rc != 0)
        return rc;
    set_environment(values, shm, children);
    restore_sigpipe();
    execvp(argv[optind], argv + optind);
    rc = errno;
    ignore_sigpipe();
    fprintf(stderr, PROGRAM ": %s: %s\n", argv[optind], strerror(rc));
    return rc == ENOENT ? 127 : 126;
}

/* -- report ---------------------------------------------------------------- */

/* A label value as Prometheus' text format wants it: \\, \" and \n
 * escaped; other control bytes as the text \xNN, as the library writes
 * them. */
static void print_label(const char *name, size_t size)
{
    for (size_t i = 0; i < size && name[i] != '\0'; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '\\' || c == '"')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\\\x%02x", c);
        else
            putchar(c);
    }
}

/* The process's parts, with the names, labels and order of its /metrics
 * (report_names.h); the cgroup's when it is in one. */
static void print_prometheus_parts(const struct ra_shm_parts *p)
{
    printf("# TYPE " RA_PARTS_FAMILY " gauge\n");
#define PART(field)                                                           \
    printf(RA_PARTS_FAMILY "{part=\"" #field "\"} %" PRIu64 "\n", p->field);
    RA_PARTS_LIST(PART)
#undef PART
#define KERNEL(name, help, field)                                             \
    printf("# TYPE " name " gauge\n" name " %" PRIu64 "\n", p->field);
    RA_PARTS_KERNEL_FAMILIES(KERNEL)
#undef KERNEL
    if (!(p->flags & RA_SHM_PARTS_CGROUP))
        return;
#define CGROUP(name, field)                                                   \
    printf("# TYPE " name " gauge\n" name " %" PRIu64 "\n", p->field);
    RA_PARTS_CGROUP_FAMILIES(CGROUP)
#undef CGROUP
}

/* How the kernel's counts of the tags' regions stand, as the process's
 * /metrics has it: the live tags not counted yet, and the age of the
 * count taken longest ago (0: none counted), in seconds. */
static void print_prometheus_counts(const struct segment_copy *c)
{
    uint64_t unmeasured = 0, oldest = UINT64_MAX, age = 0;

    for (uint32_t r = 0; r < c->header.nrecords; r++) {
        const struct ra_shm_record *rec = &c->records[r];
        if (!(rec->flags & RA_SHM_RECORD_LIVE))
            continue;
        if (rec->rss_at_ns == 0)
            unmeasured++;
        else if (rec->rss_at_ns < oldest)
            oldest = rec->rss_at_ns;
    }
    if (oldest != UINT64_MAX && c->header.time_ns > oldest)
        age = c->header.time_ns - oldest;
    printf("# TYPE regionalloc_tag_rss_unmeasured gauge\n"
           "regionalloc_tag_rss_unmeasured %" PRIu64 "\n"
           "# TYPE regionalloc_tag_rss_oldest_age_seconds gauge\n"
           "regionalloc_tag_rss_oldest_age_seconds %" PRIu64 ".%09" PRIu64
           "\n",
           unmeasured, age / 1000000000u, age % 1000000000u);
}

/* Where a record holds the field of each per-tag family (report_names.h):
 * in its figures but metadata; 0 for arenas, which the segment lacks. The
 * untagged figures are at the same offsets in the header's. */
enum {
#define IN_FIGURES(f) IN_RECORD_##f = offsetof(struct ra_shm_record, figures.f)
    IN_FIGURES(allocated), IN_FIGURES(active), IN_FIGURES(resident),
    IN_FIGURES(rss), IN_FIGURES(mapped), IN_FIGURES(peak_mapped),
    IN_FIGURES(dirty), IN_FIGURES(nmalloc), IN_FIGURES(ndalloc),
    IN_FIGURES(purges), IN_FIGURES(limit), IN_FIGURES(soft_limit),
    IN_FIGURES(limit_failures),
#undef IN_FIGURES
    IN_RECORD_metadata = offsetof(struct ra_shm_record, metadata),
    IN_RECORD_arenas = 0,
};

/* The families of the process's /metrics that its segment has: per tag,
 * untagged, and the process's (report_prometheus.c, the library's source). */
static void print_prometheus(const struct segment_copy *c)
{
    static const struct {
        const char *tag, *untagged, *type;
        size_t offset;
    } families[] = {
#define FAMILY(name, untagged, type, help, field, summed)                     \
    {name, untagged, type, IN_RECORD_##field},
        RA_TAG_FAMILIES(FAMILY)
#undef FAMILY
    };
    const size_t n = sizeof families / sizeof families[0];
    uint64_t v;

    for (size_t f = 0; f < n; f++) {
        if (families[f].offset == 0)
            continue;
        printf("# TYPE %s %s\n", families[f].tag, families[f].type);
        for (uint32_t r = 0; r < c->header.nrecords; r++) {
            const struct ra_shm_record *rec = &c->records[r];
            if (!(rec->flags & RA_SHM_RECORD_LIVE))
                continue;
            memcpy(&v, (const char *)rec + families[f].offset, sizeof v);
            printf("%s{tag=\"", families[f].tag);
            print_label(rec->name, sizeof rec->name);
            printf("\"} %" PRIu64 "\n", v);
        }
    }
    printf("# TYPE regionalloc_tag_priority gauge\n");
    for (uint32_t r = 0; r < c->header.nrecords; r++) {
        const struct ra_shm_record *rec = &c->records[r];
        if (!(rec->flags & RA_SHM_RECORD_LIVE))
            continue;
        printf("regionalloc_tag_priority{tag=\"");
        print_label(rec->name, sizeof rec->name);
        printf("\"} %" PRId32 "\n", rec->priority);
    }
    for (size_t f = 0; f < n; f++) {
        if (families[f].untagged == NULL)
            continue;
        memcpy(&v,
               (const char *)&c->header.untagged + families[f].offset -
                   offsetof(struct ra_shm_record, figures),
               sizeof v);
        printf("# TYPE %s %s\n%s %" PRIu64 "\n", families[f].untagged,
               families[f].type, families[f].untagged, v);
    }
    printf("# TYPE regionalloc_jemalloc_allocated_bytes gauge\n"
           "regionalloc_jemalloc_allocated_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_jemalloc_active_bytes gauge\n"
           "regionalloc_jemalloc_active_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_jemalloc_resident_bytes gauge\n"
           "regionalloc_jemalloc_resident_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_jemalloc_mapped_bytes gauge\n"
           "regionalloc_jemalloc_mapped_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_process_rss_bytes gauge\n"
           "regionalloc_process_rss_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_library_allocated_bytes gauge\n"
           "regionalloc_library_allocated_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_leftover_bytes gauge\n"
           "regionalloc_leftover_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_memory_limit_bytes gauge\n"
           "regionalloc_memory_limit_bytes %" PRIu64 "\n"
           "# TYPE regionalloc_memory_pressure_level gauge\n"
           "regionalloc_memory_pressure_level %" PRIu32 "\n"
           "# TYPE regionalloc_memory_given_back_bytes_total counter\n"
           "regionalloc_memory_given_back_bytes_total %" PRIu64 "\n"
           "# TYPE regionalloc_memory_pressure_refusals_total counter\n"
           "regionalloc_memory_pressure_refusals_total %" PRIu64 "\n",
           c->header.process.allocated, c->header.process.active,
           c->header.process.resident, c->header.process.mapped,
           c->header.process.rss, c->header.library_allocated,
           c->header.leftovers_allocated, c->header.pressure.limit, c->header.pressure.level,
           c->header.pressure.given_back, c->header.pressure.refusals);
    print_prometheus_counts(c);
    print_prometheus_parts(&c->header.parts);
}

static long parse_pid(const char *s)
{
    char *end;
    long pid;

    errno = 0;
    pid = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || pid <= 0 ||
        pid > INT32_MAX)
        usage_error("report: expected a process id, not", s);
    return pid;
}

/* report's --format f, or exit 2 (refuse). */
static const char *format_option(const char *f)
{
    /* A required argument is never NULL; "" keeps the analyzers sure. */
    const char *value = f != NULL ? f : "";

    refuse("--format", value, strlen(value),
           check_format(value));
    return value;
}

static int report(int argc, char **argv)
{
    static const struct option options[] = {
        {"format", required_argument, NULL, 'f'},
        {"dir", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *format = "text", *dir = "/dev/shm";
    char path[PATH_MAX], name[SEGMENT_NAME_MAX], why[WHY_MAX], pid_arg[32];
    struct segment_copy copy = {0};
    enum read_result r;
    long pid;
    int c, dirfd;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:d:h", options, NULL)) != -1) {
        switch (c) {
        case 'f':
            format = format_option(optarg);
            break;
        case 'd':
            dir = optarg;
            break;
        case 'h':
            print_usage(stdout);
            return 0;
        case ':':
            usage_error("missing the value of", argv[optind - 1]);
        default:
            usage_error("unknown option", argv[optind - 1]);
        }
    }
    if (optind + 1 != argc)
        usage_error("report: expected one process id", NULL);
    pid = parse_pid(argv[optind]);
    if (strcmp(format, "prometheus") != 0) {
        /* regionalloc-top's table and JSON document, as they are. */
        char *args[] = {"regionalloc-top",
                        strcmp(format, "json") == 0 ? "--json" : "--once",
                        "--dir", (char *)dir, pid_arg, NULL};
        snprintf(pid_arg, sizeof pid_arg, "%ld", pid);
        return exec_top(args);
    }
    catch_bus_errors();
    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        fprintf(stderr, PROGRAM ": %s: %s\n", dir, strerror(errno));
        return 1;
    }
    r = read_pid_segment(dirfd, pid, &copy, name, why);
    close(dirfd);
    segment_path(path, sizeof path, dir, name);
    if (r == READ_GONE)
        snprintf(why, sizeof why, "no such segment: process %ld does not "
                 "publish (REGIONALLOC_SHM=1 turns it on)", pid);
    if (r != READ_OK) {
        fprintf(stderr, PROGRAM ": %s: %s\n", path, why);
        free(copy.records);
        return 1;
    }
    print_prometheus(&copy);
    free(copy.records);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage_error("expected a command: run, top or report", NULL);
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "run") == 0) {
        ignore_sigpipe();
        return run(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "report") == 0)
        return report(argc - 1, argv + 1);
    if (strcmp(argv[1], "top") == 0) {
        argv[1] = "regionalloc-top";
        return exec_top(argv + 1);
    }
    usage_error("unknown command", argv[1]);
}
