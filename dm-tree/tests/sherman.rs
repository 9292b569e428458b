//! Sherman's ladder over the FG+ code path (Sherman §4.3-4.5): verb counts
//! per rung with a warm index cache, and lock hand-over.

use dm_runtime::lock::LockTechniques;
use dm_runtime::SimRuntime;
use dm_tree::{FgTree, IndexCache, LockTableConfig, Techniques, TreeConfig};
use dm_verbs::sim::{SimConfig, SimFabric};
use dm_verbs::{Fabric, MsConfig, VerbStats};
use std::sync::Arc;

fn k(x: u64) -> Vec<u8> {
    x.to_be_bytes().to_vec()
}

/// One MS with 256 KiB of device memory and masked CAS; 1 KB nodes.
fn setup(t: Techniques, device: bool) -> (SimRuntime, TreeConfig) {
    let chunk = 1 << 20;
    let fabric = SimFabric::new(SimConfig {
        num_ms: 1,
        ms: MsConfig {
            region_bytes: 4096 + 16 * chunk,
            chunk_bytes: chunk,
            device_bytes: if device { 256 << 10 } else { 0 },
            cores: 1,
        },
        ..Default::default()
    });
    let tcfg = TreeConfig {
        chunk_bytes: chunk,
        techniques: t,
        lock_table: LockTableConfig::for_caps(fabric.caps()),
        ..Default::default()
    };
    (SimRuntime::new(fabric), tcfg)
}

/// Verbs of one update of an existing key (no split) after a warm-up get.
fn update_stats(t: Techniques, device: bool) -> VerbStats {
    let (mut rt, tcfg) = setup(t, device);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let entries: Vec<_> = (0..5000u64).map(|i| (k(i * 2), i)).collect();
        FgTree::bulk_load(tcfg, 0, 0, &entries, 0.5).await.unwrap();
        let t = FgTree::open(tcfg, 0, 0)
            .unwrap()
            .with_cache(Arc::new(IndexCache::new(1 << 20, tcfg.node_bytes)))
            .with_local_locks(FgTree::new_local_lock_table(&tcfg));
        // Warm-up: fills the index cache and, for a host-memory lock table,
        // reads its address once per handle.
        assert!(t.update(&k(1000), 6).await.unwrap());
        let s0 = dm_runtime::task_stats();
        assert!(t.update(&k(1000), 7).await.unwrap());
        let s = dm_runtime::task_stats().since(&s0);
        assert_eq!(t.get(&k(1000)).await.unwrap(), Some(7));
        s
    })
    .unwrap()
}

#[test]
fn warm_cache_update_round_trips_per_rung() {
    // FG+: lock CAS, leaf READ, write-back, unlock WRITE = 4 round trips.
    let s = update_stats(Techniques::FG_PLUS, true);
    assert_eq!((s.rtts, s.cas, s.read, s.write), (4, 1, 1, 2), "{s:?}");
    assert_eq!(s.bytes_written, 1016 + 8);
    // Command combination: write-back and unlock in one doorbell = 3.
    let s = update_stats(Techniques::SHERMAN_COMBINE, true);
    assert_eq!((s.rtts, s.cas, s.read, s.write), (3, 1, 1, 2), "{s:?}");
    // Global lock table in device memory, 16-bit lanes: acquire and release by
    // masked CAS, the release in the write-back's doorbell = 3.
    for t in [Techniques::SHERMAN_ONCHIP, Techniques::SHERMAN_HIER] {
        let s = update_stats(t, true);
        assert_eq!(
            (s.rtts, s.cas, s.read, s.write),
            (3, 2, 1, 1),
            "{t:?} {s:?}"
        );
    }
    // Host-memory lock table (no device memory): 64-bit slots, WRITE 0 release.
    let s = update_stats(Techniques::SHERMAN_HIER, false);
    assert_eq!((s.rtts, s.cas, s.read, s.write), (3, 1, 1, 2), "{s:?}");
    // Sherman (two-level versions, §4.4): the same 3 round trips, but the
    // write-back moves one 24-byte entry slot (key, value, check word), not the node.
    let s = update_stats(Techniques::SHERMAN, true);
    assert_eq!((s.rtts, s.cas, s.read, s.write), (3, 2, 1, 1), "{s:?}");
    assert_eq!(s.bytes_written, 24, "{s:?}");
}

