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
/// memory (`device`) or host memory (create the tables before use), one set
/// of counters.
fn hocl_pair(slots: u64, device: bool) -> (NodeLocks, NodeLocks, Arc<LockCounters>) {
    let (t, table) = common::hocl(slots, device);
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
        let (a, b, shared) = hocl_pair(64, true);
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
        let (a, b, shared) = hocl_pair(1, true);
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
        let (a, b, shared) = hocl_pair(1, false);
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

/// A task dropped while it holds a lock (a service cancelling an
/// operation's future; `check --faults crash` killing a CS), and a release
/// dropped after its write-back was posted but before its unlock, leave the
/// lock word naming the handle with no task holding it: the handle's next
/// lock must take it back through the own-tag ledger. The ledger used to
/// keep such words "held" for ever, and the handle then spun until
/// `LockStuck` (the fg hang of `check --faults torn,delay,unreported,crash
/// --cores 2 --seeds 10`, whose second seed reused the dead CS's tag).
#[test]
fn a_dropped_lock_and_a_cut_release_are_taken_back_by_their_core() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let out = r.block_on(c, async move {
        let t = LockTechniques {
            combine: false,
            ..LockTechniques::FG_PLUS
        };
        let a = handle(t, LockTableConfig::default(), 0);
        let x = GlobalAddr::new(1, 4096);
        let h = a.lock(x).await.unwrap();
        assert!(!h.taken_stale(), "taken from the free word");
        drop(h);
        let h = a.lock(x).await.expect("the dropped lock is taken back");
        assert!(h.taken_stale(), "taken back from a name nobody released");
        // The write-back is posted at the first poll; the unlock never is.
        let mut cut = Box::pin(a.release(h, vec![(x.add(8), vec![7; 8])]));
        assert!(futures::poll!(cut.as_mut()).is_pending());
        drop(cut);
        let h = a.lock(x).await.expect("the cut release is taken back");
        a.release(h, Vec::new()).await.unwrap();
        let w = dm_runtime::read(x, 16).await.unwrap();
        (a.counters().snapshot(), w)
    });
    let (s, w) = out.unwrap();
    assert_eq!((s.acquisitions, s.takeovers), (3, 2), "{s:?}");
    // Unlocked, and the cut release's write-back landed.
    assert_eq!(&w[..], &[0, 0, 0, 0, 0, 0, 0, 0, 7, 7, 7, 7, 7, 7, 7, 7]);
}
