//! Per-index lock statistics (issue 31): handles given one `LockCounters`
//! count into it together, a handle with its own counts apart; HOCL's queue
//! waits and hand-overs are counted. Deterministic on `sim`: the contended
//! CAS and the release go to one QP, which executes them in post order.

mod common;

use common::{rt, small_cfg};
use dm_runtime::lock::{LockCounters, LockStats, LockTableConfig, LockTechniques, NodeLocks};
use dm_runtime::yield_now;
use dm_verbs::GlobalAddr;
use std::sync::Arc;

const CHUNK: u64 = 1 << 20;

fn handle(t: LockTechniques, table: LockTableConfig, core: u16) -> NodeLocks {
    NodeLocks::new(t, table, 0, core, 0, CHUNK).unwrap()
}

/// `a` takes the lock of `x`; `b` asks for it while `a` holds it, `a`
/// releases after a few yields; then `b` releases.
async fn contend(a: &NodeLocks, b: &NodeLocks, x: GlobalAddr) {
    let held = a.lock(x).await.unwrap();
    let (hb, ()) = futures::join!(b.lock(x), async {
        for _ in 0..3 {
            yield_now().await;
        }
        a.release(held, Vec::new()).await.unwrap();
    });
    b.release(hb.unwrap(), Vec::new()).await.unwrap();
}

#[test]
fn handles_given_one_arc_share_their_counters() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let out = r.block_on(c, async move {
        let (t, table) = (LockTechniques::FG_PLUS, LockTableConfig::default());
        let shared = Arc::new(LockCounters::new());
        let a = handle(t, table, 0).with_counters(shared.clone());
        let b = handle(t, table, 1).with_counters(shared.clone());
        let own = handle(t, table, 2);
        assert!(Arc::ptr_eq(a.counters(), b.counters()));
        assert!(!Arc::ptr_eq(a.counters(), own.counters()));
        contend(&a, &b, GlobalAddr::new(1, 4096)).await;
        let h = own.lock(GlobalAddr::new(1, 8192)).await.unwrap();
        own.release(h, Vec::new()).await.unwrap();
        (shared.snapshot(), own.counters().snapshot())
    });
    let (shared, own) = out.unwrap();
    assert_eq!(shared.acquisitions, 2, "{shared:?}");
    // b's first CAS precedes a's unlocking WRITE on the same QP: it fails.
    assert!(shared.cas_failures >= 1, "{shared:?}");
    assert_eq!(
        (shared.waits, shared.handovers, shared.takeovers),
        (0, 0, 0)
    );
    assert_eq!(
        own,
        LockStats {
            acquisitions: 1,
            ..LockStats::default()
        }
    );
}

/// Two handles of one CS (cores 0 and 1) under Sherman's hierarchical lock
/// (HOCL, §4.3): one CS-local lock table, `slots` 64-bit GLT slots in device
/// memory, one set of counters.
fn hocl_pair(slots: u64) -> (NodeLocks, NodeLocks, Arc<LockCounters>) {
    let t = LockTechniques {
        combine: true,
        onchip_lock: true,
        hier_lock: true,
        ..LockTechniques::FG_PLUS
    };
    let table = LockTableConfig {
        device: true,
        lanes16: false,
        slots,
    };
    let local = NodeLocks::new_local_table(&t);
    let shared = Arc::new(LockCounters::new());
    let mut a = handle(t, table, 0).with_counters(shared.clone());
    let mut b = handle(t, table, 1).with_counters(shared.clone());
    a.set_local(local.clone());
    b.set_local(local);
    (a, b, shared)
}

#[test]
fn hocl_counts_queue_waits_and_hand_overs() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let out = r.block_on(c, async move {
        let (a, b, shared) = hocl_pair(64);
        contend(&a, &b, GlobalAddr::new(1, 4096)).await;
        shared.snapshot()
    });
    // b queues on the CS-local lock; a hands it the GLT slot it still holds.
    assert_eq!(
        out.unwrap(),
        LockStats {
            acquisitions: 2,
            cas_failures: 0,
            waits: 1,
            handovers: 1,
            takeovers: 0,
            recovered: 0,
        }
    );
}

