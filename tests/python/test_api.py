"""The module regionalloc's API under the library: attribution, nesting,
exceptions, the decorator, numpy, trees, destroy, budgets, priority,
reports, checkpoints, the memory limit, bad input, and a process the
library is not the allocator of. Run by tests/test_python.sh (the library
preloaded, PYTHONMALLOC=malloc); threads and asyncio are test_tasks.py's.

Exactness is the library's own: a block's usable size (malloc_usable_size)
and its tag (ra_tag_of), both read through ctypes from the process."""
import ctypes
import errno
import gc
import inspect
import json
import os
import pydoc
import subprocess
import sys
import sysconfig
import threading
import unittest

import regionalloc
from regionalloc import Tag

# The build's library is this process's allocator, unless it was built
# with --disable-override (tests/test_python.sh runs NotTheAllocator alone).
OVERRIDE = os.environ.get("RA_OVERRIDE", "1") == "1"

process = ctypes.CDLL(None)
process.malloc_usable_size.restype = ctypes.c_size_t
process.malloc_usable_size.argtypes = [ctypes.c_void_p]


def usable(address):
    """The usable size of the block at address (an object's id: CPython
    puts an object that the collector does not track at its block's
    start)."""
    return process.malloc_usable_size(address)


def tag_of(address):
    """The library's tag of the block at address (0: untagged)."""
    return process.ra_tag_of(ctypes.c_void_p(address))


def child(code, drop_preload=True, **env):
    """Runs code in a new /usr/bin/python3 (this one), without the preload
    unless told otherwise; its CompletedProcess."""
    environ = dict(os.environ)
    if drop_preload:
        environ.pop("LD_PRELOAD", None)
    environ.update(env)
    return subprocess.run([sys.executable, "-c", code], env=environ,
                          capture_output=True, text=True, check=False)


if OVERRIDE:
    process.ra_tag_of.restype = ctypes.c_uint
    process.ra_tag_of.argtypes = [ctypes.c_void_p]
    process.ra_tag_destroy.argtypes = [ctypes.c_uint]


class NotTheAllocator(unittest.TestCase):
    """A Python the library is not the allocator of: a child without the
    preload, one in pass-through mode, and this process in a build that
    does not override malloc."""

    PROBE = (
        "import regionalloc as r\n"
        "print(r.enabled(), r.current(), r.tags())\n"
        "for call in (lambda: r.Tag('t'), lambda: r.tag('t'),\n"
        "             lambda: r.report(), lambda: r.checkpoint('c'),\n"
        "             lambda: r.checkpoints(), lambda: r.memory_limit(),\n"
        "             lambda: r.set_memory_limit(0)):\n"
        "    try:\n"
        "        call()\n"
        "        print('no error')\n"
        "    except RuntimeError as e:\n"
        "        print(e)\n")

    def check_off(self, out, why):
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stderr, "")
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0], "False None []")
        self.assertEqual(len(lines), 8)
        for line in lines[1:]:
            self.assertIn(why, line)
            self.assertIn("regionalloc run -- python3 app.py", line)
            self.assertIn("LD_PRELOAD=", line)

    def test_without_the_preload_nothing_runs_and_the_error_says_how(self):
        self.check_off(child(self.PROBE), "is not loaded in this process")

    def test_in_pass_through_mode(self):
        out = child(self.PROBE, drop_preload=False, REGIONALLOC="0")
        self.check_off(out, "pass-through mode")

    def test_this_process_is_as_the_build(self):
        self.assertIs(regionalloc.enabled(), OVERRIDE)
        if OVERRIDE:
            return
        self.assertIsNone(regionalloc.current())
        self.assertEqual(regionalloc.tags(), [])
        with self.assertRaisesRegex(RuntimeError, "not the process's malloc"):
            Tag("t")

    def test_the_module_loads_nothing(self):
        out = child("import regionalloc\n"
                    "print(open('/proc/self/maps').read())\n")
        self.assertEqual(out.returncode, 0, out.stderr)
        mapped = {os.path.basename(line.split()[-1])
                  for line in out.stdout.splitlines() if "/" in line}
        self.assertIn("regionalloc" + sysconfig.get_config_var("EXT_SUFFIX"),
                      mapped)
        for name in mapped:
            self.assertFalse(name.startswith(("libregionalloc.so",
                                              "libjemalloc.so")), name)


