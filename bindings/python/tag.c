/* The Tag type: get-or-create by name, one object per live tag id, `with`,
 * the tag's figures, budget, priority, purge and destroy. */
#include "module.h"

#include <errno.h>
#include <string.h>

/* The live object of each id, or NULL; borrowed (tag_dealloc clears its
 * entry). The GIL guards it. A table in the module's own data, one entry
 * per id the library may hand out: no block of it can land in a user's tag
 * and keep that tag from being destroyed. */
static rapy_tag *by_id[RAPY_IDS_MAX + 1];

static void mark_dead(rapy_tag *tag)
{
    tag->dead = true;
    if (tag->id <= RAPY_IDS_MAX && by_id[tag->id] == tag)
        by_id[tag->id] = NULL;
}

/* Whether the library's tag id is still the one tag names: its name and
 * parent unchanged. False also when the library says nothing (destroyed
 * from C). */
static bool still_same(const rapy_tag *tag)
{
    const char *name = rapy_api.tag_name(tag->id);
    ra_tag_t parent;

    if (name == NULL || strcmp(name, tag->cname) != 0)
        return false;
    errno = 0;
    parent = rapy_api.tag_parent(tag->id);
    if (parent == RA_TAG_NONE && errno != 0)
        return false;
    return tag->parent == Py_None
               ? parent == RA_TAG_NONE
               : parent == ((rapy_tag *)tag->parent)->id;
}

/* 0 when tag may be used, else -1 with ValueError (destroyed, here or by
 * the library's C API) or RuntimeError (not the process's allocator). */
static int check_tag(rapy_tag *tag)
{
    if (rapy_require_enabled() != 0)
        return -1;
    if (!tag->dead && !still_same(tag))
        mark_dead(tag);
    return rapy_tag_alive(tag);
}

/* A new object for the live id, whose name is name and parent parent (a
 * Tag or None; a new reference is taken). */
static PyObject *make_tag(ra_tag_t id, const char *name, PyObject *parent)
{
    rapy_tag *tag;

    if (id > RAPY_IDS_MAX) {
        PyErr_Format(PyExc_OverflowError, "regionalloc: tag id %u", id);
        return NULL;
    }
    tag = PyObject_New(rapy_tag, &rapy_tag_type);
    if (tag == NULL)
        return NULL;
    tag->id = id;
    tag->dead = false;
    tag->had_children = false;
    snprintf(tag->cname, sizeof tag->cname, "%s", name);
    tag->parent = Py_NewRef(parent);
    tag->name = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name),
                                     "surrogateescape");
    if (tag->name == NULL) {
        Py_DECREF(tag);
        return NULL;
    }
    if (by_id[id] != NULL)
        mark_dead(by_id[id]);
    by_id[id] = tag;
    if (parent != Py_None)
        ((rapy_tag *)parent)->had_children = true;
    return (PyObject *)tag;
}

PyObject *rapy_tag_for_id(ra_tag_t id)
{
    const char *name;
    PyObject *parent, *tag;
    ra_tag_t parent_id;

    if (id <= RAPY_IDS_MAX && by_id[id] != NULL) {
        if (still_same(by_id[id]))
            return Py_NewRef((PyObject *)by_id[id]);
        mark_dead(by_id[id]);
    }
    name = rapy_api.tag_name(id);
    if (name == NULL || id == RA_TAG_NONE)
        return rapy_raise_errno(EINVAL, "ra_tag_name");
    errno = 0;
    parent_id = rapy_api.tag_parent(id);
    if (parent_id == RA_TAG_NONE && errno != 0)
        return rapy_raise_errno(errno, "ra_tag_parent");
    parent = parent_id == RA_TAG_NONE ? Py_NewRef(Py_None)
                                      : rapy_tag_for_id(parent_id);
    if (parent == NULL)
        return NULL;
    tag = make_tag(id, name, parent);
    Py_DECREF(parent);
    return tag;
}

PyObject *rapy_tag_get(PyObject *name_obj, PyObject *parent)
{
    const char *name;
    ra_tag_t id;

    if (!rapy_name_arg(name_obj, &name))
        return NULL;
    if (parent != Py_None && !PyObject_TypeCheck(parent, &rapy_tag_type))
        return PyErr_Format(PyExc_TypeError,
                            "regionalloc: parent must be a Tag or None, "
                            "not %.100s", Py_TYPE(parent)->tp_name);
    if (parent != Py_None && check_tag((rapy_tag *)parent) != 0)
        return NULL;
    if (rapy_require_enabled() != 0)
        return NULL;
    id = parent == Py_None
             ? rapy_api.tag_create(name)
             : rapy_api.tag_create_in(((rapy_tag *)parent)->id, name);
    if (id == RA_TAG_NONE)
        return rapy_raise_errno(errno, parent == Py_None ? "ra_tag_create"
                                                         : "ra_tag_create_in");
    return rapy_tag_for_id(id);
}

