//! One CS's DEX cache (§5): page frames, the mapping table, pointer
//! swizzling, the cooling map and path-aware sampling.
//!
//! Every field is touched only under the CS's mutex ([`super::DexCs::lock`]),
//! never across an await. States of a cached node:
//! - **hot**: reachable from the root frame through swizzled child slots
//!   (`Frame::parent` names the frame whose `swz` holds it), or the root, or
//!   an **orphan**: hot but unswizzled because its cached parent lost it in a
//!   refresh (listed in `Cache::orphans`, adopted by the next traversal that
//!   finds it through the mapping table, §5.2 "a hot page not swizzled here").
//! - **cooling**: unswizzled, clean, in one cooling bucket; touching it
//!   swizzles it back (second chance), the bucket's FIFO evicts it.
//!
//! Invariants (the path-aware rules of §5.3, which offloading relies on):
//! a node is cooled only when it has no swizzled children, is not pinned
//! (an I/O below it is in flight), not busy (a leaf split) and clean (a dirty
//! page is written back first, while it is still hot); so a node that is
//! not cached has no hot descendants except orphans, and the pool holds its
//! whole sub-tree's newest bytes, except below a split that this CS's
//! cached inner nodes do not show yet: a stale cached inner node can still
//! route to a leaf the pool already places under an uncached node, with a
//! miss in flight ([`IoRange`] keeps offloads away from those) or a hot
//! frame ([`Cache::invalidate`] repairs an offload that reached one).

use crate::node::{Fence, Node};
use dm_verbs::GlobalAddr;
use slab::Slab;
use std::cmp::Ordering;
use std::collections::HashMap;

/// No frame (an unswizzled slot, no parent).
pub(crate) const NONE: u32 = u32::MAX;
/// Entries per cooling bucket (64-byte bucket of 6 slots, §5.3).
const BUCKET_SLOTS: usize = 6;
/// Buckets probed for an eviction candidate (code: 8).
const PROBE_BUCKETS: usize = 8;

/// One cached node.
pub(crate) struct Frame {
    pub addr: GlobalAddr,
    pub node: Node,
    /// Inner nodes: per entry, the frame of the child (swizzled) or NONE.
    pub swz: Vec<u32>,
    pub parent: u32,
    pub cooling: bool,
    pub dirty: bool,
    /// Bumped by every change; a write-back clears `dirty` only if it wrote
    /// the newest generation.
    pub gen: u64,
    /// I/Os in flight below this node (fetch, scratch leaf, offload).
    pub pins: u32,
    /// A leaf split holds this leaf.
    pub busy: bool,
    /// A write-back of this page is in flight.
    pub flushing: bool,
}

/// A mapping-table entry (§5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// IO_FLAG: being fetched, processed as a scratch page, or offloaded,
    /// by the miss holding this token ([`Cache::io_token`]). Only that miss
    /// may clear it: between a miss's admission and the end of its clean-up
    /// (two critical sections), another thread can evict the new frame and
    /// start a miss of its own on the same node, whose flag the first
    /// miss's clean-up must leave alone (without tokens it cleared it, two
    /// misses then admitted two frames for one node and updates to one of
    /// them were lost: `dm-bench check --index dex --fabric loopback`, about
    /// 1 run in 100, 3 in 100 with leaf admission 1 and no offloading).
    Io(u64),
    At(u32),
}

/// A miss in flight (§5.2, §6): the missed node's key range as the cached
/// parent that routed to it saw it, and whether the miss was offloaded.
///
/// Offloading relies on the CS holding nothing newer than the pool below
/// the missed node. Two misses can overlap although the mapping table
/// flags each node separately: a leaf split grows its parent in the pool
/// (and may split it, `insert_parent`) before this CS's cached inner nodes
/// are refreshed, so for a while one cached inner node routes to a leaf
/// that the pool already places under another inner node, which is not
/// cached and misses. A scratch leaf (read, changed, written back whole)
/// in flight under the first while the second is offloaded lost the
/// offloaded change (`dm-bench check --index dex --fabric loopback --keys
/// 400 --ops 300`: 4 runs in 150). So an offload is refused while another
/// miss overlaps it ([`Cache::claim_offload`]), and a miss overlapping an
/// offload in flight waits ([`Cache::offload_over`]). Ranges from stale
/// parents are supersets of the nodes' current ranges (nodes only split),
/// so the checks err on the side of waiting.
pub(crate) struct IoRange {
    token: u64,
    low: Fence,
    high: Fence,
    offloaded: bool,
}

