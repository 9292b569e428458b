//! Dolphin on the sim fabric with strict (8-byte) torn READs: differential
//! tests against `BTreeMap` with dense keys (leaf splits, special nodes,
//! backtracking, ART path splits between prefixes), the round trips per
//! operation, bad input, and concurrent writers on several CSs.

mod common;

use dm_art::dolphin::{DolphinCounters, DolphinStats};
use dm_art::{ArtError, DolphinCache, DolphinConfig, DolphinTree, DolphinUpdate};
use dm_runtime::lock::{LeaseConfig, LockCounters, Member};
use dm_runtime::{task_stats, SimCore, SimRuntime};
use proptest::prelude::*;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

fn cluster(seed: u64) -> (SimRuntime, DolphinConfig) {
    let dcfg = DolphinConfig {
        chunk_bytes: common::CHUNK,
        num_ms: common::NUM_MS,
        ..Default::default()
    };
    (common::sim(seed), dcfg)
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, u64),
    Update(u64, u64),
    Remove(u64),
    Get(u64),
    Scan(u64, usize),
}

/// Dense keys under a few 7-byte prefixes that share leading bytes (ART
/// path splits between them) and 256 last bytes each (leaf splits).
fn key() -> BoxedStrategy<u64> {
    let prefixes = [
        0u64,
        0x0100,
        0x0200,
        0x0100_0000_0000_0000,
        0x0100_0000_0100_0000,
    ];
    (0..prefixes.len(), 0u64..256)
        .prop_map(move |(p, b)| prefixes[p] | b)
        .boxed()
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Update(k, v)),
        2 => key().prop_map(Op::Remove),
        2 => key().prop_map(Op::Get),
        1 => (key(), 0..120usize).prop_map(|(k, n)| Op::Scan(k, n)),
    ];
    proptest::collection::vec(op, 1..700)
}

/// Runs `ops` against `BTreeMap` and the tree through three handles (no
/// cache, a roomy cache, a cache too small for the tree), alternating, so
/// each cache goes stale behind the others' splits as another CS's would.
/// `lease`: each handle's CS joins a membership (lease mode, the leaf lock
/// a node lock naming its holder: `DolphinTree::with_member`).
fn differential(ops: Vec<Op>, lease: bool) {
    let (mut rt, dcfg) = cluster(1);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let mut members = Vec::new();
        if lease {
            for cs in 0..3 {
                members.push(
                    Member::join(cs, LeaseConfig::SIM, common::CHUNK)
                        .await
                        .unwrap(),
                );
            }
        }
        let join = |t: DolphinTree, cs: usize| match members.get(cs) {
            Some(m) => t.with_member(m.clone()).unwrap(),
            None => t,
        };
        let t0 = join(DolphinTree::create(dcfg, 0, 0).await.unwrap(), 0);
        let t1 = join(DolphinTree::open(dcfg, 1, 0).unwrap(), 1)
            .with_cache(Arc::new(DolphinCache::new(1 << 20)));
        let t2 = join(DolphinTree::open(dcfg, 2, 0).unwrap(), 2)
            .with_cache(Arc::new(DolphinCache::new(700)));
        let handles = [&t0, &t1, &t2];
        let mut m: BTreeMap<u64, u64> = BTreeMap::new();
        for (i, o) in ops.into_iter().enumerate() {
            let t = handles[(i * 7 + i / 3) % 3];
            match o {
                Op::Insert(k, v) => {
                    t.insert(&k.to_be_bytes(), v).await.unwrap();
                    m.insert(k, v);
                }
                Op::Update(k, v) => {
                    let had = m.contains_key(&k);
                    if had {
                        m.insert(k, v);
                    }
                    assert_eq!(
                        t.update(&k.to_be_bytes(), v).await.unwrap(),
                        had,
                        "update {k:x}"
                    );
                }
                Op::Remove(k) => {
                    assert_eq!(
                        t.remove(&k.to_be_bytes()).await.unwrap(),
                        m.remove(&k).is_some(),
                        "remove {k:x}"
                    );
                }
                Op::Get(k) => {
                    assert_eq!(
                        t.get(&k.to_be_bytes()).await.unwrap(),
                        m.get(&k).copied(),
                        "get {k:x}"
                    );
                }
                Op::Scan(k, n) => {
                    let want: Vec<(Vec<u8>, u64)> = m
                        .range(k..)
                        .take(n)
                        .map(|(k, v)| (k.to_be_bytes().to_vec(), *v))
                        .collect();
                    assert_eq!(
                        t.scan(&k.to_be_bytes(), n).await.unwrap(),
                        want,
                        "scan {k:x} {n}"
                    );
                }
            }
        }
        for (k, v) in &m {
            assert_eq!(t1.get(&k.to_be_bytes()).await.unwrap(), Some(*v));
        }
        let all = t2.scan(&0u64.to_be_bytes(), usize::MAX).await.unwrap();
        assert_eq!(all.len(), m.len());
    })
    .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn dense_keys_match_btreemap(ops in ops()) {
        differential(ops, false);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]
    #[test]
    fn dense_keys_match_btreemap_in_lease_mode(ops in ops()) {
        differential(ops, true);
    }
}

