//! DEX (`dm_tree::dex`) on the sim fabric with strict (8-byte) torn READs:
//! against a model with tiny caches (cooling, eviction, second chances,
//! offloads and their fallbacks), concurrently across two CSs with a
//! repartition in the middle, verb counts per path, and errors.

use dm_runtime::{SimCore, SimRuntime};
use dm_tree::{DexCluster, DexConfig, DexTree, TreeConfig, TreeError};
mod model;

use model::{k, matches_btreemap, Op};
use proptest::prelude::*;
use std::rc::Rc;
use std::sync::Arc;

fn sim(num_ms: u16, seed: u64) -> (SimRuntime, TreeConfig) {
    model::sim_cluster(num_ms, 8 << 20, seed)
}

/// A DEX config with a cache of `frames` nodes of 128 bytes, offloading
/// from the start (window 2), at level <= 1 (the trees here are short).
fn dex(frames: u64, bounds: Vec<Vec<u8>>) -> DexConfig {
    DexConfig {
        bounds,
        cache_bytes: frames * 128,
        offload_level: 1,
        leaf_admission: 0.5,
        window: 2,
        explore: 0.2,
        forward: true,
        ..Default::default()
    }
}

fn run_model(num_cs: u16, frames: u64, ops: Vec<Op>) -> bool {
    let (mut rt, tcfg) = sim(2, 3);
    let bounds = (1..num_cs).map(|i| k(i as u64 * 70)).collect();
    let cl = DexCluster::new(tcfg, dex(frames, bounds), num_cs).unwrap();
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let t = DexTree::create(cl.clone(), 0, 0).await.unwrap();
        matches_btreemap(&t, ops).await;
        // After a flush the pool alone holds the same tree.
        t.flush().await.unwrap();
        assert_eq!(
            t.fg().scan(&k(0), usize::MAX).await.unwrap(),
            t.scan(&k(0), usize::MAX).await.unwrap()
        );
        true
    })
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn one_cs_matches_btreemap(ops in proptest::collection::vec(model::op(|x| x, 40), 1..400)) {
        prop_assert!(run_model(1, 6, ops));
    }

    #[test]
    fn three_partitions_forwarded_match_btreemap(ops in proptest::collection::vec(model::op(|x| x, 40), 1..400)) {
        prop_assert!(run_model(3, 5, ops));
    }
}

/// Cores of CSs 0 and 1 insert and update disjoint keys concurrently (each
/// in its own partition and forwarded), with torn READs and delays; bound 0
/// moves in the middle of the run. Every key then holds its last value,
/// through DEX and, after a flush, in the pool.
#[test]
fn concurrent_clients_and_a_repartition() {
    for seed in 0..4 {
        let (mut rt, tcfg) = sim(2, seed);
        let cl = DexCluster::new(tcfg, dex(12, vec![k(500)]), 2).unwrap();
        let cores: Vec<SimCore> = (0..4).map(|i| rt.add_core(i % 2, i / 2)).collect();
        rt.block_on(cores[0], DexTree::create(cl.clone(), 0, 0))
            .unwrap()
            .unwrap();
        let trees: Vec<Rc<DexTree>> = (0..4)
            .map(|i| Rc::new(DexTree::open(cl.clone(), (i % 2) as u16, (i / 2) as u16).unwrap()))
            .collect();
        let mut hs = Vec::new();
        for w in 0..8u64 {
            let t = trees[w as usize % 4].clone();
            hs.push(rt.spawn_on(cores[w as usize % 4], async move {
                for i in 0..60u64 {
                    let x = i * 17 + w;
                    t.insert(&k(x), x).await.unwrap();
                    if i % 3 == 0 {
                        assert!(t.update(&k(x), x + 1).await.unwrap());
                    }
                }
            }));
        }
        let t = trees[1].clone();
        let mover = rt.spawn_on(cores[1], async move {
            dm_runtime::yield_until(150_000).await;
            t.repartition(0, k(333)).await.unwrap()
        });
        rt.run();
        assert!(
            hs.iter().all(|h| h.is_finished()) && mover.is_finished(),
            "seed {seed}"
        );
        assert_eq!(cl.bounds(), vec![k(333)]);
        let t = trees[0].clone();
        rt.block_on(cores[0], async move {
            let want: Vec<(Vec<u8>, u64)> = {
                let mut v: Vec<u64> = (0..8u64)
                    .flat_map(|w| (0..60u64).map(move |i| i * 17 + w))
                    .collect();
                v.sort();
                v.into_iter()
                    .map(|x| (k(x), if (x / 17) % 3 == 0 { x + 1 } else { x }))
                    .collect()
            };
            assert_eq!(t.scan(&k(0), usize::MAX).await.unwrap(), want);
            t.flush().await.unwrap();
            assert_eq!(t.fg().scan(&k(0), usize::MAX).await.unwrap(), want);
        })
        .unwrap();
        let s: Vec<_> = (0..2).map(|c| cl.stats(c)).collect();
        assert!(s.iter().all(|s| s.repartitions == 1), "{s:?}");
        assert!(
            s.iter()
                .map(|s| s.cache.cooled + s.cache.evicted)
                .sum::<u64>()
                > 0,
            "{s:?}"
        );
    }
}

