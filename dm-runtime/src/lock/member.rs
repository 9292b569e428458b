//! Membership and leases (issue 33; not in the papers, which assume compute
//! servers never fail): a CS registers an incarnation on MS 0 when it joins
//! and renews a heartbeat word with one-sided WRITEs; a lock word names its
//! holder's CS and incarnation, so a CS waiting on a lock can tell a dead
//! holder from a slow one and take the lock over ([`super::NodeLocks`]).
//!
//! ## Layout
//! The membership table is one chunk on MS 0, allocated by the first CS to
//! join (its address CASed into the superblock word
//! `dm_verbs::ms::superblock::MEMBERSHIP_PTR`; a loser of that race returns
//! its chunk with `dm_verbs::ms::RPC_FREE_CHUNK`). CS `cs`'s record is at
//! `cs * 64` ([`RECORD_BYTES`]):
//!
//! | offset | bytes | what | written by |
//! |---|---|---|---|
//! | 0 | 8 | incarnation: how many times `cs` joined (READ, then CAS +1 at join: replay-safe, unlike FAA; the joiner's incarnation is the new value, from 1) | the joining CS |
//! | 8 | 8 | heartbeat: a count the CS's heartbeat task WRITEs every [`LeaseConfig::heartbeat_ns`] | the CS |
//! | 16 | 6 x 8 | release requests: the address of a lock word that names this CS, 0 for a free slot (`super::ask`) | a waiter sets one (CAS 0 -> address), the CS's heartbeat clears it (CAS address -> 0) |
//!
//! ## Holder names in lock words
//! - 64-bit lock words (FG+'s in-node word, 64-bit GLT slots): `i16 << 48
//!   | take << 32 | ((cs << 16 | core) + 1)` with `i16 = (incarnation - 1)
//!   % 65535 + 1` ([`word_inc`]) and `take` a 16-bit count of the takes of
//!   the core's thread, so a word names each take apart: a CAS that expects
//!   a name, executed again after the core took the word once more (a
//!   release request's, soft-RoCE's re-executed duplicates), finds another
//!   value and fails (`super::ask`). The holder is the name without
//!   `take`. A handle without a [`Member`] writes its tag alone (`i16` and
//!   `take` 0, the lock word it always wrote) and its locks are never taken
//!   over: nothing says whether it is alive. A word names an incarnation
//!   modulo 65535, as a lane modulo 63 (below).
//! - 16-bit GLT lanes (masked CAS, Sherman §4.3): `(i6 << 10 | cs) + 1`
//!   with `i6 = (incarnation - 1) % 63 + 1` (1..=63; 0 for a handle without
//!   a member), so members with lanes need `cs < 1024`. A lane names an
//!   incarnation modulo 63: a lane left by the incarnation 63 joins before
//!   the holder's current one reads as live while that one beats.
//!
//! ## When a holder is dead (the lease)
//! A waiter whose lock CASes keep returning one member's name for
//! [`LeaseConfig::lease_ns`] of its own clock READs the holder's record;
//! the holder is dead if its incarnation moved on (it restarted), or if its
//! heartbeat word did not change between two READs at least `lease_ns`
//! apart. The waiter then CASes the stale name to its own: one CAS takes
//! the lock, and a lost CAS means someone else did (or the holder let go).
//!
//! **Clock assumptions.** No synchronised clocks: each side measures
//! intervals on its own clock (virtual on `sim`, `CLOCK_MONOTONIC`
//! elsewhere), and rates may differ by a bounded factor. A live CS must
//! complete a heartbeat WRITE at least once per `lease_ns` of any
//! observer's time: `lease_ns > k * heartbeat_ns` with `k` covering the
//! scheduling delay of the heartbeat task and one WRITE's latency
//! ([`LeaseConfig::new`] requires `k >= 3`). A CS stalled for longer than
//! the lease while holding a lock (a stopped VM, say) is taken for dead and
//! may, when it resumes, write back under a lock that is no longer its own:
//! the lease is the bound on such stalls, as in every lease-based scheme.
//!
//! What a dead holder may have left half-done, and how each index
//! recognises and repairs it, is in each index's docs (`dm_tree` for the
//! B+tree family).

use super::ask::Owners;
use super::cs_words::CsWords;
use super::LockError;
use crate::{cas, read, rpc, write, yield_now};
use dm_verbs::ms::{superblock, RPC_ALLOC_CHUNK, RPC_FREE_CHUNK};
use dm_verbs::GlobalAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Bytes of one CS's membership record.
pub const RECORD_BYTES: u64 = 64;

