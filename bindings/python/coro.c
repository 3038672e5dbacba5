/* The coroutine wrapper, regionalloc.TaggedCoroutine: a coroutine whose
 * each step runs with its own tags pushed above the thread's stack and
 * leaves none there. Made for a task (tasks.c's follow_tasks) and for a
 * coroutine of an async function decorated with a tag (decorate.c). */
#include "coro.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

/* A step is one send, throw or close: one run of the coroutine between two
 * awaits. It starts by pushing the tags the coroutine had entered and not
 * left when its last step ended (saved), above the thread's stack as it is
 * then (the step's base), and it ends by cutting every tag above that base
 * off the stack back into saved. The tags come off in whatever way the step
 * ends (it awaits, returns, raises), so another task that runs on the
 * thread next never allocates under them, and no step leaves the thread's
 * stack other than it found it. Saved tags count as entered (stack.h) from
 * the time the wrapper has them until the coroutine ends, so that none of
 * them can be destroyed and its id handed to another tag in between. */

#define INLINE_TAGS 4

typedef struct {
    PyObject_HEAD
    PyObject *coro;        /* the wrapped coroutine; NULL once cleared */
    PyObject *weakrefs;
    ra_tag_t *saved;       /* bottom first; inline_tags, or RA_TAG_STACK_MAX
                              on the heap */
    unsigned nsaved;
    bool started;          /* a step has run: close it with its tags */
    bool followed;         /* a task factory has given it its tags */
    ra_tag_t inline_tags[INLINE_TAGS];
} tagged_coro;

static PyTypeObject coro_type;

/* No step of a wrapper is running on the thread. */
#define NO_STEP UINT_MAX

/* The base of the outermost step running on the thread (a wrapper awaited
 * by another runs inside its step): a task made during a step inherits the
 * tags above it, which that step pushed or entered. */
static _Thread_local unsigned step_base = NO_STEP;

/* collections.abc.Coroutine, which the wrapper is registered with; the
 * names of the coroutine methods a step calls. Set by rapy_coro_ready. */
static PyObject *coroutine_abc, *str_throw, *str_close;

struct step {
    unsigned base;
    unsigned outer_base; /* step_base when the step started */
};

/* Room for n saved tags (n <= RA_TAG_STACK_MAX): 0, or -1 with nothing
 * changed when the heap array cannot be had (no exception set: the caller
 * may be ending a step that already raised). */
static int reserve_saved(tagged_coro *w, unsigned n)
{
    ra_tag_t *tags;

    /* The inline array, until more are needed, then one of the most on
     * the heap. */
    if (n <= (w->saved == w->inline_tags ? INLINE_TAGS : RA_TAG_STACK_MAX))
        return 0;
    tags = PyMem_RawMalloc(RA_TAG_STACK_MAX * sizeof *tags);
    if (tags == NULL)
        return -1;
    memcpy(tags, w->saved, w->nsaved * sizeof *tags);
    w->saved = tags;
    return 0;
}

/* Pushes w's saved tags: 0, or -1 with the push's exception set and the
 * stack and saved as they were. */
static int step_begin(tagged_coro *w, struct step *st)
{
    st->base = rapy_stack_depth();
    for (unsigned i = 0; i < w->nsaved; i++) {
        /* The tags above the base are saved[0..i), just pushed with
         * nothing in between: the cut writes saved as it was. */
        if (rapy_stack_restore(w->saved[i]) != 0) {
            rapy_stack_cut(st->base, w->saved);
            return -1;
        }
    }
    w->nsaved = 0;
    w->started = true;
    st->outer_base = step_base;
    if (step_base == NO_STEP)
        step_base = st->base;
    return 0;
}

/* Whether coro has ended (its frame is gone: cr_frame or gi_frame is
 * None), 1 or 0; -1 when it has no frame to say (not a coroutine of
 * Python code). Keeps the exception set, if any. */
static int frame_gone(PyObject *coro)
{
    PyObject *type, *value, *traceback, *frame;
    int gone = -1;

    PyErr_Fetch(&type, &value, &traceback);
    frame = PyObject_GetAttrString(coro, PyGen_CheckExact(coro) ? "gi_frame"
                                                               : "cr_frame");
    if (frame != NULL)
        gone = frame == Py_None;
    else
        PyErr_Clear();
    Py_XDECREF(frame);
    PyErr_Restore(type, value, traceback);
    return gone;
}

/* Cuts the tags above the step's base into saved; a step after which the
 * coroutine has ended (ended, or a step that raised when its frame is gone
 * or it has none: raising ends an awaitable) drops them, entered no more.
 * Touches no Python exception: the step's own is the caller's to return.
 * Should saved have no room (no memory for 256 bytes), the tags stay
 * pushed, as they would without follow_tasks, rather than be lost. */
