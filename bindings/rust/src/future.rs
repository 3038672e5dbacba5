//! in_tag: a future's allocations in a tag, whichever thread polls it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::Tag;

/// The future of [`in_tag`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct InTag<F> {
    tag: Tag,
    fut: F,
}

/// Wraps `fut` so that the tag is pushed around each of its polls and
/// popped after (a panic in a poll included): a task that an executor
/// moves between threads allocates under the tag on every thread, and no
/// thread is left with the tag pushed between polls. Polling panics, as
/// [`Tag::enter`] does, if the tag was destroyed or the thread's stack is
/// full. What the future's destructor allocates is not tagged.
pub fn in_tag<F: Future>(tag: Tag, fut: F) -> InTag<F> {
    InTag { tag, fut }
}

impl<F> InTag<F> {
    /// The tag pushed around each poll.
    pub fn tag(&self) -> Tag {
        self.tag
    }
}

impl<F: Future> Future for InTag<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let tag = self.tag;
        // SAFETY: fut is structurally pinned. InTag never moves it out of a
        // pinned InTag nor hands out `&mut F`, has no Drop impl, and is
        // Unpin only when F is (the auto trait, not a manual impl).
        let fut = unsafe { self.map_unchecked_mut(|s| &mut s.fut) };
        let _guard = tag.enter();
        fut.poll(cx)
    }
}
