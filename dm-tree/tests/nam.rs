//! Ziegler et al.'s coarse-grained and hybrid designs (`dm_tree::nam`) on the
//! sim fabric with strict (8-byte) torn READs: against a model, concurrent,
//! verb counts per operation, partitioning, and errors.

use dm_runtime::{SimCore, SimRuntime};
use dm_tree::nam::RPC_NAM;
use dm_tree::{Design, FgTree, NamConfig, TreeConfig, TreeError};
use dm_verbs::sim::{SimConfig, SimFabric};
use dm_verbs::VerbError;
mod model;

use model::{k, matches_btreemap, Op};
use proptest::prelude::*;
use std::rc::Rc;

fn cluster(design: Design, num_ms: u16, region: u64, seed: u64) -> (SimRuntime, TreeConfig) {
    let (rt, tcfg) = model::sim_cluster(num_ms, region, seed);
    (rt, TreeConfig { design, ..tcfg })
}

/// Keys spread over the whole u64 space (so every partition gets some).
fn spread(x: u64) -> u64 {
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn run_model(design: Design, nam: NamConfig, ops: Vec<Op>) -> bool {
    let (mut rt, mut tcfg) = cluster(design, 3, 8 << 20, 1);
    tcfg.nam = nam;
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let t = FgTree::create(tcfg, 0, 0).await.unwrap();
        matches_btreemap(&t, ops).await;
        true
    })
    .unwrap()
}

/// The model's operations over keys spread across the whole u64 space.
fn op() -> impl Strategy<Value = Op> {
    model::op(spread, 60)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn coarse_matches_btreemap(ops in proptest::collection::vec(op(), 1..400)) {
        prop_assert!(run_model(Design::Coarse, NamConfig::default(), ops));
    }

    #[test]
    fn hybrid_matches_btreemap(ops in proptest::collection::vec(op(), 1..400)) {
        prop_assert!(run_model(Design::Hybrid, NamConfig::default(), ops));
    }

    /// Ziegler §6's skewed placement (80/12/5/3), 5 partitions over 3 MSs
    /// (two on one MS), and a single partition.
    #[test]
    fn uneven_partitions_match_btreemap(ops in proptest::collection::vec(op(), 1..200)) {
        for nam in [NamConfig::weighted(&[80, 12, 5, 3]), NamConfig::uniform(5), NamConfig::uniform(1)] {
            prop_assert!(run_model(Design::Coarse, nam, ops.clone()));
            prop_assert!(run_model(Design::Hybrid, nam, ops.clone()));
        }
    }
}

/// Tasks on four cores of two CSs insert interleaved keys and update shared
/// ones (leaf splits racing one-sided leaf writes and separator RPCs in the
/// hybrid), with torn READs and delayed completions; then every key is there.
#[test]
fn concurrent_inserts_and_splits_keep_every_key() {
    for design in [Design::Coarse, Design::Hybrid] {
        for seed in 0..3 {
            let (mut rt, tcfg) = cluster(design, 3, 16 << 20, seed);
            let cores: Vec<SimCore> = (0..4).map(|i| rt.add_core(i / 2, i % 2)).collect();
            rt.block_on(cores[0], async move {
                FgTree::create(tcfg, 0, 0).await.map(|_| ())
            })
            .unwrap()
            .unwrap();
            let per_task = 50u64;
            for (ci, &c) in cores.iter().enumerate() {
                let t = Rc::new(FgTree::open(tcfg, (ci / 2) as u16, (ci % 2) as u16).unwrap());
                for task in 0..8u64 {
                    let t = t.clone();
                    let base = (ci as u64 * 8 + task) * per_task;
                    rt.spawn_on(c, async move {
                        for i in 0..per_task {
                            let key = spread(base + i);
                            t.insert(&k(key), key ^ 1).await.unwrap();
                            t.insert(&k(spread(1_000_000 + i % 5)), base).await.unwrap();
                            if i % 3 == 0 {
                                assert_eq!(t.get(&k(key)).await.unwrap(), Some(key ^ 1));
                            }
                        }
                    });
                }
            }
            rt.run();
            let n = 4 * 8 * per_task;
            let mut want: Vec<u64> = (0..n).map(spread).collect();
            want.extend((1_000_000..1_000_005).map(spread));
            want.sort();
            let got = rt
                .block_on(cores[1], async move {
                    let t = FgTree::open(tcfg, 0, 1).unwrap();
                    for x in 0..n {
                        let key = spread(x);
                        assert_eq!(t.get(&k(key)).await.unwrap(), Some(key ^ 1), "{design:?}");
                    }
                    t.scan(&k(0), usize::MAX).await.unwrap()
                })
                .unwrap();
            let got: Vec<u64> = got
                .iter()
                .map(|(a, _)| u64::from_be_bytes(a.as_slice().try_into().unwrap()))
                .collect();
            assert_eq!(got, want, "{design:?} seed {seed}");
        }
    }
}

