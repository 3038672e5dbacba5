use crate::{memory_limit, on_pressure, set_memory_limit, Pressure};

use super::fresh_tag;

// One test sets the limit: the harness's threads share the process. A
// limit far above what the tests hold starts the watcher without pressure.
#[test]
fn the_limit_set_read_and_taken_off() {
    let before = memory_limit();
    set_memory_limit(1 << 40).unwrap();
    assert_eq!(memory_limit(), 1 << 40);
    set_memory_limit(0).unwrap();
    assert_eq!(memory_limit(), 0);
    set_memory_limit(before).unwrap();
}

#[test]
fn priorities_and_callbacks() {
    let tag = fresh_tag("priorities_and_callbacks");
    tag.set_priority(-1).unwrap();
    tag.set_priority(5).unwrap();
    on_pressure(|level, current, limit| {
        assert_ne!(level, Pressure::None);
        assert!(current >= limit / 100 * 90);
    })
    .unwrap();
    // SAFETY: the tag holds no block and is on no stack.
    unsafe { tag.destroy() }.unwrap();
}
