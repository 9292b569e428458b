//! Node locks and their release: FG+'s lock word in the node, and Sherman's
//! ladder of techniques over the same code path (Sherman §4.3-4.5, Fig. 5).
//!
//! | rung (`--index`) | lock word | release |
//! |---|---|---|
//! | `fg` (FG+) | node offset 0, 64-bit CAS `0 -> tag` | write-back WRITE completes, then WRITE 0 (2 RTTs) |
//! | `sherman-combine` | same | write-back and WRITE 0 in one doorbell on the node's QP (1 RTT, §4.5) |
//! | `sherman-onchip` | global lock table (GLT) slot on the node's MS (§4.3) | combined |
//! | `sherman-hier` | GLT slot under a CS-local lock with FIFO queue and hand-over (§4.3) | combined, or hand-over |
//! | `sherman` | as `sherman-hier`, leaves unsorted with two-level versions (§4.4, [`crate::two_level`]) | a plain insert/update/remove writes back one entry |
//!
//! **Command combination** (§4.5) relies on one QP executing WRs in posting
//! order: the write-back lands before the unlock, so whoever takes the lock
//! next READs the new image. WRs to another MS (a split's new sibling placed
//! elsewhere) have no such order, so they complete before the rest is posted.
//!
//! **Global lock table** (§4.3): per MS, `slots` lock slots indexed by a hash
//! of the node address; the slot of a node lives on the node's MS (same QP as
//! its write-back). Placement ([`LockTableConfig`]):
//! - device memory when the fabric has it (`GlobalAddr::device(ms, 0)` on),
//!   with 16-bit lanes (four per 64-bit word) when masked CAS is offered,
//!   else one 64-bit word per slot (as Sherman's code does);
//! - host memory otherwise: a chunk per MS allocated by the tree's creator
//!   ([`NodeLocks::create_tables`]), its address stored in that MS's
//!   superblock at a word the tree names (`FgTree`: `root_ptr.offset() + 8`;
//!   dm-art: its root slot's offset + 8).
//!
//! All of this is [`NodeLocks`], one per handle, so the radix family's
//! baselines take the very same locks (SMART §5.1.3).
//!
//! Lock values: 64-bit words hold the taker's tag (`(cs << 16 | core) + 1`);
//! 16-bit lanes hold `cs + 1` (the paper's CS id). A 64-bit slot is released
//! by WRITE 0. A lane is released by a masked CAS `cs + 1 -> 0` on its lane,
//! posted in the same doorbell: a 2-byte WRITE racing another lane's masked
//! CAS on the same word could be overwritten by that CAS's read-modify-write
//! (RDMA orders WRs within a QP, not a WRITE against another QP's atomic),
//! which would lose an unlock. The masked CAS costs no extra round trip.
//!
//! **Hierarchical lock** (HOCL, §4.3): a CS-local table
//! ([`dm_runtime::sync::LocalLockTable`], exact per GLT slot) is taken first,
//! so cores of one CS queue locally instead of spinning on the NIC. A holder
//! with a local waiter writes back (completed), then hands the local lock and
//! the still-held GLT slot over: the receiver skips the CAS (at most
//! `max_handover` times in a row, default 4, then the GLT slot is released so
//! other CSs are not starved).
//!
//! Hash collisions in the GLT only make unrelated nodes share a lock, which is
//! safe because an operation holds at most one lock at a time (§4.3).
//!
//! **Own-tag ledger** (not in the papers): each thread keeps, per (tag, 64-bit
//! lock word), how many locks its handles hold, how many lock CASes they have
//! in flight, and an epoch bumped at every take and release it sees complete.
//! A CAS that returns this handle's own tag although, from its post to its
//! completion, no task here held the word, took or released it (the epoch did
//! not move) and no earlier CAS of ours on it was in flight (the
//! QP executes them in post order), can only be the
//! trace of a CAS of ours that took the lock without its success being
//! reported (seen on soft-RoCE without a retransmission at the time; an old
//! value never written to the result buffer is the suspect, see docs/rdma.md).
//! Nobody would ever release such a lock, so the CAS's issuer
//! takes it, with a warning ([`lock_takeovers`] counts them), instead of
//! spinning on it forever. The epoch matters: completions of different verbs
//! may be processed out of order (the `sim` fabric does it), so a CAS can
//! legitimately report a tag of ours that a release completed since.
//! Sound because a 64-bit tag is written only by its one handle's thread
//! (`(cs, core)` unique among running handles, see [`crate::FgTree::open`]).
//! 16-bit lanes hold a CS id shared by that CS's cores, so they are not covered.

