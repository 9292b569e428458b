//! Issue 32, item 2: a warm get, update or scan allocates nothing, on
//! every index. One loopback CS, one core thread (the test's), 8
//! coroutines on one handle: 5,000 8-byte keys inserted, then every
//! coroutine runs gets and updates (half each; one in eight on 4 hot keys,
//! so HOCL's local hand-over and SMART's read delegation and write
//! combining run too), 200,000 each to warm up, then 10,000 each measured,
//! on the same thread and executor; or scans of 1 to 100 entries into a
//! buffer each coroutine reuses, 10,000 each to warm up and 1,000
//! measured. The heap allocations this thread makes in the measured
//! stretch, counted by this binary's global allocator, must be 0. The NAM
//! designs' memory-server handlers run on this thread too (loopback), so
//! their allocations count.
//!
//! What the warm-up is for: a per-thread pool (verb buffers, lock-table
//! wait cells, the ART cache's kept slot arrays) allocates until it holds
//! as many as the coroutines ever have out at once, and the ART caches
//! admit nodes as searches first meet them; at 20,000 keys the lock-free
//! ART's cache was still admitting about 60 nodes per 80,000 operations
//! after 1.2 million; and once the ART cache kept its nodes' type hints
//! fresh (2026-11-28), the ART baseline's pool of 256-byte READ buffers
//! reached its high-water mark (one more buffer, once in 480,000 measured
//! operations) at operation 1,215,312, just past a warm-up of 1.2 million,
//! hence 1.6 million. `dm-bench ycsb` reports the same per operation kind
//! with each phase on fresh threads (`docs/experiments/allocs-asserted.md`).

use dm_index::{IndexConfig, IndexKind, Instance, Root, Site};
use dm_runtime::{spawn, yield_now, ExecConfig, Executor, ScanBuf};
use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
use dm_verbs::{Fabric, MsConfig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

/// The system allocator, counting this thread's allocations.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|n| n.get())
}

const KEYS: u64 = 5_000;
const COROS: usize = 8;
/// Operations per coroutine: warm-up, then measured.
const WARM: u64 = 200_000;
const MEASURED: u64 = 10_000;

/// Key number `i` (distinct, spread over the key space: SplitMix64).
fn key(i: u64) -> [u8; 8] {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).to_be_bytes()
}

/// What the measured coroutines run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mix {
    /// Gets and updates ([`op`]).
    GetsUpdates,
    /// Scans of 1 to 100 entries from a random key into one reused buffer
    /// per coroutine ([`scan`]).
    Scans,
}

/// Scans each coroutine runs: warm-up, then measured (a scan READs up to
/// a hundred leaves, so fewer than [`WARM`] gets and updates).
const SCAN_WARM: u64 = 10_000;
const SCAN_MEASURED: u64 = 1_000;

/// One scan from random word `x` into `out`.
async fn scan(t: &dm_index::Index, x: u64, out: &mut ScanBuf) {
    let n = 1 + (x >> 16) as usize % 100;
    t.scan_into(&key(x % KEYS), n, out).await.unwrap();
    assert!(!out.is_empty(), "a scan from a loaded key finds it");
}

/// One operation of `mix` from random word `x` (`out`: the coroutine's
/// scan buffer).
async fn step(t: &dm_index::Index, mix: Mix, x: u64, out: &mut ScanBuf) {
    match mix {
        Mix::GetsUpdates => op(t, x).await,
        Mix::Scans => scan(t, x, out).await,
    }
}

/// One operation from random word `x`: a get or an update (one in eight
/// on the 4 hot keys).
async fn op(t: &dm_index::Index, x: u64) {
    let k = if x.is_multiple_of(8) {
        x % 4
    } else {
        (x >> 8) % KEYS
    };
    if (x >> 4).is_multiple_of(2) {
        t.get(&key(k)).await.unwrap().expect("loaded");
    } else {
        assert!(t.update(&key(k), x).await.unwrap());
    }
}

