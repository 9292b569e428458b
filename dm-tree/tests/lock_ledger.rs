//! The own-tag ledger (`dm_runtime::lock` module docs): a lock word left holding
//! this handle's tag with no task of the handle holding or taking it is taken
//! over, while a word holding the tag of a lock this handle really holds is
//! waited on. Its own test binary: `lock_takeovers()` counts per process.

use dm_runtime::lock::lock_takeovers;
use dm_runtime::SimRuntime;
use dm_tree::{FgTree, TreeConfig};
use dm_verbs::sim::{SimConfig, SimFabric};
use dm_verbs::{GlobalAddr, MsConfig};
use std::rc::Rc;

fn k(x: u64) -> Vec<u8> {
    x.to_be_bytes().to_vec()
}

#[test]
fn a_lock_word_left_with_our_tag_is_taken_over_once() {
    let chunk = 64 << 10;
    let mut rt = SimRuntime::new(SimFabric::new(SimConfig {
        num_ms: 1,
        ms: MsConfig {
            region_bytes: 4 << 20,
            chunk_bytes: chunk,
            device_bytes: 0,
            cores: 1,
        },
        seed: 7,
        ..Default::default()
    }));
    let tcfg = TreeConfig {
        node_bytes: 128,
        chunk_bytes: chunk,
        num_ms: 1,
        ..Default::default()
    };
    let c = rt.add_core(0, 0);
    let (before, after, word, stats) = rt
        .block_on(c, async move {
            let t = Rc::new(FgTree::create(tcfg, 0, 0).await.unwrap());
            t.insert(&k(1), 10).await.unwrap();
            // The root is the only leaf; its lock word is at offset 0.
            let b = dm_runtime::read(tcfg.root_ptr, 8).await.unwrap();
            let leaf = GlobalAddr::from_u64(u64::from_le_bytes(b.try_into().unwrap()));
            // Leave the lock taken with handle (0, 0)'s tag, as a CAS whose
            // success was never reported would.
            let tag = 1; // (cs 0 << 16 | core 0) + 1
            assert_eq!(dm_runtime::cas(leaf, 0, tag).await.unwrap(), 0);
            let before = lock_takeovers();
            // Two tasks of this handle insert into the leaf: the first to CAS
            // takes the orphaned lock over; the second waits for its release
            // (the word holds our tag, but the ledger shows a holder).
            let t2 = t.clone();
            let h = dm_runtime::spawn(async move { t2.insert(&k(2), 20).await });
            t.insert(&k(3), 30).await.unwrap();
            h.await.unwrap().unwrap();
            for (key, v) in [(1, 10), (2, 20), (3, 30)] {
                assert_eq!(t.get(&k(key)).await.unwrap(), Some(v));
            }
            let w = dm_runtime::read(leaf, 8).await.unwrap();
            (
                before,
                lock_takeovers(),
                u64::from_le_bytes(w.try_into().unwrap()),
                t.lock_counters().snapshot(),
            )
        })
        .unwrap();
    assert_eq!(before, 0);
    assert_eq!(after, 1, "exactly one takeover");
    assert_eq!(stats.takeovers, 1, "counted for the tree too: {stats:?}");
    // The first insert, the takeover, the waiting insert.
    assert_eq!(stats.acquisitions, 3, "{stats:?}");
    assert!(stats.cas_failures >= 1, "the second task waited: {stats:?}");
    assert_eq!(word, 0, "the lock is released after the inserts");
}