/// Sherman's plain insert (no split) and remove write back one entry slot;
/// an insert into a full leaf splits it and writes whole nodes (sorted).
#[test]
fn sherman_insert_and_remove_write_one_entry() {
    let (mut rt, tcfg) = setup(Techniques::SHERMAN, true);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let entries: Vec<_> = (0..5000u64).map(|i| (k(i * 2), i)).collect();
        FgTree::bulk_load(tcfg, 0, 0, &entries, 0.8).await.unwrap();
        let t = FgTree::open(tcfg, 0, 0)
            .unwrap()
            .with_cache(Arc::new(IndexCache::new(1 << 20, tcfg.node_bytes)))
            .with_local_locks(FgTree::new_local_lock_table(&tcfg));
        assert_eq!(t.leaf_capacity(), (1024 - 48) / 24);
        assert!(t.update(&k(1000), 6).await.unwrap());
        let op = |name: &str, s: VerbStats, bytes: u64| {
            assert_eq!(
                (s.rtts, s.cas, s.read, s.write),
                (3, 2, 1, 1),
                "{name} {s:?}"
            );
            assert_eq!(s.bytes_written, bytes, "{name} {s:?}");
        };
        let s0 = dm_runtime::task_stats();
        t.insert(&k(1001), 1).await.unwrap();
        op("insert", dm_runtime::task_stats().since(&s0), 24);
        let s0 = dm_runtime::task_stats();
        assert!(t.remove(&k(1000)).await.unwrap());
        op("remove", dm_runtime::task_stats().since(&s0), 24);
        assert_eq!(t.get(&k(1000)).await.unwrap(), None);
        assert_eq!(t.get(&k(1001)).await.unwrap(), Some(1));
        // Fill leaves (bulk-loaded 80% full: 32 keys over 64 numbers) until they split: whole nodes move.
        let mut split_bytes = 0;
        for x in 0..t.leaf_capacity() as u64 {
            let s0 = dm_runtime::task_stats();
            t.insert(&k(1003 + 2 * x), x).await.unwrap();
            split_bytes = split_bytes.max(dm_runtime::task_stats().since(&s0).bytes_written);
        }
        assert!(
            split_bytes >= 2 * 1016,
            "no split wrote whole nodes: {split_bytes}"
        );
        for x in 0..t.leaf_capacity() as u64 {
            assert_eq!(t.get(&k(1003 + 2 * x)).await.unwrap(), Some(x));
        }
        let all = t.scan(&k(0), 100_000).await.unwrap();
        assert_eq!(all.len(), 5000 + t.leaf_capacity());
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    })
    .unwrap();
}

/// Two cores of one CS, after a warm get each, update keys of the same
/// leaf at the same time; each update's verbs, fewest round trips first.
fn concurrent_updates(t: Techniques, node_read: dm_tree::NodeRead) -> Vec<VerbStats> {
    let (mut rt, mut tcfg) = setup(t, true);
    tcfg.node_read = node_read;
    let c0 = rt.add_core(0, 0);
    let c1 = rt.add_core(0, 1);
    rt.block_on(c0, async move {
        let entries: Vec<_> = (0..5000u64).map(|i| (k(i * 2), i)).collect();
        FgTree::bulk_load(tcfg, 0, 0, &entries, 0.5).await.unwrap();
    })
    .unwrap();
    let cache = Arc::new(IndexCache::new(1 << 20, tcfg.node_bytes));
    let llt = FgTree::new_local_lock_table(&tcfg);
    let hs: Vec<_> = [c0, c1]
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let t = FgTree::open(tcfg, 0, i as u16)
                .unwrap()
                .with_cache(cache.clone())
                .with_local_locks(llt.clone());
            rt.spawn_on(c, async move {
                t.get(&k(1000)).await.unwrap();
                let s0 = dm_runtime::task_stats();
                assert!(t.update(&k(1000 + 2 * i as u64), 9).await.unwrap());
                let s = dm_runtime::task_stats().since(&s0);
                assert_eq!(t.get(&k(1000 + 2 * i as u64)).await.unwrap(), Some(9));
                s
            })
        })
        .collect();
    rt.run();
    let mut v: Vec<VerbStats> = hs
        .into_iter()
        .map(|h| h.try_take().unwrap().unwrap())
        .collect();
    v.sort_by_key(|s| (s.rtts, s.read));
    v
}

/// Two cores of one CS update keys of the same leaf at the same time: under
/// HOCL the second queues locally and is handed the lock, skipping the CAS
/// (2 round trips: leaf READ, write-back + release); without HOCL it spins on
/// the remote lock.
#[test]
fn hand_over_saves_the_lock_round_trip() {
    let run = |t| concurrent_updates(t, dm_tree::NodeRead::Checksum);
    let v = run(Techniques::SHERMAN_HIER);
    assert_eq!(
        (v[0].rtts, v[0].cas, v[0].read),
        (2, 1, 1),
        "receiver {:?}",
        v[0]
    );
    assert_eq!(
        v[1].cas, 1,
        "giver acquired once and handed over: {:?}",
        v[1]
    );
    let v = run(Techniques::SHERMAN);
    assert_eq!(
        (v[0].rtts, v[0].read),
        (2, 1),
        "sherman receiver {:?}",
        v[0]
    );
    let v = run(Techniques::SHERMAN_ONCHIP);
    assert!(v.iter().all(|s| s.rtts >= 3 && s.cas >= 2), "{v:?}");
}

