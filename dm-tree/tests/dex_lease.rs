//! DEX in lease mode (issue 33, `dm_tree::dex`, "A compute server that
//! dies"): a leaf split cut after both leaves were written and before its
//! separator reached the parent (a dropped insert future, as a killed CS
//! leaves it, right after the parent's lock CAS) is rolled forward by the
//! CS's next incarnation, and every acknowledged write is in the pool
//! (write-through). Sim, virtual time, deterministic.

mod model;

use dm_runtime::lock::{LeaseConfig, Member};
use dm_runtime::task_stats;
use dm_tree::{DexCluster, DexConfig, DexTree, TreeConfig};
use model::k;
use std::sync::Arc;

const CHUNK: u64 = 64 << 10;

/// A one-CS DEX cluster whose cache admits every leaf (so the split is a
/// cached leaf's), offloading off.
fn cluster(tcfg: TreeConfig) -> Arc<DexCluster> {
    let cfg = DexConfig {
        cache_bytes: 1 << 20,
        leaf_admission: 1.0,
        offload: false,
        ..Default::default()
    };
    DexCluster::new(tcfg, cfg, 1).unwrap()
}

/// Inserts keys 0, 10, 20, ...: the first `warm` to their end, then each
/// until it has posted `nth` CASes, where it is dropped. The first split's
/// CAS grows the root (so `warm` lets the root grow first); later, a leaf
/// split's first CAS locks the leaf's parent (both leaves are written by
/// then) and, when the parent splits too, its second locks the
/// grandparent (both inner halves written). Returns the keys inserted
/// and the cut key.
async fn insert_until_cut(t: &DexTree, warm: u64, nth: u64) -> (Vec<u64>, u64) {
    let mut done = Vec::new();
    for i in 0..2000u64 {
        let key = i * 10;
        let cas0 = task_stats().cas;
        let kk = k(key);
        let mut ins = Box::pin(t.insert(&kk, key + 1));
        loop {
            if futures::poll!(ins.as_mut()).is_ready() {
                done.push(key);
                break;
            }
            if i >= warm && task_stats().cas >= cas0 + nth {
                drop(ins);
                return (done, key);
            }
            dm_runtime::yield_now().await;
        }
    }
    panic!("no insert posted {nth} CASes");
}

/// Cuts an insert as [`insert_until_cut`] does, restarts the CS (a new
/// incarnation, an empty cache), checks and rewrites every key through
/// it, and returns how many splits it rolled forward.
fn cut_and_restart(warm: u64, nth: u64) -> u64 {
    let (mut rt, tcfg) = model::sim_cluster(1, 8 << 20, 7);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let m = Member::join(0, LeaseConfig::SIM, CHUNK).await.unwrap();
        let t = DexTree::create(cluster(tcfg), 0, 0)
            .await
            .unwrap()
            .with_member(m.clone())
            .unwrap();
        let (done, cut) = insert_until_cut(&t, warm, nth).await;
        // Every acknowledged insert is in the pool already (write-through):
        // the B-link tree underneath finds them without a flush.
        let pool = t.fg().scan(&k(0), usize::MAX).await.unwrap();
        let want: Vec<_> = done.iter().map(|&x| (k(x), x + 1)).collect();
        assert_eq!(pool, want, "the pool before any flush");
        // The CS restarts: a new incarnation, an empty cache.
        m.stop();
        drop(t);
        let m2 = Member::join(0, LeaseConfig::SIM, CHUNK).await.unwrap();
        let cl = cluster(tcfg);
        let t = DexTree::open(cl.clone(), 0, 0)
            .unwrap()
            .with_member(m2.clone())
            .unwrap();
        for &x in &done {
            assert_eq!(t.get(&k(x)).await.unwrap(), Some(x + 1), "key {x}");
        }
        assert_eq!(t.get(&k(cut)).await.unwrap(), None, "the cut insert");
        for &x in done.iter().chain([&cut]) {
            t.insert(&k(x), 1000 + x).await.unwrap();
        }
        let mut want: Vec<_> = done.iter().map(|&x| (k(x), 1000 + x)).collect();
        want.push((k(cut), 1000 + cut));
        assert_eq!(t.scan(&k(0), usize::MAX).await.unwrap(), want);
        assert_eq!(t.fg().scan(&k(0), usize::MAX).await.unwrap(), want);
        m2.stop();
        cl.stats(0).cache.rolled_forward
    })
    .unwrap()
}