/// Every last byte of three prefixes in ascending, descending and
/// scrambled order: many splits per prefix, within the special node's 16
/// entries (module docs of `dm_art::dolphin`).
#[test]
fn full_prefixes_split_within_one_special_node() {
    let mut ops = Vec::new();
    for (p, order) in [(0x0a00u64, 0), (0x0b00, 1), (0x0c00, 2)] {
        for i in 0..256u64 {
            let b = match order {
                0 => i,
                1 => 255 - i,
                _ => i * 97 % 256,
            };
            ops.push(Op::Insert(p | b, b));
        }
    }
    ops.push(Op::Scan(0, 1000));
    for i in 0..256u64 {
        ops.push(Op::Get(0x0b00 | i));
        ops.push(Op::Remove(0x0c00 | i));
    }
    ops.push(Op::Scan(0x0a80, 1000));
    differential(ops.clone(), false);
    differential(ops, true);
}

/// (READ, WRITE, CAS, FAA, round trips) the calling task posted since `before`.
fn verbs(before: dm_verbs::VerbStats) -> (u64, u64, u64, u64, u64) {
    let s = task_stats();
    (
        s.read - before.read,
        s.write - before.write,
        s.cas - before.cas,
        s.faa - before.faa,
        s.rtts - before.rtts,
    )
}

/// Dolphin §III-C and the digest's B6 #1, as built: lookup 1 READ, update
/// 2 round trips ([FAA + READ], [WRITE + CAS + FAA]), insert into a leaf
/// with a free item 2 ([FAA + READ], [WRITE + FAA]), remove 2; bad keys
/// and leaf sizes are errors.
#[test]
fn round_trips_per_operation_with_a_warm_cache() {
    round_trips(false, DolphinUpdate::KeyWordCas);
}

/// Lease mode: the same round trips; the Spear FAAs become the node lock's
/// CAS and unlock WRITE, the update's key-word CAS a WRITE.
#[test]
fn round_trips_per_operation_in_lease_mode() {
    round_trips(true, DolphinUpdate::KeyWordCas);
}

/// The paper's update (§III-C): [FAA + READ], [WRITE item + FAA], no CAS;
/// the authors' waits for the first round trip only. Neither has a lease
/// mode.
#[test]
fn the_papers_and_the_authors_updates_take_no_cas() {
    round_trips(false, DolphinUpdate::Paper);
    round_trips(false, DolphinUpdate::Authors);
    let (mut rt, dcfg) = cluster(2);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let cfg = DolphinConfig {
            update: DolphinUpdate::Paper,
            ..dcfg
        };
        let t = DolphinTree::create(cfg, 0, 0).await.unwrap();
        let m = Member::join(0, LeaseConfig::SIM, common::CHUNK)
            .await
            .unwrap();
        assert!(matches!(t.with_member(m), Err(ArtError::BadConfig(_))));
    })
    .unwrap();
}

