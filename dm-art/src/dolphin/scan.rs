//! Ordered, count-bounded range scans (Dolphin §III-B "Scan"; the authors'
//! `range_query` only simulates one, digest B3.7, so this one is ours): a
//! depth-first walk of the ART in partial-key order from `from`'s border,
//! like SMART's (`crate::scan`); a special node's leaves are READ in
//! parallel batches (the paper's batched READs), a leaf's items sorted.
//!
//! Guarantees, as SMART's scan: keys strictly increasing and `>= from`;
//! every item returned was valid, with that value, in a validated image
//! READ during the scan; a key present for the whole scan is returned. The
//! last needs care across splits: a special node READ before a split lacks
//! the new leaf, while the old leaf READ after it has shrunk; the leaves of
//! one node must chain (each `hi` reaching the next entry's `lo - 1`), and a
//! gap sends the scan back to the special node. A leaf READ before its
//! rewrite still holds the moved keys, so each leaf contributes only up to
//! the next entry's `lo`.

use super::layout::{LeafImage, KIND_LEAF, KIND_SPECIAL};
use super::walk::ART_BYTES;
use super::Counter;
use super::{key_u64, DolphinTree};
use crate::cursor::Cursor;
use crate::error::ArtError;
use crate::layout::Slot;
use crate::scan::{Frame, Opened};
use crate::tree::MAX_RETRIES;
use dm_runtime::join_inline;
use dm_runtime::{yield_now, ScanBuf};
use dm_verbs::GlobalAddr;
use smallvec::SmallVec;

struct Walk<'a> {
    from: u64,
    count: usize,
    out: &'a mut ScanBuf,
}

impl Walk<'_> {
    fn full(&self) -> bool {
        self.out.len() >= self.count
    }
}

impl DolphinTree {
    /// Up to `count` items with keys `>= from`, ascending
    /// ([`DolphinTree::scan_into`] into a new buffer).
    pub async fn scan(&self, from: &[u8], count: usize) -> Result<Vec<(Vec<u8>, u64)>, ArtError> {
        let mut out = ScanBuf::new();
        self.scan_into(from, count, &mut out).await?;
        Ok(out.to_entries())
    }

    /// Clears `out` and fills it with up to `count` items with keys `>=
    /// from`, ascending; no allocation per item (issue 32). Verbs: one READ
    /// per internal node on the way (not from the cache), one per special
    /// node, and the leaves in parallel batches. On an error `out` holds
    /// what was found before it.
    pub async fn scan_into(
        &self,
        from: &[u8],
        count: usize,
        out: &mut ScanBuf,
    ) -> Result<(), ArtError> {
        out.clear();
        let mut w = Walk {
            from: key_u64(from)?,
            count,
            out,
        };
        if count > 0 {
            let r = self.art.cfg.root_slot;
            let word = self.art.read_word(r).await?;
            self.walk(&mut w, Cursor::root(r, word)).await?;
        }
        Ok(())
    }

    /// The depth-first walk from the root slot `root`, as SMART's
    /// (`crate::scan`): internal nodes are [`Frame`]s on a stack, no boxed
    /// recursion (issue 32); each leaf or special node a child names is
    /// emitted in partial-key order until `w` is full.
    async fn walk(&self, w: &mut Walk<'_>, root: Cursor) -> Result<(), ArtError> {
        let from = w.from.to_be_bytes();
        let mut stack: SmallVec<[Frame; 4]> = SmallVec::new();
        let mut next = Some((root, true));
        loop {
            if let Some((c, border)) = next.take() {
                match self.art.open_slot(c, &from, ART_BYTES, border).await? {
                    Opened::Nothing => {}
                    Opened::Leaf(word) => self.emit_object(w, c.slot_a, word).await?,
                    Opened::Node(f) => stack.push(f),
                }
            }
            let Some(f) = stack.last_mut() else {
                return Ok(());
            };
            if f.k >= f.len() || w.full() {
                stack.pop();
                continue;
            }
            let (i, s) = f.kid(f.k);
            f.k += 1;
            next = Some((f.child(i, s), f.border && s as u8 == from[f.p]));
        }
    }

