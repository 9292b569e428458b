//! Unit tests of the ART cache.

use super::store::{entry_bytes, prefix_key};
use super::*;

#[test]
fn deepest_matching_slot_wins_and_budget_evicts_fifo() {
    let c = ArtCache::new(1 << 20);
    let n0 = GlobalAddr::new(0, 64);
    let n1 = GlobalAddr::new(1, 128);
    c.insert(&[], n0, &[0x11, 0x22, 0]);
    c.insert(&[0x11, 5], n1, &[0x07]);
    // Path through n1 with a slot for byte 7: start at that slot.
    let (cur, hit) = c.lookup(&[0x11, 5, 7, 9]).unwrap();
    assert_eq!((cur.word, cur.depth, cur.cached), (0x07, 3, true));
    assert_eq!((hit.node, hit.prefix_len), (n1, 2));
    assert_eq!(cur.slot_a, slot_addr(n1, 0));
    // n1 has no slot for byte 8: back off to n0's slot for byte 0x11.
    let (cur, hit) = c.lookup(&[0x11, 5, 8, 9]).unwrap();
    assert_eq!((cur.word, cur.depth, hit.node), (0x11, 1, n0));
    // Only the root entry is on this path.
    let (cur, hit) = c.lookup(&[0x22, 0, 0, 0]).unwrap();
    assert_eq!((cur.word, cur.depth, hit.prefix_len), (0x22, 1, 0));
    assert_eq!(cur.slot_a, slot_addr(n0, 1));
    // No entry has a slot on this path.
    assert!(c.lookup(&[0x33, 0]).is_none());
    c.invalidate(&[0x11, 5, 7, 9], c.lookup(&[0x11, 5, 7, 9]).unwrap().1);
    assert_eq!(c.lookup(&[0x11, 5, 7, 9]).unwrap().1.node, n0);
    let s = c.stats();
    assert_eq!((s.entries, s.invalidations, s.hits, s.misses), (1, 1, 5, 1));
    // Two filled slots sit in the bucket.
    assert_eq!(s.bytes as usize, entry_bytes(0, 0));

    let small = ArtCache::new(entry_bytes(0, 0) * 2);
    for i in 0..10u8 {
        small.insert(&[i], GlobalAddr::new(0, 64 * (i as u64 + 1)), &[1]);
    }
    let s = small.stats();
    assert!(s.bytes as usize <= small.budget());
    assert_eq!(s.entries, 2);
    assert_eq!(s.evictions, 8);
    // The newest survive.
    assert!(small.lookup(&[9, 1]).is_some());
    assert!(small.lookup(&[0, 1]).is_none());
}

#[test]
fn long_prefixes_are_checked_not_trusted_to_their_hash() {
    let c = ArtCache::new(1 << 20);
    let p: Vec<u8> = (0..20).collect();
    let n = GlobalAddr::new(0, 4096);
    c.insert(&p, n, &[0x41]);
    let mut path = p.clone();
    path.extend_from_slice(&[0x41, 0]);
    let (cur, hit) = c.lookup(&path).unwrap();
    assert_eq!((cur.depth, hit.prefix_len, hit.node), (21, 20, n));
    // Same length, other bytes: not this entry.
    let mut other = path.clone();
    other[3] = 99;
    assert!(c.lookup(&other).is_none());
    // Short prefixes are exact map keys: a length differs from a zero byte.
    assert_ne!(prefix_key(&[0]), prefix_key(&[]));
    assert_ne!(prefix_key(&[1, 0]), prefix_key(&[1]));
    assert_eq!(c.stats().bytes as usize, entry_bytes(0, 20));
    c.invalidate(&path, hit);
    assert_eq!(c.stats().bytes, 0);
}

#[test]
fn a_writers_own_cases_refresh_its_entry() {
    let c = ArtCache::new(1 << 20);
    let n = GlobalAddr::new(0, 256);
    c.insert(&[7], n, &[0x01, 0x02, 0]);
    // Slots 2 (someone else's, returned by a failed CAS) and 3 (ours).
    c.note_filled(&[7], n, 2, &[0x03, 0x04]);
    assert_eq!(c.lookup(&[7, 4]).unwrap().0.slot_a, slot_addr(n, 3));
    assert_eq!(c.stats().bytes as usize, entry_bytes(0, 0));
    // A gap (the entry lacks slot 4) or another node: nothing changes.
    c.note_filled(&[7], n, 5, &[0x06]);
    c.note_filled(&[7], GlobalAddr::new(1, 256), 4, &[0x05]);
    assert!(c.lookup(&[7, 5]).is_none() && c.lookup(&[7, 6]).is_none());
    // A split's publish replaces the word it CASed.
    c.replace_word(&[7], n, slot_addr(n, 1), 0x02, 0x1002);
    assert_eq!(c.lookup(&[7, 2]).unwrap().0.word, 0x1002);
    c.replace_word(&[7], n, slot_addr(n, 1), 0x02, 0x2002);
    assert_eq!(c.lookup(&[7, 2]).unwrap().0.word, 0x1002);
    // A fifth slot moves them to a heap array of 6 words, the replaced
    // word kept.
    c.note_filled(&[7], n, 4, &[0x05]);
    assert_eq!(c.stats().bytes as usize, entry_bytes(6, 0));
    assert_eq!(c.lookup(&[7, 5]).unwrap().0.slot_a, slot_addr(n, 4));
    assert_eq!(c.lookup(&[7, 2]).unwrap().0.word, 0x1002);
}