/// Heartbeat period and lease (ns, on each CS's own clock: virtual on
/// `sim`, wall elsewhere); see the module docs for the assumptions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    /// How often a member WRITEs its heartbeat word.
    pub heartbeat_ns: u64,
    /// How long a waiter watches an unchanged holder (and then an unchanged
    /// heartbeat) before it takes the lock over.
    pub lease_ns: u64,
}

impl LeaseConfig {
    /// Real fabrics: a heartbeat every 1 ms, a lease of 10 ms.
    pub const REAL: LeaseConfig = LeaseConfig {
        heartbeat_ns: 1_000_000,
        lease_ns: 10_000_000,
    };
    /// `sim` (virtual time): a heartbeat every 20 µs, a lease of 200 µs.
    pub const SIM: LeaseConfig = LeaseConfig {
        heartbeat_ns: 20_000,
        lease_ns: 200_000,
    };

    /// A lease configuration; errors ([`LockError::BadConfig`]) unless
    /// `heartbeat_ns > 0` and `lease_ns >= 3 * heartbeat_ns`.
    pub fn new(heartbeat_ns: u64, lease_ns: u64) -> Result<Self, LockError> {
        if heartbeat_ns == 0 || lease_ns / 3 < heartbeat_ns {
            return Err(LockError::BadConfig(format!(
                "lease {lease_ns} ns must be at least 3 heartbeat periods of {heartbeat_ns} ns"
            )));
        }
        Ok(LeaseConfig {
            heartbeat_ns,
            lease_ns,
        })
    }

    /// A warning, or `None`, for a process that runs `busy_threads` threads
    /// which poll without sleeping (its core threads, and a loopback
    /// fabric's memory servers) under this lease. When they outnumber the
    /// CPUs the process may use (`std::thread::available_parallelism`), the
    /// OS leaves a runnable thread, the heartbeat's included, waiting for
    /// several of its time slices (milliseconds each): a live CS can then
    /// miss a lease, and waiters take over locks whose holder is still
    /// writing (module docs: the lease bounds a live CS's stalls; what it
    /// did on a 2-CPU VM: docs/experiments/recovery.md).
    pub fn oversubscribed(&self, busy_threads: usize) -> Option<String> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        (busy_threads > cpus).then(|| {
            format!(
                "{busy_threads} polling threads on {cpus} CPUs with a lease of {} ms: a live \
                 compute server can stand still longer than its lease and have its locks taken \
                 over; give each thread a CPU, or a lease well above the OS's time slices",
                self.lease_ns as f64 / 1e6
            )
        })
    }
}

/// One CS's membership: its id, the incarnation it registered, where the
/// records are, its heartbeat. Shared (`Arc`) by the CS's handles
/// ([`super::NodeLocks::set_member`]); [`Member::heartbeat`] runs as one
/// task on one of the CS's cores until [`Member::stop`].
#[derive(Debug)]
pub struct Member {
    cs: u16,
    incarnation: u32,
    table: GlobalAddr,
    cfg: LeaseConfig,
    stopped: AtomicBool,
    beats: AtomicU64,
    /// Who runs each lock name of this CS in this process (`super::ask`).
    owners: Arc<Owners>,
}

