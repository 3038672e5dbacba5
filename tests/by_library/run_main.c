/* tests/test_by_library.sh's program: known live bytes in its own code,
 * in a linked C library, a linked C++ library and two dlopened ones (the
 * first unloaded before the second is loaded), in threads, under a pushed
 * tag, and in a forked child, so that each object's tag can be checked to
 * hold exactly its bytes (tests/by_library_check.py has the figures).
 * It does not link the library: under LD_PRELOAD it finds ra_tag_create,
 * ra_tag_push, ra_tag_pop and ra_report there.
 *   bylib_main DIR CHILD_REPORT
 * DIR holds the dlopened libraries; the forked child writes its JSON
 * report to CHILD_REPORT. Prints "ready" with what the loader did, then
 * holds everything until its standard input ends. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "regionalloc.h"

void *linked_hold(void);
char *linked_strdup(void);
void *linked_extra(size_t n);
void cxx_hold(void);
void *cxx_extra(size_t n);

/* Every block, seen from outside, so that the compiler keeps them. */
void *volatile main_sink;

static void *must(void *p, const char *what)
{
    main_sink = p;
    if (p == NULL) {
        fprintf(stderr, "bylib_main: %s: %s\n", what, dlerror());
        exit(1);
    }
    return p;
}

/* Each thread's allocations: the program's 7168, the linked library's
 * 1792, the C++ library's 2560. */
static void *thread_main(void *name)
{
    pthread_setname_np(pthread_self(), name);
    must(malloc(7168), "malloc");
    must(linked_extra(1792), "linked_extra");
    must(cxx_extra(2560), "cxx_extra");
    return NULL;
}

static void run_thread(const char *name)
{
    pthread_t t;

    if (pthread_create(&t, NULL, thread_main, (void *)name) != 0 ||
        pthread_join(t, NULL) != 0)
        exit(1);
}

/* Loads DIR/libbylib_loaded_X.so and has it hold its bytes times scale;
 * returns its base address. */
static uintptr_t load(const char *dir, char which, size_t scale, void **h)
{
    char path[4096];
    void (*hold)(size_t);
    Dl_info info;

    snprintf(path, sizeof path, "%s/libbylib_loaded_%c.so", dir, which);
    *h = must(dlopen(path, RTLD_NOW | RTLD_LOCAL), path);
    *(void **)&hold = must(dlsym(*h, "loaded_hold"), "loaded_hold");
    hold(scale);
    if (dladdr((void *)hold, &info) == 0)
        exit(1);
    return (uintptr_t)info.dli_fbase;
}

/* The child adds 896 bytes to the linked library and 1280 to the
 * program, writes its report and leaves without the parent's exit. */
static void fork_child(const char *report)
{
    int (*write_report)(FILE *, ra_format_t);
    FILE *f;
    pid_t pid = fork();
    int status;

    if (pid == 0) {
        must(linked_extra(896), "linked_extra");
        must(malloc(1280), "malloc");
        *(void **)&write_report = must(dlsym(RTLD_DEFAULT, "ra_report"),
                                       "ra_report");
        f = fopen(report, "w");
        _exit(f == NULL || write_report(f, RA_FORMAT_JSON) != 0 ||
              fclose(f) != 0);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
        exit(1);
}

/* Under a pushed tag "pushed", if one can be made: the program's 5120,
 * the linked library's 10240 and the C++ library's 14336 bytes, all the
 * pushed tag's. */
static void pushed(void)
{
    ra_tag_t (*create)(const char *);
    int (*push)(ra_tag_t), (*pop)(ra_tag_t);
    ra_tag_t tag;

    *(void **)&create = must(dlsym(RTLD_DEFAULT, "ra_tag_create"), "create");
    *(void **)&push = must(dlsym(RTLD_DEFAULT, "ra_tag_push"), "push");
    *(void **)&pop = must(dlsym(RTLD_DEFAULT, "ra_tag_pop"), "pop");
    /* None left (REGIONALLOC_MAX_TAGS): the objects share libraries. */
    tag = create("pushed");
    if (tag == RA_TAG_NONE)
        return;
    if (push(tag) != 0)
        exit(1);
    must(malloc(5120), "malloc");
    must(linked_extra(10240), "linked_extra");
    must(cxx_extra(14336), "cxx_extra");
    if (pop(tag) != 0)
        exit(1);
}

int main(int argc, char **argv)
{
    void *a, *b, *block;
    uintptr_t base_a, base_b;
    char line[64];

    if (argc != 3)
        return 2;
    /* The program's own: 12288 + 24576 bytes. */
    must(malloc(12288), "malloc");
    must(calloc(3, 8192), "calloc");
    /* The linked library's block, reallocated here: still its own. */
    block = linked_hold();
    must(realloc(block, 6144), "realloc");
    must(linked_strdup(), "strdup");
    /* Freed here, by the program: it goes home, out of the library's. */
    free(must(linked_extra(3584), "linked_extra"));
    cxx_hold();
    base_a = load(argv[1], 'a', 1, &a);
    if (dlclose(a) != 0)
        return 1;
    base_b = load(argv[1], 'b', 2, &b);
    pushed();
    run_thread("bylib-helper");
    run_thread("bylib-worker");
    fork_child(argv[2]);
    printf("ready %s\n", base_a == base_b ? "reused" : "moved");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL)
        continue;
    return 0;
}
