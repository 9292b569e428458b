//! DEX's structure modifications (§5.2): leaf splits, of a cached leaf (busy
//! while it splits) or of a scratch copy, with the separator inserted
//! through FgTree's locked remote B-link insert (inner nodes are written
//! through, see [`crate::dex`]); [`DexTree::repartition`] and the cut of a
//! leaf at a new partition bound (§4); in lease mode, the repair of a route
//! whose split a dead CS cut (`repair_route`).

use super::cache::NONE;
use super::{DexCs, DexTree};
use crate::node::{Fence, Node, NodeKey};
use crate::search::Found;
use crate::tree::TreeError;
use dm_runtime::{write, yield_now};
use dm_verbs::{GlobalAddr, VerbError};
use std::sync::atomic::Ordering::SeqCst;

/// Clears a leaf's busy flag when its split (or its re-READ after a lost
/// write-through, `traverse`) ends.
pub(super) struct BusyGuard<'a>(pub(super) &'a DexCs, pub(super) u32);

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        if let Some(f) = self.0.lock().frames.get_mut(self.1 as usize) {
            f.busy = false;
        }
    }
}

impl DexTree {
    /// Splits the cached leaf `lf` (busy) of an insert that found it full.
    pub(super) async fn split_cached(&self, c: &DexCs, lf: u32) -> Result<(), TreeError> {
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
    /// cache (`frame`; written at once too in lease mode) or, for a scratch page (whose cached parent is at
    /// `parent`), is written after the right one (B-link order); the separator goes into the parent level through
    /// FgTree's locked remote insert (inner nodes are written through), and
    /// the cached parent is refreshed. `MsOutOfMemory` for the new leaf
    /// leaves everything unchanged.
    pub(super) async fn split_leaf(
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
                // Lease mode writes the left half through too, before the
                // separator goes up: a crash then leaves a split that
                // `repair_route` rolls forward.
                let through = self.lease_ns.is_some();
                if through {
                    self.write_page(c, a, &n).await?;
                }
                let mut st = c.locked().await;
                let f = &mut st.frames[lf as usize];
                f.node = n;
                f.sync_keys();
                f.dirty = !through;
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
        self.insert_separator(1, a, sep, ra).await?;
        self.refresh(c, parent).await
    }

    /// Inserts separator `sep` of the split of `left` (the new node
    /// `right`) into level `level` through FgTree's locked B-link insert
    /// (idempotent). `MsOutOfMemory` of a parent split leaves it out, as a
    /// split may: B-link readers move right, and DEX's lease mode inserts
    /// it later (`repair_route`, `miss::adopt_split`).
    pub(super) async fn insert_separator(
        &self,
        level: u8,
        left: GlobalAddr,
        sep: NodeKey,
        right: GlobalAddr,
    ) -> Result<(), TreeError> {
        match self.t.insert_parent(level, left, sep, right).await {
            Err(TreeError::Verb(VerbError::MsOutOfMemory { .. })) => Ok(()),
            r => r,
        }
    }

    /// Makes `key` a leaf fence (repartition): splits the leaf covering it
    /// there under the leaf's RDMA lock. The caller has flushed and frozen
    /// the CSs owning that leaf.
    pub(crate) async fn cut_leaf_at(&self, key: &[u8]) -> Result<(), TreeError> {
        loop {
            let Found::Node(a, n) = self.t.find(key, 0).await? else {
                unreachable!("the root is at level 0 or above")
            };
            if n.low == Fence::key(key) {
                return Ok(());
            }
            let Some((a, mut n, held)) = self.t.lock_covering(a, key, 0, false).await? else {
                continue;
            };
            if n.low == Fence::key(key) {
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
            let left = n.encode_after_lock(&self.t.g);
            self.t
                .release(held, vec![(ra, right.encode(&self.t.g)), (a.add(8), left)])
                .await?;
            return self.insert_separator(1, a, sep, ra).await;
        }
    }

    /// Lease mode: rolls forward the splits on `key`'s route whose
    /// separator never reached the parent level (issue 33). A CS that dies
    /// between a split's node writes (B-link order: right node, then left)
    /// and the separator's insert leaves a node whose high fence is below
    /// what its parent routes to it; FG's readers move right across it,
    /// but DEX's cached traversal re-reads the parent for ever. The
    /// caller calls this after refreshing for longer than a lease: the
    /// route is walked from the root as [`FgTree`]'s `find` walks it, and
    /// every move right inserts the separator it crossed through FgTree's
    /// locked insert (idempotent: a separator that is there, or that a
    /// live splitter inserts meanwhile, is rewritten with the same
    /// pointer). Returns how many moves right it made.
    pub(super) async fn repair_route(&self, key: &[u8]) -> Result<u32, TreeError> {
        let mut a = self.t.read_root().await?;
        let mut n = self.t.read_node(a).await?;
        let mut moved = 0;
        loop {
            if n.below_low(key) {
                return Ok(moved);
            }
            if n.beyond_high(key) {
                let Fence::Key(sep) = n.high.clone() else {
                    return Ok(moved);
                };
                if n.sibling.is_null() {
                    return Ok(moved);
                }
                tracing::debug!(?a, right = ?n.sibling, level = n.level, "a cut split rolled forward");
                self.insert_separator(n.level + 1, a, sep, n.sibling)
                    .await?;
                moved += 1;
                a = n.sibling;
            } else if n.level == 0 {
                return Ok(moved);
            } else {
                a = n.child_for(key);
            }
            n = self.t.read_node(a).await?;
        }
    }

    /// Moves bound `i` (between CS `i` and CS `i + 1`) to `key` (§4,
    /// "logical re-partitioning"): both CSs stop taking operations and
    /// finish the running ones, flush their dirty pages and drop their
    /// caches; the leaf under `key` is split there if `key` is not a leaf
    /// fence yet; then the bound moves and both CSs resume (cold). No data
    /// moves. Returns the duration in ns (virtual on sim). Errors:
    /// `BadConfig` if `key` would not lie strictly between the neighbouring
    /// bounds; verb errors of the flush or split (the bound then stays).
    pub async fn repartition(&self, i: usize, key: Vec<u8>) -> Result<u64, TreeError> {
        let t0 = dm_runtime::now_ns();
        self.t.check_key(&key)?;
        let b = self.cl.bounds();
        if i >= b.len() || (i > 0 && key <= b[i - 1]) || (i + 1 < b.len() && key >= b[i + 1]) {
            return Err(TreeError::BadConfig(format!(
                "bound {i} cannot move to {key:?} (bounds {b:?})"
            )));
        }
        let local = &self.cl.cfg.local_cs;
        if !local.contains(&(i as u16)) || !local.contains(&(i as u16 + 1)) {
            return Err(TreeError::BadConfig(format!(
                "bound {i} lies between CSs {i} and {}, not both local ({local:?})",
                i + 1
            )));
        }
        let pair = [&self.cl.css[i], &self.cl.css[i + 1]];
        // Only one repartition of a CS at a time.
        for c in pair {
            while c.frozen.swap(true, SeqCst) {
                yield_now().await;
            }
        }
        let r = self.repartition_frozen(&pair, i, key).await;
        for c in pair {
            c.frozen.store(false, SeqCst);
        }
        r?;
        let ns = dm_runtime::now_ns() - t0;
        for c in pair {
            c.repartitions.fetch_add(1, SeqCst);
            c.repartition_ns.fetch_add(ns, SeqCst);
        }
        Ok(ns)
    }

    async fn repartition_frozen(
        &self,
        pair: &[&DexCs; 2],
        i: usize,
        key: Vec<u8>,
    ) -> Result<(), TreeError> {
        for c in pair {
            while c.active.load(SeqCst) > 0 {
                yield_now().await;
            }
        }
        for c in pair {
            self.flush_cs(c).await?;
            c.locked().await.clear();
        }
        self.cut_leaf_at(&key).await?;
        self.cl.bounds.write().unwrap_or_else(|e| e.into_inner())[i] = key;
        self.cl.bounds_epoch.fetch_add(1, SeqCst);
        Ok(())
    }
}
