//! Node growth (SMART §4.1.2, Fig. 8b, 8e): a normal insert CASes a leaf
//! into the first empty slot of a node, going on past the capacity, and the
//! type switch then grows the node in place by CAS on its header (and, as a
//! READ-size hint, on the parent slot's type bits).

use super::leaf::Spare;
use super::split::internal_word;
use crate::cursor::Cursor;
use crate::error::ArtError;
use crate::layout::{capacity, slot_addr, type_for_index, Header, Slot};
use crate::tree::SmartTree;
use dm_runtime::cas;
use dm_verbs::GlobalAddr;
use futures::future::join;

impl SmartTree {
    /// Normal insert (Fig. 8b) of a leaf under partial key `path[p]` into
    /// the first empty slot of the node at `addr` (image `n`, named by `c`;
    /// its slots discriminate on path byte `p`), going on past the capacity
    /// (type switch, Fig. 8e) while CASes return others. `None` when
    /// inserted (this CS's ART cache entry of the node takes the slots the
    /// CASes saw filled: [`crate::cache::ArtCache::note_filled`]);
    /// `Some((slot, word))` when someone inserted partial key `path[p]`
    /// first: the walk follows that slot, once the header covers it (a
    /// slot past the capacity is grown into here, [`Self::type_switch`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn normal_insert(
        &self,
        spare: &mut Spare,
        key: &[u8],
        value: u64,
        path: &[u8],
        p: usize,
        addr: GlobalAddr,
        n: &crate::tree::NodeImage,
        c: Cursor,
    ) -> Result<Option<(GlobalAddr, u64)>, ArtError> {
        let b = path[p];
        let first = n.first_empty().unwrap_or(n.slots.len());
        let mut seen = smallvec::SmallVec::<[u64; 8]>::new();
        let mut i = first;
        while i < 256 {
            let sa = slot_addr(addr, i);
            let la = self.place_leaf(spare, key, value, sa).await?;
            let w = self.leaf_slot(b, la)?;
            let got = cas(sa, 0, w).await?;
            if crate::tree::publish_took(got, 0, w) {
                if i >= capacity(n.header.ty) {
                    self.type_switch(addr, i, n.header_word, c, path).await?;
                }
                if let Some(k) = &self.cache {
                    seen.push(w);
                    k.note_filled(&path[..p], addr, first, &seen);
                }
                return Ok(None);
            }
            if got as u8 == b {
                spare.lost(0, None);
                // A writer of this partial key filled the slot first. Past
                // the capacity, readers do not see the slot until the
                // header grows: that writer may not have switched it yet
                // (its CAS in flight, or its CS died in between), so this
                // one does before it writes under the slot, or its write
                // would return unseen (`check --index lockfree-art --faults
                // torn,delay,unreported,replay,redo,writeback,crash
                // --clients 16 --keys 8 --cores 4 --first-seed 701319`:
                // an insert, then its own update found the key absent).
                if i >= capacity(n.header.ty) {
                    self.type_switch(addr, i, n.header_word, c, path).await?;
                }
                return Ok(Some((sa, got)));
            }
            seen.push(got);
            i += 1;
        }
        Err(ArtError::Corrupt(addr))
    }
    /// Node type switch (Fig. 8e) after a leaf went into slot `i` at or past
    /// the capacity: the header's type becomes at least `type_for_index(i)`
    /// (CAS loop from the image's header word) and, as a READ-size hint, the
    /// parent slot's type bits too (one attempt), both in one round. The
    /// insert returns only when the header says so, so a reader after it
    /// READs the new slot. A hint CAS that took also goes into this CS's
    /// cached copy of the parent slot ([`SmartTree::refresh_type_hint`]).
    pub(crate) async fn type_switch(
        &self,
        node: GlobalAddr,
        i: usize,
        header_word: u64,
        c: Cursor,
        path: &[u8],
    ) -> Result<(), ArtError> {
        let want = type_for_index(i).ok_or(ArtError::Corrupt(node))?;
        let header = async {
            let mut hw = header_word;
            loop {
                let Some(h) = Header::decode(hw) else {
                    return Err(ArtError::Corrupt(node));
                };
                if h.ty >= want {
                    return Ok(());
                }
                let got = cas(node.add(8), hw, Header { ty: want, ..h }.encode()).await?;
                if got == hw {
                    return Ok(());
                }
                hw = got;
            }
        };
        let hint = async {
            if let Slot::Internal { partial, ty, addr } = Slot::decode(c.word) {
                if addr == node && ty < want {
                    let w = internal_word(partial, want, node)?;
                    let took = cas(c.slot_a, c.word, w).await? == c.word;
                    let drops = self.cache.as_ref().is_some_and(|k| k.drops_stale_hints());
                    if took && !drops {
                        self.refresh_type_hint(path, &c, want);
                    }
                }
            }
            Ok::<(), ArtError>(())
        };
        let (h, s) = join(header, hint).await;
        h?;
        s
    }
}
