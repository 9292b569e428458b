//! FG+ B-link tree on the sim fabric with strict (8-byte) torn READs.

use dm_runtime::SimCore;
use dm_tree::{FgTree, TreeConfig, TreeError};
use dm_verbs::VerbError;
mod model;

use model::{k, matches_btreemap, op, sim_cluster as cluster};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::rc::Rc;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn sequential_matches_btreemap(ops in proptest::collection::vec(op(|x| x, 30), 1..400)) {
        let (mut rt, tcfg) = cluster(2, 8 << 20, 1);
        let c = rt.add_core(0, 0);
        let res = rt.block_on(c, async move {
            let t = FgTree::create(tcfg, 0, 0).await.unwrap();
            matches_btreemap(&t, ops).await;
            true
        });
        prop_assert_eq!(res, Some(true));
    }
}

/// Many tasks on several cores insert disjoint keys, and update shared ones,
/// with torn READs and delayed completions; then every key is found.
#[test]
fn concurrent_inserts_survive_torn_reads_and_splits() {
    let rejected = Rc::new(std::cell::Cell::new(0u64));
    for seed in 0..4 {
        let (mut rt, tcfg) = cluster(3, 16 << 20, seed);
        let cores: Vec<SimCore> = (0..4).map(|i| rt.add_core(i / 2, i % 2)).collect();
        rt.block_on(cores[0], async move {
            FgTree::create(tcfg, 0, 0).await.map(|_| ())
        })
        .unwrap()
        .unwrap();
        let per_task = 60u64;
        for (ci, &c) in cores.iter().enumerate() {
            let t = Rc::new(FgTree::open(tcfg, (ci / 2) as u16, (ci % 2) as u16).unwrap());
            for task in 0..8u64 {
                let t = t.clone();
                let rejected = rejected.clone();
                let base = (ci as u64 * 8 + task) * per_task;
                rt.spawn_on(c, async move {
                    for i in 0..per_task {
                        // Interleave keys of all tasks so they share leaves.
                        let key = (base + i) * 7919 % 100_003;
                        t.insert(&k(key), key + 1).await.unwrap();
                        t.insert(&k(1_000_000 + i % 5), base).await.unwrap();
                        if i % 3 == 0 {
                            assert_eq!(t.get(&k(key)).await.unwrap(), Some(key + 1));
                        }
                    }
                    if task == 0 {
                        rejected.set(rejected.get() + t.rejected_images());
                    }
                });
            }
        }
        rt.run();
        let n = 4 * 8 * per_task;
        let keys: Vec<u64> = (0..n).map(|x| x * 7919 % 100_003).collect();
        let ok = rt
            .block_on(cores[1], async move {
                let t = FgTree::open(tcfg, 0, 1).unwrap();
                for &x in &keys {
                    assert_eq!(t.get(&k(x)).await.unwrap(), Some(x + 1), "key {x}");
                }
                let all = t.scan(&k(0), usize::MAX).await.unwrap();
                let mut want: Vec<u64> = keys.clone();
                want.extend(1_000_000..1_000_005);
                want.sort();
                assert_eq!(
                    all.iter()
                        .map(|(a, _)| u64::from_be_bytes(a.as_slice().try_into().unwrap()))
                        .collect::<Vec<_>>(),
                    want
                );
                true
            })
            .unwrap();
        assert!(ok);
    }
    assert!(
        rejected.get() > 0,
        "the runs must have produced torn node images for validation to reject"
    );
    eprintln!("torn node images rejected: {}", rejected.get());
    // No lock of ours went unreported on sim (see tests/lock_ledger.rs).
    assert_eq!(dm_runtime::lock::lock_takeovers(), 0);
}

#[test]
fn fg_plus_insert_is_four_round_trips_after_traversal() {
    let (mut rt, mut tcfg) = cluster(1, 8 << 20, 3);
    tcfg.node_bytes = 1024;
    let c = rt.add_core(0, 0);
    let (find, get, ins) = rt
        .block_on(c, async move {
            let t = FgTree::create(tcfg, 0, 0).await.unwrap();
            t.insert(&k(1), 1).await.unwrap();
            let s0 = dm_runtime::task_stats();
            t.get(&k(1)).await.unwrap();
            let s1 = dm_runtime::task_stats();
            t.insert(&k(2), 2).await.unwrap();
            let s2 = dm_runtime::task_stats();
            (s1.since(&s0).rtts, s1.since(&s0), s2.since(&s1))
        })
        .unwrap();
    // One-leaf tree: get = root pointer READ + leaf READ.
    assert_eq!(find, 2);
    assert_eq!((get.read, get.write, get.cas), (2, 0, 0));
    assert_eq!(get.bytes_read, 8 + 1024);
    // Insert = traversal (2) + lock CAS, leaf READ, write-back, unlock WRITE.
    assert_eq!(ins.rtts, find + 4);
    assert_eq!((ins.cas, ins.read, ins.write), (1, 3, 2));
    assert_eq!(ins.bytes_written, 1016 + 8);
}

