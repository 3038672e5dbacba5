/* Suite "values (unit)": the syntax of the values regionalloc run sets that
 * are not sizes (src/values.c and src/http_address.c, which the library and
 * tools/regionalloc share) over the table tests/run_options.table (which
 * tests/test_options.sh also runs the library and the tool over); the
 * parts a rule and an address are cut into; the list's walk; and what only
 * the socket tells: a port taken, a remote address allowed. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_address.h"
#include "sizes.h"
#include "testutil.h"
#include "values.h"

/* -- the table ------------------------------------------------------------- */

/* in with each {N*TEXT} written out, into out (size bytes). */
static void expand(const char *in, char *out, size_t size)
{
    size_t n = 0;

    while (*in != '\0') {
        char *star, *close;
        unsigned long times = 0;
        if (*in == '{' && (times = strtoul(in + 1, &star, 10)) > 0 &&
            *star == '*' && (close = strchr(star, '}')) != NULL) {
            size_t len = (size_t)(close - star - 1);
            for (; times > 0; times--, n += len) {
                ck_assert_uint_lt(n + len, size);
                memcpy(out + n, star + 1, len);
            }
            in = close + 1;
            continue;
        }
        ck_assert_uint_lt(n + 1, size);
        out[n++] = *in++;
    }
    out[n] = '\0';
}

/* What the tool's check of option says of value: NULL, or why not. */
static const char *check(const char *option, const char *value)
{
    const char *at;
    size_t len, n;
    ra_format_t format;

    if (strcmp(option, "--thread-tags") == 0)
        return ra__check_thread_tags(value, &at, &len);
    if (strcmp(option, "--limits") == 0)
        return ra__check_limits(value, &at, &len);
    if (strcmp(option, "--http") == 0)
        return ra__http_check(value, false);
    if (strcmp(option, "--report") == 0 ||
        strcmp(option, "--checkpoints") == 0)
        return ra__parse_output(value);
    if (strcmp(option, "--format") == 0)
        return ra__parse_format(value, &format);
    if (strcmp(option, "--prof") == 0)
        return ra__parse_prof_interval(value, &n);
    ck_abort_msg("unknown option %s", option);
    return NULL;
}

/* A well-formed address, built without the endpoints, is refused as the
 * server's start refuses it. */
static const char *without_http(const char *option, const char *why)
{
#ifdef RA_HTTP
    (void)option;
    return why;
#else
    if (strcmp(option, "--http") == 0 &&
        (why == NULL || strncmp(why, "not a loopback", 14) == 0 ||
         strcmp(why, "the host does not resolve") == 0))
        return RA__HTTP_NONE;
    return why;
#endif
}

START_TEST(test_values_unit_as_the_table_says)
{
    FILE *f = tu_open_source("tests/run_options.table");
    static char line[1024], value[8192];
    unsigned cases = 0;

    ck_assert_msg(f != NULL, "tests/run_options.table not found");
    while (fgets(line, sizeof line, f) != NULL) {
        char *field[4];
        const char *got, *want;
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        field[0] = line;
        for (int i = 1; i < 4; i++) {
            field[i] = strchr(field[i - 1], '|');
            ck_assert_msg(field[i] != NULL, "malformed: %s", line);
            *field[i]++ = '\0';
        }
        expand(field[1], value, sizeof value);
        got = check(field[0], value);
        want = without_http(field[0], field[3][0] != '\0' ? field[3] : NULL);
        cases++;
        if (want == NULL)
            ck_assert_msg(got == NULL, "%s '%.80s' refused: %s", field[0],
                          value, got);
        else
            ck_assert_msg(got != NULL && strcmp(got, want) == 0,
                          "%s '%.80s': %s, not %s", field[0], value,
                          got != NULL ? got : "taken", want);
    }
    fclose(f);
    ck_assert_uint_ge(cases, 60);
}
END_TEST

/* -- the parts ------------------------------------------------------------- */

START_TEST(test_values_unit_list_walk_skips_empty_entries)
{
    const char *list = ",a,,bc,", *e;
    size_t len = 0;

    e = ra__list_next(&list, &len);
    ck_assert(e != NULL && len == 1 && e[0] == 'a');
    e = ra__list_next(&list, &len);
    ck_assert(e != NULL && len == 2 && strncmp(e, "bc", 2) == 0);
    ck_assert_ptr_null(ra__list_next(&list, &len));
    ck_assert_ptr_null(ra__list_next(&list, &len));
    list = "";
    ck_assert_ptr_null(ra__list_next(&list, &len));
}
END_TEST

/* The entry at fault is named, not the whole list. */
START_TEST(test_values_unit_lists_name_the_entry_at_fault)
{
    static const char spec[] = "a,=x,c";
    const char *at = NULL;
    size_t len = 0;

    ck_assert_str_eq(ra__check_thread_tags(spec, &at, &len),
                     "the pattern must be 1 to 63 bytes");
    ck_assert_ptr_eq(at, spec + 2);
    ck_assert_uint_eq(len, 2);
    ck_assert_str_eq(ra__check_limits(",", &at, &len), "no entry");
    ck_assert_str_eq(at, ",");
    ck_assert_uint_eq(len, 1);
}
END_TEST

