//! A validated image's entries in key order, read in place: what a range
//! scan walks (Ziegler et al. §5.3; Sherman §4.2), without decoding the
//! node into a [`Node`] (issue 32: no heap allocation per warm scan).
//!
//! A sorted node's entries are already in order. An unsorted leaf
//! (Sherman §4.4, [`crate::two_level`]) is ordered through a list of its
//! occupied slots, inline up to [`INLINE_SLOTS`], sorted by key and then
//! slot; where a torn image shows a key in two slots the lower slot's
//! entry is kept, as [`crate::two_level::decode_slots`] keeps it.

use super::view::FenceRef;
use super::*;
use std::ops::ControlFlow;

/// Slots of an unsorted leaf ordered without a heap allocation (a 1 KB
/// leaf of 8-byte keys has 40).
pub(crate) const INLINE_SLOTS: usize = 64;

impl<'a> View<'a> {
    /// Whether this is a head node ([`crate::head`], flag bit 3).
    pub(crate) fn head(&self) -> bool {
        self.flags() & FLAG_HEAD != 0
    }

    /// Whether the low fence is the key `k` (as `Node::low == Fence::Key(k)`).
    pub(crate) fn low_is_key(&self, k: &[u8]) -> bool {
        matches!(self.low(), FenceRef::Key(l) if l == k)
    }

    /// The high fence's key; `None` for +inf (and -inf).
    pub(crate) fn high_key(&self) -> Option<&'a [u8]> {
        match self.high() {
            FenceRef::Key(h) => Some(h),
            _ => None,
        }
    }

    /// Calls `f` with each entry `(key, value)` in key order, the entries
    /// [`Node::decode`] gives for this image, until `f` breaks; returns
    /// how many entries the node holds (all of them, whether or not `f`
    /// stopped early). The view must be validated ([`View::new`]): an
    /// unsorted leaf's slots are not checked again.
    pub(crate) fn for_each_in_order(
        &self,
        mut f: impl FnMut(&'a [u8], u64) -> ControlFlow<()>,
    ) -> usize {
        let g = self.g;
        let value =
            |o: usize| u64::from_le_bytes(self.b[o + g.kp..o + g.kp + 8].try_into().unwrap());
        if self.sorted() {
            let count = u16::from_le_bytes([self.b[OFF_COUNT], self.b[OFF_COUNT + 1]]) as usize;
            let offs = (0..count).map(|i| g.entries_off() + i * g.entry_bytes());
            for o in offs {
                if f(self.key_at(o), value(o)).is_break() {
                    break;
                }
            }
            return count;
        }
        // Occupied slots by key, then slot; a key's later slots dropped.
        let key = |s: u16| self.key_at(crate::two_level::slot_offset(g, s));
        let mut order: smallvec::SmallVec<[u16; INLINE_SLOTS]> = self
            .slots()
            .enumerate()
            .filter(|(_, slot)| slot[g.kp + 8] & 1 == 1)
            .map(|(s, _)| s as u16)
            .collect();
        order.sort_unstable_by(|&a, &b| cmp_keys(key(a), key(b)).then(a.cmp(&b)));
        order.dedup_by(|later, first| key(*later) == key(*first));
        for &s in &order {
            let o = crate::two_level::slot_offset(g, s);
            if f(key(s), value(o)).is_break() {
                break;
            }
        }
        order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::two_level::{slot_image, slot_offset};

    fn in_order(v: &View<'_>) -> (usize, Vec<(Vec<u8>, u64)>) {
        let mut seen = Vec::new();
        let count = v.for_each_in_order(|k, x| {
            seen.push((k.to_vec(), x));
            ControlFlow::Continue(())
        });
        (count, seen)
    }

    fn entries(n: &Node) -> Vec<(Vec<u8>, u64)> {
        n.entries.iter().map(|(k, x)| (k.to_vec(), *x)).collect()
    }

    /// An unsorted leaf whose slots hold keys out of order, one key in two
    /// slots (as a torn READ shows it), and a sorted leaf: the entries in
    /// order are the decoded node's, and `f` breaking stops the walk but
    /// not the count.
    #[test]
    fn the_entries_in_order_are_the_decoded_nodes() {
        let g = Geometry::new(1024, 8);
        let mut unsorted = Node::empty_unsorted_leaf(Fence::key(&[1; 8]), Fence::key(&[9; 8]));
        unsorted.version = 3;
        let mut b = unsorted.encode(&g);
        for (s, i) in [(0u16, 9u8), (1, 2), (5, 7), (6, 2), (20, 1), (39, 5)] {
            let k = [2, i, 0, 0, 0, 0, 0, 0];
            let o = slot_offset(&g, s);
            b[o..o + g.slot_bytes()].copy_from_slice(&slot_image(&g, 3, s, Some((&k, s as u64))));
        }
        let mut sorted = Node::empty(0, Fence::NegInf, Fence::PosInf);
        for i in 0..20u8 {
            sorted
                .entries
                .push((NodeKey::from_slice(&[3, i, 0, 0, 0, 0, 0, 0]), i as u64));
        }
        for img in [b, sorted.encode(&g)] {
            let d = Node::decode(&g, &img).unwrap();
            let v = View::new(&g, &img).unwrap();
            let want = entries(&d);
            assert_eq!(in_order(&v), (want.len(), want.clone()));
            let mut first = None;
            let count = v.for_each_in_order(|k, _| {
                first = Some(k.to_vec());
                ControlFlow::Break(())
            });
            assert_eq!((count, first), (want.len(), Some(want[0].0.clone())));
            let high = match &d.high {
                Fence::Key(h) => Some(h.as_slice()),
                _ => None,
            };
            assert_eq!(v.high_key(), high);
            assert_eq!(v.low_is_key(&[1; 8]), d.low == Fence::key(&[1; 8]));
            assert!(!v.head());
        }
    }
}
