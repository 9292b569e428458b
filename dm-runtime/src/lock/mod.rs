//! One-sided node locks and their release: FG+'s lock word in the node, and
//! Sherman's lock techniques over the same code path (Sherman §4.3-4.5,
//! Fig. 5). Both index families stand on these: dm-tree's FG+ and Sherman
//! rungs, and dm-art's ART baseline (SMART §5.1.3).
//!
//! | rung (`--index`) | lock word | release |
//! |---|---|---|
//! | `fg` (FG+) | node offset 0, 64-bit CAS `0 -> tag` | write-back WRITE completes, then WRITE 0 (2 RTTs) |
//! | `sherman-combine` | same | write-back and WRITE 0 in one doorbell on the node's QP (1 RTT, §4.5) |
//! | `sherman-onchip` | global lock table (GLT) slot on the node's MS (§4.3) | combined |
//! | `sherman-hier` | GLT slot under a CS-local lock with FIFO queue and hand-over (§4.3) | combined, or hand-over |
//! | `sherman` | as `sherman-hier`, leaves unsorted with two-level versions (§4.4, `dm_tree::two_level`) | a plain insert/update/remove writes back one entry |
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
//!   dm-art: its root slot's offset + 8; both
//!   `dm_verbs::ms::superblock::LOCK_TABLE_PTR`, in the tree's default
//!   roots or its catalog root area).
//!
//! All of this is [`NodeLocks`], one per handle, so the radix family's
//! baselines take the very same locks (SMART §5.1.3).
//!
//! Lock values: 64-bit words hold the taker's tag (`(cs << 16 | core) + 1`;
//! a member's with its incarnation and a take count above it, below);
//! 16-bit lanes hold `cs + 1` (the paper's CS id). A 64-bit slot is released
//! by WRITE 0. A lane is released by a masked CAS `cs + 1 -> 0` on its lane,
//! posted in the same doorbell: a 2-byte WRITE racing another lane's masked
//! CAS on the same word could be overwritten by that CAS's read-modify-write
//! (RDMA orders WRs within a QP, not a WRITE against another QP's atomic),
//! which would lose an unlock. The masked CAS costs no extra round trip.
//!
//! **Hierarchical lock** (HOCL, §4.3): a CS-local table
//! ([`crate::sync::LocalLockTable`], exact per GLT slot) is taken first,
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
//! takes it, with a warning ([`lock_takeovers`] counts them per process,
//! [`LockStats::takeovers`] per index), instead of
//! spinning on it forever. The epoch matters: completions of different verbs
//! may be processed out of order (the `sim` fabric does it), so a CAS can
//! legitimately report a tag of ours that a release completed since.
//! Sound because a 64-bit tag is written only by its one handle's thread
//! (`(cs, core)` unique among running handles, see `dm_tree::FgTree::open`).
//! 16-bit lanes hold a CS id shared by that CS's cores, so they are not
//! covered here (a member's lanes are in its CS ledger, below).
//! A task dropped while it holds a lock or mid-release (a cancelled
//! future, a killed CS) lets the word go in the ledger (`Held`'s drop): the
//! word then names no task here, and the tag's next CAS on it takes it back.
//!
//! **A slot left named by this CS under HOCL** (not in the papers): on
//! soft-RoCE a lock word was seen holding a handle's tag again right after
//! that handle's unlock WRITE completed (a retransmitted CAS of its executed
//! a second time, by the trace: docs/rdma.md). When the next taker is a
//! task of another core of the same CS, the ledger cannot see it (the tag
//! is not its own) and the lease takes it for a live holder of this very
//! CS: every task waits for a core that holds nothing. Under HOCL with a
//! host-memory lock table (one per tree), a taker that holds the slot's
//! CS-local lock and was not handed the remote one knows no task of its CS
//! holds the slot (a remote holder keeps the local lock until it unlocks
//! or hands both over), so a slot naming this CS's current incarnation,
//! any core, is taken over by one CAS (counted and warned as the ledger's
//! takeovers).
//!
//! **Words that name a whole CS** (SMART's rear-embedded leaf lock, not in
//! the papers): an unreported CAS success leaves the word naming the CS's
//! live incarnation, which no core's own-tag ledger recognises. The
//! [`Member`]'s CS ledger ([`cs_words`]) registers every such word a task
//! of the CS CASes or holds, across its cores, so a task that finds its
//! own CS's name on a word the ledger shows untouched claims it with one
//! CAS of the same value. A member's 16-bit GLT lanes are in it too
//! (`node_locks/lanes.rs`): a lane left naming the CS by a task dropped
//! while holding it, or by an unreported masked CAS, is claimed by the
//! CS's next taker, or freed by the CS when another CS's waiter asks.
//!
//! **A word left named by another core** (of this CS or another, in this
//! process or another) is released by that core when a member waiter asks
//! ([`ask`]: after a lease of seeing the name, through the process's owner
//! table or a request slot of the holder's membership record; the owner's
//! core releases it only if its ledger shows no holder and no CAS in
//! flight, and under HOCL the word's local lock is free). The waiter never
//! takes the word itself: an earlier design in which it did, on the
//! owner's answer (`lock::peer` in 7fb0394..20dc733), lost keys on
//! soft-RoCE (docs/rdma-guest-findings.md, "A lost key in the nam-hybrid kill step").
//! Handles without a member do not ask: a word left naming another core
//! waits for that core's next attempt on it (its ledger).
//!
//! **Atomics executed twice** (sim's `Faults::replay_prob`, soft-RoCE's
//! re-executed duplicates): a replayed lock CAS `0 -> name` leaves a word
//! naming a holder that holds nothing, which the ledgers and release
//! requests above recover. A replayed CAS whose expected value can come
//! back could take or free a word a live task holds: a takeover's `stale
//! -> mine`, a release request's `name ->` [`ask::ABANDONED`]. So a
//! member's 64-bit words name each take apart: `i16 << 48 | take << 32 |
//! tag`, with a 16-bit take count of the core's thread
//! ([`member`], "Holder names in lock words"); the ledgers, the owner table
//! and the lease read the name without the count, and the CASes that
//! expect a name expect the exact value they found. A request's CAS
//! executed again after its core took the word once more finds the new
//! take's count and fails (`dm-runtime/tests/ask_replay.rs`: with the bare
//! name it freed the word under the new holder, and a waiter took it while
//! that holder held it). The incarnation word, which an FAA used to move
//! (a replay made a live CS look restarted), moves by CAS. A duplicate
//! that runs before its CAS is reported (`Faults::redo_cas_prob`) is
//! waited out for release requests as well: a lock CAS does not post
//! while a request of its own core on the word is in flight (the ledger's
//! `InFlight::asking`; `check --index sherman-onchip --faults
//! torn,delay,unreported,replay,redo,writeback,crash --clients 64 --keys
//! 32 --cores 4`, seed 84039). What stays open: a count wraps after 65,536
//! takes of one thread, so a duplicate held back that long could still
//! find its value again; and handles without a member write the bare tag
//! (they never ask or take over).
//!
//! **Dead holders** (issue 33, not in the papers): a CS that joined the
//! membership table ([`member`]: an incarnation and a heartbeat word per CS
//! on MS 0) names its incarnation in its lock words (64-bit words:
//! `(incarnation mod 65535) << 48 | take << 32 | tag`; 16-bit lanes:
//! `(incarnation mod 63) << 10 | cs`, plus 1), and
//! [`NodeLocks::set_member`] turns on takeover: a waiter that keeps
//! finding one member's name for a lease READs the holder's record, and once the heartbeat stood still for another lease (or the
//! incarnation moved on) CASes the stale name to its own. Counted as
//! [`LockStats::recovered`] with the time each took
//! ([`LockCounters::recovery_ns`]). No verb is added before a lease has
//! passed: live contention costs what it did, and a handle without a member
//! writes and behaves exactly as before. A takeover CAS is in the own-tag
//! ledger while in flight like every lock CAS of its tag. What each index
//! finds under a taken-over lock is in its docs (`dm_tree`'s "A compute
//! server that dies"); a lock taken from any name that was not released
//! (a takeover, or a take-back through a ledger) says so
//! ([`Held::taken_stale`]), for an index whose structure changes span
//! several nodes and must be rolled forward first (Dolphin's split).
//!
//! **Statistics** (issue 31): each [`NodeLocks`] counts what its locks did
//! into an `Arc<`[`LockCounters`]`>` ([`LockStats`]: acquisitions, failed
//! lock CASes, local queue waits, hand-overs, takeovers), its own by default;
//! every core's handle of one index shares one ([`NodeLocks::with_counters`])
//! so that index's counts are its own, not the process's. One Relaxed
//! `fetch_add` per event, on paths that post a lock verb anyway.