use crate::tree::TreeError;
use dm_runtime::sync::{LocalLockGuard, LocalLockTable};
use dm_runtime::{cas, faa, masked_cas, read, rpc, write, yield_now};
use dm_verbs::ms::RPC_ALLOC_CHUNK;
use dm_verbs::{Caps, GlobalAddr};
use futures::future::try_join_all;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which of Sherman's techniques are on (Sherman §4, the Fig. 5 ladder).
/// Each rung is a constant; [`Techniques::named`] maps `--index` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Techniques {
    /// Command combination (§4.5): write-back + unlock in one doorbell.
    pub combine: bool,
    /// Locks in a global lock table per MS instead of in the node (§4.3).
    pub onchip_lock: bool,
    /// CS-local lock table with FIFO wait queues and hand-over (§4.3);
    /// needs `onchip_lock` (hand-over is per GLT slot).
    pub hier_lock: bool,
    /// Consecutive hand-overs allowed before the GLT slot is released (§4.3: 4).
    pub max_handover: u32,
    /// Two-level versions (§4.4): leaves created unsorted with a check word
    /// per entry, so a plain insert, update or remove writes back one entry
    /// instead of the node ([`crate::two_level`]). Only affects leaves this
    /// tree creates: a leaf's layout is recorded in its header.
    pub two_level: bool,
    /// Most yields between two failed remote lock CASes (doubling from 1).
    /// 0 retries at once, as FG and FG+ do ("blindly retries", Sherman
    /// §3.2.2): what collapses them under skew (Table 1). Every rung
    /// defaults to 32, which keeps a spinning task from flooding its NIC
    /// bucket; `dm-bench ycsb --lock-backoff 0` gives the papers' spin.
    pub lock_backoff: u32,
    /// Release an in-node lock by FAA, as FG does (Sherman §3.1), instead of
    /// by WRITE, FG+'s change (§5.1). The FAA queues behind the spinners'
    /// CASes in the NIC's atomic bucket (§3.2.2); the WRITE does not.
    pub unlock_faa: bool,
}

impl Techniques {
    /// FG+ as Sherman describes it (§5): in-node lock, separate unlock WRITE.
    pub const FG_PLUS: Techniques = Techniques {
        combine: false,
        onchip_lock: false,
        hier_lock: false,
        max_handover: 4,
        two_level: false,
        lock_backoff: 32,
        unlock_faa: false,
    };
    /// FG+ with command combination.
    pub const SHERMAN_COMBINE: Techniques = Techniques {
        combine: true,
        ..Self::FG_PLUS
    };
    /// ... plus the global lock table.
    pub const SHERMAN_ONCHIP: Techniques = Techniques {
        onchip_lock: true,
        ..Self::SHERMAN_COMBINE
    };
    /// ... plus the CS-local lock table with hand-over.
    pub const SHERMAN_HIER: Techniques = Techniques {
        hier_lock: true,
        ..Self::SHERMAN_ONCHIP
    };

    /// Sherman: every technique, i.e. `SHERMAN_HIER` plus two-level versions.
    pub const SHERMAN: Techniques = Techniques {
        two_level: true,
        ..Self::SHERMAN_HIER
    };

    /// The rung called `name` (`fg`, `sherman-combine`, `sherman-onchip`,
    /// `sherman-hier`, `sherman`).
    pub fn named(name: &str) -> Option<Techniques> {
        Some(match name {
            "fg" | "fg+" => Self::FG_PLUS,
            "sherman-combine" => Self::SHERMAN_COMBINE,
            "sherman-onchip" => Self::SHERMAN_ONCHIP,
            "sherman-hier" => Self::SHERMAN_HIER,
            "sherman" => Self::SHERMAN,
            _ => return None,
        })
    }

    /// Names [`Techniques::named`] knows, in ladder order.
    pub const NAMES: [&'static str; 5] = [
        "fg",
        "sherman-combine",
        "sherman-onchip",
        "sherman-hier",
        "sherman",
    ];
}

impl Default for Techniques {
    fn default() -> Self {
        Self::FG_PLUS
    }
}

/// Where the global lock table lives and its shape (used when
/// `Techniques::onchip_lock` is on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockTableConfig {
    /// In the MS NIC's device memory (else a host-memory chunk per MS).
    pub device: bool,
    /// 16-bit lanes taken by masked CAS (else one 64-bit word per slot).
    pub lanes16: bool,
    /// Lock slots per MS.
    pub slots: u64,
}

