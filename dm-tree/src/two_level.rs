//! Sherman's unsorted leaves with two-level versions (Sherman §4.4), made sound
//! under torn READs.
//!
//! **What the paper does.** Leaf entries are unsorted, so a plain insert,
//! update or remove changes one entry and writes back only that entry; each
//! entry carries 4-bit front and rear *entry-level versions*, the node carries
//! front and rear *node-level versions* bumped by whole-node writes (splits,
//! which sort the entries). A reader accepts a leaf if the node-level versions
//! match and the entry it needs has matching entry-level versions, and relies
//! on a rule that a READ finishes within 8 µs so that 4-bit versions cannot
//! wrap. Neither holds under torn READs: a READ of more than 8 bytes may return
//! its words from different versions in any order, so equal front and rear
//! versions prove nothing about the words between them, and the timing rule is
//! not something RDMA promises.
//!
//! **What we do.** The same two levels, with checks that bind every word:
//! - the *node level* is the header (level, flags, node version, sibling,
//!   fences), guarded by a checksum of those bytes at offset 8; the 32-bit
//!   node version (offset 20) is bumped by every whole-node write of the leaf;
//! - the *entry level* is one check word per slot, a hash of the slot's key and
//!   value words, its slot number, an occupied bit and the node version.
//!
//! A reader accepts an image only if the header checksum matches and every
//! slot's check word matches its words under the header's node version
//! (`decode_slots`). A slot torn between two entry writes fails its check
//! (the hash is the node checksum's fold, a bijection per word, so one
//! differing word is always caught and more than one is missed with
//! probability about 2^-63). A slot written under another node version (a
//! split or an earlier whole-node write racing the READ) fails against the
//! header's version, so an image mixing a split's new header or sorted slots
//! with the old ones is rejected as a whole. Within one node version keys never
//! move between slots (only whole-node writes move them), so an accepted image
//! is a set of per-slot snapshots in which a key present throughout the READ is
//! found and every entry found was the key's value at the moment its slot was
//! read. The node version is 32 bits: a false accept through wrap-around would
//! need 2^32 whole-node writes of one leaf during one READ.
//!
//! Writers hold the leaf's lock and READ the leaf after taking it, so they see
//! complete images; an entry write is one contiguous WRITE of the slot (key,
//! value, check: `Kp + 16` bytes) posted with the unlock, instead of the whole
//! node. Cost: 8 more bytes per entry (a 1 KiB leaf with 8-byte keys holds 40
//! entries instead of 61) and a hash per slot when reading.
//!
//! Byte layout of an unsorted leaf (flag bit 2 set; `E = Kp + 16`):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | lock word (as in [`crate::node`]) |
//! | 8 | 8 | header checksum of bytes `[16, 32 + 2Kp)` |
//! | 16 | 1 | level (0) |
//! | 17 | 1 | flags: bit 0 low fence -inf, bit 1 high fence +inf, bit 2 unsorted |
//! | 18 | 2 | 0 (the entry count lives in the slots' occupied bits) |
//! | 20 | 4 | node version |
//! | 24 | 8 | sibling pointer |
//! | 32 | 2Kp | low fence, high fence |
//! | 32+2Kp+sE | Kp | slot `s`: key |
//! | +Kp | 8 | value |
//! | +Kp+8 | 8 | check word: bit 0 occupied, bits 1.. the slot hash |

use crate::node::{Fence, Geometry, Node, NodeKey};

