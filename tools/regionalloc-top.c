/* regionalloc-top: shows the live stats segments that processes using
 * libregionalloc publish with REGIONALLOC_SHM=1 (doc/shm.md) as a table
 * refreshed in place, one table, one JSON document, or a list of the
 * publishers. A plain C program: it reads files and never links the
 * library, so watching a process neither stops nor changes it. This file
 * owns the options and the one table or document; top_live.c the live
 * view, top_table.c the table, top_list.c the list and --clean;
 * segment.c reads the segments, format.c writes the text. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "format.h"
#include "top.h"

#define DEFAULT_DIR "/dev/shm"

/* --once and --json: one read, or two an interval apart for the rates. */
static int show_once(const struct options *o, int dirfd)
{
    struct segment_copy first = {0}, second = {0};
    struct view v = {.now = &first, .pid = o->pid, .tree = o->tree,
                     .once = true};
    char name[SEGMENT_NAME_MAX], why[WHY_MAX];
    int status = read_segment_or_say(PROGRAM, dirfd, o->dir, o->pid, &first);

    if (status == 0 && !o->json && o->interval_given) {
        sleep_ns(o->interval_ns);
        switch (read_pid_segment(dirfd, o->pid, &second, name, why)) {
        case READ_OK:
            v.now = &second;
            v.before = &first;
            break;
        case READ_GONE: /* it exited: the first read is all there is */
            break;
        case READ_FAILED:
        case READ_FOREIGN:
        case READ_STALE:
        case READ_VERSION:
            print_segment_error(PROGRAM, o->dir, name, why);
            status = 1;
        }
    }
    v.stale = process_gone(o->pid);
    if (status == 0 && o->json)
        print_json(v.now, v.stale);
    else if (status == 0 && print_table(&v, o->sort))
        status = 1;
    free(first.records);
    free(second.records);
    return status;
}

/* -- options ------------------------------------------------------------- */

static void print_usage(FILE *out)
{
    fputs("usage: " PROGRAM " [options] [PID]\n"
          "Shows each tag's memory in a process that runs libregionalloc "
          "with\nREGIONALLOC_SHM=1, from its stats segment "
          "/dev/shm/regionalloc.PID, refreshed\nin place until q or "
          "Ctrl-C. Without PID, lists the processes that publish.\n\n"
          "  -i, --interval SECONDS  refresh every SECONDS (default 1); with "
          "--once,\n"
          "                          read twice SECONDS apart to show rates\n"
          "  -s, --sort KEY          allocated (default), rss, mapped or "
          "name\n"
          "      --tree              show children under their parent (tag "
          "trees), with\n"
          "                          the subtree's figures\n"
          "      --once              print one table and exit\n"
          "      --json              print one JSON document and exit\n"
          "      --clean             remove your stale segments (of "
          "processes gone)\n"
          "  -d, --dir DIR           read segments in DIR, not /dev/shm\n"
          "  -h, --help              print this help and exit\n",
          out);
}

/* Exits 2 after one line on what is wrong and the usage. */
__attribute__((noreturn)) static void usage_error(const char *what,
                                                  const char *arg)
{
    fprintf(stderr, PROGRAM ": %s%s%s\n", what, arg ? ": " : "",
            arg ? arg : "");
    print_usage(stderr);
    exit(2);
}

static uint64_t parse_interval(const char *arg)
{
    char *end;
    double s;

    errno = 0;
    s = strtod(arg, &end);
    if (errno != 0 || end == arg || *end != '\0' || !(s >= 0.01) ||
        s > 3600.0)
        usage_error("--interval: expected seconds from 0.01 to 3600, as "
                    "0.5 or 2, not", arg);
    return (uint64_t)(s * NS_PER_S + 0.5);
}

static enum sort_key parse_sort(const char *arg)
{
    static const char *const keys[] = {"allocated", "rss", "mapped", "name"};

    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(arg, keys[i]) == 0)
            return (enum sort_key)i;
    usage_error("--sort: expected allocated, rss, mapped or name, not", arg);
}

static long parse_pid(const char *arg)
{
    char *end;
    long pid;

    errno = 0;
    pid = strtol(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || pid < 1 ||
        pid > INT32_MAX)
        usage_error("expected a process id, not", arg);
    return pid;
}

static struct options parse_options(int argc, char **argv)
{
    enum { OPT_ONCE = 256, OPT_JSON, OPT_CLEAN, OPT_TREE };
    static const struct option longs[] = {
        {"interval", required_argument, NULL, 'i'},
        {"sort", required_argument, NULL, 's'},
        {"dir", required_argument, NULL, 'd'},
        {"once", no_argument, NULL, OPT_ONCE},
        {"json", no_argument, NULL, OPT_JSON},
        {"clean", no_argument, NULL, OPT_CLEAN},
        {"tree", no_argument, NULL, OPT_TREE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct options o = {.dir = DEFAULT_DIR, .interval_ns = 1000000000u};
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":i:s:d:h", longs, NULL)) != -1) {
        switch (c) {
        case 'i':
            o.interval_ns = parse_interval(optarg);
            o.interval_given = true;
            break;
        case 's':
            o.sort = parse_sort(optarg);
            break;
        case 'd':
            o.dir = optarg;
            break;
        case OPT_ONCE:
            o.once = true;
            break;
        case OPT_JSON:
            o.json = true;
            break;
        case OPT_CLEAN:
            o.clean = true;
            break;
        case OPT_TREE:
            o.tree = true;
            break;
        case 'h':
            print_usage(stdout);
            exit(0);
        case ':':
            usage_error("missing the value of", argv[optind - 1]);
        default:
            usage_error("unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc)
        o.pid = parse_pid(argv[optind++]);
    if (optind < argc)
        usage_error("one PID at most; extra argument", argv[optind]);
    if (o.pid != 0 && o.clean)
        usage_error("--clean takes no PID", NULL);
    if (o.pid == 0 && o.json)
        usage_error("--json needs a PID", NULL);
    return o;
}

int main(int argc, char **argv)
{
    struct options o = parse_options(argc, argv);
    int dirfd, status;

    catch_bus_errors();
    dirfd = open(o.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        fprintf(stderr, PROGRAM ": %s: %s\n", o.dir, strerror(errno));
        return 1;
    }
    if (o.clean)
        status = clean_stale(&o, dirfd);
    else if (o.pid == 0)
        status = list_publishers(&o, dirfd);
    else if (o.once || o.json)
        status = show_once(&o, dirfd);
    else
        status = show_live(&o, dirfd);
    close(dirfd);
    return status;
}