/// `with_fifo_hold_ns` on sim: the admissions of one CS's cores take the
/// modelled central FIFO one at a time, in virtual-time order, each core
/// charged its wait plus the hold; without the model nothing is charged.
#[test]
fn modelled_fifo_serialises_a_cs_admissions_in_virtual_time() {
    use dm_runtime::SimRuntime;
    use dm_verbs::sim::{SimConfig, SimFabric};
    use std::sync::Arc;
    const HOLD: u64 = 1_000;
    for hold in [0, HOLD] {
        let mut rt = SimRuntime::new(SimFabric::new(SimConfig::default()));
        let k = Arc::new(ArtCache::new(1 << 20).with_fifo_hold_ns(hold));
        let handles: Vec<_> = (0..4u16)
            .map(|i| {
                let c = rt.add_core(0, i);
                let k = k.clone();
                rt.spawn_on(c, async move {
                    let t0 = dm_runtime::now_ns();
                    k.fifo_turn().await;
                    dm_runtime::now_ns() - t0
                })
            })
            .collect();
        rt.run();
        let mut waited: Vec<u64> = handles
            .into_iter()
            .map(|h| h.try_take().unwrap().unwrap())
            .collect();
        waited.sort_unstable();
        let want: Vec<u64> = (1..=4).map(|i| i * hold).collect();
        assert_eq!(waited, want, "hold {hold}");
        let s = k.stats();
        let n = if hold == 0 { 0 } else { 4 };
        assert_eq!((s.fifo_admissions, s.fifo_ns), (n, 10 * hold));
    }
}

/// An entry of up to `INLINE` filled slots is one map bucket, one cache
/// line: key, node address, FIFO stamp, count and the slot words.
#[test]
fn a_small_entry_is_one_bucket() {
    assert_eq!(entry_bytes(0, 0), 64);
}

proptest::proptest! {
    /// A lookup finds the first filled slot with the path's byte, through
    /// an entry's byte index (from `INDEXED` slots on) or its scan alike,
    /// while the entry is admitted, refreshed, extended by `note_filled`,
    /// patched by `replace_word` (also to another partial key) and
    /// dropped and admitted again (a reused array's stale index).
    #[test]
    fn lookup_finds_the_first_slot_with_the_byte(
        first in proptest::collection::vec(0u8..48, 1..256),
        more in proptest::collection::vec(0u8..48, 0..128),
        patch in proptest::collection::vec((0usize..400, 0u8..48), 0..8),
        refresh in proptest::collection::vec(0u8..48, 1..256),
    ) {
        let word = |i: usize, b: u8| (((i as u64) + 1) << 8) | b as u64;
        let c = ArtCache::new(1 << 30);
        let node = GlobalAddr::new(0, 4096);
        let prefix = [7u8, 9];
        let check = |model: &[u64]| {
            for b in 0..48u8 {
                let path = [7u8, 9, b];
                let want = model.iter().position(|&w| w as u8 == b);
                let got = c.lookup(&path).filter(|(_, h)| h.node == node);
                match (want, got) {
                    (Some(i), Some((cur, _))) => {
                        proptest::prop_assert_eq!(cur.word, model[i]);
                        proptest::prop_assert_eq!(cur.slot_a, slot_addr(node, i));
                    }
                    (None, None) => {}
                    (w, g) => proptest::prop_assert!(false, "byte {}: {:?} vs {:?}", b, w, g.map(|g| g.0.word)),
                }
            }
            Ok(())
        };
        let mut model: Vec<u64> = first.iter().enumerate().map(|(i, &b)| word(i, b)).collect();
        c.insert(&prefix, node, &model);
        check(&model)?;
        let add: Vec<u64> = more.iter().enumerate().map(|(i, &b)| word(model.len() + i, b)).collect();
        if model.len() + add.len() <= 256 && !add.is_empty() {
            c.note_filled(&prefix, node, model.len(), &add);
            model.extend_from_slice(&add);
        }
        check(&model)?;
        for (i, b) in patch {
            if i < model.len() {
                let new = word(1000 + i, b);
                c.replace_word(&prefix, node, slot_addr(node, i), model[i], new);
                model[i] = new;
            }
        }
        check(&model)?;
        let hit = c.lookup(&[7, 9, model[0] as u8]).unwrap().1;
        c.invalidate(&[7, 9, 0], hit);
        let model: Vec<u64> = refresh.iter().enumerate().map(|(i, &b)| word(i, b)).collect();
        c.insert(&prefix, node, &model);
        check(&model)?;
    }
}
