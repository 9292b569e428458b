//! Leaf writes of insert, update and remove (SMART §4.1.1-4.1.2): what a
//! write does to the key's leaf ([`Mode`]), the new leaf an insert WRITEs
//! before publishing it (allocated once per operation and reused by its
//! retries, [`Spare`]), and the in-place update under the leaf's rear lock,
//! released by the WRITE that stores the new item.

use crate::error::ArtError;
use crate::layout::{lock_free, lock_holder, lock_taken, Leaf, LEAF_OFF_META, SEQ_MASK};
use crate::rdwc::{Lead, WriteResult};
use crate::tree::{SmartTree, MAX_RETRIES};
use dm_runtime::lock::member::short_inc;
use dm_runtime::lock::{LeaseWatch, LockEvent};
use dm_runtime::{cas, write, yield_now};
use dm_verbs::GlobalAddr;

/// What a write does to the key's leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Insert or overwrite.
    Upsert(u64),
    /// Overwrite only if present.
    Update(u64),
    /// Clear the valid bit if present.
    Remove,
}

impl Mode {
    /// The `(valid, value)` this write gives the leaf `l`, or `None` when it
    /// changes nothing (update or remove of an absent key).
    pub(crate) fn decide(self, l: &Leaf) -> Option<(bool, u64)> {
        match self {
            Mode::Upsert(v) => Some((true, v)),
            Mode::Update(v) if l.valid => Some((true, v)),
            Mode::Remove if l.valid => Some((false, l.value)),
            _ => None,
        }
    }
}

/// The leaf image a locked write stores: `decided` applied to `l`, the
/// sequence number bumped. A write-combining leader `wc` stores the WCB's
/// latest value, taken here, once the lock is held (SMART §4.2.3).
pub(crate) fn next_leaf(l: Leaf, decided: (bool, u64), wc: Option<&Lead<'_>>) -> Leaf {
    let (valid, value) = decided;
    let value = match wc {
        Some(w) if valid => w.consume().unwrap_or(value),
        _ => value,
    };
    Leaf {
        valid,
        value,
        seq: l.seq + 1,
        ..l
    }
}

/// Memory allocated by one operation and not yet published (reused by its
/// retries, so a lost CAS costs no new allocation).
#[derive(Default)]
pub(crate) struct Spare {
    pub(crate) leaf: Option<GlobalAddr>,
    pub(super) nodes: Vec<GlobalAddr>,
    /// The reverse pointer `place_leaf` last WROTE the spare leaf with
    /// (`None` once anything else was written into it).
    placed: Option<GlobalAddr>,
}

impl SmartTree {
    /// WRITEs this operation's new leaf (allocated once) with reverse pointer
    /// `rev` and returns its address.
    pub(super) async fn place_leaf(
        &self,
        spare: &mut Spare,
        key: &[u8],
        value: u64,
        rev: GlobalAddr,
    ) -> Result<GlobalAddr, ArtError> {
        let written = spare.leaf.is_some() && spare.placed == Some(rev);
        let a = self.spare_leaf(spare).await?;
        if !written {
            write(a, self.new_leaf_image(key, value, rev)).await?;
        }
        spare.placed = Some(rev);
        Ok(a)
    }

    pub(super) fn new_leaf_image(&self, key: &[u8], value: u64, rev: GlobalAddr) -> Vec<u8> {
        self.leaf.encode(&Leaf {
            rev,
            valid: true,
            seq: 0,
            key: crate::keys::Path::from_slice(key),
            value,
        })
    }

    /// This operation's new leaf: allocated on first use, reused by retries.
    /// Its image is the caller's to WRITE (`place_leaf` skips a WRITE that
    /// is already there).
    pub(crate) async fn spare_leaf(&self, spare: &mut Spare) -> Result<GlobalAddr, ArtError> {
        spare.placed = None;
        match spare.leaf {
            Some(a) => Ok(a),
            None => {
                let a = self.alloc_leaf().await?;
                spare.leaf = Some(a);
                Ok(a)
            }
        }
    }

