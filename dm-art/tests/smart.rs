//! SMART on the sim fabric with strict (8-byte) torn READs: differential
//! tests against `BTreeMap` (integer and string keys, alphabets small enough
//! to force leaf splits, header splits, chains and type switches), verb
//! counts, bad input, and concurrent writers on several CSs.

mod common;

use dm_art::{ArtCache, ArtError, KeyCodec, Rdwc, SmartConfig, SmartTree, Techniques};
use dm_runtime::{task_stats, SimCore, SimRuntime};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

fn cluster(keys: KeyCodec, seed: u64) -> (SimRuntime, SmartConfig) {
    let scfg = SmartConfig {
        keys,
        chunk_bytes: common::CHUNK,
        num_ms: common::NUM_MS,
        ..Default::default()
    };
    (common::sim(seed), scfg)
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, u64),
    Update(Vec<u8>, u64),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    Scan(Vec<u8>, usize),
}

fn ops(key: BoxedStrategy<Vec<u8>>) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        5 => (key.clone(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        1 => (key.clone(), any::<u64>()).prop_map(|(k, v)| Op::Update(k, v)),
        2 => key.clone().prop_map(Op::Remove),
        2 => key.clone().prop_map(Op::Get),
        1 => (key, 0..40usize).prop_map(|(k, n)| Op::Scan(k, n)),
    ];
    proptest::collection::vec(op, 1..400)
}

/// Integer keys whose bytes come from a 4-letter alphabet: long shared
/// prefixes (chains, header splits) and up to 4 children per byte.
fn int_key() -> BoxedStrategy<Vec<u8>> {
    proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(7), Just(0xff)], 8).boxed()
}

/// Wide integer keys: many children per node (type switches up to 256 slots).
fn wide_key() -> BoxedStrategy<Vec<u8>> {
    (0u64..600)
        .prop_map(|x| (x * 0x0101_0101 % 0x1_0000_0000).to_be_bytes().to_vec())
        .boxed()
}

/// Strings of 0..=9 bytes over "ab\0": prefixes of each other, trailing zeros.
fn str_key() -> BoxedStrategy<Vec<u8>> {
    proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(0u8)], 0..10).boxed()
}

/// The ladder's rungs (SMART Fig. 18; `dm_art::baseline`).
/// (READ, CAS, WRITE, round trips) the calling task posted since `before`.
fn verbs(before: dm_verbs::VerbStats, after: dm_verbs::VerbStats) -> (u64, u64, u64, u64) {
    let d = |f: fn(&dm_verbs::VerbStats) -> u64| f(&after) - f(&before);
    (d(|s| s.read), d(|s| s.cas), d(|s| s.write), d(|s| s.rtts))
}

const RUNGS: [Techniques; 4] = [
    Techniques::ART,
    Techniques::LOCK_FREE_INTERNAL,
    Techniques::IN_PLACE_LEAF,
    Techniques::SMART,
];