static void step_end(tagged_coro *w, const struct step *st, bool ended,
                     bool raised)
{
    unsigned depth = rapy_stack_depth();

    /* saved is empty since step_begin: the cut writes it from the start. */
    step_base = st->outer_base;
    if (depth > st->base && reserve_saved(w, depth - st->base) == 0)
        w->nsaved = rapy_stack_cut(st->base, w->saved);
    if (w->nsaved != 0 && (ended || (raised && frame_gone(w->coro) != 0))) {
        rapy_stack_release(w->saved, w->nsaved);
        w->nsaved = 0;
    }
}

/* The coroutine a cleared wrapper no longer has: -1 with RuntimeError. */
static int check_coro(tagged_coro *w)
{
    if (w->coro != NULL)
        return 0;
    PyErr_SetString(PyExc_RuntimeError,
                    "regionalloc: this coroutine was cleared");
    return -1;
}

/* One send: what PyIter_Send on the coroutine returns, as a step. */
static PySendResult coro_am_send(PyObject *self, PyObject *arg,
                                 PyObject **result)
{
    tagged_coro *w = (tagged_coro *)self;
    struct step st;
    PySendResult status;

    *result = NULL;
    if (check_coro(w) != 0 || step_begin(w, &st) != 0)
        return PYGEN_ERROR;
    status = PyIter_Send(w->coro, arg, result);
    step_end(w, &st, status == PYGEN_RETURN, status == PYGEN_ERROR);
    return status;
}

/* Raises StopIteration carrying value as its value: PyErr_SetObject with a
 * tuple would take the tuple for the exception's arguments. */
static void set_stop_iteration(PyObject *value)
{
    PyObject *exc = PyObject_CallOneArg(PyExc_StopIteration, value);

    if (exc != NULL) {
        PyErr_SetObject(PyExc_StopIteration, exc);
        Py_DECREF(exc);
    }
}

/* The send of the Python protocol: the value yielded, or NULL with
 * StopIteration(return value) or the coroutine's exception. */
static PyObject *coro_send(PyObject *self, PyObject *arg)
{
    PyObject *result;

    if (coro_am_send(self, arg, &result) != PYGEN_RETURN)
        return result;
    set_stop_iteration(result);
    Py_DECREF(result);
    return NULL;
}

static PyObject *coro_iternext(PyObject *self)
{
    return coro_send(self, Py_None);
}

/* Calls the coroutine's method name with args (at most 3) as a step. */
static PyObject *call_as_step(tagged_coro *w, PyObject *name,
                              PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *stack[4], *result = NULL;
    struct step st;

    if (check_coro(w) != 0)
        return NULL;
    stack[0] = w->coro;
    for (Py_ssize_t i = 0; i < nargs; i++)
        stack[i + 1] = args[i];
    if (step_begin(w, &st) == 0) {
        result = PyObject_VectorcallMethod(name, stack, (size_t)nargs + 1,
                                           NULL);
        step_end(w, &st, result != NULL && name == str_close, result == NULL);
    }
    return result;
}

static PyObject *coro_throw(PyObject *self, PyObject *const *args,
                            Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 3) {
        PyErr_Format(PyExc_TypeError,
                     "throw expected 1 to 3 arguments, got %zd", nargs);
        return NULL;
    }
    return call_as_step((tagged_coro *)self, str_throw, args, nargs);
}

static PyObject *coro_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    return call_as_step((tagged_coro *)self, str_close, NULL, 0);
}

static PyObject *coro_await(PyObject *self)
{
    return Py_NewRef(self);
}

/* True when the coroutine may still run code (started, not finished):
 * only then is there a with block in it to close under its tags. */
static bool coro_suspended(tagged_coro *w)
{
    return w->started && w->coro != NULL && frame_gone(w->coro) != 1;
}

/* A wrapper collected while its coroutine is suspended inside a tag closes
 * it with its tags pushed, so that the coroutine's with blocks leave the
 * tags they entered (the coroutine closing itself later would find them
 * missing from the stack). */
static void coro_finalize(PyObject *self)
{
    tagged_coro *w = (tagged_coro *)self;
    PyObject *type, *value, *traceback, *result;

    if (w->nsaved == 0)
        return;
    PyErr_Fetch(&type, &value, &traceback);
    if (coro_suspended(w)) {
        result = coro_close(self, NULL);
        if (result == NULL)
            PyErr_WriteUnraisable(self);
        Py_XDECREF(result);
    }
    PyErr_Restore(type, value, traceback);
}

static int coro_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((tagged_coro *)self)->coro);
    return 0;
}

