//! DEX's cached traversal (§4, §5.2) and its driver: a traversal runs under
//! the CS's cache mutex without I/O (`traverse`), from the CS-local root
//! through swizzled child slots to the leaf, where it applies the operation.
//! When it needs the pool it marks what it needs (the missed child in the
//! mapping table as in flight, its parent pinned, see `miss.rs`; or the leaf
//! busy for a split, see `split.rs`), drops the mutex and returns a `Step`;
//! the async driver (`point`) does the I/O and starts over, as the paper's
//! restarts do. Stale cached inner nodes are re-read one at a time
//! (`refresh`, §4's lazy coherence).

use super::cache::{Cache, Slot, NONE};
use super::miss::{Miss, MissOut};
use super::op::{apply, Change, Op, Res};
use super::range::{child_range, covers, within};
use super::write_back::Through;
use super::{DexCs, DexTree};
use crate::keys8::child_at;
use crate::node::Fence;
use crate::tree::TreeError;
use dm_runtime::yield_now;
use dm_verbs::GlobalAddr;

/// Restarts of one operation before its route is declared broken.
const MAX_ROUNDS: u32 = 1_000_000;

enum Step {
    Done(Res),
    /// In flight or busy: yield and start over.
    Wait,
    /// The missed node's range meets an offload in flight: yield and start
    /// over, holding new offloads back until this operation gets past
    /// ([`Cache::hold_offloads`]).
    WaitOffload,
    /// Re-read this inner node (NULL: the root pointer) and start over.
    Refresh(GlobalAddr),
    /// A cached inner node's child is not cached: the miss, flagged in
    /// flight, is in the caller's `missed` (apart from the step, so that
    /// the step every round returns is a few words and moves without a
    /// `memcpy`: issue 32).
    Miss,
    /// The cached leaf (now busy) must split.
    Split(u32),
    /// A leaf outside the CS's partition.
    Foreign(GlobalAddr),
    /// Lease mode: the operation changed a cached leaf, now flushing; its
    /// page must be written through before the result is returned.
    Through(Box<(Through, Res)>),
    /// Lease mode: the cached leaf (now busy) lost a write-through; READ
    /// its page again (`Frame::reread`) and start over.
    Reread(u32, GlobalAddr),
}

/// The cached part of one operation (§5.2), under the CS's mutex. In
/// lease mode (`lease`) a leaf being written through is waited for by
/// every operation (gets too: a reader sees only what is in the pool), and
/// a change starts the leaf's write-through.
fn traverse(
    st: &mut Cache,
    key: &[u8],
    op: &Op,
    (cap, lease): (usize, bool),
    part: &(Fence, Fence),
    visited: &mut u64,
    missed: &mut Option<Miss>,
) -> Step {
    let mut cur = st.root;
    if cur == NONE {
        return Step::Refresh(GlobalAddr::NULL);
    }
    loop {
        *visited += 1;
        let f = &st.frames[cur as usize];
        if f.busy {
            return Step::Wait;
        }
        if !covers(&f.node, key) {
            // Reached through a stale parent (or the root grew).
            return Step::Refresh(match f.parent {
                NONE => GlobalAddr::NULL,
                p => st.frames[p as usize].addr,
            });
        }
        if f.node.is_leaf() {
            if !within(&f.node.low, &f.node.high, part) {
                return Step::Foreign(f.addr);
            }
            let f = &mut st.frames[cur as usize];
            if lease && f.flushing {
                return Step::Wait;
            }
            if f.reread {
                f.busy = true;
                return Step::Reread(cur, f.addr);
            }
            let at = f.find(key);
            if let Op::Get = op {
                // As `apply` answers it, the value read beside its key.
                st.counters.hits += 1;
                return Step::Done(Res::Get(at.ok().map(|i| f.value(i))));
            }
            return match apply(&mut f.node, at, cap, key, op) {
                None => {
                    f.busy = true;
                    Step::Split(cur)
                }
                Some((r, change)) => {
                    let mut through = None;
                    if change.any() {
                        match (change, at) {
                            (Change::Keys, _) => f.sync_keys(),
                            (_, Ok(i)) => f.set_value(i),
                            _ => {}
                        }
                        f.dirty = true;
                        f.gen += 1;
                        if lease {
                            f.flushing = true;
                            through = Some(Through::of(cur, f));
                        }
                    }
                    st.counters.hits += 1;
                    match through {
                        Some(w) => Step::Through(Box::new((w, r))),
                        None => Step::Done(r),
                    }
                }
            };
        }
        let i = child_at(f.find(key));
        if f.swz[i] != NONE {
            cur = f.swz[i];
            continue;
        }
        let child = GlobalAddr::from_u64(f.value(i));
        match st.map.get(&child.to_u64()).copied() {
            Some(Slot::Io(_)) => return Step::Wait,
            Some(Slot::At(c)) => {
                // Cooling (second chance) or a hot orphan: swizzle it here.
                st.swizzle(cur, i, c);
                cur = c;
            }
            None => {
                let (low, high) = child_range(&f.node, i);
                if st.offload_over(&low, &high) {
                    return Step::WaitOffload;
                }
                let (parent_addr, level) = (f.addr, f.node.level - 1);
                let token = st.io_token();
                st.start_io(token, low.clone(), high.clone());
                *missed = Some(Miss {
                    parent: cur,
                    parent_addr,
                    child,
                    level,
                    low,
                    high,
                    token,
                });
                st.map.insert(child.to_u64(), Slot::Io(token));
                st.frames[cur as usize].pins += 1;
                st.counters.misses += 1;
                return Step::Miss;
            }
        }
    }
}