impl LockTableConfig {
    /// Sherman's choice for a fabric: device memory with 16-bit lanes when
    /// offered (256 KiB = 131,072 locks), 64-bit words in device memory without
    /// masked CAS (32,768), else 32,768 64-bit words in host memory.
    pub fn for_caps(caps: Caps) -> Self {
        if caps.device_memory_bytes >= 8 {
            LockTableConfig {
                device: true,
                lanes16: caps.masked_cas,
                slots: if caps.masked_cas {
                    caps.device_memory_bytes / 2
                } else {
                    caps.device_memory_bytes / 8
                },
            }
        } else {
            Self::default()
        }
    }

    /// Bytes of table per MS.
    pub fn bytes(&self) -> u64 {
        if self.lanes16 {
            self.slots.div_ceil(4) * 8
        } else {
            self.slots * 8
        }
    }
}

impl Default for LockTableConfig {
    /// Host memory, 32,768 64-bit slots per MS (Sherman's code: 256 KiB / 8).
    fn default() -> Self {
        LockTableConfig {
            device: false,
            lanes16: false,
            slots: 32_768,
        }
    }
}

/// The remote lock word guarding a node.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LockWord {
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

/// A held node lock (remote, plus the local one under HOCL).
pub struct Held<'t> {
    word: LockWord,
    local: Option<LocalLockGuard<'t>>,
}

/// Failed remote lock attempts before [`TreeError::LockStuck`] (with back-off
/// of up to 32 yields each: far beyond any contention a live holder causes).
const MAX_LOCK_ATTEMPTS: u32 = 1_000_000;

/// Failed attempts between two `tracing` warnings about one lock (the value
/// in the warning is the holder's: CS id << 16 | core, plus 1).
const LOCK_WARN_EVERY: u32 = 1 << 14;

/// One (tag, lock word) in this thread's ledger (see the module docs).
#[derive(Default)]
struct Entry {
    held: u32,
    /// Post numbers of the lock CASes in flight, in post order.
    in_flight: Vec<u64>,
    next_post: u64,
    epoch: u64,
}

thread_local! {
    static LEDGER: RefCell<HashMap<(u64, u64), Entry>> = RefCell::new(HashMap::new());
}

/// Locks of this process taken over through the own-tag ledger.
static LEDGER_TAKEOVERS: AtomicU64 = AtomicU64::new(0);

/// How many locks this process took over because a CAS of its own had taken
/// them without reporting success (module docs, "own-tag ledger").
pub fn lock_takeovers() -> u64 {
    LEDGER_TAKEOVERS.load(Ordering::Relaxed)
}

fn ledger<R>(key: (u64, u64), f: impl FnOnce(&mut Entry) -> R) -> R {
    LEDGER.with(|l| {
        let mut l = l.borrow_mut();
        let e = l.entry(key).or_default();
        let r = f(e);
        if e.held == 0 && e.in_flight.is_empty() {
            l.remove(&key);
        }
        r
    })
}

/// A lock CAS in flight: in the ledger until dropped (also on error or
/// cancellation), with its post number and the entry's epoch at posting.
struct InFlight {
    key: (u64, u64),
    post: u64,
    epoch: u64,
}

impl InFlight {
    fn new(key: (u64, u64)) -> Self {
        let (post, epoch) = ledger(key, |e| {
            let p = e.next_post;
            e.next_post += 1;
            e.in_flight.push(p);
            (p, e.epoch)
        });
        InFlight { key, post, epoch }
    }

    /// True if this CAS's own-tag result cannot be explained by anything the
    /// ledger saw (module docs): no holder, no take or release since it was
    /// posted, no earlier CAS of ours still in flight (one QP executes them in
    /// post order, so later ones cannot have run first).
    fn unexplained(&self) -> bool {
        ledger(self.key, |e| {
            e.held == 0 && e.epoch == self.epoch && e.in_flight.first() == Some(&self.post)
        })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        ledger(self.key, |e| e.in_flight.retain(|p| *p != self.post));
    }
}

fn slot_hash(a: GlobalAddr) -> u64 {
    let x = a.to_u64().wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^ (x >> 29)
}

