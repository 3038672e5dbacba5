/* The docstrings of the module and its functions: with Tag's and Usage's,
 * what help(regionalloc) prints is the module's manual page. */
#ifndef RAPY_MODULE_DOC_H
#define RAPY_MODULE_DOC_H

#include <Python.h>

PyDoc_STRVAR(module_doc,
"Per-tag memory accounting for Python code, over libregionalloc.\n"
"\n"
"A tag is a named memory category. Every block malloc'd while a tag is on\n"
"top of the thread's stack counts in it, exactly, until it is freed:\n"
"\n"
"    import regionalloc\n"
"\n"
"    cache = regionalloc.Tag(\"cache\")\n"
"    with cache:\n"
"        table = {i: str(i) for i in range(100000)}\n"
"    print(cache.usage().allocated)      # bytes in the table's blocks\n"
"\n"
"    @regionalloc.tag(\"request\")\n"
"    def handle(body): ...\n"
"\n"
"    print(regionalloc.report())         # every tag; also \"json\", \"prometheus\"\n"
"\n"
"RUNNING\n"
"    The library must be the process's allocator; the module finds its API\n"
"    in the process and never loads it. Run the program under it:\n"
"\n"
"        regionalloc run -- python3 app.py\n"
"\n"
"    or LD_PRELOAD=/path/to/libregionalloc.so.2 with PYTHONMALLOC=malloc\n"
"    (regionalloc run sets it). Elsewhere (no preload, a library built with\n"
"    --disable-override, REGIONALLOC=0) enabled() is False, current() is\n"
"    None, tags() is empty, and every other call, entering a tag first,\n"
"    raises RuntimeError saying how to run the program.\n"
"\n"
"WHAT COUNTS\n"
"    With PYTHONMALLOC=malloc every block CPython allocates goes through\n"
"    malloc, so objects made inside `with tag:` count in the tag, and so does\n"
"    the data of numpy arrays made there. Objects CPython serves from its\n"
"    free lists (floats, tuples, lists, dicts, ...) and arrays served from\n"
"    numpy's cache of small blocks reuse blocks made elsewhere: they count\n"
"    where their block was first made. With pymalloc (Python's default)\n"
"    objects of 512 bytes or less live in pymalloc's arenas, which Python\n"
"    maps itself with mmap: they count in no tag, nor untagged (the\n"
"    report's process line shows them as other).\n"
"\n"
"THREADS AND TASKS\n"
"    Each thread has its own stack of tags. After follow_tasks(), a tag\n"
"    entered in a coroutine of an asyncio task follows the task.\n"
"\n"
"ERRORS\n"
"    A failed call of the library raises what its errno means: ValueError\n"
"    (EINVAL: a bad name, size or format), MemoryError (ENOMEM), OSError with\n"
"    that errno otherwise (EBUSY, ENOSPC, EEXIST as FileExistsError, ...).\n"
"    Wrong types raise TypeError; a negative size ValueError; an int beyond\n"
"    the C type OverflowError. A destroyed Tag raises ValueError.\n"
"\n"
"    There is no reset: CPython keeps freed blocks on its free lists and in\n"
"    caches, so no Python code can know that nothing made under a tag\n"
"    survives, and freeing its blocks at once would free live objects.");


PyDoc_STRVAR(enabled_doc,
"enabled()\n--\n\nTrue when the library is this process's allocator (found,\n"
"tagging on, and the process's malloc is the library's).");


PyDoc_STRVAR(tag_function_doc,
"tag(name, /)\n"
"--\n"
"\n"
"Tag(name): the tag called name, made on first use, for use as a context\n"
"manager (`with regionalloc.tag(\"parse\"):`) or as a decorator\n"
"(`@regionalloc.tag(\"parse\")`; a coroutine function's steps each run\n"
"with the tag). A generator function is refused (TypeError): enter the tag\n"
"with `with` inside it.");


PyDoc_STRVAR(current_doc,
"current()\n--\n\nThe Tag on top of the thread's stack, or None (untagged).");


PyDoc_STRVAR(tags_doc,
"tags()\n--\n\nEvery live tag, as a list of Tag, in the order of their ids.");


PyDoc_STRVAR(report_doc,
"report(format='text', detail=False)\n"
"--\n"
"\n"
"Every tag's usage now, as a str: \"text\" (a table of the 50 largest tags\n"
"and the rows untagged and total), \"json\" (one document) or\n"
"\"prometheus\" (the text exposition format). detail=True refreshes\n"
"jemalloc's statistics first and reports its own figures (slower). The\n"
"report is written to a memory file: none of its memory stays in the\n"
"caller's tag.");


PyDoc_STRVAR(checkpoint_doc,
"checkpoint(name, /)\n"
"--\n"
"\n"
"Records a snapshot of every tag's allocated bytes and of the process's\n"
"RSS and peak RSS under name (cut to 63 bytes); the last 1024 are kept.\n"
"checkpoints() reads them.");


PyDoc_STRVAR(checkpoints_doc,
"checkpoints(format='text')\n"
"--\n"
"\n"
"The kept checkpoints, oldest first, as a str in \"text\", \"json\" or\n"
"\"prometheus\".");


PyDoc_STRVAR(memory_limit_doc,
"memory_limit()\n"
"--\n"
"\n"
"The process's memory limit in bytes (0: none): set_memory_limit's, else\n"
"REGIONALLOC_MEMORY_LIMIT's, else the cgroup's.");


PyDoc_STRVAR(set_memory_limit_doc,
"set_memory_limit(nbytes, /)\n"
"--\n"
"\n"
"Holds the process's resident memory under nbytes (0: no limit): at 90%\n"
"the library gives back free pages, the tags of lowest priority first,\n"
"then refuses allocations in tags of negative priority; at the limit, in\n"
"every tag (MemoryError). Untagged allocations are never refused.");


#endif /* RAPY_MODULE_DOC_H */
