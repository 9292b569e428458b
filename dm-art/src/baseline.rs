//! The DM-ported ART baseline and SMART's technique ladder (SMART §5.1.3,
//! §5.3.1 and Fig. 18), as switches over SMART's one code path.
//!
//! | rung ([`Techniques`]) | internal nodes | leaf update | leaf lock | RTTs of a warm update |
//! |---|---|---|---|---|
//! | [`Techniques::ART`] (`--index art`) | ROWEX: node locks around each change | RCU: new leaf, CAS of its slot | none | 2 + 1 (leaf WRITE, slot CAS; slot confirm on a cached READ) |
//! | [`Techniques::LOCK_FREE_INTERNAL`] | lock-free (CAS only) | RCU | none | as above |
//! | [`Techniques::IN_PLACE_LEAF`] | lock-free | in place | lock-table word, released by its own WRITE | 4 (READ, lock CAS + READ, WRITE, unlock WRITE) |
//! | [`Techniques::SMART`] | lock-free | in place | rear-embedded, released by the data WRITE | 3 (READ, lock CAS, WRITE) |
//!
//! Read delegation, write combining and the ART cache are attachments of a
//! handle ([`crate::Rdwc`], [`crate::ArtCache`]) and switch on and off
//! independently; the paper's ladder adds RD and WC after the rear lock, and
//! its ART baseline has a cache but no RDWC. Without write combining, the
//! same table still queues same-key writers of a CS
//! ([`crate::Rdwc::queue_writers`]): HOCL's local lock, which the paper gives
//! every baseline (§5.1.3), in front of RCU leaf writes (otherwise every
//! client of a hot key races its slot CAS remotely) and of the rear lock
//! (E-HOCL, Fig. 19); `dm-bench ycsb` sets it so for every rung without
//! combining except the lock-table rung, whose leaf locks queue in HOCL's
//! own local table.
//!
//! **Locks** are Sherman's (the paper applies HOCL to every baseline,
//! §5.1.3): [`dm_runtime::lock::NodeLocks`] with the global lock table on each MS
//! (device memory when the fabric has it) and the CS-local lock table with
//! hand-over ([`HOCL`]), without command combination, so an unlock is its own
//! WRITE posted after the data WRITE completes: the round trip the rear lock
//! saves (§4.1.1, §5.3.1).
//!
//! **ROWEX** (Leis et al., as SMART's ART port uses it): readers take no
//! locks; a writer that changes an internal node holds that node's lock: a
//! normal insert locks the node (and its parent when the node READ was full,
//! as ART's grow replaces the node in its parent), a leaf split the node
//! holding the leaf's slot, a header (prefix) split the node and its parent.
//! Several locks are taken in ascending lock-table order, each slot once
//! (hash collisions make two nodes share one), so neither deadlock nor
//! self-deadlock is possible. Under the lock, the change is still the
//! lock-free version's CAS, whose expectation re-validates the image READ
//! before locking (ROWEX re-checks its node under the lock the same way) and
//! keeps RCU leaf updates, which take no lock, from being lost.
//!
//! **Deviation from the paper's baseline**: the nodes keep SMART's homogeneous
//! layout (slots with partial keys, in-place type switch) rather than ART's
//! 4/16/48/256 node types with separate key and pointer arrays and
//! copy-on-grow, so the rungs differ in synchronisation only; the paper's
//! first rung also moves from heterogeneous to homogeneous nodes (§4.1.1),
//! whose READ-size effect our runs therefore do not include.
//!
//! **RCU leaves** (§3.3, §4.6.4): an update WRITEs a new leaf and CASes its
//! slot from the old leaf's word; a remove publishes a new leaf with the
//! valid bit clear. Published leaves never change (their reverse pointer
//! aside), so a leaf READ through a slot word READ in the same operation is
//! an image that was current at that slot READ. A slot word from the ART
//! cache gives no such guarantee (the slot may have moved on to a newer leaf
//! that another reader already returned), so a cached leaf READ goes out
//! with an 8-byte READ of its slot in the same round; a changed slot drops
//! the cache entry and the walk follows the new word: the cache thrashing of
//! Fig. 5b, at one RTT more per stale leaf address. Old leaves are not
//! reclaimed (no epoch-based reclamation: nothing in dm-art frees memory).
//! Each RCU leaf names the leaf it replaced (its `seq` field, our
//! addition), so a writer whose slot CAS reported a loss can tell, from
//! the chain behind the key's current leaf, whether its CAS took after all
//! (`SmartTree::took_before`; soft-RoCE reports a retransmitted CAS from
//! its second execution, docs/rdma.md).
//!
//! **Lock-table in-place update** (the rung before the rear lock): the lock
//! CAS and a READ of the leaf go out in one doorbell on the leaf's QP
//! ([`dm_runtime::lock::NodeLocks::lock_and_read`]), so the decision (present,
//! removed) is made on the image under the lock; then one WRITE of the item,
//! then the unlock WRITE.
//!
//! Every handle on one tree must use the same techniques: an RCU writer
//! replacing a leaf that an in-place writer is locking would lose the
//! latter's write.

