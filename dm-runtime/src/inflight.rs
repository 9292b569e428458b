//! The in-flight table: one slot per posted WR whose completion has not been
//! taken yet. `wr_id = generation << 32 | slot index`; the generation is
//! never 0, so 0 marks a free slot and a late completion for a freed or
//! reused slot is recognised and dropped.
//!
//! A free list threaded through the slots, like `slab`'s, but a freed slot
//! keeps its (empty) waiter and result in place: taking a slot writes its
//! generation and waiter, freeing it writes the generation and the link,
//! instead of moving a whole entry in and out.

use crate::waiter::Waiter;
use dm_verbs::{VerbError, VerbOutput};

/// A posted WR waiting for its completion. The slot owns the result buffer, so a
/// future dropped while its WR is in flight frees nothing the fabric still uses.
///
/// 64 bytes, one cache line: generation 4, free link 4, waiter 16, result
/// 40 (`size_of` is checked in the tests).
#[repr(align(64))]
pub(crate) struct InFlight {
    /// 0 while the slot is free.
    pub(crate) gen: u32,
    /// Next free slot while this one is free.
    next_free: u32,
    pub(crate) waiter: Waiter,
    pub(crate) result: Option<Result<VerbOutput, VerbError>>,
}

const NONE: u32 = u32::MAX;

pub(crate) struct InFlightTable {
    slots: Vec<InFlight>,
    free: u32,
    len: usize,
}

impl InFlightTable {
    pub(crate) fn new() -> Self {
        InFlightTable {
            slots: Vec::new(),
            free: NONE,
            len: 0,
        }
    }

    /// WRs in flight (or completed and not yet taken).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Takes a free slot for a WR of generation `gen` (never 0); its index.
    #[inline]
    pub(crate) fn insert(&mut self, gen: u32, waiter: Waiter) -> u32 {
        debug_assert_ne!(gen, 0);
        self.len += 1;
        if self.free != NONE {
            let k = self.free;
            let s = &mut self.slots[k as usize];
            self.free = s.next_free;
            s.gen = gen;
            s.waiter = waiter;
            debug_assert!(s.result.is_none());
            return k;
        }
        self.slots.push(InFlight {
            gen,
            next_free: NONE,
            waiter,
            result: None,
        });
        (self.slots.len() - 1) as u32
    }

    /// The slot `key` if it is taken.
    #[inline]
    pub(crate) fn get_mut(&mut self, key: u32) -> Option<&mut InFlight> {
        self.slots.get_mut(key as usize).filter(|s| s.gen != 0)
    }

    /// Frees slot `key` (taken), dropping its waiter and any result.
    #[inline]
    pub(crate) fn remove(&mut self, key: u32) {
        let s = &mut self.slots[key as usize];
        debug_assert_ne!(s.gen, 0);
        s.waiter = Waiter::ABANDONED;
        s.result = None;
        self.release(key);
    }

    /// Takes the result of slot `key` (taken) if it has arrived, freeing the
    /// slot; otherwise `None` and the slot stays.
    #[inline]
    pub(crate) fn take_result(&mut self, key: u32) -> Option<Result<VerbOutput, VerbError>> {
        let s = &mut self.slots[key as usize];
        let r = s.result.take()?;
        // The waiter is already `Waiter::ABANDONED` (delivery replaced it).
        debug_assert!(s.waiter.is_abandoned());
        self.release(key);
        Some(r)
    }

    /// Marks taken slot `key` free (its waiter and result already empty)
    /// and puts it at the head of the free list.
    #[inline]
    fn release(&mut self, key: u32) {
        let s = &mut self.slots[key as usize];
        s.gen = 0;
        s.next_free = self.free;
        self.free = key;
        self.len -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::InFlightTable;
    use crate::waiter::Waiter;
    use dm_verbs::VerbOutput;

    #[test]
    fn a_slot_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<super::InFlight>(), 64);
        assert_eq!(std::mem::size_of::<Waiter>(), 16);
    }

    #[test]
    fn slots_are_reused_and_stale_keys_are_free() {
        let mut t = InFlightTable::new();
        let a = t.insert(1, Waiter::Task(7));
        let b = t.insert(2, Waiter::Task(8));
        assert_eq!((a, b, t.len()), (0, 1, 2));
        // No result yet: nothing to take, the slot stays.
        assert!(t.take_result(a).is_none());
        let s = t.get_mut(a).unwrap();
        s.waiter = Waiter::ABANDONED;
        s.result = Some(Ok(VerbOutput::Atomic(5)));
        assert_eq!(t.take_result(a), Some(Ok(VerbOutput::Atomic(5))));
        assert!(t.get_mut(a).is_none(), "a taken result frees the slot");
        assert_eq!(t.len(), 1);
        // The freed slot is taken next, under the new generation.
        assert_eq!(t.insert(3, Waiter::ABANDONED), a);
        assert_eq!(t.get_mut(a).unwrap().gen, 3);
        t.remove(b);
        assert!(t.get_mut(b).is_none());
        assert_eq!(t.insert(4, Waiter::ABANDONED), b);
        assert!(t.get_mut(9).is_none());
        assert_eq!(t.len(), 2);
    }
}
