//! Vec, String and HashMap churn under RegionAlloc (untagged and with a tag
//! pushed), std's System allocator and glibc's malloc itself, in rounds
//! that alternate the contenders; prints medians and ratios to System.
//!
//!     cargo bench --offline --bench churn [-- --rounds N] [-- --quick]
//!
//! A global allocator is process-wide, and every block must go back to the
//! allocator it came from, including those std allocates before main. So
//! each contender runs in processes of its own: the bench runs itself again
//! with CHURN_ALLOCATOR set, which the dispatching allocator below reads at
//! its first call (before main) and never changes. Every contender pays the
//! same dispatch, one load and a predictable branch per call. Ratios are
//! therefore quotients of medians over processes, not of rounds in one
//! process as in the C benches; the range column shows how far single
//! processes spread.
//!
//! In a process linked with libregionalloc built with its malloc override
//! (the default), System's malloc is libregionalloc's own, untagged unless
//! a tag is pushed: the glibc row, through glibc's __libc_malloc family,
//! is the allocator a Rust program has without the library.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::env;
use std::ffi::CStr;
use std::fs;
use std::hash::BuildHasherDefault;
use std::os::raw::{c_char, c_void};
use std::process::{self, Command};
use std::ptr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use regionalloc::{RegionAlloc, Tag};

// -- the contenders ---------------------------------------------------------------

extern "C" {
    fn getenv(name: *const c_char) -> *const c_char;
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_free(ptr: *mut c_void);
}

/// glibc's malloc, by the names glibc keeps for it whatever `malloc` is
/// bound to; the alignment rules are std's System allocator's.
struct Glibc;

unsafe impl GlobalAlloc for Glibc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if l.align() <= 16 && l.align() <= l.size() {
            __libc_malloc(l.size()) as *mut u8
        } else {
            __libc_memalign(l.align(), l.size()) as *mut u8
        }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if l.align() <= 16 && l.align() <= l.size() {
            return __libc_calloc(1, l.size()) as *mut u8;
        }
        let p = self.alloc(l);
        if !p.is_null() {
            ptr::write_bytes(p, 0, l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, _l: Layout) {
        __libc_free(p as *mut c_void)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        if l.align() <= 16 && l.align() <= new_size {
            return __libc_realloc(p as *mut c_void, new_size) as *mut u8;
        }
        let new = self.alloc(Layout::from_size_align_unchecked(new_size, l.align()));
        if !new.is_null() {
            ptr::copy_nonoverlapping(p, new, l.size().min(new_size));
            self.dealloc(p, l);
        }
        new
    }
}

const UNSET: u8 = 0;
const SYSTEM: u8 = 1;
const GLIBC: u8 = 2;
const REGIONALLOC: u8 = 3;

static CHOICE: AtomicU8 = AtomicU8::new(UNSET);

/// The process's allocator, chosen from CHURN_ALLOCATOR at the first call
/// (getenv does not allocate). The first call comes from std's start-up,
/// on one thread, before any other.
#[cold]
fn decide() -> u8 {
    let v = unsafe { getenv(b"CHURN_ALLOCATOR\0".as_ptr() as *const c_char) };
    let c = if v.is_null() {
        SYSTEM
    } else {
        match unsafe { CStr::from_ptr(v) }.to_bytes() {
            b"glibc" => GLIBC,
            b"ra" | b"ra-tagged" => REGIONALLOC,
            _ => SYSTEM,
        }
    };
    CHOICE.store(c, Ordering::Relaxed);
    c
}

#[inline(always)]
fn choice() -> u8 {
    let c = CHOICE.load(Ordering::Relaxed);
    if c != UNSET {
        c
    } else {
        decide()
    }
}

struct Dispatch;

unsafe impl GlobalAlloc for Dispatch {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        match choice() {
            REGIONALLOC => RegionAlloc.alloc(l),
            GLIBC => Glibc.alloc(l),
            _ => System.alloc(l),
        }
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        match choice() {
            REGIONALLOC => RegionAlloc.alloc_zeroed(l),
            GLIBC => Glibc.alloc_zeroed(l),
            _ => System.alloc_zeroed(l),
        }
    }
    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        match choice() {
            REGIONALLOC => RegionAlloc.dealloc(p, l),
            GLIBC => Glibc.dealloc(p, l),
            _ => System.dealloc(p, l),
        }
    }
    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        match choice() {
            REGIONALLOC => RegionAlloc.realloc(p, l, n),
            GLIBC => Glibc.realloc(p, l, n),
            _ => System.realloc(p, l, n),
        }
    }
}

#[global_allocator]
static ALLOC: Dispatch = Dispatch;

