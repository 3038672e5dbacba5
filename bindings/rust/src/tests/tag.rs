//! Tags: registry, stack, figures, lifetime, budgets, errors.

use std::os::raw::c_void;
use std::panic;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::thread;

use super::fresh_tag;
use crate::{current_tag, ffi, stats_refresh, thread_flush, Limit, Tag};

const MIB: usize = 1 << 20;
const EINVAL: i32 = 22;
const EBUSY: i32 = 16;
const EOVERFLOW: i32 = 75;

fn usable_size<T: ?Sized>(p: *const T) -> usize {
    unsafe { ffi::ra_malloc_usable_size(p as *const c_void) }
}

// -- registry -------------------------------------------------------------------

#[test]
fn a_tag_created_twice_is_the_same_tag_with_its_name_and_id() {
    let t = fresh_tag("registry");
    assert_eq!(Tag::create("rust-unit/registry").unwrap(), t);
    assert_eq!(Tag::lookup("rust-unit/registry"), Some(t));
    assert!(t.id() >= 1);
    assert_eq!(t.name().as_deref(), Some("rust-unit/registry"));
}

#[test]
fn lookup_never_creates_a_tag() {
    assert_eq!(Tag::lookup("rust-unit/never-created"), None);
    assert_eq!(Tag::lookup("rust-unit/never-created"), None);
}

#[test]
fn a_name_of_63_bytes_is_accepted_and_one_of_64_refused() {
    let long = format!("rust-unit/{}", "n".repeat(53));
    assert_eq!(long.len(), 63);
    let t = Tag::create(&long).expect("63 bytes is the maximum");
    assert_eq!(t.name().as_deref(), Some(long.as_str()));
    let err = Tag::create(&format!("{}n", long)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(EINVAL));
}

#[test]
fn bad_names_are_errors_with_the_os_error_einval() {
    assert_eq!(Tag::create("").unwrap_err().raw_os_error(), Some(EINVAL));
    assert_eq!(
        Tag::create("a\0b").unwrap_err().raw_os_error(),
        Some(EINVAL)
    );
    assert_eq!(Tag::lookup(""), None);
}

// -- stack ----------------------------------------------------------------------

#[test]
fn enter_pushes_and_dropping_the_guard_pops() {
    let a = fresh_tag("stack-a");
    let b = fresh_tag("stack-b");
    let base = current_tag();
    {
        let ga = a.enter();
        assert_eq!(ga.tag(), a);
        assert_eq!(current_tag(), Some(a));
        {
            let _gb = b.enter();
            assert_eq!(current_tag(), Some(b));
        }
        assert_eq!(current_tag(), Some(a));
    }
    assert_eq!(current_tag(), base);
}

#[test]
fn scope_nests_and_returns_what_its_closure_returns() {
    let a = fresh_tag("scope-a");
    let b = fresh_tag("scope-b");
    let base = current_tag();
    let (inner, outer) = a.scope(|| (b.scope(current_tag), current_tag()));
    assert_eq!(inner, Some(b));
    assert_eq!(outer, Some(a));
    assert_eq!(current_tag(), base);
}

#[test]
fn a_panic_unwinding_through_scope_and_guards_pops_their_tags() {
    let a = fresh_tag("unwind-a");
    let b = fresh_tag("unwind-b");
    let base = current_tag();
    let caught = panic::catch_unwind(|| {
        a.scope(|| {
            let _g = b.enter();
            panic!("deliberate panic under two tags");
        })
    });
    assert!(caught.is_err());
    assert_eq!(current_tag(), base);
}

#[test]
fn each_thread_has_its_own_stack() {
    let a = fresh_tag("per-thread");
    let base = current_tag();
    let other = a.scope(|| thread::spawn(current_tag).join().unwrap());
    assert_ne!(other, Some(a));
    assert_eq!(current_tag(), base);
}

#[test]
fn try_enter_refuses_a_full_stack_with_eoverflow() {
    let a = fresh_tag("full-stack");
    let mut guards = Vec::new();
    let err = loop {
        match a.try_enter() {
            Ok(g) => guards.push(g),
            Err(e) => break e,
        }
        assert!(guards.len() <= 64, "the stack holds at most 64 tags");
    };
    assert_eq!(err.raw_os_error(), Some(EOVERFLOW));
    // A Vec drops its elements first to last: pop them last to first.
    while let Some(g) = guards.pop() {
        drop(g);
    }
    assert_ne!(current_tag(), Some(a));
}

#[test]
#[cfg(debug_assertions)]
fn a_guard_dropped_out_of_order_panics_and_leaves_the_stack_alone() {
    let a = fresh_tag("out-of-order-a");
    let b = fresh_tag("out-of-order-b");
    let base = current_tag();
    let ga = a.enter();
    let gb = b.enter();
    assert!(panic::catch_unwind(panic::AssertUnwindSafe(move || drop(ga))).is_err());
    assert_eq!(current_tag(), Some(b));
    drop(gb);
    assert_eq!(current_tag(), Some(a));
    // The pop the out-of-order guard could not do.
    assert_eq!(unsafe { ffi::ra_tag_pop(a.raw()) }, 0);
    assert_eq!(current_tag(), base);
}