/// HOCL hands a GLT slot from one core's handle to another's; the giver's
/// own-tag ledger entry must then say it holds nothing. It used to stay
/// "held" once the receiver released the slot, and a later CAS of the
/// giver that took the slot unreported (soft-RoCE, docs/rdma.md) was never
/// recognised: the slot stayed taken by the giver's tag for ever (the
/// sherman-hier hang of 2026-11-24). Here the unreported CAS is played by
/// WRITing the giver's tag into the slot.
#[test]
fn a_handed_over_lock_leaves_the_givers_ledger_clean() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let out = r.block_on(c, async move {
        // One slot: every node's lock is at device(ms, 0).
        let (a, b, shared) = hocl_pair(1);
        let x = GlobalAddr::new(1, 4096);
        // a takes the slot by CAS and hands it to b, which releases it.
        contend(&a, &b, x).await;
        // a's CAS takes the slot without reporting it.
        dm_runtime::write(GlobalAddr::device(1, 0), 1u64.to_le_bytes().to_vec())
            .await
            .unwrap();
        let h = a
            .lock(x)
            .await
            .expect("a recognises its own unreported CAS");
        a.release(h, Vec::new()).await.unwrap();
        shared.snapshot()
    });
    let s = out.unwrap();
    assert_eq!((s.handovers, s.takeovers), (1, 1), "{s:?}");
}

/// A GLT slot in host memory left holding the tag of one core of this CS
/// while no task holds it (soft-RoCE re-executed a retransmitted CAS of
/// core 1 after its unlock, docs/rdma.md): core 0, holding the slot's
/// CS-local lock, must take it over. It used to wait for core 1, which held
/// nothing and whose tasks queued behind core 0 on the local lock (the
/// sherman-hier hang of 2026-11-26, `0x200010002`). Here the re-executed
/// CAS is played by WRITing core 1's tag into the slot.
#[test]
fn hocl_takes_a_slot_left_by_another_core_of_its_cs() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let out = r.block_on(c, async move {
        let t = LockTechniques {
            combine: true,
            onchip_lock: true,
            hier_lock: true,
            ..LockTechniques::FG_PLUS
        };
        let table = LockTableConfig {
            device: false,
            lanes16: false,
            slots: 1,
        };
        let local = NodeLocks::new_local_table(&t);
        let shared = Arc::new(LockCounters::new());
        let mut a = handle(t, table, 0).with_counters(shared.clone());
        let mut b = handle(t, table, 1).with_counters(shared.clone());
        a.set_local(local.clone());
        b.set_local(local);
        a.create_tables(2).await.unwrap();
        let x = GlobalAddr::new(1, 4096);
        contend(&a, &b, x).await;
        // The one slot of MS 1's host table: its address is in MS 1's
        // superblock at offset 0 (`glt_ptr_off`).
        let base = dm_runtime::read(a.glt_ptr(1), 8).await.unwrap();
        let slot = GlobalAddr::from_u64(u64::from_le_bytes(base[..8].try_into().unwrap()));
        // Core 1's tag: (cs 0 << 16 | core 1) + 1.
        dm_runtime::write(slot, 2u64.to_le_bytes().to_vec())
            .await
            .unwrap();
        let h = a
            .lock(x)
            .await
            .expect("core 0 takes over a slot no task of its CS holds");
        a.release(h, Vec::new()).await.unwrap();
        // And core 1 gets it afterwards as usual.
        let h = b.lock(x).await.unwrap();
        b.release(h, Vec::new()).await.unwrap();
        shared.snapshot()
    });
    let s = out.unwrap();
    assert_eq!(s.takeovers, 1, "{s:?}");
}

