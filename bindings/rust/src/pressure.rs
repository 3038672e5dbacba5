//! Memory pressure: the process held under a memory limit by giving back
//! and refusing in the right tags (`regionalloc(3)`, "Memory pressure").

use std::io;
use std::os::raw::{c_int, c_void};

use crate::ffi;

/// How close the process's resident set is to the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pressure {
    /// Below high (90% of the limit), or no limit.
    None,
    /// At high or above: free pages were given back; tags of negative
    /// priority are refused new memory.
    High,
    /// At the limit or above: every tag is refused new memory.
    Limit,
}

impl Pressure {
    fn from_c(level: c_int) -> Pressure {
        match level {
            1 => Pressure::High,
            2 => Pressure::Limit,
            _ => Pressure::None,
        }
    }
}

/// Sets the memory limit in bytes (0: none, the watching stops; 2^56 or
/// more, the address space: kept as given, but none in effect).
/// `EAGAIN` when the library's thread cannot be started (nothing changed).
pub fn set_memory_limit(bytes: usize) -> io::Result<()> {
    ffi::check(unsafe { ffi::ra_memory_limit_set(bytes) })
}

/// The limit as given, from wherever it came (the call,
/// `REGIONALLOC_MEMORY_LIMIT`, the cgroup); 0: none.
pub fn memory_limit() -> usize {
    unsafe { ffi::ra_memory_limit() }
}

type Callback = Box<dyn Fn(Pressure, usize, usize) + Send + Sync>;

extern "C" fn trampoline(ctx: *mut c_void, level: c_int, current: usize, limit: usize) {
    // SAFETY: ctx is the leaked Box<Callback> of on_pressure, never freed.
    let f = unsafe { &*(ctx as *const Callback) };
    // A panic must not unwind into C.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        f(Pressure::from_c(level), current, limit)
    }));
}

/// Calls `f(level, resident bytes, limit)` once each time the pressure
/// rises to a level, on the library's thread, outside every lock of the
/// library: shrink the program's own caches there. Callbacks stay for the
/// process's life (up to 16: `ENOSPC` after).
pub fn on_pressure<F>(f: F) -> io::Result<()>
where
    F: Fn(Pressure, usize, usize) + Send + Sync + 'static,
{
    let boxed: Box<Callback> = Box::new(Box::new(f));
    let ctx = Box::into_raw(boxed);
    let rc = unsafe { ffi::ra_pressure_callback(trampoline, ctx as *mut c_void) };
    if rc != 0 {
        let err = io::Error::last_os_error();
        // SAFETY: not registered: nobody else holds ctx.
        drop(unsafe { Box::from_raw(ctx) });
        return Err(err);
    }
    Ok(())
}
