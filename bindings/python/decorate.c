/* A tag as a decorator: the wrapper that runs a function with its tag
 * pushed, or for an async function, whose call runs none of its code,
 * hands each coroutine it makes to coro.c, to run each step under the
 * tag. Generator functions are refused. */
#include "module.h"

#include <stddef.h>

#include "coro.h"

typedef struct {
    PyObject_HEAD
    rapy_tag *tag;
    PyObject *func;
    PyObject *dict; /* functools.update_wrapper's __name__, __wrapped__... */
    vectorcallfunc vectorcall;
} tagged;

/* Sets the exception now raised's __context__ to the one that was (type,
 * value, tb, taken with PyErr_Fetch), as Python does for an exception
 * raised while another is handled. */
static void chain_exception(PyObject *type, PyObject *value, PyObject *tb)
{
    PyObject *ntype, *nvalue, *ntb;

    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    PyErr_Fetch(&ntype, &nvalue, &ntb);
    PyErr_NormalizeException(&ntype, &nvalue, &ntb);
    PyException_SetContext(nvalue, value);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    PyErr_Restore(ntype, nvalue, ntb);
}

static PyObject *tagged_vectorcall(PyObject *self, PyObject *const *args,
                                   size_t nargsf, PyObject *kwnames)
{
    tagged *wrapper = (tagged *)self;
    PyObject *result, *type, *value, *tb;

    if (rapy_tag_enter(wrapper->tag) != 0)
        return NULL;
    result = PyObject_Vectorcall(wrapper->func, args, nargsf, kwnames);
    if (result != NULL) {
        if (rapy_tag_leave(wrapper->tag) == 0)
            return result;
        Py_DECREF(result);
        return NULL;
    }
    PyErr_Fetch(&type, &value, &tb);
    if (rapy_tag_leave(wrapper->tag) == 0)
        PyErr_Restore(type, value, tb);
    else
        chain_exception(type, value, tb);
    return NULL;
}

/* An async function's call: its coroutine, each step of which runs under
 * the tag (rapy_coro_wrap_tag). */
static PyObject *tagged_coro_vectorcall(PyObject *self, PyObject *const *args,
                                        size_t nargsf, PyObject *kwnames)
{
    tagged *wrapper = (tagged *)self;

    /* Checked before a coroutine is made (dropped, it would warn that it
     * was never awaited), and again by rapy_coro_wrap_tag. */
    if (rapy_tag_alive(wrapper->tag) != 0)
        return NULL;
    return rapy_coro_wrap_tag(
        wrapper->tag, PyObject_Vectorcall(wrapper->func, args, nargsf, kwnames));
}

static PyObject *tagged_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *tagged_repr(tagged *wrapper)
{
    return PyUnicode_FromFormat("<regionalloc tag %R of %R>",
                                wrapper->tag->name, wrapper->func);
}

static int tagged_traverse(tagged *wrapper, visitproc visit, void *arg)
{
    Py_VISIT(wrapper->tag);
    Py_VISIT(wrapper->func);
    Py_VISIT(wrapper->dict);
    return 0;
}

static int tagged_clear(tagged *wrapper)
{
    Py_CLEAR(wrapper->tag);
    Py_CLEAR(wrapper->func);
    Py_CLEAR(wrapper->dict);
    return 0;
}

static void tagged_dealloc(tagged *wrapper)
{
    PyObject_GC_UnTrack(wrapper);
    tagged_clear(wrapper);
    PyObject_GC_Del(wrapper);
}

/* __code__, __defaults__ and __kwdefaults__ are the function's, so that
 * inspect.iscoroutinefunction() (and asyncio's) say of the wrapper what
 * they say of it. */
static PyObject *tagged_forward(PyObject *self, void *name)
{
    return PyObject_GetAttrString(((tagged *)self)->func, name);
}

static PyGetSetDef tagged_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"__code__", tagged_forward, NULL, NULL, "__code__"},
    {"__defaults__", tagged_forward, NULL, NULL, "__defaults__"},
    {"__kwdefaults__", tagged_forward, NULL, NULL, "__kwdefaults__"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject tagged_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "regionalloc.TaggedFunction",
    .tp_basicsize = sizeof(tagged),
    .tp_dealloc = (destructor)tagged_dealloc,
    .tp_vectorcall_offset = offsetof(tagged, vectorcall),
    .tp_repr = (reprfunc)tagged_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "What a Tag used as a decorator returns: a function that "
              "runs with the tag pushed; for an async function, one whose "
              "coroutines (regionalloc.TaggedCoroutine) run each of their "
              "steps with the tag pushed, with or without follow_tasks().",
    .tp_traverse = (traverseproc)tagged_traverse,
    .tp_clear = (inquiry)tagged_clear,
    .tp_getset = tagged_getset,
    .tp_descr_get = tagged_get,
    .tp_dictoffset = offsetof(tagged, dict),
};

int rapy_decorate_add(PyObject *module)
{
    (void)module;
    return PyType_Ready(&tagged_type);
}

/* inspect.<test>(func): 1, 0, or -1 with an exception set. */
static int inspect_is(PyObject *inspect, const char *test, PyObject *func)
{
    PyObject *answer = PyObject_CallMethod(inspect, test, "O", func);
    int truth;

    if (answer == NULL)
        return -1;
    truth = PyObject_IsTrue(answer);
    Py_DECREF(answer);
    return truth;
}

/* The wrapper of func (coroutine: an async function), named and
 * documented as func. */
static PyObject *wrap(rapy_tag *tag, PyObject *func, bool coroutine)
{
    tagged *wrapper = PyObject_GC_New(tagged, &tagged_type);
    PyObject *functools, *done;

    if (wrapper == NULL)
        return NULL;
    wrapper->tag = (rapy_tag *)Py_NewRef((PyObject *)tag);
    wrapper->func = Py_NewRef(func);
    wrapper->dict = NULL;
    wrapper->vectorcall = coroutine ? tagged_coro_vectorcall : tagged_vectorcall;
    PyObject_GC_Track(wrapper);
    functools = PyImport_ImportModule("functools");
    done = functools == NULL ? NULL
                             : PyObject_CallMethod(functools, "update_wrapper",
                                                   "OO", wrapper, func);
    Py_XDECREF(functools);
    if (done == NULL) {
        Py_DECREF(wrapper);
        return NULL;
    }
    Py_DECREF(done);
    return (PyObject *)wrapper;
}

PyObject *rapy_decorate(rapy_tag *tag, PyObject *func)
{
    PyObject *inspect;
    int coroutine, generator = 0;

    if (!PyCallable_Check(func))
        return PyErr_Format(PyExc_TypeError,
                            "regionalloc: a Tag decorates a function, not "
                            "%.100s", Py_TYPE(func)->tp_name);
    inspect = PyImport_ImportModule("inspect");
    if (inspect == NULL)
        return NULL;
    coroutine = inspect_is(inspect, "iscoroutinefunction", func);
    if (coroutine == 0)
        generator = inspect_is(inspect, "isgeneratorfunction", func);
    if (coroutine == 0 && generator == 0)
        generator = inspect_is(inspect, "isasyncgenfunction", func);
    Py_DECREF(inspect);
    if (coroutine < 0 || generator < 0)
        return NULL;
    if (generator)
        return PyErr_Format(PyExc_TypeError,
                            "regionalloc: a Tag does not decorate a generator "
                            "function (%R): its steps run after the call; "
                            "enter the tag with `with` in the generator",
                            func);
    return wrap(tag, func, coroutine != 0);
}
