//! A miss below the cached path (§5.2, §6): the missed child is in flight
//! in the mapping table and its parent pinned until the miss ends
//! (`MissGuard`). A missed leaf is admitted with probability
//! [`super::DexConfig::leaf_admission`] (lazy admission, §5.3), else READ
//! into a scratch copy and written back at once if changed (a get, and an
//! update that inserts nothing, work on the validated image in place and
//! decode nothing: `scratch_in_place`); a missed inner node
//! at or below the offload level may be offloaded when the cost model votes
//! for it and nothing below it may be newer in this CS (`offload.rs`);
//! otherwise it is fetched (one READ, timed for the cost model) and admitted.

use super::cache::Slot;
use super::op::{apply, Op, Res};
use super::range::{fcmp, within};
use super::{DexCs, DexTree};
use crate::node::{set_sorted_value_same_version, Fence, Loc, Node, NodeKey, View};
use crate::search::Found;
use crate::tree::TreeError;
use dm_runtime::{now_ns, ReadBuf};
use dm_verbs::GlobalAddr;
use std::cmp::Ordering;
use std::sync::atomic::Ordering::SeqCst;

/// A missed child: in flight in the mapping table, its parent pinned.
pub(crate) struct Miss {
    pub(super) parent: u32,
    pub(super) parent_addr: GlobalAddr,
    pub(super) child: GlobalAddr,
    pub(super) level: u8,
    pub(super) low: Fence,
    pub(super) high: Fence,
    /// The token of the in-flight flag this miss set on `child`.
    pub(super) token: u64,
}

pub(super) enum MissOut {
    Done(Res),
    Retry,
    /// The MS sent the operation back: retry without offloading.
    NoOffload,
    Refresh(GlobalAddr),
}

/// Clears a miss's in-flight flag and pin, however the miss ends.
struct MissGuard<'a> {
    c: &'a DexCs,
    parent: u32,
    child: GlobalAddr,
    token: u64,
}

impl Drop for MissGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.c.lock();
        st.end_io(self.token);
        if st.map.get(&self.child.to_u64()) == Some(&Slot::Io(self.token)) {
            st.map.remove(&self.child.to_u64());
        }
        if let Some(p) = st.frames.get_mut(self.parent as usize) {
            p.pins -= 1;
        }
    }
}

impl DexTree {
    /// A miss below the cached path (§5.2, §6).
    pub(super) async fn miss(
        &self,
        c: &DexCs,
        key: &[u8],
        op: &Op,
        m: Miss,
        offload_ok: bool,
        part: &(Fence, Fence),
    ) -> Result<MissOut, TreeError> {
        let _g = MissGuard {
            c,
            parent: m.parent,
            child: m.child,
            token: m.token,
        };
        let cfg = &self.cl.cfg;
        if m.level == 0 {
            let admit = c.locked().await.unit() < cfg.leaf_admission;
            if admit {
                self.make_room(c).await?;
            }
            let mut b = self.fetch_image(c, m.child).await?;
            if !admit {
                match self.scratch_in_place(c, key, op, &m, b).await? {
                    Ok(r) => return Ok(MissOut::Done(r)),
                    Err(back) => b = back,
                }
            }
            let mut n = Node::decode(&self.t.g, &b).ok_or(TreeError::Corrupt(m.child))?;
            if n.level != 0 || n.low != m.low || n.high != m.high {
                if self.lease_ns.is_some() && n.level == 0 && n.low == m.low {
                    self.adopt_split(c, &n, m.child).await?;
                }
                return Ok(MissOut::Refresh(m.parent_addr));
            }
            if admit {
                let mut st = c.locked().await;
                st.map.remove(&m.child.to_u64());
                st.admit(m.child, n, m.parent);
                return Ok(MissOut::Retry);
            }
            // Not admitted: a scratch copy, written back at once if changed.
            c.locked().await.counters.scratch_leaves += 1;
            let at = n.find(key);
            return match apply(&mut n, at, self.t.leaf_capacity(), key, op) {
                Some((r, change)) => {
                    if change.any() {
                        self.write_page(c, m.child, &n).await?;
                    }
                    Ok(MissOut::Done(r))
                }
                None => {
                    self.split_leaf(c, m.child, n, None, m.parent_addr).await?;
                    Ok(MissOut::Retry)
                }
            };
        }
        let offload = offload_ok
            && !matches!(op, Op::Scan { .. })
            && m.level <= cfg.offload_level
            && within(&m.low, &m.high, part)
            && c.locked()
                .await
                .claim_offload(m.token, &m.low, &m.high, || {
                    c.cost
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .offload(m.level)
                });
        if offload {
            return self.offload(c, key, op, &m).await;
        }
        self.make_room(c).await?;
        let n = self.fetch(c, m.child).await?;
        if n.level != m.level || n.low != m.low || fcmp(&n.high, &m.high) == Ordering::Greater {
            return Ok(MissOut::Refresh(m.parent_addr));
        }
        let mut st = c.locked().await;
        st.map.remove(&m.child.to_u64());
        st.admit(m.child, n, m.parent);
        Ok(MissOut::Retry)
    }

