/* Suite "by library": REGIONALLOC_TAG_BY=library gives an allocation made
 * with no tag pushed the tag of the object whose code called the entry,
 * "libraries/<file name>", a child of "libraries". The objects are the
 * suite's own test libraries (tests/by_library/): libbylib_entries.so,
 * linked, calls each C entry; libbylib_cxx.so each operator new;
 * libbylib_loaded.so, the same code as the first, is dlopened. Every test
 * is a child run with the variable set, since the library reads it once. */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "regionalloc.h"
#include "testutil.h"

/* The test libraries' calls (tests/by_library/). */
void bylib_alloc(int e, size_t size, void **out);
void bylib_realloc(void **p, size_t size);
void bylib_new(int v, size_t size, void **out);
void bylib_delete(int v, void *p);
void *bylib_ctor_first(void);
void *bylib_ctor_alloc(size_t size);

#define NENTRIES 11 /* entries.c's: malloc ... rallocx(NULL) */
#define NNEWS 8     /* cxx.cc's: every operator new */
#define ENTRIES_TAG "libraries/libbylib_entries.so"
#define LOADED_TAG "libraries/libbylib_loaded.so"

static const char *const env_on[] = {"REGIONALLOC_TAG_BY=library", NULL};

/* The JSON report's count of objects that share "libraries", or -1 when
 * it has none. */
static int objects_sharing(const char *json)
{
    static const char key[] = "\"objects_sharing\": ";
    const char *at = strstr(json, key);

    return at != NULL ? atoi(at + strlen(key)) : -1;
}

static const char *tag_name(ra_tag_t tag)
{
    const char *name = ra_tag_name(tag);

    return name != NULL ? name : "(not a live tag)";
}

/* Whether p is in the tag called name, said when not. */
static bool in_tag(const void *p, const char *name, const char *what, int i)
{
    ra_tag_t tag = ra_tag_of(p);

    if (tag != RA_TAG_NONE && strcmp(tag_name(tag), name) == 0)
        return true;
    printf("%s %d: block in %s, not %s\n", what, i,
           tag == RA_TAG_NONE ? "no tag" : tag_name(tag), name);
    return false;
}

static size_t allocated(const char *name)
{
    ra_tag_stats_t st;

    if (ra_tag_stats(ra_tag_lookup(name), &st) != 0)
        return (size_t)-1;
    return st.allocated;
}

/* The program's own tag's name: "libraries/" and its file's name. */
static bool program_tag(char *out)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *base;

    if (n <= 0)
        return false;
    exe[n] = '\0';
    base = strrchr(exe, '/');
    snprintf(out, RA_TAG_NAME_MAX + 1, "libraries/%.50s",
             base != NULL ? base + 1 : exe);
    return true;
}

/* -- children ------------------------------------------------------------------ */

/* Every entry, called from a library's code, lands in its tag; the
 * program's own malloc in the program's; both under "libraries". */
static int child_entries(void)
{
    char own[RA_TAG_NAME_MAX + 1];
    void *p;
    bool ok = true;

    for (int e = 0; e < NENTRIES; e++) {
        bylib_alloc(e, 1000, &p);
        TU_REQUIRE(p != NULL);
        ok &= in_tag(p, ENTRIES_TAG, "entry", e);
        free(p);
    }
    for (int v = 0; v < NNEWS; v++) {
        bylib_new(v, 1000, &p);
        TU_REQUIRE(p != NULL);
        ok &= in_tag(p, "libraries/libbylib_cxx.so", "operator new", v);
        bylib_delete(v, p);
    }
    TU_REQUIRE(ok);
    p = malloc(100);
    TU_REQUIRE(program_tag(own));
    TU_REQUIRE(in_tag(p, own, "the program's malloc", 0));
    TU_REQUIRE(ra_tag_parent(ra_tag_of(p)) == ra_tag_lookup("libraries"));
    TU_REQUIRE(ra_tag_parent(ra_tag_lookup(ENTRIES_TAG)) ==
               ra_tag_lookup("libraries"));
    free(p);
    return 0;
}

/* An object's allocated is the live bytes its code allocated: frees by
 * another object go home, a realloc by another object keeps the tag. */
