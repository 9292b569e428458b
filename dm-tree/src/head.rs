//! Head nodes for range-scan prefetching (Ziegler et al. SIGMOD'19 §4, end;
//! §5 offers them for the hybrid design's leaf level too).
//!
//! A head node is an extra node on the leaf level, installed in the sibling
//! chain after every `n`-th leaf, that holds no keys but lists the addresses
//! of the `n` leaves that follow it. A scan that reaches one READs those
//! leaves in parallel instead of one round trip per leaf; the sibling
//! pointers stay, so the list is only a hint.
//!
//! **Layout.** A leaf-level node ([`crate::node`]) with the head flag, an
//! empty key range (low fence = high fence = the high fence of the leaf before
//! it) and sorted entries (low fence of a listed leaf, its address).
//!
//! **Why readers stay correct.** No key lies in `[k, k)`, so no point
//! operation ever stops at a head node: one reached by moving right is
//! beyond its high fence and the search moves right again (one more READ, and
//! only after a concurrent split). Writers never lock one for an update.
//! The chain stays a B-link chain: the leaf before the head ends at `k`, the
//! head covers `[k, k)` and the leaf after it starts at `k`. A scan uses a
//! prefetched image only when it chains (its low fence equals the high fence
//! of the image before it, `scan.rs`), so a stale list (a listed leaf
//! split, a head left behind) costs one extra READ, as the paper says, and
//! never a wrong result.
//!
//! **Maintenance** ([`FgTree::maintain_head_nodes`]): the paper uses an
//! epoch-based background thread that walks the leaves and installs or
//! removes head nodes. One pass here walks the chain once, then for every
//! group boundary installs a head (locks the leaf before it, re-reads it, and
//! writes the head before the leaf that points to it, as a split writes its
//! new right node first) or refreshes the head's list under the head's
//! lock, and unlinks heads that are no longer at a boundary (locks the node
//! before it). Every change re-validates under
//! the locks what the walk saw and skips the spot if it changed; the next pass
//! fixes it. Unlinked heads are not freed (a scan may be standing on one;
//! nothing in the B+tree family reclaims nodes). Passes of several CSs may
//! overlap; each change holds the locks of the nodes it rewrites.

use crate::nam::Design;
use crate::node::{Fence, Node, NodeKey};
use crate::tree::{FgTree, TreeError};
use dm_verbs::GlobalAddr;

/// What one maintenance pass saw and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeadPass {
    /// Leaves (not heads) on the chain when it was walked.
    pub leaves: u64,
    /// Heads on the chain when it was walked.
    pub heads_seen: u64,
    pub installed: u64,
    /// Heads kept whose list was rewritten.
    pub refreshed: u64,
    /// Heads unlinked from the chain (no longer at a group boundary).
    pub removed: u64,
    /// Changes skipped because the chain changed under the walk.
    pub skipped: u64,
}

/// A node of the walked chain.
struct Seen {
    addr: GlobalAddr,
    node: Node,
}

impl FgTree {
    /// One pass of head-node maintenance with groups of `n` leaves (see the
    /// module docs). Errors: `BadConfig` for `n < 2`, `n` above a node's
    /// entry capacity, or the coarse-grained design (no one-sided leaf
    /// level); verb errors; `MsOutOfMemory` for a head's node (nothing was
    /// linked).
    pub async fn maintain_head_nodes(&self, n: usize) -> Result<HeadPass, TreeError> {
        if n < 2 || n > self.g.capacity() {
            return Err(TreeError::BadConfig(format!(
                "head nodes need 2 to {} leaves per group, not {n}",
                self.g.capacity()
            )));
        }
        if self.cfg.design == Design::Coarse {
            return Err(TreeError::BadConfig(
                "head nodes are for one-sided leaf levels (fg, sherman, nam-hybrid)".into(),
            ));
        }
        let chain = self.walk_leaves().await?;
        let mut pass = HeadPass::default();
        let real: Vec<usize> = (0..chain.len()).filter(|&i| !chain[i].node.head).collect();
        pass.leaves = real.len() as u64;
        pass.heads_seen = (chain.len() - real.len()) as u64;
        // Boundaries (rank in `real` of the leaf before) that kept a head.
        let mut boundary_done = vec![false; real.len()];
        // Rank in `real` of the last leaf before chain node `i`.
        let mut before = None;
        let mut rank = 0;
        for i in 0..chain.len() {
            if !chain[i].node.head {
                before = Some(rank);
                rank += 1;
                continue;
            }
            let keep =
                before.filter(|&r| (r + 1) % n == 0 && r + 1 < real.len() && !boundary_done[r]);
            match keep {
                Some(r) => {
                    boundary_done[r] = true;
                    let list = self.listing(&chain, &real[r + 1..], n);
                    if list != chain[i].node.entries {
                        if self.refresh_head(chain[i].addr, list).await? {
                            pass.refreshed += 1;
                        } else {
                            pass.skipped += 1;
                        }
                    }
                }
                None if i == 0 => {}
                None => {
                    if self.unlink_head(chain[i - 1].addr, chain[i].addr).await? {
                        pass.removed += 1;
                    } else {
                        pass.skipped += 1;
                    }
                }
            }
        }
        for r in (n - 1..real.len().saturating_sub(1)).step_by(n) {
            if boundary_done[r] {
                continue;
            }
            let at = &chain[real[r]];
            let list = self.listing(&chain, &real[r + 1..], n);
            if self.install_head(at, list).await? {
                pass.installed += 1;
            } else {
                pass.skipped += 1;
            }
        }
        Ok(pass)
    }

