//! Tags: creation and lookup, the thread's tag stack, usage figures,
//! lifetime (reset, destroy) and budgets.

use std::ffi::CStr;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::num::NonZeroU32;
use std::os::raw::{c_char, c_void};
use std::ptr;

use crate::ffi::{self, check, einval};

/// A memory category of the process: a tag of libregionalloc.
///
/// A `Tag` is the tag's id (`ra_tag_t`), never 0 (untagged memory is
/// `None` wherever a tag may be missing). Ids are process-wide and copied
/// freely; a destroyed tag's id serves a later [`Tag::create`], so a copy
/// kept past [`Tag::destroy`] names whichever tag has the id then.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Tag(NonZeroU32);

/// Usage figures of one tag, as `ra_tag_stats_t` (see "Figures" in
/// regionalloc(3)): read live, with no refresh of jemalloc's statistics.
///
/// `allocated` is exact at any moment (the sum of the usable sizes of the
/// tag's live blocks), with no [`thread_flush`]: a block free in a cache
/// is not counted.
/// The layout is `ra_tag_stats_t`'s, field for field: the C call fills it.
#[repr(C)]
#[derive(Copy, Clone, Default, PartialEq, Eq, Hash, Debug)]
pub struct TagStats {
    /// Bytes in live blocks (usable sizes).
    pub allocated: usize,
    /// Bytes in pages holding live blocks or blocks free in a cache.
    pub active: usize,
    /// jemalloc's estimate of the resident bytes, read live: at most
    /// `mapped` (the kernel's figure is [`Tag::rss`]).
    pub resident: usize,
    /// Bytes mapped (committed) in the tag's region.
    pub mapped: usize,
    /// Unused pages not yet returned to the OS.
    pub dirty: usize,
    /// Unused pages advised lazily free, not yet returned.
    pub muzzy: usize,
    /// Virtual memory kept for reuse, not resident.
    pub retained: usize,
    /// The size of the tag's region.
    pub reserved: usize,
    /// Allocations ever made under the tag.
    pub nmalloc: u64,
    /// Frees ever made of the tag's blocks.
    pub ndalloc: u64,
    /// The highest `mapped` the tag's region has had.
    pub peak_mapped: usize,
}

/// The figures the library keeps itself for a tag, as `ra_tag_usage_t`:
/// exact at any moment and cheap (no call into jemalloc), what a summary
/// per request needs.
/// The layout is `ra_tag_usage_t`'s, field for field: the C call fills it.
#[repr(C)]
#[derive(Copy, Clone, Default, PartialEq, Eq, Hash, Debug)]
pub struct TagUsage {
    /// Bytes committed in the tag's region now.
    pub mapped: usize,
    /// The highest `mapped` since the tag's creation.
    pub peak_mapped: usize,
    /// Allocations made under the tag.
    pub nmalloc: u64,
    /// Frees of the tag's blocks.
    pub ndalloc: u64,
    /// Bytes in live blocks (usable sizes), as in [`TagStats`].
    pub allocated: usize,
}

/// A tag's budget on `mapped`, the memory it holds from the OS (see
/// "Budgets" in regionalloc(3)). 0 means no limit; `Limit::default()` is
/// no budget at all.
#[derive(Copy, Clone, Default, Debug)]
pub struct Limit {
    /// `mapped` never exceeds it: an allocation under the tag that would
    /// need more fails (null from the allocator, so `try_reserve` returns
    /// an error and plain `Vec::push` calls `handle_alloc_error`).
    pub hard: usize,
    /// `on_soft` runs once each time `mapped` rises past it (at most
    /// `hard` when both are set).
    pub soft: usize,
    /// Called with the tag and its new `mapped` on the thread whose
    /// allocation crossed `soft`, inside that allocation, after it
    /// succeeded and outside every lock of the library and of jemalloc.
    /// It may allocate, free, read stats, purge and write reports; it must
    /// not reset or destroy the tag, nor wait for anything the allocating
    /// code may hold (a `Mutex` or `RefCell` it is in the middle of
    /// using). A panic in it cannot unwind through the C library: the
    /// process aborts.
    pub on_soft: Option<fn(Tag, usize)>,
}

