//! [`NodeLocks`]: where a node's lock word lives, how it is taken (local
//! queue first under HOCL, then CAS with back-off, one attempt in
//! `take.rs`; a slot left naming this CS is taken back under HOCL, dead
//! holders' locks through `super::lease`) and released (`release.rs`: combined or not, or handed
//! over); see the [module docs](super) for the protocol.

use super::config::{LockTableConfig, LockTechniques};
use super::cs_words::CsHeld;
use super::lease::LeaseWatch;
use super::ledger::{ledger, name_of, next_take, LEDGER_TAKEOVERS};
use super::member::{word_inc, Holder, Member};
use super::{LockCounters, LockError, LockEvent};
use crate::sync::LocalLockTable;
use crate::{read, rpc, write, yield_now};
use dm_verbs::ms::RPC_ALLOC_CHUNK;
use dm_verbs::GlobalAddr;
use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The remote lock word guarding a node.
#[derive(Clone, Copy, Debug)]
pub(super) enum LockWord {
    /// A 64-bit word (in the node, or a GLT slot): CAS 0 -> tag, WRITE 0.
    Word(GlobalAddr),
    /// A 16-bit lane of a GLT word at bit `shift`: masked CAS.
    Lane { word: GlobalAddr, shift: u32 },
}

impl LockWord {
    fn ms(&self) -> u16 {
        match self {
            LockWord::Word(a) | LockWord::Lane { word: a, .. } => a.ms(),
        }
    }
}

impl LockWord {
    fn raw(&self) -> u64 {
        match self {
            LockWord::Word(a) | LockWord::Lane { word: a, .. } => a.to_u64(),
        }
    }
}

/// Failed remote lock attempts before [`LockError::LockStuck`] (with back-off
/// of up to 32 yields each: far beyond any contention a live holder causes).
const MAX_LOCK_ATTEMPTS: u32 = 1_000_000;

/// Failed attempts between two `tracing` warnings about one lock (the value
/// in the warning is the holder's: CS id << 16 | core, plus 1).
const LOCK_WARN_EVERY: u32 = 1 << 14;

fn slot_hash(a: GlobalAddr) -> u64 {
    let x = a.to_u64().wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^ (x >> 29)
}

/// The locks of one handle (one core): where a node's lock word lives, how
/// it is taken (local queue first under HOCL, then CAS with back-off) and
/// released (combined or not, or handed over), per the [`LockTechniques`] it was
/// built with. `dm_tree::FgTree` holds one; dm-art's ART baseline uses one
/// for its ROWEX node locks and lock-table leaf locks (SMART §5.1.3 applies
/// Sherman's HOCL to its baselines).
pub struct NodeLocks {
    t: LockTechniques,
    table: LockTableConfig,
    /// This handle's name in a 64-bit lock word (non-zero): `(cs << 16 |
    /// core) + 1`, with the member's incarnation ([`super::member::word_inc`])
    /// above bit 48 once [`NodeLocks::set_member`] ran. A member's takes
    /// write it with a take count in bits 32..48 ([`NodeLocks::take_name`]);
    /// the own-tag ledger and the owner table know it without.
    tag: u64,
    /// The CS's membership, if it joined: lock words then name the
    /// incarnation, and locks of dead members are taken over ([`super::member`]).
    member: Option<Arc<Member>>,
    /// Superblock offset (on every MS) of the host lock table's address.
    glt_ptr_off: u64,
    /// The CS's local lock table (HOCL), if any.
    local: Option<Arc<LocalLockTable>>,
    /// Host-memory lock table base per MS, once read.
    glt_bases: RefCell<Vec<Option<GlobalAddr>>>,
    /// Where this handle counts its lock events: its own unless the index
    /// shares one among its handles ([`NodeLocks::with_counters`]).
    counters: Arc<LockCounters>,
    /// With a member: 1 + the executor this handle's name is registered on
    /// in the member's owner table (`super::ask`), 0 before its first lock.
    owner_exec: Cell<u64>,
}