#[test]
fn tags_and_in_tag_futures_may_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Tag>();
    send_sync::<crate::InTag<std::future::Ready<()>>>();
}

// -- figures --------------------------------------------------------------------

#[test]
fn allocated_is_the_exact_sum_of_usable_sizes_after_a_flush() {
    let t = fresh_tag("exact");
    let mut large: Vec<Box<[u8]>> = Vec::with_capacity(8);
    let mut small: Vec<Box<[u8; 100]>> = Vec::with_capacity(1000);
    t.scope(|| {
        for _ in 0..8 {
            large.push(vec![0u8; MIB].into_boxed_slice());
        }
        for _ in 0..1000 {
            small.push(Box::new([7u8; 100]));
        }
    });
    let expected: usize = large.iter().map(|b| usable_size(b.as_ptr())).sum::<usize>()
        + small.iter().map(|b| usable_size(b.as_ptr())).sum::<usize>();
    assert_eq!(usable_size(large[0].as_ptr()), MIB, "1 MiB is a size class");
    thread_flush();
    let s = t.stats().unwrap();
    assert_eq!(s.allocated, expected);
    assert_eq!(s.nmalloc - s.ndalloc, 1008);
    assert!(s.active >= s.allocated && s.mapped >= s.active);
    assert!(s.reserved > s.mapped && s.peak_mapped >= s.mapped);

    drop(large);
    drop(small);
    thread_flush();
    let s = t.stats().unwrap();
    assert_eq!(s.allocated, 0);
    assert_eq!(s.nmalloc, s.ndalloc);
}

#[test]
fn usage_allocated_is_the_exact_sum_of_usable_sizes_with_no_flush() {
    let t = fresh_tag("usage-allocated");
    let (boxes, vecs) = t.scope(|| {
        let boxes: Vec<Box<[u8; 24]>> = (0..100).map(|_| Box::new([1u8; 24])).collect();
        let vecs: Vec<Vec<u8>> = (0..8).map(|i| vec![2u8; 1000 << i]).collect();
        (boxes, vecs)
    });
    let held_by_boxes =
        usable_size(boxes.as_ptr()) + boxes.iter().map(|b| usable_size(&**b)).sum::<usize>();
    let held_by_vecs =
        usable_size(vecs.as_ptr()) + vecs.iter().map(|v| usable_size(v.as_ptr())).sum::<usize>();
    let u = t.usage().unwrap();
    assert_eq!(u.allocated, held_by_boxes + held_by_vecs);
    assert_eq!(u.nmalloc - u.ndalloc, 2 + 100 + 8);
    assert_eq!(t.stats().unwrap().allocated, u.allocated);
    // The small boxes freed go to this thread's caches, which no flush
    // empties: they leave allocated all the same.
    drop(boxes);
    assert_eq!(t.usage().unwrap().allocated, held_by_vecs);
    // A refresh of jemalloc's statistics changes none of the live figures.
    stats_refresh().unwrap();
    assert_eq!(t.usage().unwrap().allocated, held_by_vecs);
    assert_eq!(t.stats().unwrap().allocated, held_by_vecs);
    drop(vecs);
    let u = t.usage().unwrap();
    assert_eq!(u.allocated, 0);
    assert_eq!(u.nmalloc, u.ndalloc);
}

#[test]
fn purge_gives_the_unused_pages_back() {
    let t = fresh_tag("purge");
    let blocks: Vec<Vec<u8>> = t.scope(|| (0..8).map(|i| vec![i as u8 + 1; 4 * MIB]).collect());
    drop(blocks);
    thread_flush();
    t.purge().unwrap();
    let s = t.stats().unwrap();
    assert_eq!(s.allocated, 0);
    assert_eq!(s.dirty, 0);
    assert_eq!(s.muzzy, 0);
    // What stays resident is the arena's metadata, far below the 32 MiB.
    assert!(
        t.rss().unwrap() < 8 * MIB,
        "rss {} after a purge",
        t.rss().unwrap()
    );
}

#[test]
fn rss_counts_the_pages_written_under_the_tag() {
    let t = fresh_tag("rss");
    let block = t.scope(|| vec![1u8; 8 * MIB]);
    let rss = t.rss().unwrap();
    assert!(rss >= 8 * MIB, "rss {} for 8 MiB written", rss);
    drop(block);
}

// -- lifetime -------------------------------------------------------------------