/// The tag pushed by [`Tag::enter`], popped when the guard is dropped.
///
/// Neither `Send` nor `Sync`: the tag stack is the thread's, so the guard
/// must be dropped on the thread that entered it. Guards must be dropped in
/// the reverse order of their creation, as locals of nested scopes are (a
/// `Vec<TagGuard>` drops first to last: pop it instead). A guard dropped
/// while its tag is not on top leaves the stack as it is, and panics in
/// debug builds.
///
/// ```compile_fail
/// fn on_another_thread<T: Send>(_: T) {}
/// let tag = regionalloc::Tag::create("guard").unwrap();
/// on_another_thread(tag.enter()); // TagGuard is not Send
/// ```
#[must_use = "the tag is popped as soon as the guard is dropped"]
pub struct TagGuard {
    tag: Tag,
    _not_send: PhantomData<*const ()>,
}

/// The largest name a tag may have, in bytes (`RA_TAG_NAME_MAX`).
const NAME_MAX: usize = 63;

/// Calls f with name as a C string held on the stack, so that the binding
/// adds no allocation of its own (under the caller's tag) to a create or a
/// lookup. Names the library would refuse as too long, and names holding a
/// NUL, fail here with EINVAL, the library's own error for a bad name.
fn with_c_name<R>(name: &str, f: impl FnOnce(*const c_char) -> R) -> Result<R, io::Error> {
    let bytes = name.as_bytes();
    if bytes.len() > NAME_MAX || bytes.contains(&0) {
        return Err(einval());
    }
    let mut buf = [0u8; NAME_MAX + 1];
    buf[..bytes.len()].copy_from_slice(bytes);
    Ok(f(buf.as_ptr() as *const c_char))
}

impl Tag {
    pub(crate) fn from_raw(id: ffi::RaTag) -> Option<Tag> {
        NonZeroU32::new(id).map(Tag)
    }

    pub(crate) fn raw(self) -> ffi::RaTag {
        self.0.get()
    }

    /// The tag called `name`, created (with its arena and region) on
    /// first use: calling it again with the same name returns the same
    /// tag. Errors (the OS error of `ra_tag_create`): EINVAL for an empty
    /// name, one longer than 63 bytes or one holding a NUL; ENOSPC when no
    /// region is left (`REGIONALLOC_MAX_TAGS`, 256 by default, bounds the
    /// tags alive at once); ENOMEM.
    pub fn create(name: &str) -> io::Result<Tag> {
        let id = with_c_name(name, |c| unsafe { ffi::ra_tag_create(c) })?;
        // errno is read before anything else can change it.
        Tag::from_raw(id).ok_or_else(io::Error::last_os_error)
    }

    /// The tag called `name` as a child of `parent` (tag trees), created
    /// on first use; the same name under the same parent returns the same
    /// tag. Errors: EEXIST when the name is taken under another parent,
    /// EINVAL for a bad name, a destroyed parent or one 8 levels deep,
    /// ENOMEM when the new tag does not fit an ancestor's hard limit, and
    /// those of [`Tag::create`].
    pub fn create_in(parent: Tag, name: &str) -> io::Result<Tag> {
        let id = with_c_name(name, |c| unsafe { ffi::ra_tag_create_in(parent.raw(), c) })?;
        Tag::from_raw(id).ok_or_else(io::Error::last_os_error)
    }