START_TEST(test_values_unit_thread_tag_parts)
{
    size_t glob_len = 7;

    ck_assert_ptr_null(ra__parse_thread_tag("w*=workers,x", 10, &glob_len));
    ck_assert_uint_eq(glob_len, 2);
    ck_assert_ptr_null(ra__parse_thread_tag("w*", 2, &glob_len));
    ck_assert_uint_eq(glob_len, 2);
    glob_len = 7;
    ck_assert_ptr_nonnull(ra__parse_thread_tag("w*=", 3, &glob_len));
    ck_assert_ptr_nonnull(ra__parse_thread_tag("=w", 2, &glob_len));
    ck_assert_uint_eq(glob_len, 7);
}
END_TEST

START_TEST(test_values_unit_formats)
{
    ra_format_t f = RA_FORMAT_TEXT;

    ck_assert_ptr_null(ra__parse_format("json", &f));
    ck_assert_int_eq(f, RA_FORMAT_JSON);
    ck_assert_ptr_null(ra__parse_format("prometheus", &f));
    ck_assert_int_eq(f, RA_FORMAT_PROMETHEUS);
    ck_assert_ptr_nonnull(ra__parse_format("text ", &f));
    ck_assert_int_eq(f, RA_FORMAT_PROMETHEUS);
}
END_TEST

START_TEST(test_values_unit_address_parts)
{
    char host[RA__HTTP_ADDR_LEN + 1] = "untouched";
    const char *port = NULL;

    ck_assert_ptr_null(ra__http_split(":0", host, &port));
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_str_eq(port, "0");
    ck_assert_ptr_null(ra__http_split("[::1]:8080", host, &port));
    ck_assert_str_eq(host, "::1");
    ck_assert_str_eq(port, "8080");
    ck_assert_ptr_null(ra__http_split("localhost:65535", host, &port));
    ck_assert_str_eq(host, "localhost");
    ck_assert_str_eq(port, "65535");
    snprintf(host, sizeof host, "untouched");
    port = NULL;
    ck_assert_ptr_nonnull(ra__http_split("::1:80", host, &port));
    ck_assert_ptr_nonnull(ra__http_split("[::1]:65536", host, &port));
    ck_assert_str_eq(host, "untouched");
    ck_assert_ptr_null(port);
}
END_TEST

/* -- what only the socket tells ----------------------------------------------- */

#ifdef RA_HTTP
/* A loopback socket listening on a port the kernel chose; its port. */
static int listen_somewhere(int *port)
{
    struct sockaddr_in in = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof in;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&in, sizeof in), 0);
    ck_assert_int_eq(listen(fd, 1), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&in, &len), 0);
    *port = ntohs(in.sin_port);
    return fd;
}

START_TEST(test_values_unit_a_port_taken_is_refused)
{
    struct sockaddr_storage bound;
    char addr[32];
    const char *why;
    int port, fd = listen_somewhere(&port);

    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    ck_assert_str_eq(ra__http_check(addr, false), strerror(EADDRINUSE));
    errno = 0;
    ck_assert_int_eq(ra__http_listen(addr, false, &bound, &why), -1);
    ck_assert_int_eq(errno, EADDRINUSE);
    close(fd);
    /* Closed, the port is free again: what the tool opened and closed,
     * the library opens after it. */
    ck_assert_ptr_null(ra__http_check(addr, false));
    ck_assert_ptr_null(ra__http_check(addr, false));
}
END_TEST

START_TEST(test_values_unit_errno_says_what_kind_of_refusal)
{
    struct sockaddr_storage bound;
    const char *why;
    int fd;

    errno = 0;
    ck_assert_int_eq(ra__http_listen("127.0.0.1:65536", false, &bound, &why),
                     -1);
    ck_assert_int_eq(errno, EINVAL);
    errno = 0;
    ck_assert_int_eq(ra__http_listen("0.0.0.0:0", false, &bound, &why), -1);
    ck_assert_int_eq(errno, EPERM);
    ck_assert_ptr_null(ra__http_check("0.0.0.0:0", true));
    fd = ra__http_listen("127.0.0.1:0", false, &bound, &why);
    ck_assert_int_ge(fd, 0);
    ck_assert_ptr_null(why);
    ck_assert_int_eq(bound.ss_family, AF_INET);
    close(fd);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("values (unit)");
    TCase *tc = tcase_create("table");

    tcase_add_test(tc, test_values_unit_as_the_table_says);
    suite_add_tcase(s, tc);
    tc = tcase_create("parts");
    tcase_add_test(tc, test_values_unit_list_walk_skips_empty_entries);
    tcase_add_test(tc, test_values_unit_lists_name_the_entry_at_fault);
    tcase_add_test(tc, test_values_unit_thread_tag_parts);
    tcase_add_test(tc, test_values_unit_formats);
    tcase_add_test(tc, test_values_unit_address_parts);
    suite_add_tcase(s, tc);
#ifdef RA_HTTP
    tc = tcase_create("sockets");
    tcase_add_test(tc, test_values_unit_a_port_taken_is_refused);
    tcase_add_test(tc, test_values_unit_errno_says_what_kind_of_refusal);
    suite_add_tcase(s, tc);
#endif
    return tu_run_suite(s);
}
