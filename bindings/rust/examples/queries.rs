//! Per-query memory, as a language server wants it: each query runs under
//! a tag of its own, and when it returns, the tag's `allocated` is exactly
//! what its result holds (no header per block, no sampling). Then the
//! result is dropped, or, for a cancelled query, leaked and freed all at
//! once by a reset, and the tag is destroyed so that its slot serves the
//! next query.
//!
//!     cargo run --offline --example queries

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::raw::c_void;

use regionalloc::{RegionAlloc, Tag};

#[global_allocator]
static ALLOC: RegionAlloc = RegionAlloc;

extern "C" {
    fn ra_malloc_usable_size(ptr: *const c_void) -> usize;
}

/// The input every query reads: a generated "source file", untagged.
fn source() -> String {
    let words = [
        "fn", "let", "match", "impl", "struct", "value", "parse", "index", "query", "tag",
    ];
    let mut s = String::new();
    for i in 0..20_000usize {
        s.push_str(words[i % words.len()]);
        s.push_str(&(i % 997).to_string());
        s.push(if i % 12 == 11 { '\n' } else { ' ' });
    }
    s
}

fn parse(src: &str) -> Vec<String> {
    src.split_whitespace().map(String::from).collect()
}

fn index(src: &str) -> HashMap<String, Vec<u32>> {
    let mut postings: HashMap<String, Vec<u32>> = HashMap::new();
    for (pos, word) in src.split_whitespace().enumerate() {
        postings
            .entry(word.to_string())
            .or_default()
            .push(pos as u32);
    }
    postings
}

fn typecheck(src: &str) -> BTreeMap<usize, Vec<String>> {
    let mut lines = BTreeMap::new();
    for (n, line) in src.lines().enumerate() {
        lines.insert(n, line.split(' ').map(|w| format!("{}: ?", w)).collect());
    }
    lines
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// Runs `query` under a fresh tag and prints what its result holds.
fn run<R>(name: &str, query: impl FnOnce() -> R) -> io::Result<(Tag, R)> {
    let tag = Tag::create(&format!("query/{}", name))?;
    let result = tag.scope(query);
    // Exact as soon as the query returns: what the query freed into this
    // thread's caches is not counted, with no flush.
    let s = tag.stats()?;
    println!(
        "query {}: allocated {} B in {} blocks, peak mapped {:.1} MiB (tag id {})",
        name,
        s.allocated,
        s.nmalloc - s.ndalloc,
        mib(s.peak_mapped),
        tag.id()
    );
    Ok((tag, result))
}

fn main() -> io::Result<()> {
    // std's lazily created state (stdout's buffer) is created here, outside
    // every tag: a reset must never free it.
    println!("per-query memory: exact allocated bytes, read live");
    let src = source();

    let (tag, tokens) = run("parse", || parse(&src))?;
    let held: usize = unsafe { ra_malloc_usable_size(tokens.as_ptr() as *const c_void) }
        + tokens
            .iter()
            .map(|t| unsafe { ra_malloc_usable_size(t.as_ptr() as *const c_void) })
            .sum::<usize>();
    println!(
        "  check: the result's {} blocks sum to {} B",
        tokens.len() + 1,
        held
    );
    drop(tokens);
    finish("parse", tag, "drop")?;

    let (tag, postings) = run("index", || index(&src))?;
    println!("  {} distinct words", postings.len());
    drop(postings);
    finish("index", tag, "drop")?;

    // A cancelled query: nobody will read its result, which is leaked, then
    // freed at once with every other block of the tag.
    let (tag, types) = run("typecheck", || typecheck(&src))?;
    std::mem::forget(types);
    // SAFETY: the only values in the tag's blocks were just leaked.
    unsafe { tag.reset()? };
    finish("typecheck", tag, "reset")?;
    Ok(())
}

/// Prints the tag's allocated bytes after the result went, then destroys
/// the tag (whose slot the next query's tag reuses).
fn finish(name: &str, tag: Tag, how: &str) -> io::Result<()> {
    let after = tag.stats()?.allocated;
    // SAFETY: no block of the tag is left to free.
    unsafe { tag.destroy()? };
    println!("query {}: after {} {} B; tag destroyed", name, how, after);
    Ok(())
}
