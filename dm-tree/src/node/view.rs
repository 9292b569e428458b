//! [`View`]: a node image validated and searched in place, without decoding
//! it into a [`Node`] (issue 32: no heap allocation per warm get). It
//! accepts exactly the images [`Node::decode`] accepts (the same checksum,
//! header and, for an unsorted leaf, per-slot checks) and answers what a
//! warm get asks of a leaf: its level, fences, sibling and the value of one
//! key; a test holds it to `decode` on torn images.

use super::*;
use dm_runtime::checksum::checksum;

/// Bytes of an unsorted leaf's slot with 8-byte keys: key, value, check
/// word ([`crate::two_level`]).
const SLOT8: usize = 24;

/// A validated node image, borrowed.
pub(crate) struct View<'a> {
    pub(super) g: &'a Geometry,
    pub(super) b: &'a [u8],
}

/// A fence as the image holds it.
#[derive(PartialEq, Eq)]
pub(super) enum FenceRef<'a> {
    NegInf,
    Key(&'a [u8]),
    PosInf,
}

impl<'a> View<'a> {
    /// `b` validated as [`Node::decode`] validates it; `None` where decode
    /// returns `None` (torn, being written, impossible header).
    pub(crate) fn new(g: &'a Geometry, b: &'a [u8]) -> Option<Self> {
        let v = View::header(g, b)?;
        let unsorted = v.flags() & FLAG_UNSORTED != 0;
        if unsorted && !(0..g.unsorted_capacity() as u16).all(|s| v.slot(s).is_some()) {
            return None;
        }
        Some(v)
    }

    /// `b` validated for a lookup of `key` only, with `key`'s value in it
    /// when it is a leaf's (`None` for an internal node): the header as
    /// [`View::header`] checks it and, for an unsorted leaf (Sherman §4.4),
    /// the lowest slot that holds `key` under a matching check word, or,
    /// when no slot does, every slot (an absent key needs every slot whole:
    /// a torn slot could hide it). A valid slot holding `key` is a value
    /// `key` held during the READ whatever the other slots show, so a warm
    /// get hashes one slot, not all of them (issue 32: 15% of a loopback
    /// Sherman get went to checking every slot). `None` where the lookup
    /// must READ again. Take the value from here, not from anything that
    /// reads other slots of the view.
    pub(crate) fn for_key(g: &'a Geometry, b: &'a [u8], key: &[u8]) -> Option<(Self, Option<u64>)> {
        let v = View::header(g, b)?;
        if v.flags() & FLAG_UNSORTED == 0 {
            let value = if v.level() == 0 { v.get(key) } else { None };
            return Some((v, value));
        }
        if let Some((_, value)) = v.key_slot(key) {
            return Some((v, Some(value)));
        }
        (0..g.unsorted_capacity() as u16)
            .all(|s| v.slot(s).is_some())
            .then_some((v, None))
    }

    /// The view of an image that [`View::for_key`] accepted for `key`
    /// before (not checked again), for its header (level, fences, sibling).
    pub(crate) fn validated_for(g: &'a Geometry, b: &'a [u8], key: &[u8]) -> Self {
        debug_assert!(View::for_key(g, b, key).is_some());
        View { g, b }
    }

    /// `b` with its checksum and header validated (what [`Node::decode`]
    /// checks before it reads an unsorted leaf's slots, which
    /// [`View::new`] and `decode_slots` check on their own): `None` if
    /// torn, being written or impossible.
    pub(super) fn header(g: &'a Geometry, b: &'a [u8]) -> Option<Self> {
        if b.len() != g.node_bytes {
            return None;
        }
        let stored = u64::from_le_bytes(b[OFF_CSUM..OFF_CSUM + 8].try_into().unwrap());
        let flags = b[OFF_FLAGS];
        let unsorted = flags & FLAG_UNSORTED != 0;
        let covered = if unsorted {
            &b[16..g.entries_off()]
        } else {
            &b[16..]
        };
        if checksum(covered) != stored {
            return None;
        }
        let count = u16::from_le_bytes([b[OFF_COUNT], b[OFF_COUNT + 1]]) as usize;
        if count > g.capacity() || (unsorted && (count != 0 || b[OFF_LEVEL] != 0)) {
            return None;
        }
        let v = View { g, b };
        let head = flags & FLAG_HEAD != 0;
        if head && (unsorted || v.level() != 0 || v.low() != v.high()) {
            return None;
        }
        Some(v)
    }