static int child_exact(void)
{
    enum { N = 100 };
    void *p[N];
    size_t before, sum = 0;

    bylib_alloc(0, 1, &p[0]); /* the tag made */
    before = allocated(ENTRIES_TAG);
    for (int i = 1; i < N; i++) {
        bylib_alloc(i % NENTRIES, (size_t)i * 37 + 1, &p[i]);
        TU_REQUIRE(p[i] != NULL);
        sum += malloc_usable_size(p[i]);
    }
    TU_REQUIRE(allocated(ENTRIES_TAG) == before + sum);
    for (int i = 1; i < N; i += 2) {
        sum -= malloc_usable_size(p[i]);
        p[i] = realloc(p[i], (size_t)i * 100 + 5000);
        TU_REQUIRE(p[i] != NULL && in_tag(p[i], ENTRIES_TAG, "realloc", i));
        sum += malloc_usable_size(p[i]);
    }
    TU_REQUIRE(allocated(ENTRIES_TAG) == before + sum);
    for (int i = 1; i < N; i++)
        free(p[i]);
    TU_REQUIRE(allocated(ENTRIES_TAG) == before);
    free(p[0]);
    return 0;
}

/* A pushed tag wins over the object's. */
static int child_pushed(void)
{
    ra_tag_t mine = ra_tag_create("mine");
    void *p;

    TU_REQUIRE(ra_tag_push(mine) == 0);
    bylib_alloc(0, 100, &p);
    TU_REQUIRE(ra_tag_of(p) == mine);
    free(p);
    bylib_new(0, 100, &p);
    TU_REQUIRE(ra_tag_of(p) == mine);
    bylib_delete(0, p);
    TU_REQUIRE(ra_tag_pop(mine) == 0);
    return 0;
}

static void *loaded_alloc(void *handle, size_t size)
{
    void (*alloc)(int, size_t, void **) =
        (void (*)(int, size_t, void **))dlsym(handle, "bylib_alloc");
    void *p = NULL;

    if (alloc != NULL)
        alloc(0, size, &p);
    return p;
}

/* cp from to, so that one object is loaded under another path. */
static bool copy_file(const char *from, const char *to)
{
    char buf[1 << 16];
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT, 0755);
    ssize_t n;
    bool ok = in >= 0 && out >= 0;

    while (ok && (n = read(in, buf, sizeof buf)) > 0)
        ok = write(out, buf, (size_t)n) == n;
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    return ok;
}

/* The dlopened test library loaded again from a copy called name in a
 * directory of its own, removed once loaded; NULL when it cannot be. */
static void *load_copy_as(const char *name)
{
    char dir[] = "/tmp/bylib-XXXXXX", path[160];
    void *h = NULL;

    if (mkdtemp(dir) == NULL)
        return NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (copy_file(BYLIB_DIR "/libbylib_loaded.so", path))
        h = dlopen(path, RTLD_NOW);
    unlink(path);
    rmdir(dir);
    return h;
}

/* An object whose file name does not fit a tag name: cut, and a second
 * one of the same first bytes gets a name of its own, within the limit. */
static int child_long_name(void)
{
    static const char base[] =
        "libbylib_a_file_name_far_longer_than_a_tag_name_may_be_at_all";
    char name[80];
    void *h[2], *p[2];

    for (int i = 0; i < 2; i++) {
        snprintf(name, sizeof name, "%s%d.so", base, i);
        h[i] = load_copy_as(name);
        TU_REQUIRE(h[i] != NULL);
        p[i] = loaded_alloc(h[i], 100);
        TU_REQUIRE(p[i] != NULL);
    }
    TU_REQUIRE(ra_tag_of(p[0]) != ra_tag_of(p[1]));
    for (int i = 0; i < 2; i++) {
        const char *name = ra_tag_name(ra_tag_of(p[i]));
        TU_REQUIRE(name != NULL && strlen(name) <= RA_TAG_NAME_MAX &&
                   strncmp(name, "libraries/libbylib_a_file_name", 30) == 0);
        free(p[i]);
        TU_REQUIRE(dlclose(h[i]) == 0);
    }
    return 0;
}

/* A dlopened object gets its tag at its first allocation; dlclosed, its
 * tag stays while its blocks live; an object loaded later at the same
 * addresses is not taken for it; a second object with the same file name
 * gets a name of its own. */
