//! DEX's operations (§4, §5.2, §6): the cached traversal from the CS-local
//! root, misses (lazy leaf admission, fetch, cost-aware offload), leaf
//! splits, and scans as repeated lookups (§5.4).
//!
//! A traversal runs under the CS's cache mutex without I/O (`traverse`).
//! When it needs the pool it marks what it needs (the missed child in the
//! mapping table as in flight, its parent pinned; or the leaf busy for a
//! split), drops the mutex and returns a `Step`; the async driver (`point`)
//! does the I/O and starts over, as the paper's restarts do.

use super::cache::{fcmp, Cache, Slot, NONE};
use super::{ms, DexCs, DexTree, RPC_DEX};
use crate::node::{Fence, Node};
use crate::search::Found;
use crate::tree::TreeError;
use dm_runtime::{now_ns, rpc, write, yield_now};
use dm_verbs::{GlobalAddr, VerbError};
use std::cmp::Ordering;
use std::sync::atomic::Ordering::SeqCst;

/// Restarts of one operation before its route is declared broken.
const MAX_ROUNDS: u32 = 1_000_000;

#[derive(Clone, Debug)]
pub(crate) enum Op {
    Get,
    Put {
        value: u64,
        may_insert: bool,
    },
    Remove,
    /// Up to `max` entries from the key, and the leaf's high fence.
    Scan {
        max: usize,
    },
}

pub(crate) enum Res {
    Get(Option<u64>),
    Put(bool),
    Remove(bool),
    Scan(Vec<(Vec<u8>, u64)>, Fence),
}

/// Runs `op` on leaf `n`; `None` when an insert needs a split first.
/// The bool says whether `n` changed.
fn apply(n: &mut Node, cap: usize, key: &[u8], op: &Op) -> Option<(Res, bool)> {
    Some(match op {
        Op::Get => (Res::Get(n.find(key).ok().map(|i| n.entries[i].1)), false),
        Op::Put { value, may_insert } => match n.find(key) {
            Ok(i) => {
                n.entries[i].1 = *value;
                (Res::Put(true), true)
            }
            Err(_) if !may_insert => (Res::Put(false), false),
            Err(i) => {
                if n.entries.len() >= cap {
                    return None;
                }
                n.entries.insert(i, (key.to_vec(), *value));
                (Res::Put(true), true)
            }
        },
        Op::Remove => match n.find(key) {
            Ok(i) => {
                n.entries.remove(i);
                (Res::Remove(true), true)
            }
            Err(_) => (Res::Remove(false), false),
        },
        Op::Scan { max } => {
            let i = n.find(key).unwrap_or_else(|i| i);
            let v = n.entries[i..].iter().take(*max).cloned().collect();
            (Res::Scan(v, n.high.clone()), false)
        }
    })
}

fn covers(n: &Node, key: &[u8]) -> bool {
    !n.below_low(key) && !n.beyond_high(key)
}

/// `[low, high)` lies inside `[plo, phi)`.
fn within(low: &Fence, high: &Fence, part: &(Fence, Fence)) -> bool {
    fcmp(&part.0, low) != Ordering::Greater && fcmp(high, &part.1) != Ordering::Greater
}

/// The range of child `i` of the inner node `n` (see [`crate::node`]).
fn child_range(n: &Node, i: usize) -> (Fence, Fence) {
    let low = if i == 0 {
        n.low.clone()
    } else {
        Fence::Key(n.entries[i].0.clone())
    };
    let high = match n.entries.get(i + 1) {
        Some(e) => Fence::Key(e.0.clone()),
        None => n.high.clone(),
    };
    (low, high)
}

fn child_index(n: &Node, key: &[u8]) -> usize {
    match n.find(key) {
        Ok(i) => i,
        Err(0) => 0,
        Err(i) => i - 1,
    }
}

/// A missed child: in flight in the mapping table, its parent pinned.
pub(crate) struct Miss {
    parent: u32,
    parent_addr: GlobalAddr,
    child: GlobalAddr,
    level: u8,
    low: Fence,
    high: Fence,
    /// The token of the in-flight flag this miss set on `child`.
    token: u64,
}

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
    Miss(Miss),
    /// The cached leaf (now busy) must split.
    Split(u32),
    /// A leaf outside the CS's partition.
    Foreign(GlobalAddr),
}

