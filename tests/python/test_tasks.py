"""Tags across threads and asyncio tasks, under the library
(tests/test_python.sh).

Every figure is the library's own: a tag's usage().allocated before and
after, against the usable size of the blocks made under it. asyncio runs
each scenario twice on one loop and measures the second run, so that what
asyncio makes once and keeps (a deque's block, a dict grown) does not count.
Nothing waits on time: threads meet at barriers, tasks at events and
`await asyncio.sleep(0)` (a plain yield to the loop).
"""
import asyncio
import contextvars
import errno
import ctypes
import gc
import inspect
import sys
import threading
import types
import unittest

import regionalloc

_process = ctypes.CDLL(None)
_usable_size = _process.malloc_usable_size
_usable_size.argtypes = [ctypes.c_void_p]
_usable_size.restype = ctypes.c_size_t
_tag_of = _process.ra_tag_of
_tag_of.argtypes = [ctypes.c_void_p]
_tag_of.restype = ctypes.c_uint


def usable(obj):
    """The usable size of the block a bytes object lives in: with
    PYTHONMALLOC=malloc a bytes object is one block from malloc, at its
    id()."""
    return _usable_size(id(obj))


def tag_of(obj):
    """The id of the tag that holds a bytes object's block (0: none), from
    the library (ra_tag_of)."""
    return _tag_of(id(obj))


def allocated(tag):
    return tag.usage().allocated


def deltas(tags, before):
    return [allocated(t) - b for t, b in zip(tags, before)]


class Pending:
    """Awaited, it suspends its coroutine once (yields itself)."""

    def __await__(self):
        yield self


def drop(blocks):
    """Frees the blocks a first run kept, keeping the container's size."""
    for key in (blocks.keys() if isinstance(blocks, dict)
                else range(len(blocks))):
        blocks[key] = None


class StackCase(unittest.TestCase):
    def setUp(self):
        self.assertTrue(regionalloc.enabled(), "run under the library")
        self.assertIsNone(regionalloc.current())
        self.assertEqual(regionalloc._stack_depth(), 0)

    def tearDown(self):
        # Whatever a test did, it left this thread's stack empty.
        self.assertIsNone(regionalloc.current())
        self.assertEqual(regionalloc._stack_depth(), 0)


class Threads(StackCase):
    def test_two_threads_each_allocate_in_their_own_tag_at_once(self):
        tags = [regionalloc.Tag("py-thread-0"), regionalloc.Tag("py-thread-1")]
        sizes = [300_000, 500_000]
        both_in, both_done = threading.Barrier(2), threading.Barrier(2)
        # With the main thread: it reads the figures between ready and go,
        # and after done. Each thread frees its own blocks, in two rounds
        # (the first makes what a thread makes once), and lives on until
        # the end, so that every figure is of live threads' own frees.
        ready, go, done, end = (threading.Barrier(3) for _ in range(4))
        blocks = [None, None]
        seen = [None, None]
        errors = []

        def worker(i):
            try:
                for _ in range(2):
                    blocks[i] = None
                    ready.wait()
                    go.wait()
                    with tags[i]:
                        both_in.wait()   # both threads are in their tags
                        blocks[i] = bytes(sizes[i])
                        seen[i] = regionalloc.current()
                        both_done.wait()  # neither leaves before both made theirs
                    done.wait()
                end.wait()
                blocks[i] = None
            except BaseException as e:  # reported below, barriers broken
                errors.append(e)
                for barrier in (ready, go, done, end):
                    barrier.abort()

        threads = [threading.Thread(target=worker, args=(i,))
                   for i in range(2)]
        for t in threads:
            t.start()
        try:
            for _ in range(2):
                ready.wait()
                before = [allocated(t) for t in tags]
                go.wait()
                done.wait()
                grown = deltas(tags, before)
            made = [usable(blocks[0]), usable(blocks[1])]
            end.wait()
        except BaseException:
            for barrier in (ready, go, done, end):
                barrier.abort()
            raise
        finally:
            for t in threads:
                t.join()
        self.assertEqual(errors, [])
        self.assertEqual(seen, tags)
        self.assertEqual(grown, made)

    def test_a_thread_starts_with_an_empty_stack(self):
        seen = []
        with regionalloc.Tag("py-thread-parent"):
            t = threading.Thread(target=lambda: seen.append(
                (regionalloc.current(), regionalloc._stack_depth())))
            t.start()
            t.join()
        self.assertEqual(seen, [(None, 0)])