static int child_dlopen(void)
{
    void *h, *p, *q;
    Dl_info first, second;

    /* The linked library's tag made first: the copy's comes second. */
    bylib_alloc(0, 100, &p);
    free(p);
    h = dlopen(BYLIB_DIR "/libbylib_loaded.so", RTLD_NOW);
    TU_REQUIRE(h != NULL);
    TU_REQUIRE(ra_tag_lookup(LOADED_TAG) == RA_TAG_NONE);
    p = loaded_alloc(h, 3000);
    TU_REQUIRE(p != NULL && in_tag(p, LOADED_TAG, "dlopened", 0));
    TU_REQUIRE(dladdr(dlsym(h, "bylib_alloc"), &first) != 0);
    TU_REQUIRE(dlclose(h) == 0);
    TU_REQUIRE(in_tag(p, LOADED_TAG, "after dlclose", 0));
    TU_REQUIRE(allocated(LOADED_TAG) == malloc_usable_size(p));
    /* The same code under the linked library's file name, loaded where the
     * closed one was. */
    h = load_copy_as("libbylib_entries.so");
    TU_REQUIRE(h != NULL);
    TU_REQUIRE(dladdr(dlsym(h, "bylib_alloc"), &second) != 0);
    TU_REQUIRE(second.dli_saddr == first.dli_saddr);
    q = loaded_alloc(h, 100);
    TU_REQUIRE(q != NULL && in_tag(q, ENTRIES_TAG "~2", "reloaded", 0));
    free(q);
    free(p);
    TU_REQUIRE(dlclose(h) == 0);
    return 0;
}

static void *thread_alloc(void *arg)
{
    void *p;

    (void)arg;
    bylib_alloc(0, 500, &p);
    return p;
}

/* Threads: each thread's cache names the same object's tag. */
static int child_threads(void)
{
    pthread_t t[4];
    void *p[4];

    for (int i = 0; i < 4; i++)
        TU_REQUIRE(pthread_create(&t[i], NULL, thread_alloc, NULL) == 0);
    for (int i = 0; i < 4; i++) {
        TU_REQUIRE(pthread_join(t[i], &p[i]) == 0);
        TU_REQUIRE(p[i] != NULL && in_tag(p[i], ENTRIES_TAG, "thread", i));
        free(p[i]);
    }
    return 0;
}

/* fork: the child allocates into the objects' tags, makes a new object's
 * tag; the parent goes on. */