static PyObject *tag_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"name", "parent", NULL};
    PyObject *name, *parent = Py_None;

    (void)type;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:Tag", keywords, &name,
                                     &parent))
        return NULL;
    return rapy_tag_get(name, parent);
}

static void tag_dealloc(rapy_tag *tag)
{
    if (tag->id <= RAPY_IDS_MAX && by_id[tag->id] == tag)
        by_id[tag->id] = NULL;
    Py_XDECREF(tag->name);
    Py_XDECREF(tag->parent);
    PyObject_Free(tag);
}

static PyObject *tag_repr(rapy_tag *tag)
{
    return PyUnicode_FromFormat("<regionalloc.Tag %R id=%u%s>", tag->name,
                                tag->id, tag->dead ? " destroyed" : "");
}

static PyObject *tag_enter(rapy_tag *tag, PyObject *unused)
{
    (void)unused;
    if (rapy_tag_enter(tag) != 0)
        return NULL;
    return Py_NewRef((PyObject *)tag);
}

static PyObject *tag_exit(rapy_tag *tag, PyObject *const *args,
                          Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    if (rapy_tag_leave(tag) != 0)
        return NULL;
    Py_RETURN_FALSE;
}

static PyObject *tag_call(rapy_tag *tag, PyObject *args, PyObject *kwds)
{
    PyObject *func;

    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "regionalloc: a Tag decorates one function, given "
                        "alone");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O:Tag.__call__", &func))
        return NULL;
    if (check_tag(tag) != 0)
        return NULL;
    return rapy_decorate(tag, func);
}

static PyObject *tag_usage(rapy_tag *tag, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"tree", NULL};
    int tree = 0;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:usage", keywords, &tree))
        return NULL;
    if (check_tag(tag) != 0)
        return NULL;
    return rapy_usage_of(tag->id, tree != 0);
}

/* Marks dead every object whose parents lead to root, once root's subtree
 * is destroyed. */
static void bury_subtree(const rapy_tag *root)
{
    for (unsigned id = 1; id <= RAPY_IDS_MAX; id++) {
        rapy_tag *tag = by_id[id];

        for (PyObject *up = tag ? tag->parent : Py_None; up != Py_None;
             up = ((rapy_tag *)up)->parent) {
            if (up == (const PyObject *)root) {
                mark_dead(tag);
                break;
            }
        }
    }
}

/* Whether id is root or under it, by the library's parents. */
static bool in_subtree(ra_tag_t id, ra_tag_t root)
{
    for (; id != RA_TAG_NONE; id = rapy_api.tag_parent(id))
        if (id == root)
            return true;
    return false;
}

/* OSError EBUSY saying where id, of root's subtree, is entered; NULL. */
static PyObject *raise_entered(const rapy_tag *root, ra_tag_t id,
                               const struct rapy_entries *e)
{
    const char *name = rapy_api.tag_name(id);
    char subject[RA_TAG_NAME_MAX + 32];

    if (id == root->id)
        snprintf(subject, sizeof subject, "it");
    else
        snprintf(subject, sizeof subject, "tag '%s' (in its subtree)",
                 name != NULL ? name : "?");
    return rapy_raise_oserror(
        EBUSY, PyUnicode_FromFormat(
                   "regionalloc: tag '%s' cannot be destroyed: %s is entered "
                   "and not left (%u in this thread, %u in other threads, "
                   "%u in coroutines that enter it again when they resume: "
                   "tasks, decorated coroutines); leave it first",
                   root->cname, subject, e->here, e->stacked - e->here,
                   e->held));
}

/* 0 when no tag of root's subtree is entered through the module in any
 * thread or coroutine (the library refuses only those on the calling
 * thread's stack), else -1 with OSError EBUSY set. The ids handed out are
 * walked by their counts alone; only an entered one's parents are read. */
static int check_not_entered(const rapy_tag *root)
{
    struct rapy_entries e;
    ra_tag_t last = rapy_api.tag_count();

    for (ra_tag_t id = rapy_stack_next_entered(RA_TAG_NONE, last);
         id != RA_TAG_NONE; id = rapy_stack_next_entered(id, last)) {
        if (in_subtree(id, root->id)) {
            rapy_stack_entries(id, &e);
            raise_entered(root, id, &e);
            return -1;
        }
    }
    return 0;
}