impl NodeLocks {
    /// Locks of core `core` of compute server `cs` (tag `(cs << 16 | core) +
    /// 1`: at most one thread may run handles with a given `(cs, core)` at a
    /// time; the own-tag ledger relies on it). `glt_ptr_off`: the superblock
    /// offset, on every MS, of the host lock table's address. Errors
    /// ([`LockError::BadConfig`]): `hier_lock` without `onchip_lock`, an empty
    /// table, or a host table larger than a `chunk_bytes` chunk.
    pub fn new(
        t: LockTechniques,
        table: LockTableConfig,
        cs: u16,
        core: u16,
        glt_ptr_off: u64,
        chunk_bytes: u64,
    ) -> Result<Self, LockError> {
        if t.hier_lock && !t.onchip_lock {
            return Err(LockError::BadConfig(
                "hier_lock needs onchip_lock (hand-over is per lock-table slot)".into(),
            ));
        }
        if t.onchip_lock && (table.slots == 0 || (!table.device && table.bytes() > chunk_bytes)) {
            return Err(LockError::BadConfig(format!(
                "lock table of {} slots ({} bytes) does not fit a {}-byte chunk",
                table.slots,
                table.bytes(),
                chunk_bytes
            )));
        }
        Ok(NodeLocks {
            t,
            table,
            tag: ((cs as u64) << 16 | core as u64) + 1,
            member: None,
            glt_ptr_off,
            local: None,
            glt_bases: RefCell::new(Vec::new()),
            counters: Arc::default(),
            owner_exec: Cell::new(0),
        })
    }

    /// Counts this handle's lock events into `c` (one per index, shared by
    /// every core's handle of it, so the index's [`super::LockStats`] are its
    /// own) instead of the handle's own counters.
    pub fn with_counters(mut self, c: Arc<LockCounters>) -> Self {
        self.set_counters(c);
        self
    }

    /// [`NodeLocks::with_counters`] on a handle in place.
    pub fn set_counters(&mut self, c: Arc<LockCounters>) {
        self.counters = c;
    }

    /// The counters this handle counts into.
    pub fn counters(&self) -> &Arc<LockCounters> {
        &self.counters
    }

    /// Joins these locks to the CS's membership `m` (issue 33, [`super::member`]):
    /// the locks this handle takes name `m`'s incarnation, and a lock whose
    /// member holder is dead is taken over after the lease. Errors
    /// ([`LockError::BadConfig`]): `m` is another CS's, or lanes are in use
    /// and the CS id is 1024 or more (a lane has 10 bits for it).
    pub fn set_member(&mut self, m: Arc<Member>) -> Result<(), LockError> {
        let base = self.tag & 0xffff_ffff;
        let cs = ((base - 1) >> 16) as u16;
        if m.cs() != cs {
            return Err(LockError::BadConfig(format!(
                "membership of CS {} given to a handle of CS {cs}",
                m.cs()
            )));
        }
        if self.t.onchip_lock && self.table.lanes16 && cs >= 1024 {
            return Err(LockError::BadConfig(format!(
                "CS {cs}: 16-bit lock lanes name members below CS 1024 only"
            )));
        }
        self.unregister_owner();
        self.tag = (word_inc(m.incarnation()) as u64) << 48 | base;
        self.member = Some(m);
        Ok(())
    }

    /// The CS's membership, if [`NodeLocks::set_member`] ran.
    pub fn member(&self) -> Option<&Arc<Member>> {
        self.member.as_ref()
    }

    /// This handle's name, without a take count (the own-tag ledger's and
    /// the owner table's key).
    pub(super) fn tag(&self) -> u64 {
        self.tag
    }

    /// The value a take of a 64-bit lock word writes: a member's name with
    /// this thread's next take count ([`super::member`], "Holder names in
    /// lock words"), so a CAS that expects an earlier take's value fails on
    /// a word taken again; the tag alone without a member.
    pub(super) fn take_name(&self) -> u64 {
        match self.member {
            Some(_) => self.tag | next_take(),
            None => self.tag,
        }
    }

    /// Whether the 64-bit lock value `v` is this handle's name, from any
    /// take.
    pub(super) fn is_own(&self, v: u64) -> bool {
        name_of(v) == self.tag
    }

    /// Uses `local` (one per CS, shared by its cores) as the local lock table
    /// of the hierarchical lock; needed when `hier_lock` is on: without it
    /// every lock attempt fails with [`LockError::BadConfig`] rather than
    /// run without the local half.
    pub fn set_local(&mut self, local: Arc<LocalLockTable>) {
        self.local = Some(local);
    }

    /// A local lock table for the cores of one CS with `t`'s hand-over bound.
    pub fn new_local_table(t: &LockTechniques) -> Arc<LocalLockTable> {
        Arc::new(LocalLockTable::new(64, t.max_handover))
    }