/// Runs `ops` in order against `BTreeMap` and the tree (rung `rung` of
/// [`RUNGS`]) through three handles: no cache, a roomy ART cache, and a
/// cache too small for the tree (evictions); alternating between them
/// leaves each cache stale behind the others' splits and RCU leaf
/// replacements, as another CS would.
fn differential(codec: KeyCodec, ops: Vec<Op>, rung: usize) {
    let (mut rt, mut scfg) = cluster(codec, 1);
    scfg.techniques = RUNGS[rung];
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let t0 = SmartTree::create(scfg, 0, 0)
            .await
            .unwrap()
            .with_local_locks(SmartTree::new_local_lock_table());
        let t1 = SmartTree::open(scfg, 1, 0)
            .unwrap()
            .with_local_locks(SmartTree::new_local_lock_table())
            .with_cache(Arc::new(ArtCache::new(1 << 20)))
            .with_rdwc(Arc::new(Rdwc::new(2, true, true)));
        let t2 = SmartTree::open(scfg, 2, 0)
            .unwrap()
            .with_local_locks(SmartTree::new_local_lock_table())
            .with_cache(Arc::new(ArtCache::new(600)));
        let handles = [&t0, &t1, &t2];
        let mut m: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        for (i, o) in ops.into_iter().enumerate() {
            let t = handles[(i * 7 + i / 3) % 3];
            match o {
                Op::Insert(k, v) => {
                    t.insert(&k, v).await.unwrap();
                    m.insert(k, v);
                }
                Op::Update(k, v) => {
                    let had = m.contains_key(&k);
                    assert_eq!(t.update(&k, v).await.unwrap(), had, "update {k:?}");
                    if had {
                        m.insert(k, v);
                    }
                }
                Op::Remove(k) => {
                    assert_eq!(
                        t.remove(&k).await.unwrap(),
                        m.remove(&k).is_some(),
                        "remove {k:?}"
                    );
                }
                Op::Get(k) => assert_eq!(t.get(&k).await.unwrap(), m.get(&k).copied(), "get {k:?}"),
                Op::Scan(k, n) => {
                    let want: Vec<_> = m
                        .range(k.clone()..)
                        .take(n)
                        .map(|(a, b)| (a.clone(), *b))
                        .collect();
                    assert_eq!(t.scan(&k, n).await.unwrap(), want, "scan {k:?} {n}");
                }
            }
        }
        for (k, v) in &m {
            for t in handles {
                assert_eq!(t.get(k).await.unwrap(), Some(*v));
            }
        }
        let s = t2.cache().unwrap().stats();
        assert!(s.bytes <= 600, "{s:?}");
        let all = t0
            .scan(&codec.key(&vec![0; codec.path_len()]), usize::MAX)
            .await
            .unwrap();
        assert_eq!(all, m.into_iter().collect::<Vec<_>>());
    })
    .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn integer_keys_match_btreemap(ops in ops(int_key()), rung in 0..4usize) {
        differential(KeyCodec::fixed(8), ops, rung);
    }

    #[test]
    fn wide_integer_keys_match_btreemap(ops in ops(wide_key()), rung in 0..4usize) {
        differential(KeyCodec::fixed(8), ops, rung);
    }

    #[test]
    fn string_keys_match_btreemap(ops in ops(str_key()), rung in 0..4usize) {
        differential(KeyCodec::variable(9), ops, rung);
    }
}

/// Keys sharing more than 6 bytes go through chain nodes; a long key space;
/// every rung of the ladder.
#[test]
fn long_string_keys_with_long_common_prefixes() {
    let mut ops = Vec::new();
    for i in 0..300u64 {
        let mut k = b"pypi-package-name-".to_vec();
        k.extend_from_slice(format!("{:x}", i * 2654435761 % 4096).as_bytes());
        ops.push(Op::Insert(k.clone(), i));
        if i % 7 == 0 {
            ops.push(Op::Remove(k.clone()));
        }
        if i % 11 == 0 {
            ops.push(Op::Scan(k, 9));
        }
    }
    for rung in 0..RUNGS.len() {
        differential(KeyCodec::variable(32), ops.clone(), rung);
    }
}

/// Verb counts (no cache, SMART §3.7 of the digest): an update of a present
/// key at depth h costs the root-slot READ, h node READs, the leaf READ, the
/// lock CAS and one WRITE that also releases the lock.
#[test]
fn update_is_read_cas_write_past_the_parent_and_bad_keys_are_errors() {
    let (mut rt, scfg) = cluster(KeyCodec::fixed(8), 3);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let t = SmartTree::create(scfg, 0, 0).await.unwrap();
        for x in 0..50u64 {
            t.insert(&(x << 40).to_be_bytes(), x).await.unwrap();
        }
        let before = task_stats();
        assert!(t.update(&(7u64 << 40).to_be_bytes(), 70).await.unwrap());
        let s = task_stats();
        // root slot + one node (the 50 keys differ in byte 2) + leaf.
        assert_eq!(s.read - before.read, 3, "{s:?}");
        assert_eq!(s.cas - before.cas, 1);
        assert_eq!(s.write - before.write, 1);
        let before = task_stats();
        assert_eq!(t.get(&(7u64 << 40).to_be_bytes()).await.unwrap(), Some(70));
        let s = task_stats();
        assert_eq!(
            (
                s.read - before.read,
                s.cas - before.cas,
                s.write - before.write
            ),
            (3, 0, 0)
        );
        assert!(matches!(
            t.insert(&[1, 2, 3], 1).await,
            Err(ArtError::KeyLength(_))
        ));
        assert!(matches!(t.get(&[0; 9]).await, Err(ArtError::KeyLength(_))));
    })
    .unwrap();
    let (mut rt, scfg) = cluster(KeyCodec::variable(4), 3);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let t = SmartTree::create(scfg, 0, 0).await.unwrap();
        t.insert(b"", 1).await.unwrap();
        t.insert(b"\0", 2).await.unwrap();
        assert_eq!(t.get(b"").await.unwrap(), Some(1));
        assert_eq!(t.get(b"\0").await.unwrap(), Some(2));
        let e = t.insert(b"abcde", 1).await.unwrap_err();
        assert_eq!(e.to_string(), "key of 5 bytes, at most 4 allowed");
    })
    .unwrap();
    assert!(matches!(
        SmartTree::open(
            SmartConfig {
                keys: KeyCodec::fixed(0),
                ..Default::default()
            },
            0,
            0
        ),
        Err(ArtError::BadConfig(_))
    ));
}