/// `NodeRead::Optimistic` (DEX's Sherman baseline, issue 34) under HOCL: a
/// writer READs the leaf it holds once, and the version before its release
/// only when it does not hand the lock over (`write_page_and_unlock`): the
/// giver READs once, the receiver, which releases, twice.
#[test]
fn optimistic_writers_read_the_version_unless_they_hand_over() {
    let v = concurrent_updates(Techniques::SHERMAN_HIER, dm_tree::NodeRead::Optimistic);
    // The giver: lock CAS, leaf READ, write-back, hand-over (no version
    // READ, no unlock). The receiver: no lock CAS, leaf READ, version READ,
    // write-back with the unlock (a masked CAS of its lane).
    assert_eq!((v[0].cas, v[0].read, v[0].rtts), (1, 1, 3), "giver {v:?}");
    assert_eq!(
        (v[1].cas, v[1].read, v[1].rtts),
        (1, 2, 3),
        "receiver {v:?}"
    );
}

#[test]
fn ladder_names_and_bad_combinations() {
    for n in Techniques::NAMES {
        assert!(Techniques::named(n).is_some());
    }
    assert!(Techniques::named("sherman-magic").is_none());
    let bad = TreeConfig {
        techniques: Techniques {
            locks: LockTechniques {
                onchip_lock: false,
                ..Techniques::SHERMAN_HIER.locks
            },
            ..Techniques::SHERMAN_HIER
        },
        ..Default::default()
    };
    assert!(FgTree::open(bad, 0, 0).is_err());
}

/// 200k keys in 1 KB nodes 80% full: leaves, two internal levels, root at level 3.
fn tall_tree(
    cache: Arc<IndexCache>,
) -> (SimRuntime, dm_runtime::SimCore, TreeConfig, Arc<IndexCache>) {
    let chunk = 8 << 20;
    let fabric = SimFabric::new(SimConfig {
        num_ms: 1,
        ms: MsConfig {
            region_bytes: 4096 + 64 * chunk,
            chunk_bytes: chunk,
            ..Default::default()
        },
        ..Default::default()
    });
    let tcfg = TreeConfig {
        chunk_bytes: chunk,
        ..Default::default()
    };
    let mut rt = SimRuntime::new(fabric);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let entries: Vec<_> = (0..200_000u64).map(|i| (k(i), i)).collect();
        FgTree::bulk_load(tcfg, 0, 0, &entries, 0.8).await.unwrap();
    })
    .unwrap();
    (rt, c, tcfg, cache)
}

/// Sherman §4.1's type-2 cache: with no room for leaf parents, a traversal
/// still starts below the cached root and its children (2 READs: level 1 and
/// the leaf, instead of root pointer, root, level 2, level 1, leaf).
#[test]
fn top_two_levels_are_cached() {
    let (mut rt, c, tcfg, cache) = tall_tree(Arc::new(IndexCache::new(0, 1024)));
    let (cold, warm) = rt
        .block_on(c, async move {
            let t = FgTree::open(tcfg, 0, 0).unwrap().with_cache(cache.clone());
            let s0 = dm_runtime::task_stats();
            assert_eq!(t.get(&k(4242)).await.unwrap(), Some(4242));
            let s1 = dm_runtime::task_stats();
            // A key 100 leaves away: another leaf parent, the same level-2 node.
            assert_eq!(t.get(&k(9_042)).await.unwrap(), Some(9_042));
            let s = cache.stats();
            assert_eq!(s.nodes, 0, "no budget for leaf parents");
            assert!(s.top_nodes >= 2, "{s:?}");
            (s1.since(&s0), dm_runtime::task_stats().since(&s1))
        })
        .unwrap();
    assert_eq!(cold.read, 5, "root pointer, levels 3, 2, 1, leaf: {cold:?}");
    assert_eq!(warm.read, 2, "level 1 and leaf: {warm:?}");
}

/// Sherman §4.2: a range query READs its leaves in parallel; with the leaf
/// parent cached, a scan over five leaves costs two or three round trips.
#[test]
fn scan_reads_leaves_in_parallel() {
    let run = |cache_bytes: u64| {
        let (mut rt, c, tcfg, cache) = tall_tree(Arc::new(IndexCache::new(cache_bytes, 1024)));
        rt.block_on(c, async move {
            let t = FgTree::open(tcfg, 0, 0).unwrap().with_cache(cache);
            t.get(&k(10_000)).await.unwrap();
            let s0 = dm_runtime::task_stats();
            let r = t.scan(&k(10_000), 200).await.unwrap();
            assert_eq!(r.len(), 200);
            assert!(r.iter().enumerate().all(|(i, e)| e.1 == 10_000 + i as u64));
            dm_runtime::task_stats().since(&s0)
        })
        .unwrap()
    };
    // 200 entries at 48 per leaf: 5 leaves; the first READ alone, then the rest together.
    let par = run(1 << 20);
    assert!(par.read >= 5 && par.read <= 6, "{par:?}");
    assert!(par.rtts <= 3, "parallel READs: {par:?}");
    let seq = run(0);
    assert!(
        seq.rtts >= 5,
        "without leaf parents, one leaf per round trip: {seq:?}"
    );
}
