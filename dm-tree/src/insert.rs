//! Insert (upsert), update, node splits and root growth
//! (Ziegler et al. §5.2; FG+ locking as in Sherman §5).
//!
//! A writer takes the leaf's address from the cached leaf parent (or a
//! traversal to level 1), locks the leaf (CAS), READs it and checks its fences
//! under the lock, changes it, writes it back and unlocks with a WRITE: 4
//! round trips without a split on FG+, 3 with command combination (see
//! [`crate::Techniques`] for the rungs of Sherman's ladder, [`dm_runtime::lock`]
//! for the locks). A full node splits
//! in half: the new right node is written first (its own WRITE, completed),
//! then the left node with its new high fence and sibling pointer, so a reader
//! always finds moved keys by following the sibling pointer (B-link). The
//! separator then goes into the parent, found by a fresh traversal.
//!
//! Root growth: only the splitter of the current root node (the address the
//! root pointer holds) may grow the tree, by CAS on the root pointer to a new
//! root whose children are the old root and its new sibling. The splitter of a
//! node further right at the top level (possible only while that growth is in
//! progress) yields until the root has grown, then inserts into it. Growing
//! from any other node would hang the old root's left part off nothing.

use crate::nam::Design;
use crate::node::{insert_sorted_in_place, set_sorted_value, Fence, Loc, Node, NodeKey, View};
use crate::search::Found;
use crate::tree::{FgTree, TreeError};
use dm_runtime::lock::Held;
use dm_runtime::{write, yield_now};
use dm_verbs::{GlobalAddr, VerbError};
use std::future::Future;
use std::pin::Pin;

impl FgTree {
    /// Inserts `key -> value`, replacing the value if the key exists.
    pub async fn insert(&self, key: &[u8], value: u64) -> Result<(), TreeError> {
        self.upsert(key, value, true).await.map(|_| ())
    }