    pub(super) async fn spare_node(&self, spare: &mut Spare) -> Result<GlobalAddr, ArtError> {
        match spare.nodes.pop() {
            Some(a) => Ok(a),
            None => self.alloc_internal().await,
        }
    }

    /// In-place leaf write under the rear lock (§4.1.2): lock CAS from the
    /// free word of the image's sequence number, then one WRITE of
    /// `[8, leaf end)` carrying the new item, `seq + 1` and the free lock
    /// word. A failed CAS (someone wrote since the READ, or holds the lock)
    /// yields and READs the leaf again. A write-combining leader `wc` WRITEs
    /// the WCB's latest value, taken once the lock is held (§4.2.3).
    /// A lock taken at the image's `seq` by a member found dead
    /// ([`dm_runtime::lock::LeaseWatch`], issue 33) is CASed from its stale
    /// word instead: the dead holder never WROTE (its WRITE would have
    /// freed the lock at `seq + 1`), so the image is current.
    /// Counted ([`dm_runtime::lock::LockStats`]): the acquisition, a failed
    /// CAS, an image whose lock word was not free (a wait), a recovery.
    pub(super) async fn leaf_write(
        &self,
        a: GlobalAddr,
        mut l: Leaf,
        mut lock: u64,
        mode: Mode,
        wc: Option<&Lead<'_>>,
    ) -> WriteResult {
        let lock_a = a.add(self.leaf.lock_off() as u64);
        let mut watch = LeaseWatch::new();
        for _ in 0..MAX_RETRIES {
            let Some(decided) = mode.decide(&l) else {
                return Ok(false);
            };
            let mut recovery = None;
            if lock != lock_free(l.seq) {
                self.count_lock(LockEvent::Waited);
                recovery = self.rear_holder_dead(&mut watch, lock, &l).await?;
            }
            if lock == lock_free(l.seq) || recovery.is_some() {
                let got = cas(lock_a, lock, lock_taken(l.seq, self.rear_name())).await?;
                if got == lock {
                    if let Some(ns) = recovery {
                        self.recovered(a, lock, ns);
                    }
                    self.count_lock(LockEvent::Acquired);
                    let img = self.leaf.encode(&next_leaf(l, decided, wc));
                    let mut tail = dm_verbs::buf::take(img.len() - LEAF_OFF_META);
                    tail.extend_from_slice(&img[LEAF_OFF_META..]);
                    dm_verbs::buf::give(img);
                    write(a.add(LEAF_OFF_META as u64), tail).await?;
                    return Ok(true);
                }
                watch.reset();
                self.count_lock(LockEvent::CasFailed);
            }
            yield_now().await;
            (l, lock) = self.read_leaf(a).await?;
        }
        Err(ArtError::LockStuck(a))
    }

    /// This handle's name in the rear lock words it takes (0 without a
    /// membership: as before issue 33).
    fn rear_name(&self) -> u64 {
        self.member.as_ref().map_or(0, |m| {
            (short_inc(m.incarnation()) as u64) << 9 | m.cs() as u64
        })
    }

    /// `Some(recovery_ns)` once the member that holds the rear lock `lock`
    /// of image `l` is dead (taken at the image's own `seq`; never without
    /// a membership).
    async fn rear_holder_dead(
        &self,
        watch: &mut LeaseWatch,
        lock: u64,
        l: &Leaf,
    ) -> Result<Option<u64>, ArtError> {
        let Some(me) = &self.member else {
            return Ok(None);
        };
        if lock & 1 == 0 || (lock >> 1) & SEQ_MASK != l.seq & SEQ_MASK {
            return Ok(None);
        }
        Ok(watch.dead(me, lock, lock_holder(lock)).await?)
    }

    /// Counts a rear lock taken over from a dead holder.
    fn recovered(&self, a: GlobalAddr, lock: u64, ns: u64) {
        self.lock_counters().recovered(ns);
        self.count_lock(LockEvent::Recovered);
        tracing::warn!(
            leaf = ?a,
            holder = format_args!("{lock:#x}"),
            recovery_ns = ns,
            "took over a rear leaf lock whose holder is dead (lease expired)"
        );
    }
}