/// A slot word whose type field (5 bits) names no node type is corrupt:
/// the walk fails with `Corrupt` instead of READing 2^(ty+1) slots.
#[test]
fn a_slot_word_with_an_impossible_type_is_corrupt() {
    let (mut rt, scfg) = cluster(KeyCodec::fixed(8), 5);
    let root = scfg.root_slot;
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let t = SmartTree::create(scfg, 0, 0).await.unwrap();
        for x in 0..50u64 {
            t.insert(&(x << 40).to_be_bytes(), x).await.unwrap();
        }
        let b = dm_runtime::read(root, 8).await.unwrap();
        let w = u64::from_le_bytes(b[..8].try_into().unwrap());
        assert_eq!(w >> 15 & 1, 0, "the root slot names an internal node");
        dm_runtime::write(root, (w | 0x1f << 8).to_le_bytes().to_vec())
            .await
            .unwrap();
        let got = t.get(&(7u64 << 40).to_be_bytes()).await;
        assert!(matches!(got, Err(ArtError::Corrupt(_))), "{got:?}");
    })
    .unwrap();
}

/// Verb counts with a warm ART cache (SMART §4.3, digest §6 claims 5-6): a
/// search of a present key is exactly one READ (the leaf), an update READ +
/// CAS + WRITE in three round trips; a search of an absent key adds one
/// 8-byte READ confirming the cached slot. After another CS splits the leaf
/// a cached slot named, the stale entry is caught and dropped.
#[test]
fn warm_cache_search_is_one_read_and_stale_entries_are_caught() {
    let (mut rt, scfg) = cluster(KeyCodec::fixed(8), 5);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let other = SmartTree::create(scfg, 1, 0).await.unwrap();
        let cache = Arc::new(ArtCache::new(1 << 20));
        let t = SmartTree::open(scfg, 0, 0)
            .unwrap()
            .with_cache(cache.clone());
        let k = |x: u64| (x << 40 | x).to_be_bytes();
        for x in 0..200u64 {
            other.insert(&k(x), x).await.unwrap();
        }
        for x in 0..200u64 {
            assert_eq!(t.get(&k(x)).await.unwrap(), Some(x));
        }
        for x in [3u64, 77, 199] {
            let before = task_stats();
            assert_eq!(t.get(&k(x)).await.unwrap(), Some(x));
            assert_eq!(verbs(before, task_stats()), (1, 0, 0, 1), "get {x}");
            let before = task_stats();
            assert!(t.update(&k(x), x + 1000).await.unwrap());
            assert_eq!(verbs(before, task_stats()), (1, 1, 1, 3), "update {x}");
        }
        // Absent, next to a present key's leaf: leaf READ + slot READ.
        let absent = (77u64 << 40 | 78).to_be_bytes();
        let before = task_stats();
        assert_eq!(t.get(&absent).await.unwrap(), None);
        assert_eq!(verbs(before, task_stats()), (2, 0, 0, 2));
        // Another CS splits leaf 77 (the new key shares 7 bytes with it).
        other.insert(&absent, 1).await.unwrap();
        let inv = cache.stats().invalidations;
        assert_eq!(t.get(&absent).await.unwrap(), Some(1));
        assert_eq!(t.get(&k(77)).await.unwrap(), Some(1077));
        assert!(cache.stats().invalidations > inv, "{:?}", cache.stats());
        let before = task_stats();
        assert_eq!(t.get(&absent).await.unwrap(), Some(1));
        assert_eq!(verbs(before, task_stats()), (1, 0, 0, 1), "re-cached");
        let s = cache.stats();
        assert!(s.hits > 0 && s.entries > 0 && s.bytes > 0, "{s:?}");
    })
    .unwrap();
}

