//! One CS's DEX cache (§5): page frames, the mapping table, pointer
//! swizzling, the cooling map and path-aware sampling. This file holds the
//! index structure (frames in a slab, the mapping table from global address
//! to frame, swizzled child slots, the refresh of a stale inner frame);
//! `eviction.rs` admission and eviction (§5.3); `inflight.rs` the
//! bookkeeping of misses and offloads in flight (§6).
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

use crate::keys8::{last_at_or_below, Keys8};
use crate::node::{Fence, Node};
use dm_runtime::hint::prefetch;
use dm_verbs::GlobalAddr;
use slab::Slab;
use std::collections::HashMap;

/// No frame (an unswizzled slot, no parent).
pub(crate) const NONE: u32 = u32::MAX;
/// Entries per cooling bucket (64-byte bucket of 6 slots, §5.3).
pub(super) const BUCKET_SLOTS: usize = 6;

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
    /// Lease mode: a write-through of this leaf failed or was cancelled, so
    /// the change it carried may be missing from the pool; the next
    /// operation on the leaf READs the page again before using it
    /// (`traverse::Step::Reread`).
    pub reread: bool,
    /// The entries as words when every key is 8 bytes (else empty), laid
    /// out for a search of two cache lines ([`Keys8`]), kept in step with
    /// `node` ([`Frame::sync_keys`] after a change of the keys,
    /// [`Frame::set_value`] after a change of a value). Issue 32: a search
    /// of the node's heap keys was a third of a loopback DEX get, a cache
    /// miss per probe; a binary search of `[key, value]` pairs still took
    /// one dependent miss per probe, about five a node.
    pub k8: Keys8,
}

impl Frame {
    /// Rebuilds [`Frame::k8`] from `node` (after every change of its keys).
    pub fn sync_keys(&mut self) {
        let entries = self
            .node
            .entries
            .iter()
            .map(|(k, v)| (<[u8; 8]>::try_from(&k[..]).ok().map(u64::from_be_bytes), *v));
        self.k8.rebuild(entries);
    }

    /// Entry `i`'s value changed in `node` (its keys did not): the same in
    /// [`Frame::k8`].
    pub fn set_value(&mut self, i: usize) {
        self.k8.set_value(i, self.node.entries[i].1);
    }

    /// Entry `i`'s value (a leaf's value, an inner node's child), from
    /// [`Frame::k8`] when it holds the entries.
    pub fn value(&self, i: usize) -> u64 {
        let v = match self.k8.value(i) {
            Some(v) => v,
            None => self.node.entries[i].1,
        };
        debug_assert_eq!(v, self.node.entries[i].1, "k8 out of step with the node");
        v
    }

    /// The entry of this frame's node whose key is the last at or below
    /// `key` ([`Keys8::find`]: `Ok` if it equals `key`, else `Err` of the
    /// insertion point), through [`Frame::k8`] when every key is 8 bytes.
    /// An inner node's equal separators resolve to the last, the child
    /// whose range holds `key`.
    pub fn find(&self, key: &[u8]) -> Result<usize, usize> {
        let r = match <[u8; 8]>::try_from(key) {
            Ok(k) if !self.k8.is_empty() => {
                // What the caller reads next, fetched beside the key block:
                // a leaf's value, an inner node's swizzled child slot.
                let next = |lo: usize| match self.node.is_leaf() {
                    true => prefetch(self.k8.value_ptr(lo)),
                    false => prefetch(self.swz.as_ptr().wrapping_add(lo)),
                };
                self.k8.find_with(u64::from_be_bytes(k), next)
            }
            _ => last_at_or_below(&self.node.entries, key, |e| e.0.as_slice()),
        };
        debug_assert_eq!(
            r,
            last_at_or_below(&self.node.entries, key, |e| e.0.as_slice()),
            "k8 out of step with the node"
        );
        r
    }
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
    pub(super) token: u64,
    pub(super) low: Fence,
    pub(super) high: Fence,
    pub(super) offloaded: bool,
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
    /// operations retried through the cache (`Cache::invalidate`).
    pub hot_offloads: u64,
    /// Lease mode: splits a dead CS cut before their separator went up,
    /// rolled forward (`miss::adopt_split`, `split::repair_route`).
    pub rolled_forward: u64,
    /// Lease mode: cached leaves READ again after a failed or cancelled
    /// write-through (`traverse::Step::Reread`).
    pub rereads: u64,
}

pub(crate) struct Cache {
    pub frames: Slab<Frame>,
    pub map: HashMap<u64, Slot>,
    pub root: u32,
    pub orphans: Vec<u32>,
    /// Misses in flight, by [`Slot::Io`] token (as many as the CS has
    /// operations waiting on the pool).
    pub(super) io: Vec<IoRange>,
    /// Operations waiting for an offload in flight over the node they
    /// missed: while any waits, no new offload starts, so the offloads in
    /// flight drain and the waiters get through (without this, a miss of a
    /// node with a wide range could wait for ever behind a stream of
    /// offloads of small sub-trees inside it: `dm-bench check --index dex
    /// --fabric loopback --keys 1000 --ops 300 --cache-nodes 8`, an
    /// operation gave up after a million rounds in 1 run of about 600).
    /// Changed only through [`Cache::hold_offloads`] and
    /// [`Cache::release_offload_hold`].
    pub(super) offload_holds: u32,
    pub(super) cooling: Vec<Vec<u32>>,
    pub budget: usize,
    pub(super) rng: u64,
    /// The last [`Slot::Io`] token handed out.
    pub(super) io_tokens: u64,
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

    /// Drops every frame (repartition; the caller flushed the dirty ones).
    pub fn clear(&mut self) {
        let (budget, rng, counters) = (self.budget, self.rng, self.counters.clone());
        let holds = self.offload_holds;
        *self = Cache::new(budget, rng);
        self.counters = counters;
        self.offload_holds = holds;
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
    pub(super) fn unswizzle(&mut self, c: u32) {
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
        f.sync_keys();
        for (_, c) in old {
            if !kept.contains(&c) {
                self.frames[c as usize].parent = NONE;
                self.orphans.push(c);
            }
        }
    }
}
