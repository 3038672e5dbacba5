//! RegionAlloc as the program's global allocator: std's collections land in
//! the tag pushed while they grow, keep it when they grow later, over-aligned
//! types work and are freed, and failures are null, never an abort.

use std::alloc::{GlobalAlloc, Layout};
use std::collections::HashMap;
use std::os::raw::c_void;
use std::thread;

use regionalloc::{current_tag, thread_flush, RegionAlloc, Tag};

#[global_allocator]
static A: RegionAlloc = RegionAlloc;

extern "C" {
    fn ra_malloc_usable_size(ptr: *const c_void) -> usize;
}

/// A tag no other test of this program uses.
fn fresh_tag(name: &str) -> Tag {
    let full = format!("rust-global/{}", name);
    assert_eq!(Tag::lookup(&full), None, "tag {} used by two tests", full);
    Tag::create(&full).unwrap()
}

#[repr(align(64))]
struct Line([u8; 64]);

#[repr(align(4096))]
struct Page([u8; 4096]);

#[test]
fn a_vec_a_string_and_a_hashmap_grown_under_a_tag_are_in_it() {
    let t = fresh_tag("collections");
    let (v, s, m) = t.scope(|| {
        let mut v = Vec::new();
        let mut s = String::new();
        let mut m = HashMap::new();
        for i in 0..10_000u32 {
            v.push(i);
            s.push_str("token ");
            m.insert(i, i.to_string());
        }
        (v, s, m)
    });
    assert_eq!(Tag::of(v.as_ptr()), Some(t));
    assert_eq!(Tag::of(s.as_ptr()), Some(t));
    // A key lives in the table's own block; a value's text in its String's.
    let (k, val) = m.iter().next().unwrap();
    assert_eq!(Tag::of(k), Some(t));
    assert_eq!(Tag::of(val.as_ptr()), Some(t));
}

#[test]
fn realloc_keeps_the_tag_after_the_scope_is_left() {
    let t = fresh_tag("realloc");
    let (mut v, mut lines) =
        t.scope(|| (Vec::<u64>::with_capacity(4), Vec::<Line>::with_capacity(1)));
    let base = current_tag();
    assert_ne!(base, Some(t));
    for i in 0..100_000 {
        v.push(i);
    }
    for _ in 0..1000 {
        lines.push(Line([1; 64]));
    }
    assert_eq!(Tag::of(v.as_ptr()), Some(t), "the block keeps its tag");
    assert_eq!(
        Tag::of(lines.as_ptr()),
        Some(t),
        "so does an over-aligned one"
    );
    assert_eq!(lines.as_ptr() as usize % 64, 0);
    assert!(
        v.iter().enumerate().all(|(i, &x)| x == i as u64),
        "contents moved"
    );
    assert!(lines.iter().all(|l| l.0 == [1; 64]));
    v.truncate(10);
    v.shrink_to_fit();
    assert_eq!(Tag::of(v.as_ptr()), Some(t));
    assert_eq!(v, (0..10).collect::<Vec<u64>>());
}

#[test]
fn a_string_grown_byte_by_byte_keeps_its_tag_and_its_text() {
    // Every size class from 8 bytes up: small growth moves through the
    // front cache, larger growth through ra_realloc.
    let t = fresh_tag("string-growth");
    let mut s = t.scope(|| String::from("a"));
    let mut expected = Vec::new();
    expected.push(b'a');
    for i in 0..20_000u32 {
        let c = b'a' + (i % 26) as u8;
        s.push(c as char);
        expected.push(c);
        assert_eq!(Tag::of(s.as_ptr()), Some(t));
    }
    assert_eq!(s.as_bytes(), &expected[..]);
    drop(s);
    thread_flush();
    assert_eq!(t.stats().unwrap().allocated, 0);
}

#[test]
fn usage_counts_exactly_without_a_flush() {
    let t = fresh_tag("usage");
    let before = t.usage().unwrap();
    let boxes: Vec<Box<u64>> = t.scope(|| (0..1000).map(Box::new).collect());
    let during = t.usage().unwrap();
    assert_eq!(during.nmalloc - before.nmalloc, 1000 + 1, "the boxes and the Vec");
    assert!(during.mapped > 0 && during.peak_mapped >= during.mapped);
    drop(boxes);
    let after = t.usage().unwrap();
    assert_eq!(after.ndalloc - before.ndalloc, 1000 + 1);
}

