"""examples/python_requests.py, and what doc/python.md says about it and
about where Python's memory goes, checked against the library's own
figures (Tag.usage, the JSON report) and, where the page compares them
with the kernel's, against /proc/self/status.

Run by tests/test_python.sh with /usr/bin/python3, the library preloaded,
PYTHONMALLOC=malloc and PYTHONPATH=<build>/bindings/python."""

import errno
import gc
import json
import os
import re
import subprocess
import sys
import unittest

import regionalloc

try:
    import numpy
except ImportError:
    numpy = None

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "python_requests.py")
MODEL = 512 * 512 * 8           # the example's array of weights, in bytes


def run_example(*args, env=None):
    out = subprocess.run([sys.executable, EXAMPLE] + list(args), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=300)
    return out


def parse(stdout):
    """(the served line's numbers, {section: {tag: (allocated, live)}}, the
    rest of the output: the report)."""
    lines = stdout.splitlines()
    m = re.match(r"served (\d+) requests: (\d+) from the cache, (\d+) "
                 r"rendered; the cache holds (\d+) pages of (\d+) bytes$",
                 lines[0])
    served = tuple(int(x) for x in m.groups()) if m else None
    sections, at, i = {}, None, 1
    while i < len(lines) and lines[i]:
        if not lines[i].startswith(" "):
            at = lines[i]
            sections[at] = {}
        else:
            m = re.match(r"\s+(\S+)(?: \(tree\))?\s+allocated\s+(\d+) B\s+"
                         r"live blocks\s+(\d+)\s+nmalloc\s+(\d+)$", lines[i])
            sections[at][m.group(1)] = (int(m.group(2)), int(m.group(3)))
        i += 1
    return served, sections, "\n".join(lines[i + 1:])