/// The locks of one handle (one core): where a node's lock word lives, how
/// it is taken (local queue first under HOCL, then CAS with back-off) and
/// released (combined or not, or handed over), per the [`Techniques`] it was
/// built with. [`crate::FgTree`] holds one; dm-art's ART baseline uses one
/// for its ROWEX node locks and lock-table leaf locks (SMART §5.1.3 applies
/// Sherman's HOCL to its baselines).
pub struct NodeLocks {
    t: Techniques,
    table: LockTableConfig,
    /// Lock-word value this handle writes when it takes a lock (non-zero).
    tag: u64,
    /// Superblock offset (on every MS) of the host lock table's address.
    glt_ptr_off: u64,
    /// The CS's local lock table (HOCL), if any.
    local: Option<Arc<LocalLockTable>>,
    /// Host-memory lock table base per MS, once read.
    glt_bases: RefCell<Vec<Option<GlobalAddr>>>,
}

impl NodeLocks {
    /// Locks of core `core` of compute server `cs` (tag `(cs << 16 | core) +
    /// 1`: at most one thread may run handles with a given `(cs, core)` at a
    /// time; the own-tag ledger relies on it). `glt_ptr_off`: the superblock
    /// offset, on every MS, of the host lock table's address. Errors
    /// ([`TreeError::BadConfig`]): `hier_lock` without `onchip_lock`, an empty
    /// table, or a host table larger than a `chunk_bytes` chunk.
    pub fn new(
        t: Techniques,
        table: LockTableConfig,
        cs: u16,
        core: u16,
        glt_ptr_off: u64,
        chunk_bytes: u64,
    ) -> Result<Self, TreeError> {
        if t.hier_lock && !t.onchip_lock {
            return Err(TreeError::BadConfig(
                "hier_lock needs onchip_lock (hand-over is per lock-table slot)".into(),
            ));
        }
        if t.onchip_lock && (table.slots == 0 || (!table.device && table.bytes() > chunk_bytes)) {
            return Err(TreeError::BadConfig(format!(
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
            glt_ptr_off,
            local: None,
            glt_bases: RefCell::new(Vec::new()),
        })
    }

    /// Uses `local` (one per CS, shared by its cores) as the local lock table
    /// of the hierarchical lock; needed when `hier_lock` is on.
    pub fn set_local(&mut self, local: Arc<LocalLockTable>) {
        self.local = Some(local);
    }

    /// A local lock table for the cores of one CS with `t`'s hand-over bound.
    pub fn new_local_table(t: &Techniques) -> Arc<LocalLockTable> {
        Arc::new(LocalLockTable::new(64, t.max_handover))
    }

    /// Sets up host-memory lock tables (one chunk per MS for `num_ms` MSs,
    /// address stored at [`NodeLocks::glt_ptr`]) when the configuration asks
    /// for them; no-op otherwise. Run once, by the tree's creator.
    pub async fn create_tables(&self, num_ms: u16) -> Result<(), TreeError> {
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
    async fn lock_word(&self, a: GlobalAddr) -> Result<LockWord, TreeError> {
        let t = &self.t;
        if !t.onchip_lock {
            return Ok(LockWord::Word(a));
        }
        let lt = &self.table;
        let slot = slot_hash(a) % lt.slots;
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
    async fn host_glt(&self, ms: u16) -> Result<GlobalAddr, TreeError> {
        if let Some(a) = self.glt_bases.borrow().get(ms as usize).copied().flatten() {
            return Ok(a);
        }
        let p = self.glt_ptr(ms);
        let a = GlobalAddr::from_u64(u64::from_le_bytes(read(p, 8).await?.try_into().unwrap()));
        if a.is_null() || a.to_u64() == 0 {
            return Err(TreeError::BadConfig(format!(
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
        let slot = slot_hash(a) % self.table.slots;
        (a.ms() as u64) << 48 | slot
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
    pub async fn lock(&self, a: GlobalAddr) -> Result<Held<'_>, TreeError> {
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
    ) -> Result<(Held<'_>, Option<Vec<u8>>), TreeError> {
        let word = self.lock_word(a).await?;
        let local = match (&self.local, self.t.hier_lock) {
            (Some(t), true) => Some(t.lock(self.local_key(a)).await),
            _ => None,
        };
        let mut taken = local.as_ref().is_some_and(|g| g.handed_over());
        let mut backoff = self.t.lock_backoff.min(1);
        for attempt in 1..=MAX_LOCK_ATTEMPTS {
            // The READ that went out with the winning CAS, if one did.
            let mut joined = None;
            if !taken {
                let holder = match read_at {
                    Some((at, len)) if at.ms() == word.ms() => {
                        let (h, d) = futures::join!(self.try_take(a, word, attempt), read(at, len));
                        let h = h?;
                        if h == 0 {
                            joined = Some(d);
                        }
                        h
                    }
                    _ => self.try_take(a, word, attempt).await?,
                };
                taken = holder == 0;
                if !taken {
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
            let data = match (joined, read_at) {
                (Some(d), _) => Some(d),
                (None, Some((at, len))) => Some(read(at, len).await),
                (None, None) => None,
            };
            return match data.transpose() {
                Ok(data) => Ok((Held { word, local }, data)),
                Err(e) => {
                    let _ = self.release(Held { word, local }, Vec::new()).await;
                    Err(e.into())
                }
            };
        }
        // The holder never released it (a crashed CS, or a bug): report rather than spin forever.
        Err(TreeError::LockStuck(a))
    }

    /// One attempt at the remote lock word of the node at `a`: the holder
    /// seen (0: taken by this attempt).
    async fn try_take(
        &self,
        a: GlobalAddr,
        word: LockWord,
        attempt: u32,
    ) -> Result<u64, TreeError> {
        Ok(match word {
            LockWord::Word(w) => {
                let key = (self.tag, w.to_u64());
                let in_flight = InFlight::new(key);
                let mut h = cas(w, 0, self.tag).await?;
                if h == self.tag && in_flight.unexplained() {
                    LEDGER_TAKEOVERS.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        node = ?a,
                        attempt,
                        "lock word holds this handle's tag but no task here holds or took it \
                         (a CAS of ours took it unreported); taking it"
                    );
                    h = 0;
                }
                drop(in_flight);
                if h == 0 {
                    ledger(key, |e| {
                        e.held += 1;
                        e.epoch += 1;
                    });
                }
                h
            }
            LockWord::Lane { word: w, shift } => {
                let m = 0xffffu64 << shift;
                (masked_cas(w, 0, self.lane_id() << shift, m, m).await? & m) >> shift
            }
        })
    }

    /// 16-bit lock value: the CS id + 1 (Sherman §4.3).
    fn lane_id(&self) -> u64 {
        (((self.tag - 1) >> 16) + 1) & 0xffff
    }

    /// Releases `held` after `writes` (node images, in order). Writes on
    /// another MS than the lock word complete first; the rest and the unlock
    /// go out as one doorbell with `combine`, one by one otherwise; under
    /// HOCL with a local waiter the writes complete and the lock is handed over.
    pub async fn release(
        &self,
        held: Held<'_>,
        writes: Vec<(GlobalAddr, Vec<u8>)>,
    ) -> Result<(), TreeError> {
        let Held { word, local } = held;
        let (far, near): (Vec<_>, Vec<_>) =
            writes.into_iter().partition(|(a, _)| a.ms() != word.ms());
        try_join_all(far.into_iter().map(|(a, d)| write(a, d))).await?;
        let combine = self.t.combine;
        let local = match local {
            Some(g) if g.can_hand_over() => {
                self.post_writes(near, combine).await?;
                match g.try_hand_over() {
                    Ok(()) => return Ok(()),
                    Err(g) => {
                        self.unlock_word(word).await?;
                        drop(g);
                        return Ok(());
                    }
                }
            }
            g => g,
        };
        if combine {
            let unlock = self.unlock_word(word);
            let w = async {
                try_join_all(near.into_iter().map(|(a, d)| write(a, d)))
                    .await
                    .map_err(TreeError::from)
            };
            futures::try_join!(w, unlock)?;
        } else {
            self.post_writes(near, false).await?;
            self.unlock_word(word).await?;
        }
        drop(local);
        Ok(())
    }

    /// WRITEs in order: all in one doorbell if `together`, else each completed
    /// before the next is posted.
    async fn post_writes(
        &self,
        writes: Vec<(GlobalAddr, Vec<u8>)>,
        together: bool,
    ) -> Result<(), TreeError> {
        if together {
            try_join_all(writes.into_iter().map(|(a, d)| write(a, d))).await?;
        } else {
            for (a, d) in writes {
                write(a, d).await?;
            }
        }
        Ok(())
    }

    async fn unlock_word(&self, w: LockWord) -> Result<(), TreeError> {
        match w {
            LockWord::Word(a) => {
                if self.t.unlock_faa {
                    // The word holds our tag: adding its negation leaves 0.
                    faa(a, self.tag.wrapping_neg()).await?;
                } else {
                    write(a, vec![0; 8]).await?;
                }
                ledger((self.tag, a.to_u64()), |e| {
                    e.held = e.held.saturating_sub(1);
                    e.epoch += 1;
                });
            }
            LockWord::Lane { word, shift } => {
                let m = 0xffffu64 << shift;
                masked_cas(word, self.lane_id() << shift, 0, m, m).await?;
            }
        }
        Ok(())
    }
}
