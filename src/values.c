/* Floor: OS (calls nothing above it, so that tools/regionalloc compiles it
 * too). The syntax of the environment's values that are not sizes:
 * REGIONALLOC_STATS_FORMAT, the reports' files, the lists and
 * REGIONALLOC_THREAD_TAGS' rules, which config.c reads with it and
 * regionalloc run's --format, --report, --checkpoints, --thread-tags and
 * --limits check with it: a value the tool let through and the library
 * refused or ignored ran the program without what was asked for, after
 * one line from the library. */
#include <string.h>

#include "sizes.h"
#include "values.h"

const char ra__list_too_long[] = "more than 64 entries";

_Static_assert(RA__LIST_MAX == 64, "ra__list_too_long says 64");
_Static_assert(RA__GLOB_LEN == 63 && RA_TAG_NAME_MAX == 63,
               "the reasons say 63");
_Static_assert(RA__PATH_LEN == 4095, "the reason says 4095");

const char *ra__parse_format(const char *s, ra_format_t *out)
{
    static const struct {
        const char *name;
        ra_format_t format;
    } formats[] = {
        {"text", RA_FORMAT_TEXT},
        {"json", RA_FORMAT_JSON},
        {"prometheus", RA_FORMAT_PROMETHEUS},
    };

    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        if (strcmp(s, formats[i].name) == 0) {
            *out = formats[i].format;
            return NULL;
        }
    }
    return "expected text, json or prometheus";
}

const char *ra__parse_output(const char *s)
{
    size_t len = strnlen(s, RA__PATH_LEN + 1);

    if (len == 0)
        return "empty; expected stderr or a file path";
    if (len > RA__PATH_LEN)
        return "longer than 4095 bytes";
    return NULL;
}

const char *ra__parse_thread_tag(const char *e, size_t len,
                                 size_t *glob_len)
{
    const char *eq = memchr(e, '=', len);
    size_t glob = eq != NULL ? (size_t)(eq - e) : len;

    if (glob == 0 || glob > RA__GLOB_LEN)
        return "the pattern must be 1 to 63 bytes";
    if (eq != NULL &&
        (len - glob - 1 == 0 || len - glob - 1 > RA_TAG_NAME_MAX))
        return "the tag name must be 1 to 63 bytes";
    *glob_len = glob;
    return NULL;
}

const char *ra__list_next(const char **list, size_t *len)
{
    const char *v = *list;

    while (*v == ',')
        v++;
    if (*v == '\0') {
        *list = v;
        return NULL;
    }
    *len = strcspn(v, ",");
    *list = v + *len;
    return v;
}

/* The first entry of list that parse refuses, or the first past
 * RA__LIST_MAX (see ra__check_thread_tags). */
static const char *check_list(const char *list,
                              const char *(*parse)(const char *e,
                                                   size_t len),
                              const char **at, size_t *len)
{
    const char *v = list, *e, *why;
    unsigned n = 0;
    size_t elen = 0;

    while ((e = ra__list_next(&v, &elen)) != NULL) {
        why = ++n > RA__LIST_MAX ? ra__list_too_long : parse(e, elen);
        if (why != NULL) {
            *at = e;
            *len = elen;
            return why;
        }
    }
    if (n > 0)
        return NULL;
    *at = list;
    *len = strlen(list);
    return "no entry";
}

static const char *thread_tag_entry(const char *e, size_t len)
{
    size_t glob_len;

    return ra__parse_thread_tag(e, len, &glob_len);
}

static const char *limit_entry(const char *e, size_t len)
{
    size_t name_len, hard, soft;

    return ra__parse_budget(e, len, &name_len, &hard, &soft);
}

const char *ra__check_thread_tags(const char *spec, const char **at,
                                  size_t *len)
{
    return check_list(spec, thread_tag_entry, at, len);
}

const char *ra__check_limits(const char *spec, const char **at,
                             size_t *len)
{
    return check_list(spec, limit_entry, at, len);
}
