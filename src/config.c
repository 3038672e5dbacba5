/* Floor: base. Environment parsing: REGIONALLOC, _MAX_TAGS, _REGION_SIZE,
 * _STATS, _STATS_FORMAT, _CHECKPOINTS, _PROF, _PROF_DUMP, _LIMITS, _SHM,
 * _SHM_INTERVAL, _HTTP, _HTTP_WRITE, _HTTP_ALLOW_REMOTE, _THREAD_TAGS,
 * _PROGRAM_PID, _CHILDREN, _MEMORY_LIMIT, _TAG_BY. The syntax of the
 * values that regionalloc run sets is sizes.c's, values.c's and
 * http_address.c's, which the tool compiles too: it refuses what this
 * would refuse or ignore. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_address.h"
#include "internal.h"

#define DEFAULT_MAX_TAGS 256u
#define DEFAULT_REGION_SIZE ((size_t)64 << 30)

static struct ra__config config;

_Static_assert(sizeof config.http_addr > RA__HTTP_ADDR_LEN,
               "REGIONALLOC_HTTP fits whole");
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

static void warn_default(const char *var, const char *value,
                         const char *why, const char *used)
{
    char buf[512];
    snprintf(buf, sizeof buf,
             "regionalloc: %s=\"%.64s\" is invalid (%s); using the default %s",
             var, value, why, used);
    ra__warn(buf);
}

/* Reads var as 0 or 1 into *flag; unset leaves dflt. */
static void read_flag(const char *var, bool dflt, bool *flag)
{
    const char *v = secure_getenv(var);

    *flag = dflt;
    if (v == NULL)
        return;
    if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)
        *flag = v[0] == '1';
    else
        warn_default(var, v, "expected 0 or 1", dflt ? "1" : "0");
}

/* Reads var as a whole number from 1 to max into *out; unset or bad (then
 * said) leaves dflt. */
static void read_count(const char *var, unsigned max, unsigned dflt,
                       unsigned *out)
{
    const char *v = secure_getenv(var);
    size_t n;

    *out = dflt;
    if (v == NULL)
        return;
    if (ra__parse_size(v, &n) != NULL || n < 1 || n > max) {
        char why[64], was[16];
        snprintf(why, sizeof why, "expected a number from 1 to %u", max);
        snprintf(was, sizeof was, "%u", dflt);
        warn_default(var, v, why, was);
        return;
    }
    *out = (unsigned)n;
}

/* The CPUs the process may run on, at most RA__POOL_MAX: a tag's pool
 * needs no more arenas than threads can run at once. */
static unsigned usable_cpus(void)
{
    cpu_set_t set;
    int n;

    /* More CPUs than a cpu_set_t holds (1024): sched_getaffinity fails. */
    n = sched_getaffinity(0, sizeof set, &set) == 0
            ? CPU_COUNT(&set)
            : (int)sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > (int)RA__POOL_MAX ? RA__POOL_MAX : (unsigned)n;
}

static void read_region_size(void)
{
    const char *v = secure_getenv("REGIONALLOC_REGION_SIZE");
    size_t n;

    config.region_size = DEFAULT_REGION_SIZE;
    if (v == NULL)
        return;
    if (ra__parse_size(v, &n) != NULL || n < RA__REGION_SIZE_MIN || (n & (n - 1)) != 0 ||
        n > ((size_t)1 << 46)) {
        warn_default("REGIONALLOC_REGION_SIZE", v,
                     "expected a power of two from 4M to 64T, K/M/G/T "
                     "suffixes accepted", "64G");
        return;
    }
    config.region_size = n;
}

/* Reads var, "stderr" or a report's file path, into out (size bytes): ""
 * when unset or empty (no report), or too long (then said). */
static void read_output(const char *var, char *out, size_t size)
{
    const char *v = secure_getenv(var);
    const char *why;

    out[0] = '\0';
    if (v == NULL || v[0] == '\0')
        return;
    why = ra__parse_output(v);
    if (why != NULL) {
        warn_default(var, v, why, "(no report)");
        return;
    }
    snprintf(out, size, "%s", v);
}

static void read_stats_format(void)
{
    const char *v = secure_getenv("REGIONALLOC_STATS_FORMAT");
    const char *why;

    config.stats_format = RA_FORMAT_TEXT;
    if (v == NULL)
        return;
    why = ra__parse_format(v, &config.stats_format);
    if (why != NULL)
        warn_default("REGIONALLOC_STATS_FORMAT", v, why, "text");
}

static void read_prof(void)
{
    const char *v = secure_getenv("REGIONALLOC_PROF");
    const char *why;

    config.prof_interval = 0;
    if (v == NULL || v[0] == '\0')
        return;
    why = ra__parse_prof_interval(v, &config.prof_interval);
    if (why != NULL)
        warn_default("REGIONALLOC_PROF", v, why, "(no profiling)");
}