/// Counters of one CS's cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// Point and scan traversals that reached their leaf without I/O.
    pub hits: u64,
    /// Traversals that missed a node (fetch, scratch leaf or offload).
    pub misses: u64,
    /// Nodes admitted, cooled, evicted, and re-promoted from cooling.
    pub admitted: u64,
    pub cooled: u64,
    pub evicted: u64,
    pub second_chances: u64,
    /// Dirty pages written back (cooling, flush) and their bytes.
    pub write_backs: u64,
    pub write_back_bytes: u64,
    /// Inner nodes re-read because a route failed its fence check.
    pub refreshes: u64,
    /// Leaves read into a scratch copy (not admitted).
    pub scratch_leaves: u64,
    /// Offloads whose MS changed a leaf this CS held hot (reached through
    /// a stale cached inner node): their results were dropped and the
    /// operations retried through the cache ([`Cache::invalidate`]).
    pub hot_offloads: u64,
}

pub(crate) struct Cache {
    pub frames: Slab<Frame>,
    pub map: HashMap<u64, Slot>,
    pub root: u32,
    pub orphans: Vec<u32>,
    /// Misses in flight, by [`Slot::Io`] token (as many as the CS has
    /// operations waiting on the pool).
    io: Vec<IoRange>,
    /// Operations waiting for an offload in flight over the node they
    /// missed: while any waits, no new offload starts, so the offloads in
    /// flight drain and the waiters get through (without this, a miss of a
    /// node with a wide range could wait for ever behind a stream of
    /// offloads of small sub-trees inside it: `dm-bench check --index dex
    /// --fabric loopback --keys 1000 --ops 300 --cache-nodes 8`, an
    /// operation gave up after a million rounds in 1 run of about 600).
    /// Changed only through [`Cache::hold_offloads`] and
    /// [`Cache::release_offload_hold`].
    offload_holds: u32,
    cooling: Vec<Vec<u32>>,
    pub budget: usize,
    rng: u64,
    /// The last [`Slot::Io`] token handed out.
    io_tokens: u64,
    pub counters: CacheCounters,
}

impl Cache {
    pub fn new(budget: usize, seed: u64) -> Self {
        let buckets = (budget / 10).div_ceil(BUCKET_SLOTS).max(1);
        Cache {
            frames: Slab::new(),
            map: HashMap::new(),
            root: NONE,
            orphans: Vec::new(),
            io: Vec::new(),
            offload_holds: 0,
            cooling: vec![Vec::new(); buckets],
            budget,
            rng: seed | 1,
            io_tokens: 0,
            counters: CacheCounters::default(),
        }
    }

    /// xorshift64*: the sampling and admission draws.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A fresh token for a [`Slot::Io`] flag.
    pub fn io_token(&mut self) -> u64 {
        self.io_tokens += 1;
        self.io_tokens
    }

    /// A draw in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
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

    /// Drops every frame (repartition; the caller flushed the dirty ones).
    pub fn clear(&mut self) {
        let (budget, rng, counters) = (self.budget, self.rng, self.counters.clone());
        let holds = self.offload_holds;
        *self = Cache::new(budget, rng);
        self.counters = counters;
        self.offload_holds = holds;
    }

    /// Admits `node` at `addr` as a hot frame, swizzled into `parent` if
    /// that frame still has an entry pointing at `addr` (else an orphan).
    pub fn admit(&mut self, addr: GlobalAddr, node: Node, parent: u32) -> u32 {
        let swz = if node.is_leaf() {
            Vec::new()
        } else {
            vec![NONE; node.entries.len()]
        };
        let f = self.frames.insert(Frame {
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
        }) as u32;
        self.map.insert(addr.to_u64(), Slot::At(f));
        self.counters.admitted += 1;
        match self.entry_of(parent, addr) {
            Some(i) => self.swizzle(parent, i, f),
            None => self.orphans.push(f),
        }
        f
    }

