/* The checks of the module's arguments: a string, a tag's name, a size,
 * a report's format, each with the exception CPython's own functions
 * raise. */
#include "module.h"

#include <string.h>

const char *rapy_text_arg(PyObject *obj, const char *what, size_t *len)
{
    const char *text;
    Py_ssize_t size;

    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "regionalloc: %s must be a str, not %.100s",
                     what, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    text = PyUnicode_AsUTF8AndSize(obj, &size);
    if (text == NULL)
        return NULL;
    if (strlen(text) != (size_t)size) {
        PyErr_Format(PyExc_ValueError, "regionalloc: %s contains NUL", what);
        return NULL;
    }
    if (len != NULL)
        *len = (size_t)size;
    return text;
}

int rapy_name_arg(PyObject *obj, void *out)
{
    size_t len;
    const char *name = rapy_text_arg(obj, "a tag's name", &len);

    if (name == NULL)
        return 0;
    if (len == 0 || len > RA_TAG_NAME_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "regionalloc: a tag's name is 1 to %d bytes in UTF-8 "
                     "(given %zu bytes)",
                     RA_TAG_NAME_MAX, len);
        return 0;
    }
    *(const char **)out = name;
    return 1;
}

int rapy_size_arg(PyObject *obj, void *out)
{
    size_t size;
    long long sign;
    int overflow;

    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "regionalloc: a size must be an int, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return 0;
    }
    sign = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (sign == -1 && PyErr_Occurred())
        return 0;
    if (overflow < 0 || (overflow == 0 && sign < 0)) {
        PyErr_SetString(PyExc_ValueError,
                        "regionalloc: a size must not be negative");
        return 0;
    }
    size = PyLong_AsSize_t(obj);
    if (size == (size_t)-1 && PyErr_Occurred())
        return 0;
    *(size_t *)out = size;
    return 1;
}

int rapy_format_arg(PyObject *obj, void *out)
{
    static const char *const names[] = {"text", "json", "prometheus"};
    static const ra_format_t formats[] = {RA_FORMAT_TEXT, RA_FORMAT_JSON,
                                          RA_FORMAT_PROMETHEUS};
    const char *name = rapy_text_arg(obj, "format", NULL);

    if (name == NULL)
        return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i]) == 0) {
            *(ra_format_t *)out = formats[i];
            return 1;
        }
    }
    PyErr_Format(PyExc_ValueError,
                 "regionalloc: format %R is not \"text\", \"json\" or "
                 "\"prometheus\"",
                 obj);
    return 0;
}