#[test]
fn a_shared_tag_spreads_threads_over_its_pool() {
    let t = fresh_tag("pool");
    t.set_arenas(2).unwrap();
    assert_eq!(t.arenas().unwrap().len(), 1, "no thread yet: one arena");
    // Eight threads alive at once, each busy in the tag (the pool counts
    // pairs that took a tcache, after some 8,192 blocks): 4 per arena, so
    // two.
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let b = barrier.clone();
            let tag = t.clone();
            std::thread::spawn(move || {
                let v: Vec<u8> = tag.scope(|| {
                    for _ in 0..20 {
                        let boxes: Vec<Box<u64>> = (0..500).map(Box::new).collect();
                        drop(boxes);
                    }
                    vec![1u8; 100]
                });
                b.wait();
                drop(v);
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    assert_eq!(t.arenas().unwrap().len(), 2);
    assert_eq!(t.set_arenas(0).unwrap_err().raw_os_error(), Some(22)); // EINVAL
}

#[test]
fn tag_trees_from_rust() {
    let tenant = fresh_tag("tree-tenant");
    let query = Tag::create_in(tenant, "tree-query").unwrap();
    assert_eq!(query.parent().unwrap(), Some(tenant));
    assert_eq!(tenant.parent().unwrap(), None);
    assert_eq!(Tag::create_in(tenant, "tree-query").unwrap(), query);
    let taken = Tag::create_in(query, "rust-global/tree-tenant").unwrap_err();
    assert_eq!(taken.raw_os_error(), Some(17)); // EEXIST
    let v: Vec<u8> = query.scope(|| vec![7u8; 1 << 20]);
    thread_flush();
    let own = tenant.stats().unwrap();
    let tree = tenant.stats_tree().unwrap();
    assert_eq!(tree.allocated, own.allocated + query.stats().unwrap().allocated);
    assert!(tree.allocated >= 1 << 20);
    drop(v);
}

#[test]
fn over_aligned_blocks_are_aligned_tagged_and_freed() {
    let t = fresh_tag("aligned");
    thread_flush();
    let before = t.stats().unwrap();
    t.scope(|| {
        let lines: Vec<Box<Line>> = (0..100).map(|_| Box::new(Line([2; 64]))).collect();
        let pages: Vec<Box<Page>> = (0..100).map(|_| Box::new(Page([3; 4096]))).collect();
        for l in &lines {
            assert_eq!(&**l as *const Line as usize % 64, 0);
            assert_eq!(l.0[63], 2);
            assert_eq!(Tag::of(&**l), Some(t));
        }
        for p in &pages {
            assert_eq!(&**p as *const Page as usize % 4096, 0);
            assert_eq!(p.0[4095], 3);
            assert_eq!(Tag::of(&**p), Some(t));
        }
        let zeroed = unsafe { A.alloc_zeroed(Layout::from_size_align(10_000, 4096).unwrap()) };
        assert!(!zeroed.is_null() && zeroed as usize % 4096 == 0);
        assert!(unsafe { std::slice::from_raw_parts(zeroed, 10_000) }
            .iter()
            .all(|&b| b == 0));
        unsafe { A.dealloc(zeroed, Layout::from_size_align(10_000, 4096).unwrap()) };
    });
    thread_flush();
    let after = t.stats().unwrap();
    assert_eq!(after.allocated, 0, "every over-aligned block was freed");
    assert_eq!(
        after.nmalloc - before.nmalloc,
        after.ndalloc - before.ndalloc
    );
}

#[test]
fn a_small_block_asking_more_alignment_than_its_size_gets_it() {
    // jemalloc's 8-byte class is only 8-aligned: RegionAlloc must not hand
    // it out for a layout of size 8, alignment 16.
    let layout = Layout::from_size_align(8, 16).unwrap();
    let blocks: Vec<*mut u8> = (0..64).map(|_| unsafe { A.alloc(layout) }).collect();
    for &p in &blocks {
        assert!(!p.is_null() && p as usize % 16 == 0);
    }
    // Grown to a size ra_realloc serves, then shrunk below its alignment
    // (by copy).
    let p = unsafe { A.realloc(blocks[0], layout, 64) };
    assert!(!p.is_null() && p as usize % 16 == 0);
    let q = unsafe { A.realloc(p, Layout::from_size_align(64, 16).unwrap(), 8) };
    assert!(!q.is_null() && q as usize % 16 == 0);
    unsafe { A.dealloc(q, layout) };
    for &p in &blocks[1..] {
        unsafe { A.dealloc(p, layout) };
    }
}

#[test]
fn zero_sized_values_never_reach_the_allocator() {
    let t = fresh_tag("zero-sized");
    thread_flush();
    let before = t.stats().unwrap().nmalloc;
    t.scope(|| {
        let unit = Box::new(());
        let units: Vec<()> = vec![(); 1_000_000];
        assert_eq!(Tag::of(&*unit), None, "a dangling, well-aligned pointer");
        assert_eq!(units.len(), 1_000_000);
    });
    thread_flush();
    assert_eq!(t.stats().unwrap().nmalloc, before);
}

#[test]
fn a_zero_size_layout_gets_a_unique_block_as_malloc_0_does() {
    // Outside GlobalAlloc's contract (callers must not pass size 0), but
    // RegionAlloc's documented behaviour.
    let layout = Layout::from_size_align(0, 1).unwrap();
    let (p, q) = unsafe { (A.alloc(layout), A.alloc(layout)) };
    assert!(!p.is_null() && !q.is_null() && p != q);
    unsafe {
        A.dealloc(p, layout);
        A.dealloc(q, layout);
    }
}

#[test]
fn a_layout_too_big_for_any_region_is_null_tagged_or_not() {
    let t = fresh_tag("too-big");
    let huge = Layout::from_size_align(isize::MAX as usize - 4095, 4096).unwrap();
    let huge_natural = Layout::from_size_align(isize::MAX as usize - 15, 16).unwrap();
    let check = || unsafe {
        assert!(A.alloc(huge).is_null());
        assert!(A.alloc_zeroed(huge).is_null());
        assert!(A.alloc(huge_natural).is_null());
        assert!(A.alloc_zeroed(huge_natural).is_null());
        let mut v: Vec<u8> = Vec::new();
        assert!(v.try_reserve(isize::MAX as usize / 2).is_err());
        let mut s = String::from("kept");
        assert!(s.try_reserve(isize::MAX as usize / 2).is_err());
        assert_eq!(s, "kept");
    };
    check();
    t.scope(check);
}

#[test]
fn a_failed_realloc_leaves_the_block_as_it_was() {
    let t = fresh_tag("failed-realloc");
    for align in [8usize, 64] {
        let layout = Layout::from_size_align(1000, align).unwrap();
        let p = t.scope(|| unsafe { A.alloc(layout) });
        assert!(!p.is_null());
        unsafe { p.write_bytes(0x5a, 1000) };
        let q = unsafe { A.realloc(p, layout, isize::MAX as usize - 4095) };
        assert!(q.is_null());
        assert!(unsafe { std::slice::from_raw_parts(p, 1000) }
            .iter()
            .all(|&b| b == 0x5a));
        assert_eq!(Tag::of(p), Some(t));
        unsafe { A.dealloc(p, layout) };
    }
}

#[test]
fn allocated_is_exact_for_std_collections_after_a_flush() {
    let t = fresh_tag("exact");
    let mut kept: Vec<Vec<u64>> = Vec::with_capacity(64);
    t.scope(|| {
        for i in 0..64 {
            let mut v = Vec::new();
            for j in 0..(i * 100) {
                v.push(j as u64);
            }
            kept.push(v);
        }
    });
    let expected: usize = kept
        .iter()
        .filter(|v| v.capacity() != 0)
        .map(|v| unsafe { ra_malloc_usable_size(v.as_ptr() as *const c_void) })
        .sum();
    thread_flush();
    assert_eq!(t.stats().unwrap().allocated, expected);
    drop(kept);
    thread_flush();
    assert_eq!(t.stats().unwrap().allocated, 0);
}

#[test]
fn a_block_freed_by_another_thread_leaves_its_tag() {
    let t = fresh_tag("cross-thread");
    let v = t.scope(|| vec![7u8; 1 << 20]);
    thread::spawn(move || {
        assert_eq!(Tag::of(v.as_ptr()), Some(t));
        drop(v);
        regionalloc::thread_flush();
    })
    .join()
    .unwrap();
    thread_flush();
    let s = t.stats().unwrap();
    assert_eq!(s.allocated, 0);
    assert_eq!(s.nmalloc, s.ndalloc);
}