async def settle():
    """Lets the loop drop what it holds of finished tasks (a finished
    task lives on in the handle that wakes its awaiter, one turn more)."""
    for _ in range(3):
        await asyncio.sleep(0)


def run_twice(scenario, *, follow=True):
    """Runs scenario() twice on one loop, every task followed (the first
    one too) unless follow is false, and returns the second run's result."""
    with asyncio.Runner() as runner:
        if follow:
            regionalloc.follow_tasks(runner.get_loop())
        runner.run(scenario())
        return runner.run(scenario())


class Interleaved(StackCase):
    """Tasks on one thread interleave inside their tags."""

    def setUp(self):
        super().setUp()
        self.a = regionalloc.Tag("py-task-a")
        self.b = regionalloc.Tag("py-task-b")
        self.c = regionalloc.Tag("py-task-c")

    def test_each_tag_holds_exactly_its_own_tasks_block(self):
        a, b = self.a, self.b
        # Keys made before, so that storing a block never grows the dicts.
        blocks = dict.fromkeys("abc")
        seen = dict.fromkeys("abc")
        ends = dict.fromkeys("ab")

        async def task_a(b_in, a_done):
            with a:
                await b_in.wait()         # task_b runs, inside b
                blocks["a"] = bytes(70_000)
                seen["a"] = regionalloc.current()
            a_done.set()

        async def task_b(b_in, a_done):
            with b:
                blocks["b"] = bytes(130_000)
                b_in.set()
                await a_done.wait()       # task_a resumes while b is entered
                seen["b"] = regionalloc.current()

        async def task_c(b_in):
            await b_in.wait()
            blocks["c"] = bytes(250_000)  # under neither tag
            seen["c"] = regionalloc.current()

        async def scenario():
            b_in, a_done = asyncio.Event(), asyncio.Event()
            drop(blocks)
            before = [allocated(a), allocated(b)]
            await asyncio.gather(task_a(b_in, a_done), task_b(b_in, a_done),
                                 task_c(b_in))
            await settle()
            ends["a"], ends["b"] = deltas([a, b], before)
            return regionalloc.current(), regionalloc._stack_depth()

        self.assertEqual(run_twice(scenario), (None, 0))
        self.assertEqual(seen, {"a": a, "b": b, "c": None})
        self.assertEqual(ends, {"a": usable(blocks["a"]),
                                "b": usable(blocks["b"])})

    def test_tags_nest_across_awaits(self):
        a, b = self.a, self.b
        blocks = [None] * 3
        watched = [None] * 6
        sizes = {}

        async def nested():
            with a:
                blocks[0] = bytes(40_000)
                await asyncio.sleep(0)
                with b:
                    await asyncio.sleep(0)
                    blocks[1] = bytes(90_000)
                    await asyncio.sleep(0)
                await asyncio.sleep(0)
                blocks[2] = bytes(160_000)

        async def watcher():
            for i in range(len(watched)):
                watched[i] = (regionalloc.current(),
                              regionalloc._stack_depth())
                await asyncio.sleep(0)

        async def scenario():
            drop(blocks)
            before = [allocated(a), allocated(b)]
            await asyncio.gather(nested(), watcher())
            await settle()
            sizes["a"], sizes["b"] = deltas([a, b], before)

        run_twice(scenario)
        self.assertEqual(watched, [(None, 0)] * len(watched))
        self.assertEqual(sizes, {"a": usable(blocks[0]) + usable(blocks[2]),
                                 "b": usable(blocks[1])})

    def test_an_exception_leaves_the_tag_it_was_raised_in(self):
        a, b = self.a, self.b
        seen = {}

        async def failing():
            with a:
                await asyncio.sleep(0)
                with b:
                    raise KeyError("in b")

        async def bystander(done):
            with self.c:
                await done.wait()
                seen["bystander"] = regionalloc.current()

        async def scenario():
            done = asyncio.Event()
            other = asyncio.create_task(bystander(done))
            with self.assertRaises(KeyError):
                await asyncio.create_task(failing())
            seen["after"] = (regionalloc.current(), regionalloc._stack_depth())
            done.set()
            await other

        run_twice(scenario)
        self.assertEqual(seen, {"bystander": self.c, "after": (None, 0)})

    def test_a_cancelled_task_runs_its_handlers_in_its_tags(self):
        a = self.a
        blocks = [None]
        seen = dict.fromkeys(["handler", "canceller"])
        sizes = {}

        async def cancelled():
            with a:
                try:
                    await asyncio.Event().wait()  # never set
                except asyncio.CancelledError:
                    seen["handler"] = regionalloc.current()
                    blocks[0] = bytes(60_000)
                    raise

        async def scenario():
            drop(blocks)
            before = allocated(a)
            task = asyncio.create_task(cancelled())
            await asyncio.sleep(0)           # task waits inside a
            seen["canceller"] = regionalloc.current()
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            del task
            await settle()
            sizes["a"] = allocated(a) - before

        run_twice(scenario)
        self.assertEqual(seen, {"handler": a, "canceller": None})
        self.assertEqual(sizes, {"a": usable(blocks[0])})

    def test_gather_and_task_groups_run_children_in_their_own_tags(self):
        # A task made inside a tag makes asyncio's records of it there too
        # (the set of all tasks grows, now and then): a's blocks are told
        # by the library's tag of each, b's and c's by their totals.
        a, b, c = self.a, self.b, self.c
        blocks = dict.fromkeys(["b", "c", "b-untagged", "c-untagged"])
        sizes = {}

        async def in_b(b_in, c_done):
            blocks["b-untagged"] = bytes(20_000)  # inherited: in a
            with b:
                b_in.set()
                await c_done.wait()
                blocks["b"] = bytes(50_000)

        async def in_c(b_in, c_done):
            with c:
                await b_in.wait()
                blocks["c"] = bytes(110_000)
                c_done.set()
                await asyncio.sleep(0)
            blocks["c-untagged"] = bytes(30_000)

        async def with_gather():
            b_in, c_done = asyncio.Event(), asyncio.Event()
            with a:
                await asyncio.gather(in_b(b_in, c_done), in_c(b_in, c_done))

        async def with_group():
            b_in, c_done = asyncio.Event(), asyncio.Event()
            with a:
                async with asyncio.TaskGroup() as group:
                    group.create_task(in_b(b_in, c_done))
                    group.create_task(in_c(b_in, c_done))

        for run in (with_gather, with_group):
            async def scenario(run=run):
                drop(blocks)
                before = [allocated(b), allocated(c)]
                await run()
                await settle()
                sizes[run.__name__] = deltas([b, c], before)

            run_twice(scenario)
            self.assertEqual(sizes[run.__name__],
                             [usable(blocks["b"]), usable(blocks["c"])],
                             run.__name__)
            self.assertEqual([tag_of(blocks[k]) for k in blocks],
                             [b.id, c.id, a.id, a.id], run.__name__)


