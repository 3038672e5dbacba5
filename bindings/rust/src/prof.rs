//! The sampled allocation-site profiler (`ra_prof_*`): samples tagged
//! allocations by bytes, aggregated by (tag, call stack).

use std::io;
use std::os::raw::c_int;

use crate::ffi::{self, check};
use crate::report::write_to_memory;
use crate::Tag;

/// The output of [`dump`] (`ra_prof_format_t`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum ProfFormat {
    /// A text tree, "All (bytes, #objects)" then callers below.
    Tree,
    /// Folded stacks, `tag:<name>;root;...;leaf <bytes>` (flame graphs).
    Folded,
    /// gzip-compressed profile.proto, for `go tool pprof`.
    Pprof,
    /// The gperftools/jemalloc heap profile text, for jeprof.
    HeapV2,
}

impl ProfFormat {
    fn raw(self) -> c_int {
        match self {
            ProfFormat::Tree => 0,
            ProfFormat::Folded => 1,
            ProfFormat::Pprof => 2,
            ProfFormat::HeapV2 => 3,
        }
    }
}

/// Starts sampling, on average one sample every `mean_interval_bytes`
/// allocated (1: every allocation), or changes the interval. The profiler
/// is process-wide: every thread's tagged allocations are sampled, and a
/// sampled block is at least 4 KiB of its tag. Errors: EINVAL (0),
/// ENOTSUP (pass-through mode).
pub fn start(mean_interval_bytes: usize) -> io::Result<()> {
    check(unsafe { ffi::ra_prof_start(mean_interval_bytes) })
}

/// Stops sampling; the profile is kept. Errors: EINVAL (not started).
pub fn stop() -> io::Result<()> {
    check(unsafe { ffi::ra_prof_stop() })
}

/// The profile of `tag`, or of every tag with `None`, in `format`.
/// Errors: ENOTSUP (never started), EINVAL (a destroyed tag), ENOMEM, EIO.
pub fn dump(format: ProfFormat, tag: Option<Tag>) -> io::Result<Vec<u8>> {
    let raw_tag = match tag {
        Some(t) => t.raw(),
        None => ffi::RA_TAG_ALL,
    };
    write_to_memory(|file| unsafe { ffi::ra_prof_dump(file, format.raw(), raw_tag) })
}
