//! Head nodes (Ziegler et al. §4-5): maintenance passes and scans through
//! them, alone and racing writers, under strict torn READs; FG+, Sherman's
//! unsorted leaves, and the hybrid design's leaf level.

use dm_runtime::SimCore;
use dm_tree::{Design, FgTree, HeadPass, LockTableConfig, Techniques, TreeConfig, TreeError};
mod model;

use model::{k, sim_cluster};
use std::collections::BTreeMap;
use std::rc::Rc;

fn key_of(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().unwrap())
}

/// The designs and rungs head nodes serve.
fn configs(tcfg: TreeConfig) -> Vec<(&'static str, TreeConfig)> {
    let sherman = TreeConfig {
        techniques: Techniques::SHERMAN,
        node_bytes: 176,
        // A small host-memory lock table: unrelated nodes share lock words.
        lock_table: LockTableConfig {
            device: false,
            lanes16: false,
            slots: 64,
        },
        ..tcfg
    };
    let hybrid = TreeConfig {
        design: Design::Hybrid,
        ..tcfg
    };
    vec![("fg", tcfg), ("sherman", sherman), ("nam-hybrid", hybrid)]
}

/// Passes install, refresh and unlink heads as the leaves split; scans stay
/// equal to the model and use the prefetched leaves; a long scan takes fewer
/// round trips with heads.
#[test]
fn passes_and_scans_match_the_model() {
    for (name, tcfg) in configs(sim_cluster(2, 16 << 20, 7).1) {
        let (mut rt, _) = sim_cluster(2, 16 << 20, 7);
        let c = rt.add_core(0, 0);
        let r = rt.block_on(c, async move {
            let t = FgTree::create(tcfg, 0, 0)
                .await
                .unwrap()
                .with_local_locks(FgTree::new_local_lock_table(&tcfg));
            let mut m = BTreeMap::new();
            for i in 0..300u64 {
                let x = i * 7919 % 1000;
                t.insert(&k(x), i).await.unwrap();
                m.insert(x, i);
            }
            let all =
                |m: &BTreeMap<u64, u64>| m.iter().map(|(a, b)| (k(*a), *b)).collect::<Vec<_>>();
            let s0 = dm_runtime::task_stats();
            assert_eq!(t.scan(&k(0), usize::MAX).await.unwrap(), all(&m));
            let plain = dm_runtime::task_stats().since(&s0).rtts;
            let p1 = t.maintain_head_nodes(4).await.unwrap();
            assert!(
                p1.installed > 3 && p1.leaves >= 4 * p1.installed,
                "{name}: {p1:?}"
            );
            assert_eq!((p1.heads_seen, p1.removed, p1.skipped), (0, 0, 0), "{name}");
            let s1 = dm_runtime::task_stats();
            assert_eq!(t.scan(&k(0), usize::MAX).await.unwrap(), all(&m));
            let with_heads = dm_runtime::task_stats().since(&s1).rtts;
            // Groups of 4: the head, then its 4 leaves at once: 2 round trips, not 4.
            assert!(
                with_heads * 3 < plain * 2,
                "{name}: {with_heads} vs {plain} round trips"
            );
            let (read, used) = t.head_prefetch_stats();
            assert!(used > 0 && used <= read, "{name}: {read} {used}");
            // A second pass over an unchanged chain changes nothing.
            let p2 = t.maintain_head_nodes(4).await.unwrap();
            assert_eq!(
                p2,
                HeadPass {
                    heads_seen: p1.installed,
                    ..p1
                }
                .unchanged(),
                "{name}"
            );
            // Splits and removes make lists stale; answers stay right.
            for i in 0..300u64 {
                let x = 1000 + i * 31 % 997;
                t.insert(&k(x), i).await.unwrap();
                m.insert(x, i);
                if i % 3 == 0 {
                    let y = i * 7919 % 1000;
                    assert_eq!(t.remove(&k(y)).await.unwrap(), m.remove(&y).is_some());
                }
                if i % 25 == 0 {
                    let want: Vec<_> = m
                        .range(i * 5..)
                        .take(40)
                        .map(|(a, b)| (k(*a), *b))
                        .collect();
                    assert_eq!(t.scan(&k(i * 5), 40).await.unwrap(), want, "{name}");
                }
            }
            // Groups of 3 now: every old head moves (unlinked or kept with a new list).
            let p3 = t.maintain_head_nodes(3).await.unwrap();
            assert!(
                p3.installed > 0 && p3.removed + p3.refreshed > 0,
                "{name}: {p3:?}"
            );
            assert_eq!(t.scan(&k(0), usize::MAX).await.unwrap(), all(&m), "{name}");
            for (x, v) in &m {
                assert_eq!(t.get(&k(*x)).await.unwrap(), Some(*v));
            }
            assert!(matches!(
                t.maintain_head_nodes(1).await,
                Err(TreeError::BadConfig(_))
            ));
            p3
        });
        assert!(r.is_some(), "{name}");
    }
}