class Values(StackCase):
    """A followed coroutine returns, raises and closes as a coroutine."""

    def test_return_values_pass_through_a_task(self):
        values = [None, (1, 2), (), ((1,),), StopIteration(3), [4]]

        async def give(value):
            with regionalloc.Tag("py-values"):
                await asyncio.sleep(0)
                return value

        async def scenario():
            return [await asyncio.create_task(give(v)) for v in values]

        results = run_twice(scenario)
        self.assertEqual(len(results), len(values))
        for value, result in zip(values, results):
            self.assertIs(result, value)

    def test_send_raises_stop_iteration_with_the_value_itself(self):
        tag = regionalloc.Tag("py-values")

        @tag
        async def give(value):
            return value

        for value in [None, (1, 2), (), ((5,),)]:
            coro = give(value)
            with self.assertRaises(StopIteration) as caught:
                coro.send(None)
            self.assertEqual(caught.exception.value, value)

    def test_close_runs_finally_blocks_in_the_coroutines_tags(self):
        tag, inner = regionalloc.Tag("py-close"), regionalloc.Tag("py-inner")
        seen = []

        @tag
        async def suspended():
            with inner:
                try:
                    await Pending()
                finally:
                    seen.append((regionalloc.current(),
                                 regionalloc._stack_depth()))

        coro = suspended()
        coro.send(None)
        self.assertEqual(regionalloc._stack_depth(), 0)
        coro.close()
        self.assertEqual(seen, [(inner, 2)])

    def test_a_step_that_cannot_enter_its_tags_raises_and_changes_nothing(self):
        tag, inner = regionalloc.Tag("py-deep"), regionalloc.Tag("py-deep-in")
        below = [regionalloc.Tag(f"py-deep-{i}") for i in range(63)]
        steps = []

        @tag
        async def suspended():
            with inner:
                steps.append(1)
                await Pending()
                steps.append(2)

        coro = suspended()
        try:
            for t in below[:62]:
                t.__enter__()
            coro.send(None)              # tag and inner on top: stack full
            below[62].__enter__()        # room for tag again, not for inner
            with self.assertRaises(OSError) as caught:
                coro.send(None)
            self.assertEqual(caught.exception.errno, errno.EOVERFLOW)
            self.assertEqual(steps, [1])  # the coroutine did not run
            self.assertIs(regionalloc.current(), below[62])
            self.assertEqual(regionalloc._stack_depth(), 63)
        finally:
            for t in reversed(below):
                if regionalloc.current() is t:
                    t.__exit__(None, None, None)
        coro.close()                     # its with block leaves inner
        self.assertIsNone(coro.cr_frame)  # closed: it ended

    def test_a_coroutine_collected_while_suspended_leaves_its_tags(self):
        tag, inner = regionalloc.Tag("py-gc"), regionalloc.Tag("py-gc-inner")
        seen = []
        unraisable = []

        @tag
        async def suspended(box):  # a cycle when box holds the coroutine
            with inner:
                try:
                    await Pending()
                finally:
                    seen.append(regionalloc.current())

        old_hook = sys.unraisablehook
        sys.unraisablehook = unraisable.append
        try:
            coro = suspended(None)
            coro.send(None)
            del coro                 # no cycle: freed at once
            box = []
            coro = suspended(box)
            box.append(coro)
            coro.send(None)
            del coro, box            # a cycle: the collector frees it
            gc.collect()
        finally:
            sys.unraisablehook = old_hook
        self.assertEqual(unraisable, [])
        self.assertEqual(seen, [inner, inner])

    def test_a_task_collected_while_pending_leaves_its_tags(self):
        tag = regionalloc.Tag("py-gc-task")
        seen = dict.fromkeys(["finally", "handler"])
        blocks = [None]

        async def pending(event):
            with tag:
                try:
                    await event.wait()   # never set
                finally:
                    seen["finally"] = regionalloc.current()
                    blocks[0] = bytes(45_000)

        async def scenario():
            loop = asyncio.get_running_loop()
            loop.set_exception_handler(
                lambda loop, context: seen.__setitem__(
                    "handler", context["message"]))
            drop(blocks)
            before = allocated(tag)
            asyncio.create_task(pending(asyncio.Event()))
            await asyncio.sleep(0)       # it waits inside tag
            gc.collect()                 # task, event and coroutine: a cycle
            return allocated(tag) - before

        self.assertEqual(run_twice(scenario), usable(blocks[0]))
        self.assertEqual(seen["finally"], tag)
        self.assertIn("destroyed but it is pending", seen["handler"])


