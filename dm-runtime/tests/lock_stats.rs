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

#[test]
fn hocl_counts_queue_waits_and_hand_overs() {
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
            device: true,
            lanes16: false,
            slots: 64,
        };
        let local = NodeLocks::new_local_table(&t);
        let shared = Arc::new(LockCounters::new());
        let mut a = handle(t, table, 0).with_counters(shared.clone());
        let mut b = handle(t, table, 1).with_counters(shared.clone());
        a.set_local(local.clone());
        b.set_local(local);
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