use crate::cursor::Cursor;
use crate::error::ArtError;
use crate::insert::{next_leaf, Mode, Spare};
use crate::layout::{chain_addr, chain_bits, Leaf, Slot, LEAF_OFF_META};
use crate::rdwc::{Lead, WriteResult};
use crate::tree::SmartTree;
use dm_runtime::lock::Held;
use dm_runtime::{cas, write};
use dm_verbs::GlobalAddr;

pub use crate::config::{Techniques, HOCL};

/// Node locks held by one ROWEX writer, released by [`SmartTree::rowex_unlock`].
pub(crate) struct RowexHeld<'t>(smallvec::SmallVec<[Held<'t>; 2]>);

impl SmartTree {
    /// Takes the ROWEX locks of the internal nodes at `nodes` (a root slot's
    /// address stands for the root), in ascending lock order, each lock once;
    /// none when internal nodes are lock-free. On an error the locks already
    /// taken are released (best effort).
    pub(crate) async fn rowex_lock(&self, nodes: &[GlobalAddr]) -> Result<RowexHeld<'_>, ArtError> {
        let Some(l) = self
            .locks
            .as_ref()
            .filter(|_| !self.cfg.techniques.lock_free_internal)
        else {
            return Ok(RowexHeld(smallvec::SmallVec::new()));
        };
        // At most two nodes (a header split's parent and node): inline.
        let mut ids: smallvec::SmallVec<[(u64, GlobalAddr); 2]> =
            nodes.iter().map(|&a| (l.lock_id(a), a)).collect();
        ids.sort_by_key(|x| x.0);
        ids.dedup_by_key(|x| x.0);
        let mut held = RowexHeld(smallvec::SmallVec::new());
        for (_, a) in ids {
            match l.lock(a).await {
                Ok(h) => held.0.push(h),
                Err(e) => {
                    let _ = self.rowex_unlock(held).await;
                    return Err(e.into());
                }
            }
        }
        Ok(held)
    }

    /// Runs `op` (a publishing CAS and what goes with it) under the ROWEX
    /// locks of `nodes` ([`SmartTree::rowex_lock`]; none when internal nodes
    /// are lock-free), releasing them whatever `op` returns. An unlock error
    /// is reported before `op`'s.
    pub(crate) async fn under_rowex<T>(
        &self,
        nodes: &[GlobalAddr],
        op: impl std::future::Future<Output = Result<T, ArtError>>,
    ) -> Result<T, ArtError> {
        let held = self.rowex_lock(nodes).await?;
        let r = op.await;
        self.rowex_unlock(held).await?;
        r
    }

    /// Releases ROWEX locks (each an unlock WRITE, or a hand-over).
    pub(crate) async fn rowex_unlock(&self, held: RowexHeld<'_>) -> Result<(), ArtError> {
        let mut r = Ok(());
        if let Some(l) = &self.locks {
            for h in held.0.into_iter().rev() {
                if let Err(e) = l.release(h, Vec::new()).await {
                    r = Err(e.into());
                }
            }
        }
        r
    }

    /// RCU update of the leaf `l` (key matches) named by `c` (SMART §3.3):
    /// WRITE a new leaf carrying the outcome, CAS the slot from `c.word`.
    /// `Some(result)` when done; `None` when the slot moved on (the cursor
    /// takes the word the CAS returned, the walk goes on). An update or
    /// remove of a removed key answers `false` after confirming a cached
    /// word. A write-combining leader `wc` publishes the WCB's latest value.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn rcu_write(
        &self,
        spare: &mut Spare,
        c: &mut Cursor,
        path: &[u8],
        hit: Option<crate::cache::Hit>,
        l: &Leaf,
        mode: Mode,
        wc: Option<&Lead<'_>>,
    ) -> Result<Option<bool>, ArtError> {
        let Some((valid, value)) = mode.decide(l) else {
            return Ok(self.confirm(c, path, hit).await?.then_some(false));
        };
        let value = match wc {
            Some(w) if valid => w.consume(l.valid).unwrap_or(value),
            _ => value,
        };
        let a = self.spare_leaf(spare).await?;
        // The new leaf names the one it replaces (`took_before`).
        let prev = match Slot::decode(c.word) {
            Slot::Leaf { addr, .. } => chain_bits(addr),
            _ => 0,
        };
        let img = self.leaf.encode(&Leaf {
            rev: c.slot_a,
            valid,
            seq: prev,
            key: l.key.clone(),
            value,
        });
        write(a, img).await?;
        let new = self.leaf_slot(c.word as u8, a)?;
        let got = cas(c.slot_a, c.word, new).await?;
        if crate::tree::publish_took(got, c.word, new) {
            spare.leaf = None;
            return Ok(Some(true));
        }
        let covered = wc.and_then(|w| w.unconsume());
        spare.lost(prev, covered);
        self.invalidate(path, hit.filter(|_| c.cached));
        c.fresh(got);
        Ok(None)
    }

    /// Whether this operation's earlier publishing CAS `m`, which reported
    /// failure, took its slot after all, judged from the key's current
    /// leaf `l` at `x`. soft-RoCE may report a CAS from a second execution
    /// after another writer changed the slot (docs/rdma.md;
    /// `Faults::redo_cas_prob` on sim): read as a failure, the retry would
    /// apply the operation a second time, after the other writer's.
    /// In-place leaves keep their address for life, so it took iff `x` is
    /// the spare leaf. An RCU leaf names the leaf it replaced (`Leaf::seq`):
    /// the chain is walked back from `x` to the spare leaf (took), or to the
    /// leaf the CAS expected or a key's first leaf (did not). After a plain
    /// lost CAS the first step decides, without a READ; each further step
    /// is one leaf READ.
    pub(crate) async fn took_before(
        &self,
        x: GlobalAddr,
        l: &Leaf,
        m: crate::insert::Maybe,
    ) -> Result<bool, ArtError> {
        if x == m.leaf {
            return Ok(true);
        }
        if self.cfg.techniques.in_place_leaf {
            return Ok(false);
        }
        let mut prev = l.seq;
        for _ in 0..crate::tree::MAX_RETRIES {
            if prev == m.stop {
                return Ok(false);
            }
            let Some(p) = chain_addr(prev) else {
                return Ok(false);
            };
            if p == m.leaf {
                return Ok(true);
            }
            prev = self.read_leaf(p).await?.0.seq;
        }
        Err(ArtError::Corrupt(x))
    }

    /// In-place write of the leaf at `a` under its lock-table lock (the rung
    /// before the rear lock): lock CAS with the leaf READ in one doorbell,
    /// decide on that image, WRITE the item, then the unlock WRITE.
    pub(crate) async fn table_locked_write(
        &self,
        a: GlobalAddr,
        mode: Mode,
        wc: Option<&Lead<'_>>,
    ) -> WriteResult {
        let locks = self
            .locks
            .as_ref()
            .expect("lock-table leaf locks need NodeLocks");
        let n = self.leaf.bytes();
        let (held, img) = locks.lock_and_read(a, Some((a, n as u32))).await?;
        let image = img.as_deref().and_then(|b| self.leaf.decode(b));
        // Under the lock no writer is mid-WRITE, so the image validates;
        // READ again if it did not (e.g. a writer that died mid-WRITE).
        let l = match image {
            Some(l) => l,
            None => match self.read_leaf(a).await {
                Ok((l, _)) => l,
                Err(e) => {
                    let _ = locks.release(held, Vec::new()).await;
                    return Err(e);
                }
            },
        };
        let Some(decided) = mode.decide(&l) else {
            locks.release(held, Vec::new()).await?;
            return Ok(false);
        };
        let img = self.leaf.encode(&next_leaf(l, decided, wc));
        let mut b = dm_verbs::buf::take(img.len() - LEAF_OFF_META);
        b.extend_from_slice(&img[LEAF_OFF_META..]);
        dm_verbs::buf::give(img);
        locks
            .release(held, [(a.add(LEAF_OFF_META as u64), b)])
            .await?;
        Ok(true)
    }
}
