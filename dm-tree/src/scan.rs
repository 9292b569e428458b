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

use crate::node::{FenceKey, View};
use crate::tree::{FgTree, TreeError};
use dm_runtime::{join_inline, ReadBuf, ScanBuf};
use dm_verbs::GlobalAddr;
use smallvec::SmallVec;
use std::ops::ControlFlow;

/// Leaf READs a scan posts at once.
pub const MAX_PARALLEL_LEAVES: usize = 32;

/// Leaf addresses of one batch, inline up to 8 (a 100-entry scan of 1 KB
/// leaves READs 3 or 4).
pub(crate) type LeafAddrs = SmallVec<[GlobalAddr; 8]>;

/// Prefetched leaf images by address, validated ([`View::new`]), not
/// decoded: a warm scan allocates nothing per leaf (issue 32).
type Prefetched = SmallVec<[(GlobalAddr, ReadBuf); 8]>;

/// The image of `a` in `pre`, taken out.
fn take(pre: &mut Prefetched, a: GlobalAddr) -> Option<ReadBuf> {
    let i = pre.iter().position(|(x, _)| *x == a)?;
    Some(pre.swap_remove(i).1)
}

impl FgTree {
    /// Up to `count` entries with key >= `from`, in key order
    /// ([`FgTree::scan_into`] into a new buffer).
    pub async fn scan(&self, from: &[u8], count: usize) -> Result<Vec<(Vec<u8>, u64)>, TreeError> {
        let mut out = ScanBuf::new();
        self.scan_into(from, count, &mut out).await?;
        Ok(out.to_entries())
    }

    /// Clears `out` and fills it with up to `count` entries with key >=
    /// `from`, in key order; each leaf is read in place from its validated
    /// image (`View`), so a warm scan allocates nothing (issue 32). On an
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
        let g = &self.g;
        let mut pre = Prefetched::new();
        let mut img = self.find_leaf_image(from).await?.1;
        // Entries in the last leaf read, or in a head node read first
        // (estimates how many leaves remain).
        let (mut per_leaf, mut first) = (0, true);
        // `pre` holds leaves a head node listed.
        let mut from_head = false;
        loop {
            let n = View::validated(g, &img);
            if !n.head() {
                let mut full = false;
                per_leaf = n.for_each_in_order(|k, v| {
                    let after_last = out.last_key().is_none_or(|l| k > l);
                    if k >= from && after_last {
                        out.push(k, v);
                        if out.len() == count {
                            full = true;
                            return ControlFlow::Break(());
                        }
                    }
                    ControlFlow::Continue(())
                });
                if full {
                    return Ok(());
                }
            } else if first {
                per_leaf = n.for_each_in_order(|_, _| ControlFlow::Break(()));
            }
            first = false;
            let (Some(high), false) = (n.high_key(), n.sibling().is_null()) else {
                return Ok(());
            };
            let next = n.sibling();
            let high = FenceKey::from_slice(high);
            let per_leaf = per_leaf.max(self.leaf_capacity() / 4).max(1);
            let leaves = (count - out.len()).div_ceil(per_leaf);
            if n.head() && !pre.iter().any(|(a, _)| *a == next) {
                pre.clear();
                self.prefetch_listed(&n, leaves, &mut pre).await?;
                from_head = true;
            }
            let fits = |m: &ReadBuf| {
                let m = View::validated(g, m);
                m.level() == 0 && m.low_is_key(&high)
            };
            img = match take(&mut pre, next).filter(fits) {
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
                    self.prefetch(&high, leaves, &mut pre).await?;
                    match take(&mut pre, next).filter(fits) {
                        Some(m) => m,
                        None => self.read_valid(next).await?,
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
        h: &View<'_>,
        leaves: usize,
        pre: &mut Prefetched,
    ) -> Result<(), TreeError> {
        let mut addrs = LeafAddrs::new();
        let max = leaves.clamp(1, MAX_PARALLEL_LEAVES);
        h.for_each_in_order(|_, a| {
            addrs.push(GlobalAddr::from_u64(a));
            if addrs.len() == max {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
        let (r, u) = self.head_reads.get();
        self.head_reads.set((r + addrs.len() as u64, u));
        self.read_into(&addrs, pre).await
    }

    /// READs in parallel up to `leaves` leaves that the cached leaf parent of
    /// `key` names from `key` on, and keeps their images in `pre` by address.
    async fn prefetch(
        &self,
        key: &[u8],
        leaves: usize,
        pre: &mut Prefetched,
    ) -> Result<(), TreeError> {
        let Some(c) = &self.cache else {
            return Ok(());
        };
        let Some(addrs) = c.leaves_from(key, leaves.clamp(1, MAX_PARALLEL_LEAVES)) else {
            return Ok(());
        };
        self.read_into(&addrs, pre).await
    }

    /// READs the leaves at `addrs` in parallel and keeps their validated
    /// images in `pre` by address.
    async fn read_into(&self, addrs: &[GlobalAddr], pre: &mut Prefetched) -> Result<(), TreeError> {
        let images = join_inline(addrs.iter().map(|&a| self.read_valid(a))).await;
        for (&a, img) in addrs.iter().zip(images) {
            pre.push((a, img?));
        }
        Ok(())
    }
}