impl Member {
    /// Registers CS `cs` on MS 0 (one READ, then a READ and a CAS +1 on
    /// its incarnation word, repeated if another joiner moved it; the first
    /// joiner also allocates the table: an RPC and a CAS).
    /// Run inside a dm-runtime task. Errors: a verb's, or
    /// [`LockError::BadConfig`] if `cs`'s record lies past a
    /// `chunk_bytes` chunk or the incarnation count wrapped.
    pub async fn join(
        cs: u16,
        cfg: LeaseConfig,
        chunk_bytes: u64,
    ) -> Result<Arc<Member>, LockError> {
        if (cs as u64 + 1) * RECORD_BYTES > chunk_bytes {
            return Err(LockError::BadConfig(format!(
                "CS {cs}'s membership record does not fit a {chunk_bytes}-byte chunk"
            )));
        }
        let ptr = GlobalAddr::new(0, superblock::MEMBERSHIP_PTR);
        let mut t = u64::from_le_bytes(read(ptr, 8).await?.try_into().unwrap());
        if t == 0 {
            let r = rpc(0, RPC_ALLOC_CHUNK, Vec::new()).await?;
            let mine = u64::from_le_bytes(r[..8].try_into().unwrap());
            let old = cas(ptr, 0, mine).await?;
            // `old == mine`: our CAS took the word and reported the new
            // value as a failure would (soft-RoCE's unreported success,
            // `check --faults unreported`); no other joiner holds `mine`.
            t = if old == 0 || old == mine {
                mine
            } else {
                // Another joiner published its table first: ours was
                // never written and no one else knows of it.
                rpc(0, RPC_FREE_CHUNK, mine.to_le_bytes().to_vec()).await?;
                old
            };
        }
        let table = GlobalAddr::from_u64(t);
        let rec = table.add(cs as u64 * RECORD_BYTES);
        // READ, then CAS v -> v + 1 (not FAA +1): the word only grows, so a
        // CAS executed a second time (soft-RoCE's re-executed duplicate,
        // `check --faults replay`) finds it moved on and does nothing. A
        // second FAA made the record name an incarnation no process ran,
        // and every waiter took the live CS's locks for a dead one's.
        let inc = next_incarnation(rec).await?;
        let incarnation = u32::try_from(inc).map_err(|_| {
            LockError::BadConfig(format!("CS {cs} joined {inc} times: incarnations wrapped"))
        })?;
        Ok(Arc::new(Member {
            cs,
            incarnation,
            table,
            cfg,
            stopped: AtomicBool::new(false),
            beats: AtomicU64::new(0),
            owners: Arc::default(),
        }))
    }

    /// The CS this member is.
    pub fn cs(&self) -> u16 {
        self.cs
    }

    /// The incarnation it registered (from 1).
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// Its 16-bit name, `(incarnation mod 63) << 10 | cs) + 1` (module
    /// docs; [`Holder::of_lane`] reads it back): 16-bit GLT lanes and
    /// catalog claims name their holder so. Only CSs below 1024 have one
    /// that reads back.
    pub fn lane_name(&self) -> u64 {
        ((short_inc(self.incarnation) as u64) << 10 | self.cs as u64) + 1
    }

    /// Its lease configuration.
    pub fn lease(&self) -> LeaseConfig {
        self.cfg
    }

    /// Heartbeat WRITEs completed so far.
    pub fn beats(&self) -> u64 {
        self.beats.load(Relaxed)
    }

    /// The ledger of lock words that name this whole CS, shared by its
    /// cores in this process (`super::cs_words`: SMART's rear lock).
    pub fn cs_words(&self) -> &CsWords {
        &self.owners.cs_words
    }

    /// The owners of this CS's lock names in this process (`super::ask`).
    pub(super) fn owners(&self) -> &Arc<Owners> {
        &self.owners
    }

    /// The membership record of CS `cs` (module docs).
    pub(super) fn record(&self, cs: u16) -> GlobalAddr {
        self.table.add(cs as u64 * RECORD_BYTES)
    }

    /// CS `cs`'s membership record as (incarnation, heartbeat count): one
    /// READ of 16 bytes. Each word is written whole, so a torn READ only
    /// mixes two values each of which was there. Incarnation 0: `cs` never
    /// joined. Errors: the READ's.
    pub async fn read_record(&self, cs: u16) -> Result<(u64, u64), LockError> {
        let r = read(self.record(cs), 16).await?;
        let w = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().unwrap());
        Ok((w(0), w(8)))
    }

    /// Ends [`Member::heartbeat`] at its next wake-up (a CS leaving, or a
    /// test's crash: the heartbeat stops, so others take its locks over),
    /// and release requests are no longer served (`super::ask`): a
    /// stopped CS's words go to the lease.
    pub fn stop(&self) {
        self.stopped.store(true, Relaxed);
        self.owners.stopped.store(true, Relaxed);
    }

    /// Whether [`Member::stop`] was called.
    pub fn stopped(&self) -> bool {
        self.stopped.load(Relaxed)
    }

    /// One heartbeat: WRITEs the next count to the record's heartbeat word
    /// (one WRITE of 8 bytes), then spawns a task, unless the last one is
    /// still running, that serves the record's release requests (one READ
    /// of 48 bytes; per request a CAS, a READ and a job for the named core:
    /// `super::ask`), so that serving never delays the next beat. Run it
    /// inside a dm-runtime task. For a service whose core parks when idle,
    /// a thread outside the runtime submits this every `heartbeat_ns`
    /// (`dm_index::ClusterBuilder::lease`). Errors: the WRITE's.
    pub async fn beat(&self) -> Result<(), LockError> {
        let n = self.beats.load(Relaxed) + 1;
        let mut b = dm_verbs::buf::take(8);
        b.extend_from_slice(&n.to_le_bytes());
        write(self.record(self.cs).add(8), b).await?;
        self.beats.fetch_max(n, Relaxed);
        self.serve_requests();
        Ok(())
    }

    /// The heartbeat as a task: [`Member::beat`] every `heartbeat_ns`
    /// until [`Member::stop`]. Waits by yielding (the runtime has no
    /// timer), so the core it runs on never idles: for `sim` and tests; a
    /// service submits [`Member::beat`] from a thread instead. Errors: the
    /// WRITE's.
    pub async fn heartbeat(self: Arc<Self>) -> Result<(), LockError> {
        while !self.stopped() {
            self.beat().await?;
            let next = crate::now_ns().saturating_add(self.cfg.heartbeat_ns);
            while crate::now_ns() < next && !self.stopped() {
                yield_now().await;
            }
        }
        Ok(())
    }
}