static int coro_clear(PyObject *self)
{
    Py_CLEAR(((tagged_coro *)self)->coro);
    return 0;
}

static void coro_dealloc(PyObject *self)
{
    tagged_coro *w = (tagged_coro *)self;

    if (PyObject_CallFinalizerFromDealloc(self) < 0)
        return; /* resurrected */
    PyObject_GC_UnTrack(self);
    if (w->weakrefs != NULL)
        PyObject_ClearWeakRefs(self);
    Py_CLEAR(w->coro);
    rapy_stack_release(w->saved, w->nsaved);
    if (w->saved != w->inline_tags)
        PyMem_RawFree(w->saved);
    Py_TYPE(self)->tp_free(self);
}

/* Attributes the wrapper lacks are the coroutine's (cr_frame, cr_code,
 * __name__, __qualname__...): asyncio's task repr and get_stack, and
 * inspect, read them there. */
static PyObject *coro_getattro(PyObject *self, PyObject *name)
{
    tagged_coro *w = (tagged_coro *)self;
    PyObject *value = PyObject_GenericGetAttr(self, name);

    if (value != NULL || w->coro == NULL ||
        !PyErr_ExceptionMatches(PyExc_AttributeError))
        return value;
    PyErr_Clear();
    return PyObject_GetAttr(w->coro, name);
}

static PyObject *coro_repr(PyObject *self)
{
    tagged_coro *w = (tagged_coro *)self;

    return PyUnicode_FromFormat("<regionalloc.TaggedCoroutine of %R>",
                                w->coro != NULL ? w->coro : Py_None);
}

/* Tracks w for the garbage collector ahead of the coroutines it wraps.
 * When a cycle holds a suspended coroutine (its frame refers to its own
 * task, say), the collector calls the finalizers of the cycle in the order
 * of its list, which is the order of tracking: so the wrapper's closes the
 * coroutine under its tags before the coroutine's own would close it
 * without them (its with blocks would then find their tags missing). The
 * coroutine, and a wrapper it may be, go to the list's end again. */
static void track_before(tagged_coro *w)
{
    PyObject *inner = w->coro;

    PyObject_GC_Track(w);
    while (inner != NULL && PyObject_GC_IsTracked(inner)) {
        PyObject_GC_UnTrack(inner);
        PyObject_GC_Track(inner);
        if (!Py_IS_TYPE(inner, &coro_type))
            break;
        inner = ((tagged_coro *)inner)->coro;
    }
}

static PyMethodDef coro_methods[] = {
    {"send", coro_send, METH_O,
     "send(value): runs the coroutine's next step with its tags entered."},
    {"throw", (PyCFunction)(void (*)(void))coro_throw, METH_FASTCALL,
     "throw(exc): raises exc in the coroutine, a step with its tags "
     "entered."},
    {"close", coro_close, METH_NOARGS,
     "close(): closes the coroutine with its tags entered."},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods coro_async = {
    .am_await = coro_await,
    .am_send = coro_am_send,
};

static PyTypeObject coro_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "regionalloc.TaggedCoroutine",
    .tp_doc = "A coroutine whose tags follow it: each step (each time its "
              "task runs it) enters the tags it had entered and not left "
              "when its last step ended, and leaves them when the step "
              "ends, so that other tasks never allocate under them. Made "
              "by follow_tasks() and by a tag decorating an async "
              "function; every other attribute is the wrapped "
              "coroutine's.",
    .tp_basicsize = sizeof(tagged_coro),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = coro_dealloc,
    .tp_finalize = coro_finalize,
    .tp_traverse = coro_traverse,
    .tp_clear = coro_clear,
    .tp_repr = coro_repr,
    .tp_getattro = coro_getattro,
    .tp_as_async = &coro_async,
    .tp_iternext = coro_iternext,
    .tp_methods = coro_methods,
    .tp_weaklistoffset = offsetof(tagged_coro, weakrefs),
};

/* Whether a Task runs obj as its coroutine (what asyncio.iscoroutine
 * accepts): 1, 0, or -1 with an exception set. */
static int is_coroutine(PyObject *obj)
{
    if (PyCoro_CheckExact(obj) || PyGen_CheckExact(obj))
        return 1;
    return PyObject_IsInstance(obj, coroutine_abc);
}

/* coro wrapped, its first step to enter tags[0..n), bottom first: they
 * count as entered from now (Tag.destroy() refuses them) until the
 * coroutine ends; what is not a coroutine (the Task refuses it) unchanged.
 * alive, when not NULL, is checked after the wrapper is made (making it
 * may collect garbage, whose finalizers may destroy the tag) and before it
 * holds tags, with no Python code run in between. New reference, or NULL
 * with an exception set (ValueError: alive was destroyed). */
