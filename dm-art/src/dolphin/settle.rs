//! Lease mode (issue 33, not in the paper): rolling forward a leaf split
//! whose holder died, or was dropped, between publishing the new leaf and
//! rewriting the old one.
//!
//! A split (`smo`, Fig. 4d/e) holds the old leaf `P`, WRITES the new leaf
//! `F` with the upper half of `P`'s items, holds `F`, publishes it (CAS of
//! the ART slot to a new special node, or of a free special-node entry),
//! rewrites `P` with the lower half and a range ending below `F`'s, and
//! releases both. Cut after the publication and before `P`'s rewrite
//! landed, it leaves `F` reachable with copies of keys that `P`'s image
//! still covers; a reader on a stale path (a cached ART slot naming `P`)
//! still reads `P`. The copies are equal until one is written, and both
//! leaves stay locked under the dead holder's name, so the first taker of
//! either ([`dm_runtime::lock::Held::taken_stale`]) repairs before it acts:
//!
//! - the taker of `P` finds its special node (its image's field, or, for a
//!   Fig. 4d split whose rewrite never landed, a fresh walk from the root)
//!   and an entry above `P`'s low byte that `P`'s range reaches: it
//!   rewrites `P` shrunk to below that entry (version + 1, the items above
//!   dropped: their copies in `F` are the current ones), releases it, and
//!   walks again;
//! - the taker of `F` finds the entry below its own, READs that leaf, and
//!   if its range still reaches `F`'s low byte, takes its lock (taking it
//!   over from the same dead holder after the lease) and rewrites it shrunk
//!   the same way, before it writes `F`.
//!
//! Lock order: a taker waits for a left neighbour while it holds a leaf,
//! never for a right one (a split's new leaf is locked before anybody can
//! reach it), so the waits have no cycle. Cut before the publication, `F`
//! is unreachable (leaked memory) and `P` whole; cut after `P`'s rewrite,
//! nothing overlaps and the takers only release.

use super::layout::{special_entry, LeafImage, SpecialImage, KIND_LEAF};
use super::smo::fill;
use super::walk::Place;
use super::DolphinTree;
use crate::error::ArtError;
use crate::layout::Slot;
use dm_runtime::lock::NodeLocks;
use dm_runtime::write;
use dm_verbs::GlobalAddr;

/// The low byte and address of every leaf entry of special node `s`, with
/// the entry's index.
fn leaves(s: &SpecialImage) -> impl Iterator<Item = (usize, u8, GlobalAddr)> + '_ {
    s.entries
        .iter()
        .enumerate()
        .filter_map(|(j, &e)| match Slot::decode(e) {
            Slot::Leaf {
                partial,
                words: KIND_LEAF,
                addr,
            } if e != 0 => Some((j, partial, addr)),
            _ => None,
        })
}

impl DolphinTree {
    /// Lease mode, the leaf at `a` (image `img`) just taken from a holder
    /// that never released it (module docs): repairs a split that holder
    /// left half done. `true` if it rewrote `a` (the caller releases it and
    /// tries again); `false` if `a` is as it should be (its left neighbour
    /// repaired if that was needed). Errors: a verb's, the lock's.
    pub(crate) async fn settle(
        &self,
        l: &NodeLocks,
        a: GlobalAddr,
        img: &LeafImage,
    ) -> Result<bool, ArtError> {
        let Some(d) = self.special_now(img).await? else {
            return Ok(false);
        };
        let s = self.read_special(d).await?;
        let Some((j, _, _)) = leaves(&s).find(|e| e.2 == a) else {
            return Ok(false);
        };
        if let Some(n) = self.shrunk(img, d, &s, j) {
            tracing::warn!(leaf = ?a, lo = n.lo, hi = n.hi, was = img.hi, "rolled a cut split forward: the old leaf shrunk");
            write(a, n.encode(&self.g)).await?;
            return Ok(true);
        }
        let left = leaves(&s).filter(|e| e.1 < img.lo).max_by_key(|e| e.1);
        let Some((pj, _, pa)) = left else {
            return Ok(false);
        };
        if self.shrunk(&self.read_leaf(pa).await?, d, &s, pj).is_none() {
            return Ok(false);
        }
        // The old half of a split cut after publishing `a`: repaired under
        // its lock before `a` is written.
        let (held, b) = l
            .lock_and_read(self.lock_addr(pa), Some((pa, self.g.bytes as u32)))
            .await?;
        let p = match b.and_then(|b| LeafImage::decode(&self.g, &b)) {
            Some(p) => p,
            None => self.read_leaf(pa).await?,
        };
        let s = self.read_special(d).await?;
        let fix = self.shrunk(&p, d, &s, pj).map(|n| {
            tracing::warn!(leaf = ?pa, lo = n.lo, hi = n.hi, was = p.hi, "rolled a cut split forward: the old leaf shrunk");
            (pa, n.encode(&self.g))
        });
        l.release(held, fix).await?;
        Ok(false)
    }

    /// The special node `img`'s prefix hangs from now: the image's own
    /// field, else the one a fresh walk from the root (no cache) finds
    /// (a Fig. 4d split cut before the old leaf's rewrite left the field
    /// empty); `None` if the prefix has a single leaf.
    async fn special_now(&self, img: &LeafImage) -> Result<Option<GlobalAddr>, ArtError> {
        if !img.special.is_null() {
            return Ok(Some(img.special));
        }
        let path = (img.prefix | img.lo as u64).to_be_bytes();
        let root = self.art.root_cursor().await?;
        Ok(match self.locate(&path, Some(root)).await? {
            Place::Leaf(t) => t.special,
            Place::Absent(..) => None,
        })
    }

    /// `img` (entry `j` of special node `d`, image `s`) rewritten to end
    /// below the next entry's low byte, if its range reaches it or it does
    /// not name `d` yet; `None` if it is as it should be.
    fn shrunk(
        &self,
        img: &LeafImage,
        d: GlobalAddr,
        s: &SpecialImage,
        j: usize,
    ) -> Option<LeafImage> {
        let next = leaves(s).map(|e| e.1).filter(|&lo| lo > img.lo).min();
        let hi = next.map_or(img.hi, |lo| lo - 1);
        if img.hi <= hi && img.special == d {
            return None;
        }
        let mut n = LeafImage::new(&self.g, img.prefix, img.lo, hi, img.version.wrapping_add(1));
        let kvs: Vec<(u64, u64)> = img
            .entries_raw()
            .into_iter()
            .filter(|&(k, _)| k as u8 <= hi)
            .collect();
        fill(&mut n, &kvs);
        n.special = d;
        n.rev = special_entry(d, j);
        Some(n)
    }
}
