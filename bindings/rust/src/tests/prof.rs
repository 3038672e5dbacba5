//! The profiler's dumps. The profiler is process-wide: while it runs,
//! other tests' tagged blocks may be sampled, which makes them at least a
//! page long; their tests read usable sizes from the library, so their
//! figures stay exact.

use super::fresh_tag;
use crate::prof::{self, ProfFormat};

#[test]
fn every_dump_format_is_well_formed() {
    let t = fresh_tag("prof");
    // At a 64 KiB interval each 1 MiB block is sampled with probability
    // 1 - exp(-16): the dumps hold this tag's blocks.
    prof::start(64 << 10).unwrap();
    let held: Vec<Vec<u8>> = t.scope(|| (0..8).map(|_| vec![1u8; 1 << 20]).collect());
    prof::stop().unwrap();

    let tree = String::from_utf8(prof::dump(ProfFormat::Tree, Some(t)).unwrap()).unwrap();
    assert!(tree.starts_with("tag rust-unit/prof\nAll ("), "{}", tree);
    assert!(!tree.contains("All (0, #0)"), "no sample in\n{}", tree);

    let folded = String::from_utf8(prof::dump(ProfFormat::Folded, Some(t)).unwrap()).unwrap();
    assert!(!folded.is_empty());
    for line in folded.lines() {
        assert!(line.starts_with("tag:rust-unit/prof;"), "{}", line);
        let bytes = line.rsplit(' ').next().unwrap();
        assert!(bytes.parse::<u64>().is_ok(), "{}", line);
    }

    let pprof = prof::dump(ProfFormat::Pprof, None).unwrap();
    assert_eq!(&pprof[..2], &[0x1f, 0x8b], "gzip magic");

    let heap = prof::dump(ProfFormat::HeapV2, Some(t)).unwrap();
    assert!(heap.starts_with(b"heap_v2/"));
    drop(held);
}