    /// A scratch leaf's operation done on its image in place, when it
    /// needs no decoded node (issue 32: the decode was a heap allocation
    /// per entry then, 38 per get in the guest's 1 MiB DEX cell): a get, an
    /// update of a present key in a sorted leaf (its value set in the
    /// image, which is written back whole as the scratch copy's would be,
    /// version and all), or an update that may not insert of an absent
    /// key. The image back (`Err`) for anything else, and for an image
    /// whose level or fences are not those the parent routes to: the
    /// caller decodes it.
    async fn scratch_in_place(
        &self,
        c: &DexCs,
        key: &[u8],
        op: &Op,
        m: &Miss,
        mut b: ReadBuf,
    ) -> Result<Result<Res, ReadBuf>, TreeError> {
        let v = View::validated(&self.t.g, &b);
        if v.level() != 0 || !v.has_fences(&m.low, &m.high) {
            return Ok(Err(b));
        }
        // The result, and the value to set at an offset of the image.
        let (r, set) = match (op, v.locate(key)) {
            (Op::Get, l) => (Res::Get(l.map(Loc::value)), None),
            (Op::Put { value, .. }, Some(Loc::Sorted(off, _))) => {
                (Res::Put(true), Some((off, *value)))
            }
            (Op::Put { may_insert, .. }, None) if !may_insert && v.sorted() => {
                (Res::Put(false), None)
            }
            _ => return Ok(Err(b)),
        };
        c.locked().await.counters.scratch_leaves += 1;
        if let Some((off, value)) = set {
            set_sorted_value_same_version(&mut b, off, value);
            self.write_image(c, m.child, b.into_vec()).await?;
        }
        Ok(Ok(r))
    }

    /// Lease mode: rolls forward the split of leaf `n` (at `a`) whose
    /// separator is missing from the parent level: a split cut by the
    /// death of the CS that owned the partition before. Its right leaf and
    /// left half were written (B-link order) before the separator was to
    /// go up; only the owner splits a leaf, and its own splits hold the
    /// leaf until the separator is in, so a miss of the owner that finds a
    /// leaf ending below what its parent routes to it finds such a split or
    /// a stale cached parent. One walk to the parent level covering the
    /// separator tells them apart; a missing separator goes in through
    /// FgTree's locked insert (idempotent). [`DexTree::repair_route`]
    /// covers the other case, an operation on a key beyond such a leaf.
    async fn adopt_split(&self, c: &DexCs, n: &Node, a: GlobalAddr) -> Result<(), TreeError> {
        let Fence::Key(sep) = &n.high else {
            return Ok(());
        };
        if n.sibling.is_null() {
            return Ok(());
        }
        if let Found::Node(_, p) = self.t.find(sep, 1).await? {
            if p.find(sep).is_ok() {
                return Ok(());
            }
        }
        tracing::debug!(?a, right = ?n.sibling, "a dead owner's leaf split rolled forward");
        c.lock().counters.rolled_forward += 1;
        self.insert_separator(1, a, NodeKey::from_slice(sep), n.sibling)
            .await
    }

    /// READs one node, timing it for the cost model.
    async fn fetch(&self, c: &DexCs, a: GlobalAddr) -> Result<Node, TreeError> {
        let b = self.fetch_image(c, a).await?;
        Node::decode(&self.t.g, &b).ok_or(TreeError::Corrupt(a))
    }

    /// As [`DexTree::fetch`], the image validated (the READs and retries
    /// of `read_node`, whose `Node::decode` accepts the images `View`
    /// does) but not decoded.
    async fn fetch_image(&self, c: &DexCs, a: GlobalAddr) -> Result<ReadBuf, TreeError> {
        c.fetches.fetch_add(1, SeqCst);
        let t0 = now_ns();
        let b = self.t.read_valid(a).await?;
        c.cost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record_read(now_ns() - t0);
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dex::cache::NONE;
    use crate::dex::{DexCluster, DexConfig};
    use crate::tree::TreeConfig;
    use dm_runtime::{ExecConfig, Executor};
    use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
    use dm_verbs::Fabric;

    /// A miss's clean-up clears only its own in-flight flag. The race it
    /// guards against needs threads (the two critical sections of a miss's
    /// admission and its clean-up run back to back on sim), so the test
    /// plays the other thread's steps between them by hand: the new frame
    /// is evicted and a second miss flags the same node.
    #[test]
    fn a_miss_clears_only_its_own_in_flight_flag() {
        let f = LoopbackFabric::new(LoopbackConfig::default());
        let mut ex = Executor::new(f.open_queues(0, 0), 1, ExecConfig::default());
        let cl = DexCluster::new(TreeConfig::default(), DexConfig::default(), 1).unwrap();
        let x = GlobalAddr::new(0, 4096);
        ex.block_on(async move {
            let c = &cl.css[0];
            let first = {
                let mut st = c.lock();
                let t = st.io_token();
                st.map.insert(x.to_u64(), Slot::Io(t));
                t
            };
            let guard = MissGuard {
                c,
                parent: NONE,
                child: x,
                token: first,
            };
            // Admission, eviction, then another core's miss of `x`.
            let second = {
                let mut st = c.lock();
                st.map.remove(&x.to_u64());
                let t = st.io_token();
                st.map.insert(x.to_u64(), Slot::Io(t));
                t
            };
            drop(guard);
            assert_eq!(c.lock().map.get(&x.to_u64()), Some(&Slot::Io(second)));
            drop(MissGuard {
                c,
                parent: NONE,
                child: x,
                token: second,
            });
            assert_eq!(c.lock().map.get(&x.to_u64()), None);
        });
    }
}
