/* Tags that follow coroutines: a coroutine wrapped so that each of its
 * steps runs with its own tags pushed above the thread's stack and leaves
 * none there, the task factory that wraps every task's coroutine on a loop
 * (follow_tasks), and async functions decorated with a tag. */
#include "tasks.h"

#include <limits.h>
#include <string.h>

#include "stack.h"

/* -- the coroutine wrapper --------------------------------------------------
 * A step is one send, throw or close: one run of the coroutine between two
 * awaits. It starts by pushing the tags the coroutine had entered and not
 * left when its last step ended (saved), above the thread's stack as it is
 * then (the step's base), and it ends by cutting every tag above that base
 * off the stack back into saved. The tags come off in whatever way the step
 * ends (it awaits, returns, raises), so another task that runs on the
 * thread next never allocates under them, and no step leaves the thread's
 * stack other than it found it. */

#define INLINE_TAGS 4

typedef struct {
    PyObject_HEAD
    PyObject *coro;        /* the wrapped coroutine; NULL once cleared */
    PyObject *weakrefs;
    ra_tag_t *saved;       /* bottom first; inline_tags or a heap array */
    unsigned nsaved;
    unsigned capacity;
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
 * names of the coroutine methods a step calls. Set by rapy_tasks_add. */
static PyObject *coroutine_abc, *str_throw, *str_close;

struct step {
    unsigned base;
    unsigned outer_base; /* step_base when the step started */
};

/* Room for n saved tags (n <= RA_TAG_STACK_MAX): false, or true with
 * nothing changed when the heap array cannot be had (no exception set:
 * the caller may be ending a step that already raised). */
static bool reserve_saved(tagged_coro *w, unsigned n)
{
    ra_tag_t *tags;

    if (n <= w->capacity)
        return false;
    tags = PyMem_RawMalloc(RA_TAG_STACK_MAX * sizeof *tags);
    if (tags == NULL)
        return true;
    memcpy(tags, w->saved, w->nsaved * sizeof *tags);
    w->saved = tags;
    w->capacity = RA_TAG_STACK_MAX;
    return false;
}

/* Pushes w's saved tags: 0, or -1 with the push's exception set and the
 * stack and saved as they were. */
static int step_begin(tagged_coro *w, struct step *st)
{
    st->base = rapy_stack_depth();
    for (unsigned i = 0; i < w->nsaved; i++) {
        if (rapy_stack_push(w->saved[i]) != 0) {
            ra_tag_t pushed[RA_TAG_STACK_MAX];

            rapy_stack_cut(st->base, pushed);
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

/* Cuts the tags above the step's base into saved. Touches no Python
 * exception: the step's own is the caller's to return. Should saved have
 * no room (no memory for 256 bytes), the tags stay pushed, as they would
 * without follow_tasks, rather than be lost. */
static void step_end(tagged_coro *w, const struct step *st)
{
    ra_tag_t cut[RA_TAG_STACK_MAX];
    unsigned depth = rapy_stack_depth();

    step_base = st->outer_base;
    if (depth <= st->base || reserve_saved(w, depth - st->base))
        return;
    w->nsaved = rapy_stack_cut(st->base, cut);
    memcpy(w->saved, cut, w->nsaved * sizeof *cut);
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
    step_end(w, &st);
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
        step_end(w, &st);
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
    PyObject *frame;
    bool suspended;

    if (!w->started || w->coro == NULL)
        return false;
    if (!PyCoro_CheckExact(w->coro) && !PyGen_CheckExact(w->coro))
        return true;
    frame = PyObject_GetAttrString(
        w->coro, PyCoro_CheckExact(w->coro) ? "cr_frame" : "gi_frame");
    if (frame == NULL) {
        PyErr_Clear();
        return true;
    }
    suspended = frame != Py_None;
    Py_DECREF(frame);
    return suspended;
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

/* A new wrapper of coro whose first step pushes tags[0..n). */
static PyObject *coro_wrap(PyObject *coro, const ra_tag_t *tags, unsigned n)
{
    tagged_coro *w;

    w = PyObject_GC_New(tagged_coro, &coro_type);
    if (w == NULL)
        return NULL;
    w->coro = Py_NewRef(coro);
    w->weakrefs = NULL;
    w->saved = w->inline_tags;
    w->capacity = INLINE_TAGS;
    w->nsaved = 0;
    w->started = false;
    w->followed = false;
    if (reserve_saved(w, n)) {
        Py_DECREF(w);
        return PyErr_NoMemory();
    }
    memcpy(w->saved, tags, n * sizeof *tags);
    w->nsaved = n;
    track_before(w);
    return (PyObject *)w;
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

/* -- tasks: inherited tags and the task factory ----------------------------- */

/* Whether a Task runs coro as its coroutine (what asyncio.iscoroutine
 * accepts): 1, 0, or -1 with an exception set. */
static int is_coroutine(PyObject *coro)
{
    if (PyCoro_CheckExact(coro) || PyGen_CheckExact(coro))
        return 1;
    return PyObject_IsInstance(coro, coroutine_abc);
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
        PyErr_SetObject(PyExc_OSError,
                        Py_BuildValue("(is)", EOVERFLOW,
                                      "regionalloc: a new task would inherit "
                                      "more tags than a thread's tag stack "
                                      "holds"));
        return -1;
    }
    if (reserve_saved(w, n + w->nsaved)) {
        PyErr_NoMemory();
        return -1;
    }
    memmove(w->saved + n, w->saved, w->nsaved * sizeof *tags);
    memcpy(w->saved, tags, n * sizeof *tags);
    w->nsaved += n;
    return 0;
}

/* coro as a task created now runs it: wrapped, with the creator's tags as
 * its first saved tags (a decorated coroutine keeps its tag above them);
 * a wrapper a factory already followed, and what is not a coroutine (the
 * Task refuses it), unchanged. New reference, or NULL with an exception. */
static PyObject *follow_coro(PyObject *coro)
{
    const ra_tag_t *tags;
    unsigned n = inherited_tags(&tags);
    tagged_coro *w;
    int is_coro;

    if (Py_IS_TYPE(coro, &coro_type)) {
        w = (tagged_coro *)coro;
        if (!w->followed && !w->started && prepend_tags(w, tags, n) != 0)
            return NULL;
        w->followed = true;
        return Py_NewRef(coro);
    }
    is_coro = is_coroutine(coro);
    if (is_coro <= 0)
        return is_coro < 0 ? NULL : Py_NewRef(coro);
    w = (tagged_coro *)coro_wrap(coro, tags, n);
    if (w != NULL)
        w->followed = true;
    return (PyObject *)w;
}

typedef struct {
    PyObject_HEAD
    PyObject *chained;   /* the loop's task factory before, or NULL */
    PyObject *task_type; /* asyncio.Task */
} task_factory;

static PyTypeObject factory_type;

/* factory(loop, coro, **kwargs): the task, made by the chained factory or
 * by asyncio.Task(coro, loop=loop, **kwargs), of the followed coroutine. */
static PyObject *factory_call(PyObject *self, PyObject *args,
                              PyObject *kwargs)
{
    task_factory *f = (task_factory *)self;
    PyObject *loop, *coro, *followed, *call_args, *call_kwargs, *task = NULL;

    if (!PyArg_UnpackTuple(args, "task_factory", 2, 2, &loop, &coro))
        return NULL;
    followed = follow_coro(coro);
    if (followed == NULL)
        return NULL;
    if (f->chained != NULL) {
        call_args = PyTuple_Pack(2, loop, followed);
        call_kwargs = Py_XNewRef(kwargs);
    } else {
        call_args = PyTuple_Pack(1, followed);
        call_kwargs = kwargs != NULL ? PyDict_Copy(kwargs) : PyDict_New();
        if (call_kwargs != NULL &&
            PyDict_SetItemString(call_kwargs, "loop", loop) != 0)
            Py_CLEAR(call_kwargs);
    }
    if (call_args != NULL && (call_kwargs != NULL || kwargs == NULL))
        task = PyObject_Call(f->chained != NULL ? f->chained : f->task_type,
                             call_args, call_kwargs);
    Py_XDECREF(call_args);
    Py_XDECREF(call_kwargs);
    Py_DECREF(followed);
    return task;
}

static int factory_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((task_factory *)self)->chained);
    Py_VISIT(((task_factory *)self)->task_type);
    return 0;
}

static int factory_clear(PyObject *self)
{
    Py_CLEAR(((task_factory *)self)->chained);
    Py_CLEAR(((task_factory *)self)->task_type);
    return 0;
}

static void factory_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    factory_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject factory_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "regionalloc.TaskFactory",
    .tp_doc = "The task factory follow_tasks() sets on a loop: each task's "
              "coroutine becomes a regionalloc.TaggedCoroutine, then goes "
              "to the factory set before (if any) or to asyncio.Task.",
    .tp_basicsize = sizeof(task_factory),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = factory_dealloc,
    .tp_traverse = factory_traverse,
    .tp_clear = factory_clear,
    .tp_call = factory_call,
};

/* The running loop, or NULL with RuntimeError saying what to do instead. */
static PyObject *running_loop(PyObject *asyncio)
{
    PyObject *loop = PyObject_CallMethod(asyncio, "get_running_loop", NULL);

    if (loop == NULL && PyErr_ExceptionMatches(PyExc_RuntimeError)) {
        PyErr_Clear();
        PyErr_SetString(PyExc_RuntimeError,
                        "regionalloc.follow_tasks(): no event loop is "
                        "running in this thread; call it from a coroutine, "
                        "or pass the loop: follow_tasks(loop)");
    }
    return loop;
}

/* Sets a task_factory on loop, chained to the factory it has, unless it
 * has one already: 0, or -1 with an exception set. */
static int set_factory(PyObject *asyncio, PyObject *loop)
{
    PyObject *existing, *result;
    task_factory *f;

    existing = PyObject_CallMethod(loop, "get_task_factory", NULL);
    if (existing == NULL)
        return -1;
    if (Py_IS_TYPE(existing, &factory_type)) {
        Py_DECREF(existing);
        return 0;
    }
    f = PyObject_GC_New(task_factory, &factory_type);
    if (f == NULL) {
        Py_DECREF(existing);
        return -1;
    }
    f->chained = existing != Py_None ? existing : NULL;
    if (existing == Py_None)
        Py_DECREF(existing);
    f->task_type = PyObject_GetAttrString(asyncio, "Task");
    PyObject_GC_Track(f);
    result = f->task_type == NULL
                 ? NULL
                 : PyObject_CallMethod(loop, "set_task_factory", "O", f);
    Py_DECREF(f);
    Py_XDECREF(result);
    return result != NULL ? 0 : -1;
}

static PyObject *follow_tasks(PyObject *module, PyObject *args,
                              PyObject *kwargs)
{
    static char *keywords[] = {"loop", NULL};
    PyObject *loop = Py_None, *asyncio;
    int failed;

    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:follow_tasks",
                                     keywords, &loop))
        return NULL;
    asyncio = PyImport_ImportModule("asyncio");
    if (asyncio == NULL)
        return NULL;
    loop = loop == Py_None ? running_loop(asyncio) : Py_NewRef(loop);
    failed = loop == NULL || set_factory(asyncio, loop) != 0;
    Py_XDECREF(loop);
    Py_DECREF(asyncio);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(
    follow_tasks_doc,
    "follow_tasks(loop=None)\n--\n\n"
    "Make tags follow the asyncio tasks made on loop from now on (default:\n"
    "the running loop; RuntimeError when none runs in this thread).\n"
    "\n"
    "It sets a task factory on the loop that wraps each new task's\n"
    "coroutine (Python 3.11 has no hook on a task switch). Each step of\n"
    "the task, each time it runs until it next awaits, enters the tags it\n"
    "had entered and not left, above the thread's stack as it is then, and\n"
    "leaves them when the step ends. So while a task awaits, the other\n"
    "tasks on the thread allocate under their own tags, never under its,\n"
    "and no task leaves tags on another's stack.\n"
    "\n"
    "A new task inherits the tags entered around its creation, as it\n"
    "inherits the context of contextvars: a task created inside `with tag:`\n"
    "in a followed task (or in a coroutine of a decorated async function)\n"
    "runs under that tag, even after its creator has left it. Tags entered\n"
    "outside every task (around loop.run_until_complete(), say) stay on the\n"
    "thread's stack below the tasks: every task runs under them.\n"
    "\n"
    "The task that calls follow_tasks() was made before it, so it is not\n"
    "followed: the tags it enters stay on the thread's stack while it\n"
    "awaits, and the tasks that run meanwhile allocate under them. To\n"
    "follow every task, the first one too, set the factory before the\n"
    "loop runs anything:\n"
    "\n"
    "    with asyncio.Runner() as runner:\n"
    "        regionalloc.follow_tasks(runner.get_loop())\n"
    "        runner.run(main())\n"
    "\n"
    "or loop = asyncio.new_event_loop(); regionalloc.follow_tasks(loop);\n"
    "loop.run_until_complete(main()).\n"
    "\n"
    "A task factory the loop already has is kept: the coroutine is wrapped,\n"
    "then handed to it. Calling follow_tasks() again on the loop changes\n"
    "nothing; loop.set_task_factory() replaces it. A task's coroutine\n"
    "(Task.get_coro()) is then a regionalloc.TaggedCoroutine; its other\n"
    "attributes (cr_frame, __qualname__...) are the original's. A tag\n"
    "decorating an async function applies to its coroutines with or\n"
    "without follow_tasks(). Threads each have their own stack: a thread\n"
    "of run_in_executor() or to_thread() does not inherit tags.");

/* For the tests, which check that every step left the stack as it found
 * it. */
static PyObject *stack_depth(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromUnsignedLong(rapy_stack_depth());
}

static PyMethodDef tasks_functions[] = {
    {"follow_tasks", (PyCFunction)(void (*)(void))follow_tasks,
     METH_VARARGS | METH_KEYWORDS, follow_tasks_doc},
    {"_stack_depth", stack_depth, METH_NOARGS,
     "_stack_depth()\n--\n\nHow many tags this thread has entered and "
     "not left, those of the task that is running included (for tests)."},
    {NULL, NULL, 0, NULL},
};

/* -- async functions decorated with a tag ----------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *func;
    PyObject *dict; /* update_wrapper's __name__, __doc__, __wrapped__... */
    vectorcallfunc vectorcall;
    ra_tag_t tag;
} tagged_function;

