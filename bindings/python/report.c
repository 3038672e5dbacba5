/* The library's reports as Python strings. They are written to a memory
 * file (memfd) and decoded from its mapping: a buffer malloc'd for them
 * would be allocated, and grown, in the caller's tag. */
#include "module.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes the report into the memory file fd: 0, or an errno. The stream's
 * buffer is on the stack, so that stdio allocates nothing but the FILE
 * itself, freed by fclose. */
static int write_report(int fd, int (*write)(FILE *out, ra_format_t fmt),
                        ra_format_t fmt)
{
    char buffer[8192];
    FILE *out;
    int err = 0;

    out = fdopen(fd, "w");
    if (out == NULL) {
        err = errno;
        close(fd);
        return err;
    }
    setvbuf(out, buffer, _IOFBF, sizeof buffer);
    if (write(out, fmt) != 0)
        err = errno;
    if (fflush(out) != 0 && err == 0)
        err = errno;
    /* fclose closes fd: the caller reads through its own duplicate. */
    fclose(out);
    return err;
}

/* The text in the memory file fd, as a str (replacing what is not UTF-8). */
static PyObject *read_report(int fd, const char *what)
{
    struct stat st;
    void *map;
    PyObject *text;

    if (fstat(fd, &st) != 0)
        return rapy_raise_errno(errno, what);
    if (st.st_size == 0)
        return PyUnicode_FromStringAndSize("", 0);
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED)
        return rapy_raise_errno(errno, what);
    text = PyUnicode_DecodeUTF8(map, (Py_ssize_t)st.st_size, "replace");
    munmap(map, (size_t)st.st_size);
    return text;
}

PyObject *rapy_report_text(int (*write)(FILE *out, ra_format_t fmt),
                           ra_format_t fmt, const char *what)
{
    int fd, copy, err;
    PyObject *text;

    fd = memfd_create("regionalloc-report", MFD_CLOEXEC);
    if (fd < 0)
        return rapy_raise_errno(errno, "memfd_create");
    copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
        err = errno;
        close(fd);
        return rapy_raise_errno(err, "fcntl");
    }
    Py_BEGIN_ALLOW_THREADS
    err = write_report(copy, write, fmt);
    Py_END_ALLOW_THREADS
    text = err != 0 ? rapy_raise_errno(err, what) : read_report(fd, what);
    close(fd);
    return text;
}