/// Seeds the slot hash with the node version, slot number and occupied bit.
fn slot_hash(version: u32, slot: u16, occupied: bool, words: &[u8]) -> u64 {
    let mut h: u64 =
        0x1319_8a2e_0370_7344 ^ ((version as u64) << 32) ^ ((slot as u64) << 1) ^ occupied as u64;
    h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    for w in words.chunks_exact(8) {
        let w = u64::from_le_bytes(w.try_into().unwrap());
        h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    h
}

/// The `Kp + 16` bytes of slot `slot` of a leaf at node version `version`
/// holding `entry` (`None`: empty slot).
pub fn slot_image(g: &Geometry, version: u32, slot: u16, entry: Option<(&[u8], u64)>) -> Vec<u8> {
    let mut b = dm_verbs::buf::take(g.slot_bytes());
    b.resize(g.slot_bytes(), 0);
    write_slot_image(g, version, slot, entry, &mut b);
    b
}

/// [`slot_image`] written in place into `dst`, the slot's `Kp + 16` bytes
/// (a whole-leaf encode writes every slot so, with no buffer per slot).
fn write_slot_image(
    g: &Geometry,
    version: u32,
    slot: u16,
    entry: Option<(&[u8], u64)>,
    dst: &mut [u8],
) {
    dst.fill(0);
    if let Some((k, v)) = entry {
        dst[..k.len()].copy_from_slice(k);
        dst[g.kp..g.kp + 8].copy_from_slice(&v.to_le_bytes());
    }
    let occupied = entry.is_some();
    let check = (slot_hash(version, slot, occupied, &dst[..g.kp + 8]) & !1) | occupied as u64;
    dst[g.kp + 8..].copy_from_slice(&check.to_le_bytes());
}

/// Byte offset of slot `slot` in an unsorted leaf.
pub fn slot_offset(g: &Geometry, slot: u16) -> usize {
    g.entries_off() + slot as usize * g.slot_bytes()
}

/// Writes the slots of an unsorted leaf image `b` whose header is already in
/// place: entries (sorted) in slots `0..n`, the rest empty, all at `n.version`.
pub(crate) fn encode_slots(g: &Geometry, n: &Node, b: &mut [u8]) {
    for s in 0..g.unsorted_capacity() as u16 {
        let e = n.entries.get(s as usize).map(|(k, v)| (k.as_slice(), *v));
        let o = slot_offset(g, s);
        write_slot_image(g, n.version, s, e, &mut b[o..o + g.slot_bytes()]);
    }
}

/// Checks slot `s` (its `Kp + 16` bytes) of an unsorted leaf at node
/// version `version`: `None` if its check word does not match (torn, or
/// from another version), else its entry if occupied.
pub(crate) fn check_slot<'a>(
    g: &Geometry,
    version: u32,
    s: u16,
    slot: &'a [u8],
) -> Option<Option<(&'a [u8], u64)>> {
    let check = u64::from_le_bytes(slot[g.kp + 8..].try_into().unwrap());
    let occupied = check & 1 == 1;
    if slot_hash(version, s, occupied, &slot[..g.kp + 8]) & !1 != check & !1 {
        return None;
    }
    Some(slot_entry(g, slot))
}

/// The entry of slot bytes `slot` (its `Kp + 16` bytes) if occupied (bit
/// 0 of its check word), without checking the slot: for a slot
/// [`check_slot`] accepted.
pub(crate) fn slot_entry<'a>(g: &Geometry, slot: &'a [u8]) -> Option<(&'a [u8], u64)> {
    let check = u64::from_le_bytes(slot[g.kp + 8..g.kp + 16].try_into().unwrap());
    (check & 1 == 1).then(|| {
        let v = u64::from_le_bytes(slot[g.kp..g.kp + 8].try_into().unwrap());
        (&slot[..g.key_bytes], v)
    })
}

/// Decodes the slots of an unsorted leaf image whose header (`level`, fences,
/// `version`, ...) is already validated into `n`: `None` if any slot's check
/// fails. Entries come out sorted with `n.slots` parallel; if a torn image
/// shows a key in two slots (removed from one and re-inserted into another
/// during the READ) the lower slot's copy is kept, either being a value the
/// key held during the READ.
pub(crate) fn decode_slots(g: &Geometry, b: &[u8], mut n: Node) -> Option<Node> {
    // Room for every slot, and in `entries` and `slots` for one more (an
    // insert before a split): no growth on the way (issue 32).
    let cap = g.unsorted_capacity();
    let mut found: Vec<(NodeKey, u64, u16)> = Vec::with_capacity(cap);
    for s in 0..g.unsorted_capacity() as u16 {
        let o = slot_offset(g, s);
        if let Some((k, v)) = check_slot(g, n.version, s, &b[o..o + g.slot_bytes()])? {
            found.push((NodeKey::from_slice(k), v, s));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.cmp(&b.2)));
    found.dedup_by(|later, first| later.0 == first.0);
    n.slots = Vec::with_capacity(cap + 1);
    n.slots.extend(found.iter().map(|e| e.2));
    n.entries = Vec::with_capacity(cap + 1);
    n.entries.extend(found.into_iter().map(|(k, v, _)| (k, v)));
    Some(n)
}

impl Node {
    /// An empty unsorted leaf covering `[low, high)` (Sherman §4.4).
    pub fn empty_unsorted_leaf(low: Fence, high: Fence) -> Self {
        let mut n = Node::empty(0, low, high);
        n.unsorted = true;
        n
    }

