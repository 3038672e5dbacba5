"""A Python request loop under the module regionalloc, for bench/run.sh.

Each request parses a JSON body, builds dicts, lists and strings from it,
writes its answer as JSON and reads it back, fills a small buffer and, when
numpy is installed, sums the buffer as an array of 2 KiB. The lines on
stdout are bench/run.sh's rows and notes (bench/benchutil.h):

  python_requests.py            the arms, in this process, which must run
                                with PYTHONMALLOC=malloc and the library
                                preloaded: untagged (the baseline), a tag
                                per request (one of 16 existing tags),
                                tracemalloc on, a tag created and destroyed
                                per request; then entering and leaving a
                                tag, against an empty loop.
  python_requests.py --allocators LIBRARY
                                the untagged loop in a process of its own
                                per round and allocator: Python as Debian
                                ships it (pymalloc, glibc's malloc: the
                                baseline), PYTHONMALLOC=malloc, each with
                                and without LIBRARY preloaded.
  python_requests.py --pass     one warm-up pass and one timed pass of the
                                untagged loop: its time per request (us).

BENCH_SCALE multiplies the requests of a pass (5,000) and the loops of the
enter/leave timing (200,000); BENCH_ROUNDS is the timed rounds (default 5).
The arms take turns in slices of a round, a different one first each
slice; a row's ratio is the median of its slices' ratios to the
baseline's slice beside them. The allocators take turns by round, a
process each, and a row's ratio is the median of its rounds' ratios to
the baseline's run of the same round."""

import errno
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc

try:
    import numpy
except ImportError:
    numpy = None

WORKLOAD = "python requests (dicts, lists, strings, json, a buffer, numpy)"
UNIT = "us/req"
TAGS = 16       # the existing tags a request enters one of
PENDING = 32    # refused destroys kept before a gc.collect() and a retry
SLICES = 8      # a round's slices, in which the arms take turns


def scaled(n, least):
    return max(least, int(n * float(os.environ.get("BENCH_SCALE", "1"))))


def rounds():
    return max(1, int(float(os.environ.get("BENCH_ROUNDS", "5"))))


def row(workload, contender, median, unit, ratio, lo, hi):
    r = "-" if ratio is None else "%.3f" % ratio
    print("row\t%s\t%s\t%.3f\t%s\t%s\t%.3f\t%.3f"
          % (workload, contender, median, unit, r, lo, hi), flush=True)


def note(text):
    print("note\t" + text, flush=True)


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


# -- the request ---------------------------------------------------------------

def make_body(i):
    return json.dumps({"user": "user-%d" % (i % 97), "n": 8 + i % 8,
                       "tags": ["alpha", "beta", "gamma", "delta"][:1 + i % 4],
                       "weights": [0.5 * k for k in range(16)]})


BODIES = [make_body(i) for i in range(64)]


def handle(i):
    req = json.loads(BODIES[i % len(BODIES)])
    items = [{"id": k, "name": "item-%d-%d" % (i, k),
              "tags": [t.upper() for t in req["tags"]]}
             for k in range(req["n"])]
    out = {"request": i, "user": req["user"], "items": items,
           "score": sum(req["weights"]) * len(items)}
    text = json.dumps(out)
    buf = bytearray(text.encode())
    buf += b" " * 64
    if numpy is not None:
        a = numpy.frombuffer(bytes(buf[:2048]).ljust(2048), dtype=numpy.uint8)
        out["checksum"] = float(a.astype(numpy.float64).sum())
    return len(json.loads(text)["items"])


# -- the arms: each runs one pass of n requests and returns us a request ------

def timed(fn, n, per=1000):
    """One pass of fn over n: its time per request (us), or per loop (ns)
    with per 1."""
    t0 = time.perf_counter_ns()
    fn(n)
    return (time.perf_counter_ns() - t0) / n / per


def untagged(n):
    for i in range(n):
        handle(i)


def make_tagged(regionalloc):
    tags = [regionalloc.Tag("py-bench-%d" % k) for k in range(TAGS)]

    def tagged(n):
        for i in range(n):
            with tags[i % TAGS]:
                handle(i)
    return tagged


def traced(n):
    tracemalloc.start()
    try:
        untagged(n)
    finally:
        tracemalloc.stop()


class Lives:
    """A tag created and destroyed per request. A destroy is refused (OSError
    EBUSY) while the tag holds blocks: CPython's free lists keep the blocks
    of a request's objects after they are gone, and hand them to objects
    made later anywhere, which may live on (a timing of this bench's, for
    one). A refused tag waits in a list until PENDING such tags do; then
    one gc.collect() (which empties the free lists) and a retry of every
    tag waiting, those refused again kept for the next retry. The counts
    say how often each happened."""

    def __init__(self, regionalloc):
        self.Tag = regionalloc.Tag
        self.serial = 0
        self.pending = []   # refused at the request's end, not yet retried
        self.stuck = []     # refused again after a gc.collect()
        self.requests = self.refused = self.still = self.collects = 0

    def destroy(self, tag):
        try:
            tag.destroy()
            return True
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            return False

    def retry(self):
        gc.collect()
        self.collects += 1
        fresh = [t for t in self.pending if not self.destroy(t)]
        self.still += len(fresh)
        self.stuck = [t for t in self.stuck if not self.destroy(t)] + fresh
        self.pending = []

    def __call__(self, n):
        for i in range(n):
            self.serial += 1
            tag = self.Tag("py-request-%d" % self.serial)
            with tag:
                handle(i)
            if not self.destroy(tag):
                self.refused += 1
                self.pending.append(tag)
                if len(self.pending) >= PENDING:
                    self.retry()
        self.requests += n


