//! The radix family under soft-RoCE's unreported CAS success
//! (`Faults::unreported_cas_prob`: a CAS that took its word reports the new
//! value, as a failure would; docs/rdma.md): every rung of SMART's ladder
//! keeps every key. What covers it: a publishing slot CAS that returns its
//! own new word took the slot (`publish_took`, the spare leaf or node is
//! not reused); node locks take back their own word through the own-tag
//! ledger; SMART's rear lock claims a word naming its CS through the CS
//! ledger (`dm_runtime::lock::CsWords`, so the handles are members).
//! Sim, seeded, deterministic.

mod common;

use dm_art::{ArtCache, KeyCodec, SmartConfig, SmartTree, Techniques};
use dm_runtime::lock::{LeaseConfig, Member};
use dm_runtime::spawn;
use dm_verbs::sim::Faults;
use std::collections::BTreeMap;
use std::sync::Arc;

fn runtime(seed: u64) -> dm_runtime::SimRuntime {
    common::sim_with(
        seed,
        Faults {
            unreported_cas_prob: 0.1,
            ..Faults::torn_and_delayed()
        },
    )
}

/// Inserts, updates and removes over 400 wide keys (splits, header splits,
/// type switches) through two member handles of two CSs, one with a small
/// ART cache; then every key READ back through both and a full scan.
fn run(techniques: Techniques, seed: u64) {
    let mut rt = runtime(seed);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let cfg = SmartConfig {
            keys: KeyCodec::fixed(8),
            chunk_bytes: common::CHUNK,
            num_ms: common::NUM_MS,
            techniques,
            ..Default::default()
        };
        let m0 = Member::join(0, LeaseConfig::SIM, common::CHUNK)
            .await
            .unwrap();
        let m1 = Member::join(1, LeaseConfig::SIM, common::CHUNK)
            .await
            .unwrap();
        let hb = (spawn(m0.clone().heartbeat()), spawn(m1.clone().heartbeat()));
        let t0 = SmartTree::create(cfg, 0, 0)
            .await
            .unwrap()
            .with_local_locks(SmartTree::new_local_lock_table())
            .with_member(m0.clone())
            .unwrap();
        let t1 = SmartTree::open(cfg, 1, 0)
            .unwrap()
            .with_local_locks(SmartTree::new_local_lock_table())
            .with_cache(Arc::new(ArtCache::new(4096)))
            .with_member(m1.clone())
            .unwrap();
        let key = |x: u64| ((x * 0x0101_0101 % 0x1_0000_0000) << 16).to_be_bytes();
        let mut model = BTreeMap::new();
        let mut x = seed | 1;
        for i in 0..2500u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = key(x % 400);
            let t = if i % 3 == 0 { &t1 } else { &t0 };
            match x % 10 {
                0 => {
                    let had = model.remove(&k).is_some();
                    assert_eq!(t.remove(&k).await.unwrap(), had, "remove {k:?}");
                }
                1 | 2 => {
                    let had = model.contains_key(&k);
                    assert_eq!(t.update(&k, i).await.unwrap(), had, "update {k:?}");
                    if had {
                        model.insert(k, i);
                    }
                }
                _ => {
                    t.insert(&k, i).await.unwrap();
                    model.insert(k, i);
                }
            }
        }
        for t in [&t0, &t1] {
            for x in 0..400 {
                let k = key(x);
                assert_eq!(t.get(&k).await.unwrap(), model.get(&k).copied(), "{k:?}");
            }
            let all = t.scan(&[0; 8], 1000).await.unwrap();
            let want: Vec<_> = model.iter().map(|(k, v)| (k.to_vec(), *v)).collect();
            assert_eq!(all, want);
        }
        m0.stop();
        m1.stop();
        let _ = (hb.0.await, hb.1.await);
    })
    .unwrap();
}

#[test]
fn the_art_baseline_keeps_every_key() {
    run(Techniques::ART, 3);
}

#[test]
fn lock_free_internal_nodes_keep_every_key() {
    run(Techniques::LOCK_FREE_INTERNAL, 5);
}

#[test]
fn in_place_leaves_keep_every_key() {
    run(Techniques::IN_PLACE_LEAF, 7);
}

#[test]
fn smart_keeps_every_key() {
    run(Techniques::SMART, 9);
}
