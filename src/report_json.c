/* Floor: services. The JSON report (schema regionalloc-report-1,
 * doc/json.md): the tags listed and the roll-ups of the others, untagged,
 * the library, the process and its parts, the memory limit. */
#include <stddef.h>

#include "by_library.h"
#include "output.h"
#include "report_names.h"

static const struct {
    const char *key;
    size_t offset;
    bool untagged; /* also in the "untagged" object */
    bool summed;   /* also in a roll-up (a sum that means something) */
} json_fields[] = {
    {"allocated", RA__USAGE_FIELD(allocated), true, true},
    {"active", RA__USAGE_FIELD(active), true, true},
    {"resident", RA__USAGE_FIELD(resident), true, true},
    {"rss", RA__USAGE_FIELD(rss), false, true},
    {"metadata", RA__USAGE_FIELD(metadata), false, true},
    {"rss_at_ns", RA__USAGE_FIELD(rss_at_ns), false, false},
    {"mapped", RA__USAGE_FIELD(mapped), true, true},
    {"peak_mapped", RA__USAGE_FIELD(peak_mapped), false, false},
    {"dirty", RA__USAGE_FIELD(dirty), true, true},
    {"muzzy", RA__USAGE_FIELD(muzzy), true, true},
    {"retained", RA__USAGE_FIELD(retained), true, true},
    {"reserved", RA__USAGE_FIELD(reserved), false, false},
    {"nmalloc", RA__USAGE_FIELD(nmalloc), true, true},
    {"ndalloc", RA__USAGE_FIELD(ndalloc), true, true},
    {"purges", RA__USAGE_FIELD(purges), true, true},
    {"limit", RA__USAGE_FIELD(limit), false, false},
    {"soft_limit", RA__USAGE_FIELD(soft_limit), false, false},
    {"limit_failures", RA__USAGE_FIELD(limit_failures), false, true},
    {"arenas", RA__USAGE_FIELD(arenas), false, true},
};
#define NJSON_FIELDS (sizeof json_fields / sizeof json_fields[0])

static void write_json_usage(struct ra__emitter *e, const char *key,
                             const struct ra__usage *u, enum ra__row_kind kind)
{
    if (key != NULL)
        ra__json_object_begin(e, key, true);
    for (size_t f = 0; f < NJSON_FIELDS; f++)
        if (kind == RA__ROW_TAG ||
            (kind == RA__ROW_UNTAGGED ? json_fields[f].untagged
                                  : json_fields[f].summed))
            ra__json_u64(e, json_fields[f].key,
                         ra__usage_field(u, json_fields[f].offset));
    if (key != NULL)
        ra__json_object_end(e);
}

/* A tag's parent, or the tag a roll-up is under, the row parent_row (0:
 * the top level, null): by name as the first schema had it and by id,
 * which tells tags apart where names do not (a name that is not UTF-8
 * reads like another). */
static void write_json_parent(struct ra__emitter *e,
                              const struct ra__snapshot *snap,
                              unsigned parent_row)
{
    if (parent_row != 0) {
        ra__json_str(e, "parent", snap->rows[parent_row].name);
        ra__json_u64(e, "parent_id", snap->rows[parent_row].id);
    } else {
        ra__json_null(e, "parent");
        ra__json_null(e, "parent_id");
    }
}

/* Tag trees: a tag's parent and its subtree's totals. */
static void write_json_tree(struct ra__emitter *e,
                            const struct ra__snapshot *snap,
                            const struct ra__usage *u)
{
    const struct ra__tree_totals *t = &u->tree;

    write_json_parent(e, snap, u->parent_row);
    ra__json_object_begin(e, "tree", true);
    ra__json_u64(e, "allocated", t->allocated);
    ra__json_u64(e, "active", t->active);
    ra__json_u64(e, "resident", t->resident);
    ra__json_u64(e, "mapped", t->mapped);
    ra__json_u64(e, "peak_mapped", t->peak_mapped);
    ra__json_u64(e, "dirty", t->dirty);
    ra__json_u64(e, "nmalloc", t->nmalloc);
    ra__json_u64(e, "ndalloc", t->ndalloc);
    ra__json_object_end(e);
}

/* The memory limit (pressure.c): as given, whether it is in effect, where
 * it came from, the resident set at the watcher's last look, the level,
 * what the rises gave back and refused. */
static void write_json_pressure(struct ra__emitter *e,
                                const struct ra__pressure_figures *p)
{
    ra__json_object_begin(e, "memory_limit", true);
    ra__json_u64(e, "limit", p->limit);
    ra__json_bool(e, "in_effect", ra__limit_in_effect(p->limit));
    ra__json_str(e, "source", ra__limit_source_name(p->source));
    ra__json_u64(e, "resident", p->resident);
    ra__json_str(e, "level", ra__pressure_level_name(p->level));
    ra__json_u64(e, "given_back", p->given_back);
    ra__json_u64(e, "refusals", p->refusals);
    ra__json_object_end(e);
}