    /// Emits the items of the leaf or special node the slot at `slot_a`
    /// names (word `word`).
    async fn emit_object(
        &self,
        w: &mut Walk<'_>,
        slot_a: GlobalAddr,
        mut word: u64,
    ) -> Result<(), ArtError> {
        for _ in 0..MAX_RETRIES {
            match Slot::decode(word) {
                Slot::Leaf {
                    words: KIND_LEAF,
                    addr,
                    ..
                } => {
                    let img = self.read_leaf(addr).await?;
                    if img.lo != 0 || img.hi != 255 {
                        // Split since the slot was READ: it names a special node now.
                        word = self.art.read_word(slot_a).await?;
                        continue;
                    }
                    if self.emit_leaf(w, &img, 255) {
                        return Ok(());
                    }
                }
                Slot::Leaf {
                    words: KIND_SPECIAL,
                    addr,
                    ..
                } => {
                    if self.emit_special(w, addr).await? {
                        return Ok(());
                    }
                }
                _ => return Err(ArtError::Corrupt(slot_a)),
            }
            self.bump(&self.rejected, Counter::rejected);
            yield_now().await;
        }
        Err(ArtError::Corrupt(slot_a))
    }

    /// Emits the items of the special node at `d`'s leaves; `false` if a
    /// leaf image was torn or the leaves did not chain (READ again).
    async fn emit_special(&self, w: &mut Walk<'_>, d: GlobalAddr) -> Result<bool, ArtError> {
        let s = self.read_special(d).await?;
        let mut es: SmallVec<[(u8, GlobalAddr); 64]> = s
            .entries
            .iter()
            .filter(|&&e| e != 0)
            .map(|&e| match Slot::decode(e) {
                Slot::Leaf { partial, addr, .. } => (partial, addr),
                _ => (0, GlobalAddr::NULL),
            })
            .collect();
        es.sort_by_key(|e| e.0);
        let mut k = 0;
        if s.prefix == w.from & !0xff {
            // Start at the leaf covering `from`.
            k = es.iter().rposition(|e| e.0 <= w.from as u8).unwrap_or(0);
        }
        while k < es.len() && !w.full() {
            let per_leaf = (self.g.items / 2).max(1);
            let want = (w.count - w.out.len()).div_ceil(per_leaf).max(1);
            let batch: SmallVec<[usize; 16]> = (k..es.len().min(k + want)).collect();
            // The round joins the READs' buffers (small) and decodes each
            // after: joined decoded images (about 1 KB each) made a round
            // tens of KB to move.
            let bufs = join_inline(batch.iter().map(|&j| self.read_leaf_buf(es[j].1))).await;
            for (&j, buf) in batch.iter().zip(bufs) {
                let a = es[j].1;
                let img = LeafImage::decode(&self.g, &buf?).ok_or(ArtError::Corrupt(a))?;
                let bound = es.get(j + 1).map_or(255, |e| e.0.wrapping_sub(1));
                if img.prefix != s.prefix || img.lo != es[j].0 || img.hi < bound {
                    return Ok(false);
                }
                if !self.emit_leaf(w, &img, bound) {
                    return Ok(false);
                }
                if w.full() {
                    return Ok(true);
                }
            }
            k += batch.len();
        }
        Ok(true)
    }

    /// Emits the items of `img` with last byte at most `bound` and key at
    /// least `from`, ascending; `false` (nothing emitted) if an item's value
    /// fails its digest.
    fn emit_leaf(&self, w: &mut Walk<'_>, img: &LeafImage, bound: u8) -> bool {
        // Past `from` and past what an earlier attempt of this object emitted.
        let lower = w.out.last_key().map_or(w.from, |k| {
            u64::from_be_bytes(k.try_into().unwrap()).saturating_add(1)
        });
        // On this (synchronous) frame's stack: a 1 KB leaf holds 40 items.
        let mut kvs: SmallVec<[(u64, u64); 64]> = SmallVec::new();
        for (i, it) in img.items.iter().enumerate() {
            if !it.key.valid || it.key.last > bound {
                continue;
            }
            let key = img.prefix | it.key.last as u64;
            if key < lower {
                continue;
            }
            match it.value(img.version, i) {
                Some(v) => kvs.push((key, v)),
                None => return false,
            }
        }
        kvs.sort_unstable();
        let room = w.count - w.out.len();
        for &(k, v) in kvs.iter().take(room) {
            w.out.push(&k.to_be_bytes(), v);
        }
        true
    }
}
