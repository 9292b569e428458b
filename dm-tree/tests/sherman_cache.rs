//! `ShermanCache::Authors`, the published Sherman code's use of its index
//! cache (issue 34): sound under torn READs and splits by many CSs, no
//! level above the leaf parents cached, and a stale entry paid for with a
//! traversal from the root where ours moves right.

use dm_runtime::sync::LocalLockTable;
use dm_runtime::{SimCore, SimRuntime};
use dm_tree::{FgTree, IndexCache, LockTableConfig, ShermanCache, Techniques, TreeConfig};
use dm_verbs::sim::{Faults, SimConfig, SimFabric};
use dm_verbs::{Fabric, MsConfig};
use std::rc::Rc;
use std::sync::Arc;

fn k(x: u64) -> Vec<u8> {
    x.to_be_bytes().to_vec()
}

/// `num_ms` MSs with 256 KiB of device memory (Sherman's on-chip lock
/// table), torn READs and delayed completions; Sherman's techniques over
/// 256-byte nodes (a split every few inserts) and the cache use `use_`.
fn cluster(num_ms: u16, seed: u64, use_: ShermanCache) -> (SimRuntime, TreeConfig) {
    let chunk = 1 << 20;
    let fabric = SimFabric::new(SimConfig {
        num_ms,
        ms: MsConfig {
            region_bytes: 4096 + 16 * chunk,
            chunk_bytes: chunk,
            device_bytes: 256 << 10,
            cores: 1,
        },
        faults: Faults::torn_and_delayed(),
        seed,
        ..Default::default()
    });
    let tcfg = TreeConfig {
        node_bytes: 256,
        chunk_bytes: chunk,
        num_ms,
        techniques: Techniques::SHERMAN,
        lock_table: LockTableConfig::for_caps(fabric.caps()),
        sherman_cache: use_,
        ..Default::default()
    };
    (SimRuntime::new(fabric), tcfg)
}

/// A handle of CS `cs` with the CS's local lock table (HOCL, Sherman §4.3)
/// and, if given, its index cache.
fn open(tcfg: TreeConfig, cs: u16, core: u16, llt: &[Arc<LocalLockTable>]) -> FgTree {
    FgTree::open(tcfg, cs, core)
        .unwrap()
        .with_local_locks(llt[cs as usize].clone())
}

fn tables(tcfg: &TreeConfig, n: usize) -> Vec<Arc<LocalLockTable>> {
    (0..n).map(|_| FgTree::new_local_lock_table(tcfg)).collect()
}

/// Four CSs with a cache each insert interleaved keys into 128-byte nodes
/// (a split every few inserts, so every CS's cached leaf parents go stale
/// under it), with torn READs and delayed completions; then every key is
/// found from a fifth handle's cold cache and by a scan.
#[test]
fn authors_cache_is_sound_under_splits_and_torn_reads() {
    for seed in 0..3 {
        let (mut rt, tcfg) = cluster(2, seed, ShermanCache::Authors);
        let cores: Vec<SimCore> = (0..4).map(|i| rt.add_core(i, 0)).collect();
        rt.block_on(cores[0], async move {
            FgTree::create(tcfg, 0, 0).await.map(|_| ())
        })
        .unwrap()
        .unwrap();
        let llt = tables(&tcfg, 4);
        let caches: Vec<Arc<IndexCache>> = (0..4)
            .map(|_| Arc::new(IndexCache::new(1 << 20, tcfg.node_bytes)))
            .collect();
        let per_task = 50u64;
        for (ci, &c) in cores.iter().enumerate() {
            let t = Rc::new(open(tcfg, ci as u16, 0, &llt).with_cache(caches[ci].clone()));
            for task in 0..6u64 {
                let t = t.clone();
                let base = (ci as u64 * 6 + task) * per_task;
                rt.spawn_on(c, async move {
                    for i in 0..per_task {
                        let key = (base + i) * 7919 % 100_003;
                        t.insert(&k(key), key + 1).await.unwrap();
                        if i.is_multiple_of(4) {
                            assert_eq!(t.get(&k(key)).await.unwrap(), Some(key + 1));
                            assert!(t.update(&k(key), key + 2).await.unwrap());
                            assert_eq!(t.get(&k(key)).await.unwrap(), Some(key + 2));
                        }
                    }
                });
            }
        }
        rt.run();
        for c in &caches {
            let s = c.stats();
            assert_eq!(s.top_nodes, 0, "the authors' cache holds leaf parents only");
            assert!(s.nodes > 0 && s.hits > 0, "{s:?}");
        }
        let n = 4 * 6 * per_task;
        let want: Vec<(u64, u64)> = (0..n)
            .map(|x| {
                let key = x * 7919 % 100_003;
                (
                    key,
                    if (x % per_task).is_multiple_of(4) {
                        key + 2
                    } else {
                        key + 1
                    },
                )
            })
            .collect();
        rt.block_on(cores[1], async move {
            let t = open(tcfg, 1, 1, &llt)
                .with_cache(Arc::new(IndexCache::new(1 << 20, tcfg.node_bytes)));
            for &(key, v) in &want {
                assert_eq!(t.get(&k(key)).await.unwrap(), Some(v), "key {key}");
            }
            let all = t.scan(&k(0), usize::MAX).await.unwrap();
            let mut keys: Vec<u64> = want.iter().map(|&(key, _)| key).collect();
            keys.sort();
            let got: Vec<u64> = all
                .iter()
                .map(|(a, _)| u64::from_be_bytes(a.as_slice().try_into().unwrap()))
                .collect();
            assert_eq!(got, keys);
        })
        .unwrap();
    }
}