pub mod ask;
mod config;
pub mod cs_words;
pub mod lease;
mod ledger;
pub mod member;
mod node_locks;
mod stats;

pub use config::{LockTableConfig, LockTechniques};
pub use cs_words::{while_releasing, CsCas, CsHeld, CsReleasing, CsWords};
pub use lease::LeaseWatch;
pub use ledger::{forget_thread_ledger, lock_takeovers};
pub use member::{Holder, LeaseConfig, Member};
pub use node_locks::{Held, NodeLocks};
pub use stats::{LockCounters, LockEvent, LockStats};

use dm_verbs::{GlobalAddr, VerbError};
use std::fmt;

/// Errors of [`NodeLocks`]; each index maps them into its own error type
/// with the same meaning (`dm_tree::TreeError`, `dm_art::ArtError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockError {
    /// The lock configuration is impossible (`hier_lock` without
    /// `onchip_lock`, an empty lock table, a host table larger than a chunk)
    /// or does not match the MSs (no host lock table where one is expected).
    BadConfig(String),
    /// A verb failed (QP error, out of bounds, MS out of memory, ...).
    Verb(VerbError),
    /// The lock of the node at this address stayed taken through a million
    /// attempts: its holder died or never released it.
    LockStuck(GlobalAddr),
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::BadConfig(s) => write!(f, "bad lock configuration: {s}"),
            LockError::Verb(e) => write!(f, "{e}"),
            LockError::LockStuck(a) => write!(f, "lock of node {a:?} never released"),
        }
    }
}

impl std::error::Error for LockError {}

impl From<VerbError> for LockError {
    fn from(e: VerbError) -> Self {
        LockError::Verb(e)
    }
}