#[test]
fn reset_frees_every_block_and_the_tag_serves_again() {
    let t = fresh_tag("reset");
    // The list is allocated untagged: the reset must not free it.
    let mut leaked: Vec<*mut [u8; 4096]> = Vec::with_capacity(100);
    t.scope(|| {
        for _ in 0..100 {
            leaked.push(Box::into_raw(Box::new([3u8; 4096])));
        }
    });
    thread_flush();
    assert!(t.stats().unwrap().allocated >= 100 * 4096);
    // The boxes were leaked: Rust owns none of the blocks the reset frees.
    unsafe { t.reset().unwrap() };
    let s = t.stats().unwrap();
    assert_eq!(s.allocated, 0);
    assert_eq!(s.nmalloc, s.ndalloc);
    drop(leaked);

    let again = t.scope(|| Box::new(5u64));
    assert_eq!(Tag::of(&*again), Some(t));
    assert_eq!(t.name().as_deref(), Some("rust-unit/reset"));
}

#[test]
fn destroy_refuses_a_pushed_tag_then_forgets_the_tag() {
    let t = fresh_tag("destroy");
    {
        let _g = t.enter();
        let err = unsafe { t.destroy() }.unwrap_err();
        assert_eq!(err.raw_os_error(), Some(EBUSY));
    }
    unsafe { t.destroy().unwrap() };
    assert_eq!(Tag::lookup("rust-unit/destroy"), None);
    assert_eq!(t.name(), None);
    // Until its id serves another tag (no test creates tags after this
    // check on this thread, but others may: only the failures that hold
    // either way are checked).
    if let Err(e) = t.stats() {
        assert_eq!(e.raw_os_error(), Some(EINVAL));
    }
}

// -- budgets --------------------------------------------------------------------

#[test]
fn a_hard_limit_refuses_growth_past_it_and_try_reserve_sees_it() {
    let t = fresh_tag("hard-limit");
    t.set_limit(Limit {
        hard: 16 * MIB,
        ..Limit::default()
    })
    .unwrap();
    let got = t.get_limit().unwrap();
    assert_eq!(
        (got.hard, got.soft, got.on_soft.is_none()),
        (16 * MIB, 0, true)
    );

    let mut v: Vec<u8> = Vec::new();
    t.scope(|| {
        assert!(
            v.try_reserve_exact(64 * MIB).is_err(),
            "64 MiB past a 16 MiB budget"
        );
        assert!(v.try_reserve_exact(MIB).is_ok(), "1 MiB within it");
    });
    assert!(t.stats().unwrap().mapped <= 16 * MIB);

    t.set_limit(Limit::default()).unwrap();
    t.scope(|| assert!(v.try_reserve_exact(64 * MIB).is_ok(), "no budget any more"));
}

static SOFT_CALLS: AtomicUsize = AtomicUsize::new(0);
static SOFT_MAPPED: AtomicUsize = AtomicUsize::new(0);
static SOFT_TAG: AtomicU32 = AtomicU32::new(0);

fn on_soft(tag: Tag, mapped: usize) {
    SOFT_CALLS.fetch_add(1, Ordering::SeqCst);
    SOFT_MAPPED.store(mapped, Ordering::SeqCst);
    SOFT_TAG.store(tag.id(), Ordering::SeqCst);
}

#[test]
fn a_soft_limit_calls_back_once_on_the_allocating_thread() {
    let t = fresh_tag("soft-limit");
    t.set_limit(Limit {
        soft: 8 * MIB,
        on_soft: Some(on_soft),
        ..Limit::default()
    })
    .unwrap();
    let got = t.get_limit().unwrap();
    assert_eq!(got.soft, 8 * MIB);
    assert_eq!(
        got.on_soft.map(|f| f as usize),
        Some(on_soft as fn(Tag, usize) as usize)
    );

    let big = t.scope(|| vec![1u8; 16 * MIB]);
    assert_eq!(SOFT_CALLS.load(Ordering::SeqCst), 1);
    assert_eq!(SOFT_TAG.load(Ordering::SeqCst), t.id());
    assert!(SOFT_MAPPED.load(Ordering::SeqCst) > 8 * MIB);
    let more = t.scope(|| vec![1u8; MIB]);
    assert_eq!(SOFT_CALLS.load(Ordering::SeqCst), 1, "once per crossing");
    drop((big, more));
}

#[test]
fn a_soft_limit_above_the_hard_one_is_einval() {
    let t = fresh_tag("soft-above-hard");
    let err = t
        .set_limit(Limit {
            hard: MIB,
            soft: 2 * MIB,
            on_soft: None,
        })
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(EINVAL));
}

#[test]
fn of_names_the_owner_of_any_address_inside_a_block() {
    let t = fresh_tag("of");
    let v = t.scope(|| vec![0u64; 1000]);
    assert_eq!(Tag::of(v.as_ptr()), Some(t));
    assert_eq!(Tag::of(&v[999]), Some(t));
    assert_eq!(Tag::of(&v[..]), Some(t), "a fat pointer too");
    let untagged = Box::new(0u64);
    if current_tag().is_none() {
        assert_eq!(Tag::of(&*untagged), None);
    }
    assert_eq!(Tag::of(std::ptr::null::<u8>()), None);
}
