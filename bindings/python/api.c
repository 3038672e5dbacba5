/* The library's API found in the process at import, whether the library is
 * the process's allocator, and the Python exceptions its errors mean. */
#include "module.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>

struct rapy_api rapy_api;
bool rapy_enabled;

/* Why the module is off, for the RuntimeError that says so; static text. */
static const char *off_reason = "the module was not initialised";

/* The member of rapy_api and the symbol that fills it. */
struct entry {
    void **slot;
    const char *symbol;
};

#define ENTRY(member) {(void **)&rapy_api.member, "ra_" #member}

static const struct entry entries[] = {
    ENTRY(tag_push),
    ENTRY(tag_pop),
    ENTRY(tag_current),
    ENTRY(tag_create),
    ENTRY(tag_create_in),
    ENTRY(tag_parent),
    ENTRY(tag_name),
    ENTRY(tag_count),
    ENTRY(tag_destroy),
    ENTRY(tag_stats),
    ENTRY(tag_stats_tree),
    ENTRY(tag_set_limit),
    ENTRY(tag_get_limit),
    ENTRY(tag_purge),
    ENTRY(tag_set_priority),
    ENTRY(tag_get_priority),
    ENTRY(report),
    ENTRY(checkpoint),
    ENTRY(checkpoint_report),
    {(void **)&rapy_api.memory_limit, "ra_memory_limit"},
    {(void **)&rapy_api.memory_limit_set, "ra_memory_limit_set"},
    ENTRY(enabled),
};

#define NENTRIES (sizeof entries / sizeof entries[0])

/* The objects the process has loaded, in load order, for malloc_object:
 * the preloaded ones come right after the program, so the first few
 * suffice. */
#define OBJECTS_MAX 64

struct objects {
    const char *names[OBJECTS_MAX];
    unsigned count;
};

static int list_object(struct dl_phdr_info *info, size_t size, void *data)
{
    struct objects *objects = data;

    (void)size;
    /* The program itself has no name; the vDSO defines no malloc. */
    if (info->dlpi_name != NULL && info->dlpi_name[0] == '/')
        objects->names[objects->count++] = info->dlpi_name;
    return objects->count == OBJECTS_MAX;
}

/* The load address of the object whose malloc the process calls: the
 * first loaded after the program that defines it (NULL if none).
 * dlsym(RTLD_DEFAULT, "malloc") will not do: in a program built without
 * -fPIE (Debian's python3), it answers the program's own PLT entry. */
static const void *malloc_object(void)
{
    struct objects objects = {.count = 0};
    const void *found = NULL;

    dl_iterate_phdr(list_object, &objects);
    for (unsigned i = 0; i < objects.count && found == NULL; i++) {
        void *handle = dlopen(objects.names[i], RTLD_LAZY | RTLD_NOLOAD);
        void *sym = handle == NULL ? NULL : dlsym(handle, "malloc");
        Dl_info info;

        /* dlsym(handle) also searches the object's dependencies: it
         * defines malloc itself only when the answer lies in it. */
        if (sym != NULL && dladdr(sym, &info) != 0 &&
            strcmp(info.dli_fname, objects.names[i]) == 0)
            found = info.dli_fbase;
        if (handle != NULL)
            dlclose(handle);
    }
    return found;
}

/* The load address of the object that defines the function at addr. */
static const void *object_of(const void *addr)
{
    Dl_info info;

    if (dladdr(addr, &info) == 0)
        return NULL;
    return info.dli_fbase;
}

/* Looks every entry up: true when each was found. A missing one leaves
 * the whole table empty, so that no half of the API is ever called. */
static bool find_entries(void)
{
    void *found[NENTRIES];

    for (size_t i = 0; i < NENTRIES; i++) {
        found[i] = dlsym(RTLD_DEFAULT, entries[i].symbol);
        if (found[i] == NULL)
            return false;
    }
    for (size_t i = 0; i < NENTRIES; i++)
        *entries[i].slot = found[i];
    return true;
}

void rapy_api_find(void)
{
    const void *library, *allocator;

    rapy_enabled = false;
    if (dlsym(RTLD_DEFAULT, "ra_enabled") == NULL) {
        off_reason = "libregionalloc is not loaded in this process";
        return;
    }
    if (!find_entries()) {
        off_reason = "the libregionalloc loaded in this process is older "
                     "than the module (a function is missing)";
        return;
    }
    if (rapy_api.enabled() != 1) {
        off_reason = "libregionalloc is in pass-through mode (REGIONALLOC=0, "
                     "or no reservation could be made)";
        return;
    }
    library = object_of((const void *)rapy_api.enabled);
    allocator = malloc_object();
    if (library == NULL || library != allocator) {
        off_reason = "libregionalloc is loaded but is not the process's "
                     "malloc (a --disable-override build, or loaded after "
                     "the process started)";
        return;
    }
    rapy_enabled = true;
}

int rapy_require_enabled(void)
{
    if (rapy_enabled)
        return 0;
    PyErr_Format(PyExc_RuntimeError,
                 "regionalloc: %s. Run the program under the library: "
                 "regionalloc run -- python3 app.py, or "
                 "LD_PRELOAD=/path/to/libregionalloc.so PYTHONMALLOC=malloc "
                 "python3 app.py",
                 off_reason);
    return -1;
}

PyObject *rapy_raise_oserror(int err, PyObject *message)
{
    PyObject *value = Py_BuildValue("(iN)", err, message);

    if (value != NULL) {
        PyErr_SetObject(PyExc_OSError, value);
        Py_DECREF(value);
    }
    return NULL;
}

PyObject *rapy_raise_errno(int err, const char *what)
{
    if (err == ENOMEM)
        return PyErr_Format(PyExc_MemoryError, "%s: %s", what, strerror(err));
    if (err == EINVAL)
        return PyErr_Format(PyExc_ValueError, "%s: %s", what, strerror(err));
    return rapy_raise_oserror(
        err, PyUnicode_FromFormat("%s: %s", what, strerror(err)));
}
