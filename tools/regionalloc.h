/* What regionalloc's files share, by the file that owns each part.
 * regionalloc.c dispatches the commands and owns report; run.c starts the
 * program, with the environment run_options.c makes of run's options and
 * PYTHONMALLOC for a Python program (python_program.c finds one, with
 * python_elf.c; python_options.c reads its options); prometheus.c writes report's Prometheus text; locate.c finds the
 * library and regionalloc-top; usage.c says how to call the tool. */
#ifndef REGIONALLOC_TOOL_H
#define REGIONALLOC_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "segment.h"

#define PROGRAM "regionalloc"

#ifndef RA_LIBDIR
#define RA_LIBDIR "/usr/local/lib"
#endif
#ifndef RA_SONAME
#define RA_SONAME "libregionalloc.so"
#endif

/* -- usage.c -------------------------------------------------------------- */

void print_usage(FILE *out);

/* Exits 2 after one line on what is wrong (and arg, unless NULL) and the
 * usage. */
__attribute__((noreturn)) void usage_error(const char *what,
                                           const char *arg);

/* Exits 2 when why is not NULL: what the library would refuse or ignore is
 * refused here, by the library's own syntax (src/sizes.c, values.c,
 * http_address.c), after the option, the part of its value at fault (len
 * bytes at at) and why, and the usage. */
void refuse(const char *option, const char *at, size_t len, const char *why);

/* -- locate.c ------------------------------------------------------------- */

/* The library to preload, into buf: REGIONALLOC_LIBRARY if set, else the
 * build tree's (this tool is in tools/, the library in .libs/), else the
 * install's (lib/ next to bin/, or the configured libdir). Returns false
 * if it is not readable. */
bool find_library(char *buf, size_t size);

/* Executes regionalloc-top with args (argv[0] included): the one next to
 * this tool, else the one on PATH. Returns only on failure: 127. */
int exec_top(char **args);

/* -- run_options.c -------------------------------------------------------- */

/* run's options that set a variable of the library's, by index. */
enum run_value {
    V_THREAD_TAGS, V_HTTP, V_REPORT, V_FORMAT, V_CHECKPOINTS, V_PROF,
    V_LIMITS, V_MEMORY_LIMIT, V_COUNT
};

/* run's options as given: each variable's value (NULL: not set), whether
 * the program publishes its live segment, whether its children are
 * watched too, whether allocations are tagged by the calling object
 * (--by-library), and whether --thread-tags or --no-thread-tags was
 * given (else --by-library turns the default tags by thread name off). */
struct run_settings {
    const char *values[V_COUNT];
    bool shm, children, by_library, thread_tags_given;
};

/* Parses run's options (argv[0] is "run") into *s. Returns the index in
 * argv of the program's name, or 0 after --help printed the usage; exits
 * 2 after saying what is wrong. */
int parse_run_options(int argc, char **argv, struct run_settings *s);

/* Sets the library's environment for the program (doc/regionalloc.1): the
 * variables of *s, and the program's pid, which is this process's. */
void set_run_environment(const struct run_settings *s);

/* setenv, or exits 127 after a line on stderr. */
void set_variable(const char *var, const char *value);

/* NULL when the library takes value as REGIONALLOC_STATS_FORMAT, else why
 * not. */
const char *check_format(const char *value);

/* -- python_elf.c, python_options.c, python_program.c --------------------- */

/* What a program is to Python: not Python, Python's own interpreter (its
 * arguments start with the interpreter's options), or a program that
 * embeds Python (its arguments are its own). */
enum python_kind { NOT_PYTHON, PYTHON_INTERPRETER, PYTHON_EMBEDDED };

/* The PYTHONMALLOC a program is given: none, "malloc", "malloc_debug". */
enum python_malloc { PM_NONE, PM_MALLOC, PM_MALLOC_DEBUG };

/* What the ELF file open at fd is (an interpreter exports Py_BytesMain or
 * Py_Main, an embedder links libpython3); NOT_PYTHON for a file that is
 * not a readable 64-bit ELF program of this machine. Reads the file with
 * bounded reads, allocates nothing. */
enum python_kind elf_python_kind(int fd);

/* The PYTHONMALLOC a program of that kind, run with args (n words after
 * its name), is given, by its options (an interpreter's) and
 * PYTHONDEVMODE. */
enum python_malloc python_malloc_for(enum python_kind kind,
                                     char *const *args, size_t n);

/* Sets PYTHONMALLOC for the program argv[0] (run with argv[1] to
 * argv[argc - 1]) when it is Python and the user has not set it; else
 * leaves the environment as it is. Prints nothing; exits 127 only when
 * setenv fails (set_variable). */
void set_python_malloc(char *const *argv, size_t argc);

/* -- run.c ---------------------------------------------------------------- */

/* regionalloc run: executes the program with the library preloaded in
 * this process's place. Returns only when that fails (126, 127) or after
 * --help (0); exits 2 on a bad option. */
int run(int argc, char **argv);

/* -- prometheus.c --------------------------------------------------------- */

/* The families of the process's /metrics that its segment copy has: per
 * tag, untagged, and the process's, on stdout. */
void print_prometheus(const struct segment_copy *c);

#endif
