//! Misses and offloads in flight in one CS's DEX cache (§5.2, §6): the
//! tokens of [`Slot::Io`] flags, the key ranges of the misses in flight
//! ([`IoRange`]) with the rule that an offload needs its range to itself,
//! the holds of operations waiting for an offload, and the repair when an
//! offload changed a leaf this CS holds hot ([`Cache::invalidate`]).

use super::cache::{Cache, IoRange, Slot};
use super::range::meets;
use crate::node::Fence;
use dm_verbs::GlobalAddr;

impl Cache {
    /// A fresh token for a [`Slot::Io`] flag.
    pub fn io_token(&mut self) -> u64 {
        self.io_tokens += 1;
        self.io_tokens
    }

    /// An operation waits for an offload in flight over the node it missed:
    /// no new offload starts until it releases the hold.
    pub fn hold_offloads(&mut self) {
        self.offload_holds += 1;
    }

    /// Releases a hold taken with [`Cache::hold_offloads`].
    pub fn release_offload_hold(&mut self) {
        debug_assert!(self.offload_holds > 0, "an offload hold released twice");
        self.offload_holds -= 1;
    }

    /// Drops the cooling copy of `a` if there is one (offload returned it:
    /// the MS changed the page, §6.2 step 5) and returns true. A hot copy
    /// (reached through a cached inner node that a split of this CS has
    /// left stale, while the pool routes the offload to the same leaf: a
    /// hot frame under an uncached node, which the path-aware rules alone
    /// do not exclude) is the leaf's owner copy: it is marked dirty, so
    /// that its write-back overwrites whatever the MS wrote, and false is
    /// returned (the caller drops the MS's result and retries through the
    /// cache). Until that write-back no one reads the pool's copy: this
    /// CS reaches the leaf through its frame, other CSs never touch it.
    pub fn invalidate(&mut self, a: GlobalAddr) -> bool {
        match self.map.get(&a.to_u64()) {
            Some(Slot::At(c)) if self.frames[*c as usize].cooling => {
                let c = *c;
                let b = self.bucket_of(self.frames[c as usize].addr);
                self.cooling[b].retain(|&x| x != c);
                self.evict(c);
                true
            }
            Some(Slot::At(c)) => {
                let f = &mut self.frames[*c as usize];
                f.dirty = true;
                f.gen += 1;
                self.counters.hot_offloads += 1;
                false
            }
            _ => true,
        }
    }

    /// Records the miss `token` of the node covering `[low, high)`.
    pub fn start_io(&mut self, token: u64, low: Fence, high: Fence) {
        self.io.push(IoRange {
            token,
            low,
            high,
            offloaded: false,
        });
    }

    /// Forgets the miss `token` (its clean-up).
    pub fn end_io(&mut self, token: u64) {
        self.io.retain(|r| r.token != token);
    }

    /// Whether an offloaded miss in flight meets `[low, high)`: a new miss
    /// there must wait for it (see [`IoRange`]).
    pub fn offload_over(&self, low: &Fence, high: &Fence) -> bool {
        self.io
            .iter()
            .any(|r| r.offloaded && meets((&r.low, &r.high), (low, high)))
    }

    /// Marks the miss `token` over `[low, high)` offloaded if nothing
    /// below it may be newer in this CS than in the pool: no hot orphan and
    /// no other miss in flight meets the range (see [`IoRange`]), and no
    /// operation waits for an offload ([`Cache::offload_holds`]); false
    /// otherwise (the caller fetches instead). `decide` is the cost model's
    /// vote, asked only when the range is free.
    pub fn claim_offload(
        &mut self,
        token: u64,
        low: &Fence,
        high: &Fence,
        decide: impl FnOnce() -> bool,
    ) -> bool {
        if self.offload_holds > 0
            || self.orphan_in(low, high)
            || self
                .io
                .iter()
                .any(|r| r.token != token && meets((&r.low, &r.high), (low, high)))
            || !decide()
        {
            return false;
        }
        for r in self.io.iter_mut().filter(|r| r.token == token) {
            r.offloaded = true;
        }
        true
    }

