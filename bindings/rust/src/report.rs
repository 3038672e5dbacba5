//! Reports and checkpoints into memory: the C functions write to a FILE,
//! here an open_memstream stream whose buffer is copied into a String.

use std::ffi::CString;
use std::io;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;
use std::slice;

use crate::ffi::{self, check, einval};

/// The format of [`report`] and [`checkpoint_report`] (`ra_format_t`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Format {
    /// An aligned table in human units.
    Text,
    /// One document in bytes and nanoseconds (doc/json.md).
    Json,
    /// The Prometheus text exposition format.
    Prometheus,
}

impl Format {
    fn raw(self) -> c_int {
        match self {
            Format::Text => 0,
            Format::Json => 1,
            Format::Prometheus => 2,
        }
    }
}

/// Runs `write` on a memory stream and returns what it wrote. `write`
/// returns 0, or -1 with errno, which is read before the stream is closed.
/// The stream's buffer comes from the C library's malloc and goes back to
/// its free.
pub(crate) fn write_to_memory(write: impl FnOnce(*mut ffi::File) -> c_int) -> io::Result<Vec<u8>> {
    let mut buf: *mut c_char = ptr::null_mut();
    let mut len: usize = 0;
    let f = unsafe { ffi::open_memstream(&mut buf, &mut len) };
    if f.is_null() {
        return Err(io::Error::last_os_error());
    }
    let failed = check(write(f)).err();
    // fclose flushes: buf and len are final only after it.
    let close_error = check(unsafe { ffi::fclose(f) }).err();
    let out = if buf.is_null() {
        Vec::new()
    } else {
        let v = unsafe { slice::from_raw_parts(buf as *const u8, len) }.to_vec();
        unsafe { ffi::free(buf as *mut c_void) };
        v
    };
    match (failed, close_error) {
        (Some(e), _) | (None, Some(e)) => Err(e),
        (None, None) => Ok(out),
    }
}

/// The C library escapes every name and label it writes (non-UTF-8 bytes
/// become `\xNN` or `\u00NN`), so the text is UTF-8; a stray byte would be
/// replaced, not fail the report.
fn into_string(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Every live tag's usage now, from the live figures (no refresh of
/// jemalloc's statistics), with the untagged, library and total rows
/// (`ra_report`). Its own memory is untagged; the String returned is
/// allocated under the caller's tag. Errors: ENOTSUP (pass-through mode),
/// ENOMEM, EIO.
pub fn report(f: Format) -> io::Result<String> {
    write_to_memory(|file| unsafe { ffi::ra_report(file, f.raw()) }).map(into_string)
}

/// [`report`] after one refresh of jemalloc's statistics, with jemalloc's
/// own figures for the tags' active, resident, mapped, dirty, muzzy and
/// retained (`RA_REPORT_DETAIL`): costs as [`stats_refresh`](crate::stats_refresh).
pub fn report_detail(f: Format) -> io::Result<String> {
    write_to_memory(|file| unsafe { ffi::ra_report(file, f.raw() | ffi::RA_REPORT_DETAIL) })
        .map(into_string)
}

/// Records a snapshot of every tag and of the process under `label` (cut
/// to 63 bytes at a character boundary; "" allowed), `ra_checkpoint`. A
/// label holding a NUL is refused with EINVAL.
pub fn checkpoint(label: &str) -> io::Result<()> {
    let c = CString::new(label).map_err(|_| einval())?;
    check(unsafe { ffi::ra_checkpoint(c.as_ptr()) })
}

/// The kept checkpoints (the last 1024), oldest first
/// (`ra_checkpoint_report`).
pub fn checkpoint_report(f: Format) -> io::Result<String> {
    write_to_memory(|file| unsafe { ffi::ra_checkpoint_report(file, f.raw()) }).map(into_string)
}