#[test]
fn bad_input_and_exhausted_memory_are_errors() {
    let (mut rt, tcfg) = cluster(1, 4096 + 3 * (64 << 10), 5);
    let c = rt.add_core(0, 0);
    let out = rt
        .block_on(c, async move {
            let t = FgTree::create(tcfg, 0, 0).await.unwrap();
            let short = t.get(b"abc").await;
            let long = t.insert(&[0u8; 9], 1).await;
            // Insert until the 3 chunks of 64 KiB are used up by 128-byte nodes.
            let mut err = None;
            for i in 0..100_000u64 {
                if let Err(e) = t.insert(&k(i), i).await {
                    err = Some((i, e));
                    break;
                }
            }
            // An error means "not inserted"; everything acknowledged is there,
            // and the full tree still serves reads, updates and scans.
            let (at, _) = err.clone().unwrap();
            assert_eq!(t.get(&k(at)).await.unwrap(), None);
            for i in 0..at {
                assert_eq!(t.get(&k(i)).await.unwrap(), Some(i), "key {i}");
            }
            assert!(t.update(&k(0), 77).await.unwrap());
            let all = t.scan(&k(0), usize::MAX).await.unwrap();
            assert_eq!(all.len() as u64, at);
            assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
            (short, long, err)
        })
        .unwrap();
    assert_eq!(out.0, Err(TreeError::KeyLength { got: 3, want: 8 }));
    assert_eq!(out.1, Err(TreeError::KeyLength { got: 9, want: 8 }));
    let (at, e) = out.2.expect("memory runs out");
    assert!(at > 1000, "inserted {at} keys before running out");
    assert!(
        matches!(e, TreeError::Verb(VerbError::MsOutOfMemory { .. })),
        "{e:?}"
    );
    assert!(matches!(
        FgTree::open(
            TreeConfig {
                key_bytes: 33,
                ..tcfg
            },
            0,
            0
        ),
        Err(TreeError::BadConfig(_))
    ));
}

#[test]
fn bulk_load_then_reads_inserts_and_scans() {
    for (n, fill) in [
        (0u64, 0.8),
        (1, 0.8),
        (3, 0.5),
        (500, 0.8),
        (2000, 1.0),
        (777, 0.3),
    ] {
        let (mut rt, tcfg) = cluster(2, 16 << 20, n);
        let c = rt.add_core(0, 0);
        let ok = rt
            .block_on(c, async move {
                let entries: Vec<(Vec<u8>, u64)> = (0..n).map(|i| (k(i * 10), i)).collect();
                let t = FgTree::bulk_load(tcfg, 0, 0, &entries, fill).await.unwrap();
                for i in 0..n {
                    assert_eq!(t.get(&k(i * 10)).await.unwrap(), Some(i), "n {n} key {i}");
                    assert_eq!(t.get(&k(i * 10 + 5)).await.unwrap(), None);
                }
                assert_eq!(t.scan(&k(0), usize::MAX).await.unwrap(), entries);
                // The loaded tree takes inserts between and beyond the loaded keys.
                for i in 0..n.min(300) {
                    t.insert(&k(i * 10 + 5), 7).await.unwrap();
                }
                t.insert(&k(u64::MAX), 9).await.unwrap();
                assert_eq!(t.get(&k(u64::MAX)).await.unwrap(), Some(9));
                let all = t.scan(&k(0), usize::MAX).await.unwrap();
                assert_eq!(all.len() as u64, n + n.min(300) + 1);
                assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
                true
            })
            .unwrap();
        assert!(ok);
    }
    let (mut rt, tcfg) = cluster(1, 8 << 20, 9);
    let c = rt.add_core(0, 0);
    let errs = rt
        .block_on(c, async move {
            let unsorted = vec![(k(2), 0), (k(1), 0)];
            (
                FgTree::bulk_load(tcfg, 0, 0, &unsorted, 0.8).await.err(),
                FgTree::bulk_load::<Vec<u8>>(tcfg, 0, 0, &[], 0.0)
                    .await
                    .err(),
                FgTree::bulk_load(tcfg, 0, 0, &[(vec![1, 2], 0)], 0.8)
                    .await
                    .err(),
            )
        })
        .unwrap();
    assert!(matches!(errs.0, Some(TreeError::BadConfig(_))));
    assert!(matches!(errs.1, Some(TreeError::BadConfig(_))));
    assert!(matches!(errs.2, Some(TreeError::KeyLength { .. })));
}