    /// A view of an image whose header [`View::new`] or [`View::for_key`]
    /// accepted before, for its header only (level, fences, sibling).
    pub(crate) fn validated_header(g: &'a Geometry, b: &'a [u8]) -> Self {
        debug_assert!(View::header(g, b).is_some());
        View { g, b }
    }

    /// A view of an image that [`View::new`] accepted before (not checked
    /// again: a caller that validated the bytes it holds).
    pub(crate) fn validated(g: &'a Geometry, b: &'a [u8]) -> Self {
        debug_assert!(View::new(g, b).is_some());
        View { g, b }
    }

    pub(super) fn flags(&self) -> u8 {
        self.b[OFF_FLAGS]
    }

    pub(crate) fn level(&self) -> u8 {
        self.b[OFF_LEVEL]
    }

    pub(crate) fn sibling(&self) -> GlobalAddr {
        GlobalAddr::from_u64(u64::from_le_bytes(
            self.b[OFF_SIBLING..OFF_SIBLING + 8].try_into().unwrap(),
        ))
    }

    pub(super) fn key_at(&self, o: usize) -> &'a [u8] {
        &self.b[o..o + self.g.key_bytes]
    }

    pub(super) fn low(&self) -> FenceRef<'a> {
        if self.flags() & FLAG_LOW_INF != 0 {
            FenceRef::NegInf
        } else {
            FenceRef::Key(self.key_at(OFF_FENCES))
        }
    }

    pub(super) fn high(&self) -> FenceRef<'a> {
        if self.flags() & FLAG_HIGH_INF != 0 {
            FenceRef::PosInf
        } else {
            FenceRef::Key(self.key_at(OFF_FENCES + self.g.kp))
        }
    }

    /// Whether this node keeps its entries sorted (every internal node and
    /// all but Sherman's unsorted leaves, §4.4).
    pub(crate) fn sorted(&self) -> bool {
        self.flags() & FLAG_UNSORTED == 0
    }

    /// Whether this image's fences are `low` and `high` (as
    /// [`Node::decode`] would give them).
    pub(crate) fn has_fences(&self, low: &Fence, high: &Fence) -> bool {
        let same = |f: FenceRef<'_>, g: &Fence| match (f, g) {
            (FenceRef::NegInf, Fence::NegInf) | (FenceRef::PosInf, Fence::PosInf) => true,
            (FenceRef::Key(a), Fence::Key(b)) => a == b.as_slice(),
            _ => false,
        };
        same(self.low(), low) && same(self.high(), high)
    }

    /// As [`Node::below_low`].
    pub(crate) fn below_low(&self, key: &[u8]) -> bool {
        match self.low() {
            FenceRef::NegInf => false,
            FenceRef::Key(l) => cmp_keys(key, l).is_lt(),
            FenceRef::PosInf => true,
        }
    }

    /// As [`Node::beyond_high`].
    pub(crate) fn beyond_high(&self, key: &[u8]) -> bool {
        match self.high() {
            FenceRef::PosInf => false,
            FenceRef::Key(h) => cmp_keys(key, h).is_ge(),
            FenceRef::NegInf => true,
        }
    }

    /// Slot `s` of an unsorted leaf: `None` if its check fails, else its
    /// entry if occupied (as [`crate::two_level::decode_slots`] checks it).
    fn slot(&self, s: u16) -> Option<Option<(&'a [u8], u64)>> {
        let g = self.g;
        let o = crate::two_level::slot_offset(g, s);
        let slot = &self.b[o..o + g.slot_bytes()];
        let version = u32::from_le_bytes(self.b[OFF_VERSION..OFF_VERSION + 4].try_into().unwrap());
        crate::two_level::check_slot(g, version, s, slot)
    }

    /// The node version (header offset 20).
    pub(crate) fn version(&self) -> u32 {
        u32::from_le_bytes(self.b[OFF_VERSION..OFF_VERSION + 4].try_into().unwrap())
    }

    /// The lowest slot of an unsorted leaf that holds `key` under a
    /// matching check word, with its value: the key words are compared
    /// first, so only a slot that holds `key` is hashed.
    fn key_slot(&self, key: &[u8]) -> Option<(u16, u64)> {
        let g = self.g;
        let version = self.version();
        // One pass over the slot array in slot-sized chunks, no per-slot
        // offset arithmetic or slicing. Issue 32: this scan was about 3% of
        // a loopback Sherman get.
        let checked = |s: usize, slot: &[u8]| match crate::two_level::check_slot(
            g, version, s as u16, slot,
        ) {
            Some(Some((_, v))) => Some((s as u16, v)),
            _ => None,
        };
        if let (8, Ok(k)) = (g.key_bytes, <[u8; 8]>::try_from(key)) {
            // Equality needs no byte order: one load and compare per slot
            // (about 12 instructions per slot through `cmp_keys`, 318 of a
            // warm Sherman get's 2,249 under callgrind).
            let k = u64::from_ne_bytes(k);
            // 8-byte keys make 24-byte slots: as fixed-size chunks the
            // scan has no per-slot length checks (issue 32).
            debug_assert_eq!(g.slot_bytes(), SLOT8);
            let (slots, _) = self.slot_area().as_chunks::<SLOT8>();
            return slots.iter().enumerate().find_map(|(s, slot)| {
                let w = u64::from_ne_bytes(*slot.first_chunk::<8>().expect("24 bytes"));
                if w != k {
                    return None;
                }
                checked(s, slot)
            });
        }
        self.slots().enumerate().find_map(|(s, slot)| {
            if !cmp_keys(&slot[..g.key_bytes], key).is_eq() {
                return None;
            }
            checked(s, slot)
        })
    }

    /// The lowest slot of an unsorted leaf whose check word marks it empty
    /// (bit 0 clear), as [`Node::free_slot`] finds it in the decoded
    /// image when the image holds no key twice (one read under the node's
    /// lock: only a torn READ shows a key in two slots). `None` for a
    /// sorted node or a full leaf. The slots' check words are not checked
    /// here: the caller's view was validated.
    pub(crate) fn free_slot(&self) -> Option<u16> {
        if self.flags() & FLAG_UNSORTED == 0 {
            return None;
        }
        let kp = self.g.kp;
        self.slots()
            .position(|slot| slot[kp + 8] & 1 == 0)
            .map(|s| s as u16)
    }

    /// An unsorted leaf's slots in slot order, `Kp + 16` bytes each.
    pub(super) fn slots(&self) -> std::slice::ChunksExact<'a, u8> {
        self.slot_area().chunks_exact(self.g.slot_bytes())
    }

    /// The bytes of an unsorted leaf's slot array (all its slots).
    fn slot_area(&self) -> &'a [u8] {
        let g = self.g;
        let off = g.entries_off();
        &self.b[off..off + g.unsorted_capacity() * g.slot_bytes()]
    }

    /// Where `key`'s entry is in this node (a leaf's), if present: a
    /// binary search of sorted entries, or the lowest slot of an unsorted
    /// leaf that holds the key under a matching check word (the copy
    /// [`Node::decode`] keeps when every slot is whole; with
    /// [`View::for_key`], a value the key held during the READ).
    pub(crate) fn locate(&self, key: &[u8]) -> Option<Loc> {
        let g = self.g;
        if self.flags() & FLAG_UNSORTED != 0 {
            return self.key_slot(key).map(|(s, v)| Loc::Slot(s, v));
        }
        let count = u16::from_le_bytes([self.b[OFF_COUNT], self.b[OFF_COUNT + 1]]) as usize;
        let i = self.sorted_place(key);
        let o = g.entries_off() + i * g.entry_bytes();
        if i == count || !cmp_keys(self.key_at(o), key).is_eq() {
            return None;
        }
        let o = o + g.kp;
        Some(Loc::Sorted(
            o,
            u64::from_le_bytes(self.b[o..o + 8].try_into().unwrap()),
        ))
    }

    /// A sorted node's place for `key`: the index of its first entry whose
    /// key is not below `key` (the entry count if none), by binary search
    /// in place ([`View::locate`]; [`insert_sorted_in_place`]).
    pub(super) fn sorted_place(&self, key: &[u8]) -> usize {
        let g = self.g;
        let count = u16::from_le_bytes([self.b[OFF_COUNT], self.b[OFF_COUNT + 1]]) as usize;
        if let (8, Ok(k)) = (g.kp, <[u8; 8]>::try_from(key)) {
            // 8-byte keys (16-byte entries): `partition_point` over the
            // entries in place, a loop without a branch per step (issue
            // 32: the branchy search was about 4% of a loopback FG+ get).
            let k = u64::from_be_bytes(k);
            let word = |e: &[u8; 16]| u64::from_be_bytes(e[..8].try_into().unwrap());
            let off = g.entries_off();
            if let Some(b) = self.b.get(off..off + count * 16) {
                return b.as_chunks::<16>().0.partition_point(|e| word(e) < k);
            }
        }
        let entry = |i: usize| g.entries_off() + i * g.entry_bytes();
        let (mut lo, mut hi) = (0, count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if cmp_keys(self.key_at(entry(mid)), key).is_lt() {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// As [`Node::child_for`]: an internal node's child covering `key`
    /// (the last entry whose key is at most `key`; the first entry if
    /// none), by binary search over the sorted entries in place.
    /// `None` for a node without entries (no internal node is empty).
    pub(crate) fn child_for(&self, key: &[u8]) -> Option<GlobalAddr> {
        let g = self.g;
        let count = u16::from_le_bytes([self.b[OFF_COUNT], self.b[OFF_COUNT + 1]]) as usize;
        if count == 0 {
            return None;
        }
        let entry = |i: usize| g.entries_off() + i * g.entry_bytes();
        let o = entry(child_index(count, |i| self.key_at(entry(i)), key)) + g.kp;
        let v = u64::from_le_bytes(self.b[o..o + 8].try_into().unwrap());
        Some(GlobalAddr::from_u64(v))
    }

    /// The value of `key` in this node's entries (a leaf's), if present.
    pub(crate) fn get(&self, key: &[u8]) -> Option<u64> {
        self.locate(key).map(Loc::value)
    }
}

/// Where [`View::locate`] found a key, with its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// Slot `s` of an unsorted leaf (Sherman §4.4's entry-level write-back).
    Slot(u16, u64),
    /// A sorted node's value at this byte offset.
    Sorted(usize, u64),
}

impl Loc {
    /// The value found.
    pub(crate) fn value(self) -> u64 {
        match self {
            Loc::Slot(_, v) | Loc::Sorted(_, v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leaf of `n` entries (keys `[2, i, 0..]`), sorted or unsorted.
    fn leaf(g: &Geometry, n: usize, unsorted: bool, bump: u64) -> Vec<u8> {
        let mut l = if unsorted {
            Node::empty_unsorted_leaf(Fence::key(&[1; 8]), Fence::PosInf)
        } else {
            Node::empty(0, Fence::key(&[1; 8]), Fence::key(&[9; 8]))
        };
        l.sibling = GlobalAddr::new(1, 4096 + bump * 8);
        l.version = bump as u32;
        for i in 0..n as u8 {
            l.entries.push((
                NodeKey::from_slice(&[2, i, 0, 0, 0, 0, 0, 0]),
                i as u64 * 10 + bump,
            ));
        }
        l.encode(g)
    }

    /// The view agrees with `decode` on `b`: both reject, or both accept
    /// with the same level, sibling, fences and value of every key.
    fn agree(g: &Geometry, b: &[u8]) {
        let (v, n) = (View::new(g, b), Node::decode(g, b));
        assert_eq!(v.is_some(), n.is_some());
        let (Some(v), Some(n)) = (v, n) else { return };
        assert_eq!((v.level(), v.sibling()), (n.level, n.sibling));
        let mut in_order = Vec::new();
        let count = v.for_each_in_order(|k, x| {
            in_order.push((NodeKey::from_slice(k), x));
            std::ops::ControlFlow::Continue(())
        });
        assert_eq!((count, in_order), (n.entries.len(), n.entries.clone()));
        for i in 0..=255u8 {
            for k in [
                vec![2, i, 0, 0, 0, 0, 0, 0],
                vec![1; 8],
                vec![9; 8],
                vec![0; 8],
            ] {
                assert_eq!(v.get(&k), n.find(&k).ok().map(|j| n.entries[j].1));
                assert_eq!(v.below_low(&k), n.below_low(&k));
                assert_eq!(v.beyond_high(&k), n.beyond_high(&k));
            }
        }
    }

    /// A present key's value set in place (the warm update) gives the
    /// very image `encode` gives for the decoded node with that value and
    /// version + 1; an unsorted leaf's key is found in the slot `decode`
    /// keeps.
    #[test]
    fn an_update_in_place_is_the_encoded_update() {
        let g = Geometry::new(1024, 8);
        for n in [1, 7, g.capacity()] {
            let mut b = leaf(&g, n, false, 3);
            let mut at = vec![0, n / 2, n - 1];
            at.dedup();
            for i in at {
                let key = vec![2, i as u8, 0, 0, 0, 0, 0, 0];
                let Some(Loc::Sorted(off, v)) = View::new(&g, &b).unwrap().locate(&key) else {
                    panic!("key {i} of {n}");
                };
                assert_eq!(v, i as u64 * 10 + 3);
                let mut node = Node::decode(&g, &b).unwrap();
                node.entries[i].1 = 77 + i as u64;
                node.version += 1;
                set_sorted_value(&mut b, off, 77 + i as u64);
                assert_eq!(b, node.encode(&g));
            }
            assert_eq!(View::new(&g, &b).unwrap().locate(&[3; 8]), None);
        }
        let b = leaf(&g, 5, true, 1);
        let n = Node::decode(&g, &b).unwrap();
        let Some(Loc::Slot(s, v)) = View::new(&g, &b).unwrap().locate(&[2, 4, 0, 0, 0, 0, 0, 0])
        else {
            panic!("unsorted key");
        };
        assert_eq!((Some(s), v), (n.slots.get(4).copied(), 41));
    }

    /// An internal node's child for every key, below, on and between its
    /// separators, is the one [`Node::child_for`] gives.
    #[test]
    fn an_internal_node_routes_as_the_decoded_node() {
        let g = Geometry::new(1024, 8);
        for n in [1, 2, 9, g.capacity()] {
            let mut node = Node::empty(1, Fence::NegInf, Fence::PosInf);
            for i in 0..n {
                let k = (i as u16 * 2 + 2).to_be_bytes();
                node.entries.push((
                    NodeKey::from_slice(&[k[0], k[1], 0, 0, 0, 0, 0, 0]),
                    4096 + i as u64 * 8,
                ));
            }
            let b = node.encode(&g);
            let v = View::new(&g, &b).unwrap();
            for x in 0..=(n as u16 * 2 + 3) {
                for tail in [0u8, 1] {
                    let k = x.to_be_bytes();
                    let key = [k[0], k[1], tail, 0, 0, 0, 0, 0];
                    assert_eq!(v.child_for(&key), Some(node.child_for(&key)), "{n} {x}");
                }
            }
        }
        let empty = Node::empty(1, Fence::NegInf, Fence::PosInf).encode(&g);
        assert_eq!(View::new(&g, &empty).unwrap().child_for(&[0; 8]), None);
    }

    /// A lookup's view ([`View::for_key`]) of an unsorted leaf torn between
    /// two images (a whole-node write, new version; or a slot write, same
    /// version) answers what `decode` answers when decode accepts, and
    /// otherwise only a value the key had in one of the two images; it
    /// answers "absent" only where decode accepts and agrees.
    #[test]
    fn a_lookup_view_answers_only_values_the_key_had() {
        let g = Geometry::new(1024, 8);
        let n = g.unsorted_capacity() / 2;
        let old = leaf(&g, n, true, 0);
        let node_write = leaf(&g, n, true, 1);
        let mut slot_write = old.clone();
        let o = crate::two_level::slot_offset(&g, 3);
        let img = crate::two_level::slot_image(&g, 0, 3, Some((&[2, 3, 0, 0, 0, 0, 0, 0], 99)));
        slot_write[o..o + g.slot_bytes()].copy_from_slice(&img);
        let mut accepted_torn = 0;
        for new in [node_write, slot_write] {
            let (dn, dold) = (
                Node::decode(&g, &new).unwrap(),
                Node::decode(&g, &old).unwrap(),
            );
            let val = |n: &Node, k: &[u8]| n.find(k).ok().map(|j| n.entries[j].1);
            for w in 1..g.node_bytes / 8 {
                let mut t = old.clone();
                t[w * 8..w * 8 + 8].copy_from_slice(&new[w * 8..w * 8 + 8]);
                let d = Node::decode(&g, &t);
                for i in 0..=(n as u8 + 1) {
                    let k = [2, i, 0, 0, 0, 0, 0, 0];
                    let Some((v, got)) = View::for_key(&g, &t, &k) else {
                        continue;
                    };
                    assert_eq!(got, v.get(&k), "word {w} key {i}: the view's own answer");
                    match &d {
                        Some(d) => assert_eq!(got, val(d, &k), "word {w} key {i}"),
                        None => {
                            accepted_torn += 1;
                            assert!(got.is_some(), "word {w} key {i}: absent from a torn image");
                            assert!(
                                got == val(&dold, &k) || got == val(&dn, &k),
                                "word {w} key {i}: {got:?}"
                            );
                        }
                    }
                }
            }
        }
        assert!(
            accepted_torn > 0,
            "no torn image was answered from its key's slot"
        );
    }

    #[test]
    fn the_view_accepts_and_answers_exactly_what_decode_does() {
        let g = Geometry::new(1024, 8);
        for unsorted in [false, true] {
            let cap = if unsorted {
                g.unsorted_capacity()
            } else {
                g.capacity()
            };
            for n in [0, 1, cap / 2, cap] {
                let (old, new) = (leaf(&g, n, unsorted, 0), leaf(&g, n, unsorted, 1));
                agree(&g, &old);
                // Every image taking exactly one 8-byte word from the other
                // version (a torn READ).
                for w in 1..g.node_bytes / 8 {
                    let mut t = old.clone();
                    t[w * 8..w * 8 + 8].copy_from_slice(&new[w * 8..w * 8 + 8]);
                    agree(&g, &t);
                }
            }
        }
    }

    /// An in-place insert into a sorted leaf gives the image a decode, an
    /// insert and an encode at version + 1 give; a full leaf, and an
    /// unsorted one, are left as they are.
    #[test]
    fn a_sorted_insert_in_place_is_the_encoded_insert() {
        let g = Geometry::new(1024, 8);
        let keys = [[1, 5, 0, 0, 0, 0, 0, 0], [2, 3, 1, 0, 0, 0, 0, 0], [8; 8]];
        for n in [0, 1, 5, g.capacity() - 1] {
            for key in keys {
                let mut b = leaf(&g, n, false, 0);
                let mut want = Node::decode(&g, &b).unwrap();
                let i = want.find(&key).unwrap_err();
                want.entries.insert(i, (NodeKey::from_slice(&key), 77));
                want.version = want.version.wrapping_add(1);
                assert!(insert_sorted_in_place(&g, &mut b, &key, 77));
                assert_eq!(b, want.encode(&g), "{n} entries, key {key:?}");
            }
        }
        for (n, unsorted) in [(g.capacity(), false), (3, true)] {
            let mut b = leaf(&g, n, unsorted, 0);
            let before = b.clone();
            assert!(!insert_sorted_in_place(&g, &mut b, &[8; 8], 1));
            assert_eq!(b, before);
        }
    }

    /// An unsorted leaf's lowest empty slot, read in place, is the decoded
    /// node's; a full leaf has none.
    #[test]
    fn the_free_slot_in_place_is_the_decoded_nodes() {
        let g = Geometry::new(1024, 8);
        for n in [0, 1, 7, g.unsorted_capacity() - 1, g.unsorted_capacity()] {
            let b = leaf(&g, n, true, 0);
            let want = Node::decode(&g, &b).unwrap().free_slot(&g);
            assert_eq!(View::new(&g, &b).unwrap().free_slot(), want, "{n} entries");
        }
        let sorted = leaf(&g, 3, false, 0);
        assert_eq!(View::new(&g, &sorted).unwrap().free_slot(), None);
    }
}