/// The ladder's verb counts with a warm ART cache (SMART §5.3.1, Fig. 18;
/// `dm_art::baseline`): (READs, CASes, WRITEs, RTTs) of a search, an update
/// and the search after it, and of an insert into a node.
/// - SMART: get 1 READ; update READ + CAS + WRITE (3 RTTs).
/// - in-place leaves under a lock-table lock: update READ, lock CAS + READ
///   in one doorbell, WRITE, unlock WRITE (4 RTTs, the one the rear lock saves).
/// - RCU leaves: a cached get READs the slot with the leaf (1 RTT, 2 READs);
///   an update WRITEs a new leaf and CASes the slot, after which the cached
///   slot word is stale: the next get finds it changed (drops the entry) and
///   READs the new leaf (2 RTTs).
/// - ROWEX (ART): an insert into a node adds the node's lock CAS and unlock
///   WRITE (2 RTTs) to the lock-free version's leaf WRITE + slot CAS.
/// - The node the insert goes into is the root node here, whose cached
///   snapshot lacks the new key's slot: the walk READs the root slot and
///   the node (`dm_art::cache`: no entry names the root node by a slot).
#[test]
fn the_ladder_costs_what_each_technique_saves() {
    type Counts = (u64, u64, u64, u64);
    let want: [(Counts, Counts, Counts, Counts); 4] = [
        // get, update, get after update, insert into a node
        ((2, 0, 0, 1), (1, 1, 1, 3), (3, 0, 0, 2), (2, 2, 2, 6)),
        ((2, 0, 0, 1), (1, 1, 1, 3), (3, 0, 0, 2), (2, 1, 1, 4)),
        ((1, 0, 0, 1), (2, 1, 2, 4), (1, 0, 0, 1), (2, 1, 1, 4)),
        ((1, 0, 0, 1), (1, 1, 1, 3), (1, 0, 0, 1), (2, 1, 1, 4)),
    ];
    for (rung, want) in want.into_iter().enumerate() {
        let (mut rt, mut scfg) = cluster(KeyCodec::fixed(8), 15);
        scfg.techniques = RUNGS[rung];
        let c = rt.add_core(0, 0);
        rt.block_on(c, async move {
            let other = SmartTree::create(scfg, 1, 0)
                .await
                .unwrap()
                .with_local_locks(SmartTree::new_local_lock_table());
            let cache = Arc::new(ArtCache::new(1 << 20));
            let t = SmartTree::open(scfg, 0, 0)
                .unwrap()
                .with_local_locks(SmartTree::new_local_lock_table())
                .with_cache(cache.clone());
            let k = |x: u64| (x << 40 | x).to_be_bytes();
            for x in 0..200u64 {
                other.insert(&k(x), x).await.unwrap();
            }
            // Warm the cache, this handle's chunk and lock-table bases.
            t.insert(&k(201), 201).await.unwrap();
            for x in 0..200u64 {
                assert!(t.update(&k(x), x).await.unwrap());
                assert_eq!(t.get(&k(x)).await.unwrap(), Some(x));
            }
            for x in [3u64, 77, 199] {
                let before = task_stats();
                assert_eq!(t.get(&k(x)).await.unwrap(), Some(x));
                assert_eq!(verbs(before, task_stats()), want.0, "rung {rung} get {x}");
                let before = task_stats();
                assert!(t.update(&k(x), x + 1000).await.unwrap());
                assert_eq!(
                    verbs(before, task_stats()),
                    want.1,
                    "rung {rung} update {x}"
                );
                let before = task_stats();
                assert_eq!(t.get(&k(x)).await.unwrap(), Some(x + 1000));
                assert_eq!(verbs(before, task_stats()), want.2, "rung {rung} get' {x}");
            }
            let before = task_stats();
            t.insert(&k(200), 200).await.unwrap();
            assert_eq!(verbs(before, task_stats()), want.3, "rung {rung} insert");
            assert_eq!(other.get(&k(200)).await.unwrap(), Some(200));
        })
        .unwrap();
    }
}

