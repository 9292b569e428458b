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
use crate::layout::Slot;
use crate::slots::Slots;
use crate::tree::{SmartTree, MAX_RETRIES};
use dm_runtime::{read_round, yield_now, ScanBuf};
use dm_verbs::GlobalAddr;
use smallvec::SmallVec;

/// One scan's state.
struct Walk<'a> {
    from: &'a [u8],
    count: usize,
    out: &'a mut ScanBuf,
}

/// An internal node a depth-first walk is inside (SMART's and Dolphin's
/// scans): its filled slots in partial-key order and the next to visit.
pub(crate) struct Frame {
    pub addr: GlobalAddr,
    /// The path position its slots discriminate on.
    pub p: usize,
    /// Every path byte before `p` equals the scan's `from`.
    pub border: bool,
    /// The node image's slot words (a buffer recycled per thread).
    slots: Slots,
    /// Indices into `slots` of the children to visit, in partial-key order
    /// (a node has at most 256 slots; inline, so a Node256 root opened on
    /// every scan allocates nothing: issue 32).
    order: SmallVec<[u8; 256]>,
    pub k: usize,
}

impl Frame {
    /// The cursor of its child in slot `i`, holding `word`.
    pub fn child(&self, i: usize, word: u64) -> Cursor {
        Cursor::child(self.addr, i, word, self.p + 1)
    }

    /// Children to visit.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// The `k`-th child to visit: `(slot index, slot word)`.
    pub fn kid(&self, k: usize) -> (usize, u64) {
        let i = self.order[k] as usize;
        (i, self.slots[i])
    }
}

/// What [`SmartTree::open_slot`] found. A `Node` is large (its children
/// inline) and moves once, onto the walk's stack: boxing it would be the
/// allocation per node the stack exists to avoid.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Opened {
    Nothing,
    /// A leaf's (or Dolphin object's) slot word.
    Leaf(u64),
    Node(Frame),
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
            self.walk(&mut w, Cursor::root(self.cfg.root_slot, root))
                .await?;
        }
        Ok(())
    }

    /// The depth-first walk from the root slot `root`: the nodes on the way
    /// down are [`Frame`]s on a stack (no boxed recursion, so no allocation
    /// per node: issue 32), each visiting its children in partial-key order
    /// until `w` is full; a run of leaf children is READ in one round.
    async fn walk(&self, w: &mut Walk<'_>, root: Cursor) -> Result<(), ArtError> {
        let mut stack: SmallVec<[Frame; 4]> = SmallVec::new();
        let len = w.from.len();
        let mut next = Some((root, true));
        loop {
            if let Some((c, border)) = next.take() {
                match self.open_slot(c, w.from, len, border).await? {
                    Opened::Nothing => {}
                    Opened::Leaf(word) => {
                        self.emit_leaves(w, std::iter::once(word), border).await?
                    }
                    Opened::Node(f) => stack.push(f),
                }
            }
            let Some(f) = stack.last_mut() else {
                return Ok(());
            };
            if f.k >= f.len() || w.out.len() >= w.count {
                stack.pop();
                continue;
            }
            let (i, s) = f.kid(f.k);
            let on_border = f.border && s as u8 == w.from[f.p];
            if matches!(Slot::decode(s), Slot::Leaf { .. }) {
                // A run of leaf children, READ in one round (no more of
                // them than items still wanted).
                // The run is the frame's children `first..f.k`, read where
                // they are (a copy spilled an inline list of 16 on nodes
                // with longer runs of leaves).
                let want = w.count - w.out.len();
                let first = f.k;
                let mut run_border = on_border;
                f.k += 1;
                while f.k < f.len()
                    && f.k - first < want
                    && matches!(Slot::decode(f.kid(f.k).1), Slot::Leaf { .. })
                {
                    let s = f.kid(f.k).1;
                    run_border |= f.border && s as u8 == w.from[f.p];
                    f.k += 1;
                }
                let (f, last) = (&*f, f.k);
                let run = (first..last).map(|k| f.kid(k).1);
                self.emit_leaves(w, run, run_border).await?;
            } else {
                f.k += 1;
                next = Some((f.child(i, s), on_border));
            }
        }
    }

    /// What the slot at `c` names, for a walk towards `from` (`len`: the
    /// longest path; `border`: every path byte before `c.depth` equals
    /// `from`'s): nothing (empty, or a node whose keys all lie before
    /// `from`), a leaf's slot word, or the node READ (again after its slot,
    /// if a header split moved it) with its children in partial-key order,
    /// those before `from` left out on the border. Shared with Dolphin's
    /// scan.
    pub(crate) async fn open_slot(
        &self,
        mut c: Cursor,
        from: &[u8],
        len: usize,
        border: bool,
    ) -> Result<Opened, ArtError> {
        let d = c.depth;
        for _ in 0..MAX_RETRIES {
            let (addr, ty) = match Slot::decode(c.word) {
                Slot::Empty => return Ok(Opened::Nothing),
                Slot::Leaf { .. } => return Ok(Opened::Leaf(c.word)),
                Slot::Internal { addr, ty, .. } => (addr, ty),
            };
            let Some((n, s)) = self.read_internal(&mut c, addr, ty, d, len).await? else {
                continue;
            };
            let pre = &n.header.prefix[s..];
            let p = d + pre.len();
            let mut border = border;
            if border {
                match pre.cmp(&from[d..p]) {
                    std::cmp::Ordering::Less => return Ok(Opened::Nothing),
                    std::cmp::Ordering::Greater => border = false,
                    std::cmp::Ordering::Equal => {}
                }
            }
            let slots = n.slots;
            // A node holds at most 256 slots (`layout::MAX_TYPE`).
            debug_assert!(slots.len() <= 256);
            let mut order: SmallVec<[u8; 256]> = slots
                .iter()
                .take_while(|&&s| s != 0)
                .enumerate()
                .filter(|&(_, &s)| !border || s as u8 >= from[p])
                .map(|(i, _)| i as u8)
                .collect();
            order.sort_by_key(|&i| slots[i as usize] as u8);
            return Ok(Opened::Node(Frame {
                addr,
                p,
                border,
                slots,
                order,
                k: 0,
            }));
        }
        Err(ArtError::Corrupt(c.slot_a))
    }

    /// READs the leaves the slot words `run` name (in key order) in one
    /// round and emits the valid ones (those at or past `from` if `border`).
    async fn emit_leaves(
        &self,
        w: &mut Walk<'_>,
        run: impl Iterator<Item = u64> + Clone,
        border: bool,
    ) -> Result<(), ArtError> {
        let addr = |s: u64| match Slot::decode(s) {
            Slot::Leaf { addr, .. } => addr,
            _ => unreachable!("a run holds leaf slots only"),
        };
        let n = self.leaf.bytes() as u32;
        // One round, its storage recycled (a run can be 100 leaves long).
        let mut round = read_round(run.clone().map(|s| (addr(s), n))).await;
        for (s, b) in run.zip(round.drain()) {
            let l = match self.validate_leaf(&b?) {
                Some((l, _)) => l,
                None => {
                    // Torn: READ it again until it validates, as
                    // `read_leaf` does.
                    yield_now().await;
                    self.read_leaf(addr(s)).await?.0
                }
            };
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