static PyTypeObject function_type;

PyObject *rapy_tasks_wrap(ra_tag_t tag, PyObject *coro)
{
    PyObject *wrapped;
    int is_coro;

    if (coro == NULL)
        return NULL;
    is_coro = is_coroutine(coro);
    if (is_coro <= 0) {
        if (is_coro == 0)
            return coro;
        Py_DECREF(coro);
        return NULL;
    }
    wrapped = coro_wrap(coro, &tag, 1);
    Py_DECREF(coro);
    return wrapped;
}

/* Calls the function; its coroutine comes back wrapped (rapy_tasks_wrap). */
static PyObject *function_vectorcall(PyObject *self, PyObject *const *args,
                                     size_t nargsf, PyObject *kwnames)
{
    tagged_function *f = (tagged_function *)self;

    return rapy_tasks_wrap(f->tag,
                           PyObject_Vectorcall(f->func, args, nargsf, kwnames));
}

/* A method of a class binds like a function. */
static PyObject *function_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

/* __code__, __defaults__ and __kwdefaults__ are the function's, so that
 * inspect.iscoroutinefunction() (and asyncio's) say True, as for it. */
static PyObject *function_forward(PyObject *self, void *name)
{
    return PyObject_GetAttrString(((tagged_function *)self)->func, name);
}

