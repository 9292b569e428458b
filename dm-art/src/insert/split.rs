//! Leaf split and header split (SMART §4.1.2, Fig. 8c-d): new internal
//! nodes WRITTEN in one round with the new leaf, published by one CAS of the
//! parent slot, then the reverse pointer and header fix-ups; and the images
//! and slot words of new internal nodes (also used by Dolphin's SMOs).

use super::leaf::Spare;
use crate::cursor::Cursor;
use crate::error::ArtError;
use crate::layout::{capacity, slot_addr, Header, Leaf, Slot};
use crate::tree::SmartTree;
use dm_runtime::{cas, join_inline, write};
use dm_verbs::GlobalAddr;
use futures::future::join;
use smallvec::{smallvec, SmallVec};

/// A new node's slot words (two in a chain's last node, one before it).
type NewSlots = SmallVec<[u64; 2]>;

impl SmartTree {
    /// Leaf split (Fig. 8c): the new key and the leaf at `c` share
    /// `lcp` path bytes past `c.depth`; a chain of new nodes holds them
    /// (6 header bytes + 1 slot byte per intermediate node, at most 6 header
    /// bytes and two leaf slots in the last), WRITTEN in one round with the
    /// new leaf, then published by one CAS of the parent slot. `None` when
    /// published, else the slot word that CAS returned (retry from it).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn leaf_split(
        &self,
        spare: &mut Spare,
        path: &[u8],
        key: &[u8],
        value: u64,
        c: Cursor,
        old: GlobalAddr,
        l: &Leaf,
    ) -> Result<Option<u64>, ArtError> {
        let old_path = self.path(&l.key)?;
        let d = c.depth;
        let lcp = (d..path.len())
            .take_while(|&i| path[i] == old_path[i])
            .count();
        if d + lcp >= path.len() {
            return Err(ArtError::Corrupt(old));
        }
        let la = self.spare_leaf(spare).await?;
        // Chain node k at depth pos_k; the last one discriminates at `end`.
        // Inline: a chain is rarely longer than a few nodes (issue 32).
        let mut depths: smallvec::SmallVec<[usize; 4]> = smallvec::smallvec![d];
        let mut rem = lcp;
        while rem > 6 {
            depths.push(depths.last().unwrap() + 7);
            rem -= 7;
        }
        let mut nodes: smallvec::SmallVec<[GlobalAddr; 4]> = smallvec::SmallVec::new();
        for _ in 0..depths.len() {
            nodes.push(self.spare_node(spare).await?);
        }
        let end = d + lcp;
        let new_word = internal_word(c.word as u8, 1, nodes[0])?;
        let mut images: SmallVec<[(GlobalAddr, Vec<u8>); 5]> = SmallVec::new();
        // (end, node, slots) of each new node, for this CS's ART cache.
        let mut fills: SmallVec<[(usize, GlobalAddr, NewSlots); 4]> = SmallVec::new();
        for (k, (&na, &pos)) in nodes.iter().zip(&depths).enumerate() {
            let rev = if k == 0 {
                c.slot_a
            } else {
                slot_addr(nodes[k - 1], 0)
            };
            let last = k + 1 == nodes.len();
            let plen = if last { end - pos } else { 6 };
            let slots: NewSlots = if last {
                smallvec![
                    self.leaf_slot(old_path[end], old)?,
                    self.leaf_slot(path[end], la)?,
                ]
            } else {
                smallvec![internal_word(path[pos + 6], 1, nodes[k + 1])?]
            };
            let h = Header {
                depth: pos as u8,
                ty: 1,
                prefix: crate::layout::Prefix::from_slice(&path[pos..pos + plen]),
            };
            images.push((na, node_image(rev, &h, &slots)));
            if self.cache.is_some() {
                fills.push((pos + plen, na, slots));
            }
        }
        let last = *nodes.last().unwrap();
        images.push((la, self.new_leaf_image(key, value, slot_addr(last, 1))));
        for r in join_inline(images.into_iter().map(|(a, b)| write(a, b))).await {
            r?;
        }
        // ROWEX (the ART baseline): the node holding the slot is locked
        // around the publishing CAS only; the new nodes are WRITTEN already.
        let publish = async { Ok(cas(c.slot_a, c.word, new_word).await?) };
        let got = self.under_rowex(&[c.owner], publish).await?;
        if !crate::tree::publish_took(got, c.word, new_word) {
            spare.lost(0, None);
            spare.nodes.extend(nodes);
            return Ok(Some(got));
        }
        // The old leaf's reverse pointer now names its slot in the last node
        // (signalled and awaited before returning, unlike the artifact: digest
        // §5.2 pitfall on unsignalled reverse-pointer CASes).
        write(old, dm_verbs::buf::le64(slot_addr(last, 0).to_u64())).await?;
        spare.leaf = None;
        self.cache_published(path, &c, new_word, &fills);
        Ok(None)
    }

    /// Header split (Fig. 8d): the key leaves the node at `c` inside its
    /// (effective) prefix `pre` at index `j`. A new 4-slot node takes
    /// `pre[..j]` and points to the old node (partial `pre[j]`) and to the
    /// new leaf, both WRITTEN in one round; one CAS of the parent slot
    /// publishes it; then the old node's header drops `pre[..=j]` (CAS loop,
    /// invariant 3) and its reverse pointer names the new node, in one round.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn header_split(
        &self,
        spare: &mut Spare,
        path: &[u8],
        key: &[u8],
        value: u64,
        c: Cursor,
        node: GlobalAddr,
        n: &crate::tree::NodeImage,
        pre: &[u8],
        j: usize,
    ) -> Result<Option<u64>, ArtError> {
        let d = c.depth;
        let la = self.spare_leaf(spare).await?;
        let na = self.spare_node(spare).await?;
        let h = Header {
            depth: d as u8,
            ty: 1,
            prefix: crate::layout::Prefix::from_slice(&pre[..j]),
        };
        let slots = [
            internal_word(pre[j], n.header.ty, node)?,
            self.leaf_slot(path[d + j], la)?,
        ];
        let (a, b) = join(
            write(na, node_image(c.slot_a, &h, &slots)),
            write(la, self.new_leaf_image(key, value, slot_addr(na, 1))),
        )
        .await;
        a?;
        b?;
        // ROWEX (the ART baseline): the parent and the node are locked
        // around the publishing CAS and the prefix trim.
        let publish = self.publish_header_split(c, na, node, n, d + j + 1);
        if let Some(got) = self.under_rowex(&[c.owner, node], publish).await? {
            spare.lost(0, None);
            spare.nodes.push(na);
            return Ok(Some(got));
        }
        spare.leaf = None;
        if self.cache.is_some() {
            let new_word = internal_word(c.word as u8, 1, na)?;
            self.cache_published(
                path,
                &c,
                new_word,
                &[(d + j, na, NewSlots::from_slice(&slots))],
            );
        }
        Ok(None)
    }

    /// This CS published new internal nodes by its own CAS of `c`'s slot
    /// to `new_word` (a leaf or header split): its ART cache entry of the
    /// slot's node takes the new word, and each new node (`(end, address,
    /// slot words)`) is admitted as if just READ, so the next
    /// walk through them READs only the leaf (issue 32 item 4).
    fn cache_published(
        &self,
        path: &[u8],
        c: &Cursor,
        new_word: u64,
        fills: &[(usize, GlobalAddr, NewSlots)],
    ) {
        let Some(k) = &self.cache else {
            return;
        };
        if c.depth > 0 {
            k.replace_word(&path[..c.depth - 1], c.owner, c.slot_a, c.word, new_word);
        }
        for (end, na, slots) in fills {
            k.insert(&path[..*end], *na, slots);
        }
    }

    /// The publishing half of a header split: the parent slot's CAS to the
    /// new node `na`, then the old node's header trimmed to start at depth
    /// `target` and its reverse pointer set, in one round. `Some(word)` if
    /// the CAS lost (nothing changed).
    pub(crate) async fn publish_header_split(
        &self,
        c: Cursor,
        na: GlobalAddr,
        node: GlobalAddr,
        n: &crate::tree::NodeImage,
        target: usize,
    ) -> Result<Option<u64>, ArtError> {
        let new = internal_word(c.word as u8, 1, na)?;
        let got = cas(c.slot_a, c.word, new).await?;
        if !crate::tree::publish_took(got, c.word, new) {
            return Ok(Some(got));
        }
        let target = target as u8;
        let trim = async {
            let mut hw = n.header_word;
            loop {
                let Some(h) = Header::decode(hw) else {
                    return Err(ArtError::Corrupt(node));
                };
                if h.depth >= target {
                    return Ok(());
                }
                let k = (target - h.depth) as usize;
                let nh = Header {
                    depth: target,
                    ty: h.ty,
                    prefix: crate::layout::Prefix::from_slice(&h.prefix[k.min(h.prefix.len())..]),
                };
                let got = cas(node.add(8), hw, nh.encode()).await?;
                if got == hw {
                    return Ok(());
                }
                hw = got;
            }
        };
        let rev = write(node, dm_verbs::buf::le64(slot_addr(na, 0).to_u64()));
        let (t, r) = join(trim, rev).await;
        t?;
        r?;
        Ok(None)
    }
}

/// The slot word naming internal node `a` of type `ty`.
pub(crate) fn internal_word(partial: u8, ty: u8, a: GlobalAddr) -> Result<u64, ArtError> {
    Slot::Internal {
        partial,
        ty,
        addr: a,
    }
    .encode()
    .map_err(|e| ArtError::BadConfig(format!("unaddressable node: {e:?}")))
}

/// The first `16 + 8 x 4` bytes of a new type-1 node: reverse pointer,
/// header, slots (the rest of the reserve is zero: fresh chunk memory, and
/// reused spare nodes were never published).
/// In a buffer of this thread's pool (`dm_verbs::buf`), which the WRITE
/// gives back.
pub(crate) fn node_image(rev: GlobalAddr, h: &Header, slots: &[u64]) -> Vec<u8> {
    let mut b = dm_verbs::buf::take(16 + 8 * capacity(1));
    b.extend_from_slice(&rev.to_u64().to_le_bytes());
    b.extend_from_slice(&h.encode().to_le_bytes());
    for k in 0..capacity(1) {
        b.extend_from_slice(&slots.get(k).copied().unwrap_or(0).to_le_bytes());
    }
    b
}