class Decorated(StackCase):
    """An async function decorated with a tag."""

    def setUp(self):
        super().setUp()
        self.d = regionalloc.Tag("py-decorated")

    def decorated(self, blocks, seen):
        @regionalloc.tag("py-decorated")
        async def work(size):
            """Makes a block of size in two steps."""
            seen["first step"] = regionalloc.current()
            await asyncio.sleep(0)
            blocks["work"] = bytes(size)
            return size
        return work

    def scenario(self, work, blocks, seen, sizes):
        async def other():
            await asyncio.sleep(0)       # work is suspended now
            seen["other"] = regionalloc.current()
            blocks["other"] = bytes(80_000)

        async def scenario():
            drop(blocks)
            before = allocated(self.d)
            results = await asyncio.gather(work(70_000), other())
            await settle()
            sizes["d"] = allocated(self.d) - before
            return results[0]
        return scenario

    def check(self, follow):
        blocks = dict.fromkeys(["work", "other"])
        seen = dict.fromkeys(["first step", "other"])
        sizes = {}
        work = self.decorated(blocks, seen)
        result = run_twice(self.scenario(work, blocks, seen, sizes),
                           follow=follow)
        self.assertEqual(result, 70_000)
        self.assertEqual(seen, {"first step": self.d, "other": None})
        self.assertEqual(sizes, {"d": usable(blocks["work"])})

    def test_the_tag_applies_while_the_coroutine_runs_without_follow(self):
        self.check(follow=False)

    def test_the_tag_applies_while_the_coroutine_runs_with_follow(self):
        self.check(follow=True)

    def test_awaited_inside_another_tag_it_nests_and_leaves(self):
        a = regionalloc.Tag("py-task-a")
        seen = []

        @regionalloc.tag("py-decorated")
        async def inside():
            seen.append((regionalloc.current(), regionalloc._stack_depth()))
            await asyncio.sleep(0)
            seen.append((regionalloc.current(), regionalloc._stack_depth()))

        async def scenario():
            seen.clear()
            with a:
                await inside()
                seen.append((regionalloc.current(),
                             regionalloc._stack_depth()))
                await asyncio.create_task(inside())  # inherits a

        run_twice(scenario)
        self.assertEqual(seen, [(self.d, 2), (self.d, 2), (a, 1),
                                (self.d, 2), (self.d, 2)])

    def test_it_looks_like_the_function_it_decorates(self):
        blocks, seen = {}, {}
        work = self.decorated(blocks, seen)
        self.assertEqual(work.__name__, "work")
        self.assertEqual(work.__doc__, "Makes a block of size in two steps.")
        self.assertTrue(inspect.iscoroutinefunction(work))
        self.assertTrue(asyncio.iscoroutinefunction(work))
        self.assertEqual(str(inspect.signature(work)), "(size)")
        coro = work(1)
        self.assertTrue(asyncio.iscoroutine(coro))
        self.assertEqual(coro.__qualname__, work.__wrapped__.__qualname__)
        coro.close()

        class Owner:
            @regionalloc.tag("py-decorated")
            async def method(self, x):
                return self, x

        owner = Owner()
        with self.assertRaises(StopIteration) as caught:
            owner.method(5).send(None)
        self.assertEqual(caught.exception.value, (owner, 5))