/// Offloads happen once the cost model has warmed up, and the MS hands a
/// split back to the CS (fallback), at every level of the check.
#[test]
fn offloads_and_fallbacks_happen() {
    let (mut rt, tcfg) = sim(2, 9);
    let cl = DexCluster::new(tcfg, dex(4, vec![]), 1).unwrap();
    let c = rt.add_core(0, 0);
    let cl2 = cl.clone();
    rt.block_on(c, async move {
        let entries: Vec<_> = (0..2000u64).map(|x| (k(x * 2), x)).collect();
        let t = DexTree::bulk_load(cl2, 0, 0, &entries, 1.0).await.unwrap();
        for i in 0..400u64 {
            let x = (i * 7919) % 4000;
            t.insert(&k(x), i).await.unwrap();
            assert_eq!(t.get(&k(x)).await.unwrap(), Some(i));
        }
    })
    .unwrap();
    let s = cl.stats(0);
    assert!(
        s.offloads > 20 && s.offload_fallbacks > 0 && s.fetches > 0,
        "{s:?}"
    );
}

/// Verb counts of the paths of Table 2 / §6: a cached lookup posts
/// nothing; a leaf that is not admitted costs 1 READ (get) or READ +
/// WRITE (update); an offload is one RPC whatever the levels below.
#[test]
fn verb_counts_per_path() {
    let (mut rt, tcfg) = sim(1, 1);
    let c = rt.add_core(0, 0);
    let entries: Vec<_> = (0..400u64).map(|x| (k(x), x)).collect();
    // Everything admitted, no offload: the second get is a pure hit.
    let cfg = DexConfig {
        leaf_admission: 1.0,
        offload: false,
        ..dex(1000, vec![])
    };
    let cl = DexCluster::new(tcfg, cfg, 1).unwrap();
    let e = entries.clone();
    let (first, second) = rt
        .block_on(c, async move {
            let t = DexTree::bulk_load(cl, 0, 0, &e, 0.8).await.unwrap();
            let s0 = dm_runtime::task_stats();
            t.get(&k(5)).await.unwrap();
            let s1 = dm_runtime::task_stats();
            assert_eq!(t.get(&k(5)).await.unwrap(), Some(5));
            let s2 = dm_runtime::task_stats();
            (s1.read - s0.read, s2.read + s2.write - s1.read - s1.write)
        })
        .unwrap();
    assert!(first >= 2, "cold path READs the root and below: {first}");
    assert_eq!(second, 0);
    // Inner nodes cached, leaves never admitted: 1 READ, or READ + WRITE.
    let (mut rt, tcfg) = sim(1, 2);
    let c = rt.add_core(0, 0);
    let cfg = DexConfig {
        leaf_admission: 0.0,
        offload: false,
        ..dex(1000, vec![])
    };
    let cl = DexCluster::new(tcfg, cfg, 1).unwrap();
    let e = entries.clone();
    let (get, upd) = rt
        .block_on(c, async move {
            let t = DexTree::bulk_load(cl, 0, 0, &e, 0.8).await.unwrap();
            t.get(&k(7)).await.unwrap();
            let s0 = dm_runtime::task_stats();
            assert_eq!(t.get(&k(7)).await.unwrap(), Some(7));
            let s1 = dm_runtime::task_stats();
            assert!(t.update(&k(7), 70).await.unwrap());
            let s2 = dm_runtime::task_stats();
            (
                (s1.read - s0.read, s1.write - s0.write),
                (s2.read - s1.read, s2.write - s1.write),
            )
        })
        .unwrap();
    assert_eq!(get, (1, 0));
    assert_eq!(upd, (1, 1));
    // Offload every miss (window 0 warm-up done by the explicit window 1).
    let (mut rt, tcfg) = sim(1, 3);
    let c = rt.add_core(0, 0);
    let cfg = DexConfig {
        cache_bytes: 128,
        explore: 0.0,
        window: 1,
        ..dex(1, vec![])
    };
    let cl = DexCluster::new(tcfg, cfg, 1).unwrap();
    let cl2 = cl.clone();
    let rpcs = rt
        .block_on(c, async move {
            let t = DexTree::bulk_load(cl2, 0, 0, &entries, 0.8).await.unwrap();
            let mut v = Vec::new();
            for x in 0..40u64 {
                let s0 = dm_runtime::task_stats();
                assert_eq!(t.get(&k(x * 9)).await.unwrap(), Some(x * 9));
                let s1 = dm_runtime::task_stats();
                v.push((s1.rpc - s0.rpc, s1.read - s0.read));
            }
            v
        })
        .unwrap();
    assert!(cl.stats(0).offloads > 0);
    // An offloaded get is one RPC and no READ below the missed node.
    assert!(rpcs.iter().any(|&(r, _)| r == 1), "{rpcs:?}");
}

