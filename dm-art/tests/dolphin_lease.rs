//! Dolphin in lease mode (issue 33): a leaf split cut between publishing
//! its new leaf and rewriting the old one is rolled forward by whoever
//! takes either leaf next (`dm_art::dolphin`, "settle"). The cut is a
//! dropped insert future, as a cancelled operation or a killed CS leaves
//! it; the same core's next lock CAS finds its own name on both words and
//! takes them back. Sim, virtual time, deterministic.

mod common;

use dm_art::dolphin::layout::{LeafGeometry, LeafImage, SpecialImage, KIND_SPECIAL, SPECIAL_BYTES};
use dm_art::layout::Slot;
use dm_art::{DolphinCache, DolphinConfig, DolphinTree};
use dm_runtime::lock::{LeaseConfig, LockCounters, Member};
use dm_runtime::{read, yield_now};
use dm_verbs::GlobalAddr;
use std::sync::Arc;

/// Which leaf the first operation after the cut takes.
#[derive(Clone, Copy, Debug)]
enum First {
    /// An update of a key of the old leaf's lower half.
    Old,
    /// An update of a key the new leaf holds (and the old one still does).
    New,
}

async fn word(a: GlobalAddr) -> u64 {
    u64::from_le_bytes(read(a, 8).await.unwrap()[..8].try_into().unwrap())
}

async fn leaf(g: &LeafGeometry, a: GlobalAddr) -> LeafImage {
    LeafImage::decode(g, &read(a, g.bytes as u32).await.unwrap()).expect("a whole leaf")
}

/// Fills one leaf (keys 0..items under prefix 0, beside a leaf of prefix
/// 1), cuts the split of the next insert after its publication, then
/// runs `first` through a handle without a cache, and reads every key
/// through another CS's handle whose cache still names the old leaf (a
/// stale path that reaches it for the new leaf's keys). Returns the old
/// leaf's image before and after, the special node, and the lock counters.
fn cut_split(
    first: First,
) -> (
    LeafImage,
    LeafImage,
    SpecialImage,
    dm_runtime::lock::LockStats,
) {
    let mut rt = common::sim(5);
    let c = rt.add_core(0, 0);
    let dcfg = DolphinConfig {
        chunk_bytes: common::CHUNK,
        num_ms: common::NUM_MS,
        ..Default::default()
    };
    rt.block_on(c, async move {
        let m = Member::join(0, LeaseConfig::SIM, common::CHUNK)
            .await
            .unwrap();
        let m1 = Member::join(1, LeaseConfig::SIM, common::CHUNK)
            .await
            .unwrap();
        let counters = Arc::new(LockCounters::new());
        let t = DolphinTree::create(dcfg, 0, 0)
            .await
            .unwrap()
            .with_lock_counters(counters.clone())
            .with_member(m.clone())
            .unwrap();
        let cached = DolphinTree::open(dcfg, 1, 0)
            .unwrap()
            .with_cache(Arc::new(DolphinCache::new(1 << 20)))
            .with_member(m1.clone())
            .unwrap();
        let g = LeafGeometry::new(dcfg.leaf_bytes).unwrap();
        let n = t.leaf_items() as u64;
        for k in (0..n).chain([0x100]) {
            t.insert(&k.to_be_bytes(), k).await.unwrap();
        }
        // The node naming both leaves, cached by CS 1.
        assert_eq!(cached.get(&0u64.to_be_bytes()).await.unwrap(), Some(0));
        let Slot::Internal { addr: node, .. } = Slot::decode(word(dcfg.root_slot).await) else {
            panic!("a node under the root slot");
        };
        let Slot::Leaf { addr: p, .. } = Slot::decode(word(node.add(16)).await) else {
            panic!("prefix 0's leaf in the node's first slot");
        };
        let before = leaf(&g, p).await;
        // Poll the splitting insert until the node's slot names the special
        // node (Fig. 4d's publication), then drop it: the old leaf's
        // rewrite and both unlocks are never posted.
        let nk = n.to_be_bytes();
        let mut split = Box::pin(t.insert(&nk, n));
        let d = loop {
            assert!(
                futures::poll!(split.as_mut()).is_pending(),
                "the split ran to its end"
            );
            match Slot::decode(word(node.add(16)).await) {
                Slot::Leaf { words, addr, .. } if words == KIND_SPECIAL => break addr,
                _ => yield_now().await,
            }
        };
        drop(split);
        let cut = leaf(&g, p).await;
        assert_eq!(
            (cut.lo, cut.hi, cut.special),
            (0, 255, GlobalAddr::NULL),
            "cut before the rewrite"
        );
        let key = match first {
            First::Old => 0u64,
            First::New => n - 1,
        };
        assert!(t.update(&key.to_be_bytes(), 1000 + key).await.unwrap());
        let after = leaf(&g, p).await;
        let s = SpecialImage::decode(&read(d, SPECIAL_BYTES as u32).await.unwrap());
        // Every key once, with its value: the cut insert's key is in the
        // published new leaf, so it is there too.
        let all = t.scan(&0u64.to_be_bytes(), usize::MAX).await.unwrap();
        let want: Vec<(Vec<u8>, u64)> = (0..=n)
            .chain([0x100])
            .map(|k| {
                (
                    k.to_be_bytes().to_vec(),
                    if k == key { 1000 + k } else { k },
                )
            })
            .collect();
        assert_eq!(all, want);
        for k in 0..=n {
            let v = cached.get(&k.to_be_bytes()).await.unwrap();
            assert_eq!(v, Some(if k == key { 1000 + k } else { k }), "key {k}");
        }
        m.stop();
        m1.stop();
        (before, after, s, counters.snapshot())
    })
    .unwrap()
}

/// The old leaf after the roll forward: it ends below the new leaf, hangs
/// from the special node, and holds only its own keys.
fn assert_rolled_forward(before: &LeafImage, after: &LeafImage, s: &SpecialImage) {
    let los: Vec<u8> = s
        .entries
        .iter()
        .filter_map(|&e| match Slot::decode(e) {
            Slot::Leaf { partial, .. } if e != 0 => Some(partial),
            _ => None,
        })
        .collect();
    assert_eq!(los.len(), 2, "{los:?}");
    let sb = los[1];
    assert_eq!((after.lo, after.hi), (0, sb - 1));
    assert!(!after.special.is_null());
    assert_eq!(after.version, before.version + 1);
    let keys: Vec<u64> = after.entries_raw().iter().map(|e| e.0).collect();
    assert_eq!(keys, (0..sb as u64).collect::<Vec<_>>());
}

#[test]
fn a_cut_split_is_rolled_forward_by_the_old_leafs_next_taker() {
    let (before, after, s, locks) = cut_split(First::Old);
    assert_rolled_forward(&before, &after, &s);
    assert!(locks.takeovers >= 1, "{locks:?}");
}

#[test]
fn a_cut_split_is_rolled_forward_by_the_new_leafs_next_taker() {
    let (before, after, s, locks) = cut_split(First::New);
    assert_rolled_forward(&before, &after, &s);
    // The new leaf, then the old one under it.
    assert!(locks.takeovers >= 2, "{locks:?}");
}
