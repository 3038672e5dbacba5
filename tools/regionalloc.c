/* regionalloc: one command to watch a program nobody changed.
 *
 *   regionalloc run [OPTIONS] -- PROGRAM [ARGS...]
 *   regionalloc top [regionalloc-top's OPTIONS] [PID]
 *   regionalloc report PID [--format text|json|prometheus] [--dir DIR]
 *
 * run sets the library's environment (doc/regionalloc.1) and executes the
 * program in its own place (run.c, run_options.c). top and report hand
 * over to regionalloc-top (locate.c finds it); report's Prometheus text is
 * written here from the live segment (prometheus.c), with the names and
 * labels of the process's own /metrics. This file dispatches the commands
 * and parses report's. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "regionalloc.h"

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

    refuse("--format", value, strlen(value), check_format(value));
    return value;
}

/* report's Prometheus text from the segment of pid in dir. Returns the
 * exit status. */
static int report_prometheus(const char *dir, long pid)
{
    struct segment_copy copy = {0};
    int dirfd, status;

    catch_bus_errors();
    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        fprintf(stderr, PROGRAM ": %s: %s\n", dir, strerror(errno));
        return 1;
    }
    status = read_segment_or_say(PROGRAM, dirfd, dir, pid, &copy);
    close(dirfd);
    if (status == 0) {
        print_prometheus(&copy);
        status = fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
    }
    free(copy.records);
    return status;
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
    char pid_arg[32];
    long pid;
    int c;

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
    return report_prometheus(dir, pid);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage_error("expected a command: run, top or report", NULL);
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "run") == 0)
        return run(argc - 1, argv + 1);
    if (strcmp(argv[1], "report") == 0)
        return report(argc - 1, argv + 1);
    if (strcmp(argv[1], "top") == 0) {
        argv[1] = "regionalloc-top";
        return exec_top(argv + 1);
    }
    usage_error("unknown command", argv[1]);
}