#[test]
fn warm_cache_get_is_one_leaf_read() {
    let (mut rt, mut tcfg) = cluster(2, 16 << 20, 11);
    tcfg.node_bytes = 1024;
    let c = rt.add_core(0, 0);
    let (cold, warm, stats) = rt
        .block_on(c, async move {
            let cache = std::sync::Arc::new(dm_tree::IndexCache::new(1 << 20, 1024));
            let entries: Vec<(Vec<u8>, u64)> = (0..20_000u64).map(|i| (k(i), i)).collect();
            let t = FgTree::bulk_load(tcfg, 0, 0, &entries, 0.8)
                .await
                .unwrap()
                .with_cache(cache.clone());
            let s0 = dm_runtime::task_stats();
            assert_eq!(t.get(&k(4242)).await.unwrap(), Some(4242));
            let s1 = dm_runtime::task_stats();
            assert_eq!(t.get(&k(4243)).await.unwrap(), Some(4243));
            let s2 = dm_runtime::task_stats();
            (s1.since(&s0), s2.since(&s1), cache.stats())
        })
        .unwrap();
    assert!(cold.read >= 3, "a cold get walks from the root: {cold:?}");
    assert_eq!(
        (warm.read, warm.rtts, warm.bytes_read),
        (1, 1, 1024),
        "warm get = 1 READ of one leaf"
    );
    assert_eq!((stats.hits, stats.misses, stats.nodes), (1, 1, 1));
}

#[test]
fn stale_and_evicted_cache_entries_stay_correct_under_concurrency() {
    for seed in 0..3 {
        let (mut rt, tcfg) = cluster(2, 16 << 20, 100 + seed);
        let cores: Vec<SimCore> = (0..4).map(|i| rt.add_core(i / 2, i % 2)).collect();
        rt.block_on(cores[0], async move {
            FgTree::create(tcfg, 0, 0).await.map(|_| ())
        })
        .unwrap()
        .unwrap();
        // One cache per CS holding at most 4 leaf parents: constant staleness and eviction.
        let caches: Vec<_> = (0..2)
            .map(|_| std::sync::Arc::new(dm_tree::IndexCache::new(4 * 128, 128)))
            .collect();
        for (ci, &c) in cores.iter().enumerate() {
            let t = Rc::new(
                FgTree::open(tcfg, (ci / 2) as u16, (ci % 2) as u16)
                    .unwrap()
                    .with_cache(caches[ci / 2].clone()),
            );
            for task in 0..6u64 {
                let t = t.clone();
                rt.spawn_on(c, async move {
                    for i in 0..80u64 {
                        let key = ((ci as u64 * 6 + task) * 80 + i) * 7919 % 50_021;
                        t.insert(&k(key), key).await.unwrap();
                        assert_eq!(t.get(&k(key)).await.unwrap(), Some(key));
                        if i % 4 == 0 {
                            let r = t.scan(&k(key), 5).await.unwrap();
                            assert_eq!(r.first().map(|x| x.1), Some(key));
                        }
                    }
                });
            }
        }
        rt.run();
        for cache in &caches {
            let s = cache.stats();
            let parents = s.bytes - s.top_nodes * 128;
            assert!(parents <= 4 * 128 && s.hits > 0 && s.misses > 0, "{s:?}");
        }
        let n = rt
            .block_on(cores[0], async move {
                FgTree::open(tcfg, 0, 0)
                    .unwrap()
                    .scan(&k(0), usize::MAX)
                    .await
                    .unwrap()
                    .len()
            })
            .unwrap();
        assert_eq!(n, 4 * 6 * 80);
    }
}