static PyObject *wrap_coroutine(PyObject *coro, const ra_tag_t *tags,
                                unsigned n, const rapy_tag *alive)
{
    int is_coro = is_coroutine(coro);
    tagged_coro *w;

    if (is_coro <= 0)
        return is_coro < 0 ? NULL : Py_NewRef(coro);
    w = PyObject_GC_New(tagged_coro, &coro_type);
    if (w == NULL)
        return NULL;
    w->coro = Py_NewRef(coro);
    w->weakrefs = NULL;
    w->saved = w->inline_tags;
    w->nsaved = 0;
    w->started = false;
    w->followed = false;
    if (reserve_saved(w, n) != 0) {
        Py_DECREF(w);
        return PyErr_NoMemory();
    }
    if (alive != NULL && rapy_tag_alive(alive) != 0) {
        Py_DECREF(w);
        return NULL;
    }
    memcpy(w->saved, tags, n * sizeof *tags);
    w->nsaved = n;
    rapy_stack_hold(tags, n);
    track_before(w);
    return (PyObject *)w;
}

PyObject *rapy_coro_wrap_tag(rapy_tag *tag, PyObject *coro)
{
    ra_tag_t id = tag->id; /* a live tag's object keeps its id */
    PyObject *wrapped;

    if (coro == NULL)
        return NULL;
    wrapped = wrap_coroutine(coro, &id, 1, tag);
    Py_DECREF(coro);
    return wrapped;
}

/* The tags a task made now inherits, bottom first: those above the base of
 * the step running on the thread (the creator's own, pushed once already,
 * not the thread's below them). Returns how many. */
static unsigned inherited_tags(const ra_tag_t **tags)
{
    unsigned depth = rapy_stack_depth();

    *tags = rapy_stack_tags();
    if (step_base == NO_STEP || depth <= step_base)
        return 0;
    *tags += step_base;
    return depth - step_base;
}

/* Puts tags[0..n) below w's saved tags: 0, or -1 with an exception set
 * (OSError EOVERFLOW when the step could never push them all). */
static int prepend_tags(tagged_coro *w, const ra_tag_t *tags, unsigned n)
{
    if (n + w->nsaved > RA_TAG_STACK_MAX) {
        rapy_raise_oserror(EOVERFLOW,
                           PyUnicode_FromString(
                               "regionalloc: a new task would inherit more "
                               "tags than a thread's tag stack holds"));
        return -1;
    }
    if (reserve_saved(w, n + w->nsaved) != 0) {
        PyErr_NoMemory();
        return -1;
    }
    memmove(w->saved + n, w->saved, w->nsaved * sizeof *tags);
    memcpy(w->saved, tags, n * sizeof *tags);
    w->nsaved += n;
    rapy_stack_hold(tags, n);
    return 0;
}

PyObject *rapy_coro_follow(PyObject *coro)
{
    const ra_tag_t *tags;
    unsigned n = inherited_tags(&tags);
    tagged_coro *w;
    PyObject *wrapped;

    if (Py_IS_TYPE(coro, &coro_type)) {
        w = (tagged_coro *)coro;
        if (!w->followed && !w->started && prepend_tags(w, tags, n) != 0)
            return NULL;
        w->followed = true;
        return Py_NewRef(coro);
    }
    /* coro is no wrapper: a wrapper that comes back is a new one. */
    wrapped = wrap_coroutine(coro, tags, n, NULL);
    if (wrapped != NULL && Py_IS_TYPE(wrapped, &coro_type))
        ((tagged_coro *)wrapped)->followed = true;
    return wrapped;
}

/* Registers the wrapper as a collections.abc.Coroutine, which
 * asyncio.iscoroutine() and the C Task accept. _collections_abc is what
 * collections.abc re-exports, already imported when Python starts. */
static int register_coroutine(void)
{
    PyObject *abc, *result;

    abc = PyImport_ImportModule("_collections_abc");
    if (abc == NULL)
        return -1;
    coroutine_abc = PyObject_GetAttrString(abc, "Coroutine");
    Py_DECREF(abc);
    if (coroutine_abc == NULL)
        return -1;
    result = PyObject_CallMethod(coroutine_abc, "register", "O",
                                 (PyObject *)&coro_type);
    Py_XDECREF(result);
    return result != NULL ? 0 : -1;
}

int rapy_coro_ready(void)
{
    if (PyType_Ready(&coro_type) != 0)
        return -1;
    str_throw = PyUnicode_InternFromString("throw");
    str_close = PyUnicode_InternFromString("close");
    if (str_throw == NULL || str_close == NULL)
        return -1;
    return register_coroutine();
}