@unittest.skipUnless(OVERRIDE, "the library is not the allocator here")
class Case(unittest.TestCase):
    def setUp(self):
        self.assertTrue(regionalloc.enabled())
        self.assertIsNone(regionalloc.current())
        gc.collect()

    def tearDown(self):
        self.assertIsNone(regionalloc.current())


class Objects(Case):
    def test_a_block_counts_in_its_tag_exactly(self):
        tag = Tag("objects")
        before = tag.usage()
        with tag:
            block = bytes(5000)
        inside = tag.usage()
        self.assertEqual(tag_of(id(block)), tag.id)
        self.assertEqual(inside.allocated - before.allocated,
                         usable(id(block)))
        self.assertEqual(inside.nmalloc - before.nmalloc, 1)
        self.assertEqual(inside.ndalloc, before.ndalloc)
        del block
        after = tag.usage()
        self.assertEqual(after.allocated, before.allocated)
        self.assertEqual(after.ndalloc - before.ndalloc, 1)

    def test_objects_made_inside_are_the_tags(self):
        tag = Tag("many objects")
        before = tag.usage().allocated
        with tag:
            words = [str(i) * 40 for i in range(1000)]
            table = {word: len(word) for word in words}
        self.assertTrue(all(tag_of(id(w)) == tag.id for w in words))
        grown = tag.usage().allocated - before
        self.assertGreaterEqual(grown, sum(usable(id(w)) for w in words))
        untagged = bytes(5000)
        self.assertEqual(tag_of(id(untagged)), 0)
        del words, table
        # The list's and dict's heads may wait on CPython's free lists.
        gc.collect()
        self.assertEqual(tag.usage().allocated, before)

    def test_nesting(self):
        outer, inner = Tag("outer"), Tag("inner")
        with outer:
            a = bytes(3000)
            with inner as entered:
                self.assertIs(entered, inner)
                self.assertIs(regionalloc.current(), inner)
                b = bytes(3000)
            self.assertIs(regionalloc.current(), outer)
            c = bytes(3000)
        self.assertEqual([tag_of(id(x)) for x in (a, b, c)],
                         [outer.id, inner.id, outer.id])
        with outer, outer:
            self.assertIs(regionalloc.current(), outer)

    def test_an_exception_pops(self):
        tag = Tag("raising")
        with self.assertRaises(KeyError):
            with tag:
                with Tag("raising inside"):
                    raise KeyError("x")
        self.assertIsNone(regionalloc.current())

    def test_leaving_a_tag_not_on_top_raises_and_changes_nothing(self):
        a, b = Tag("left a"), Tag("left b")
        a.__enter__()
        b.__enter__()
        with self.assertRaises(RuntimeError):
            a.__exit__(None, None, None)
        self.assertIs(regionalloc.current(), b)
        b.__exit__(None, None, None)
        a.__exit__(None, None, None)
        with self.assertRaises(RuntimeError):
            a.__exit__(None, None, None)

    def test_the_stack_has_room_for_64(self):
        tag = Tag("deep")
        entered = 0
        with self.assertRaises(OSError) as caught:
            for _ in range(100):
                tag.__enter__()
                entered += 1
        self.assertEqual(caught.exception.errno, errno.EOVERFLOW)
        self.assertEqual(entered, 64)
        for _ in range(entered):
            tag.__exit__(None, None, None)


class Decorator(Case):
    def test_a_function_runs_under_its_tag(self):
        @regionalloc.tag("decorated")
        def make(n):
            """Makes n bytes."""
            self.assertIs(regionalloc.current(), Tag("decorated"))
            return bytes(n)

        block = make(4000)
        self.assertEqual(tag_of(id(block)), Tag("decorated").id)
        self.assertEqual(make.__name__, "make")
        self.assertEqual(make.__doc__, "Makes n bytes.")
        self.assertEqual(str(inspect.signature(make)), "(n)")
        self.assertIsNone(regionalloc.current())

    def test_tag_is_the_tag(self):
        self.assertIs(regionalloc.tag("by name"), Tag("by name"))
        with regionalloc.tag("by name"):
            self.assertIs(regionalloc.current(), Tag("by name"))

    def test_an_exception_pops_and_goes_through(self):
        @Tag("decorated raising")
        def fail():
            raise ValueError("inside")

        with self.assertRaisesRegex(ValueError, "inside"):
            fail()
        self.assertIsNone(regionalloc.current())

    def test_methods_and_keywords(self):
        class Cache:
            @Tag("method")
            def fill(self, n, *, fill=b"x"):
                return (regionalloc.current(), fill * n)

        current, data = Cache().fill(2000, fill=b"y")
        self.assertIs(current, Tag("method"))
        self.assertEqual(tag_of(id(data)), Tag("method").id)

    def test_a_function_that_leaves_its_tag_unbalanced_raises(self):
        other = Tag("unbalanced")

        @Tag("balanced")
        def enter_only():
            other.__enter__()

        with self.assertRaises(RuntimeError):
            enter_only()
        other.__exit__(None, None, None)
        Tag("balanced").__exit__(None, None, None)

    def test_what_cannot_be_decorated(self):
        def gen():
            yield 1

        async def agen():
            yield 1

        tag = Tag("refusing")
        for bad in (gen, agen):
            with self.assertRaisesRegex(TypeError, "generator"):
                tag(bad)
        with self.assertRaises(TypeError):
            tag(42)
        with self.assertRaises(TypeError):
            tag()
        with self.assertRaises(TypeError):
            tag(len, len)
        with self.assertRaises(TypeError):
            tag(len, key=1)