fn round_trips(lease: bool, mode: DolphinUpdate) {
    // (READ, WRITE, CAS, FAA, round trips) of an update and of a remove,
    // insert or upsert, and the bytes an update writes.
    let (update, write, update_bytes) = match (lease, mode) {
        (true, _) => ((1, 3, 1, 0, 2), (1, 3, 1, 0, 2), 24),
        (false, DolphinUpdate::KeyWordCas) => ((1, 1, 1, 2, 2), (1, 1, 0, 2, 2), 8),
        (false, DolphinUpdate::Paper) => ((1, 1, 0, 2, 2), (1, 1, 0, 2, 2), 24),
        (false, DolphinUpdate::Authors) => ((1, 1, 0, 2, 1), (1, 1, 0, 2, 2), 24),
    };
    let remove = if lease { (1, 2, 1, 0, 2) } else { write };
    let (mut rt, dcfg) = cluster(2);
    let dcfg = DolphinConfig {
        update: mode,
        ..dcfg
    };
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let mut t = DolphinTree::create(dcfg, 0, 0)
            .await
            .unwrap()
            .with_cache(Arc::new(DolphinCache::new(1 << 20)));
        if lease {
            let m = Member::join(0, LeaseConfig::SIM, common::CHUNK)
                .await
                .unwrap();
            t = t.with_member(m).unwrap();
        }
        // Two prefixes that share 6 bytes (an ART node), one split (a special node).
        for b in 0..60u64 {
            t.insert(&(0x0100 | b).to_be_bytes(), b).await.unwrap();
            t.insert(&(0x0200 | b).to_be_bytes(), b).await.unwrap();
        }
        for k in [0x0105u64, 0x0130, 0x0205] {
            t.get(&k.to_be_bytes()).await.unwrap();
        }
        for k in [0x0105u64, 0x0130, 0x0205] {
            let b = task_stats();
            assert_eq!(t.get(&k.to_be_bytes()).await.unwrap(), Some(k & 0xff));
            assert_eq!(verbs(b), (1, 0, 0, 0, 1), "get {k:x}");
            let b = task_stats();
            assert!(t.update(&k.to_be_bytes(), 7).await.unwrap());
            assert_eq!(verbs(b), update, "update {k:x}");
            assert_eq!(t.get(&k.to_be_bytes()).await.unwrap(), Some(7));
            let b = task_stats();
            assert!(t.remove(&k.to_be_bytes()).await.unwrap());
            assert_eq!(verbs(b), remove, "remove {k:x}");
            let b = task_stats();
            t.insert(&k.to_be_bytes(), 9).await.unwrap();
            assert_eq!(verbs(b), write, "insert {k:x}");
            let b = task_stats();
            t.insert(&k.to_be_bytes(), 10).await.unwrap();
            assert_eq!(verbs(b), write, "upsert {k:x}");
            assert_eq!(t.get(&k.to_be_bytes()).await.unwrap(), Some(10));
        }
        // An update writes one 8-byte value buffer (and in lease mode its
        // key word and the unlock), not the leaf.
        let b = task_stats();
        t.update(&0x0101u64.to_be_bytes(), 1).await.unwrap();
        assert_eq!(task_stats().bytes_written - b.bytes_written, update_bytes);
        assert!(!t.update(&0x0300u64.to_be_bytes(), 1).await.unwrap());
        assert!(matches!(t.get(b"short").await, Err(ArtError::KeyLength(_))));
        assert!(matches!(
            t.insert(&[0; 9], 1).await,
            Err(ArtError::KeyLength(_))
        ));
        let bad = DolphinConfig {
            leaf_bytes: 512,
            ..dcfg
        };
        assert!(matches!(
            DolphinTree::open(bad, 0, 0),
            Err(ArtError::BadConfig(_))
        ));
    })
    .unwrap();
}

