/* Usage: a tag's figures by name, as os.stat_result gives a file's. */
#include "module.h"

#include <errno.h>


PyDoc_STRVAR(usage_doc_text,
"A tag's figures, in bytes but nmalloc and ndalloc (Tag.usage()).");

PyDoc_STRVAR(usage_allocated_doc,
"bytes in live blocks (their usable sizes), exact");

PyDoc_STRVAR(usage_active_doc,
"bytes in pages holding live or cached blocks");

PyDoc_STRVAR(usage_resident_doc, "jemalloc's resident estimate, read live");

PyDoc_STRVAR(usage_mapped_doc,
"bytes committed in the tag's region (what a budget bounds)");

PyDoc_STRVAR(usage_dirty_doc, "unused pages not yet returned to the OS");

PyDoc_STRVAR(usage_muzzy_doc, "unused pages lazily returned to the OS");

PyDoc_STRVAR(usage_retained_doc,
"virtual memory kept for reuse, not resident");

PyDoc_STRVAR(usage_reserved_doc, "the size of the tag's region");

PyDoc_STRVAR(usage_peak_mapped_doc,
"high-water mark of mapped since the tag was made");

PyDoc_STRVAR(usage_nmalloc_doc, "allocations ever made under the tag");

PyDoc_STRVAR(usage_ndalloc_doc, "frees ever made of the tag's blocks");

PyDoc_STRVAR(usage_limit_doc, "the hard limit (set_limit), 0: none");

PyDoc_STRVAR(usage_soft_limit_doc, "the soft limit (set_limit), 0: none");

static PyTypeObject *usage_type;

/* The fields, in the order usage_of fills them. */
static PyStructSequence_Field usage_fields[] = {
    {"allocated", usage_allocated_doc},
    {"active", usage_active_doc},
    {"resident", usage_resident_doc},
    {"mapped", usage_mapped_doc},
    {"dirty", usage_dirty_doc},
    {"muzzy", usage_muzzy_doc},
    {"retained", usage_retained_doc},
    {"reserved", usage_reserved_doc},
    {"peak_mapped", usage_peak_mapped_doc},
    {"nmalloc", usage_nmalloc_doc},
    {"ndalloc", usage_ndalloc_doc},
    {"limit", usage_limit_doc},
    {"soft_limit", usage_soft_limit_doc},
    {NULL, NULL},
};

#define NFIELDS (sizeof usage_fields / sizeof usage_fields[0] - 1)

static PyStructSequence_Desc usage_desc = {
    "regionalloc.Usage",
    usage_doc_text,
    usage_fields,
    NFIELDS,
};

int rapy_usage_add(PyObject *module)
{
    usage_type = PyStructSequence_NewType(&usage_desc);
    if (usage_type == NULL)
        return -1;
    return PyModule_AddObjectRef(module, "Usage", (PyObject *)usage_type);
}

/* The figures as a Usage, in usage_fields' order. */
static PyObject *usage_from(const ra_tag_stats_t *stats,
                            const ra_tag_limit_t *limit)
{
    const unsigned long long values[NFIELDS] = {
        stats->allocated, stats->active,      stats->resident,
        stats->mapped,    stats->dirty,       stats->muzzy,
        stats->retained,  stats->reserved,    stats->peak_mapped,
        stats->nmalloc,   stats->ndalloc,     limit->hard,
        limit->soft,
    };
    PyObject *usage = PyStructSequence_New(usage_type);

    if (usage == NULL)
        return NULL;
    for (size_t i = 0; i < NFIELDS; i++) {
        PyObject *value = PyLong_FromUnsignedLongLong(values[i]);

        if (value == NULL) {
            Py_DECREF(usage);
            return NULL;
        }
        PyStructSequence_SET_ITEM(usage, (Py_ssize_t)i, value);
    }
    return usage;
}

PyObject *rapy_usage_of(ra_tag_t tag, bool tree)
{
    ra_tag_stats_t stats;
    ra_tag_limit_t limit;
    int rc = tree ? rapy_api.tag_stats_tree(tag, &stats)
                  : rapy_api.tag_stats(tag, &stats);

    if (rc != 0)
        return rapy_raise_errno(errno, tree ? "ra_tag_stats_tree"
                                            : "ra_tag_stats");
    if (rapy_api.tag_get_limit(tag, &limit) != 0)
        return rapy_raise_errno(errno, "ra_tag_get_limit");
    return usage_from(&stats, &limit);
}