static PyGetSetDef function_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL,
     NULL},
    {"__code__", function_forward, NULL, NULL, "__code__"},
    {"__defaults__", function_forward, NULL, NULL, "__defaults__"},
    {"__kwdefaults__", function_forward, NULL, NULL, "__kwdefaults__"},
    {NULL, NULL, NULL, NULL, NULL},
};

static int function_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((tagged_function *)self)->func);
    Py_VISIT(((tagged_function *)self)->dict);
    return 0;
}

static int function_clear(PyObject *self)
{
    Py_CLEAR(((tagged_function *)self)->func);
    Py_CLEAR(((tagged_function *)self)->dict);
    return 0;
}

static void function_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    function_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *function_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<regionalloc.TaggedCoroutineFunction of %R>",
                                ((tagged_function *)self)->func);
}

static PyTypeObject function_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "regionalloc.TaggedCoroutineFunction",
    .tp_doc = "An async function decorated with a tag: each coroutine it "
              "returns is a regionalloc.TaggedCoroutine that enters the tag "
              "at each of its steps and leaves it when the step ends, with "
              "or without follow_tasks().",
    .tp_basicsize = sizeof(tagged_function),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_dealloc = function_dealloc,
    .tp_traverse = function_traverse,
    .tp_clear = function_clear,
    .tp_repr = function_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(tagged_function, vectorcall),
    .tp_descr_get = function_get,
    .tp_getset = function_getset,
    .tp_dictoffset = offsetof(tagged_function, dict),
};