class Inherited(StackCase):
    """A task inherits the tags entered around its creation."""

    def test_a_child_runs_in_its_creators_tags_once_each(self):
        a, b = regionalloc.Tag("py-task-a"), regionalloc.Tag("py-task-b")
        seen = dict.fromkeys(["child", "orphan"])
        blocks = [None]

        async def child():
            await asyncio.sleep(0)       # its creator has left a and b now
            seen["child"] = (regionalloc.current(), regionalloc._stack_depth())
            blocks[0] = bytes(55_000)

        async def orphan():
            seen["orphan"] = (regionalloc.current(),
                              regionalloc._stack_depth())

        async def scenario():
            with a:
                with b:
                    task = asyncio.create_task(child())
            other = asyncio.create_task(orphan())
            await task
            await other

        run_twice(scenario)
        self.assertEqual(seen, {"child": (b, 2), "orphan": (None, 0)})
        self.assertEqual(tag_of(blocks[0]), b.id)

    def test_tags_entered_around_the_loop_are_under_every_task(self):
        outer, a = regionalloc.Tag("py-outer"), regionalloc.Tag("py-task-a")
        seen = []

        async def task():
            with a:
                await asyncio.sleep(0)
                seen.append((regionalloc.current(),
                             regionalloc._stack_depth()))

        async def scenario():
            seen.clear()
            await asyncio.gather(task(), task())
            seen.append((regionalloc.current(), regionalloc._stack_depth()))

        with outer:
            run_twice(scenario)
            self.assertEqual(seen, [(a, 2), (a, 2), (outer, 1)])
            self.assertIs(regionalloc.current(), outer)