/// The READs of writes whose cached leaf split once under this CS: ours
/// locks the stale leaf, finds the key beyond its high fence and moves
/// right to the sibling; the authors' unlocks, drops the entry and
/// traverses from the root (root pointer, every level) before locking the
/// sibling, so it READs more. (After many splits ours moves right once per
/// split and READs more than a traversal: 9 against 6 after 36 inserts
/// here.) Both drop the entry, so the writes after it READ one leaf.
#[test]
fn a_stale_entry_costs_a_traversal_from_the_root() {
    let reads = |use_: ShermanCache, n: u64| {
        let (mut rt, tcfg) = cluster(1, 7, use_);
        let a = rt.add_core(0, 0);
        let b = rt.add_core(1, 0);
        let llt = tables(&tcfg, 2);
        let (l0, l1, l2, l3) = (llt.clone(), llt.clone(), llt.clone(), llt);
        rt.block_on(a, async move {
            let t = FgTree::create(tcfg, 0, 0)
                .await
                .unwrap()
                .with_local_locks(l0[0].clone());
            for x in 0..400u64 {
                t.insert(&k(x * 10), x).await.unwrap();
            }
        })
        .unwrap();
        let cache = Arc::new(IndexCache::new(1 << 20, tcfg.node_bytes));
        let ca = cache.clone();
        // CS 0 caches the leaf parent of key 2000's leaf.
        rt.block_on(a, async move {
            let t = open(tcfg, 0, 0, &l1).with_cache(ca);
            assert_eq!(t.get(&k(2000)).await.unwrap(), Some(200));
        })
        .unwrap();
        // CS 1 (no cache of its own) splits that leaf over and over.
        rt.block_on(b, async move {
            let t = open(tcfg, 1, 0, &l2);
            for x in 0..n {
                t.insert(&k(2001 + x), 1).await.unwrap();
            }
        })
        .unwrap();
        rt.block_on(a, async move {
            let t = open(tcfg, 0, 0, &l3).with_cache(cache);
            // Three writes of a key the split moved to the sibling.
            let mut reads = Vec::new();
            for v in 7..10 {
                let s0 = dm_runtime::task_stats();
                t.insert(&k(2000 + n), v).await.unwrap();
                reads.push(dm_runtime::task_stats().since(&s0).read);
            }
            assert_eq!(t.get(&k(2000 + n)).await.unwrap(), Some(9));
            reads
        })
        .unwrap()
    };
    // The first count of inserts by CS 1 that splits the cached leaf.
    let n = (1..40)
        .find(|&n| reads(ShermanCache::Ours, n)[0] > 1)
        .expect("40 inserts split the leaf");
    let (ours, authors) = (
        reads(ShermanCache::Ours, n),
        reads(ShermanCache::Authors, n),
    );
    assert_eq!(ours[0], 2, "the stale leaf and its sibling");
    // The stale leaf, then root, ..., the leaf parent and the leaf: at
    // least four.
    assert!(
        authors[0] >= 4 && authors[0] > ours[0],
        "a stale entry: {authors:?} READs (authors) against {ours:?} (ours)"
    );
    // Ours dropped the entry after moving right (as a reader does): the
    // next write READs the leaf parent afresh, the one after goes straight
    // to the sibling. Kept, each would lock and READ the old leaf first.
    assert_eq!(ours[2], 1, "{ours:?}");
    assert_eq!(authors[1..], [1, 1], "{authors:?}");
}

#[test]
fn cache_use_names() {
    for u in [ShermanCache::Ours, ShermanCache::Authors] {
        assert_eq!(ShermanCache::named(u.name()), Some(u));
    }
    assert_eq!(ShermanCache::named("b-link"), None);
    assert_eq!(TreeConfig::default().sherman_cache, ShermanCache::Ours);
}