/* One entry of REGIONALLOC_LIMITS, "name=HARD[/SOFT]" (len bytes at e),
 * into limit i. Returns NULL, or why it is malformed (sizes.c's, which
 * regionalloc run --limits shares). */
static const char *parse_limit_entry(const char *e, size_t len, unsigned i)
{
    struct ra__limit_entry *out = &config.limits[i];
    size_t name_len;
    const char *why = ra__parse_budget(e, len, &name_len, &out->hard,
                                       &out->soft);

    if (why != NULL)
        return why;
    memcpy(out->name, e, name_len);
    out->name[name_len] = '\0';
    return NULL;
}

/* One entry of REGIONALLOC_THREAD_TAGS, "GLOB=TAG" or "GLOB" alone (the
 * tag named after the thread), into rule i. Returns NULL, or why it is
 * malformed. */
static const char *parse_thread_tag(const char *e, size_t len, unsigned i)
{
    struct ra__thread_tag_rule *r = &config.thread_tags[i];
    size_t glob_len;
    const char *why = ra__parse_thread_tag(e, len, &glob_len);

    if (why != NULL)
        return why;
    memcpy(r->glob, e, glob_len);
    r->glob[glob_len] = '\0';
    r->by_name = glob_len == len;
    r->tag[0] = '\0';
    if (!r->by_name) {
        memcpy(r->tag, e + glob_len + 1, len - glob_len - 1);
        r->tag[len - glob_len - 1] = '\0';
    }
    return NULL;
}

/* Reads var, a comma-separated list, handing each non-empty entry to parse
 * with its index among the accepted ones; returns how many parse accepted.
 * A rejected entry, or one past RA__LIST_MAX, is one line on stderr. */
static unsigned read_list(const char *var,
                          const char *(*parse)(const char *e, size_t len,
                                               unsigned i))
{
    const char *v = secure_getenv(var), *e, *why;
    unsigned n = 0;
    size_t len = 0;
    char msg[512];

    if (v == NULL)
        return 0;
    while ((e = ra__list_next(&v, &len)) != NULL) {
        why = n == RA__LIST_MAX ? ra__list_too_long : parse(e, len, n);
        if (why == NULL) {
            n++;
            continue;
        }
        snprintf(msg, sizeof msg,
                 "regionalloc: %s: entry \"%.*s\" is invalid (%s); ignored",
                 var, (int)(len < 100 ? len : 100), e, why);
        ra__warn(msg);
    }
    return n;
}

/* "250ms", "2s", "1" (seconds): 10 ms to 1 hour. */
static void read_shm_interval(void)
{
    const char *v = secure_getenv("REGIONALLOC_SHM_INTERVAL");
    uint64_t n = 0, unit = 1000000000u;
    const char *p = v;

    config.shm_interval_ns = 1000000000u;
    if (v == NULL)
        return;
    for (; *p >= '0' && *p <= '9' && n < 10000000; p++)
        n = n * 10 + (uint64_t)(*p - '0');
    if (strcmp(p, "ms") == 0)
        unit = 1000000u;
    else if (strcmp(p, "s") != 0 && *p != '\0')
        n = 0;
    if (p == v || n * unit < 10000000u || n * unit > 3600000000000u) {
        warn_default("REGIONALLOC_SHM_INTERVAL", v,
                     "expected 10ms to 3600s, as 250ms or 2s", "1s");
        return;
    }
    config.shm_interval_ns = n * unit;
}

/* REGIONALLOC_MEMORY_LIMIT: "512M", or "80%" of the cgroup's limit (the
 * syntax sizes.c's, which regionalloc run --memory-limit shares). Empty is
 * a bad value, not an unset one: a variable set from an empty shell
 * variable would otherwise leave the process silently without the limit
 * meant. */
static void read_memory_limit(void)
{
    const char *v = secure_getenv("REGIONALLOC_MEMORY_LIMIT");
    const char *why;

    config.memory_limit = 0;
    config.memory_limit_percent = 0;
    if (v == NULL)
        return;
    why = ra__parse_memory_limit(v, &config.memory_limit,
                                 &config.memory_limit_percent);
    if (why != NULL)
        warn_default("REGIONALLOC_MEMORY_LIMIT", v, why,
                     "(the cgroup's limit, if any)");
}

/* REGIONALLOC_HTTP: HOST:PORT, its syntax checked here; whether it
 * resolves, is a loopback address and can be bound is the server's start's
 * to say (http.c). Unset or empty: no server. */