class Example(unittest.TestCase):
    """The run doc/python.md shows, smaller: its figures and its report."""

    @classmethod
    def setUpClass(cls):
        cls.out = run_example("--requests", "3000", "--entries", "500",
                              "--report-format", "json")
        if cls.out.returncode == 0:
            cls.served, cls.sections, report = parse(cls.out.stdout)
            cls.report = json.loads(report)

    def test_runs(self):
        self.assertEqual(self.out.returncode, 0, self.out.stderr)
        self.assertEqual(self.out.stderr, "")

    def test_served(self):
        served, hits, misses, pages, _ = self.served
        self.assertEqual(served, 3000)
        self.assertEqual(hits + misses, served)
        self.assertEqual(pages, 500)       # more distinct pages than room

    def after(self, when):
        key = "tags after the requests:" if when == "before" \
            else "after gc.collect():"
        return self.sections[key]

    def test_requests_hold_little(self):
        """The doc: after the loop the requests tag holds a few blocks, the
        last requests' objects' blocks on CPython's free lists and what the
        json module made at its first use and keeps (identifier strings);
        gc.collect() empties the free lists and leaves the others."""
        before, live_before = self.after("before")["requests"]
        allocated, live = self.after("after")["requests"]
        self.assertLessEqual(allocated, before)
        self.assertLessEqual(live, live_before)
        self.assertLess(allocated, 1024)
        self.assertLessEqual(live, 8)

    def test_cache_holds_its_pages(self):
        """The cache tag holds every cached page, its key and its entry in
        the dict (three blocks a page, and the dict's tables): more than
        the pages' bytes, less than 1.5 times them."""
        pages, page_bytes = self.served[3], self.served[4]
        allocated, live = self.after("after")["cache"]
        self.assertGreaterEqual(allocated, page_bytes)
        self.assertLess(allocated, page_bytes * 3 // 2)
        self.assertGreaterEqual(live, 3 * pages)
        self.assertLess(live, 3 * pages + 16)

    @unittest.skipIf(numpy is None, "numpy not installed (python3-numpy)")
    def test_model_holds_its_array(self):
        """The model tag holds the 2 MiB array and its object, nothing
        else."""
        allocated, live = self.after("after")["model"]
        self.assertGreaterEqual(allocated, MODEL)
        self.assertLess(allocated, MODEL + 1024)

    def test_tree_sums_children(self):
        tree = self.after("after")["app"][0]
        parts = sum(self.after("after")[t][0]
                    for t in ("requests", "cache", "model")
                    if t in self.after("after"))
        self.assertEqual(tree, parts)

    def test_report_agrees(self):
        """The JSON report, written after the figures with nothing made
        under the tags in between, has the same allocated bytes, and the
        tree: requests, cache and model under app."""
        tags = {t["name"]: t for t in self.report["tags"]}
        for name, (allocated, _) in self.after("after").items():
            got = tags[name]["tree"] if name == "app" else tags[name]
            self.assertEqual(got["allocated"], allocated, name)
        for name in ("requests", "cache", "model"):
            if name in tags:
                self.assertEqual(tags[name]["parent_id"], tags["app"]["id"])

    def test_not_the_allocator(self):
        """Without the library preloaded the example says how to run it
        and exits 1."""
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        out = run_example("--requests", "10", env=env)
        self.assertEqual(out.returncode, 1)
        self.assertIn("regionalloc run", out.stderr)


class WhereMemoryGoes(unittest.TestCase):
    """doc/python.md, "Where Python's memory goes"."""

    def setUp(self):
        gc.collect()

    def test_free_lists_keep_blocks_until_gc(self):
        """Floats freed under a tag stay its blocks on the float free list
        (100 of them); the next floats made under another tag reuse them
        and count in the first; gc.collect() empties the list."""
        first, other = regionalloc.Tag("doc-floats"), regionalloc.Tag("doc-other")
        with first:
            xs = [float(i) + 0.5 for i in range(1000)]
        del xs
        kept = first.usage()
        self.assertGreaterEqual(kept.nmalloc - kept.ndalloc, 100)
        with other:
            ys = [float(i) + 0.25 for i in range(50)]
        self.assertLess(other.usage().allocated, 50 * 24)  # not 50 floats
        self.assertEqual(first.usage().allocated, kept.allocated)
        del ys
        gc.collect()
        self.assertEqual(first.usage().allocated, 0)
        first.destroy()
        other.destroy()

    def test_destroy_refused_while_free_lists_hold(self):
        """A tag whose objects' blocks sit on a free list is not destroyed
        (EBUSY); after gc.collect() it is."""
        tag = regionalloc.Tag("doc-destroy")
        with tag:
            xs = [(i, i) for i in range(100)]
        del xs
        with self.assertRaises(OSError) as e:
            tag.destroy()
        self.assertEqual(e.exception.errno, errno.EBUSY)
        gc.collect()
        tag.destroy()

    @unittest.skipIf(numpy is None, "numpy not installed (python3-numpy)")
    def test_numpy_small_arrays_cached(self):
        """numpy keeps up to 7 freed data blocks of each size under 1024
        bytes for its next arrays, whatever the tag; from 1024 bytes the
        data counts where the array is made."""
        a, b = regionalloc.Tag("doc-np-a"), regionalloc.Tag("doc-np-b")
        for nbytes, cached in ((512, True), (4096, False)):
            with a:
                xs = [numpy.empty(nbytes // 8) for _ in range(10)]
            del xs
            gc.collect()
            left = a.usage().allocated
            with b:
                ys = [numpy.empty(nbytes // 8) for _ in range(10)]
            if cached:
                self.assertGreaterEqual(left, 7 * nbytes)
                self.assertLess(b.usage().allocated, 10 * nbytes)
            else:
                self.assertLess(left, nbytes)
                self.assertGreaterEqual(b.usage().allocated, 10 * nbytes)
            del ys
            gc.collect()

    def test_pymalloc_arenas_in_no_tag(self):
        """With pymalloc (PYTHONMALLOC unset) small objects live in arenas
        Python maps itself: the process's RssAnon grows by tens of MiB, the
        tag by less than a tenth of it; with PYTHONMALLOC=malloc, the tag
        by most of it."""
        code = (
            "import regionalloc, gc\n"
            "def rss():\n"
            "    for l in open('/proc/self/status'):\n"
            "        if l.startswith('RssAnon:'): return int(l.split()[1]) * 1024\n"
            "t = regionalloc.Tag('objs'); gc.collect(); r = rss()\n"
            "with t:\n"
            "    objs = [{'k': str(i), 'v': [i, (i, str(i))]} for i in range(100000)]\n"
            "print(rss() - r, t.usage().allocated)\n")
        for malloc in (False, True):
            env = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}
            if malloc:
                env["PYTHONMALLOC"] = "malloc"
            out = subprocess.run([sys.executable, "-c", code], env=env,
                                 stdout=subprocess.PIPE, text=True, check=True)
            grown, tagged = (int(x) for x in out.stdout.split())
            self.assertGreater(grown, 20 << 20)
            if malloc:
                self.assertGreater(tagged, grown * 3 // 4)
            else:
                self.assertLess(tagged, grown // 10)


if __name__ == "__main__":
    unittest.main()