/// Read delegation and write combining (SMART §4.2): 8 same-key searches
/// issued together on one core cost one remote search (one leaf READ with
/// the cache warm), on two cores of the CS at most two; 8 same-key updates
/// one leaf READ, one lock CAS and one WRITE, of a value from the WCB.
#[test]
fn same_key_operations_on_one_cs_share_one_remote_operation() {
    let (mut rt, scfg) = cluster(KeyCodec::fixed(8), 6);
    let cores: Vec<SimCore> = (0..2).map(|i| rt.add_core(0, i)).collect();
    let k = 0x1234_5678u64.to_be_bytes();
    rt.block_on(cores[0], async move {
        let t = SmartTree::create(scfg, 0, 0).await.unwrap();
        for x in 0..100u64 {
            t.insert(&(x << 8 | 0x78).to_be_bytes(), x).await.unwrap();
        }
        t.insert(&k, 1).await.unwrap();
    })
    .unwrap();
    let cache = Arc::new(ArtCache::new(1 << 20));
    let rdwc = Arc::new(Rdwc::new(128, true, true));
    let trees: Vec<_> = (0..2)
        .map(|i| {
            let t = SmartTree::open(scfg, 0, i as u16).unwrap();
            Rc::new(t.with_cache(cache.clone()).with_rdwc(rdwc.clone()))
        })
        .collect();
    // Warm the cache.
    let t0 = trees[0].clone();
    rt.block_on(cores[0], async move { t0.get(&k).await.unwrap() })
        .unwrap();
    let run = |rt: &mut SimRuntime, spread: usize, write: bool| {
        let deltas = Rc::new(std::cell::RefCell::new(Vec::new()));
        for i in 0..8u64 {
            let c = i as usize % spread;
            let (t, deltas) = (trees[c].clone(), deltas.clone());
            rt.spawn_on(cores[c], async move {
                let before = task_stats();
                if write {
                    assert!(t.update(&k, 100 + i).await.unwrap());
                } else {
                    assert!(t.get(&k).await.unwrap().is_some());
                }
                let s = task_stats();
                deltas.borrow_mut().push((
                    s.read - before.read,
                    s.cas - before.cas,
                    s.write - before.write,
                ));
            });
        }
        rt.run();
        let d = deltas.borrow();
        assert_eq!(d.len(), 8);
        d.iter()
            .fold((0, 0, 0), |a, x| (a.0 + x.0, a.1 + x.1, a.2 + x.2))
    };
    assert_eq!(run(&mut rt, 1, false), (1, 0, 0), "reads: one leaf READ");
    assert_eq!(rdwc.stats().delegated_reads, 7);
    assert_eq!(
        run(&mut rt, 1, true),
        (1, 1, 1),
        "writes: READ + CAS + WRITE"
    );
    assert_eq!(rdwc.stats().combined_writes, 7);
    // Across two cores the leader's one-round window may close before the
    // other core's readers queue: they then share the next round's search.
    assert!(run(&mut rt, 2, false).0 <= 2);
    assert_eq!(
        run(&mut rt, 2, true),
        (1, 1, 1),
        "the combining window is the whole traversal"
    );
    let t0 = trees[0].clone();
    let v = rt
        .block_on(cores[0], async move { t0.get(&k).await.unwrap() })
        .unwrap()
        .unwrap();
    assert!((100..108).contains(&v), "{v}");
}

