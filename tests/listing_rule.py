"""What a report of the top largest tags lists, by the rule of
regionalloc(3) ("Many tags"), computed from a JSON report that lists every
tag: the tags whose subtrees hold the most resident bytes (tree.resident),
ties to the earlier in the report's order (the tree's), a tag named
"(rest)" and its subtree never listed; each other tag rolled up under the
nearest listed tag above it. Used by tests/test_formats.sh and
tests/dashboard_check.py to hold the library's choice against the rule; not a
test itself."""


def listing(full, top):
    """(the ids listed, {the id of the listed tag a roll-up is under, 0 at
    the top level: its tags}, {id: tag}) for a report of top tags, from
    full, the document of a report of every tag."""
    every = full["tags"]
    by = {t["id"]: t for t in every}
    pos = {t["id"]: i for i, t in enumerate(every)}
    barred = set()
    for t in every:  # parents first
        if t["name"] == "(rest)" or t["parent_id"] in barred:
            barred.add(t["id"])
    ranked = sorted((t for t in every if t["id"] not in barred),
                    key=lambda t: (-t["tree"]["resident"], pos[t["id"]]))
    want = {t["id"] for t in ranked[:top]}
    groups = {}
    for t in every:
        if t["id"] in want:
            continue
        p = t["parent_id"]
        while p is not None and p not in want:
            p = by[p]["parent_id"]
        groups.setdefault(p or 0, []).append(t)
    return want, groups, by
