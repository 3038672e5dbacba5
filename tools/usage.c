/* How to call regionalloc: the usage, and the refusals of what it cannot
 * take, each one line and the usage, exit 2. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "regionalloc.h"

void print_usage(FILE *out)
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
          "      --by-library          tag by the object (the program, a library) "
          "whose\n"
          "                            code allocates, under the tag libraries; "
          "no tags by\n"
          "                            thread name unless --thread-tags is "
          "given\n"
          "      --http[=ADDR]         serve the dashboard and /metrics (default "
          "127.0.0.1:0);\n"
          "                            the dashboard's URL is printed on stderr\n"
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
          "  -h, --help                print this help and exit\n"
          "\n"
          "run gives a Python program PYTHONMALLOC=malloc (malloc_debug "
          "under -X dev), so\n"
          "that its objects are malloc's, unless PYTHONMALLOC is set or its "
          "interpreter\n"
          "ignores it (-E, -I). Python: a program named python, python3, "
          "python3.11...\n"
          "(or a link to one), an ELF that exports Py_BytesMain or links "
          "libpython3, or\n"
          "a script whose #! line names one (env and env -S too), or env "
          "running one.\n",
          out);
}

void usage_error(const char *what, const char *arg)
{
    if (arg != NULL)
        fprintf(stderr, PROGRAM ": %s '%s'\n", what, arg);
    else
        fprintf(stderr, PROGRAM ": %s\n", what);
    print_usage(stderr);
    exit(2);
}

void refuse(const char *option, const char *at, size_t len, const char *why)
{
    if (why == NULL)
        return;
    fprintf(stderr, PROGRAM ": %s '%.*s': %s\n", option,
            len > INT_MAX ? INT_MAX : (int)len, at, why);
    print_usage(stderr);
    exit(2);
}