class Numpy(Case):
    def test_array_data_counts_in_the_tag(self):
        import numpy
        tag = Tag("arrays")
        numpy.ones(1 << 20).sum()  # numpy's first use, outside the tag
        before = tag.usage().allocated
        with tag:
            array = numpy.ones(1 << 20)
        data = array.__array_interface__["data"][0]
        self.assertEqual(tag_of(data), tag.id)
        self.assertGreaterEqual(tag.usage().allocated - before,
                                usable(data))
        self.assertGreaterEqual(usable(data), 8 << 20)
        del array
        gc.collect()
        self.assertEqual(tag.usage().allocated, before)


class Trees(Case):
    def test_parent_child_and_the_subtree(self):
        root = Tag("tree root")
        leaf = Tag("tree leaf", parent=root)
        self.assertIs(leaf.parent, root)
        self.assertIsNone(root.parent)
        self.assertIs(Tag("tree leaf"), leaf)
        self.assertIs(Tag("tree leaf", root), leaf)
        with self.assertRaises(FileExistsError) as caught:
            Tag("tree leaf", parent=Tag("tree elsewhere"))
        self.assertEqual(caught.exception.errno, errno.EEXIST)
        with leaf:
            block = bytes(20000)
        own, tree = root.usage(), root.usage(tree=True)
        self.assertEqual(tree.allocated,
                         own.allocated + leaf.usage().allocated)
        self.assertGreaterEqual(tree.allocated - own.allocated,
                                usable(id(block)))
        self.assertEqual(leaf.usage(tree=True), leaf.usage())
        del block

    def test_depth_is_bounded(self):
        parent = None
        with self.assertRaises(ValueError):
            for level in range(20):
                parent = Tag("level %d" % level, parent)
        self.assertEqual(level, 8)


