"""The module regionalloc's API, under the library (tests/test_python.sh)."""
import os
import subprocess
import sys
import unittest

import regionalloc


class NotTheAllocator(unittest.TestCase):
    """A Python the library is not the allocator of: a child without the
    preload, and this process when the build does not override malloc."""

    def child(self, code):
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        return subprocess.run([sys.executable, "-c", code], env=env,
                              capture_output=True, text=True, check=False)

    def test_without_preload_enabled_is_false_and_entering_says_how(self):
        out = self.child(
            "import regionalloc as r\n"
            "print(r.enabled())\n"
            "try:\n"
            "    with r.Tag('t'):\n"
            "        pass\n"
            "except RuntimeError as e:\n"
            "    print(e)\n")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0], "False")
        self.assertIn("regionalloc run -- python3", lines[1])
        self.assertIn("LD_PRELOAD=", lines[1])


class Tags(unittest.TestCase):
    def test_with_pushes_and_pops(self):
        tag = regionalloc.Tag("with")
        self.assertIsNone(regionalloc.current())
        with tag:
            self.assertIs(regionalloc.current(), tag)
        self.assertIsNone(regionalloc.current())


if __name__ == "__main__":
    unittest.main()