/// The next word of xorshift64 state `x`.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Allocations of the measured stretch of `kind` running `mix` (module
/// docs).
fn measured_allocs(kind: IndexKind, mix: Mix) -> u64 {
    let (warm_ops, measured_ops) = match mix {
        Mix::GetsUpdates => (WARM, MEASURED),
        Mix::Scans => (SCAN_WARM, SCAN_MEASURED),
    };
    let fabric = LoopbackFabric::new(LoopbackConfig {
        num_ms: 2,
        ms: MsConfig {
            region_bytes: 256 << 20,
            chunk_bytes: 1 << 20,
            ..MsConfig::default()
        },
        ..Default::default()
    });
    dm_index::register_handlers(&fabric);
    let site = Site::of(&fabric, 0..1, 1);
    let cfg = IndexConfig::new(kind).with_cache_bytes(64 << 20);
    let inst = Arc::new(Instance::new("warm", cfg, site, Root::HandBuilt, 1).unwrap());
    let mut ex = Executor::new(fabric.open_queues(0, 0), 2, ExecConfig::default());
    let i = inst.clone();
    ex.block_on(async move { i.create_root(0, 0).await })
        .unwrap();
    let tree = Rc::new(inst.open(0, 0, 0).unwrap());
    ex.block_on(async move {
        // The load: every coroutine inserts its share.
        let load: Vec<_> = (0..COROS as u64)
            .map(|c| {
                let t = tree.clone();
                spawn(async move {
                    for k in (c..KEYS).step_by(COROS) {
                        t.insert(&key(k), k).await.unwrap();
                    }
                })
            })
            .collect();
        for h in load {
            h.await.unwrap();
        }
        let warm = Rc::new(Cell::new(0usize));
        let done = Rc::new(Cell::new(0usize));
        let span = Rc::new(Cell::new((None::<u64>, 0u64)));
        let tasks: Vec<_> = (0..COROS as u64)
            .map(|c| {
                let (t, warm, done, span) =
                    (tree.clone(), warm.clone(), done.clone(), span.clone());
                spawn(async move {
                    let mut x = c.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
                    let mut out = ScanBuf::new();
                    for _ in 0..warm_ops {
                        step(&t, mix, next(&mut x), &mut out).await;
                    }
                    warm.set(warm.get() + 1);
                    while warm.get() < COROS {
                        yield_now().await;
                    }
                    if span.get().0.is_none() {
                        span.set((Some(allocs()), 0));
                    }
                    for _ in 0..measured_ops {
                        step(&t, mix, next(&mut x), &mut out).await;
                    }
                    done.set(done.get() + 1);
                    if done.get() == COROS {
                        span.set((span.get().0, allocs()));
                    }
                })
            })
            .collect();
        for h in tasks {
            h.await.unwrap();
        }
        let (a0, a1) = span.get();
        a1 - a0.expect("the measured stretch started")
    })
}

/// Fails unless `mix`'s measured stretch allocates nothing on every index
/// (`ops`: measured operations per coroutine, `what`: their name).
fn assert_none_allocate(mix: Mix, ops: u64, what: &str) {
    let mut bad = Vec::new();
    for kind in IndexKind::ALL {
        let n = measured_allocs(kind, mix);
        println!(
            "{}: {n} allocations in {} warm {what}",
            kind.name(),
            ops * COROS as u64
        );
        if n != 0 {
            bad.push((kind.name(), n));
        }
    }
    assert!(bad.is_empty(), "allocations in warm {what}: {bad:?}");
}

#[test]
fn warm_gets_and_updates_allocate_nothing_on_any_index() {
    assert_none_allocate(Mix::GetsUpdates, MEASURED, "gets and updates");
}

/// The same for scans: after the warm-up, a scan into a reused buffer
/// allocates nothing on any index (issue 32; `dm-bench`'s
/// `tests/allocs.rs` bounds the per-scan figure with each phase on fresh
/// threads).
#[test]
fn warm_scans_allocate_nothing_on_any_index() {
    assert_none_allocate(Mix::Scans, SCAN_MEASURED, "scans");
}