    /// Replaces the value of an existing key; `false` if the key is absent.
    /// The upsert's own future, not one that wraps it (issue 32: a layer to
    /// resume on every wake of an update's verbs).
    pub fn update<'a>(
        &'a self,
        key: &'a [u8],
        value: u64,
    ) -> impl Future<Output = Result<bool, TreeError>> + 'a {
        self.upsert(key, value, false)
    }

    /// Checks `key`'s width, then updates it (or inserts it if
    /// `may_insert`): `true` if it was present.
    async fn upsert(&self, key: &[u8], value: u64, may_insert: bool) -> Result<bool, TreeError> {
        self.check_key(key)?;
        if self.cfg.design == Design::Coarse {
            return self.nam_upsert(key, value, may_insert).await;
        }
        loop {
            let (start, cached) = self.leaf_for_write(key).await?;
            let Some((a, img, held)) = self
                .lock_covering_image(start, key, 0, true, cached.is_some())
                .await?
            else {
                self.drop_stale(key, cached);
                continue;
            };
            self.moved_right(key, start, a, cached);
            // A present key: its value changes in place, nothing decoded. An
            // absent one goes into an unsorted leaf's free slot, or not at
            // all, also without a decode (issue 32: the decode was about
            // three allocations of a Sherman insert); `View::free_slot`
            // gives the slot the decoded node would (`Node::free_slot`).
            let view = View::validated_for(&self.g, &img, key);
            let slot = match view.locate(key) {
                Some(Loc::Slot(s, _)) => Some(s),
                Some(Loc::Sorted(off, _)) => {
                    let mut img = img;
                    set_sorted_value(&mut img, off, value);
                    self.write_image_unlock(held, a, img).await?;
                    return Ok(true);
                }
                None if !may_insert => {
                    drop(img);
                    self.release(held, Vec::new()).await?;
                    return Ok(false);
                }
                None => view.free_slot(),
            };
            if let Some(s) = slot {
                let version = view.version();
                drop(img);
                self.write_slot_unlock(held, a, version, s, Some((key, value)))
                    .await?;
                return Ok(true);
            }
            // Into a sorted leaf with room: the image's entries move over in
            // place (`insert_sorted_in_place`), the whole node written back
            // as `write_back_unlock` writes it.
            let mut img = img;
            if insert_sorted_in_place(&self.g, &mut img, key, value) {
                self.write_image_unlock(held, a, img).await?;
                return Ok(true);
            }
            // `View::for_key` checked every slot.
            let mut n = Node::decode(&self.g, &img).expect("View::for_key accepted the image");
            drop(img);
            // The slot to write back alone (unsorted leaf with room, §4.4).
            let slot = match n.find(key) {
                Ok(i) => {
                    n.entries[i].1 = value;
                    n.slots.get(i).copied()
                }
                Err(i) => {
                    n.entries.insert(i, (NodeKey::from_slice(key), value));
                    let s = if n.unsorted {
                        n.free_slot(&self.g)
                    } else {
                        None
                    };
                    if let Some(s) = s {
                        n.slots.insert(i, s);
                    }
                    s
                }
            };
            match slot {
                Some(s) if n.unsorted => {
                    self.write_slot_unlock(held, a, n.version, s, Some((key, value)))
                        .await?
                }
                _ if n.entries.len() <= n.capacity(&self.g) => {
                    self.write_back_unlock(held, a, n).await?
                }
                _ => self.split(held, a, n).await?,
            }
            return Ok(true);
        }
    }

    /// Splits the locked, over-full node `n` at `a`, unlocks it and inserts the
    /// separator into the parent level.
    fn split<'a>(
        &'a self,
        held: Held<'a>,
        a: GlobalAddr,
        mut n: Node,
    ) -> Pin<Box<dyn Future<Output = Result<(), TreeError>> + 'a>> {
        Box::pin(async move {
            let ra = match self.alloc_node_near(n.level, a).await {
                Ok(ra) => ra,
                Err(e) => {
                    // Nothing changed remotely: release the lock and report.
                    self.release(held, Vec::new()).await?;
                    return Err(e);
                }
            };
            let (sep, right) = n.split_right(ra);
            // A whole-node write: readers must not mix it with the old image's slots.
            n.version = n.version.wrapping_add(1);
            // The new right node is written before the node that points to it:
            // one doorbell on one QP (in order) when both are on the lock's MS
            // and commands are combined, else completed first (see `release`).
            let left = n.encode_after_lock(&self.g);
            self.release(held, vec![(ra, right.encode(&self.g)), (a.add(8), left)])
                .await?;
            // The split is published: the B-link sibling chain reaches `ra`, so
            // the caller's insert has taken effect. If an upper level cannot get
            // memory for its own split or the root growth, the separator stays
            // out of the parents (searches take one more sibling hop there) and
            // the insert still reports success: an error must mean "not inserted".
            let parent = if self.cfg.design == Design::Hybrid {
                // The hybrid's upper levels live on the partition's MS (§5).
                self.nam_insert_sep(&sep, ra).await
            } else {
                self.insert_parent(n.level + 1, a, sep, ra).await
            };
            match parent {
                Err(TreeError::Verb(VerbError::MsOutOfMemory { .. })) => Ok(()),
                r => r,
            }
        })
    }

    /// Writes back the node image `img` changed in place (everything after
    /// its in-node lock word, as [`FgTree::write_back_unlock`] writes it)
    /// and releases `held`. The image's READ buffer goes back to the pool
    /// before the WRITE is posted.
    async fn write_image_unlock(
        &self,
        held: Held<'_>,
        a: GlobalAddr,
        img: dm_runtime::ReadBuf,
    ) -> Result<(), TreeError> {
        let mut b = dm_verbs::buf::take(self.g.node_bytes - 8);
        b.extend_from_slice(&img[8..]);
        drop(img);
        if self.cfg.node_read == crate::NodeRead::Optimistic {
            return self.release(held, [(a.add(8), b)]).await;
        }
        // `NodeLocks::release` directly (as `write_slot_unlock`; issue 32).
        Ok(self.locks.release(held, [(a.add(8), b)]).await?)
    }

    /// Inserts separator `sep -> right` at `level`, after `left` split.
    pub(crate) async fn insert_parent(
        &self,
        level: u8,
        left: GlobalAddr,
        sep: NodeKey,
        right: GlobalAddr,
    ) -> Result<(), TreeError> {
        let mut round = 0u64;
        // Since when the root has been another node below `level`.
        let mut root_below_since: Option<u64> = None;
        loop {
            round += 1;
            if round.is_multiple_of(1 << 14) {
                tracing::warn!(
                    level,
                    ?left,
                    ?right,
                    round,
                    "separator still not in a parent"
                );
            }
            match self.find(&sep, level).await? {
                Found::RootBelow(root)
                    if root == left || self.root_grower_dead(&mut root_below_since) =>
                {
                    // `left` was the root: grow it (Lehman & Yao). Or the
                    // root split and its splitter died before it grew the
                    // root (issue 33): grow it in the dead CS's place, with
                    // the nodes between the root and `left` reached by
                    // moving right, as B-link readers do.
                    let mut r = Node::empty(level, Fence::NegInf, Fence::PosInf);
                    r.entries = vec![
                        (NodeKey::from_elem(0, self.cfg.key_bytes), root.to_u64()),
                        (sep.clone(), right.to_u64()),
                    ];
                    let ra = self.alloc_node_near(level, left).await?;
                    write(ra, r.encode(&self.g)).await?;
                    if self.cas_root(root, ra).await? {
                        return Ok(());
                    }
                    // Lost a race to grow the root (cannot happen while only the root's
                    // splitter grows it, but stay safe): the node ra is leaked; retry.
                }
                // The root's splitter is growing it: wait for that.
                Found::RootBelow(_) => yield_now().await,
                Found::Node(pa, _) => {
                    let Some((pa, mut p, held)) =
                        self.lock_covering(pa, &sep, level, false).await?
                    else {
                        continue;
                    };
                    match p.find(&sep) {
                        Ok(i) => p.entries[i].1 = right.to_u64(),
                        Err(i) => p.entries.insert(i, (sep.clone(), right.to_u64())),
                    }
                    if p.entries.len() <= p.capacity(&self.g) {
                        return self.write_back_unlock(held, pa, p).await;
                    }
                    return self.split(held, pa, p).await;
                }
            }
        }
    }

    /// Whether the CS that split the root died before it grew the root: the
    /// root has stayed below the level a separator waits for for a lease
    /// (`since`: when this waiter first saw it so). Never without a
    /// membership (no lease: wait as before, the grower is alive).
    fn root_grower_dead(&self, since: &mut Option<u64>) -> bool {
        let Some(m) = self.locks.member() else {
            return false;
        };
        let now = dm_runtime::now_ns();
        let t = *since.get_or_insert(now);
        now.saturating_sub(t) >= m.lease().lease_ns
    }
}
