/* What PYTHONMALLOC a Python program is given (python_program.c finds
 * whether it is one): "malloc", so that every block of its objects is the
 * library's, or "malloc_debug" in its development mode (-X dev,
 * PYTHONDEVMODE), whose debug hooks PYTHONMALLOC=malloc would turn off;
 * nothing when the interpreter's own options say that it ignores the
 * PYTHON* variables (-E, -I), since the variable would then claim what
 * does not happen. The options are read as CPython 3's command line reads
 * them (Python/getopt.c): short ones alone or together (-IS), -W and -X
 * with their value in the same word or the next, --check-hash-based-pycs
 * with the next; they end at -c or -m, "-", "--", or the script. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "regionalloc.h"

struct python_options {
    bool ignores_environment, dev_mode;
};

/* Whether an -X value turns the development mode on: "dev" or "dev=...",
 * as CPython compares it. */
static bool dev_option(const char *value)
{
    return strncmp(value, "dev", 3) == 0 &&
           (value[3] == '\0' || value[3] == '=');
}

/* Reads a word of short options (group, after its '-'); next is the word
 * after it, or NULL. Returns how many more words the group takes as its
 * value (0 or 1), or -1 when the options end in it (-c, -m). */
static int short_options(const char *group, const char *next,
                         struct python_options *o)
{
    for (const char *c = group; *c != '\0'; c++) {
        const char *value = c[1] != '\0' ? c + 1 : next;

        switch (*c) {
        case 'E':
        case 'I':
            o->ignores_environment = true;
            break;
        case 'c':
        case 'm':
            return -1;
        case 'X':
            if (value != NULL && dev_option(value))
                o->dev_mode = true;
            return c[1] != '\0' ? 0 : 1;
        case 'W':
            return c[1] != '\0' ? 0 : 1;
        default:
            break;
        }
    }
    return 0;
}

/* The interpreter's options among args (n words, those after its name). */
static struct python_options read_options(char *const *args, size_t n)
{
    struct python_options o = {false, false};

    for (size_t i = 0; i < n; i++) {
        const char *a = args[i];
        int more;

        if (a[0] != '-' || a[1] == '\0' || strcmp(a, "--") == 0)
            break;
        if (a[1] == '-') {
            if (strcmp(a, "--check-hash-based-pycs") == 0)
                i++;
            continue;
        }
        more = short_options(a + 1, i + 1 < n ? args[i + 1] : NULL, &o);
        if (more < 0)
            break;
        i += (size_t)more;
    }
    return o;
}

enum python_malloc python_malloc_for(enum python_kind kind,
                                     char *const *args, size_t n)
{
    const char *dev = getenv("PYTHONDEVMODE");
    struct python_options o = {false, false};

    if (kind == NOT_PYTHON)
        return PM_NONE;
    if (kind == PYTHON_INTERPRETER)
        o = read_options(args, n);
    if (o.ignores_environment)
        return PM_NONE;
    if (o.dev_mode || (dev != NULL && dev[0] != '\0'))
        return PM_MALLOC_DEBUG;
    return PM_MALLOC;
}