class Destroy(Case):
    def test_refused_while_it_holds_blocks_then_the_name_is_free(self):
        tag = Tag("doomed")
        with tag:
            block = bytes(10000)
        with self.assertRaises(OSError) as caught:
            tag.destroy()
        self.assertEqual(caught.exception.errno, errno.EBUSY)
        self.assertIn("gc.collect()", str(caught.exception))
        self.assertIs(Tag("doomed"), tag)
        del block
        tag.destroy()
        self.assertNotIn(tag, regionalloc.tags())
        for call in (tag.usage, tag.destroy, tag.purge, lambda: tag.priority,
                     lambda: tag.set_limit(0), tag.__enter__,
                     lambda: Tag("doomed child", tag), lambda: tag(len)):
            with self.assertRaisesRegex(ValueError, "destroyed"):
                call()
        self.assertIn("destroyed", repr(tag))
        again = Tag("doomed")
        self.assertIsNot(again, tag)
        # Its id serves the next tag: the old object stays dead.
        other = Tag("doomed's successor")
        self.assertIn(tag.id, (again.id, other.id))
        with self.assertRaises(ValueError):
            tag.usage()
        again.destroy()
        other.destroy()

    def test_a_subtree_goes_with_its_root(self):
        root = Tag("doomed root")
        leaf = Tag("doomed leaf", parent=root)
        root.destroy()
        with self.assertRaises(ValueError):
            leaf.usage()
        with self.assertRaises(ValueError):
            with leaf:
                pass

    @staticmethod
    def destroy_on_the_stack(tag):
        """tag.destroy() with tag pushed, its OSError. Nothing is allocated
        under the tag before the call (the module refuses before it counts
        the tag's blocks); the frame object that the exception's traceback
        makes of this function's frame, under the tag, is freed when it
        returns."""
        destroy = tag.destroy
        tag.__enter__()
        try:
            destroy()
        except OSError as error:
            refusal = error
        tag.__exit__(None, None, None)
        return refusal.errno, str(refusal)

    def test_refused_on_the_stack(self):
        tag = Tag("doomed on the stack")
        err, message = self.destroy_on_the_stack(tag)
        self.assertEqual(err, errno.EBUSY)
        self.assertIn("it is entered and not left (1 in this thread, 0 in "
                      "other threads, 0 in coroutines", message)
        gc.collect()
        tag.destroy()

    def test_refused_while_another_thread_is_inside_it_or_its_subtree(self):
        root = Tag("doomed in a thread")
        leaf = Tag("doomed leaf in a thread", parent=root)
        # Locks, not a barrier: waiting makes no object under the tag.
        inside, leave = threading.Lock(), threading.Lock()
        inside.acquire()
        leave.acquire()

        def hold(tag):
            with tag:
                inside.release()
                leave.acquire()

        for entered, refused, said in ((root, root, "it is"),
                                       (leaf, root, "tag 'doomed leaf in a "
                                                    "thread' (in its subtree) "
                                                    "is"),
                                       (leaf, leaf, "it is")):
            thread = threading.Thread(target=hold, args=(entered,))
            thread.start()
            inside.acquire()
            try:
                with self.assertRaises(OSError) as caught:
                    refused.destroy()
            finally:
                leave.release()
                thread.join()
            self.assertEqual(caught.exception.errno, errno.EBUSY)
            self.assertIn(f"'{refused.name}' cannot be destroyed: {said} "
                          "entered and not left (0 in this thread, 1 in "
                          "other threads, 0 in coroutines",
                          str(caught.exception))
            # Nothing was done: both are alive and found by name.
            self.assertIs(Tag("doomed in a thread"), root)
            self.assertIs(Tag("doomed leaf in a thread", root), leaf)
        gc.collect()
        root.destroy()
        with self.assertRaisesRegex(ValueError, "destroyed"):
            leaf.usage()

    def test_a_tag_destroyed_from_c_is_dead_here(self):
        tag = Tag("destroyed from C")
        self.assertEqual(process.ra_tag_destroy(tag.id), 0)
        with self.assertRaises(ValueError):
            tag.usage()
        self.assertIsNot(Tag("destroyed from C"), tag)
        Tag("destroyed from C").destroy()

    def test_no_reset(self):
        self.assertFalse(hasattr(regionalloc, "reset"))
        self.assertFalse(hasattr(Tag, "reset"))


class Registry(Case):
    def test_one_object_per_live_tag(self):
        tag = Tag("registry")
        self.assertIs(Tag("registry"), tag)
        self.assertIs(Tag(name="registry"), tag)
        self.assertEqual(tag.name, "registry")
        self.assertIsInstance(tag.id, int)
        self.assertIn(tag, regionalloc.tags())
        self.assertEqual(len(set(map(id, regionalloc.tags()))),
                         len(regionalloc.tags()))
        self.assertIn("'registry'", repr(tag))
        with self.assertRaises(TypeError):
            class Sub(Tag):
                pass

    def test_tags_lists_every_live_tag(self):
        names = {"listed %d" % i for i in range(5)}
        made = [Tag(n) for n in names]
        listed = {t.name for t in regionalloc.tags()}
        self.assertLessEqual(names, listed)
        for tag in made:
            tag.destroy()
        self.assertFalse(names & {t.name for t in regionalloc.tags()})