static int child_fork(void)
{
    void *p;
    pid_t pid;
    int status;

    bylib_alloc(0, 100, &p);
    TU_REQUIRE(in_tag(p, ENTRIES_TAG, "before fork", 0));
    free(p);
    pid = fork();
    TU_REQUIRE(pid >= 0);
    if (pid == 0) {
        void *h = dlopen(BYLIB_DIR "/libbylib_loaded.so", RTLD_NOW);
        void *q = h != NULL ? loaded_alloc(h, 100) : NULL;
        bool ok;
        bylib_alloc(0, 100, &p);
        ok = in_tag(p, ENTRIES_TAG, "fork's child", 0) && q != NULL &&
             in_tag(q, LOADED_TAG, "fork's child, dlopened", 0);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    TU_REQUIRE(waitpid(pid, &status, 0) == pid);
    TU_REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    bylib_alloc(0, 100, &p);
    TU_REQUIRE(in_tag(p, ENTRIES_TAG, "fork's parent", 0));
    free(p);
    return 0;
}

/* No id left for any object (REGIONALLOC_MAX_TAGS=1: "libraries" only):
 * every object's allocations go to "libraries" itself, and the JSON
 * report says how many objects share it. */
static int child_shared(void)
{
    void *p;
    char *json;

    bylib_alloc(0, 100, &p);
    TU_REQUIRE(in_tag(p, "libraries", "no id left", 0));
    json = tu_json_report_or_null();
    TU_REQUIRE(json != NULL);
    /* At least the program, libc and the test library. */
    TU_REQUIRE(objects_sharing(json) >= 2);
    TU_REQUIRE(strstr(json, "\"object\": ") == NULL);
    free(json);
    free(p);
    return 0;
}

/* Each object the loader has: when it has a tag of its own, the JSON
 * report (in *arg) gives that tag the object's path. Counts them in
 * named, and failures in wrong. */
struct paths_check {
    const char *json;
    unsigned named, wrong;
};

static int check_object_path(struct dl_phdr_info *info, size_t size,
                             void *arg)
{
    struct paths_check *c = arg;
    const char *base = strrchr(info->dlpi_name, '/');
    char tag[RA_TAG_NAME_MAX + 1], want[4200];

    (void)size;
    if (base == NULL || strlen(base + 1) > RA_TAG_NAME_MAX - 10)
        return 0;
    snprintf(tag, sizeof tag, "libraries/%s", base + 1);
    if (ra_tag_lookup(tag) == RA_TAG_NONE)
        return 0;
    snprintf(want, sizeof want, "\"object\": \"%s\"", info->dlpi_name);
    c->named++;
    if (strstr(c->json, want) == NULL) {
        fprintf(stderr, "report: no %s\n", want);
        c->wrong++;
    }
    return 0;
}

/* The JSON report names each object's path, and says how many objects
 * share "libraries" when no id was left (REGIONALLOC_MAX_TAGS=3: the
 * parent and two objects, the first two that allocate: libc's and the
 * constructor's library's, before main; the others share it). */
static int child_report(void)
{
    struct paths_check c = {NULL, 0, 0};
    void *p[3];
    char *json;

    bylib_alloc(0, 100, &p[0]);
    bylib_new(0, 100, &p[1]);
    p[2] = malloc(100);
    json = tu_json_report_or_null();
    TU_REQUIRE(json != NULL);
    c.json = json;
    dl_iterate_phdr(check_object_path, &c);
    TU_REQUIRE(c.named == 2 && c.wrong == 0);
    TU_REQUIRE(tu_count_of(json, "\"object\": ") == c.named);
    /* The program, the linked library and the C++ one at least. */
    TU_REQUIRE(objects_sharing(json) >= 3);
    free(json);
    free(p[0]);
    bylib_delete(0, p[1]);
    free(p[2]);
    return 0;
}

/* The objects' tags and "libraries" cannot be reset or destroyed: every
 * thread allocates into them without a push, and their blocks are the
 * objects' own (a reset would free a block the object still uses). */
static int child_destroy(void)
{
    static int (*const end[])(ra_tag_t) = {ra_tag_reset, ra_tag_destroy};
    static const char *const names[] = {ENTRIES_TAG, "libraries"};
    void *p, *kept;

    bylib_alloc(0, 100, &kept);
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < 2; i++) {
            errno = 0;
            TU_REQUIRE(end[e](ra_tag_lookup(names[i])) == -1 &&
                       errno == EBUSY);
        }
    TU_REQUIRE(allocated(ENTRIES_TAG) == malloc_usable_size(kept));
    free(kept);
    bylib_alloc(0, 100, &p);
    TU_REQUIRE(in_tag(p, ENTRIES_TAG, "after a reset and a destroy refused",
                      0));
    free(p);
    return 0;
}

static ra_tag_t hooked_tag;
static void *hooked_ptr;

static void on_alloc(void *ctx, ra_tag_t tag, void *ptr, size_t size)
{
    (void)ctx;
    (void)size;
    hooked_tag = tag;
    hooked_ptr = ptr;
}

/* With a hook installed and the profiler sampling every allocation (the
 * other bits of the instrumentation word), the object's tag is the one
 * the block gets and the hook hears. */
static int child_instrumented(void)
{
    ra_hooks_t hooks = {on_alloc, NULL, NULL};
    int id = ra_hooks_install(&hooks);
    void *p;

    TU_REQUIRE(id >= 0);
    for (int e = 0; e < NENTRIES; e++) {
        bylib_alloc(e, 1000, &p);
        TU_REQUIRE(p != NULL && in_tag(p, ENTRIES_TAG, "hooked entry", e));
        TU_REQUIRE(hooked_ptr == p && hooked_tag == ra_tag_of(p));
        free(p);
    }
    TU_REQUIRE(ra_hooks_remove(id) == 0);
    TU_REQUIRE(ra_prof_start(1) == 0);
    bylib_alloc(0, 1000, &p);
    TU_REQUIRE(p != NULL && in_tag(p, ENTRIES_TAG, "sampled", 0));
    free(p);
    return 0;
}

