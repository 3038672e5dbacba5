/* regionalloc run: the program executed in this process's place, with
 * the library found (locate.c) and named in LD_PRELOAD as preload.c says,
 * the environment of run's options (run_options.c), and PYTHONMALLOC for
 * a Python program (python_program.c). The same process, so its exit
 * status, its signals and its pid are the program's, and that pid, passed
 * on, tells the program from the children it starts. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload.h"
#include "regionalloc.h"

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
        set_variable("LD_PRELOAD", name);
        return 0;
    }
    n = strlen(old) + 1 + strlen(name) + 1;
    preload = malloc(n);
    if (preload == NULL) {
        perror(PROGRAM);
        return 127;
    }
    snprintf(preload, n, "%s:%s", old, name);
    set_variable("LD_PRELOAD", preload);
    free(preload); /* setenv copied it */
    return 0;
}

int run(int argc, char **argv)
{
    struct run_settings settings;
    char library[PATH_MAX];
    int program, rc;

    ignore_sigpipe();
    program = parse_run_options(argc, argv, &settings);
    if (program == 0)
        return 0;
    if (!find_library(library, sizeof library)) {
        fprintf(stderr, PROGRAM ": cannot find %s (looked next to this "
                "program and in %s; set REGIONALLOC_LIBRARY to its path)\n",
                RA_SONAME, RA_LIBDIR);
        return 127;
    }
    rc = set_preload(library);
    if (rc != 0)
        return rc;
    set_run_environment(&settings);
    set_python_malloc(argv + program, (size_t)(argc - program));
    restore_sigpipe();
    execvp(argv[program], argv + program);
    rc = errno;
    ignore_sigpipe();
    fprintf(stderr, PROGRAM ": %s: %s\n", argv[program], strerror(rc));
    return rc == ENOENT ? 127 : 126;
}