/// The cached part of one operation (§5.2), under the CS's mutex.
fn traverse(
    st: &mut Cache,
    key: &[u8],
    op: &Op,
    cap: usize,
    part: &(Fence, Fence),
    visited: &mut u64,
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
            return match apply(&mut f.node, cap, key, op) {
                None => {
                    f.busy = true;
                    Step::Split(cur)
                }
                Some((r, changed)) => {
                    if changed {
                        f.dirty = true;
                        f.gen += 1;
                    }
                    st.counters.hits += 1;
                    Step::Done(r)
                }
            };
        }
        let i = child_index(&f.node, key);
        if f.swz[i] != NONE {
            cur = f.swz[i];
            continue;
        }
        let child = GlobalAddr::from_u64(f.node.entries[i].1);
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
                let m = Miss {
                    parent: cur,
                    parent_addr,
                    child,
                    level,
                    low,
                    high,
                    token,
                };
                st.map.insert(child.to_u64(), Slot::Io(token));
                st.frames[cur as usize].pins += 1;
                st.counters.misses += 1;
                return Step::Miss(m);
            }
        }
    }
}

enum MissOut {
    Done(Res),
    Retry,
    /// The MS sent the operation back: retry without offloading.
    NoOffload,
    Refresh(GlobalAddr),
}

/// Clears a miss's in-flight flag and pin, however the miss ends.
struct MissGuard<'a> {
    c: &'a DexCs,
    parent: u32,
    child: GlobalAddr,
    token: u64,
}

impl Drop for MissGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.c.lock();
        st.end_io(self.token);
        if st.map.get(&self.child.to_u64()) == Some(&Slot::Io(self.token)) {
            st.map.remove(&self.child.to_u64());
        }
        if let Some(p) = st.frames.get_mut(self.parent as usize) {
            p.pins -= 1;
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

/// Clears a leaf's busy flag when its split ends.
struct BusyGuard<'a>(&'a DexCs, u32);

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        if let Some(f) = self.0.lock().frames.get_mut(self.1 as usize) {
            f.busy = false;
        }
    }
}

impl DexTree {
    /// The key range CS `cs` owns.
    fn partition(&self, cs: u16) -> (Fence, Fence) {
        let b = self.cl.bounds();
        let i = cs as usize;
        let low = match i {
            0 => Fence::NegInf,
            _ => b
                .get(i - 1)
                .map_or(Fence::PosInf, |k| Fence::Key(k.clone())),
        };
        let high = b.get(i).map_or(Fence::PosInf, |k| Fence::Key(k.clone()));
        (low, high)
    }

    /// Runs `op` on `key` against CS `c`'s cache (the caller entered it).
    pub(crate) async fn point(&self, c: &DexCs, key: &[u8], op: Op) -> Result<Res, TreeError> {
        let part = self.partition(c.id);
        let cap = self.t.leaf_capacity();
        let mut offload_ok = self.cl.cfg.offload;
        let mut hold = HoldGuard { c, held: false };
        for _ in 0..MAX_ROUNDS {
            let mut visited = 0;
            let step = {
                let mut st = c.peek().await;
                let step = traverse(&mut st, key, &op, cap, &part, &mut visited);
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
                Step::Wait | Step::WaitOffload => yield_now().await,
                Step::Refresh(a) => self.refresh(c, a).await?,
                Step::Split(lf) => self.split_cached(c, lf).await?,
                Step::Foreign(a) => return Err(TreeError::Corrupt(a)),
                Step::Miss(m) => match self.miss(c, key, &op, m, offload_ok, &part).await? {
                    MissOut::Done(r) => return Ok(r),
                    MissOut::Retry => {}
                    MissOut::NoOffload => offload_ok = false,
                    MissOut::Refresh(a) => self.refresh(c, a).await?,
                },
            }
        }
        Err(TreeError::Corrupt(GlobalAddr::NULL))
    }