PyObject *rapy_tasks_decorate(ra_tag_t tag, PyObject *func)
{
    tagged_function *f;
    PyObject *functools, *result = NULL;

    f = PyObject_GC_New(tagged_function, &function_type);
    if (f == NULL)
        return NULL;
    f->func = Py_NewRef(func);
    f->dict = NULL;
    f->vectorcall = function_vectorcall;
    f->tag = tag;
    PyObject_GC_Track(f);
    functools = PyImport_ImportModule("functools");
    if (functools != NULL) {
        result = PyObject_CallMethod(functools, "update_wrapper", "OO", f,
                                     func);
        Py_DECREF(functools);
    }
    if (result == NULL) {
        Py_DECREF(f);
        return NULL;
    }
    Py_DECREF(result);
    return (PyObject *)f;
}

/* -- the module's part ------------------------------------------------------ */

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

int rapy_tasks_add(PyObject *module)
{
    if (PyType_Ready(&coro_type) != 0 ||
        PyType_Ready(&factory_type) != 0 ||
        PyType_Ready(&function_type) != 0)
        return -1;
    str_throw = PyUnicode_InternFromString("throw");
    str_close = PyUnicode_InternFromString("close");
    if (str_throw == NULL || str_close == NULL || register_coroutine() != 0)
        return -1;
    return PyModule_AddFunctions(module, tasks_functions);
}