static PyObject *tag_destroy(rapy_tag *tag, PyObject *unused)
{
    ra_tag_stats_t stats;

    (void)unused;
    if (check_tag(tag) != 0 || check_not_entered(tag) != 0)
        return NULL;
    if (rapy_api.tag_stats_tree(tag->id, &stats) != 0)
        return rapy_raise_errno(errno, "ra_tag_stats_tree");
    /* The library's destroy frees what the tag holds: the objects those
     * blocks are would be freed under Python's feet. */
    if (stats.allocated != 0 || stats.nmalloc != stats.ndalloc)
        return rapy_raise_oserror(
            EBUSY,
            PyUnicode_FromFormat(
                "regionalloc: tag '%s' still holds %zu bytes in %llu blocks "
                "(its subtree's): drop what was made under it, and call "
                "gc.collect(), which also empties CPython's free lists",
                tag->cname, stats.allocated,
                (unsigned long long)(stats.nmalloc - stats.ndalloc)));
    if (rapy_api.tag_destroy(tag->id) != 0)
        return rapy_raise_errno(errno, "ra_tag_destroy");
    mark_dead(tag);
    if (tag->had_children)
        bury_subtree(tag);
    Py_RETURN_NONE;
}

static PyObject *tag_purge(rapy_tag *tag, PyObject *unused)
{
    int rc;

    (void)unused;
    if (check_tag(tag) != 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = rapy_api.tag_purge(tag->id);
    Py_END_ALLOW_THREADS
    if (rc != 0)
        return rapy_raise_errno(errno, "ra_tag_purge");
    Py_RETURN_NONE;
}

static PyObject *tag_set_limit(rapy_tag *tag, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"hard", "soft", NULL};
    ra_tag_limit_t limit = {0};

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&|O&:set_limit", keywords,
                                     rapy_size_arg, &limit.hard, rapy_size_arg,
                                     &limit.soft))
        return NULL;
    if (check_tag(tag) != 0)
        return NULL;
    if (rapy_api.tag_set_limit(tag->id, &limit) != 0)
        return rapy_raise_errno(errno, "ra_tag_set_limit");
    Py_RETURN_NONE;
}

static PyObject *tag_get_priority(rapy_tag *tag, void *closure)
{
    int priority;

    (void)closure;
    if (check_tag(tag) != 0)
        return NULL;
    if (rapy_api.tag_get_priority(tag->id, &priority) != 0)
        return rapy_raise_errno(errno, "ra_tag_get_priority");
    return PyLong_FromLong(priority);
}

static int tag_set_priority(rapy_tag *tag, PyObject *value, void *closure)
{
    int overflow;
    long priority;

    (void)closure;
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "regionalloc: a tag's priority cannot be deleted");
        return -1;
    }
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "regionalloc: priority must be an int, not %.100s",
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    priority = PyLong_AsLongAndOverflow(value, &overflow);
    if (overflow != 0 || priority < INT_MIN || priority > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError,
                        "regionalloc: priority out of a C int's range");
        return -1;
    }
    if (check_tag(tag) != 0)
        return -1;
    if (rapy_api.tag_set_priority(tag->id, (int)priority) != 0) {
        rapy_raise_errno(errno, "ra_tag_set_priority");
        return -1;
    }
    return 0;
}

static PyObject *tag_get_id(rapy_tag *tag, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLong(tag->id);
}

static PyObject *tag_get_name(rapy_tag *tag, void *closure)
{
    (void)closure;
    return Py_NewRef(tag->name);
}

static PyObject *tag_get_parent(rapy_tag *tag, void *closure)
{
    (void)closure;
    return Py_NewRef(tag->parent);
}

#include "tag_doc.h"

static PyMethodDef tag_methods[] = {
    {"__enter__", (PyCFunction)tag_enter, METH_NOARGS, enter_doc},
    {"__exit__", (PyCFunction)(void (*)(void))tag_exit, METH_FASTCALL,
     exit_doc},
    {"usage", (PyCFunction)(void (*)(void))tag_usage,
     METH_VARARGS | METH_KEYWORDS, usage_doc},
    {"destroy", (PyCFunction)tag_destroy, METH_NOARGS, destroy_doc},
    {"purge", (PyCFunction)tag_purge, METH_NOARGS, purge_doc},
    {"set_limit", (PyCFunction)(void (*)(void))tag_set_limit,
     METH_VARARGS | METH_KEYWORDS, set_limit_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tag_getset[] = {
    {"id", (getter)tag_get_id, NULL, id_doc, NULL},
    {"name", (getter)tag_get_name, NULL, name_doc, NULL},
    {"parent", (getter)tag_get_parent, NULL, parent_doc, NULL},
    {"priority", (getter)tag_get_priority, (setter)tag_set_priority,
     priority_doc, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject rapy_tag_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "regionalloc.Tag",
    .tp_basicsize = sizeof(rapy_tag),
    .tp_dealloc = (destructor)tag_dealloc,
    .tp_repr = (reprfunc)tag_repr,
    .tp_call = (ternaryfunc)tag_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = tag_doc,
    .tp_methods = tag_methods,
    .tp_getset = tag_getset,
    .tp_new = tag_new,
};

int rapy_tag_add(PyObject *module)
{
    if (PyType_Ready(&rapy_tag_type) != 0)
        return -1;
    return PyModule_AddObjectRef(module, "Tag", (PyObject *)&rapy_tag_type);
}
