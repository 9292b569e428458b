//! Search (SMART §4.5, Algorithm 1) without the ART cache: READ the root
//! slot, then one node per level, then the leaf.

use crate::layout::Slot;
use crate::tree::{slot_addr, ArtError, SmartTree, MAX_RETRIES};
use dm_verbs::GlobalAddr;

/// Where a traversal stands: the slot it follows (address and word as READ)
/// and the depth of the node or leaf that slot names (path bytes consumed).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor {
    pub slot_a: GlobalAddr,
    pub word: u64,
    pub depth: usize,
}

impl SmartTree {
    /// The cursor at the root slot (one 8-byte READ).
    pub(crate) async fn root_cursor(&self) -> Result<Cursor, ArtError> {
        Ok(Cursor {
            slot_a: self.cfg.root_slot,
            word: self.read_word(self.cfg.root_slot).await?,
            depth: 0,
        })
    }

    /// The value of `key`, if present. Verbs: READ of the root slot (8 B),
    /// one READ per internal level (`16 + 8 x capacity` bytes; a second one
    /// if the node grew since its slot was written), one READ of the leaf;
    /// a leaf image that fails its checksum is READ again.
    ///
    /// Linearizable: a slot names the only place a key with that path prefix
    /// can live, and a leaf's key never changes, so a validated leaf image
    /// with another key (or the valid bit clear) proves absence at the moment
    /// of that READ.
    pub async fn get(&self, key: &[u8]) -> Result<Option<u64>, ArtError> {
        let path = self.path(key)?;
        let mut c = self.root_cursor().await?;
        for _ in 0..MAX_RETRIES {
            match Slot::decode(c.word) {
                Slot::Empty => return Ok(None),
                Slot::Leaf { addr, .. } => {
                    let (l, _) = self.read_leaf(addr).await?;
                    return Ok((l.valid && l.key == key).then_some(l.value));
                }
                Slot::Internal { addr, ty, .. } => {
                    let d = c.depth;
                    let Some((n, s)) = self
                        .read_internal(c.slot_a, &mut c.word, addr, ty, d, path.len())
                        .await?
                    else {
                        continue;
                    };
                    let pre = &n.header.prefix[s..];
                    let p = c.depth + pre.len();
                    if path[c.depth..p] != *pre {
                        return Ok(None);
                    }
                    let Some((i, w)) = n.find(path[p]) else {
                        return Ok(None);
                    };
                    c = Cursor {
                        slot_a: slot_addr(addr, i),
                        word: w,
                        depth: p + 1,
                    };
                }
            }
        }
        Err(ArtError::Corrupt(c.slot_a))
    }
}