/// Ziegler §5/B7: a coarse-grained get, insert or update is one RPC and no
/// one-sided verb; a hybrid get is one RPC returning an 8-byte leaf address
/// plus one leaf READ; a hybrid insert without split adds the leaf's lock,
/// READ, write-back and unlock (FG+ locking) to that RPC.
#[test]
fn verbs_per_operation() {
    for design in [Design::Coarse, Design::Hybrid] {
        let (mut rt, mut tcfg) = cluster(design, 2, 8 << 20, 3);
        tcfg.node_bytes = 1024;
        let c = rt.add_core(0, 0);
        let (get, ins, upd) = rt
            .block_on(c, async move {
                let t = FgTree::create(tcfg, 0, 0).await.unwrap();
                t.insert(&k(1), 1).await.unwrap();
                let s0 = dm_runtime::task_stats();
                assert_eq!(t.get(&k(1)).await.unwrap(), Some(1));
                let s1 = dm_runtime::task_stats();
                t.insert(&k(2), 2).await.unwrap();
                let s2 = dm_runtime::task_stats();
                assert!(t.update(&k(2), 3).await.unwrap());
                let s3 = dm_runtime::task_stats();
                (s1.since(&s0), s2.since(&s1), s3.since(&s2))
            })
            .unwrap();
        match design {
            Design::Coarse => {
                for s in [get, ins, upd] {
                    assert_eq!((s.rpc, s.read, s.write, s.cas, s.rtts), (1, 0, 0, 0, 1));
                }
                // Request: op, header offset, key; reply: found flag and value.
                assert_eq!((get.bytes_written, get.bytes_read), (5 + 8, 9));
            }
            _ => {
                assert_eq!((get.rpc, get.read, get.rtts), (1, 1, 2));
                assert_eq!(get.bytes_read, 8 + 1024);
                for s in [ins, upd] {
                    // RPC, lock CAS, leaf READ, write-back, unlock WRITE.
                    assert_eq!((s.rpc, s.cas, s.read, s.write, s.rtts), (1, 1, 1, 2, 5));
                }
            }
        }
    }
}

/// Splits in the hybrid send one separator RPC each, and its upper levels
/// then route straight to the new leaves (no sibling hops).
#[test]
fn hybrid_split_installs_separator_by_rpc() {
    let (mut rt, mut tcfg) = cluster(Design::Hybrid, 2, 8 << 20, 4);
    tcfg.nam = NamConfig::uniform(1);
    let c = rt.add_core(0, 0);
    let (load, get) = rt
        .block_on(c, async move {
            let t = FgTree::create(tcfg, 0, 0).await.unwrap();
            let s0 = dm_runtime::task_stats();
            for x in 0..200 {
                t.insert(&k(x), x).await.unwrap();
            }
            let s1 = dm_runtime::task_stats();
            for x in 0..200 {
                assert_eq!(t.get(&k(x)).await.unwrap(), Some(x));
            }
            (s1.since(&s0), dm_runtime::task_stats().since(&s1))
        })
        .unwrap();
    let leaf_cap = 5; // (128 - 32 - 16) / 16 entries per 128-byte FG+ leaf
    assert!(load.rpc > 200 + 200 / leaf_cap as u64, "{load:?}");
    assert_eq!((get.rpc, get.read), (200, 200));
}