/// Without HOCL: a lock word left holding core 1's tag while no task holds
/// it (as above) is taken over by core 0 once core 1 answers that it
/// neither holds nor takes it; while core 1 does hold it, core 0 waits.
#[test]
fn a_word_left_by_another_core_is_taken_over_after_asking_it() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let out = r.block_on(c, async move {
        let (t, table) = (LockTechniques::FG_PLUS, LockTableConfig::default());
        let shared = Arc::new(LockCounters::new());
        let a = handle(t, table, 0).with_counters(shared.clone());
        let b = handle(t, table, 1).with_counters(shared.clone());
        let x = GlobalAddr::new(1, 4096);
        // b holds x for a long while: a asks, b is busy, nothing is taken over.
        let held = b.lock(x).await.unwrap();
        let (ha, ()) = futures::join!(a.lock(x), async {
            for _ in 0..400_000 {
                yield_now().await;
            }
            b.release(held, Vec::new()).await.unwrap();
        });
        a.release(ha.unwrap(), Vec::new()).await.unwrap();
        let busy = shared.snapshot();
        // b's re-executed CAS: its tag in the word (FG+: the node's first
        // word), with no task holding it.
        let h = b.lock(x).await.unwrap();
        b.release(h, Vec::new()).await.unwrap();
        dm_runtime::write(x, 2u64.to_le_bytes().to_vec())
            .await
            .unwrap();
        let h = a
            .lock(x)
            .await
            .expect("core 0 takes over a word core 1 left");
        a.release(h, Vec::new()).await.unwrap();
        // b takes it afterwards as usual.
        let h = b.lock(x).await.unwrap();
        b.release(h, Vec::new()).await.unwrap();
        (busy, shared.snapshot())
    });
    let (busy, s) = out.unwrap();
    assert!(
        busy.cas_failures >= 64,
        "a asked only after 64 attempts: {busy:?}"
    );
    assert_eq!(busy.takeovers, 0, "{busy:?}");
    assert_eq!(s.takeovers, 1, "{s:?}");
}

/// A word holding the tag of a core of this CS that no running executor
/// of this process has (left by an earlier process of this CS, or by an
/// executor that ended) is taken over after 64 failed attempts.
#[test]
fn a_word_left_by_a_core_that_runs_no_more_is_taken_over() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let out = r.block_on(c, async move {
        let (t, table) = (LockTechniques::FG_PLUS, LockTableConfig::default());
        let a = handle(t, table, 0);
        let x = GlobalAddr::new(1, 4096);
        // Core 3's tag; no handle of core 3 ever ran here.
        dm_runtime::write(x, 4u64.to_le_bytes().to_vec())
            .await
            .unwrap();
        let h = a.lock(x).await.expect("core 0 takes over core 3's word");
        a.release(h, Vec::new()).await.unwrap();
        a.counters().snapshot()
    });
    let s = out.unwrap();
    assert_eq!(s.takeovers, 1, "{s:?}");
    assert!(s.cas_failures >= 64, "{s:?}");
}

/// Core 1 takes and releases a hot word over and over, on its own thread,
/// so core 0's CASes keep finding core 1's tag across many holds and core 0
/// asks about it. Core 1 may answer *stale* between two holds: it must then
/// not take the word again before core 0 is done, or core 0's takeover CAS
/// would land on core 1's new hold and both would hold the lock (what lost
/// keys in the guest's nam-hybrid kill step). Every holder checks that it
/// is alone. Two threads on loopback: which interleavings occur varies
/// from run to run, but none may ever show two holders.
#[test]
fn a_stale_answer_keeps_the_asked_core_off_the_word() {
    use dm_runtime::{ExecConfig, Executor};
    use dm_verbs::Fabric;
    use std::sync::atomic::{AtomicU32, Ordering};
    let f = common::loopback_fabric();
    let x = GlobalAddr::new(1, 4096);
    let inside = Arc::new(AtomicU32::new(0));
    let worst = Arc::new(AtomicU32::new(0));
    let shared = Arc::new(LockCounters::new());
    let run = |core: u16, n: u32, len: u32| {
        let mut ex = Executor::new(f.open_queues(0, core), f.num_ms(), ExecConfig::default());
        let h = handle(LockTechniques::FG_PLUS, LockTableConfig::default(), core)
            .with_counters(shared.clone());
        let (inside, worst) = (inside.clone(), worst.clone());
        ex.block_on(async move {
            for _ in 0..n {
                let held = h.lock(x).await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                worst.fetch_max(now, Ordering::SeqCst);
                for _ in 0..len {
                    yield_now().await;
                }
                inside.fetch_sub(1, Ordering::SeqCst);
                h.release(held, Vec::new()).await.unwrap();
            }
        });
    };
    std::thread::scope(|s| {
        s.spawn(|| run(1, 20_000, 200));
        s.spawn(|| run(0, 2000, 1));
    });
    let st = shared.snapshot();
    eprintln!("{st:?}");
    assert_eq!(
        worst.load(Ordering::SeqCst),
        1,
        "two holders at once: {st:?}"
    );
}