/* The process as the kernel counts it, and the parts of its RssAnon. */
static void write_json_parts(struct ra__emitter *e,
                             const struct ra__process_parts *p)
{
    ra__json_u64(e, "rss_anon", p->rss_anon);
    ra__json_u64(e, "rss_file", p->rss_file);
    ra__json_u64(e, "page_tables", p->page_tables);
    ra__json_object_begin(e, "parts", true);
#define PART(field) ra__json_u64(e, #field, p->field);
    RA_PARTS_LIST(PART)
#undef PART
    ra__json_object_end(e);
    ra__json_u64(e, "parts_over", p->over);
    ra__json_u64(e, "parts_at_ns", p->at_ns);
    ra__json_bool(e, "jemalloc_measured", p->jemalloc_measured);
    if (!p->in_cgroup) {
        ra__json_null(e, "cgroup");
        return;
    }
    ra__json_object_begin(e, "cgroup", true);
    ra__json_u64(e, "current", p->cgroup_current);
    ra__json_u64(e, "anon", p->cgroup_anon);
    ra__json_u64(e, "file", p->cgroup_file);
    ra__json_u64(e, "limit", p->cgroup_limit);
    ra__json_object_end(e);
}

/* Tags by calling object (REGIONALLOC_TAG_BY=library): an object's tag
 * says the object's path; "libraries" how many objects share it, when no
 * id was left for their own. Nothing on other tags, nor when off. */
static void write_json_object(struct ra__emitter *e, ra_tag_t tag)
{
    const char *path = ra__by_library_path(tag);

    if (path != NULL)
        ra__json_str(e, "object", path);
    else if (tag != RA_TAG_NONE && tag == ra__by_library_parent())
        ra__json_u64(e, "objects_sharing", ra__by_library_shared());
}

/* The tags listed, in the tree's order; then how many were asked for
 * (null: every tag) and the roll-ups of the others, each under its listed
 * tag (or the top level), in the order the text shows them. */
static void write_json_tags(struct ra__emitter *e,
                            const struct ra__snapshot *snap,
                            const struct ra__listing *l)
{
    ra__json_array_begin(e, "tags", false);
    for (unsigned i = 0; i < l->nlines; i++) {
        const struct ra__usage *u = &snap->rows[l->lines[i].row];
        if (l->lines[i].row == 0)
            continue;
        ra__json_object_begin(e, NULL, true);
        ra__json_u64(e, "id", u->id);
        ra__json_u64(e, "born", u->born);
        ra__json_bytes(e, "name", "name_hex", u->name);
        write_json_usage(e, NULL, u, RA__ROW_TAG);
        ra__json_i64(e, "priority", u->priority);
        write_json_object(e, (ra_tag_t)u->id);
        write_json_tree(e, snap, u);
        ra__json_object_end(e);
    }
    ra__json_array_end(e);
    if (l->cut)
        ra__json_u64(e, "top", l->top);
    else
        ra__json_null(e, "top");
    ra__json_array_begin(e, "rest", false);
    for (unsigned i = 0; i < l->nlines; i++) {
        const struct ra__rollup *ru = &l->rollups[l->lines[i].rollup];
        if (l->lines[i].row != 0)
            continue;
        ra__json_object_begin(e, NULL, true);
        write_json_parent(e, snap, ru->parent_row);
        ra__json_u64(e, "tags", ru->tags);
        write_json_usage(e, NULL, &ru->sum, RA__ROW_ROLLUP);
        ra__json_object_end(e);
    }
    ra__json_array_end(e);
}

void ra__report_json(struct ra__emitter *e, const struct ra__snapshot *snap,
                     const struct ra__listing *l)
{
    ra__json_object_begin(e, NULL, false);
    ra__json_str(e, "schema", "regionalloc-report-1");
    ra__json_bool(e, "enabled", true);
    ra__json_u64(e, "time_ns", snap->time_ns);
    write_json_tags(e, snap, l);
    write_json_usage(e, "untagged", &snap->rows[0], RA__ROW_UNTAGGED);
    ra__json_object_begin(e, "library", true);
    ra__json_u64(e, "allocated", snap->library);
    ra__json_object_end(e);
    ra__json_object_begin(e, "leftovers", true);
    ra__json_u64(e, "allocated", snap->leftovers);
    ra__json_object_end(e);
    ra__json_u64(e, "regions_lost", snap->regions_lost);
    ra__json_object_begin(e, "process", true);
    ra__json_u64(e, "allocated", snap->global.allocated);
    ra__json_u64(e, "active", snap->global.active);
    ra__json_u64(e, "resident", snap->global.resident);
    ra__json_u64(e, "mapped", snap->global.mapped);
    ra__json_u64(e, "rss", snap->process_rss);
    write_json_parts(e, &snap->parts);
    ra__json_object_end(e);
    write_json_pressure(e, &snap->pressure);
    ra__json_object_end(e);
}
