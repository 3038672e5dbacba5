/* Tags that follow asyncio tasks: the task factory that follow_tasks()
 * sets on a loop, which gives every task's coroutine its own tags
 * (coro.c). */
#include "tasks.h"

#include "coro.h"

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
    followed = rapy_coro_follow(coro);
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

int rapy_tasks_add(PyObject *module)
{
    if (rapy_coro_ready() != 0 || PyType_Ready(&factory_type) != 0)
        return -1;
    return PyModule_AddFunctions(module, tasks_functions);
}
