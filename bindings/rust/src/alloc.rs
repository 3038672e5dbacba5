//! RegionAlloc: Rust's global allocator on libregionalloc's `ra_*`
//! functions, so that Rust's allocations go to the tag on top of the
//! thread's stack.

use std::alloc::{GlobalAlloc, Layout};
use std::os::raw::c_void;
use std::ptr;

use crate::ffi;

/// The global allocator of a program whose memory is accounted by tag:
///
/// ```no_run
/// #[global_allocator]
/// static ALLOC: regionalloc::RegionAlloc = regionalloc::RegionAlloc;
/// ```
///
/// Blocks go to the tag on top of the allocating thread's stack, untagged
/// when it is empty; `realloc` keeps a block's tag whatever is on the stack.
/// Failures return null and never abort (the caller decides: `try_reserve`
/// returns an error, a plain `Vec::push` calls `handle_alloc_error`).
/// A size-0 layout, which `GlobalAlloc` callers must not pass, gets a
/// unique minimal block, as `malloc(0)` does.
#[derive(Copy, Clone, Default, Debug)]
pub struct RegionAlloc;

/// The alignment malloc guarantees on x86-64 and aarch64 Linux, for blocks
/// at least that large: jemalloc's smaller classes (8 bytes) are aligned to
/// their size only, hence the second test in `natural` (as std's System
/// allocator does).
const MIN_ALIGN: usize = 16;

/// Whether a block of `size` bytes from `ra_malloc` is aligned enough.
#[inline]
fn natural(align: usize, size: usize) -> bool {
    align <= MIN_ALIGN && align <= size
}

#[inline]
unsafe fn alloc_aligned(layout: Layout) -> *mut u8 {
    // ra_aligned_alloc takes any power of two (Layout guarantees one) and
    // any size, not only multiples of the alignment.
    ffi::ra_aligned_alloc(layout.align(), layout.size()) as *mut u8
}

/// Growth of a tagged block up to this size moves through the library's
/// front cache (see `grow_tagged_small`).
const SMALL_GROWTH_MAX: usize = 1024;

/// A tagged block grown to at most SMALL_GROWTH_MAX bytes: a new block of
/// the same tag from ra_malloc_tag, which pops the thread's front cache,
/// the contents, the old block freed into it. ra_realloc would keep the tag
/// too, but moves a tagged block through jemalloc's rallocx, past the front
/// cache: on Vec and String growth churn that made tagged 1.1-1.2x System
/// against 0.66-0.77x this way (benches/churn.rs). A small block cannot grow
/// in place anyway unless its size class stays the same, which doubling
/// growth rarely allows; larger blocks keep ra_realloc, which may extend in
/// place.
#[inline]
unsafe fn grow_tagged_small(
    ptr: *mut u8,
    owner: ffi::RaTag,
    old_size: usize,
    new_size: usize,
) -> *mut u8 {
    let new = ffi::ra_malloc_tag(owner, new_size) as *mut u8;
    if !new.is_null() {
        ptr::copy_nonoverlapping(ptr, new, old_size);
        ffi::ra_free_sized(ptr as *mut c_void, old_size);
    }
    new
}

/// A resize that ra_realloc cannot do (the block or its new size needs
/// more than the natural alignment): a new block, the contents, the old
/// block freed. The new block goes to the old one's tag, as ra_realloc's
/// would: the tag is pushed around the allocation, or, when the push fails
/// (a stack of 64), the block goes to the current tag.
#[cold]
unsafe fn realloc_by_copy(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
    let owner = ffi::ra_tag_of(ptr as *const c_void);
    let pushed = owner != 0 && ffi::ra_tag_push(owner) == 0;
    let new = RegionAlloc.alloc(new_layout);
    if pushed {
        ffi::ra_tag_pop(owner);
    }
    if !new.is_null() {
        ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
        RegionAlloc.dealloc(ptr, layout);
    }
    new
}

unsafe impl GlobalAlloc for RegionAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if natural(layout.align(), layout.size()) {
            ffi::ra_malloc(layout.size()) as *mut u8
        } else {
            alloc_aligned(layout)
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if natural(layout.align(), layout.size()) {
            // calloc skips the zeroing of pages fresh from the OS.
            return ffi::ra_calloc(1, layout.size()) as *mut u8;
        }
        let p = alloc_aligned(layout);
        if !p.is_null() {
            ptr::write_bytes(p, 0, layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // ra_free_sized wants the size requested at allocation, as
        // jemalloc's sdallocx, which also needs the alignment of an
        // over-aligned block to find its size class; the library has no
        // public sized free taking an alignment, so those go to ra_free,
        // which finds the class from the address.
        if natural(layout.align(), layout.size()) {
            ffi::ra_free_sized(ptr as *mut c_void, layout.size())
        } else {
            ffi::ra_free(ptr as *mut c_void)
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Both ends must be natural: a block allocated over-aligned may be
        // resized by ra_realloc only if the result needs no more than the
        // natural alignment, which the second test ensures.
        if natural(layout.align(), new_size) {
            if new_size <= SMALL_GROWTH_MAX
                && new_size > layout.size()
                && natural(layout.align(), layout.size())
            {
                let owner = ffi::ra_tag_of(ptr as *const c_void);
                if owner != 0 {
                    return grow_tagged_small(ptr, owner, layout.size(), new_size);
                }
            }
            ffi::ra_realloc(ptr as *mut c_void, new_size) as *mut u8
        } else {
            realloc_by_copy(ptr, layout, new_size)
        }
    }
}
