/* Floor: OS (the bottom: every floor may warn). The library's diagnostics:
 * one line on stderr for a warning, and the failed assertion that ends the
 * process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

void ra__warn(const char *msg)
{
    /* write(2) rather than stdio: this runs inside malloc and must not
     * allocate. A short write of a diagnostic is not worth retrying. */
    if (write(STDERR_FILENO, msg, strlen(msg)) >= 0)
        (void)!write(STDERR_FILENO, "\n", 1);
}

void ra__assert_fail(const char *cond, const char *file, int line)
{
    char buf[512];
    snprintf(buf, sizeof buf, "regionalloc: %s:%d: assertion failed: %s",
             file, line, cond);
    ra__warn(buf);
    abort();
}