#[test]
fn errors_are_reported() {
    let (mut rt, tcfg) = sim(1, 1);
    assert!(matches!(
        DexCluster::new(tcfg, dex(8, vec![k(5), k(3)]), 3),
        Err(TreeError::BadConfig(_))
    ));
    assert!(matches!(
        DexCluster::new(tcfg, dex(8, vec![k(5)]), 1),
        Err(TreeError::BadConfig(_))
    ));
    let cfg = DexConfig {
        forward: false,
        ..dex(8, vec![k(100)])
    };
    let cl: Arc<DexCluster> = DexCluster::new(tcfg, cfg, 2).unwrap();
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let t = DexTree::create(cl.clone(), 0, 0).await.unwrap();
        t.insert(&k(5), 1).await.unwrap();
        assert_eq!(t.insert(&k(150), 1).await, Err(TreeError::NotOwner(1)));
        assert!(matches!(
            t.get(&[1, 2]).await,
            Err(TreeError::KeyLength { .. })
        ));
        assert!(matches!(
            t.repartition(0, k(100_000)).await.map(|_| ()),
            Ok(())
        ));
        assert!(matches!(
            t.repartition(3, k(1)).await,
            Err(TreeError::BadConfig(_))
        ));
        // Key 150 is CS 0's now; scans stop at the partition's end.
        t.insert(&k(150), 2).await.unwrap();
        assert_eq!(
            t.scan(&k(0), 10).await.unwrap(),
            vec![(k(5), 1), (k(150), 2)]
        );
        assert!(DexTree::open(cl, 2, 0).is_err());
    })
    .unwrap();
}

/// Two processes' view of one 4-CS cluster: this one hosts CSs 0 and 1
/// (`DexConfig::local_cs`). Forwarding reaches CS 1 but not CS 2, scans stop
/// at the end of the local range, and CSs 2-3 can be neither opened nor
/// repartitioned from here.
#[test]
fn forwarding_stays_within_the_local_css() {
    let (mut rt, tcfg) = sim(2, 3);
    let cfg = DexConfig {
        forward: true,
        local_cs: 0..2,
        ..dex(8, vec![k(100), k(200), k(300)])
    };
    let cl: Arc<DexCluster> = DexCluster::new(tcfg, cfg, 4).unwrap();
    assert!(matches!(
        DexTree::open(cl.clone(), 2, 0),
        Err(TreeError::BadConfig(_))
    ));
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let t = DexTree::create(cl.clone(), 0, 0).await.unwrap();
        for x in [5, 150, 199] {
            t.insert(&k(x), x).await.unwrap();
        }
        assert_eq!(cl.stats(1).forwarded, 2);
        assert_eq!(t.insert(&k(250), 1).await, Err(TreeError::NotOwner(2)));
        assert_eq!(t.get(&k(350)).await, Err(TreeError::NotOwner(3)));
        assert_eq!(
            t.scan(&k(100), 10).await.unwrap(),
            vec![(k(150), 150), (k(199), 199)]
        );
        assert!(matches!(
            t.repartition(1, k(250)).await,
            Err(TreeError::BadConfig(_))
        ));
        assert!(t.repartition(0, k(120)).await.is_ok());
    })
    .unwrap();
}
