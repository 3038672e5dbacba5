/* Whether regionalloc run's program is Python, so that it is given
 * PYTHONMALLOC (python_options.c says which value): without it CPython
 * serves its small objects from pymalloc's arenas, mapped apart from
 * malloc, and the library would see none of them. A program is Python
 * when, found as execvp finds it, it or the file it links to is named
 * python, python3, python3.11 (python and digits and dots); when it is an
 * ELF program that exports Py_BytesMain or Py_Main, or links libpython3
 * (python_elf.c); when it is a script whose #! line names such a
 * program, directly or through env (env -S too); or when it is env
 * running one. The user's own PYTHONMALLOC, even empty, is kept. Nothing
 * is printed: the program's stderr is its own. */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "regionalloc.h"

/* What the kernel reads of a script's #! line (BINPRM_BUF_SIZE), and how
 * deep it lets interpreters be scripts themselves. */
#define SCRIPT_HEAD 256
#define MAX_DEPTH 4
/* Bound on the words of an env -S line. */
#define MAX_WORDS 32

static enum python_malloc program_malloc(const char *file, bool search,
                                         char *const *args, size_t n,
                                         int depth);

/* The last component of path. */
static const char *last_component(const char *path)
{
    const char *slash = strrchr(path, '/');

    return slash != NULL ? slash + 1 : path;
}

/* Whether the last component of path is python followed by digits and
 * dots only. */
static bool python_name(const char *path)
{
    const char *base = last_component(path);

    return strncmp(base, "python", 6) == 0 &&
           base[6 + strspn(base + 6, "0123456789.")] == '\0';
}

static bool executable_file(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           access(path, X_OK) == 0;
}

/* Finds file, as execvp would when search is true and it has no slash:
 * the first executable regular file of that name in PATH's directories
 * (an empty one is the current directory; the system's default path
 * without PATH); else file itself. Writes it to path (size bytes);
 * returns false when there is none. */
static bool find_program(const char *file, bool search, char *path,
                         size_t size)
{
    const char *dirs = getenv("PATH"), *p, *end;
    char fallback[256];

    if (!search || strchr(file, '/') != NULL)
        return (size_t)snprintf(path, size, "%s", file) < size;
    if (dirs == NULL) {
        size_t n = confstr(_CS_PATH, fallback, sizeof fallback);

        dirs = n > 0 && n <= sizeof fallback ? fallback : "/bin:/usr/bin";
    }
    for (p = dirs;; p = end + 1) {
        size_t len;

        end = strchrnul(p, ':');
        len = (size_t)(end - p);
        if (len <= INT_MAX &&
            (size_t)snprintf(path, size, "%.*s%s%s", (int)len, p,
                             len > 0 ? "/" : "", file) < size &&
            executable_file(path))
            return true;
        if (*end == '\0')
            return false;
    }
}

/* Splits s at spaces and tabs into words (at most max); returns how many. */
static size_t split_words(char *s, char **words, size_t max)
{
    size_t n = 0;
    char *rest;

    for (char *w = strtok_r(s, " \t", &rest); w != NULL && n < max;
         w = strtok_r(NULL, " \t", &rest))
        words[n++] = w;
    return n;
}

/* Whether the last component of path is name. */
static bool named(const char *path, const char *name)
{
    return strcmp(last_component(path), name) == 0;
}

/* The program env runs with these words (n of them, after env's name):
 * its options (-u and -C with their value; what else begins with '-')
 * and NAME=VALUE first, then the program, found on PATH, and its
 * arguments. */
static enum python_malloc env_command(char *const *words, size_t n,
                                      int depth)
{
    size_t i = 0;

    while (i < n && (words[i][0] == '-' || strchr(words[i], '=') != NULL)) {
        if (strcmp(words[i], "-u") == 0 || strcmp(words[i], "-C") == 0)
            i++;
        i++;
    }
    if (i >= n)
        return PM_NONE;
    return program_malloc(words[i], true, words + i + 1, n - i - 1,
                          depth + 1);
}

/* The program env runs from a #! line's argument: the argument itself,
 * found on PATH (the kernel passes the rest of the line as one word);
 * with -S, the words env splits it into at spaces. */
static enum python_malloc env_line(char *arg, int depth)
{
    char *words[MAX_WORDS];

    if (strncmp(arg, "-S", 2) != 0)
        return program_malloc(arg, true, NULL, 0, depth + 1);
    return env_command(words, split_words(arg + 2, words, MAX_WORDS),
                       depth);
}

/* A script's #! line (line, after the "#!"), as the kernel reads it: the
 * interpreter, then at most one argument, the rest of the line. */
static enum python_malloc script_malloc(char *line, int depth)
{
    char *interpreter, *arg, *end;

    line += strspn(line, " \t");
    interpreter = line;
    line += strcspn(line, " \t\n");
    arg = *line == '\n' || *line == '\0' ? line : line + 1;
    *line = '\0';
    arg += strspn(arg, " \t");
    arg[strcspn(arg, "\n")] = '\0';
    for (end = arg + strlen(arg); end > arg && strchr(" \t", end[-1]);)
        *--end = '\0';
    if (interpreter[0] == '\0')
        return PM_NONE;
    if (named(interpreter, "env"))
        return env_line(arg, depth);
    return program_malloc(interpreter, false, &arg, arg[0] != '\0' ? 1 : 0,
                          depth + 1);
}

/* What the file at path is: a script (its #! line's program decides),
 * env (the program it runs decides), an ELF program, or neither. Reads no more than SCRIPT_HEAD bytes and what
 * python_elf.c reads; never opens what is not a regular file. */
static enum python_malloc file_malloc(const char *path, char *const *args,
                                      size_t n, int depth)
{
    char head[SCRIPT_HEAD + 1];
    enum python_kind kind = NOT_PYTHON;
    struct stat st;
    ssize_t got;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return PM_NONE;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        got = pread(fd, head, SCRIPT_HEAD, 0);
        head[got > 0 ? got : 0] = '\0';
        if (got >= 2 && head[0] == '#' && head[1] == '!') {
            close(fd);
            return script_malloc(head + 2, depth);
        }
        if (named(path, "env")) {
            close(fd);
            return env_command(args, n, depth);
        }
        kind = elf_python_kind(fd);
    }
    close(fd);
    return python_malloc_for(kind, args, n);
}

/* What PYTHONMALLOC the program file, run with args (n words), calls for. */
static enum python_malloc program_malloc(const char *file, bool search,
                                         char *const *args, size_t n,
                                         int depth)
{
    char path[PATH_MAX], real[PATH_MAX];

    if (depth > MAX_DEPTH || !find_program(file, search, path, sizeof path))
        return PM_NONE;
    if (python_name(path) ||
        (realpath(path, real) != NULL && python_name(real)))
        return python_malloc_for(PYTHON_INTERPRETER, args, n);
    return file_malloc(path, args, n, depth);
}

void set_python_malloc(char *const *argv, size_t argc)
{
    static const char *const values[] = {
        [PM_MALLOC] = "malloc",
        [PM_MALLOC_DEBUG] = "malloc_debug",
    };
    enum python_malloc m;

    if (getenv("PYTHONMALLOC") != NULL || argc == 0)
        return;
    m = program_malloc(argv[0], true, argv + 1, argc - 1, 0);
    if (m != PM_NONE)
        set_variable("PYTHONMALLOC", values[m]);
}
