//! DEX's structure modifications (§5.2): leaf splits, of a cached leaf (busy
//! while it splits) or of a scratch copy, with the separator inserted
//! through FgTree's locked remote B-link insert (inner nodes are written
//! through, see [`crate::dex`]); and the cut of a leaf at a new partition
//! bound for [`DexTree::repartition`] (§4).

use super::cache::NONE;
use super::{DexCs, DexTree};
use crate::node::{Fence, Node};
use crate::search::Found;
use crate::tree::TreeError;
use dm_runtime::write;
use dm_verbs::{GlobalAddr, VerbError};

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
    /// cache (`frame`) or, for a scratch page (whose cached parent is at
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
                let mut st = c.locked().await;
                let f = &mut st.frames[lf as usize];
                f.node = n;
                f.sync_keys();
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