class FollowTasks(StackCase):
    """follow_tasks() itself."""

    def test_without_a_running_loop_it_says_what_to_do(self):
        with self.assertRaisesRegex(RuntimeError,
                                    r"no event loop is running.*"
                                    r"follow_tasks\(loop\)"):
            regionalloc.follow_tasks()

    def test_it_follows_the_running_loop_but_not_the_calling_task(self):
        a = regionalloc.Tag("py-task-a")
        seen = {}

        async def observer():
            seen["observer"] = regionalloc.current()

        async def main():
            regionalloc.follow_tasks()
            other = asyncio.create_task(observer())
            # main was made before follow_tasks: its tag stays on the
            # thread's stack while it awaits, and other runs under it.
            with a:
                await other
            seen["main factory"] = type(
                asyncio.get_running_loop().get_task_factory()).__name__
            seen["main coro"] = type(asyncio.current_task().get_coro())
            seen["other coro"] = type(other.get_coro()).__name__

        asyncio.run(main())
        self.assertEqual(seen, {"observer": a, "main factory": "TaskFactory",
                                "main coro": types.CoroutineType,
                                "other coro": "TaggedCoroutine"})

    def test_a_factory_already_set_is_kept_and_called_once(self):
        a = regionalloc.Tag("py-task-a")
        calls = []
        seen = {}

        def recording(loop, coro, **kwargs):
            calls.append((type(coro).__name__, sorted(kwargs)))
            return asyncio.Task(coro, loop=loop, **kwargs)

        async def tagged():
            with a:
                await asyncio.sleep(0)

        async def observer():
            seen["observer"] = regionalloc.current()

        async def scenario():
            loop = asyncio.get_running_loop()
            calls.clear()
            first = asyncio.create_task(tagged(), name="named")
            second = loop.create_task(observer(),
                                      context=contextvars.copy_context())
            await asyncio.gather(first, second)
            seen["name"] = first.get_name()
            seen["calls"] = list(calls)

        with asyncio.Runner() as runner:
            loop = runner.get_loop()
            loop.set_task_factory(recording)
            regionalloc.follow_tasks(loop)
            factory = loop.get_task_factory()
            regionalloc.follow_tasks(loop)     # a second time: no change
            self.assertIs(loop.get_task_factory(), factory)
            runner.run(scenario())
        self.assertEqual(seen, {"observer": None, "name": "named", "calls": [
            ("TaggedCoroutine", []), ("TaggedCoroutine", ["context"])]})

    def test_a_task_is_wrapped_once_and_shows_its_coroutine(self):
        shown = {}

        async def waiting(event):
            with regionalloc.Tag("py-task-a"):
                await event.wait()

        async def scenario():
            regionalloc.follow_tasks()          # again: nothing changes
            event = asyncio.Event()
            task = asyncio.create_task(waiting(event))
            await asyncio.sleep(0)
            shown["repr"] = repr(task)
            shown["stack"] = [f.f_code.co_name for f in task.get_stack()]
            shown["coro"] = repr(task.get_coro())
            shown["iscoroutine"] = asyncio.iscoroutine(task.get_coro())
            event.set()
            await task

        run_twice(scenario)
        self.assertIn("waiting() running at", shown["repr"])
        self.assertEqual(shown["stack"], ["waiting"])
        self.assertEqual(shown["coro"].count("TaggedCoroutine"), 1)
        self.assertTrue(shown["iscoroutine"])


