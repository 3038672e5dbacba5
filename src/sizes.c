/* Floor: OS (calls nothing, so that tools/regionalloc compiles it too).
 * The syntax of the sizes users give: REGIONALLOC_MEMORY_LIMIT,
 * REGIONALLOC_LIMITS, REGIONALLOC_PROF and the other sizes of the
 * environment, and regionalloc run's --memory-limit, --limits and --prof,
 * which must refuse
 * what the library would (a value the tool let through and the library
 * refused ran the program with no limit at all). One parser for both, so
 * that they cannot disagree. */
#include <string.h>

#include "regionalloc.h"
#include "sizes.h"

static const char size_syntax[] =
    "expected digits and an optional K, M, G or T (as 512M or 2GiB)";
static const char too_big[] = "more than 2^64 - 1 bytes";

/* The size in the len bytes at s (see ra__parse_size). */
static const char *parse_size_n(const char *s, size_t len, size_t *out)
{
    const char *p = s, *end = s + len;
    size_t value = 0;
    unsigned shift = 0;
    bool overflow = false;

    if (p == end || *p < '0' || *p > '9')
        return size_syntax;
    /* The digits to the end, even past an overflow: a bad suffix after
     * them is a syntax error, whatever the number. */
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        unsigned digit = (unsigned)(*p - '0');
        if (value > (SIZE_MAX - digit) / 10)
            overflow = true;
        else
            value = value * 10 + digit;
    }
    if (p < end && strchr("kKmMgGtT", *p) != NULL) {
        shift = *p == 'k' || *p == 'K'   ? 10
                : *p == 'm' || *p == 'M' ? 20
                : *p == 'g' || *p == 'G' ? 30
                                         : 40;
        p++;
        if (p < end && (*p == 'i' || *p == 'I'))
            p++;
    }
    if (p < end && (*p == 'b' || *p == 'B'))
        p++;
    if (p != end)
        return size_syntax;
    if (overflow || value > (SIZE_MAX >> shift))
        return too_big;
    *out = value << shift;
    return NULL;
}

const char *ra__parse_size(const char *s, size_t *out)
{
    return parse_size_n(s, strlen(s), out);
}

/* "N%" (len bytes at s, the '%' last): N from 1 to 100, digits only. */
static const char *parse_percent(const char *s, size_t len, unsigned *out)
{
    unsigned n = 0;

    if (len < 2)
        return "expected a percentage from 1% to 100%";
    for (size_t i = 0; i + 1 < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return "expected a percentage from 1% to 100%";
        if (n <= 100)
            n = n * 10 + (unsigned)(s[i] - '0');
    }
    if (n < 1 || n > 100)
        return "a percentage of the cgroup's limit is 1% to 100%";
    *out = n;
    return NULL;
}

const char *ra__parse_memory_limit(const char *s, size_t *bytes,
                                   unsigned *percent)
{
    size_t len = strlen(s), n = 0;
    unsigned pct = 0;
    const char *why;

    if (len == 0)
        return "empty; expected a size (as 2G) or 1% to 100% of the "
               "cgroup's limit";
    if (s[len - 1] == '%') {
        why = parse_percent(s, len, &pct);
    } else {
        why = parse_size_n(s, len, &n);
        if (why == size_syntax)
            why = "expected a size (as 2G) or 1% to 100% of the cgroup's "
                  "limit";
        else if (why == NULL && n == 0)
            why = "a limit is 1 byte or more";
    }
    if (why != NULL)
        return why;
    *bytes = n;
    *percent = pct;
    return NULL;
}

const char *ra__parse_prof_interval(const char *s, size_t *out)
{
    size_t n = 0;
    const char *why = ra__parse_size(s, &n);

    if (why == NULL && n == 0)
        return "a mean interval is 1 byte or more";
    if (why == NULL)
        *out = n;
    return why;
}

const char *ra__parse_budget(const char *e, size_t len, size_t *name_len,
                             size_t *hard, size_t *soft)
{
    const char *eq = memchr(e, '=', len), *slash, *end = e + len, *why;
    size_t h = 0, s = 0;

    if (eq == NULL)
        return "expected name=HARD[/SOFT]";
    if (eq == e || (size_t)(eq - e) > RA_TAG_NAME_MAX)
        return "the name must be 1 to 63 bytes";
    slash = memchr(eq + 1, '/', (size_t)(end - eq - 1));
    why = parse_size_n(eq + 1,
                       (size_t)((slash != NULL ? slash : end) - eq - 1), &h);
    if (why == NULL && slash != NULL)
        why = parse_size_n(slash + 1, (size_t)(end - slash - 1), &s);
    if (why == too_big)
        return "a size is more than 2^64 - 1 bytes";
    if (why != NULL)
        return "a size is not digits with an optional K, M, G or T";
    if (h != 0 && s > h)
        return "the soft limit is above the hard one";
    *name_len = (size_t)(eq - e);
    *hard = h;
    *soft = s;
    return NULL;
}
