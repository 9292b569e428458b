//! Admission and eviction in one CS's DEX cache (§5.3): a missed node is
//! admitted hot and swizzled into its cached parent; path-aware sampling
//! picks a frame without swizzled children to cool; a cooling frame sits
//! in a bucket of the cooling map (a 6-entry FIFO) until it is touched
//! again (second chance, [`Cache::swizzle`]) or the bucket's FIFO evicts it.

use super::cache::{Cache, Frame, Slot, BUCKET_SLOTS, NONE};
use crate::node::Node;
use dm_verbs::GlobalAddr;

/// Buckets probed for an eviction candidate (code: 8).
const PROBE_BUCKETS: usize = 8;

impl Cache {
    /// xorshift64*: the sampling and admission draws.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A draw in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Admits `node` at `addr` as a hot frame, swizzled into `parent` if
    /// that frame still has an entry pointing at `addr` (else an orphan).
    pub fn admit(&mut self, addr: GlobalAddr, node: Node, parent: u32) -> u32 {
        let swz = if node.is_leaf() {
            Vec::new()
        } else {
            vec![NONE; node.entries.len()]
        };
        let mut frame = Frame {
            addr,
            node,
            swz,
            parent: NONE,
            cooling: false,
            dirty: false,
            gen: 0,
            pins: 0,
            busy: false,
            flushing: false,
            reread: false,
            k8: Default::default(),
        };
        frame.sync_keys();
        let f = self.frames.insert(frame) as u32;
        self.map.insert(addr.to_u64(), Slot::At(f));
        self.counters.admitted += 1;
        match self.entry_of(parent, addr) {
            Some(i) => self.swizzle(parent, i, f),
            None => self.orphans.push(f),
        }
        f
    }

    pub(super) fn bucket_of(&self, a: GlobalAddr) -> usize {
        let h = a.to_u64().wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 32) as usize % self.cooling.len()
    }

    pub(super) fn take_cooling(&mut self, c: u32) {
        let b = self.bucket_of(self.frames[c as usize].addr);
        self.cooling[b].retain(|&x| x != c);
        self.frames[c as usize].cooling = false;
    }

    /// Frame `c` may cool: no swizzled children, no I/O below, not busy,
    /// not being written back, not the root, hot.
    pub fn may_cool(&self, c: u32) -> bool {
        let f = &self.frames[c as usize];
        c != self.root
            && !f.cooling
            && f.pins == 0
            && !f.busy
            && !f.flushing
            && f.swz.iter().all(|&s| s == NONE)
    }

    /// Cools the clean frame `c` (§5.3): unswizzle it and put it at the head
    /// of its cooling bucket, evicting the bucket's oldest page when full.
    pub fn cool(&mut self, c: u32) {
        debug_assert!(self.may_cool(c) && !self.frames[c as usize].dirty);
        self.unswizzle(c);
        self.orphans.retain(|&o| o != c);
        self.frames[c as usize].cooling = true;
        self.counters.cooled += 1;
        let b = self.bucket_of(self.frames[c as usize].addr);
        self.cooling[b].insert(0, c);
        if self.cooling[b].len() > BUCKET_SLOTS {
            let old = self.cooling[b].pop().unwrap();
            self.evict(old);
        }
    }

    /// Drops the cooling frame `c` (no I/O: it is clean).
    pub(super) fn evict(&mut self, c: u32) {
        let f = self.frames.remove(c as usize);
        debug_assert!(f.cooling && !f.dirty);
        self.map.remove(&f.addr.to_u64());
        self.counters.evicted += 1;
    }

    /// Evicts the oldest page of the first non-empty bucket among up to 8
    /// from a random one; false if they are all empty.
    pub fn evict_one(&mut self) -> bool {
        let n = self.cooling.len();
        let start = self.next_u64() as usize % n;
        for k in 0..PROBE_BUCKETS.min(n) {
            let b = (start + k) % n;
            if let Some(c) = self.cooling[b].pop() {
                self.evict(c);
                return true;
            }
        }
        false
    }

    /// Path-aware sampling (§5.3): a random hot frame hands the cooling
    /// down to one of its swizzled children until a frame without any;
    /// that frame if it may cool.
    pub fn sample(&mut self) -> Option<u32> {
        let cap = self.frames.capacity().max(1);
        let mut c = NONE;
        for _ in 0..4 {
            let i = (self.next_u64() % cap as u64) as u32;
            if self.frames.get(i as usize).is_some_and(|f| !f.cooling) {
                c = i;
                break;
            }
        }
        if c == NONE {
            return None;
        }
        loop {
            let f = &self.frames[c as usize];
            let kids: Vec<u32> = f.swz.iter().copied().filter(|&s| s != NONE).collect();
            if kids.is_empty() {
                break;
            }
            c = kids
                [(f.addr.to_u64().wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize % kids.len()];
        }
        self.may_cool(c).then_some(c)
    }
}
