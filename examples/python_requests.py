"""A request loop and a cache, each under a tag of its own: regionalloc's
Python module at work (doc/python.md walks through it and its output).

Requests come as JSON bodies. Each is served under the tag "requests":
parsed, answered from a cache of rendered pages, or rendered and put in the
cache. The cache is a least-recently-used dict of at most --entries pages,
and every entry (its key, its page, its place in the dict) is made under
the tag "cache": a block counts in the tag that was on top when it was
made, wherever it is kept afterwards. With numpy installed, a "model" (a
2 MiB array of weights) is loaded under a tag of its own at start and
scores every page. All three tags are children of "app", and a checkpoint
marks the model loaded and the requests served.

Run it with the library as the process's allocator:

    regionalloc run -- /usr/bin/python3 examples/python_requests.py

or by hand: LD_PRELOAD=<build>/.libs/libregionalloc.so PYTHONMALLOC=malloc
PYTHONPATH=<build>/bindings/python /usr/bin/python3 ... It serves
--requests requests (default 20000), then prints each tag's figures, and
again after gc.collect(), which empties CPython's free lists; then the
library's report (--report-format text, json or prometheus). --seconds S
serves for S seconds instead, for a look at its dashboard meanwhile
(regionalloc run --http). Exit status: 0 done, 1 when the library is not
the process's allocator, 2 bad usage."""

import argparse
import collections
import gc
import json
import sys
import time

import regionalloc

try:
    import numpy
except ImportError:
    numpy = None

app = regionalloc.Tag("app")
requests = regionalloc.Tag("requests", parent=app)
cache = regionalloc.Tag("cache", parent=app)
model = regionalloc.Tag("model", parent=app) if numpy is not None else None

USERS = 400
KEYS = USERS * 10       # (user, page) pairs a request may ask for


class Cache:
    """A least-recently-used dict of rendered pages, all of it the cache
    tag's: entries are made under it, and the dict grows under it."""

    def __init__(self, entries):
        self.entries = entries
        with cache:
            self.pages = collections.OrderedDict()
        self.hits = self.misses = 0

    def get(self, user, page):
        key = "%s/%d" % (user, page)
        found = self.pages.get(key)
        if found is not None:
            self.pages.move_to_end(key)
            self.hits += 1
        return found

    def put(self, user, page, render):
        """Renders the page under the cache's tag and keeps it: the key is
        a new string, so that no block of the request stays in the cache."""
        self.misses += 1
        with cache:
            text = render()
            self.pages["%s/%d" % (user, page)] = text
            if len(self.pages) > self.entries:
                self.pages.popitem(last=False)
        return text


def load_model():
    with model:
        return numpy.random.default_rng(7).standard_normal((512, 512))


def render(req, weights):
    rows = [{"item": k, "title": "%s's item %d" % (req["user"], k),
             "words": req["words"][k % len(req["words"]):]} for k in range(12)]
    score = 0.0
    if weights is not None:
        score = float(weights[req["page"] % 512, :64].sum())
    return json.dumps({"user": req["user"], "page": req["page"],
                       "rows": rows, "score": score}).encode()


def body(i):
    """Request i's body: a (user, page) pair drawn so that a few are asked
    for often and most seldom, as a cache sees them."""
    h = (i * 2654435761 % (1 << 32)) / (1 << 32)
    k = int(KEYS * h ** 4)
    return json.dumps({"user": "user-%d" % (k % USERS), "page": k // USERS,
                       "words": ["alpha", "beta", "gamma", "delta"]})


def serve(lru, weights, i):
    with requests:
        req = json.loads(body(i))
        page = lru.get(req["user"], req["page"])
        if page is None:
            page = lru.put(req["user"], req["page"],
                           lambda: render(req, weights))
        return len(page)


def figures(label):
    print(label)
    for t in (app, requests, cache, model):
        if t is None:
            continue
        u = t.usage(tree=(t is app))
        print("  %-9s allocated %10d B  live blocks %6d  nmalloc %8d" %
              (t.name + (" (tree)" if t is app else ""), u.allocated,
               u.nmalloc - u.ndalloc, u.nmalloc))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--entries", type=int, default=2000,
                    help="pages the cache keeps (default 2000)")
    ap.add_argument("--seconds", type=float, default=0,
                    help="serve for this long instead of --requests")
    ap.add_argument("--report-format", default="text",
                    choices=("text", "json", "prometheus"))
    args = ap.parse_args()
    if args.requests < 0 or args.entries < 1:
        ap.error("--requests must be >= 0 and --entries >= 1")
    if not regionalloc.enabled():
        print("python_requests: libregionalloc is not this process's "
              "allocator: run it with `regionalloc run -- python3 ...`",
              file=sys.stderr)
        return 1
    cache.set_limit(64 << 20)
    weights = load_model() if model is not None else None
    regionalloc.checkpoint("model loaded")
    lru = Cache(args.entries)
    served = 0
    end = time.monotonic() + args.seconds
    while (served < args.requests if not args.seconds
           else time.monotonic() < end):
        serve(lru, weights, served)
        served += 1
    regionalloc.checkpoint("requests served")
    print("served %d requests: %d from the cache, %d rendered; "
          "the cache holds %d pages of %d bytes" %
          (served, lru.hits, lru.misses, len(lru.pages),
           sum(len(p) for p in lru.pages.values())))
    figures("tags after the requests:")
    gc.collect()
    figures("after gc.collect():")
    print()
    sys.stdout.write(regionalloc.report(args.report_format, detail=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