    /// The entry of frame `p` whose child is `child`.
    pub fn entry_of(&self, p: u32, child: GlobalAddr) -> Option<usize> {
        let f = self.frames.get(p as usize)?;
        if f.node.is_leaf() {
            return None;
        }
        f.node.entries.iter().position(|e| e.1 == child.to_u64())
    }

    /// Makes frame `c` (hot: orphan or swizzled elsewhere, or cooling) the
    /// swizzled child of entry `i` of `p`.
    pub fn swizzle(&mut self, p: u32, i: usize, c: u32) {
        if self.frames[c as usize].cooling {
            self.take_cooling(c);
            self.counters.second_chances += 1;
        }
        self.unswizzle(c);
        self.orphans.retain(|&o| o != c);
        self.frames[p as usize].swz[i] = c;
        self.frames[c as usize].parent = p;
    }

    /// Makes the frame `c` the root frame (it stays hot, unswizzled).
    pub fn swizzle_as_root(&mut self, c: u32) {
        if self.frames[c as usize].cooling {
            self.take_cooling(c);
        }
        self.unswizzle(c);
        self.orphans.retain(|&o| o != c);
        self.root = c;
    }

    /// Clears the slot of `c` in its parent (if any).
    fn unswizzle(&mut self, c: u32) {
        let p = self.frames[c as usize].parent;
        if p != NONE {
            if let Some(pf) = self.frames.get_mut(p as usize) {
                for s in pf.swz.iter_mut().filter(|s| **s == c) {
                    *s = NONE;
                }
            }
            self.frames[c as usize].parent = NONE;
        }
    }

    fn bucket_of(&self, a: GlobalAddr) -> usize {
        let h = a.to_u64().wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 32) as usize % self.cooling.len()
    }

    fn take_cooling(&mut self, c: u32) {
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
    fn evict(&mut self, c: u32) {
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

    /// Replaces the content of the inner frame `x` with a fresh image,
    /// keeping the swizzled children it still has and making orphans of the
    /// ones it lost (§4: refresh a stale cached node).
    pub fn refresh(&mut self, x: u32, node: Node) {
        self.counters.refreshes += 1;
        let f = &mut self.frames[x as usize];
        if f.node.is_leaf() || node.is_leaf() {
            return; // leaves are owned: never replaced from the pool
        }
        let old: HashMap<u64, u32> = f
            .node
            .entries
            .iter()
            .zip(&f.swz)
            .filter(|(_, &s)| s != NONE)
            .map(|(e, &s)| (e.1, s))
            .collect();
        f.swz = node
            .entries
            .iter()
            .map(|e| old.get(&e.1).copied().unwrap_or(NONE))
            .collect();
        let kept: Vec<u32> = f.swz.iter().copied().filter(|&s| s != NONE).collect();
        f.node = node;
        for (_, c) in old {
            if !kept.contains(&c) {
                self.frames[c as usize].parent = NONE;
                self.orphans.push(c);
            }
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

/// Fences in key order: -inf < every key < +inf.
pub(crate) fn fcmp(a: &Fence, b: &Fence) -> Ordering {
    let rank = |f: &Fence| match f {
        Fence::NegInf => 0,
        Fence::Key(_) => 1,
        Fence::PosInf => 2,
    };
    match (a, b) {
        (Fence::Key(x), Fence::Key(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

fn fence_lt(a: &Fence, b: &Fence) -> bool {
    fcmp(a, b) == Ordering::Less
}

/// Whether the half-open key ranges `a` and `b` share a key.
fn meets(a: (&Fence, &Fence), b: (&Fence, &Fence)) -> bool {
    fence_lt(a.0, b.1) && fence_lt(b.0, a.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(x: u8) -> Fence {
        Fence::Key(vec![0, 0, 0, 0, 0, 0, 0, x])
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