/// Releases an operation's hold on new offloads ([`Step::WaitOffload`])
/// however the operation ends.
struct HoldGuard<'a> {
    c: &'a DexCs,
    held: bool,
}

impl Drop for HoldGuard<'_> {
    fn drop(&mut self) {
        if self.held {
            self.c.lock().release_offload_hold();
        }
    }
}

impl DexTree {
    /// The key range CS `cs` owns.
    fn partition(&self, cs: u16) -> (Fence, Fence) {
        self.with_bounds(|b| b.parts[cs as usize].clone())
    }

    /// Runs `op` on `key` against CS `c`'s cache (the caller entered it).
    pub(crate) async fn point(&self, c: &DexCs, key: &[u8], op: Op) -> Result<Res, TreeError> {
        let cap = self.t.leaf_capacity();
        let lease = self.lease_ns.is_some();
        let mut offload_ok = self.cl.cfg.offload;
        let mut hold = HoldGuard { c, held: false };
        // Lease mode: since when this operation has been refreshing.
        let mut stuck_since = None;
        for _ in 0..MAX_ROUNDS {
            let mut visited = 0;
            let mut missed = None;
            let step = {
                let mut st = c.peek().await;
                // The partition from this handle's copy of the bounds
                // (fixed while this operation has the CS entered).
                let step = self.with_bounds(|b| {
                    let part = &b.parts[c.id as usize];
                    let cfg = (cap, lease);
                    traverse(&mut st, key, &op, cfg, part, &mut visited, &mut missed)
                });
                let waits = matches!(step, Step::WaitOffload);
                if waits != hold.held {
                    hold.held = waits;
                    if waits {
                        st.hold_offloads();
                    } else {
                        st.release_offload_hold();
                    }
                }
                step
            };
            if !matches!(step, Step::Wait | Step::WaitOffload) {
                c.stamp();
            }
            // The local search of each cached node (§6.1's T_search), which
            // posts no verb: without it a cache hit costs nothing on sim.
            dm_runtime::charge_cpu(visited * self.cl.cfg.search_ns);
            match step {
                Step::Done(r) => return Ok(r),
                Step::Through(wr) => {
                    let (w, r) = *wr;
                    self.write_through(c, w).await?;
                    return Ok(r);
                }
                Step::Wait | Step::WaitOffload => yield_now().await,
                Step::Refresh(a) => self.refresh_route(c, a, key, &mut stuck_since).await?,
                Step::Split(lf) => self.split_cached(c, lf).await?,
                Step::Reread(lf, a) => self.reread(c, lf, a).await?,
                Step::Foreign(a) => return Err(TreeError::Corrupt(a)),
                // (`traverse` sets `missed` whenever it returns `Miss`.)
                Step::Miss => {
                    let Some(m) = missed.take() else { continue };
                    // A miss awaits: it takes its own copy of the partition.
                    let part = self.partition(c.id);
                    match self.miss(c, key, &op, m, offload_ok, &part).await? {
                        MissOut::Done(r) => return Ok(r),
                        MissOut::Retry => {}
                        MissOut::NoOffload => offload_ok = false,
                        MissOut::Refresh(a) => {
                            self.refresh_route(c, a, key, &mut stuck_since).await?
                        }
                    }
                }
            }
        }
        Err(TreeError::Corrupt(GlobalAddr::NULL))
    }