    /// The leaf chain from the leftmost leaf, one READ per node.
    async fn walk_leaves(&self) -> Result<Vec<Seen>, TreeError> {
        let (mut addr, mut node) = self.find_leaf(&vec![0u8; self.cfg.key_bytes]).await?;
        let mut chain = Vec::new();
        loop {
            let next = node.sibling;
            chain.push(Seen { addr, node });
            if next.is_null() {
                return Ok(chain);
            }
            addr = next;
            node = self.read_node(addr).await?;
        }
    }

    /// The entries of a head listing the first `n` of `leaves` (chain indices).
    fn listing(&self, chain: &[Seen], leaves: &[usize], n: usize) -> Vec<(NodeKey, u64)> {
        leaves
            .iter()
            .take(n)
            .map(|&i| {
                let low = chain[i].node.low.first_entry_key(self.cfg.key_bytes);
                (low, chain[i].addr.to_u64())
            })
            .collect()
    }

    /// Links a new head listing `list` after the leaf `at` if it is still as
    /// the walk saw it (same high fence and sibling); `false` if it changed.
    async fn install_head(&self, at: &Seen, list: Vec<(NodeKey, u64)>) -> Result<bool, TreeError> {
        let Fence::Key(k) = &at.node.high else {
            return Ok(false);
        };
        let ha = self.alloc_node_near(0, at.addr).await?;
        let (held, mut leaf) = self.lock_read(at.addr).await?;
        if leaf.head
            || leaf.level != 0
            || leaf.high != at.node.high
            || leaf.sibling != at.node.sibling
        {
            // Not linked: the head's node stays unused (no reclamation).
            self.release(held, Vec::new()).await?;
            return Ok(false);
        }
        let mut h = Node::empty(0, Fence::key(k), Fence::key(k));
        h.head = true;
        h.sibling = leaf.sibling;
        h.entries = list;
        leaf.sibling = ha;
        leaf.version = leaf.version.wrapping_add(1);
        let lb = leaf.encode_after_lock(&self.g);
        // The head first, then the leaf that points to it (as a split).
        self.release(held, vec![(ha, h.encode(&self.g)), (at.addr.add(8), lb)])
            .await?;
        Ok(true)
    }

    /// Rewrites the list of the head at `ha` under its lock; `false` if it is
    /// no longer a head.
    async fn refresh_head(
        &self,
        ha: GlobalAddr,
        list: Vec<(NodeKey, u64)>,
    ) -> Result<bool, TreeError> {
        let (held, mut h) = self.lock_read(ha).await?;
        if !h.head {
            self.release(held, Vec::new()).await?;
            return Ok(false);
        }
        h.entries = list;
        self.write_back_unlock(held, ha, h).await?;
        Ok(true)
    }

    /// Unlinks the head at `ha` from `pred` under `pred`'s lock; `false` if
    /// `pred` no longer points to it. The head is not locked (its lock word
    /// may be `pred`'s, in a global lock table): its sibling pointer changes
    /// only when a head right after it is unlinked, and an image that misses
    /// such a change relinks that head, which is still a valid chain (the
    /// next pass unlinks it again).
    async fn unlink_head(&self, pred: GlobalAddr, ha: GlobalAddr) -> Result<bool, TreeError> {
        let (held, mut p) = self.lock_read(pred).await?;
        let h = if p.level == 0 && p.sibling == ha {
            match self.read_node(ha).await {
                Ok(h) => Some(h).filter(|h| h.head),
                Err(e) => {
                    let _ = self.release(held, Vec::new()).await;
                    return Err(e);
                }
            }
        } else {
            None
        };
        let Some(h) = h else {
            self.release(held, Vec::new()).await?;
            return Ok(false);
        };
        p.sibling = h.sibling;
        self.write_back_unlock(held, pred, p).await?;
        Ok(true)
    }
}
