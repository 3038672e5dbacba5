//! Per-tag memory accounting for Rust programs, on libregionalloc.
//!
//! A [`Tag`] is a memory category ("parse", "query 42", "cache"). Install
//! [`RegionAlloc`] as the global allocator, push a tag around a piece of
//! work, and every allocation the thread makes meanwhile belongs to the
//! tag: its exact bytes are one call away ([`Tag::stats`]), the owner of
//! any block is found from its address without a header ([`Tag::of`]), and
//! the tag's memory can be given back to the OS ([`Tag::purge`]) or freed
//! all at once ([`Tag::reset`]).
//!
//! ```
//! use regionalloc::{RegionAlloc, Tag};
//!
//! #[global_allocator]
//! static ALLOC: RegionAlloc = RegionAlloc;
//!
//! let parse = Tag::create("parse")?;
//! let tokens: Vec<String> = parse.scope(|| {
//!     "a b c".split(' ').map(String::from).collect()
//! });
//! assert_eq!(Tag::of(tokens.as_ptr()), Some(parse));
//! println!("parse holds {} bytes", parse.stats()?.allocated);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Errors are `std::io::Error`s carrying the C library's errno
//! (`raw_os_error()`), as listed in regionalloc(3).
//!
//! The tag stack is per thread: for async tasks that move between threads,
//! wrap the future with [`in_tag`].
//!
//! libregionalloc built with its malloc override (the default) replaces
//! the process's `malloc`, so std's `System` allocator and C libraries
//! allocate under the pushed tag too. `RegionAlloc` does not depend on
//! that (a library built with `--disable-override` works the same), and
//! grows small tagged blocks through the library's per-thread front cache.
//!
//! Linking: the build script uses `REGIONALLOC_LIB_DIR` (a directory
//! holding libregionalloc.so, with an rpath for this crate's own tests,
//! examples and benches), else `pkg-config regionalloc`.

mod alloc;
mod ffi;
mod future;
mod pressure;
pub mod prof;
mod report;
mod tag;

pub use crate::alloc::RegionAlloc;
pub use crate::future::{in_tag, InTag};
pub use crate::pressure::{memory_limit, on_pressure, set_memory_limit, Pressure};
pub use crate::report::{checkpoint, checkpoint_report, report, report_detail, Format};
pub use crate::tag::{
    current_tag, enabled, stats_refresh, thread_flush, Limit, Tag, TagGuard, TagStats, TagUsage,
};

// The unit tests allocate through the binding itself, so that tagging does
// not depend on the library's malloc override (absent with
// --disable-override).
#[cfg(test)]
#[global_allocator]
static TEST_ALLOC: RegionAlloc = RegionAlloc;

#[cfg(test)]
mod tests;
