/* The module regionalloc: its functions and its init, which finds the
 * library's API in the process. */
#include "module.h"

#include <errno.h>

#include "module_doc.h"
#include "tasks.h"

static PyObject *module_enabled(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(rapy_enabled);
}

static PyObject *module_tag(PyObject *module, PyObject *name)
{
    (void)module;
    return rapy_tag_get(name, Py_None);
}

static PyObject *module_current(PyObject *module, PyObject *unused)
{
    ra_tag_t id;

    (void)module;
    (void)unused;
    if (!rapy_enabled)
        Py_RETURN_NONE;
    id = rapy_api.tag_current();
    if (id == RA_TAG_NONE)
        Py_RETURN_NONE;
    return rapy_tag_for_id(id);
}

static PyObject *module_tags(PyObject *module, PyObject *unused)
{
    PyObject *list;
    unsigned count;

    (void)module;
    (void)unused;
    list = PyList_New(0);
    if (list == NULL || !rapy_enabled)
        return list;
    count = rapy_api.tag_count();
    for (ra_tag_t id = 1; id <= count; id++) {
        PyObject *tag;

        if (rapy_api.tag_name(id) == NULL)
            continue;
        tag = rapy_tag_for_id(id);
        if (tag == NULL || PyList_Append(list, tag) != 0) {
            Py_XDECREF(tag);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(tag);
    }
    return list;
}

static PyObject *module_report(PyObject *module, PyObject *args,
                               PyObject *kwds)
{
    static char *keywords[] = {"format", "detail", NULL};
    ra_format_t fmt = RA_FORMAT_TEXT;
    int detail = 0;

    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O&p:report", keywords,
                                     rapy_format_arg, &fmt, &detail))
        return NULL;
    if (rapy_require_enabled() != 0)
        return NULL;
    if (detail)
        fmt = (ra_format_t)(fmt | RA_REPORT_DETAIL);
    return rapy_report_text(rapy_api.report, fmt, "ra_report");
}

static PyObject *module_checkpoints(PyObject *module, PyObject *args,
                                    PyObject *kwds)
{
    static char *keywords[] = {"format", NULL};
    ra_format_t fmt = RA_FORMAT_TEXT;

    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O&:checkpoints", keywords,
                                     rapy_format_arg, &fmt))
        return NULL;
    if (rapy_require_enabled() != 0)
        return NULL;
    return rapy_report_text(rapy_api.checkpoint_report, fmt,
                            "ra_checkpoint_report");
}

static PyObject *module_checkpoint(PyObject *module, PyObject *name)
{
    const char *label = rapy_text_arg(name, "a checkpoint's name", NULL);

    (void)module;
    if (label == NULL || rapy_require_enabled() != 0)
        return NULL;
    if (rapy_api.checkpoint(label) != 0)
        return rapy_raise_errno(errno, "ra_checkpoint");
    Py_RETURN_NONE;
}

static PyObject *module_memory_limit(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    if (rapy_require_enabled() != 0)
        return NULL;
    return PyLong_FromSize_t(rapy_api.memory_limit());
}

static PyObject *module_set_memory_limit(PyObject *module, PyObject *arg)
{
    size_t bytes;

    (void)module;
    if (!rapy_size_arg(arg, &bytes))
        return NULL;
    if (rapy_require_enabled() != 0)
        return NULL;
    if (rapy_api.memory_limit_set(bytes) != 0)
        return rapy_raise_errno(errno, "ra_memory_limit_set");
    Py_RETURN_NONE;
}

static PyMethodDef module_functions[] = {
    {"enabled", module_enabled, METH_NOARGS, enabled_doc},
    {"tag", module_tag, METH_O, tag_function_doc},
    {"current", module_current, METH_NOARGS, current_doc},
    {"tags", module_tags, METH_NOARGS, tags_doc},
    {"report", (PyCFunction)(void (*)(void))module_report,
     METH_VARARGS | METH_KEYWORDS, report_doc},
    {"checkpoint", module_checkpoint, METH_O, checkpoint_doc},
    {"checkpoints", (PyCFunction)(void (*)(void))module_checkpoints,
     METH_VARARGS | METH_KEYWORDS, checkpoints_doc},
    {"memory_limit", module_memory_limit, METH_NOARGS, memory_limit_doc},
    {"set_memory_limit", module_set_memory_limit, METH_O,
     set_memory_limit_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "regionalloc",
    .m_doc = module_doc,
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC PyInit_regionalloc(void);

PyMODINIT_FUNC PyInit_regionalloc(void)
{
    PyObject *module;

    rapy_api_find();
    module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (rapy_tag_add(module) != 0 || rapy_usage_add(module) != 0 ||
        rapy_decorate_add(module) != 0 || rapy_tasks_add(module) != 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
