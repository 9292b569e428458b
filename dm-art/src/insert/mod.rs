//! Insert, update and remove (SMART §4.1.2 and §4.5, Algorithm 2; Fig. 8):
//! internal nodes change only by CAS on one 8-byte word (normal insert,
//! leaf split, header split, node type switch); a leaf changes in place
//! under its rear lock, released by the WRITE that stores the new item.
//! This file holds the public operations and write combining; the walk to
//! the key's slot is in `descent`, new leaves and in-place updates in
//! `leaf`, normal insert and type switch in `grow`, leaf and header splits
//! in `split`.
//!
//! ## Invariants the lock-free cases rely on
//! 1. **Slots are never emptied**, so a node's filled slots form a prefix:
//!    every inserter CASes the first empty slot it saw and, when that CAS
//!    returns another partial key, the next one. An inserter therefore meets
//!    every filled slot before it fills one, and two slots of a node never
//!    carry the same partial key (the digest's duplicate-partial hazard comes
//!    from reusing holes left by deletes; `remove` here leaves none).
//! 2. **A slot's partial key never changes**; its word changes only from a
//!    leaf or node to a new node that contains it (splits), or in its type
//!    bits (a hint; the node header's type is authoritative).
//! 3. **A node's header keeps its end position** `depth + prefix length`;
//!    the second CAS of a header split only moves `depth` forward and drops
//!    the leading prefix bytes (a read-modify-CAS loop on the whole word, as
//!    plain RDMA has no masked CAS), so concurrent trims and type switches
//!    compose in any order.
//! 4. **Nothing is written under a slot readers cannot see**: readers READ
//!    a node's slots up to its header's capacity, and a slot filled past it
//!    becomes visible when the header grows (type switch). The writer that
//!    filled it grows the header before it returns, and so does a writer
//!    that follows it (same partial key) before it writes under it: the
//!    first writer's switch may still be in flight, or its CS dead.
//!
//! ## Removal
//! `remove` clears the leaf's valid bit under its lock (the digest's
//! Algorithm 3 also CASes the slot to empty and merges nodes; that reuse of
//! slots is what breaks invariant 1, and the published code has no delete).
//! The removed leaf stays as a tombstone in its slot and is revived in place
//! by a later insert of the same key; a leaf split keeps it like any leaf.
//! Memory of removed keys is therefore not returned, as nothing in SMART is.

mod descent;
mod grow;
mod leaf;
mod split;

pub(crate) use leaf::{next_leaf, Maybe, Mode, Spare};
pub(crate) use split::{internal_word, node_image};

use crate::error::ArtError;
use crate::rdwc::{Join, WriteResult};
use crate::tree::SmartTree;

impl SmartTree {
    /// Inserts `key` with `value`, or overwrites its value (upsert).
    /// Verbs: the traversal's READs (none past a cached parent: see
    /// `search`), then one of: an in-place
    /// update (leaf READ, lock CAS, one WRITE that also unlocks: 3 RTTs past
    /// the parent), a normal insert (leaf WRITE + slot CAS), a leaf or header
    /// split (one round of parallel WRITEs + one CAS, then the reverse
    /// pointer and header fix-ups in one round), or a type switch (normal
    /// insert behind the capacity, then header and parent-slot CAS in one round).
    ///
    /// With write combining (SMART §4.2.3, `rdwc`), a same-key write of
    /// another core of this CS may carry this value in its WRITE instead.
    pub async fn insert(&self, key: &[u8], value: u64) -> Result<(), ArtError> {
        self.combined(key, Mode::Upsert(value)).await.map(|_| ())
    }

    /// Overwrites the value of `key` if present; `false` (and nothing
    /// written) if absent.
    /// The combined write's own future, not one that wraps it (issue 32: a
    /// layer to resume on every wake of an update's verbs).
    pub fn update<'a>(
        &'a self,
        key: &'a [u8],
        value: u64,
    ) -> impl std::future::Future<Output = Result<bool, ArtError>> + 'a {
        self.combined(key, Mode::Update(value))
    }

    /// Removes `key`; `false` if it was absent. See the module docs: the
    /// leaf stays as a tombstone.
    pub async fn remove(&self, key: &[u8]) -> Result<bool, ArtError> {
        self.write_op(key, &self.path(key)?, Mode::Remove, None)
            .await
    }

    /// An upsert or update through this CS's write combining, if any: lead
    /// (run the remote write, WRITE the WCB's latest value if the leaf is
    /// updated in place), follow (wait for a leader whose WRITE covers this
    /// value), or, on a hash conflict, run alone.
    async fn combined(&self, key: &[u8], mode: Mode) -> WriteResult {
        let path = self.path(key)?;
        let (Some(t), Mode::Upsert(v) | Mode::Update(v)) = (&self.rdwc, mode) else {
            return self.write_op(key, &path, mode, None).await;
        };
        self.free_orphans(t).await?;
        let lead = match t.join_write(key, v) {
            Join::Alone => return self.write_op(key, &path, mode, None).await,
            Join::Lead(l) => l,
            Join::Follow(w) => match w.wait().await {
                Ok(r) => return r,
                Err(l) => match l.take_handed() {
                    // E-HOCL: the writer before it left it the rear lock.
                    Some(h) => {
                        let r = self.handed_write(h, mode, &l).await;
                        l.finish_write(&r);
                        return r;
                    }
                    None => l,
                },
            },
        };
        let r = self.write_op(key, &path, mode, Some(&lead)).await;
        lead.finish_write(&r);
        r
    }
}