    /// Sets up host-memory lock tables (one chunk per MS for `num_ms` MSs,
    /// address stored at [`NodeLocks::glt_ptr`]) when the configuration asks
    /// for them; no-op otherwise. Run once, by the tree's creator.
    pub async fn create_tables(&self, num_ms: u16) -> Result<(), LockError> {
        if !self.t.onchip_lock || self.table.device {
            return Ok(());
        }
        for ms in 0..num_ms {
            let r = rpc(ms, RPC_ALLOC_CHUNK, Vec::new()).await?;
            let a = u64::from_le_bytes(r[..8].try_into().unwrap());
            write(self.glt_ptr(ms), a.to_le_bytes().to_vec()).await?;
        }
        Ok(())
    }

    /// The lock word of the node at `a`.
    async fn lock_word(&self, a: GlobalAddr) -> Result<LockWord, LockError> {
        let t = &self.t;
        if !t.onchip_lock {
            return Ok(LockWord::Word(a));
        }
        let lt = &self.table;
        let slot = self.slot_of(a);
        let ms = a.ms();
        let base = if lt.device {
            GlobalAddr::device(ms, 0)
        } else {
            self.host_glt(ms).await?
        };
        Ok(if lt.lanes16 {
            LockWord::Lane {
                word: base.add(slot / 4 * 8),
                shift: (slot % 4) as u32 * 16,
            }
        } else {
            LockWord::Word(base.add(slot * 8))
        })
    }

    /// Base of MS `ms`'s host-memory lock table (read once, then cached).
    async fn host_glt(&self, ms: u16) -> Result<GlobalAddr, LockError> {
        if let Some(a) = self.glt_bases.borrow().get(ms as usize).copied().flatten() {
            return Ok(a);
        }
        let p = self.glt_ptr(ms);
        let a = GlobalAddr::from_u64(u64::from_le_bytes(read(p, 8).await?.try_into().unwrap()));
        if a.is_null() || a.to_u64() == 0 {
            return Err(LockError::BadConfig(format!(
                "no host lock table on MS {ms}: create the tree with this lock configuration"
            )));
        }
        let mut b = self.glt_bases.borrow_mut();
        if b.len() <= ms as usize {
            b.resize(ms as usize + 1, None);
        }
        b[ms as usize] = Some(a);
        Ok(a)
    }

    /// Where MS `ms` keeps the address of its host-memory lock table.
    pub fn glt_ptr(&self, ms: u16) -> GlobalAddr {
        GlobalAddr::new(ms, self.glt_ptr_off)
    }

    /// Key of the local lock for the node at `a`: exactly one per GLT slot
    /// (MS id above the slot number), so a hand-over always passes the remote
    /// lock the receiver asked for.
    fn local_key(&self, a: GlobalAddr) -> u64 {
        local_key_of(a.ms(), self.slot_of(a))
    }

    /// The GLT slot of the node at `a`: its hash modulo the slots
    /// ([`crate::hint::table_index`]: a mask for the default 131,072).
    fn slot_of(&self, a: GlobalAddr) -> u64 {
        crate::hint::table_index(slot_hash(a), self.table.slots)
    }

    /// Which lock guards the node at `a`: equal ids are one lock (a hash
    /// collision in the global lock table makes two nodes share one). A
    /// caller that holds several locks at once takes them in ascending id
    /// order, each id once (no deadlock, no self-deadlock).
    pub fn lock_id(&self, a: GlobalAddr) -> u64 {
        if self.t.onchip_lock {
            self.local_key(a)
        } else {
            a.to_u64()
        }
    }