    /// The tag's parent, `None` at the top level. EINVAL for a destroyed
    /// tag.
    pub fn parent(&self) -> io::Result<Option<Tag>> {
        // ra_tag_parent sets errno: 0 for a top-level tag.
        let id = unsafe { ffi::ra_tag_parent(self.raw()) };
        match Tag::from_raw(id) {
            Some(p) => Ok(Some(p)),
            None => {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(0) {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// The existing tag called `name`; never creates one.
    pub fn lookup(name: &str) -> Option<Tag> {
        with_c_name(name, |c| unsafe { ffi::ra_tag_lookup(c) })
            .ok()
            .and_then(Tag::from_raw)
    }

    /// The tag owning the memory at `ptr` (any address inside a tagged
    /// block), `None` for untagged memory and null. Constant time, no
    /// header, no lock; `ptr` is never dereferenced. For an address in a
    /// destroyed tag's region the answer is unspecified (the block is gone).
    pub fn of<T: ?Sized>(ptr: *const T) -> Option<Tag> {
        Tag::from_raw(unsafe { ffi::ra_tag_of(ptr as *const c_void) })
    }

    /// The tag's id, 1 to the number of tags handed out.
    pub fn id(&self) -> u32 {
        self.0.get()
    }

    /// The tag's name, `None` once it is destroyed. The library's string
    /// lives until the tag is destroyed, so it is copied at once (a
    /// destroy may not race it: see [`Tag::destroy`]). Bytes that are not
    /// UTF-8 (a name given from C) are replaced with U+FFFD.
    pub fn name(&self) -> Option<String> {
        let p = unsafe { ffi::ra_tag_name(self.raw()) };
        if p.is_null() {
            return None;
        }
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// Pushes the tag on the calling thread's stack: what the thread
    /// allocates belongs to it until the guard is dropped, through
    /// [`RegionAlloc`](crate::RegionAlloc), and through C code's `malloc`
    /// too unless libregionalloc was built with `--disable-override`.
    ///
    /// # Panics
    ///
    /// When the push fails: the tag was destroyed (EINVAL) or the stack
    /// already holds 64 tags (EOVERFLOW). [`Tag::try_enter`] returns the
    /// error instead.
    pub fn enter(&self) -> TagGuard {
        match self.try_enter() {
            Ok(guard) => guard,
            Err(e) => panic!("regionalloc: cannot push tag {}: {}", self.id(), e),
        }
    }

    /// [`Tag::enter`], with the push's error (EINVAL, EOVERFLOW) returned;
    /// the stack is then unchanged.
    pub fn try_enter(&self) -> io::Result<TagGuard> {
        check(unsafe { ffi::ra_tag_push(self.raw()) })?;
        Ok(TagGuard {
            tag: *self,
            _not_send: PhantomData,
        })
    }

    /// Runs `f` with the tag pushed, popping it however `f` ends (a panic
    /// unwinding through it included). Panics as [`Tag::enter`] does.
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let _guard = self.enter();
        f()
    }

    /// The tag's usage now, read live: its cost does not grow with the
    /// number of tags. Errors: EINVAL (destroyed), ENOTSUP (pass-through
    /// mode, `REGIONALLOC=0`).
    pub fn stats(&self) -> io::Result<TagStats> {
        let mut s = TagStats::default();
        check(unsafe { ffi::ra_tag_stats(self.raw(), &mut s) })?;
        Ok(s)
    }

    /// The figures of the tag and all its descendants summed (tag trees);
    /// `peak_mapped` is the subtree's own high-water mark. Errors as
    /// [`Tag::stats`].
    pub fn stats_tree(&self) -> io::Result<TagStats> {
        let mut s = TagStats::default();
        check(unsafe { ffi::ra_tag_stats_tree(self.raw(), &mut s) })?;
        Ok(s)
    }

    /// The tag's committed and allocated bytes and its counts, exact now
    /// and with no call into jemalloc: cheap enough for every request.
    /// Errors as [`Tag::stats`].
    pub fn usage(&self) -> io::Result<TagUsage> {
        let mut u = TagUsage::default();
        check(unsafe { ffi::ra_tag_usage(self.raw(), &mut u) })?;
        Ok(u)
    }

    /// The resident bytes of the tag's region as the kernel counts them
    /// (mincore), to set against jemalloc's `resident` estimate.
    pub fn rss(&self) -> io::Result<usize> {
        let mut bytes = 0usize;
        check(unsafe { ffi::ra_tag_rss(self.raw(), &mut bytes) })?;
        Ok(bytes)
    }

    /// Returns the tag's unused pages to the OS. Live blocks are untouched.
    pub fn purge(&self) -> io::Result<()> {
        check(unsafe { ffi::ra_tag_purge(self.raw()) })
    }

    /// The tag's priority under memory pressure (default 0; lower gives
    /// way first; negative: refused new memory at high), kept until the
    /// tag is destroyed. `EINVAL` for a destroyed tag.
    pub fn set_priority(&self, priority: i32) -> io::Result<()> {
        check(unsafe { ffi::ra_tag_set_priority(self.raw(), priority) })
    }

    /// Bounds the arenas of the tag's pool that its new threads are spread
    /// over (1: one arena; above 64 counts as 64), until the tag is
    /// destroyed. `EINVAL` for 0 or a destroyed tag.
    pub fn set_arenas(&self, max: u32) -> io::Result<()> {
        check(unsafe { ffi::ra_tag_set_arenas(self.raw(), max) })
    }

    /// The jemalloc arena indices of the tag's pool (`stats.arenas.<i>` in
    /// jemalloc's own statistics). Errors as [`Tag::stats`].
    pub fn arenas(&self) -> io::Result<Vec<u32>> {
        let mut out = vec![0u32; 64];
        let n = unsafe { ffi::ra_tag_arenas(self.raw(), out.as_mut_ptr(), 64) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        out.truncate(n as usize);
        Ok(out)
    }

    /// Frees every block of the tag at once, whichever thread allocated it;
    /// the tag keeps its id and name and serves new allocations.
    ///
    /// # Safety
    ///
    /// Every block of the tag is freed, including blocks that Rust values
    /// still own (a `Vec`, a `Box`, a `String`...), and values that std or
    /// another crate created lazily while the tag was pushed (stdout's
    /// buffer on a first `println!`, a `thread_local!` first touched under
    /// the tag). The caller promises that no such value is used or dropped
    /// afterwards (leak them first: `mem::forget`, `Box::into_raw`), and
    /// that no thread allocates under the tag or frees one of its blocks
    /// during the call.
    pub unsafe fn reset(&self) -> io::Result<()> {
        check(ffi::ra_tag_reset(self.raw()))
    }

    /// Resets the tag, then forgets it: its name is free again and its id,
    /// region and arena serve a later [`Tag::create`]. Errors: EBUSY when
    /// the tag is on the calling thread's stack or is a thread's base tag
    /// (nothing is done), EINVAL when already destroyed.
    ///
    /// # Safety
    ///
    /// As for [`Tag::reset`]: the tag's blocks are all freed. Also, no
    /// other thread may be in [`Tag::name`] for this tag during the call
    /// (the library frees the name), and no other thread may have the tag
    /// pushed: only the calling thread's stack is checked (EBUSY).
    pub unsafe fn destroy(self) -> io::Result<()> {
        check(ffi::ra_tag_destroy(self.raw()))
    }

    /// Sets the tag's budget (a hard limit below what the tag holds is
    /// allowed: new commits fail until it holds less). Errors: EINVAL (soft
    /// above hard when both are set; destroyed tag), ENOTSUP.
    pub fn set_limit(&self, limit: Limit) -> io::Result<()> {
        let c = ffi::RaTagLimit {
            hard: limit.hard,
            soft: limit.soft,
            on_soft: limit.on_soft.map(|_| on_soft_trampoline as ffi::OnSoft),
            ctx: match limit.on_soft {
                Some(f) => f as *mut c_void,
                None => ptr::null_mut(),
            },
        };
        check(unsafe { ffi::ra_tag_set_limit(self.raw(), &c) })
    }

    /// The tag's budget. A callback that was not set through this crate
    /// (from C) is reported as `None`.
    pub fn get_limit(&self) -> io::Result<Limit> {
        let mut c = ffi::RaTagLimit {
            hard: 0,
            soft: 0,
            on_soft: None,
            ctx: ptr::null_mut(),
        };
        check(unsafe { ffi::ra_tag_get_limit(self.raw(), &mut c) })?;
        let ours =
            c.on_soft.map(|f| f as usize) == Some(on_soft_trampoline as ffi::OnSoft as usize);
        Ok(Limit {
            hard: c.hard,
            soft: c.soft,
            on_soft: if ours && !c.ctx.is_null() {
                // SAFETY: set_limit stored a fn(Tag, usize) in ctx next to
                // the trampoline.
                Some(unsafe { std::mem::transmute::<*mut c_void, fn(Tag, usize)>(c.ctx) })
            } else {
                None
            },
        })
    }
}

/// The C callback of every soft limit set from Rust: ctx is the Rust
/// function. A panic must not unwind into the C library (undefined
/// behaviour before Rust 1.81, an abort since), so it is caught and the
/// process aborted, after the panic hook has printed the message.
extern "C" fn on_soft_trampoline(ctx: *mut c_void, tag: ffi::RaTag, mapped: usize) {
    // SAFETY: set_limit puts a fn(Tag, usize) in ctx whenever it installs
    // this trampoline.
    let f = unsafe { std::mem::transmute::<*mut c_void, fn(Tag, usize)>(ctx) };
    if let Some(tag) = Tag::from_raw(tag) {
        if std::panic::catch_unwind(|| f(tag, mapped)).is_err() {
            std::process::abort();
        }
    }
}

impl TagGuard {
    /// The tag this guard pushed.
    pub fn tag(&self) -> Tag {
        self.tag
    }
}

impl Drop for TagGuard {
    fn drop(&mut self) {
        let popped = unsafe { ffi::ra_tag_pop(self.tag.raw()) } == 0;
        // Not on top: guards were dropped out of order (or C code pushed
        // without popping). The stack is left as it is; debug builds say so,
        // unless a panic is already unwinding (a second one would abort).
        if !popped && cfg!(debug_assertions) && !std::thread::panicking() {
            panic!(
                "regionalloc: TagGuard of tag {} dropped while it is not on top of the thread's tag stack",
                self.tag.id()
            );
        }
    }
}

impl fmt::Debug for TagGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TagGuard").field("tag", &self.tag).finish()
    }
}

/// The tag on top of the calling thread's stack (or its base tag, see
/// `REGIONALLOC_THREAD_TAGS`), `None` when allocations are untagged.
pub fn current_tag() -> Option<Tag> {
    Tag::from_raw(unsafe { ffi::ra_tag_current() })
}

/// Flushes the calling thread's caches for every tag and for untagged
/// memory. No figure needs it to be exact: the blocks it gives back were
/// free already, and only `active` and `dirty` see their pages come free,
/// pages that a [`Tag::purge`] can then return to the OS.
pub fn thread_flush() {
    unsafe { ffi::ra_thread_flush() }
}

/// Refreshes jemalloc's statistics once (`ra_stats_refresh`): the
/// reports' untagged row (all but its `active`) and jemalloc's own
/// `stats.*` are as of the last refresh. No tag's figures need it, nothing
/// in the library calls it periodically, and it costs in proportion to the
/// arenas of the process (milliseconds with thousands of tags);
/// [`report_detail`](crate::report_detail) takes one itself. Errors:
/// ENOTSUP (pass-through mode).
pub fn stats_refresh() -> io::Result<()> {
    check(unsafe { ffi::ra_stats_refresh() })
}

/// Whether tagging is on: false in pass-through mode (`REGIONALLOC=0`, or
/// no reservation could be made), where stats, purge and reports fail with
/// ENOTSUP and nothing is tagged.
pub fn enabled() -> bool {
    unsafe { ffi::ra_enabled() != 0 }
}