    /// Whether a hot orphan frame's range meets `[low, high)`.
    pub fn orphan_in(&self, low: &Fence, high: &Fence) -> bool {
        self.orphans.iter().any(|&o| {
            let n = &self.frames[o as usize].node;
            meets((&n.low, &n.high), (low, high))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dex::cache::NONE;
    use crate::node::Node;

    fn k(x: u8) -> Fence {
        Fence::key(&[0, 0, 0, 0, 0, 0, 0, x])
    }

    /// The race of [`IoRange`] played by hand: a scratch leaf `[30, 40)` in
    /// flight under one cached inner node while the inner node `[20, 60)`
    /// that the pool now places it under misses.
    #[test]
    fn an_offload_waits_for_overlapping_misses_and_blocks_new_ones() {
        let mut c = Cache::new(16, 1);
        let (leaf, inner) = (c.io_token(), c.io_token());
        c.start_io(leaf, k(30), k(40));
        c.start_io(inner, k(20), k(60));
        let asked = std::cell::Cell::new(0);
        let vote = || {
            asked.set(asked.get() + 1);
            true
        };
        assert!(!c.claim_offload(inner, &k(20), &k(60), vote));
        assert_eq!(
            asked.get(),
            0,
            "the cost model is asked only for a free range"
        );
        c.end_io(leaf);
        assert!(!c.offload_over(&k(30), &k(40)), "nothing offloaded yet");
        assert!(c.claim_offload(inner, &k(20), &k(60), vote));
        assert_eq!(asked.get(), 1);
        // While it is in flight, misses that meet its range wait; others do not.
        assert!(c.offload_over(&k(30), &k(40)));
        assert!(c.offload_over(&Fence::NegInf, &k(21)));
        assert!(c.offload_over(&k(59), &Fence::PosInf));
        assert!(
            !c.offload_over(&k(60), &Fence::PosInf),
            "fences are half-open"
        );
        assert!(!c.offload_over(&Fence::NegInf, &k(20)));
        c.end_io(inner);
        assert!(!c.offload_over(&k(30), &k(40)));
    }

    /// An offload that changed a leaf this CS holds hot: the frame is the
    /// owner copy, so it turns dirty (its write-back will overwrite the
    /// MS's change) and the caller is told to retry; a cooling copy is
    /// simply dropped.
    #[test]
    fn invalidate_drops_a_cooling_copy_and_dirties_a_hot_one() {
        let mut c = Cache::new(16, 1);
        let (hot, cold) = (GlobalAddr::new(0, 4096), GlobalAddr::new(0, 8192));
        let h = c.admit(hot, Node::empty(0, k(10), k(20)), NONE);
        let x = c.admit(cold, Node::empty(0, k(20), k(30)), NONE);
        c.cool(x);
        assert!(c.invalidate(cold));
        assert_eq!(c.map.get(&cold.to_u64()), None, "the cooling copy is gone");
        let gen = c.frames[h as usize].gen;
        assert!(!c.invalidate(hot));
        let f = &c.frames[h as usize];
        assert!(f.dirty && f.gen == gen + 1 && !f.cooling);
        assert_eq!(c.counters.hot_offloads, 1);
        assert!(
            c.invalidate(GlobalAddr::new(0, 12288)),
            "not cached: nothing to do"
        );
    }

    #[test]
    fn the_cost_model_can_still_say_no() {
        let mut c = Cache::new(16, 1);
        let t = c.io_token();
        c.start_io(t, k(20), k(60));
        assert!(!c.claim_offload(t, &k(20), &k(60), || false));
        assert!(!c.offload_over(&k(30), &k(40)));
    }

    /// While an operation waits for an offload, no new one starts.
    #[test]
    fn a_waiting_operation_holds_new_offloads_back() {
        let mut c = Cache::new(16, 1);
        let t = c.io_token();
        c.start_io(t, k(20), k(60));
        c.offload_holds = 1;
        assert!(!c.claim_offload(t, &k(20), &k(60), || true));
        c.offload_holds = 0;
        assert!(c.claim_offload(t, &k(20), &k(60), || true));
    }
}
