//! The C API of include/regionalloc.h, declared by hand (no bindgen, no libc
//! crate), and the few C library functions the reports need.

use std::io;
use std::os::raw::{c_char, c_int, c_uint, c_void};

/// The result of a C call that returns 0, or -1 with errno.
pub(crate) fn check(rc: c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub(crate) fn einval() -> io::Error {
    io::Error::from_raw_os_error(22 /* EINVAL */)
}

/// `ra_tag_t`: an unsigned int, 0 for untagged.
pub type RaTag = c_uint;

pub const RA_TAG_ALL: RaTag = RaTag::MAX;

/// `RA_REPORT_DETAIL`, or'ed into a report's format.
pub const RA_REPORT_DETAIL: c_int = 0x100;

pub type OnSoft = extern "C" fn(ctx: *mut c_void, tag: RaTag, mapped: usize);

/// `ra_pressure_callback`'s callback: level is `ra_pressure_t` (0 none,
/// 1 high, 2 limit).
pub type OnPressure = extern "C" fn(ctx: *mut c_void, level: c_int, current: usize, limit: usize);

/// `ra_tag_limit_t`. A NULL `on_soft` is `None` (the nullable-pointer
/// layout of `Option<extern fn>`).
#[repr(C)]
pub struct RaTagLimit {
    pub hard: usize,
    pub soft: usize,
    pub on_soft: Option<OnSoft>,
    pub ctx: *mut c_void,
}

/// The C library's `FILE`, only ever behind a pointer.
#[repr(C)]
pub struct File {
    _opaque: [u8; 0],
}

// ra_tag_push, ra_tag_pop and ra_tag_of are also macros in the header; the
// functions stay exported for bindings like this one.
extern "C" {
    pub fn ra_tag_create(name: *const c_char) -> RaTag;
    pub fn ra_tag_lookup(name: *const c_char) -> RaTag;
    pub fn ra_tag_name(tag: RaTag) -> *const c_char;
    pub fn ra_tag_reset(tag: RaTag) -> c_int;
    pub fn ra_tag_destroy(tag: RaTag) -> c_int;
    pub fn ra_tag_set_limit(tag: RaTag, limit: *const RaTagLimit) -> c_int;
    pub fn ra_tag_get_limit(tag: RaTag, out: *mut RaTagLimit) -> c_int;
    pub fn ra_tag_push(tag: RaTag) -> c_int;
    pub fn ra_tag_pop(tag: RaTag) -> c_int;
    pub fn ra_tag_current() -> RaTag;
    pub fn ra_tag_of(ptr: *const c_void) -> RaTag;

    pub fn ra_malloc(size: usize) -> *mut c_void;
    pub fn ra_calloc(n: usize, size: usize) -> *mut c_void;
    pub fn ra_realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    pub fn ra_free(ptr: *mut c_void);
    pub fn ra_free_sized(ptr: *mut c_void, size: usize);
    pub fn ra_malloc_tag(tag: RaTag, size: usize) -> *mut c_void;
    pub fn ra_aligned_alloc(align: usize, size: usize) -> *mut c_void;
    #[allow(dead_code)] // used by the tests
    pub fn ra_malloc_usable_size(ptr: *const c_void) -> usize;

    pub fn ra_tag_stats(tag: RaTag, out: *mut crate::TagStats) -> c_int;
    pub fn ra_tag_stats_tree(tag: RaTag, out: *mut crate::TagStats) -> c_int;
    pub fn ra_stats_refresh() -> c_int;
    pub fn ra_tag_create_in(parent: RaTag, name: *const c_char) -> RaTag;
    pub fn ra_tag_parent(tag: RaTag) -> RaTag;
    pub fn ra_tag_usage(tag: RaTag, out: *mut crate::TagUsage) -> c_int;
    pub fn ra_tag_purge(tag: RaTag) -> c_int;
    pub fn ra_tag_set_arenas(tag: RaTag, max: c_uint) -> c_int;
    pub fn ra_tag_arenas(tag: RaTag, out: *mut c_uint, cap: c_uint) -> c_int;
    pub fn ra_thread_flush();

    pub fn ra_memory_limit_set(bytes: usize) -> c_int;
    pub fn ra_memory_limit() -> usize;
    pub fn ra_tag_set_priority(tag: RaTag, priority: c_int) -> c_int;
    pub fn ra_pressure_callback(cb: OnPressure, ctx: *mut c_void) -> c_int;
    pub fn ra_tag_rss(tag: RaTag, bytes: *mut usize) -> c_int;
    pub fn ra_enabled() -> c_int;

    pub fn ra_prof_start(mean_interval_bytes: usize) -> c_int;
    pub fn ra_prof_stop() -> c_int;
    pub fn ra_prof_dump(out: *mut File, fmt: c_int, tag: RaTag) -> c_int;

    pub fn ra_report(out: *mut File, fmt: c_int) -> c_int;
    pub fn ra_checkpoint(label: *const c_char) -> c_int;
    pub fn ra_checkpoint_report(out: *mut File, fmt: c_int) -> c_int;
}

// From the C library, which std links anyway.
extern "C" {
    pub fn open_memstream(buf: *mut *mut c_char, size: *mut usize) -> *mut File;
    pub fn fclose(f: *mut File) -> c_int;
    pub fn free(ptr: *mut c_void);
}
