//! in_tag under a small executor whose threads take turns polling one task.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;

use super::fresh_tag;
use crate::{current_tag, in_tag, Tag};

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The run queue and whose turn it is: worker `turn % workers` polls next,
/// so consecutive polls of the task happen on different threads.
struct Queue {
    ready: VecDeque<Arc<Task>>,
    turn: usize,
    done: bool,
}

struct Executor {
    queue: Mutex<Queue>,
    wakeup: Condvar,
}

struct Task {
    future: Mutex<Option<BoxFuture>>,
    executor: Arc<Executor>,
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        let executor = self.executor.clone();
        executor.queue.lock().unwrap().ready.push_back(self);
        executor.wakeup.notify_all();
    }
}

/// Polls ready tasks on its turn until the task is done; returns the number
/// of polls it made and whether its thread's current tag is, at the end,
/// what it was at the start (none was left pushed).
fn worker(executor: Arc<Executor>, me: usize, workers: usize) -> (usize, bool) {
    let base = current_tag();
    let mut polls = 0;
    loop {
        let task = {
            let mut q = executor.queue.lock().unwrap();
            loop {
                if q.done {
                    return (polls, current_tag() == base);
                }
                if q.turn % workers == me && !q.ready.is_empty() {
                    q.turn += 1;
                    break q.ready.pop_front().unwrap();
                }
                q = executor.wakeup.wait(q).unwrap();
            }
        };
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let mut slot = task.future.lock().unwrap();
        if let Some(fut) = slot.as_mut() {
            polls += 1;
            if fut.as_mut().poll(&mut cx).is_ready() {
                *slot = None;
                executor.queue.lock().unwrap().done = true;
            }
        }
        drop(slot);
        executor.wakeup.notify_all();
    }
}

/// Pending once, waking itself at once: the next poll comes from the
/// executor's next worker.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn a_task_polled_by_several_threads_allocates_under_its_tag_on_each() {
    let tag = fresh_tag("in-tag");
    const STEPS: usize = 24;
    const WORKERS: usize = 4;
    let checks = Arc::new(Mutex::new(Vec::new()));
    let seen = checks.clone();
    // Checked after the run: a panic inside a poll would leave the other
    // workers waiting.
    let kept_tagged = Arc::new(AtomicBool::new(false));
    let kept_flag = kept_tagged.clone();
    let body = async move {
        let mut kept = Vec::new();
        for _ in 0..STEPS {
            let b = Box::new([0u8; 256]);
            let owner = Tag::of(&*b);
            let on = thread::current().id();
            seen.lock().unwrap().push((owner, current_tag(), on));
            kept.push(b);
            YieldNow(false).await;
        }
        // Held across awaits and polls on other threads: still the tag's.
        kept_flag.store(
            kept.iter().all(|b| Tag::of(&**b) == Some(tag)),
            Ordering::SeqCst,
        );
    };

    let executor = Arc::new(Executor {
        queue: Mutex::new(Queue {
            ready: VecDeque::new(),
            turn: 0,
            done: false,
        }),
        wakeup: Condvar::new(),
    });
    let task = Arc::new(Task {
        future: Mutex::new(Some(Box::pin(in_tag(tag, body)))),
        executor: executor.clone(),
    });
    let workers: Vec<_> = (0..WORKERS)
        .map(|me| {
            let e = executor.clone();
            thread::spawn(move || worker(e, me, WORKERS))
        })
        .collect();
    Waker::from(task).wake();

    let mut total_polls = 0;
    for w in workers {
        let (polls, clean) = w.join().unwrap();
        assert!(polls > 0, "every worker polled the task");
        assert!(clean, "a worker kept a tag pushed after its polls");
        total_polls += polls;
    }
    assert_eq!(total_polls, STEPS + 1);
    assert!(
        kept_tagged.load(Ordering::SeqCst),
        "blocks held across polls left the tag"
    );
    let checks = checks.lock().unwrap();
    assert_eq!(checks.len(), STEPS);
    for (owner, current, _) in checks.iter() {
        assert_eq!(*owner, Some(tag));
        assert_eq!(*current, Some(tag));
    }
    let threads: std::collections::HashSet<_> = checks.iter().map(|c| c.2).collect();
    assert_eq!(threads.len(), WORKERS, "the polls ran on every worker");
}