#[test]
fn partitions_route_by_fence() {
    let w = NamConfig::weighted(&[80, 12, 5, 3]);
    assert_eq!(w.parts, 4);
    let share = |p: usize| w.splits[p] as f64 / u64::MAX as f64;
    assert!((share(0) - 0.80).abs() < 1e-9 && (share(2) - 0.97).abs() < 1e-9);
    let names: Vec<Vec<u8>> = ["apple", "banana", "cherry", "date", "fig", "grape"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let refs: Vec<&[u8]> = names.iter().map(|v| v.as_slice()).collect();
    let s = NamConfig::from_sample(&refs, 3);
    assert_eq!(s.parts, 3);
    assert_eq!(s.splits[0].to_be_bytes()[..6], *b"cherry");
    // Shares of the keys, not of the prefix space: keys in its lower half
    // only (as YCSB's hashed integers) still split 50/25/25.
    let low: Vec<[u8; 8]> = (0..100u64).map(|i| (i << 40).to_be_bytes()).collect();
    let refs: Vec<&[u8]> = low.iter().map(|k| k.as_slice()).collect();
    let d = NamConfig::from_sample_weighted(&refs, &[2, 1, 1]);
    assert_eq!((d.parts, d.splits[0], d.splits[1]), (3, 50 << 40, 75 << 40));
    assert_eq!(Design::named("nam-hybrid"), Some(Design::Hybrid));
    assert_eq!(Design::named("fg"), None);
}

#[test]
fn bad_configuration_and_errors() {
    // Two partitions that start at the same 1-byte key.
    let (mut rt, mut tcfg) = cluster(Design::Coarse, 2, 8 << 20, 5);
    tcfg.key_bytes = 1;
    tcfg.nam = NamConfig::weighted(&[1000, 1, 1, 1000]);
    assert!(matches!(
        FgTree::open(tcfg, 0, 0),
        Err(TreeError::BadConfig(_))
    ));
    tcfg.key_bytes = 8;
    // Past the superblock's end, and over the fixed roots and the catalog
    // (`dm_verbs::ms::superblock`).
    for off in [4056, 8, 1016] {
        tcfg.nam.header_off = off;
        assert!(
            matches!(FgTree::open(tcfg, 0, 0), Err(TreeError::BadConfig(_))),
            "{off}"
        );
    }
    // No handler registered: a typed error, no panic.
    let bare = SimFabric::new(SimConfig::default());
    let mut rt2 = SimRuntime::new(bare);
    let c2 = rt2.add_core(0, 0);
    let cfg2 = TreeConfig {
        design: Design::Coarse,
        ..Default::default()
    };
    let r = rt2
        .block_on(
            c2,
            async move { FgTree::create(cfg2, 0, 0).await.map(|_| ()) },
        )
        .unwrap();
    assert_eq!(
        r,
        Err(TreeError::Verb(VerbError::UnknownRpc {
            ms: 0,
            handler: RPC_NAM
        }))
    );
    // Bulk load builds the fine-grained design only.
    tcfg.nam = NamConfig::default();
    let c = rt.add_core(0, 0);
    let r = rt
        .block_on(c, async move {
            FgTree::bulk_load(tcfg, 0, 0, &[(k(1), 1)], 0.8)
                .await
                .map(|_| ())
        })
        .unwrap();
    assert!(matches!(r, Err(TreeError::BadConfig(_))));
}

/// An MS without room for a coarse-grained split reports `MsOutOfMemory`
/// and the insert did not happen; everything inserted before is intact.
#[test]
fn coarse_out_of_memory_is_an_error_and_changes_nothing() {
    // One 64 KiB chunk per MS: 512 nodes of 128 bytes, about 2,000 keys.
    let (mut rt, mut tcfg) = cluster(Design::Coarse, 1, 4096 + (64 << 10), 6);
    tcfg.nam = NamConfig::uniform(1);
    let c = rt.add_core(0, 0);
    let (n, err, intact) = rt
        .block_on(c, async move {
            let t = FgTree::create(tcfg, 0, 0).await.unwrap();
            let mut n = 0u64;
            let err = loop {
                match t.insert(&k(n), n).await {
                    Ok(()) => n += 1,
                    Err(e) => break e,
                }
            };
            let mut intact = t.get(&k(n)).await.unwrap().is_none();
            for x in 0..n {
                intact &= t.get(&k(x)).await.unwrap() == Some(x);
            }
            (n, err, intact)
        })
        .unwrap();
    assert!(n > 1000, "{n}");
    assert_eq!(err, TreeError::Verb(VerbError::MsOutOfMemory { ms: 0 }));
    assert!(intact);
}

/// A coarse-grained scan longer than one reply holds
/// (`SCAN_REPLY_BYTES`: real RDMA RPC messages are 4 KiB) continues in the
/// same partition after the last key, then in the next partition.
#[test]
fn coarse_scan_spans_several_replies() {
    let (mut rt, mut tcfg) = cluster(Design::Coarse, 2, 8 << 20, 7);
    tcfg.nam = NamConfig::uniform(2);
    let c = rt.add_core(0, 0);
    let per_reply = (dm_tree::nam::SCAN_REPLY_BYTES - 4) / 16;
    let (all, rpcs) = rt
        .block_on(c, async move {
            let t = FgTree::create(tcfg, 0, 0).await.unwrap();
            // 600 keys in each half of the key space, the last one u64::MAX.
            for x in 0..600u64 {
                t.insert(&k(x), x).await.unwrap();
                t.insert(&k(u64::MAX - x), x).await.unwrap();
            }
            let s0 = dm_runtime::task_stats();
            let all = t.scan(&k(0), usize::MAX).await.unwrap();
            (all, dm_runtime::task_stats().since(&s0).rpc)
        })
        .unwrap();
    assert_eq!(all.len(), 1200);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    // 600 keys a partition: 3 replies each (the last one short).
    assert_eq!(per_reply, 249);
    assert_eq!(rpcs, 6);
}

/// Both designs placed in a catalog root area (issue 31): the root-area
/// size covers the root and lock-table words and the headers of 5
/// partitions over 3 MSs (two on some MSs); the tree works there, and the
/// superblock outside the catalog's words stays untouched.
#[test]
fn designs_live_in_a_catalog_root_area() {
    use dm_runtime::catalog;
    use dm_verbs::ms::superblock;
    for (i, design) in [Design::Coarse, Design::Hybrid].into_iter().enumerate() {
        let (mut rt, mut tcfg) = cluster(design, 3, 8 << 20, 7);
        tcfg.nam = NamConfig::uniform(5);
        assert_eq!(tcfg.nam.root_bytes(3), 2 * 48);
        assert_eq!(tcfg.root_bytes(), 16 + 2 * 48);
        let c = rt.add_core(0, 0);
        let off = rt
            .block_on(c, async move {
                let name = format!("nam-{i}");
                let (e, made) =
                    catalog::open_or_create(&name, 3, tcfg.root_bytes(), 1, |e| async move {
                        FgTree::create(tcfg.in_root_area(e.root_off), 0, 0).await?;
                        Ok::<(), Box<dyn std::error::Error>>(())
                    })
                    .await
                    .unwrap();
                assert!(made);
                let t = FgTree::open(tcfg.in_root_area(e.root_off), 0, 0).unwrap();
                for x in 0..200 {
                    t.insert(&k(spread(x)), x).await.unwrap();
                }
                for x in 0..200 {
                    assert_eq!(t.get(&k(spread(x))).await.unwrap(), Some(x), "{design:?}");
                }
                e.root_off
            })
            .unwrap();
        assert_eq!(off, superblock::ROOT_AREAS);
        for ms in 0..3 {
            let sb = rt
                .fabric()
                .peek(dm_verbs::GlobalAddr::new(ms, 0), superblock::BYTES as usize)
                .unwrap();
            let area = off as usize..(off + 16 + 2 * 48) as usize;
            let catalog_words = if ms == 0 {
                superblock::CATALOG_BUMP as usize..superblock::ROOT_AREAS as usize
            } else {
                0..0
            };
            let stray = (0..sb.len())
                .filter(|b| !area.contains(b) && !catalog_words.contains(b))
                .find(|&b| sb[b] != 0);
            assert_eq!(stray, None, "{design:?}: MS {ms}");
            // Every MS holds at least one partition header in the area.
            assert!(
                sb[area.start + 16..area.end].iter().any(|&b| b != 0),
                "MS {ms}"
            );
        }
    }
}