    /// Re-reads the inner node at `a` into its frame, or (NULL) the root
    /// pointer and the root (§4: refresh from the root, lazily, one node at
    /// a time). Yields after, so that a split in progress can finish.
    async fn refresh(&self, c: &DexCs, a: GlobalAddr) -> Result<(), TreeError> {
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

    /// A miss below the cached path (§5.2, §6).
    async fn miss(
        &self,
        c: &DexCs,
        key: &[u8],
        op: &Op,
        m: Miss,
        offload_ok: bool,
        part: &(Fence, Fence),
    ) -> Result<MissOut, TreeError> {
        let _g = MissGuard {
            c,
            parent: m.parent,
            child: m.child,
            token: m.token,
        };
        let cfg = &self.cl.cfg;
        if m.level == 0 {
            let admit = c.locked().await.unit() < cfg.leaf_admission;
            if admit {
                self.make_room(c).await?;
            }
            let mut n = self.fetch(c, m.child).await?;
            if n.level != 0 || n.low != m.low || n.high != m.high {
                return Ok(MissOut::Refresh(m.parent_addr));
            }
            if admit {
                let mut st = c.locked().await;
                st.map.remove(&m.child.to_u64());
                st.admit(m.child, n, m.parent);
                return Ok(MissOut::Retry);
            }
            // Not admitted: a scratch copy, written back at once if changed.
            c.locked().await.counters.scratch_leaves += 1;
            return match apply(&mut n, self.t.leaf_capacity(), key, op) {
                Some((r, changed)) => {
                    if changed {
                        self.write_page(c, m.child, &n).await?;
                    }
                    Ok(MissOut::Done(r))
                }
                None => {
                    self.split_leaf(c, m.child, n, None, m.parent_addr).await?;
                    Ok(MissOut::Retry)
                }
            };
        }
        let offload = offload_ok
            && !matches!(op, Op::Scan { .. })
            && m.level <= cfg.offload_level
            && within(&m.low, &m.high, part)
            && c.locked()
                .await
                .claim_offload(m.token, &m.low, &m.high, || {
                    c.cost
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .offload(m.level)
                });
        if offload {
            return self.offload(c, key, op, &m).await;
        }
        self.make_room(c).await?;
        let n = self.fetch(c, m.child).await?;
        if n.level != m.level || n.low != m.low || fcmp(&n.high, &m.high) == Ordering::Greater {
            return Ok(MissOut::Refresh(m.parent_addr));
        }
        let mut st = c.locked().await;
        st.map.remove(&m.child.to_u64());
        st.admit(m.child, n, m.parent);
        Ok(MissOut::Retry)
    }

    /// READs one node, timing it for the cost model.
    async fn fetch(&self, c: &DexCs, a: GlobalAddr) -> Result<Node, TreeError> {
        c.fetches.fetch_add(1, SeqCst);
        let t0 = now_ns();
        let n = self.t.read_node(a).await?;
        c.cost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record_read(now_ns() - t0);
        Ok(n)
    }

    /// Pushes the rest of the operation down to the missed node's MS (§6.2).
    async fn offload(
        &self,
        c: &DexCs,
        key: &[u8],
        op: &Op,
        m: &Miss,
    ) -> Result<MissOut, TreeError> {
        let (code, value, may_insert) = match op {
            Op::Get => (ms::OP_GET, 0, false),
            Op::Put { value, may_insert } => (ms::OP_UPSERT, *value, *may_insert),
            Op::Remove => (ms::OP_REMOVE, 0, false),
            Op::Scan { .. } => unreachable!("scans are never offloaded"),
        };
        let req = ms::request(
            code,
            &self.t.g,
            self.cl.cfg.ms_node_ns,
            m.child,
            key,
            value,
            may_insert,
        );
        c.offloads.fetch_add(1, SeqCst);
        let t0 = now_ns();
        let rep = rpc(m.child.ms(), RPC_DEX, req).await?;
        c.cost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record_offload(now_ns() - t0);
        if rep.len() != 17 {
            return Err(TreeError::Verb(VerbError::RpcFailed {
                ms: m.child.ms(),
                handler: RPC_DEX,
                reason: format!("reply of {} bytes", rep.len()),
            }));
        }
        let v = u64::from_le_bytes(rep[1..9].try_into().unwrap());
        let leaf = GlobalAddr::from_u64(u64::from_le_bytes(rep[9..17].try_into().unwrap()));
        if rep[0] == 0 {
            c.fallbacks.fetch_add(1, SeqCst);
            return Ok(MissOut::NoOffload);
        }
        if !c.locked().await.invalidate(leaf) {
            // The leaf is hot here: its frame, now dirty, is the truth.
            return Ok(MissOut::NoOffload);
        }
        Ok(MissOut::Done(match op {
            Op::Get => Res::Get((rep[0] == 1).then_some(v)),
            Op::Put { .. } => Res::Put(v == 1),
            _ => Res::Remove(v == 1),
        }))
    }

    /// Writes a whole leaf page back (lock word 0: leaves are never
    /// locked remotely).
    async fn write_page(&self, c: &DexCs, a: GlobalAddr, n: &Node) -> Result<(), TreeError> {
        let b = n.encode(&self.t.g);
        let len = b.len() as u64;
        write(a, b).await?;
        let mut st = c.locked().await;
        st.counters.write_backs += 1;
        st.counters.write_back_bytes += len;
        Ok(())
    }

    /// Makes room for one more frame (§5.3): evict a cooling page, else cool
    /// a sampled one (writing it back first if dirty). Gives up after a few
    /// rounds and lets the cache run over budget rather than stall.
    async fn make_room(&self, c: &DexCs) -> Result<(), TreeError> {
        for _ in 0..16 {
            let job = {
                let mut st = c.locked().await;
                if st.frames.len() < st.budget || st.evict_one() {
                    if st.frames.len() < st.budget {
                        return Ok(());
                    }
                    continue;
                }
                let Some(v) = st.sample() else { continue };
                let f = &mut st.frames[v as usize];
                if !f.dirty {
                    st.cool(v);
                    continue;
                }
                f.flushing = true;
                (v, f.addr, f.node.clone(), f.gen)
            };
            let (v, a, n, gen) = job;
            let r = self.write_page(c, a, &n).await;
            let mut st = c.locked().await;
            let f = &mut st.frames[v as usize];
            f.flushing = false;
            r?;
            if f.gen == gen {
                f.dirty = false;
                if st.may_cool(v) {
                    st.cool(v);
                }
            }
        }
        Ok(())
    }

    /// Writes back every dirty page of CS `c` (they stay cached, clean).
    pub(crate) async fn flush_cs(&self, c: &DexCs) -> Result<u64, TreeError> {
        let jobs: Vec<(u32, GlobalAddr, Node, u64)> = {
            let mut st = c.locked().await;
            st.frames
                .iter_mut()
                .filter(|(_, f)| f.dirty && !f.flushing)
                .map(|(i, f)| {
                    f.flushing = true;
                    (i as u32, f.addr, f.node.clone(), f.gen)
                })
                .collect()
        };
        let mut res = Ok(jobs.len() as u64);
        for chunk in jobs.chunks(64) {
            let w = chunk.iter().map(|(_, a, n, _)| self.write_page(c, *a, n));
            for (r, (v, _, _, gen)) in futures::future::join_all(w).await.into_iter().zip(chunk) {
                let mut st = c.locked().await;
                let f = &mut st.frames[*v as usize];
                f.flushing = false;
                match r {
                    Ok(()) if f.gen == *gen => f.dirty = false,
                    Ok(()) => {}
                    Err(e) => res = Err(e),
                }
            }
        }
        res
    }

    /// Splits the cached leaf `lf` (busy) of an insert that found it full.
    async fn split_cached(&self, c: &DexCs, lf: u32) -> Result<(), TreeError> {
        let _busy = BusyGuard(c, lf);
        let (a, n) = {
            let st = c.locked().await;
            let f = &st.frames[lf as usize];
            (f.addr, f.node.clone())
        };
        self.split_leaf(c, a, n, Some(lf), GlobalAddr::NULL).await
    }

    /// The leaf split of §5.2: the new right leaf goes on the leaf's MS and
    /// is written at once (not admitted); the left half stays dirty in the
    /// cache (`frame`) or, for a scratch page (whose cached parent is at
    /// `parent`), is written after the right one (B-link order); the separator goes into the parent level through
    /// FgTree's locked remote insert (inner nodes are written through), and
    /// the cached parent is refreshed. `MsOutOfMemory` for the new leaf
    /// leaves everything unchanged.
    async fn split_leaf(
        &self,
        c: &DexCs,
        a: GlobalAddr,
        mut n: Node,
        frame: Option<u32>,
        parent: GlobalAddr,
    ) -> Result<(), TreeError> {
        let ra = self.t.alloc_node_near(0, a).await?;
        let (sep, right) = n.split_right(ra);
        write(ra, right.encode(&self.t.g)).await?;
        let parent = match frame {
            Some(lf) => {
                let mut st = c.locked().await;
                let f = &mut st.frames[lf as usize];
                f.node = n;
                f.dirty = true;
                f.gen += 1;
                match f.parent {
                    NONE => GlobalAddr::NULL,
                    p => st.frames[p as usize].addr,
                }
            }
            None => {
                self.write_page(c, a, &n).await?;
                parent
            }
        };
        match self.t.insert_parent(1, a, sep, ra).await {
            Ok(()) | Err(TreeError::Verb(VerbError::MsOutOfMemory { .. })) => {}
            Err(e) => return Err(e),
        }
        self.refresh(c, parent).await
    }

    /// Makes `key` a leaf fence (repartition): splits the leaf covering it
    /// there under the leaf's RDMA lock. The caller has flushed and frozen
    /// the CSs owning that leaf.
    pub(crate) async fn cut_leaf_at(&self, key: &[u8]) -> Result<(), TreeError> {
        loop {
            let Found::Node(a, n) = self.t.find(key, 0).await? else {
                unreachable!("the root is at level 0 or above")
            };
            if n.low == Fence::Key(key.to_vec()) {
                return Ok(());
            }
            let Some((a, mut n, held)) = self.t.lock_covering(a, key, 0).await? else {
                continue;
            };
            if n.low == Fence::Key(key.to_vec()) {
                return self.t.release(held, Vec::new()).await;
            }
            let ra = match self.t.alloc_node_near(0, a).await {
                Ok(ra) => ra,
                Err(e) => {
                    self.t.release(held, Vec::new()).await?;
                    return Err(e);
                }
            };
            let (sep, right) = n.split_at(ra, key);
            n.version = n.version.wrapping_add(1);
            let left = n.encode(&self.t.g);
            self.t
                .release(
                    held,
                    vec![
                        (ra, right.encode(&self.t.g)),
                        (a.add(8), left[8..].to_vec()),
                    ],
                )
                .await?;
            return match self.t.insert_parent(1, a, sep, ra).await {
                Err(TreeError::Verb(VerbError::MsOutOfMemory { .. })) => Ok(()),
                r => r,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::TreeConfig;
    use crate::{DexCluster, DexConfig};
    use dm_runtime::{ExecConfig, Executor};
    use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
    use dm_verbs::Fabric;

    /// A miss's clean-up clears only its own in-flight flag. The race it
    /// guards against needs threads (the two critical sections of a miss's
    /// admission and its clean-up run back to back on sim), so the test
    /// plays the other thread's steps between them by hand: the new frame
    /// is evicted and a second miss flags the same node.
    #[test]
    fn a_miss_clears_only_its_own_in_flight_flag() {
        let f = LoopbackFabric::new(LoopbackConfig::default());
        let mut ex = Executor::new(f.open_queues(0, 0), 1, ExecConfig::default());
        let cl = DexCluster::new(TreeConfig::default(), DexConfig::default(), 1).unwrap();
        let x = GlobalAddr::new(0, 4096);
        ex.block_on(async move {
            let c = &cl.css[0];
            let first = {
                let mut st = c.lock();
                let t = st.io_token();
                st.map.insert(x.to_u64(), Slot::Io(t));
                t
            };
            let guard = MissGuard {
                c,
                parent: NONE,
                child: x,
                token: first,
            };
            // Admission, eviction, then another core's miss of `x`.
            let second = {
                let mut st = c.lock();
                st.map.remove(&x.to_u64());
                let t = st.io_token();
                st.map.insert(x.to_u64(), Slot::Io(t));
                t
            };
            drop(guard);
            assert_eq!(c.lock().map.get(&x.to_u64()), Some(&Slot::Io(second)));
            drop(MissGuard {
                c,
                parent: NONE,
                child: x,
                token: second,
            });
            assert_eq!(c.lock().map.get(&x.to_u64()), None);
        });
    }
}