/// 4 cores on 2 CSs x 6 tasks: each task inserts its own dense keys
/// (splits of shared leaves race), updates shared hot keys (same-key CAS
/// races), removes some of its keys, and reads its keys back; torn READs
/// and delayed verbs on; a cache per CS (a small one on CS 1), none for
/// one seed. Every key ends with the task's last write, the hot keys with
/// one of the values written.
#[test]
fn concurrent_writers_survive_torn_reads_and_splits() {
    let mut rejected = 0;
    for seed in 0..4u64 {
        let (mut rt, dcfg) = cluster(10 + seed);
        let cores: Vec<SimCore> = (0..4).map(|i| rt.add_core(i / 2, i % 2)).collect();
        rt.block_on(cores[0], async move {
            DolphinTree::create(dcfg, 0, 0).await.map(|_| ())
        })
        .unwrap()
        .unwrap();
        let caches = [
            Arc::new(DolphinCache::new(1 << 20)),
            Arc::new(DolphinCache::new(2048)),
        ];
        let stats = Rc::new(RefCell::new(DolphinStats::default()));
        // One index: every handle below counts into these as well.
        let shared = Arc::new(DolphinCounters::new());
        let locks = Arc::new(LockCounters::new());
        let hot = |h: u64| (0x7700u64 | h).to_be_bytes();
        let tasks = 6u64;
        let per_task = 60u64;
        for (ci, &c) in cores.iter().enumerate() {
            let mut t = DolphinTree::open(dcfg, (ci / 2) as u16, (ci % 2) as u16)
                .unwrap()
                .with_counters(shared.clone())
                .with_lock_counters(locks.clone());
            if seed != 3 {
                t = t.with_cache(caches[ci / 2].clone());
            }
            let t = Rc::new(t);
            for task in 0..tasks {
                let (t, stats) = (t.clone(), stats.clone());
                let id = ci as u64 * tasks + task;
                rt.spawn_on(c, async move {
                    // Task `id` owns last bytes id, id + 24, ... of prefixes 0x01.., 0x02..
                    let key = |j: u64| {
                        let x = id + 24 * j;
                        ((0x0100 + (x / 256) * 0x100) | (x % 256)).to_be_bytes()
                    };
                    for j in 0..per_task {
                        t.insert(&key(j), j).await.unwrap();
                        if j % 5 == 0 {
                            t.update(&hot(j % 3), id << 32 | j).await.unwrap();
                            t.insert(&hot(3), id).await.unwrap();
                        }
                        if j % 7 == 3 {
                            assert!(t.remove(&key(j - 1)).await.unwrap());
                        }
                        if j % 4 == 0 {
                            assert!(t.update(&key(j), j + 1000).await.unwrap());
                        }
                    }
                    for j in 0..per_task {
                        let want = if (j + 1) % 7 == 3 {
                            None
                        } else if j % 4 == 0 {
                            Some(j + 1000)
                        } else {
                            Some(j)
                        };
                        assert_eq!(t.get(&key(j)).await.unwrap(), want, "task {id} key {j}");
                    }
                    let s = t.stats();
                    let mut a = stats.borrow_mut();
                    a.backtracks += s.backtracks;
                    a.lost_update_cas += s.lost_update_cas;
                    a.lock_waits += s.lock_waits;
                    a.rejected_images += s.rejected_images;
                });
            }
        }
        // Readers of the hot keys while they are updated (torn images).
        for (ci, &c) in cores.iter().enumerate() {
            let t = Rc::new(DolphinTree::open(dcfg, (ci / 2) as u16, 2 + (ci % 2) as u16).unwrap());
            let stats = stats.clone();
            rt.spawn_on(c, async move {
                for r in 0..300u64 {
                    if let Some(v) = t.get(&hot(r % 3)).await.unwrap() {
                        assert!(v == 0 || (v & 0xffff_ffff) % 5 == 0, "read hot: {v:x}");
                    }
                }
                stats.borrow_mut().rejected_images += t.stats().rejected_images;
            });
        }
        // The hot keys exist before the tasks start.
        let t0 = DolphinTree::open(dcfg, 0, 0).unwrap();
        rt.block_on(cores[0], async move {
            for h in 0..3 {
                t0.insert(&hot(h), 0).await.unwrap();
            }
        })
        .unwrap();
        rt.run();
        let t0 = DolphinTree::open(dcfg, 0, 0).unwrap();
        let all = rt
            .block_on(cores[0], async move {
                let mut v = Vec::new();
                for h in 0..4 {
                    v.push(t0.get(&hot(h)).await.unwrap());
                }
                (v, t0.scan(&0u64.to_be_bytes(), usize::MAX).await.unwrap())
            })
            .unwrap();
        for (h, v) in all.0.iter().enumerate() {
            let v = v.expect("hot key present");
            if h < 3 {
                assert!(v == 0 || (v & 0xffff_ffff) % 5 == 0, "hot {h}: {v:x}");
            } else {
                assert!(v < 24, "hot 3: {v}");
            }
        }
        let removed = (0..per_task).filter(|j| (j + 1) % 7 == 3).count() as u64;
        assert_eq!(all.1.len() as u64, 24 * (per_task - removed) + 4);
        let s = *stats.borrow();
        eprintln!("seed {seed}: {s:?}");
        assert!(s.lock_waits > 0, "exclusive holds met shares");
        assert!(s.lost_update_cas > 0, "same-key updates raced");
        // The writers' counts, per index (the readers' handles count apart).
        let (d, l) = (shared.snapshot(), locks.snapshot());
        assert!(d.lock_waits > 0 && d.lost_update_cas > 0, "{d:?}");
        assert_eq!(l.waits, d.lock_waits, "each Spear wait is a lock wait");
        assert!(
            l.acquisitions >= 4 * tasks * per_task,
            "a hold per insert: {l:?}"
        );
        rejected += s.rejected_images;
    }
    assert!(rejected > 0, "torn images were seen and READ again");
}