class Destroy(StackCase):
    """Tag.destroy() refuses a tag a coroutine will enter again: a
    suspended task inside it, a task not yet run that inherits it, a
    decorated coroutine; and a decorator never enters a destroyed tag.
    What the coroutines allocate goes to a scratch tag entered above the
    tag, so that the tag holds no block: the library alone would destroy
    it."""

    def setUp(self):
        super().setUp()
        self.scratch = regionalloc.Tag("py-scratch")

    def refused(self, tag, where):
        """Asserts that tag.destroy() raises OSError EBUSY, saying where
        the tag is entered, and changes nothing."""
        with self.assertRaises(OSError) as caught:
            tag.destroy()
        self.assertEqual(caught.exception.errno, errno.EBUSY)
        self.assertIn("cannot be destroyed: it is entered and not left "
                      f"({where} that enter it again", str(caught.exception))
        self.assertIs(regionalloc.Tag(tag.name), tag)

    def test_a_suspended_task_inside_a_tag_refuses_its_destroy(self):
        tag = regionalloc.Tag("py-doomed-task")
        release = [False]

        # Bound before: `with tag, self.scratch:` would make the bound
        # __exit__ of the scratch tag under the tag.
        enter, leave = self.scratch.__enter__, self.scratch.__exit__

        async def holder():
            with tag:
                enter()
                while not release[0]:
                    await asyncio.sleep(0)
                leave(None, None, None)

        async def scenario():
            release[0] = False
            task = asyncio.create_task(holder())
            await asyncio.sleep(0)      # holder is inside tag, suspended
            self.assertEqual(regionalloc._stack_depth(), 0)
            self.refused(tag, "0 in this thread, 0 in other threads, "
                              "1 in coroutines")
            release[0] = True
            await task

        run_twice(scenario)
        tag.destroy()

    def test_a_task_not_yet_run_refuses_the_tags_it_inherits(self):
        tag = regionalloc.Tag("py-doomed-inherited")
        seen = []

        async def child():
            seen.append(regionalloc.current())

        async def warm():
            # What asyncio makes once and keeps, made outside the tag.
            await asyncio.create_task(child())

        enter, leave = self.scratch.__enter__, self.scratch.__exit__

        async def scenario():
            with tag:
                enter()
                task = asyncio.create_task(child())
                leave(None, None, None)
            self.refused(tag, "0 in this thread, 0 in other threads, "
                              "1 in coroutines")
            await task

        with asyncio.Runner() as runner:
            regionalloc.follow_tasks(runner.get_loop())
            runner.run(warm())
            runner.run(scenario())
        self.assertEqual(seen, [None, self.scratch])
        # The task has run and ended: nothing holds the tag any more.
        tag.destroy()

    def test_a_decorated_coroutine_holds_its_tag_until_it_ends(self):
        tag = regionalloc.Tag("py-doomed-decorated")

        @tag
        async def work():
            return regionalloc.current()

        coro = work()
        self.refused(tag, "0 in this thread, 0 in other threads, "
                          "1 in coroutines")
        with self.assertRaises(StopIteration) as caught:
            coro.send(None)
        self.assertIs(caught.exception.value, tag)
        # Made and closed unstarted, it holds the tag no more. It is kept
        # alive past the destroy: freeing it would release the tag too.
        closed = work()
        closed.close()
        gc.collect()
        tag.destroy()
        del closed
        # Its id goes to one of the next two tags; the decorator still
        # names the destroyed tag and never enters the successor.
        successors = [regionalloc.Tag("py-successor-1"),
                      regionalloc.Tag("py-successor-2")]
        self.assertIn(tag.id, [t.id for t in successors])
        with self.assertRaisesRegex(ValueError, "'py-doomed-decorated' was "
                                                "destroyed"):
            work()
        for successor in successors:
            successor.destroy()


if __name__ == "__main__":
    unittest.main()