class Budget(Case):
    def test_limits_read_back_and_refuse(self):
        tag = Tag("budget")
        tag.set_limit(1 << 40, 1 << 30)
        usage = tag.usage()
        self.assertEqual((usage.limit, usage.soft_limit), (1 << 40, 1 << 30))
        tag.set_limit(usage.mapped + (1 << 20))
        self.assertEqual(tag.usage().soft_limit, 0)
        with self.assertRaises(MemoryError):
            with tag:
                bytes(64 << 20)
        tag.set_limit(0)
        self.assertEqual((tag.usage().limit, tag.usage().soft_limit), (0, 0))
        with tag:
            block = bytes(64 << 20)
        del block

    def test_purge_gives_back_the_free_pages(self):
        tag = Tag("purged")
        with tag:
            blocks = [bytes(1 << 16) for _ in range(64)]
        del blocks
        self.assertIsNone(tag.purge())
        self.assertEqual(tag.usage().dirty, 0)

    def test_priority(self):
        tag = Tag("priority")
        self.assertEqual(tag.priority, 0)
        tag.priority = -5
        self.assertEqual(tag.priority, -5)
        self.assertIn('"priority": -5', regionalloc.report("json"))
        tag.priority = 2 ** 31 - 1
        self.assertEqual(tag.priority, 2 ** 31 - 1)
        for bad, error in ((2 ** 31, OverflowError), (-2 ** 31 - 1,
                           OverflowError), ("1", TypeError),
                           (1.0, TypeError), (None, TypeError)):
            with self.assertRaises(error):
                tag.priority = bad
        with self.assertRaises(TypeError):
            del tag.priority
        self.assertEqual(tag.priority, 2 ** 31 - 1)

    def test_memory_limit(self):
        old = regionalloc.memory_limit()
        try:
            regionalloc.set_memory_limit(1 << 40)
            self.assertEqual(regionalloc.memory_limit(), 1 << 40)
            regionalloc.set_memory_limit(0)
            self.assertEqual(regionalloc.memory_limit(), 0)
        finally:
            regionalloc.set_memory_limit(old)


class Reports(Case):
    def test_the_three_formats_name_the_tag(self):
        tag = Tag("reported")
        with tag:
            block = bytes(7000)
        text = regionalloc.report()
        self.assertRegex(text, r"(?m)^reported +[0-9.]+ KiB")
        self.assertIn("untagged", regionalloc.report("text", detail=True))
        for detail in (False, True):
            doc = json.loads(regionalloc.report("json", detail=detail))
            self.assertEqual(doc["schema"], "regionalloc-report-1")
            row = [t for t in doc["tags"] if t["name"] == "reported"]
            self.assertEqual(len(row), 1)
            self.assertEqual(row[0]["id"], tag.id)
            self.assertEqual(row[0]["allocated"], tag.usage().allocated)
        prometheus = regionalloc.report(format="prometheus")
        self.assertIn('regionalloc_tag_allocated_bytes{tag="reported"} %d'
                      % tag.usage().allocated, prometheus)
        del block

    def test_a_report_leaves_nothing_in_the_callers_tag(self):
        tag = Tag("reporting")
        for _ in range(5):
            Tag("filler %d" % _)
        before = tag.usage()
        with tag:
            text = regionalloc.report("json")
        self.assertGreater(len(text), 1000)
        self.assertEqual(tag.usage().allocated - before.allocated,
                         usable(id(text)))
        del text
        self.assertEqual(tag.usage().allocated, before.allocated)

    def test_checkpoints(self):
        regionalloc.checkpoint("first phase")
        with Tag("checkpointed"):
            block = bytes(9000)
        regionalloc.checkpoint("second phase")
        self.assertIn("second phase", regionalloc.checkpoints())
        doc = json.loads(regionalloc.checkpoints("json"))
        labels = [c["label"] for c in doc["checkpoints"]]
        self.assertEqual(labels[-2:], ["first phase", "second phase"])
        self.assertIn('checkpoint="second phase"',
                      regionalloc.checkpoints(format="prometheus"))
        del block