#define CTOR_TAG "libraries/libbylib_ctor.so"
#define CTOR_LOADED_TAG "libraries/libbylib_ctor_loaded.so"
#define NLOADERS 2
#define NBUSY 2

static pthread_barrier_t ctor_start;
static _Atomic bool ctor_loaded;

/* dlopens the library whose constructor allocates, with the other
 * loader, at once; returns a block of its own from the constructor's call
 * site. */
static void *load_ctor_library(void *arg)
{
    void *h, *p = NULL;
    void *(*alloc)(size_t);

    (void)arg;
    pthread_barrier_wait(&ctor_start);
    h = dlopen(BYLIB_DIR "/libbylib_ctor_loaded.so", RTLD_NOW);
    alloc = h != NULL ? (void *(*)(size_t))dlsym(h, "bylib_ctor_alloc")
                      : NULL;
    if (alloc != NULL)
        p = alloc(300);
    return p;
}

/* Allocates from other objects (the linked libraries' code, C and C++)
 * until the loaders are done: each thread's first allocations miss and
 * take the table's lock, some while a constructor holds the loader's. */
static void *allocate_meanwhile(void *arg)
{
    unsigned long n = 0;
    void *p;

    (void)arg;
    pthread_barrier_wait(&ctor_start);
    do {
        bylib_alloc((int)(n % NENTRIES), 64 + n % 512, &p);
        free(p);
        bylib_new((int)(n % NNEWS), 64, &p);
        bylib_delete((int)(n % NNEWS), p);
    } while (++n < 100 || !atomic_load(&ctor_loaded));
    return NULL;
}

/* Constructors that allocate: the linked library's, at start, and the
 * dlopened one's, inside dlopen with the loader's lock held, from two
 * threads at once while two others allocate from other objects. Each
 * block lands in its object's tag, and the constructor's call site does
 * not teach a thread's cache a wrong tag. */
static int child_ctor(void)
{
    pthread_t loader[NLOADERS], busy[NBUSY];
    void *p, *h, *(*first)(void);

    TU_REQUIRE(in_tag(bylib_ctor_first(), CTOR_TAG, "linked constructor",
                      0));
    p = bylib_ctor_alloc(100);
    TU_REQUIRE(in_tag(p, CTOR_TAG, "linked, after", 0));
    free(p);
    TU_REQUIRE(pthread_barrier_init(&ctor_start, NULL, NLOADERS + NBUSY) ==
               0);
    for (int i = 0; i < NBUSY; i++)
        TU_REQUIRE(pthread_create(&busy[i], NULL, allocate_meanwhile,
                                  NULL) == 0);
    for (int i = 0; i < NLOADERS; i++)
        TU_REQUIRE(pthread_create(&loader[i], NULL, load_ctor_library,
                                  NULL) == 0);
    for (int i = 0; i < NLOADERS; i++) {
        TU_REQUIRE(pthread_join(loader[i], &p) == 0);
        TU_REQUIRE(p != NULL && in_tag(p, CTOR_LOADED_TAG, "loader", i));
        free(p);
    }
    atomic_store(&ctor_loaded, true);
    for (int i = 0; i < NBUSY; i++)
        TU_REQUIRE(pthread_join(busy[i], NULL) == 0);
    h = dlopen(BYLIB_DIR "/libbylib_ctor_loaded.so", RTLD_NOW | RTLD_NOLOAD);
    TU_REQUIRE(h != NULL);
    first = (void *(*)(void))dlsym(h, "bylib_ctor_first");
    TU_REQUIRE(first != NULL);
    TU_REQUIRE(in_tag(first(), CTOR_LOADED_TAG, "dlopened constructor", 0));
    return 0;
}

static int child_off(void);

static const struct tu_child children[] = {
    {"shared", child_shared},
    {"off", child_off},
    {"instrumented", child_instrumented},
    {"destroy", child_destroy},
    {"entries", child_entries}, {"exact", child_exact},
    {"pushed", child_pushed},   {"dlopen", child_dlopen},
    {"long_name", child_long_name},
    {"threads", child_threads}, {"fork", child_fork},
    {"report", child_report},   {"ctor", child_ctor},
    {NULL, NULL},
};