static void read_http(void)
{
    const char *v = secure_getenv("REGIONALLOC_HTTP");
    char host[RA__HTTP_ADDR_LEN + 1];
    const char *port, *why;

    config.http_addr[0] = '\0';
    if (v == NULL || v[0] == '\0')
        return;
    why = ra__http_split(v, host, &port);
    if (why != NULL) {
        warn_default("REGIONALLOC_HTTP", v, why, "(no server)");
        return;
    }
    snprintf(config.http_addr, sizeof config.http_addr, "%s", v);
}

/* REGIONALLOC_PROGRAM_PID: a process id, as regionalloc run writes it. */
static void read_program_pid(void)
{
    const char *v = secure_getenv("REGIONALLOC_PROGRAM_PID");
    char *end;
    long pid;

    config.program_pid = 0;
    if (v == NULL || v[0] == '\0')
        return;
    errno = 0;
    pid = strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || v[0] < '0' || v[0] > '9' || pid < 1 ||
        pid > INT32_MAX) {
        warn_default("REGIONALLOC_PROGRAM_PID", v, "expected a process id",
                     "(every process watched)");
        return;
    }
    config.program_pid = (pid_t)pid;
}

/* REGIONALLOC_TAG_BY: "library" or unset ("" too); anything else is said
 * and ignored. */
static void read_tag_by(void)
{
    const char *v = secure_getenv("REGIONALLOC_TAG_BY");

    config.tag_by_library = false;
    if (v == NULL || v[0] == '\0')
        return;
    if (strcmp(v, "library") == 0)
        config.tag_by_library = true;
    else
        warn_default("REGIONALLOC_TAG_BY", v, "expected library",
                     "(no tags by calling object)");
}

static void read_config(void)
{
    read_flag("REGIONALLOC", true, &config.enabled);
    read_count("REGIONALLOC_MAX_TAGS", RA__MAX_TAGS_LIMIT, DEFAULT_MAX_TAGS,
               &config.max_tags);
    read_count("REGIONALLOC_THREADS_PER_ARENA", 1u << 16, 4,
               &config.threads_per_arena);
    read_count("REGIONALLOC_TAG_ARENAS", RA__POOL_MAX, usable_cpus(),
               &config.tag_arenas);
    read_region_size();
    read_output("REGIONALLOC_STATS", config.stats_path,
                sizeof config.stats_path);
    read_stats_format();
    read_output("REGIONALLOC_CHECKPOINTS", config.checkpoints_path,
                sizeof config.checkpoints_path);
    read_prof();
    read_output("REGIONALLOC_PROF_DUMP", config.prof_dump_path,
                sizeof config.prof_dump_path);
    config.nlimits = read_list("REGIONALLOC_LIMITS", parse_limit_entry);
    read_flag("REGIONALLOC_SHM", false, &config.shm);
    read_shm_interval();
    read_http();
    read_flag("REGIONALLOC_HTTP_WRITE", false, &config.http_write);
    read_flag("REGIONALLOC_HTTP_ANNOUNCE", false, &config.http_announce);
    read_memory_limit();
    read_flag("REGIONALLOC_HTTP_ALLOW_REMOTE", false,
              &config.http_allow_remote);
    config.nthread_tags =
        read_list("REGIONALLOC_THREAD_TAGS", parse_thread_tag);
    read_program_pid();
    read_flag("REGIONALLOC_CHILDREN", false, &config.children);
    read_tag_by();
}

const char *ra__config_peek(const char *var)
{
    const char *v = secure_getenv(var);

    return v != NULL && v[0] != '\0' ? v : NULL;
}

bool ra__config_peek_set(const char *var)
{
    return secure_getenv(var) != NULL;
}

bool ra__config_peek_is(const char *var, const char *value)
{
    const char *v = secure_getenv(var);

    return v != NULL && strcmp(v, value) == 0;
}

bool ra__config_asked_at_load(void)
{
    static const char *const at_load[] = {
        "REGIONALLOC_SHM", "REGIONALLOC_HTTP", "REGIONALLOC_THREAD_TAGS",
        "REGIONALLOC_PROF", "REGIONALLOC_TAG_BY"};

    for (size_t i = 0; i < sizeof at_load / sizeof at_load[0]; i++)
        if (secure_getenv(at_load[i]) != NULL)
            return true;
    return false;
}

const struct ra__config *ra__config(void)
{
    if (pthread_once(&config_once, read_config) != 0)
        abort();
    return &config;
}

enum ra__watch ra__config_watch(void)
{
    const struct ra__config *c = ra__config();

    if (c->program_pid == 0 || c->program_pid == getpid())
        return RA__WATCH_PROGRAM;
    return c->children ? RA__WATCH_CHILD : RA__WATCH_NONE;
}
