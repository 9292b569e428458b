//! Range scan: from the leaf covering `from`, along the chain of leaves, each
//! leaf a validated image (Ziegler et al. §5.3; Sherman §4.2 "Range query").
//!
//! **Parallel READs** (Sherman §4.2: "the client thread issues multiple
//! RDMA_READ in parallel to fetch targeted leaf nodes"). With an index cache,
//! the cached leaf parent covering the next key names the next leaves, so their
//! READs go out together. The first leaf is read alone (a short scan needs no
//! other); after it, as many leaves as the remaining count needs if they are
//! as full as the last one read (at most [`MAX_PARALLEL_LEAVES`]; over-fetching
//! costs bandwidth, which is what bounds scans). The images are then used in chain
//! order: the next leaf is always the one the previous image's sibling
//! pointer names; its prefetched image is used if there is one (its low fence
//! then equals the previous image's high fence, since every image of a node
//! has `high == sibling.low`; checked anyway), else (a leaf split since the
//! parent copy was taken, or the batch ended) a new batch is fetched from the
//! parent covering that fence, and a leaf it does not contain is read alone,
//! exactly as without a cache.
//!
//! **Head nodes** ([`crate::head`], Ziegler et al. §4): a head node on the
//! chain holds no keys; its list names the leaves after it, which the scan
//! READs in parallel (as many as the remaining count needs) and then uses in
//! chain order under the same rule.
//!
//! **Why images of different moments compose.** A leaf's low fence never
//! changes and its high fence only drops (splits move keys right). An image of
//! leaf X with low fence `h` shows every key of `[h, X.high)` at the moment
//! it was read, whatever moment the previous image was read at; chaining
//! images whose fences meet therefore covers the scanned range without gaps.
//! Keys come out strictly increasing; a key present for the whole scan is
//! returned; every key returned was present in a validated leaf image taken
//! during the scan.

use crate::node::{Fence, Node, NodeKey};
use crate::tree::{FgTree, TreeError};
use dm_runtime::{join_inline, ScanBuf};
use dm_verbs::GlobalAddr;
use std::collections::HashMap;

/// Leaf READs a scan posts at once.
pub const MAX_PARALLEL_LEAVES: usize = 32;

impl FgTree {
    /// Up to `count` entries with key >= `from`, in key order
    /// ([`FgTree::scan_into`] into a new buffer).
    pub async fn scan(&self, from: &[u8], count: usize) -> Result<Vec<(Vec<u8>, u64)>, TreeError> {
        let mut out = ScanBuf::new();
        self.scan_into(from, count, &mut out).await?;
        Ok(out.to_entries())
    }

    /// Clears `out` and fills it with up to `count` entries with key >=
    /// `from`, in key order; no allocation per entry (issue 32). On an
    /// error `out` holds what was found before it.
    pub async fn scan_into(
        &self,
        from: &[u8],
        count: usize,
        out: &mut ScanBuf,
    ) -> Result<(), TreeError> {
        self.check_key(from)?;
        out.clear();
        if count == 0 {
            return Ok(());
        }
        if self.cfg.design == crate::nam::Design::Coarse {
            return self.nam_scan(from, count, out).await;
        }
        // Prefetched leaf images by address.
        let mut pre: HashMap<GlobalAddr, Node> = HashMap::new();
        let mut n = self.find_leaf(from).await?.1;
        // Entries in the last leaf read (estimates how many leaves remain).
        let mut per_leaf = n.entries.len();
        // `pre` holds leaves a head node listed.
        let mut from_head = false;
        loop {
            let keys: &[(NodeKey, u64)] = if n.head { &[] } else { &n.entries };
            if !n.head {
                per_leaf = n.entries.len();
            }
            for (k, v) in keys {
                let after_last = out.last_key().is_none_or(|l| k.as_slice() > l);
                if k.as_slice() >= from && after_last {
                    out.push(k, *v);
                    if out.len() == count {
                        return Ok(());
                    }
                }
            }
            let Fence::Key(high) = &n.high else {
                return Ok(());
            };
            if n.sibling.is_null() {
                return Ok(());
            }
            let next = n.sibling;
            let per_leaf = per_leaf.max(self.leaf_capacity() / 4).max(1);
            let leaves = (count - out.len()).div_ceil(per_leaf);
            if n.head && !pre.contains_key(&next) {
                pre.clear();
                self.prefetch_listed(&n, leaves, &mut pre).await?;
                from_head = true;
            }
            let fits = |m: &Node| m.level == 0 && m.low == n.high;
            n = match pre.remove(&next).filter(fits) {
                Some(m) => {
                    if from_head {
                        let (r, u) = self.head_reads.get();
                        self.head_reads.set((r, u + 1));
                    }
                    m
                }
                None => {
                    from_head = false;
                    // Not prefetched (or changed since): fetch a new batch from
                    // the parent covering `high`, else read the sibling alone.
                    pre.clear();
                    let high = high.clone();
                    self.prefetch(&high, leaves, &mut pre).await?;
                    match pre.remove(&next).filter(fits) {
                        Some(m) => m,
                        None => self.read_node(next).await?,
                    }
                }
            };
        }
    }

    /// READs in parallel the first `leaves` leaves the head node `h` lists
    /// (at most [`MAX_PARALLEL_LEAVES`]) into `pre`; a leaf used from there
    /// counts in [`FgTree::head_prefetch_stats`].
    async fn prefetch_listed(
        &self,
        h: &Node,
        leaves: usize,
        pre: &mut HashMap<GlobalAddr, Node>,
    ) -> Result<(), TreeError> {
        let addrs: Vec<GlobalAddr> = h
            .entries
            .iter()
            .take(leaves.clamp(1, MAX_PARALLEL_LEAVES))
            .map(|&(_, a)| GlobalAddr::from_u64(a))
            .collect();
        let (r, u) = self.head_reads.get();
        self.head_reads.set((r + addrs.len() as u64, u));
        self.read_into(addrs, pre).await
    }

    /// READs in parallel up to `leaves` leaves that the cached leaf parent of
    /// `key` names from `key` on, and keeps their images in `pre` by address.
    async fn prefetch(
        &self,
        key: &[u8],
        leaves: usize,
        pre: &mut HashMap<GlobalAddr, Node>,
    ) -> Result<(), TreeError> {
        let Some(c) = &self.cache else {
            return Ok(());
        };
        let Some(addrs) = c.leaves_from(key, leaves.clamp(1, MAX_PARALLEL_LEAVES)) else {
            return Ok(());
        };
        self.read_into(addrs, pre).await
    }

    /// READs the leaves at `addrs` in parallel and keeps their images in
    /// `pre` by address.
    async fn read_into(
        &self,
        addrs: Vec<GlobalAddr>,
        pre: &mut HashMap<GlobalAddr, Node>,
    ) -> Result<(), TreeError> {
        let images = join_inline(addrs.iter().map(|&a| self.read_node(a))).await;
        for (a, img) in addrs.into_iter().zip(images) {
            pre.insert(a, img?);
        }
        Ok(())
    }
}