/// (CHURN_ALLOCATOR value, name in the table), the baseline first.
const CONTENDERS: [(&str, &str); 4] = [
    ("system", "System (baseline)"),
    ("ra", "RegionAlloc untagged"),
    ("ra-tagged", "RegionAlloc tagged"),
    ("glibc", "glibc malloc (__libc_*)"),
];

// -- the workloads -------------------------------------------------------------------

/// xorshift64*: the same sizes in every process.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The result of a pass, read with a volatile load so that no allocation
/// can be optimized away.
fn consume(x: usize) {
    unsafe { ptr::read_volatile(&x) };
}

/// One op: a new Vec grown by push to 1-64 u64 (reallocs on the way),
/// replacing the oldest of 1024 live ones.
fn vec_pass(ops: usize) -> f64 {
    let mut ring: Vec<Vec<u64>> = (0..1024).map(|_| Vec::new()).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let start = Instant::now();
    for i in 0..ops {
        let n = 1 + (rng.next() % 64) as usize;
        let mut v = Vec::new();
        for j in 0..n {
            v.push(j as u64);
        }
        ring[i % 1024] = v;
    }
    let ns = start.elapsed().as_nanos() as f64 / ops as f64;
    consume(ring.iter().map(|v| v.len()).sum());
    ns
}

const WORDS: [&str; 8] = [
    "alloc",
    "tag",
    "region",
    "jemalloc",
    "x",
    "arena",
    "purge",
    "checkpoint",
];

/// One op: a String of 1-16 words by push_str, replacing the oldest of
/// 1024 live ones.
fn string_pass(ops: usize) -> f64 {
    let mut ring: Vec<String> = (0..1024).map(|_| String::new()).collect();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let start = Instant::now();
    for i in 0..ops {
        let words = 1 + (rng.next() % 16) as usize;
        let mut s = String::new();
        for _ in 0..words {
            s.push_str(WORDS[(rng.next() % 8) as usize]);
            s.push(' ');
        }
        ring[i % 1024] = s;
    }
    let ns = start.elapsed().as_nanos() as f64 / ops as f64;
    consume(ring.iter().map(|s| s.len()).sum());
    ns
}

type Map = HashMap<u64, u64, BuildHasherDefault<DefaultHasher>>;

/// One op: a HashMap of 1-32 entries by insert (its table regrown on the
/// way), replacing the oldest of 256 live ones. The hasher has fixed keys,
/// so every process does the same work.
fn hashmap_pass(ops: usize) -> f64 {
    let mut ring: Vec<Map> = (0..256).map(|_| Map::default()).collect();
    let mut rng = Rng(0x6a09_e667_f3bc_c909);
    let start = Instant::now();
    for i in 0..ops {
        let n = 1 + rng.next() % 32;
        let mut m = Map::default();
        for k in 0..n {
            m.insert(k.wrapping_mul(0x9e37_79b9), k);
        }
        ring[i % 256] = m;
    }
    let ns = start.elapsed().as_nanos() as f64 / ops as f64;
    consume(ring.iter().map(|m| m.len()).sum());
    ns
}

/// A timed pass of `ops` ops: nanoseconds per op.
type Pass = fn(usize) -> f64;

/// (name in the table, the pass, ops per pass at scale 1).
const WORKLOADS: [(&str, Pass, usize); 3] = [
    ("Vec: push 1-64 u64, ring 1024", vec_pass, 400_000),
    (
        "String: push_str 1-16 words, ring 1024",
        string_pass,
        300_000,
    ),
    ("HashMap: insert 1-32, ring 256", hashmap_pass, 100_000),
];

// -- a child: one contender, one round ------------------------------------------------

fn die(msg: &str) -> ! {
    eprintln!("churn: {}", msg);
    process::exit(1);
}

/// Runs every workload once untimed, once timed, under the contender the
/// allocator was chosen for; prints "<index> <ns per op>" lines.
fn child(contender: &str, scale: f64) {
    let tagged = contender == "ra-tagged";
    let tag = Tag::create("churn").unwrap_or_else(|e| die(&format!("Tag::create: {}", e)));
    let _guard = if tagged || contender == "glibc" {
        Some(tag.enter())
    } else {
        None
    };
    // A contender that is not what it says would make its numbers
    // meaningless: tagged blocks must land in the tag, glibc's never.
    let probe = Box::new(0u64);
    let owner = Tag::of(&*probe);
    if tagged && owner != Some(tag) {
        die("a block allocated under the tag is not in its region");
    }
    if contender == "glibc" && owner.is_some() {
        die("the glibc contender's block is in a tag's region");
    }
    drop(probe);
    for (i, (_, pass, ops)) in WORKLOADS.iter().enumerate() {
        let ops = ((*ops as f64) * scale).max(1.0) as usize;
        pass(ops / 4);
        println!("{} {}", i, pass(ops));
    }
}