/// 4 cores on 2 CSs x 8 tasks: each task inserts its own keys (interleaved
/// with everyone's, so splits of every kind race), upserts a few shared hot
/// keys, and reads its own keys back; torn READs and delayed verbs on; with
/// an ART cache per CS (stale behind the other CS's splits) and without.
#[test]
fn concurrent_writers_survive_torn_reads_and_every_split() {
    for (seed, codec, rung) in [
        (0, KeyCodec::fixed(8), 3),
        (1, KeyCodec::variable(12), 3),
        (2, KeyCodec::fixed(8), 3),
        (3, KeyCodec::fixed(8), 0),
        (4, KeyCodec::variable(12), 1),
        (5, KeyCodec::fixed(8), 2),
    ] {
        let (mut rt, mut scfg) = cluster(codec, seed);
        scfg.techniques = RUNGS[rung];
        let cores: Vec<SimCore> = (0..4).map(|i| rt.add_core(i / 2, i % 2)).collect();
        rt.block_on(cores[0], async move {
            SmartTree::create(scfg, 0, 0).await.map(|_| ())
        })
        .unwrap()
        .unwrap();
        let key = move |x: u64| -> Vec<u8> {
            if codec.variable {
                // Variable length, shared prefixes: "k" + digits.
                format!("k{}", x % 100_003).into_bytes()
            } else {
                let y = x * 0x9e37_79b9 % 100_003;
                (y << 40 | y).to_be_bytes().to_vec()
            }
        };
        // Hot keys, distinct from every key above.
        let hot_key = move |r: u64| -> Vec<u8> {
            if codec.variable {
                format!("hot{r}").into_bytes()
            } else {
                (0xee00_0000_0000_0000 | r).to_be_bytes().to_vec()
            }
        };
        let per_task = 40u64;
        let written = Rc::new(std::cell::RefCell::new(BTreeMap::<Vec<u8>, Vec<u64>>::new()));
        // One ART cache per CS (a small one on CS 1: evictions), none for seed 2.
        let caches = [
            Arc::new(ArtCache::new(1 << 20)),
            Arc::new(ArtCache::new(4096)),
        ];
        // Read delegation and write combining per CS (4 entries: conflicts too).
        let rdwcs = [
            Arc::new(Rdwc::new(4, true, true)),
            Arc::new(Rdwc::new(4, true, true)),
        ];
        let llts = [
            SmartTree::new_local_lock_table(),
            SmartTree::new_local_lock_table(),
        ];
        for (ci, &c) in cores.iter().enumerate() {
            let mut t = SmartTree::open(scfg, (ci / 2) as u16, (ci % 2) as u16)
                .unwrap()
                .with_local_locks(llts[ci / 2].clone());
            if seed != 2 {
                t = t
                    .with_cache(caches[ci / 2].clone())
                    .with_rdwc(rdwcs[ci / 2].clone());
            }
            let t = Rc::new(t);
            for task in 0..8u64 {
                let t = t.clone();
                let written = written.clone();
                let base = (ci as u64 * 8 + task) * per_task;
                rt.spawn_on(c, async move {
                    for i in 0..per_task {
                        let x = (base + i) * 7919;
                        t.insert(&key(x), x + 1).await.unwrap();
                        let hot = hot_key(i % 3);
                        let v = base * 1000 + i;
                        written.borrow_mut().entry(hot.clone()).or_default().push(v);
                        t.insert(&hot, v).await.unwrap();
                        if i % 2 == 0 {
                            assert_eq!(t.get(&key(x)).await.unwrap(), Some(x + 1));
                        }
                        if i % 5 == 0 {
                            let s = t.scan(&key(x), 5).await.unwrap();
                            assert_eq!(s.first().map(|e| &e.0), Some(&key(x)));
                            assert!(s.windows(2).all(|w| w[0].0 < w[1].0));
                        }
                    }
                });
            }
        }
        rt.run();
        let written = Rc::try_unwrap(written).unwrap().into_inner();
        rt.block_on(cores[1], async move {
            let t = SmartTree::open(scfg, 0, 1).unwrap();
            let mut want = BTreeMap::new();
            for x in 0..4 * 8 * per_task {
                let x = x * 7919;
                want.insert(key(x), x + 1);
            }
            for (k, v) in &want {
                assert_eq!(t.get(k).await.unwrap(), Some(*v), "key {k:?}");
            }
            for (k, vs) in &written {
                let got = t.get(k).await.unwrap().unwrap();
                assert!(
                    vs.contains(&got),
                    "hot key {k:?} holds {got}, never written"
                );
            }
            let all = t
                .scan(&codec.key(&vec![0; codec.path_len()]), usize::MAX)
                .await
                .unwrap();
            assert_eq!(all.len(), want.len() + written.len());
            assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
        })
        .unwrap();
    }
}
