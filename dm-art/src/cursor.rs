//! [`Cursor`]: where a traversal stands, the slot it follows and the word
//! it holds for that slot (READ, returned by a CAS, or taken from the ART
//! cache); shared by every walk (search, writes, scans, Dolphin) and by the
//! ART cache, whose entries remember the cursor that named their node.

use dm_verbs::GlobalAddr;

/// Where a traversal stands: the slot it follows (address and word as READ)
/// and the depth of the node or leaf that slot names (path bytes consumed).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor {
    pub slot_a: GlobalAddr,
    /// The internal node holding `slot_a` (the root slot's own address for
    /// the root slot): whose node lock guards the slot under the ART
    /// baseline's ROWEX (`baseline`).
    pub owner: GlobalAddr,
    pub word: u64,
    pub depth: usize,
    /// The word came from the ART cache, not from a READ of this operation:
    /// negative conclusions through it must be confirmed (`cache` docs).
    pub cached: bool,
}

impl Cursor {
    /// The root slot at `slot` holding `word` as READ (a walk's start; the
    /// slot is its own owner).
    pub fn root(slot: GlobalAddr, word: u64) -> Self {
        Cursor {
            slot_a: slot,
            owner: slot,
            word,
            depth: 0,
            cached: false,
        }
    }

    /// Slot `i` of the internal node at `node`, holding `word` as READ,
    /// naming what sits at path depth `depth`.
    pub fn child(node: GlobalAddr, i: usize, word: u64, depth: usize) -> Self {
        Cursor {
            slot_a: crate::layout::slot_addr(node, i),
            owner: node,
            word,
            depth,
            cached: false,
        }
    }

    /// Takes a word just READ (or returned by a CAS) from the same slot.
    pub fn fresh(&mut self, w: u64) {
        self.word = w;
        self.cached = false;
    }
}