    /// Takes the lock of the node at `a`: the local lock first under HOCL
    /// (a queue wait; a hand-over skips the remote CAS), then the remote lock
    /// by CAS, retried with bounded exponential back-off (each retry a yield).
    /// Counted ([`super::LockStats`]): the acquisition, each failed CAS, a
    /// local queue wait, a hand-over received, a takeover.
    pub async fn lock(&self, a: GlobalAddr) -> Result<Held<'_>, LockError> {
        Ok(self.lock_and_read(a, None).await?.0)
    }

    /// [`NodeLocks::lock`], plus a READ of `len` bytes at `at` once the lock
    /// is held. When `at` is on the lock word's MS, every CAS attempt carries
    /// the READ in the same doorbell on the same QP, which executes it after
    /// the CAS (in-order execution, as command combination relies on): the
    /// image is the one under the lock, at no extra round trip (dm-art's
    /// lock-table leaf lock). Elsewhere, or after a hand-over, the READ
    /// follows. On a READ error the lock is released (best effort).
    pub async fn lock_and_read(
        &self,
        a: GlobalAddr,
        read_at: Option<(GlobalAddr, u32)>,
    ) -> Result<(Held<'_>, Option<crate::ReadBuf>), LockError> {
        if self.member.is_some() {
            self.register_owner().await;
        }
        let word = self.lock_word(a).await?;
        let local = match (&self.local, self.t.hier_lock) {
            (Some(t), true) => Some(t.lock(self.local_key(a)).await),
            (None, true) => return Err(no_local_table()),
            _ => None,
        };
        if local.as_ref().is_some_and(|g| g.waited()) {
            self.counters.count(LockEvent::Waited);
        }
        let mut taken = local.as_ref().is_some_and(|g| g.handed_over());
        let mut t = Attempt::default();
        if taken {
            t.cs = self.lane_adopt(word);
            self.counters.count(LockEvent::HandedOver);
            tracing::trace!(
                word = format_args!("{:#x}", word.raw()),
                tag = format_args!("{:#x}", self.tag),
                "lock received by hand-over"
            );
        }
        let mut backoff = self.t.lock_backoff.min(1);
        let mut watch = LeaseWatch::new();
        for attempt in 1..=MAX_LOCK_ATTEMPTS {
            // The READ that went out with the winning CAS, if one did.
            let mut joined = None;
            t.reset();
            if !taken {
                let holder = match read_at {
                    Some((at, len)) if at.ms() == word.ms() => {
                        let (h, d) =
                            futures::join!(self.try_take(a, word, attempt, &mut t), read(at, len));
                        let h = h?;
                        // The READ executed right after the first CAS (one
                        // QP, one doorbell): an image under the lock only
                        // if that CAS took it. A retry that took the word
                        // came after it, when another holder may have
                        // written the node in between: READ again below.
                        if h == 0 && !t.retried {
                            joined = Some(d);
                        }
                        h
                    }
                    _ => self.try_take(a, word, attempt, &mut t).await?,
                };
                taken = holder == 0
                    || (self.names_this_cs(word, holder)
                        && self
                            .take_from_this_cs(a, word, holder, attempt, &mut t)
                            .await?)
                    || self.claim_own_lane(a, word, holder, &mut t.cs).await?
                    || (self.member.is_some()
                        && self
                            .take_over_if_dead(&mut watch, a, word, holder, attempt, &mut t)
                            .await?);
                t.stale |= taken && holder != 0;
                if !taken {
                    self.counters.count(LockEvent::CasFailed);
                    if attempt.is_multiple_of(LOCK_WARN_EVERY) {
                        tracing::warn!(node = ?a, holder = format_args!("{holder:#x}"), attempt, "node lock still taken");
                    }
                    for _ in 0..backoff {
                        yield_now().await;
                    }
                    backoff = (backoff * 2).min(self.t.lock_backoff);
                    continue;
                }
            }
            self.counters.count(LockEvent::Acquired);
            // Held before the READ: a task dropped while it is in flight
            // lets the word go in the ledger (`Unreleased`).
            let mut held = self.held(word, local, t.cs.take());
            held.stale = t.stale;
            held.name = t.name;
            let data = match (joined, read_at) {
                (Some(d), _) => Some(d),
                (None, Some((at, len))) => Some(read(at, len).await),
                (None, None) => None,
            };
            return match data.transpose() {
                Ok(data) => Ok((held, data)),
                Err(e) => {
                    let _ = self.release(held, Vec::new()).await;
                    Err(e.into())
                }
            };
        }
        // The holder never released it (a crashed CS, or a bug): report rather than spin forever.
        Err(LockError::LockStuck(a))
    }

    /// Under HOCL with a host-memory lock table (one per tree, so only this
    /// tree's handles take its slots): whether the lock value `holder`
    /// names this CS as it is now (any of its cores, this incarnation).
    /// The caller holds the slot's CS-local lock and was not handed the
    /// remote one, and every task of this CS that holds a slot's remote
    /// lock holds its local lock too (`release` unlocks the word before it
    /// drops the local lock; a hand-over passes both): so no task here
    /// holds it, and the word was left by a CAS of ours that took it
    /// unreported (soft-RoCE executing a retransmitted CAS a second time,
    /// after the unlock: docs/rdma.md), or by a task that dropped its lock
    /// on an error. The sherman-hier hangs of 2026-11-24 and 2026-11-26:
    /// the word named the CS's other core, every task of the CS queued
    /// behind this one on the local lock, and the lease saw a live holder.
    fn names_this_cs(&self, word: LockWord, holder: u64) -> bool {
        if !self.t.hier_lock || self.table.device || self.local.is_none() {
            return false;
        }
        match word {
            LockWord::Word(_) => {
                let (mine, h) = (Holder::of_word(self.tag), Holder::of_word(holder));
                h.cs == mine.cs && h.inc == mine.inc
            }
            LockWord::Lane { .. } => holder == self.lane_id(),
        }
    }

    /// Takes over a slot left named by this CS ([`NodeLocks::names_this_cs`])
    /// with one CAS of `holder` to this handle's name (`t.name`: the value
    /// written); counted as a takeover (as the own-tag ledger's).
    async fn take_from_this_cs<'s>(
        &'s self,
        a: GlobalAddr,
        word: LockWord,
        holder: u64,
        attempt: u32,
        t: &mut Attempt<'s>,
    ) -> Result<bool, LockError> {
        if !self.cas_stale(word, holder, &mut t.cs, &mut t.name).await? {
            return Ok(false);
        }
        self.count_takeover();
        tracing::warn!(
            node = ?a,
            holder = format_args!("{holder:#x}"),
            attempt,
            "lock word names this CS but no task here holds it (this task holds its \
             CS-local lock); taking it"
        );
        Ok(true)
    }

    /// Counts a takeover of a word this CS's handles left (the own-tag
    /// ledger's, or [`NodeLocks::names_this_cs`]'s).
    fn count_takeover(&self) {
        LEDGER_TAKEOVERS.fetch_add(1, Ordering::Relaxed);
        self.counters.count(LockEvent::TakenOver);
    }

    /// Records in the own-tag ledger that this handle took the 64-bit word `w`.
    pub(super) fn note_taken(&self, w: GlobalAddr) {
        tracing::trace!(
            word = format_args!("{:#x}", w.to_u64()),
            tag = format_args!("{:#x}", self.tag),
            "lock taken"
        );
        ledger((self.tag, w.to_u64()), |e| {
            e.held += 1;
            e.epoch += 1;
        });
    }

    /// 16-bit lock value: the CS id + 1 (Sherman §4.3); with a member, its
    /// incarnation modulo 63 above bit 10 ([`super::member`]).
    pub(super) fn lane_id(&self) -> u64 {
        let cs = ((self.tag & 0xffff_ffff) - 1) >> 16;
        // A member is of this handle's CS (`set_member` checks it).
        self.member.as_ref().map_or(cs + 1, |m| m.lane_name())
    }
}