/// A lock holder as its lock word names it (module docs): CS, incarnation
/// (in full, or `short`: modulo 63 as [`short_inc`] gives it, for lock
/// words with little room), 0 when the holder is not a member (never taken
/// over).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub cs: u16,
    pub inc: u32,
    pub short: bool,
}

impl Holder {
    /// The holder a 64-bit lock word names (its incarnation as [`word_inc`]
    /// gives it).
    pub fn of_word(v: u64) -> Holder {
        Holder {
            cs: (((v as u32).wrapping_sub(1)) >> 16) as u16,
            inc: (v >> 48) as u32,
            short: false,
        }
    }

    /// The holder a 16-bit lane value names.
    pub fn of_lane(v: u64) -> Holder {
        let x = v.wrapping_sub(1) & 0xffff;
        Holder {
            cs: (x & 0x3ff) as u16,
            inc: (x >> 10) as u32,
            short: true,
        }
    }

    /// Whether this holder is a member (incarnation not 0) and names CS
    /// `cs` in its incarnation `inc`.
    pub fn names(&self, cs: u16, inc: u64) -> bool {
        self.inc != 0 && self.cs == cs && self.is(inc)
    }

    /// Whether an incarnation `inc` read from the record is this holder's
    /// (modulo 63 for a `short` holder, else modulo 65535: a holder read
    /// from a 64-bit word carries [`word_inc`], one made from a record
    /// the full incarnation).
    pub fn is(&self, inc: u64) -> bool {
        if self.short {
            short_inc(inc as u32) as u32 == self.inc
        } else {
            word_inc(inc as u32) == word_inc(self.inc)
        }
    }
}

/// An incarnation as a 64-bit lock word holds it (16 bits above its take
/// count, module docs): 1..=65535, 0 for none.
pub fn word_inc(inc: u32) -> u32 {
    if inc == 0 {
        0
    } else {
        (inc - 1) % 65535 + 1
    }
}

/// An incarnation as a short holder name holds it (6 bits: a 16-bit GLT
/// lane, SMART's rear lock): 1..=63, 0 for none.
pub fn short_inc(inc: u32) -> u16 {
    if inc == 0 {
        0
    } else {
        ((inc - 1) % 63 + 1) as u16
    }
}

/// CASes a joiner loses on its record's incarnation word before
/// [`Member::join`] gives up.
const JOIN_CAS_TRIES: u32 = 64;

/// Moves the incarnation word at `rec` from its value v to v + 1 with a
/// CAS (retried while another joiner moves it) and returns v + 1. A CAS
/// that took the word but reported the new value (soft-RoCE's unreported
/// success) reads as a lost race: the retry skips a number, which is
/// harmless. Errors: [`LockError::BadConfig`] after [`JOIN_CAS_TRIES`]
/// lost CASes (processes joining as one CS id, or a fabric that reports
/// every CAS as failed: sim's `unreported_cas_prob = 1.0`, which looped
/// here for ever before).
async fn next_incarnation(rec: GlobalAddr) -> Result<u64, LockError> {
    let mut v = u64::from_le_bytes(read(rec, 8).await?[..8].try_into().unwrap());
    for _ in 0..JOIN_CAS_TRIES {
        let old = cas(rec, v, v.wrapping_add(1)).await?;
        if old == v {
            return Ok(v.wrapping_add(1));
        }
        v = old;
    }
    Err(LockError::BadConfig(format!(
        "the incarnation word at {rec:?} moved under each of {JOIN_CAS_TRIES} CASes: \
         other processes join as the same CS, or the fabric reports every CAS as failed"
    )))
}
