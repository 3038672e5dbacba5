/* The docstrings of Tag, its methods and attributes. */
#ifndef RAPY_TAG_DOC_H
#define RAPY_TAG_DOC_H

#include <Python.h>

PyDoc_STRVAR(tag_doc,
"Tag(name, parent=None)\n"
"--\n"
"\n"
"The tag called name, created on first use (get-or-create).\n"
"\n"
"name is a str of 1 to 63 bytes in UTF-8 (ValueError otherwise); names are\n"
"unique in the process. With parent (a Tag), the tag is made its child;\n"
"FileExistsError when name exists under another parent. Without parent,\n"
"a tag of that name is found at any level. Tag(\"a\") is Tag(\"a\"): there\n"
"is one object per live tag.\n"
"\n"
"`with tag:` pushes the tag on the thread's stack and pops it when the\n"
"block is left, by an exception too; the blocks allocated in between count\n"
"in it. Tags nest. A Tag is also a decorator: the function runs with the\n"
"tag pushed (a coroutine function: each step of its coroutine).\n"
"\n"
"The library's tags can be made and destroyed by C code too; Tag objects\n"
"follow. A Tag object is itself a Python object: made inside another tag,\n"
"it counts there.");


PyDoc_STRVAR(enter_doc,
"__enter__($self, /)\n--\n\nPushes the tag on the thread's stack; returns the tag.\n"
"ValueError when it was destroyed, OSError EOVERFLOW when the stack is\n"
"full (64 tags), RuntimeError when the library is not the allocator.");

PyDoc_STRVAR(exit_doc,
"__exit__($self, exc_type, exc_value, traceback, /)\n--\n\nPops the tag; RuntimeError when it is not on "
"top\nof the thread's stack (a tag entered inside and not left).");


PyDoc_STRVAR(usage_doc,
"usage($self, /, tree=False)\n"
"--\n"
"\n"
"The tag's figures now, as a Usage (by name: usage().allocated), read\n"
"live (ra_tag_stats: no refresh of jemalloc's statistics, cheap).\n"
"tree=True: summed over the tag and its descendants (ra_tag_stats_tree;\n"
"peak_mapped is the subtree's own). limit and soft_limit are the tag's\n"
"own budget (set_limit), which bounds its whole subtree.");


PyDoc_STRVAR(destroy_doc,
"destroy($self, /)\n"
"--\n"
"\n"
"Destroys the tag and its descendants: the name is free again and this\n"
"object is dead (every later call on it raises ValueError).\n"
"\n"
"Refused with OSError EBUSY while the tag or a descendant holds blocks:\n"
"drop the objects made under it first. CPython keeps some freed objects'\n"
"blocks on its free lists (floats, tuples, lists, dicts...), where they\n"
"still count in the tag; gc.collect() empties those lists.\n"
"\n"
"Also refused with OSError EBUSY, nothing done, while the tag or a\n"
"descendant is entered anywhere: inside a `with` block or a decorated\n"
"call of any thread, or held by a coroutine that enters it again when\n"
"it resumes (a task suspended inside `with tag:`, a task not yet run that\n"
"inherits it, a coroutine of an async function the tag decorates, until\n"
"it ends). The message says which tag and where.");


PyDoc_STRVAR(purge_doc,
"purge($self, /)\n--\n\nReturns the tag's unused pages to the OS (ra_tag_purge).");


PyDoc_STRVAR(set_limit_doc,
"set_limit($self, /, hard, soft=0)\n"
"--\n"
"\n"
"Sets the tag's budget on the memory its subtree holds from the OS\n"
"(usage().mapped), in bytes; 0 means none, set_limit(0) clears it. Past\n"
"hard, an allocation under the tag fails: MemoryError in Python. soft\n"
"must not be above hard (ValueError); crossing it calls nothing from\n"
"Python (the C callback is not offered here).");


PyDoc_STRVAR(priority_doc,
"The tag's priority under the process's memory limit (an int, default\n"
"0): lower gives way first, and a negative one's allocations are refused\n"
"when the process is above 90% of the limit. Read and write.");


PyDoc_STRVAR(id_doc, "The library's id of the tag (1, 2, ...).");

PyDoc_STRVAR(name_doc, "The tag's name.");

PyDoc_STRVAR(parent_doc, "The parent Tag, or None at the top level.");


#endif /* RAPY_TAG_DOC_H */
