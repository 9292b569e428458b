//! Locking the node that covers a key ([`FgTree::lock_covering`]): lock,
//! READ the node once under the lock, and move right along sibling
//! pointers while the key is beyond its high fence (B-link rules; Sherman
//! §4.2, Ziegler et al. §4.2), or give up for a restart from the root.

use crate::node::{Node, View};
use crate::node_read::ShermanCache;
use crate::tree::{FgTree, TreeError};
use dm_runtime::lock::Held;
use dm_verbs::GlobalAddr;

impl FgTree {
    /// Locks the node at `a` and READs it under the lock. On a READ error
    /// the lock is released, so the node is not left locked for everyone
    /// else (best effort: with a broken QP the unlock fails too).
    pub(crate) async fn lock_read(&self, a: GlobalAddr) -> Result<(Held<'_>, Node), TreeError> {
        let held = self.lock(a).await?;
        match self.read_node_locked(a).await {
            Ok(n) => Ok((held, n)),
            Err(e) => {
                let _ = self.release(held, Vec::new()).await;
                Err(e)
            }
        }
    }

    /// Locks the node covering `key` at `level` starting from `a` (moving right
    /// along sibling pointers under B-link rules) and returns it with a fresh image.
    /// `None`: the node at `a` no longer covers `key` from the left; restart from the root.
    /// `from_cache`: `a` came from the index cache (for [`ShermanCache::Authors`],
    /// under which a cached leaf left behind by a split also ends in `None`).
    pub(crate) async fn lock_covering(
        &self,
        a: GlobalAddr,
        key: &[u8],
        level: u8,
        from_cache: bool,
    ) -> Result<Option<(GlobalAddr, Node, Held<'_>)>, TreeError> {
        Ok(self
            .lock_covering_image(a, key, level, false, from_cache)
            .await?
            .map(|(a, img, held)| {
                let n = Node::decode(&self.g, &img).expect("View::new accepted the image");
                (a, n, held)
            }))
    }

    /// [`FgTree::lock_covering`] with the node's validated image, not
    /// decoded (a warm update of a present key needs no `Node`: issue 32).
    ///
    /// `for_key`: validate the image as [`View::for_key`] does for `key`
    /// (in an unsorted leaf, Sherman §4.4, the lowest slot holding `key`
    /// under a matching check word, or every slot when `key` is absent)
    /// instead of every slot ([`View::new`]). Under the lock no other
    /// writer changes the leaf, so a slot that does not validate can only
    /// be another key's entry from a WRITE cut short (lib.rs, "A compute
    /// server that dies"), which an update of `key`'s own slot leaves as
    /// it is; an absent key still needs every slot whole. Take the image
    /// through [`View::validated_for`] then, never [`View::validated`].
    /// Hashing every slot of a 1 KB leaf was a quarter of a loopback
    /// Sherman update's CPU (docs/experiments/allocs-asserted.md).
    ///
    /// `from_cache`: `a` is the index cache's; under [`ShermanCache::Authors`]
    /// a key beyond its high fence then releases the lock and ends in `None`
    /// (the caller drops the entry and goes from the root), as the published
    /// Sherman's `leaf_page_store` does with `from_cache`; otherwise the
    /// lock moves right to the sibling.
    pub(crate) async fn lock_covering_image(
        &self,
        mut a: GlobalAddr,
        key: &[u8],
        level: u8,
        for_key: bool,
        from_cache: bool,
    ) -> Result<Option<(GlobalAddr, dm_runtime::ReadBuf, Held<'_>)>, TreeError> {
        let stale_ends = from_cache && self.cfg.sherman_cache == ShermanCache::Authors;
        loop {
            // `NodeLocks::lock_and_read` directly, not through
            // `FgTree::lock` and `NodeLocks::lock`: two async layers fewer
            // to resume on every wake of the lock's verbs (issue 32).
            let (held, _) = self.locks.lock_and_read(a, None).await?;
            // `read_until` directly, not through a wrapper future (issue 32).
            let img = self
                .read_until_as(a, true, |b| match for_key {
                    true => View::for_key(&self.g, b, key).map(drop),
                    false => View::new(&self.g, b).map(drop),
                })
                .await;
            let img = match img {
                Ok((b, ())) => b,
                Err(e) => {
                    let _ = self.release(held, []).await;
                    return Err(e);
                }
            };
            let v = View::validated_for(&self.g, &img, key);
            if v.level() != level || v.below_low(key) {
                self.release(held, []).await?;
                return Ok(None);
            }
            if v.beyond_high(key) {
                self.release(held, []).await?;
                if v.sibling().is_null() || stale_ends {
                    return Ok(None);
                }
                a = v.sibling();
                continue;
            }
            return Ok(Some((a, img, held)));
        }
    }
}