def compare(workload, unit, arms, n, per=1000):
    """Runs each arm once untimed, then the rounds, each cut in SLICES
    slices in which every arm runs n / SLICES times, a different arm first
    each slice: on a shared machine the load moves within a round, and arms
    timed side by side see the same. Prints a row per arm: the median slice,
    and the median of each slice's ratio to arms[0]'s in the same slice.
    Returns the slices' times. arms: [(name, fn)], fn(n) runs n times."""
    n = max(1, n // SLICES)
    for _, fn in arms:
        fn(n)
    t = [[] for _ in arms]
    for s in range(rounds() * SLICES):
        for k in range(len(arms)):
            i = (s + k) % len(arms)
            t[i].append(timed(arms[i][1], n, per))
    for (name, _), v in zip(arms, t):
        ratios = [a / b for a, b in zip(v, t[0])]
        row(workload, name, median(v), unit, median(ratios), min(v), max(v))
    return t


def enter_leave(regionalloc):
    """One `with tag: pass` less one pass of an empty loop, per slice."""
    tag = regionalloc.Tag("py-bench-enter")
    n = scaled(200000, 1000)

    def empty(n):
        for _ in range(n):
            pass

    def entered(n):
        for _ in range(n):
            with tag:
                pass
    t = compare("python: with tag: pass, against an empty loop", "ns/op",
                [("empty loop (baseline)", empty), ("with tag: pass", entered)],
                n, per=1)
    diff = [b - a for a, b in zip(*t)]
    row("python: entering and leaving a tag (with tag: pass less an empty loop)",
        "regionalloc.Tag", median(diff), "ns", None, min(diff), max(diff))


def arms():
    if os.environ.get("PYTHONMALLOC") != "malloc":
        note("python requests: PYTHONMALLOC is not malloc; arms not run")
        return
    try:
        import regionalloc
    except ImportError as e:
        note("python requests: no module regionalloc (%s)" % e)
        return
    if not regionalloc.enabled():
        note("python requests: the library is not this process's allocator")
        return
    if numpy is None:
        note("python requests: numpy not installed; the requests make no array")
    n = scaled(5000, 50)
    lives = Lives(regionalloc)
    compare(WORKLOAD, UNIT,
            [("untagged (baseline)", untagged),
             ("a tag per request (1 of %d tags)" % TAGS, make_tagged(regionalloc)),
             ("tracemalloc on (the anchor)", traced),
             ("a tag created and destroyed per request", lives)], n)
    w = "python: destroys refused (EBUSY), a tag per request"
    for name, count in (("at the request's end", lives.refused),
                        ("after a gc.collect()", lives.still)):
        share = 100.0 * count / lives.requests
        row(w, name, share, "%", None, share, share)
    if lives.collects:
        note("python requests: %d gc.collect() in %d requests of a tag "
             "created and destroyed each" % (lives.collects, lives.requests))
    enter_leave(regionalloc)


# -- the allocators, a process each -------------------------------------------

def allocators(library):
    malloc = {"PYTHONMALLOC": "malloc"}
    configs = [("pymalloc, glibc malloc (baseline)", {}, None),
               ("PYTHONMALLOC=malloc, glibc malloc", malloc, None),
               ("pymalloc, libregionalloc preloaded", {}, library),
               ("PYTHONMALLOC=malloc, libregionalloc preloaded", malloc, library)]
    t = [[] for _ in configs]
    for r in range(rounds()):
        for k in range(len(configs)):
            i = (r + k) % len(configs)
            env = {key: v for key, v in os.environ.items()
                   if key not in ("LD_PRELOAD", "PYTHONMALLOC")}
            env.update(configs[i][1])
            if configs[i][2] is not None:
                env["LD_PRELOAD"] = configs[i][2]
            out = subprocess.run([sys.executable, __file__, "--pass"], env=env,
                                 stdout=subprocess.PIPE, check=True, text=True)
            t[i].append(float(out.stdout))
    w = "python requests, untagged, a process per allocator and round"
    for (name, _, _), v in zip(configs, t):
        ratios = [a / b for a, b in zip(v, t[0])]
        row(w, name, median(v), UNIT, median(ratios), min(v), max(v))


def one_pass():
    n = scaled(5000, 50)
    untagged(n)
    print("%.3f" % timed(untagged, n))


def main(argv):
    if argv[1:2] == ["--pass"]:
        one_pass()
    elif argv[1:2] == ["--allocators"] and len(argv) == 3:
        allocators(argv[2])
    elif len(argv) == 1:
        arms()
    else:
        sys.exit("usage: python_requests.py [--pass | --allocators LIBRARY]")


if __name__ == "__main__":
    main(sys.argv)