/// A leaf split cut before its separator: the restarted CS's miss on the
/// left leaf finds it ending below what its parent routes to it
/// (`miss::adopt_split`). Without the roll forward, every operation on
/// its keys re-reads the parent until it gives up (`Corrupt`).
#[test]
fn a_cut_leaf_split_is_rolled_forward_by_the_next_incarnation() {
    assert!(cut_and_restart(20, 1) >= 1);
}

/// An inner node's split cut before its separator (the grandparent's
/// lock CAS posted, and so left taken by the dead incarnation): the
/// restarted CS's traversal finds the cached inner node ending below the
/// key, and after a lease of refreshing walks the route and inserts the
/// separator (`split::repair_route`), taking the grandparent's lock over.
#[test]
fn a_cut_inner_split_is_rolled_forward_by_the_next_incarnation() {
    assert!(cut_and_restart(300, 2) >= 1);
}

/// A write-through whose WRITE fails (core 0's QP broken) must not leave
/// its change to be served from the CS's cache: the insert fails, and the
/// CS's other core READs the leaf again and finds the old value, as the
/// pool has it (a dead CS would take the cached change with it). Without
/// `Frame::reread` the get returned the failed insert's value.
#[test]
fn a_failed_write_through_is_not_served_from_the_cache() {
    let (mut rt, tcfg) = model::sim_cluster(1, 8 << 20, 7);
    let (c0, c1) = (rt.add_core(0, 0), rt.add_core(0, 1));
    let cl = cluster(tcfg);
    let (cl0, cl1) = (cl.clone(), cl.clone());
    let m = rt
        .block_on(c0, async move {
            let m = Member::join(0, LeaseConfig::SIM, CHUNK).await.unwrap();
            let t = DexTree::create(cl0.clone(), 0, 0)
                .await
                .unwrap()
                .with_member(m.clone())
                .unwrap();
            for x in 0..20u64 {
                t.insert(&k(x), x + 1).await.unwrap();
            }
            // Core 1's handle is opened and served once now, so its first
            // operation below waits no lease (`wait_out_predecessor`).
            m
        })
        .unwrap();
    let m1 = m.clone();
    rt.block_on(c1, async move {
        let t = DexTree::open(cl1, 0, 1).unwrap().with_member(m1).unwrap();
        assert_eq!(t.get(&k(5)).await.unwrap(), Some(6));
    })
    .unwrap();
    rt.fabric().break_qp(c0.0, 0);
    let (cl0, m0) = (cl.clone(), m.clone());
    rt.block_on(c0, async move {
        let t = DexTree::open(cl0, 0, 0).unwrap().with_member(m0).unwrap();
        assert!(t.insert(&k(5), 999).await.is_err(), "the WRITE fails");
    })
    .unwrap();
    let cl1 = cl.clone();
    rt.block_on(c1, async move {
        let t = DexTree::open(cl1.clone(), 0, 1)
            .unwrap()
            .with_member(m.clone())
            .unwrap();
        assert_eq!(
            t.get(&k(5)).await.unwrap(),
            Some(6),
            "served from the cache"
        );
        assert_eq!(t.fg().get(&k(5)).await.unwrap(), Some(6), "the pool");
        assert_eq!(cl1.stats(0).cache.rereads, 1);
        t.insert(&k(5), 7).await.unwrap();
        assert_eq!(t.get(&k(5)).await.unwrap(), Some(7));
        m.stop();
    })
    .unwrap();
}
