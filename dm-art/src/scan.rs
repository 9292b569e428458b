//! Range scan (SMART §4.5, Algorithm 4, made ordered and count-bounded):
//! a depth-first walk in partial-key order from the left border of `from`,
//! leaves of one node READ together (one round), internal children visited
//! in order until `count` items are out.
//!
//! Guarantees (the paper's scans are not atomic either): keys come out
//! strictly increasing and `>= from`; every item returned was valid in a
//! validated leaf image READ during the scan; a key present for the whole
//! scan is returned (a split only moves a leaf or node deeper under the same
//! slot, so the walk meets it whether it READ the slot before or after; a
//! header trimmed after its parent was READ sends the walk back to the
//! parent slot, see `effective_prefix`).

use crate::cursor::Cursor;
use crate::error::ArtError;
use crate::layout::{slot_addr, Slot};
use crate::tree::{SmartTree, MAX_RETRIES};
use dm_runtime::ScanBuf;
use dm_verbs::GlobalAddr;
use futures::future::{join_all, LocalBoxFuture};
use futures::FutureExt;
use smallvec::{smallvec, SmallVec};

/// One scan's state.
struct Walk<'a> {
    from: &'a [u8],
    count: usize,
    out: &'a mut ScanBuf,
}

impl SmartTree {
    /// Up to `count` items with keys `>= from`, ascending
    /// ([`SmartTree::scan_into`] into a new buffer).
    pub async fn scan(&self, from: &[u8], count: usize) -> Result<Vec<(Vec<u8>, u64)>, ArtError> {
        let mut out = ScanBuf::new();
        self.scan_into(from, count, &mut out).await?;
        Ok(out.to_entries())
    }

    /// Clears `out` and fills it with up to `count` items with keys `>=
    /// from`, ascending; no allocation per item (issue 32). On an error
    /// `out` holds what was found before it.
    pub async fn scan_into(
        &self,
        from: &[u8],
        count: usize,
        out: &mut ScanBuf,
    ) -> Result<(), ArtError> {
        let fpath = self.path(from)?;
        out.clear();
        let mut w = Walk {
            from: &fpath,
            count,
            out,
        };
        if count > 0 {
            let root = self.read_word(self.cfg.root_slot).await?;
            self.visit(
                &mut w,
                self.cfg.root_slot,
                self.cfg.root_slot,
                root,
                0,
                true,
            )
            .await?;
        }
        Ok(())
    }

    /// Emits the items under the slot at `slot_a` (word `word`, naming a node
    /// or leaf at depth `d`); `border`: every path byte before `d` equals
    /// `from`'s, so keys below `from` must be skipped.
    fn visit<'a>(
        &'a self,
        w: &'a mut Walk<'_>,
        owner: GlobalAddr,
        slot_a: GlobalAddr,
        word: u64,
        d: usize,
        border: bool,
    ) -> LocalBoxFuture<'a, Result<(), ArtError>> {
        async move {
            let mut c = Cursor {
                slot_a,
                owner,
                word,
                depth: d,
                cached: false,
            };
            for _ in 0..MAX_RETRIES {
                let word = c.word;
                let (addr, ty) = match Slot::decode(word) {
                    Slot::Empty => return Ok(()),
                    Slot::Leaf { .. } => return self.emit_leaves(w, &[word], border).await,
                    Slot::Internal { addr, ty, .. } => (addr, ty),
                };
                let Some((n, s)) = self
                    .read_internal(&mut c, addr, ty, d, w.from.len())
                    .await?
                else {
                    continue;
                };
                let pre = &n.header.prefix[s..];
                let p = d + pre.len();
                let mut border = border;
                if border {
                    match pre.cmp(&w.from[d..p]) {
                        std::cmp::Ordering::Less => return Ok(()),
                        std::cmp::Ordering::Greater => border = false,
                        std::cmp::Ordering::Equal => {}
                    }
                }
                let mut kids: SmallVec<[(usize, u64); 64]> = n
                    .slots
                    .iter()
                    .copied()
                    .take_while(|&s| s != 0)
                    .enumerate()
                    .filter(|&(_, s)| !border || s as u8 >= w.from[p])
                    .collect();
                kids.sort_by_key(|&(_, s)| s as u8);
                let mut k = 0;
                while k < kids.len() && w.out.len() < w.count {
                    let (i, s) = kids[k];
                    let on_border = border && s as u8 == w.from[p];
                    if matches!(Slot::decode(s), Slot::Leaf { .. }) {
                        // A run of leaf children, READ in one round (no more
                        // of them than items still wanted).
                        let want = w.count - w.out.len();
                        let mut run: SmallVec<[u64; 16]> = smallvec![s];
                        let mut run_border = on_border;
                        k += 1;
                        while k < kids.len()
                            && run.len() < want
                            && matches!(Slot::decode(kids[k].1), Slot::Leaf { .. })
                        {
                            run.push(kids[k].1);
                            run_border |= border && kids[k].1 as u8 == w.from[p];
                            k += 1;
                        }
                        self.emit_leaves(w, &run, run_border).await?;
                    } else {
                        self.visit(w, addr, slot_addr(addr, i), s, p + 1, on_border)
                            .await?;
                        k += 1;
                    }
                }
                return Ok(());
            }
            Err(ArtError::Corrupt(slot_a))
        }
        .boxed_local()
    }

    /// READs the leaves the slot words `run` name (in key order) in one
    /// round and emits the valid ones (those at or past `from` if `border`).
    async fn emit_leaves(
        &self,
        w: &mut Walk<'_>,
        run: &[u64],
        border: bool,
    ) -> Result<(), ArtError> {
        let mut reads = run.iter().map(|&s| match Slot::decode(s) {
            Slot::Leaf { addr, .. } => self.read_leaf(addr),
            _ => unreachable!("a run holds leaf slots only"),
        });
        // A run of one leaf (most, in sparse last levels) READs it without
        // `join_all`'s two allocations.
        let leaves: SmallVec<[_; 1]> = match run {
            [_] => smallvec![reads.next().unwrap().await],
            _ => join_all(reads).await.into_iter().collect(),
        };
        for r in leaves {
            let (l, _) = r?;
            if !l.valid || w.out.len() >= w.count {
                continue;
            }
            if border && self.path(&l.key)?.as_slice() < w.from {
                continue;
            }
            w.out.push(&l.key, l.value);
        }
        Ok(())
    }
}