class BadInput(Case):
    def test_names(self):
        for bad, error in ((1, TypeError), (b"x", TypeError),
                           (None, TypeError), ("", ValueError),
                           ("x" * 64, ValueError), ("\u00e9" * 32, ValueError),
                           ("a\0b", ValueError)):
            with self.assertRaises(error, msg=repr(bad)):
                Tag(bad)
            with self.assertRaises(error, msg=repr(bad)):
                regionalloc.tag(bad)
        self.assertEqual(Tag("x" * 63).name, "x" * 63)
        self.assertEqual(Tag("\u00e9" * 31).name, "\u00e9" * 31)

    def test_arguments(self):
        tag = Tag("arguments")
        calls = [
            (TypeError, Tag), (TypeError, lambda: Tag("a", "b")),
            (TypeError, lambda: Tag("a", parent=1)),
            (TypeError, lambda: Tag("a", None, None)),
            (TypeError, lambda: Tag("a", bogus=1)),
            (TypeError, regionalloc.tag),
            (TypeError, lambda: regionalloc.tag("a", None)),
            (TypeError, lambda: tag.usage(1, 2)),
            (TypeError, lambda: tag.usage(bogus=1)),
            (TypeError, lambda: tag.destroy(1)),
            (TypeError, lambda: tag.purge(1)),
            (TypeError, tag.set_limit),
            (TypeError, lambda: tag.set_limit("1")),
            (TypeError, lambda: tag.set_limit(1.0)),
            (TypeError, lambda: tag.set_limit(1, "1")),
            (ValueError, lambda: tag.set_limit(-1)),
            (ValueError, lambda: tag.set_limit(0, -1)),
            (OverflowError, lambda: tag.set_limit(2 ** 64)),
            (ValueError, lambda: tag.set_limit(1 << 20, 1 << 30)),
            (TypeError, lambda: tag.__enter__(1)),
            (TypeError, lambda: regionalloc.enabled(1)),
            (TypeError, lambda: regionalloc.current(1)),
            (TypeError, lambda: regionalloc.tags(1)),
            (TypeError, lambda: regionalloc.report(1)),
            (TypeError, lambda: regionalloc.report("text", False, 1)),
            (TypeError, lambda: regionalloc.report(bogus=1)),
            (ValueError, lambda: regionalloc.report("xml")),
            (ValueError, lambda: regionalloc.report("TEXT")),
            (ValueError, lambda: regionalloc.report("text\0")),
            (TypeError, regionalloc.checkpoint),
            (TypeError, lambda: regionalloc.checkpoint(None)),
            (TypeError, lambda: regionalloc.checkpoint(b"x")),
            (ValueError, lambda: regionalloc.checkpoint("a\0b")),
            (TypeError, lambda: regionalloc.checkpoints(1)),
            (ValueError, lambda: regionalloc.checkpoints("xml")),
            (TypeError, lambda: regionalloc.memory_limit(1)),
            (TypeError, regionalloc.set_memory_limit),
            (TypeError, lambda: regionalloc.set_memory_limit("1")),
            (TypeError, lambda: regionalloc.set_memory_limit(None)),
            (ValueError, lambda: regionalloc.set_memory_limit(-1)),
            (OverflowError, lambda: regionalloc.set_memory_limit(2 ** 64)),
        ]
        for error, call in calls:
            with self.assertRaises(error, msg=inspect.getsource(call)
                                   if inspect.isfunction(call) else call):
                call()
        self.assertEqual(tag.usage().limit, 0)
        self.assertEqual(regionalloc.current(), None)

    def test_no_region_left_is_enospc(self):
        out = child("import regionalloc as r\n"
                    "r.Tag('one'); r.Tag('two')\n"
                    "try:\n"
                    "    r.Tag('three')\n"
                    "except OSError as e:\n"
                    "    print(type(e).__name__, e.errno)\n",
                    drop_preload=False, REGIONALLOC_MAX_TAGS="2")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "OSError %d" % errno.ENOSPC)


class Documentation(unittest.TestCase):
    def test_help_reads_as_a_manual_page(self):
        page = pydoc.render_doc(regionalloc, renderer=pydoc.plaintext)
        for words in ("RUNNING", "regionalloc run -- python3 app.py",
                      "WHAT COUNTS", "PYTHONMALLOC=malloc", "free lists",
                      "numpy", "ERRORS", "no reset", "class Tag",
                      "class Usage", "set_limit(self, /, hard, soft=0)",
                      "report(format='text', detail=False)"):
            self.assertIn(words, page)

    def test_everything_public_has_a_docstring(self):
        for name in dir(regionalloc):
            if name.startswith("_"):
                continue
            obj = getattr(regionalloc, name)
            self.assertTrue((obj.__doc__ or "").strip(), name)
        for name in ("usage", "destroy", "purge", "set_limit", "priority",
                     "id", "name", "parent", "__enter__", "__exit__"):
            self.assertTrue(getattr(Tag, name).__doc__, name)
        for field in regionalloc.Usage._fields if hasattr(
                regionalloc.Usage, "_fields") else ():
            self.assertTrue(getattr(regionalloc.Usage, field).__doc__)

    def test_usage_has_its_figures_by_name(self):
        fields = ("allocated", "active", "resident", "mapped", "dirty",
                  "muzzy", "retained", "reserved", "peak_mapped", "nmalloc",
                  "ndalloc", "limit", "soft_limit")
        self.assertEqual(regionalloc.Usage.n_fields, len(fields))
        for field in fields:
            self.assertTrue(getattr(regionalloc.Usage, field).__doc__)


if __name__ == "__main__":
    unittest.main()