/// 32-byte keys (the largest configuration): names with long shared prefixes,
/// plus the all-zero and all-0xff keys (no key value is reserved: fences carry
/// infinities as flags). Matches a BTreeMap through splits, updates, removes
/// and scans.
#[test]
fn thirty_two_byte_keys_with_extremes_match_btreemap() {
    let (mut rt, mut tcfg) = cluster(2, 16 << 20, 21);
    tcfg.node_bytes = 512;
    tcfg.key_bytes = 32;
    let c = rt.add_core(0, 0);
    let key = |i: u32| {
        let mut v = format!("aws-solutions-constructs-{i:05}").into_bytes();
        v.resize(32, 0);
        v
    };
    rt.block_on(c, async move {
        let t = FgTree::create(tcfg, 0, 0).await.unwrap();
        assert!(t.node_capacity() >= 4);
        let mut model = BTreeMap::new();
        for (j, k) in [vec![0u8; 32], vec![0xff; 32]].into_iter().enumerate() {
            t.insert(&k, j as u64).await.unwrap();
            model.insert(k, j as u64);
        }
        for i in 0..600u32 {
            let k = key(i * 7919 % 600);
            t.insert(&k, i as u64).await.unwrap();
            model.insert(k, i as u64);
        }
        for i in (0..600u32).step_by(3) {
            assert!(t.remove(&key(i)).await.unwrap());
            model.remove(&key(i));
        }
        for i in (1..600u32).step_by(5) {
            let found = t.update(&key(i), 1_000 + i as u64).await.unwrap();
            assert_eq!(found, model.contains_key(&key(i)));
            if found {
                model.insert(key(i), 1_000 + i as u64);
            }
        }
        let all: Vec<(Vec<u8>, u64)> = model.clone().into_iter().collect();
        assert_eq!(t.scan(&[0u8; 32], usize::MAX).await.unwrap(), all);
        assert_eq!(t.get(&[0xff; 32]).await.unwrap(), Some(1));
        assert_eq!(t.get(&[0u8; 32]).await.unwrap(), Some(0));
        assert_eq!(
            t.scan(&key(300), 5).await.unwrap(),
            all[..]
                .iter()
                .filter(|(k, _)| *k >= key(300))
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
        );
        assert_eq!(
            t.get(&[1u8; 31]).await.err(),
            Some(TreeError::KeyLength { got: 31, want: 32 })
        );
    });
}

/// `NodeRead::Optimistic` (DEX §8.1's Sherman baseline, issue 34): a warm
/// get READs the leaf's version word, the leaf and the word again (3
/// READs, 3 RTTs), and concurrent inserts under torn READs stay correct.
#[test]
fn optimistic_node_read_is_three_reads_and_stays_correct() {
    let (mut rt, mut tcfg) = cluster(2, 16 << 20, 12);
    tcfg.node_bytes = 1024;
    tcfg.node_read = dm_tree::NodeRead::Optimistic;
    let cores: Vec<SimCore> = (0..2).map(|i| rt.add_core(i, 0)).collect();
    let warm = rt
        .block_on(cores[0], async move {
            let cache = std::sync::Arc::new(dm_tree::IndexCache::new(1 << 20, 1024));
            let entries: Vec<(Vec<u8>, u64)> = (0..20_000u64).map(|i| (k(i), i)).collect();
            let t = FgTree::bulk_load(tcfg, 0, 0, &entries, 0.8)
                .await
                .unwrap()
                .with_cache(cache);
            assert_eq!(t.get(&k(4242)).await.unwrap(), Some(4242));
            let s1 = dm_runtime::task_stats();
            assert_eq!(t.get(&k(4243)).await.unwrap(), Some(4243));
            let get = dm_runtime::task_stats().since(&s1);
            let s2 = dm_runtime::task_stats();
            assert!(t.update(&k(4243), 7).await.unwrap());
            let update = dm_runtime::task_stats().since(&s2);
            assert_eq!(t.get(&k(4243)).await.unwrap(), Some(7));
            (get, update)
        })
        .unwrap();
    let (warm, update) = warm;
    assert_eq!(
        (warm.read, warm.rtts, warm.bytes_read),
        (3, 3, 1024 + 16),
        "warm get = version word, leaf, version word"
    );
    // A writer READs the leaf it holds locked once, and the version before
    // its release (no hand-over here), as DEX's Sherman baseline does.
    assert_eq!(
        (update.read, update.bytes_read),
        (2, 1024 + 8),
        "warm update = leaf under the lock, version word before the release"
    );
    // Two CSs insert into the same leaves and read their keys back.
    for (ci, &c) in cores.iter().enumerate() {
        let t = Rc::new(FgTree::open(tcfg, ci as u16, 0).unwrap());
        for task in 0..4u64 {
            let t = t.clone();
            rt.spawn_on(c, async move {
                for i in 0..100u64 {
                    let key = 20_000 + (i * 8 + ci as u64 * 4 + task) % 401;
                    t.insert(&k(key), key + 7).await.unwrap();
                    assert_eq!(t.get(&k(key)).await.unwrap(), Some(key + 7));
                }
                Ok::<(), String>(())
            });
        }
    }
    rt.run();
    let t = FgTree::open(tcfg, 0, 1).unwrap();
    let all = rt
        .block_on(
            cores[0],
            async move { t.scan(&k(0), usize::MAX).await.unwrap() },
        )
        .unwrap();
    assert_eq!(all.len(), 20_000 + 401);
}
