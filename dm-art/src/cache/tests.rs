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

/// An entry of up to `INLINE` filled slots is one map bucket: key, node
/// address, FIFO stamp, count, the slot words and the long-prefix pointer.
#[test]
fn a_small_entry_is_one_bucket() {
    assert_eq!(entry_bytes(0, 0), 80);
}