static void run_child(const char *name, const char *const *env)
{
    char err[4096];
    int status = tu_exec_self(env, name, err, sizeof err);

    ck_assert_msg(status == 0, "child %s: status %d, stderr: %s", name,
                  status, err);
}

START_TEST(test_by_library_every_entry_attributes_to_its_caller)
{
    run_child("entries", env_on);
}
END_TEST

START_TEST(test_by_library_exact_frees_go_home_realloc_keeps)
{
    run_child("exact", env_on);
}
END_TEST

START_TEST(test_by_library_pushed_tag_wins)
{
    run_child("pushed", env_on);
}
END_TEST

START_TEST(test_by_library_dlopen_dlclose_reuse)
{
    run_child("dlopen", env_on);
}
END_TEST

START_TEST(test_by_library_long_names_cut_and_unique)
{
    run_child("long_name", env_on);
}
END_TEST

START_TEST(test_by_library_threads)
{
    run_child("threads", env_on);
}
END_TEST

START_TEST(test_by_library_fork)
{
    run_child("fork", env_on);
}
END_TEST

START_TEST(test_by_library_constructors_under_the_loader_lock)
{
    run_child("ctor", env_on);
}
END_TEST

START_TEST(test_by_library_tags_cannot_be_reset_or_destroyed)
{
    run_child("destroy", env_on);
}
END_TEST

START_TEST(test_by_library_with_hooks_and_profiler)
{
    run_child("instrumented", env_on);
}
END_TEST

START_TEST(test_by_library_report_paths_and_sharing)
{
    static const char *const env[] = {"REGIONALLOC_TAG_BY=library",
                                      "REGIONALLOC_MAX_TAGS=3", NULL};

    run_child("report", env);
}
END_TEST

START_TEST(test_by_library_no_id_left_shares_libraries)
{
    static const char *const env[] = {"REGIONALLOC_TAG_BY=library",
                                      "REGIONALLOC_MAX_TAGS=1", NULL};

    run_child("shared", env);
}
END_TEST

/* A value other than "library" is said once and ignored. */
START_TEST(test_by_library_bad_value_said_and_ignored)
{
    static const char *const env[] = {"REGIONALLOC_TAG_BY=object", NULL};
    char err[2048];

    ck_assert_int_eq(tu_exec_self(env, "off", err, sizeof err), 0);
    ck_assert_msg(tu_count_lines(err) == 1 &&
                      strstr(err, "REGIONALLOC_TAG_BY") != NULL,
                  "stderr: %s", err);
}
END_TEST

/* Off, nothing changes: untagged stays untagged. */
static int child_off(void)
{
    void *p;

    bylib_alloc(0, 100, &p);
    TU_REQUIRE(ra_tag_of(p) == RA_TAG_NONE);
    free(p);
    TU_REQUIRE(ra_tag_lookup("libraries") == RA_TAG_NONE);
    return 0;
}

START_TEST(test_by_library_off_untagged)
{
    ck_assert_int_eq(child_off(), 0);
}
END_TEST

static Suite *by_library_suite(void)
{
    Suite *s = suite_create("by library");
    TCase *tc = tcase_create("objects");

    tcase_add_test(tc, test_by_library_every_entry_attributes_to_its_caller);
    tcase_add_test(tc, test_by_library_exact_frees_go_home_realloc_keeps);
    tcase_add_test(tc, test_by_library_pushed_tag_wins);
    tcase_add_test(tc, test_by_library_dlopen_dlclose_reuse);
    tcase_add_test(tc, test_by_library_long_names_cut_and_unique);
    tcase_add_test(tc, test_by_library_threads);
    tcase_add_test(tc, test_by_library_fork);
    tcase_add_test(tc, test_by_library_constructors_under_the_loader_lock);
    tcase_add_test(tc, test_by_library_tags_cannot_be_reset_or_destroyed);
    tcase_add_test(tc, test_by_library_with_hooks_and_profiler);
    tcase_add_test(tc, test_by_library_report_paths_and_sharing);
    tcase_add_test(tc, test_by_library_no_id_left_shares_libraries);
    tcase_add_test(tc, test_by_library_bad_value_said_and_ignored);
    tcase_add_test(tc, test_by_library_off_untagged);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    tu_child_main(argc, argv, children);
    return tu_run_suite(by_library_suite());
}