/// What one lock attempt learns besides the holder it saw
/// ([`NodeLocks::try_take`], the takeovers), kept across attempts only for
/// `cs`.
#[derive(Default)]
pub(super) struct Attempt<'s> {
    /// A member's lane hold in the CS ledger (`lanes.rs`).
    pub(super) cs: Option<CsHeld<'s>>,
    /// Taken from a name that was not released ([`Held::taken_stale`]).
    pub(super) stale: bool,
    /// The holder seen is not that of a CAS posted at the attempt's first
    /// poll: it posted more than one, or waited before its first.
    pub(super) retried: bool,
    /// The value a 64-bit word holds once taken (a member's take count
    /// included; [`NodeLocks::take_name`]).
    pub(super) name: u64,
}

impl Attempt<'_> {
    /// Before the next attempt (the lane hold stays).
    fn reset(&mut self) {
        self.stale = false;
        self.retried = false;
        self.name = 0;
    }
}

/// The CS-local lock key of slot `slot` of MS `ms`'s lock table (HOCL):
/// [`NodeLocks`]' local locks and release requests (`super::ask`) agree on it.
pub(super) fn local_key_of(ms: u16, slot: u64) -> u64 {
    (ms as u64) << 48 | slot
}

/// `hier_lock` is on but no CS-local lock table was attached: the lock would
/// silently run without its local half (no queueing, no hand-over).
#[cold]
fn no_local_table() -> LockError {
    LockError::BadConfig(
        "hier_lock is on but this handle has no CS-local lock table: attach the CS's \
         table (NodeLocks::set_local; FgTree/SmartTree::with_local_locks)"
            .into(),
    )
}

mod held;
mod lanes;
mod owner;
mod release;
mod take;

pub use held::Held;