    /// READs the page of the cached leaf `lf` at `a` again after a lost
    /// write-through (`Frame::reread`, lease mode: every acknowledged change
    /// is in the pool) and replaces the frame's content; the frame is busy
    /// meanwhile. On an error it stays marked, for the next operation.
    async fn reread(&self, c: &DexCs, lf: u32, a: GlobalAddr) -> Result<(), TreeError> {
        // Frees the frame however the READ ends (also when cancelled).
        let _busy = super::split::BusyGuard(c, lf);
        let node = self.t.read_node(a).await?;
        let mut st = c.locked().await;
        st.counters.rereads += 1;
        if let Some(f) = st.frames.get_mut(lf as usize) {
            if f.addr == a && node.is_leaf() {
                f.node = node;
                f.sync_keys();
                f.gen += 1;
                f.reread = false;
            }
        }
        Ok(())
    }

    /// [`DexTree::refresh`] of `a` for an operation on `key`; in lease
    /// mode, once the operation has been refreshing (since `since`) for
    /// longer than a lease, the route is repaired first
    /// ([`DexTree::repair_route`]: a split cut by a dead CS).
    async fn refresh_route(
        &self,
        c: &DexCs,
        a: GlobalAddr,
        key: &[u8],
        since: &mut Option<u64>,
    ) -> Result<(), TreeError> {
        if let Some(lease) = self.lease_ns {
            let now = dm_runtime::now_ns();
            if now - *since.get_or_insert(now) > lease {
                *since = None;
                let n = self.repair_route(key).await?;
                c.lock().counters.rolled_forward += n as u64;
            }
        }
        self.refresh(c, a).await
    }

    /// Re-reads the inner node at `a` into its frame, or (NULL) the root
    /// pointer and the root (§4: refresh from the root, lazily, one node at
    /// a time). Yields after, so that a split in progress can finish.
    pub(super) async fn refresh(&self, c: &DexCs, a: GlobalAddr) -> Result<(), TreeError> {
        if a.is_null() {
            let rp = self.t.read_root().await?;
            let node = self.t.read_node(rp).await?;
            let mut st = c.locked().await;
            match st.map.get(&rp.to_u64()).copied() {
                Some(Slot::At(x)) => {
                    if x != st.root {
                        let old = st.root;
                        st.swizzle_as_root(x);
                        if old != NONE {
                            st.orphans.push(old);
                        }
                    }
                    st.refresh(x, node);
                }
                Some(Slot::Io(_)) => {}
                None => {
                    let old = st.root;
                    let x = st.admit(rp, node, NONE);
                    st.swizzle_as_root(x);
                    if old != NONE {
                        st.orphans.push(old);
                    }
                }
            }
        } else {
            let node = self.t.read_node(a).await?;
            let mut st = c.locked().await;
            if let Some(Slot::At(x)) = st.map.get(&a.to_u64()).copied() {
                st.refresh(x, node);
            }
        }
        yield_now().await;
        Ok(())
    }
}