trait Unchanged {
    fn unchanged(self) -> Self;
}
impl Unchanged for HeadPass {
    /// The pass over a chain with these heads already right.
    fn unchanged(self) -> Self {
        HeadPass {
            installed: 0,
            refreshed: 0,
            removed: 0,
            skipped: 0,
            ..self
        }
    }
}

/// Writers, scanners and a maintainer that runs passes with changing group
/// sizes, on 4 cores of 2 CSs with torn READs: scans return ordered keys in
/// range and every key no writer touches; in the end the tree equals what
/// the writers left.
#[test]
fn passes_race_writers_and_scans() {
    for (name, tcfg) in configs(sim_cluster(2, 32 << 20, 0).1) {
        for seed in 0..3 {
            let (mut rt, _) = sim_cluster(2, 32 << 20, seed);
            let cores: Vec<SimCore> = (0..4).map(|i| rt.add_core(i % 2, i / 2)).collect();
            // Stable keys (even, never written again) and churned keys (odd).
            rt.block_on(cores[0], async move {
                let t = FgTree::create(tcfg, 0, 0)
                    .await
                    .unwrap()
                    .with_local_locks(FgTree::new_local_lock_table(&tcfg));
                for x in (0..400u64).step_by(2) {
                    t.insert(&k(x), x).await.unwrap();
                }
                t.maintain_head_nodes(3).await.unwrap();
            })
            .unwrap();
            let llts: Vec<_> = (0..2)
                .map(|_| FgTree::new_local_lock_table(&tcfg))
                .collect();
            let open = |i: usize| {
                Rc::new(
                    FgTree::open(tcfg, (i % 2) as u16, (i / 2) as u16)
                        .unwrap()
                        .with_local_locks(llts[i % 2].clone()),
                )
            };
            let mut hs = Vec::new();
            for (i, &c) in cores.iter().enumerate() {
                let t = open(i);
                hs.push(rt.spawn_on(c, async move {
                    for j in 0..60u64 {
                        let x = ((j * 37 + i as u64 * 101) % 200) * 2 + 1;
                        if (j + i as u64).is_multiple_of(4) {
                            t.remove(&k(x)).await.unwrap();
                        } else {
                            t.insert(&k(x), x + 1).await.unwrap();
                        }
                        let from = (j * 53 + i as u64 * 17) % 380;
                        let r = t.scan(&k(from), 12).await.unwrap();
                        let got: Vec<u64> = r.iter().map(|(a, _)| key_of(a)).collect();
                        assert!(
                            got.windows(2).all(|w| w[0] < w[1]) && got.iter().all(|&g| g >= from)
                        );
                        // Every stable key in [from, last returned] is there.
                        let last = *got.last().unwrap();
                        let want: Vec<u64> = (from..=last).filter(|x| x % 2 == 0).collect();
                        let evens: Vec<u64> = got.iter().copied().filter(|x| x % 2 == 0).collect();
                        assert_eq!(evens, want, "scan from {from}");
                    }
                    0u64
                }));
            }
            let t = open(3);
            let maint = rt.spawn_on(cores[3], async move {
                let mut changed = 0;
                for g in [4usize, 2, 5, 3, 2, 4] {
                    let p = t.maintain_head_nodes(g).await.unwrap();
                    changed += p.installed + p.removed + p.refreshed;
                }
                changed
            });
            rt.run();
            for h in hs {
                h.try_take().expect("client finished").unwrap();
            }
            let changes = maint.try_take().expect("maintainer finished").unwrap();
            assert!(changes > 0, "{name}");
            // The final state: replay the writers' last action per key.
            let mut last: BTreeMap<u64, Option<u64>> = BTreeMap::new();
            let mut events: Vec<(u64, usize, u64)> = Vec::new();
            for i in 0..4usize {
                for j in 0..60u64 {
                    events.push((j, i, ((j * 37 + i as u64 * 101) % 200) * 2 + 1));
                }
            }
            // Concurrent writers of one key: only keys written by one core are checked.
            let mut writers: BTreeMap<u64, std::collections::BTreeSet<usize>> = BTreeMap::new();
            for &(j, i, x) in &events {
                writers.entry(x).or_default().insert(i);
                last.insert(x, (!(j + i as u64).is_multiple_of(4)).then_some(x + 1));
            }
            let t = FgTree::open(tcfg, 0, 1).unwrap();
            let ok = rt
                .block_on(cores[1], async move {
                    for x in (0..400u64).step_by(2) {
                        assert_eq!(t.get(&k(x)).await.unwrap(), Some(x));
                    }
                    for (x, v) in &last {
                        if writers[x].len() == 1 {
                            assert_eq!(t.get(&k(*x)).await.unwrap(), *v, "key {x}");
                        }
                    }
                    let all = t.scan(&k(0), usize::MAX).await.unwrap();
                    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
                    true
                })
                .unwrap();
            assert!(ok, "{name} seed {seed}");
        }
    }
    assert_eq!(dm_runtime::lock::lock_takeovers(), 0);
}