// -- the parent: rounds, medians, the table --------------------------------------------

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn first_line_with(path: &str, key: &str) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    Some(line.split(':').nth(1)?.trim().to_string())
}

fn machine_line() -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let model = first_line_with("/proc/cpuinfo", "model name").unwrap_or_else(|| "?".into());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let debian = fs::read_to_string("/etc/debian_version").unwrap_or_default();
    format!(
        "{} CPUs, {}, Linux {}, Debian {}, {}",
        cpus,
        model,
        kernel.trim(),
        debian.trim(),
        env!("REGIONALLOC_RUSTC_VERSION")
    )
}

/// Whether System's malloc is libregionalloc's: a block from it, under a
/// tag, lands in the tag only then.
fn system_is_regionalloc() -> bool {
    let tag = match Tag::create("churn-probe") {
        Ok(t) => t,
        Err(_) => return false,
    };
    tag.scope(|| unsafe {
        let l = Layout::from_size_align(64, 8).unwrap();
        let p = System.alloc(l);
        let ours = Tag::of(p).is_some();
        System.dealloc(p, l);
        ours
    })
}

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    let scale: f64 = env::var("CHURN_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    if args.iter().any(|a| a == "--child") {
        child(&env::var("CHURN_ALLOCATOR").unwrap_or_default(), scale);
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let mut rounds = if quick { 3 } else { 7 };
    if let Some(i) = args.iter().position(|a| a == "--rounds") {
        rounds = args
            .get(i + 1)
            .and_then(|s| s.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| die("--rounds takes a positive number"));
    }
    let scale = if quick { scale / 10.0 } else { scale };
    let exe = env::current_exe().unwrap_or_else(|e| die(&format!("current_exe: {}", e)));

    // samples[contender][workload]: ns per op, one per round.
    let mut samples = vec![vec![Vec::new(); WORKLOADS.len()]; CONTENDERS.len()];
    let started = Instant::now();
    for round in 0..rounds {
        for k in 0..CONTENDERS.len() {
            let c = (round + k) % CONTENDERS.len();
            let out = Command::new(&exe)
                .arg("--child")
                .env("CHURN_ALLOCATOR", CONTENDERS[c].0)
                .env("CHURN_SCALE", scale.to_string())
                .output()
                .unwrap_or_else(|e| die(&format!("running {}: {}", exe.display(), e)));
            if !out.status.success() {
                die(&format!(
                    "{} round {} failed: {}",
                    CONTENDERS[c].0,
                    round,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let mut f = line.split(' ');
                if let (Some(Ok(w)), Some(Ok(ns))) = (
                    f.next().map(str::parse::<usize>),
                    f.next().map(str::parse::<f64>),
                ) {
                    samples[c][w].push(ns);
                }
            }
        }
    }

    println!("regionalloc Rust churn bench (bindings/rust, cargo bench --bench churn)");
    println!("machine: {}", machine_line());
    println!(
        "System:  {}",
        if system_is_regionalloc() {
            "the process malloc, which is libregionalloc's (its malloc override), untagged"
        } else {
            "the process malloc, not libregionalloc's (the library was built with --disable-override)"
        }
    );
    println!(
        "run:     {} rounds x {} contenders, a process each (a warm-up pass, then one timed pass), \
         a different contender first each round; CHURN_SCALE={}, {:.0} s{}",
        rounds,
        CONTENDERS.len(),
        scale,
        started.elapsed().as_secs_f64(),
        if cfg!(debug_assertions) { "; DEBUG BUILD, not a measurement" } else { "" }
    );
    println!();
    println!(
        "{:<40} {:<26} {:>8} {:<6} {:>9}  range",
        "workload", "contender", "median", "unit", "x System"
    );
    println!(
        "{:<40} {:<26} {:>8} {:<6} {:>9}  -----",
        "--------", "---------", "------", "----", "--------"
    );
    for (w, (wname, _, _)) in WORKLOADS.iter().enumerate() {
        let base = median(&mut samples[0][w].clone());
        for (c, (_, cname)) in CONTENDERS.iter().enumerate() {
            let v = &mut samples[c][w];
            let m = median(v);
            println!(
                "{:<40} {:<26} {:>8.1} {:<6} {:>9.2}  {:.1}-{:.1}",
                if c == 0 { *wname } else { "" },
                cname,
                m,
                "ns/op",
                m / base,
                v[0],
                v[v.len() - 1]
            );
        }
        println!();
    }
    println!("x System: the contender's median over its processes divided by System's median.");
    println!("range: the fastest and slowest process.");
}
