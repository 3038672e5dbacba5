/* regionalloc run's options: each value checked first by the library's
 * own syntax (src/sizes.c, values.c and http_address.c, compiled in: what
 * the library would refuse or ignore is refused here, exit 2), and the
 * environment they make for the program. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_address.h"
#include "regionalloc.h"
#include "sizes.h"
#include "values.h"

void set_variable(const char *var, const char *value)
{
    if (setenv(var, value, 1) != 0) {
        fprintf(stderr, PROGRAM ": %s: %s\n", var, strerror(errno));
        exit(127);
    }
}

/* The checks of run's options that set the library's variables, by the
 * library's own syntax: NULL when the library takes the value, else why
 * not. */
const char *check_format(const char *value)
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

/* run's options that set a variable of the library's, by enum run_value
 * (regionalloc.h). */
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
    OPT_CHILDREN,
    OPT_BY_LIBRARY
};
#define RUN_GETOPT_OPTIONS (V_COUNT + 6)

static void run_getopt_options(struct option out[RUN_GETOPT_OPTIONS])
{
    static const struct option flags[] = {
        {"no-thread-tags", no_argument, NULL, OPT_NO_THREAD_TAGS},
        {"no-shm", no_argument, NULL, OPT_NO_SHM},
        {"children", no_argument, NULL, OPT_CHILDREN},
        {"by-library", no_argument, NULL, OPT_BY_LIBRARY},
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

/* Takes the option c of getopt_long (a value, a flag or --help) into *s,
 * or exits 2 for an option run does not know or one without its value.
 * Returns true for --help. */
static bool take_option(int c, char **argv, struct run_settings *s)
{
    if (c >= OPT_VALUE && c < OPT_VALUE + V_COUNT) {
        take_value(s->values, (unsigned)(c - OPT_VALUE), optarg);
        s->thread_tags_given |= c == OPT_VALUE + V_THREAD_TAGS;
        return false;
    }
    switch (c) {
    case OPT_NO_THREAD_TAGS:
        s->values[V_THREAD_TAGS] = NULL;
        s->thread_tags_given = true;
        break;
    case OPT_BY_LIBRARY:
        s->by_library = true;
        break;
    case OPT_NO_SHM:
        s->shm = false;
        break;
    case OPT_CHILDREN:
        s->children = true;
        break;
    case 'h':
        return true;
    case ':':
        usage_error("missing the value of", argv[optind - 1]);
    default:
        usage_error("unknown option", argv[optind - 1]);
    }
    return false;
}

int parse_run_options(int argc, char **argv, struct run_settings *s)
{
    struct option options[RUN_GETOPT_OPTIONS];
    int c;

    *s = (struct run_settings){.values = {[V_THREAD_TAGS] = "*"},
                               .shm = true};
    run_getopt_options(options);
    opterr = 0;
    /* '+': the options end at the program's name even without "--". */
    while ((c = getopt_long(argc, argv, "+:h", options, NULL)) != -1)
        if (take_option(c, argv, s)) {
            print_usage(stdout);
            return 0;
        }
    if (optind >= argc)
        usage_error("run: no program given", NULL);
    if (s->values[V_FORMAT] != NULL && s->values[V_REPORT] == NULL)
        s->values[V_REPORT] = "stderr";
    /* The default tags by thread name would give every thread a base tag
     * (each has a name, the main thread the program's), and a tag on the
     * stack wins over the calling object's: nothing would be tagged by
     * library. So --by-library replaces them; rules given with it keep
     * the threads they name, and only those, from the objects' tags. */
    if (s->by_library && !s->thread_tags_given)
        s->values[V_THREAD_TAGS] = NULL;
    return optind;
}

void set_run_environment(const struct run_settings *s)
{
    char pid[32];

    /* This process becomes the program: its pid is the program's. */
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    set_variable("REGIONALLOC_PROGRAM_PID", pid);
    if (s->children)
        set_variable("REGIONALLOC_CHILDREN", "1");
    if (s->by_library)
        set_variable("REGIONALLOC_TAG_BY", "library");
    for (unsigned i = 0; i < V_COUNT; i++)
        if (s->values[i] != NULL)
            set_variable(run_options[i].var, s->values[i]);
    if (s->values[V_HTTP] != NULL)
        set_variable("REGIONALLOC_HTTP_ANNOUNCE", "1");
    if (s->shm)
        set_variable("REGIONALLOC_SHM", "1");
}