    /// Lowest free slot of a decoded unsorted leaf.
    pub fn free_slot(&self, g: &Geometry) -> Option<u16> {
        // A bitmap of the used slots, inline up to 256 slots.
        let cap = g.unsorted_capacity();
        let mut used: smallvec::SmallVec<[u64; 4]> =
            smallvec::SmallVec::from_elem(0, cap.div_ceil(64));
        for &s in &self.slots {
            used[s as usize / 64] |= 1 << (s % 64);
        }
        (0..cap)
            .find(|&s| used[s / 64] & (1 << (s % 64)) == 0)
            .map(|s| s as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dm_verbs::GlobalAddr;

    fn leaf(g: &Geometry, n: usize, version: u32) -> Node {
        let mut l = Node::empty_unsorted_leaf(Fence::key(&[1; 8]), Fence::PosInf);
        l.version = version;
        l.sibling = GlobalAddr::new(1, 4096);
        for i in 0..n as u8 {
            l.entries.push((
                NodeKey::from_slice(&[2, i, 0, 0, 0, 0, 0, 0]),
                i as u64 * 10,
            ));
        }
        assert!(n <= g.unsorted_capacity());
        l
    }

    #[test]
    fn round_trip_and_entry_writes() {
        let g = Geometry::new(1024, 8);
        assert_eq!(g.unsorted_capacity(), (1024 - 48) / 24);
        let l = leaf(&g, 10, 3);
        let mut b = l.encode(&g);
        let d = Node::decode(&g, &b).unwrap();
        assert_eq!(d.entries, l.entries);
        assert_eq!(d.slots, (0..10).collect::<Vec<u16>>());
        assert_eq!(d.free_slot(&g), Some(10));
        // Insert a key smaller than all into slot 10, remove slot 4: entry writes only.
        let o = slot_offset(&g, 10);
        b[o..o + 24].copy_from_slice(&slot_image(&g, 3, 10, Some((&[1, 9, 0, 0, 0, 0, 0, 0], 7))));
        let o = slot_offset(&g, 4);
        b[o..o + 24].copy_from_slice(&slot_image(&g, 3, 4, None));
        let d = Node::decode(&g, &b).unwrap();
        assert_eq!(d.entries.len(), 10);
        assert_eq!(
            d.entries[0],
            (NodeKey::from_slice(&[1, 9, 0, 0, 0, 0, 0, 0]), 7)
        );
        assert_eq!(d.slots[0], 10);
        assert!(d.find(&[2, 4, 0, 0, 0, 0, 0, 0]).is_err());
        assert_eq!(d.free_slot(&g), Some(4));
    }

    #[test]
    fn torn_slots_and_mixed_node_versions_are_rejected() {
        let g = Geometry::new(512, 8);
        let old = leaf(&g, 12, 5).encode(&g);
        // An entry write racing the READ: any single word of the new slot mixed
        // into the old image (or the reverse) is rejected, the whole slot is accepted.
        let new_slot = slot_image(&g, 5, 3, Some((&[2, 3, 0, 0, 0, 0, 0, 0], 999)));
        let o = slot_offset(&g, 3);
        for w in 0..3 {
            let mut t = old.clone();
            t[o + 8 * w..o + 8 * w + 8].copy_from_slice(&new_slot[8 * w..8 * w + 8]);
            if t != old {
                assert_eq!(Node::decode(&g, &t), None, "slot word {w}");
            }
        }
        let mut t = old.clone();
        t[o..o + 24].copy_from_slice(&new_slot);
        assert_eq!(Node::decode(&g, &t).unwrap().entries[3].1, 999);
        // A split (whole-node write at version 6, fewer keys, new fence) racing
        // the READ: any one word from either image mixed into the other is rejected.
        let mut split = leaf(&g, 6, 6);
        split.high = Fence::key(&[2, 6, 0, 0, 0, 0, 0, 0]);
        let new = split.encode(&g);
        for w in 1..g.node_bytes / 8 {
            for (a, b) in [(&old, &new), (&new, &old)] {
                let mut t = a.clone();
                t[w * 8..w * 8 + 8].copy_from_slice(&b[w * 8..w * 8 + 8]);
                if t != *a {
                    assert_eq!(Node::decode(&g, &t), None, "word {w}");
                }
            }
        }
        // Whole slots from the other image (each slot self-consistent, as a
        // READ torn at slot boundaries returns them) are caught by the node
        // version in the slot hash: old header with new slots, new header with
        // old slots, and every prefix of new slots after the new header.
        let h = g.entries_off();
        let mut t = old.clone();
        t[h..].copy_from_slice(&new[h..]);
        assert_eq!(Node::decode(&g, &t), None, "old header, new slots");
        let mut t = new.clone();
        t[h..].copy_from_slice(&old[h..]);
        assert_eq!(Node::decode(&g, &t), None, "new header, old slots");
        for s in 0..g.unsorted_capacity() as u16 {
            let mut t = new.clone();
            let o = slot_offset(&g, s);
            t[o..o + 24].copy_from_slice(&old[o..o + 24]);
            assert_eq!(Node::decode(&g, &t), None, "new image, old slot {s}");
        }
        // The lock word is outside every check.
        let mut locked = old.clone();
        locked[0] = 9;
        assert!(Node::decode(&g, &locked).is_some());
    }

    #[test]
    fn a_key_seen_in_two_slots_is_reported_once() {
        let g = Geometry::new(512, 8);
        let mut b = leaf(&g, 4, 0).encode(&g);
        let o = slot_offset(&g, 9);
        b[o..o + 24].copy_from_slice(&slot_image(&g, 0, 9, Some((&[2, 1, 0, 0, 0, 0, 0, 0], 77))));
        let d = Node::decode(&g, &b).unwrap();
        assert_eq!(d.entries.len(), 4);
        assert_eq!(
            d.entries[1],
            (NodeKey::from_slice(&[2, 1, 0, 0, 0, 0, 0, 0]), 10)
        );
        assert_eq!(d.slots.len(), 4);
    }
}