/// Radix trees sharing one fabric (issue 31): a SMART tree and a Dolphin
/// tree at their default roots (superblock offsets 16 and 32), and an ART
/// baseline (HOCL locks in a host lock table, its address at root + 8 on
/// every MS) and a second Dolphin tree in catalog root areas; keys written
/// to all four, interleaved, each tree then holds exactly its own values.
#[test]
fn radix_trees_share_a_fabric_at_default_roots_and_catalog_areas() {
    use dm_art::{LockTableConfig, SmartConfig, SmartTree, Techniques};
    use dm_runtime::catalog;
    let (mut rt, dcfg) = cluster(5);
    let scfg = SmartConfig {
        chunk_bytes: common::CHUNK,
        num_ms: common::NUM_MS,
        ..Default::default()
    };
    let art = SmartConfig {
        techniques: Techniques::ART,
        lock_table: LockTableConfig::default(),
        ..scfg
    };
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let smart = SmartTree::create(scfg, 0, 0).await.unwrap();
        let dolphin = DolphinTree::create(dcfg, 0, 0).await.unwrap();
        let (e, _) = catalog::open_or_create("art", 1, art.root_bytes(), 1, |e| async move {
            SmartTree::create(art.in_root_area(e.root_off), 0, 0).await?;
            Ok::<(), Box<dyn std::error::Error>>(())
        })
        .await
        .unwrap();
        let art = SmartTree::open(art.in_root_area(e.root_off), 0, 0)
            .unwrap()
            .with_local_locks(SmartTree::new_local_lock_table());
        let (e, _) = catalog::open_or_create("dolphin", 2, dcfg.root_bytes(), 1, |e| async move {
            DolphinTree::create(dcfg.in_root_area(e.root_off), 0, 0).await?;
            Ok::<(), Box<dyn std::error::Error>>(())
        })
        .await
        .unwrap();
        let dolphin2 = DolphinTree::open(dcfg.in_root_area(e.root_off), 0, 0).unwrap();
        let key = |x: u64| x.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes();
        for x in 0..300u64 {
            smart.insert(&key(x), x << 2).await.unwrap();
            dolphin.insert(&key(x), x << 2 | 1).await.unwrap();
            art.insert(&key(x), x << 2 | 2).await.unwrap();
            dolphin2.insert(&key(x), x << 2 | 3).await.unwrap();
        }
        for x in 0..300u64 {
            assert_eq!(smart.get(&key(x)).await.unwrap(), Some(x << 2));
            assert_eq!(dolphin.get(&key(x)).await.unwrap(), Some(x << 2 | 1));
            assert_eq!(art.get(&key(x)).await.unwrap(), Some(x << 2 | 2));
            assert_eq!(dolphin2.get(&key(x)).await.unwrap(), Some(x << 2 | 3));
        }
    })
    .unwrap();
}
