//! Read delegation and write combining (SMART §4.2, Fig. 9-10): clients of
//! one compute server that target the same key at the same time share one
//! remote operation. One [`Rdwc`] per CS, shared by its cores (`Arc`).
//!
//! ## The hash-based local lock table (§4.2.1)
//! `entries` lock words chosen by a hash of the key; each holds at most one
//! read group and one write group, each with its **unique key**. A client
//! whose key hashes to an entry whose group has another key (a hash
//! conflict) runs its operation alone, as in the paper.
//!
//! ## Read delegation, sound version (§4.2.2)
//! The first reader of a key leads and runs the remote search; readers of
//! the same key queue. The paper hands the leader's result to every reader
//! queued before it finishes; but a reader that arrived after the leader's
//! leaf READ would then return a value older than its own invocation
//! (digest §5.2 item 11), and Fig. 10's shared execution window exists
//! only to patch one symptom of that. Here a leader's result goes only to
//! readers invoked **before its first READ could execute** (its *batch*);
//! readers that arrive later queue for the next round, and when the leader
//! finishes, the first of them leads it. A result thus always comes from a
//! search that ran entirely inside every receiver's operation:
//! linearizable by construction, no window needed. Under a hot key this
//! collapses every round trip's arrivals into one remote search (a reader
//! waits for at most the running search and its own batch's).
//!
//! Who is in the batch. On a wall-clock fabric (`loopback`, `rdma`) the
//! leader takes its core's [`dm_runtime::unposted_mark`] when it joins (or,
//! promoted, when it starts), before it posts anything; a reader that joins
//! with the same mark (same core, no doorbell rung since) joins the batch
//! at once, since the leader's READs have not reached the NIC. Readers
//! queued otherwise (another core's) move into the batch at
//! [`Lead::start_read`]. On `sim` a post takes effect at its virtual time,
//! which later polls of its round may pass, so there is no mark: the
//! leader yields once before it starts (one scheduling round, so that
//! same-key readers issued at the same moment on this CS can queue) and its
//! start fixes the batch. (The yield was every lone leader's on every
//! fabric until issue 32: about 195 instructions of a warm loopback get.)
//!
//! ## Write combining, sound version (§4.2.3)
//! The first writer of a key leads and runs the remote write; same-key
//! writers arriving meanwhile put their value into the group's write
//! combining buffer (WCB) with a sequence number and queue. When the leader
//! holds the leaf lock (the end of the combining window) it *consumes* the
//! WCB: it WRITEs the latest value and records the last sequence number it
//! covered. After the WRITE completes, exactly the followers with a sequence
//! number at most that one are acknowledged (their writes are linearized at
//! that WRITE, in sequence order, the latest winning); later arrivals are
//! not lost, as they can be in the paper's design (a value put into the WCB
//! after the leader read it is acknowledged but never written, digest §5.2
//! item 11): the first of them leads the next round. A leader whose write
//! does not take the in-place path (the key was absent: a new leaf; or an
//! update of an absent key) consumes nothing, and its followers go on the
//! same way.
//!
//! ## Write queue without combining (E-HOCL, §5.3.1, Fig. 19)
//! With write combining off, [`Rdwc::queue_writers`] keeps the write side
//! of the table as HOCL's local lock (Sherman §4.3) in front of SMART's
//! rear-embedded lock: same-key writers of one CS queue FIFO behind the one
//! running its remote write, and each then runs its own write with its own
//! value (nothing is combined or acknowledged on another's behalf). This is
//! the paper's E-HOCL, the ladder rung "+rear embedded lock" before RDWC
//! replaces it; without the queue, every client of a hot key retries the
//! rear lock CAS remotely.
//!
//! As in HOCL (Sherman §4.3) the lock is **handed over**: a writer holding
//! the rear lock with a same-key writer queued WRITEs its item with the
//! lock word still taken and leaves the lock, with the image it stored, to
//! that writer ([`Handed`], [`Lead::can_hand_over`]), which then WRITEs
//! without a READ or a CAS; at most `HOCL.max_handover` times in a row,
//! after which a WRITE frees the word. The artifact's E-HOCL does the same
//! (dmemsys/SMART `LocalLockTable::release_local_lock` with
//! `write_without_unlock`, under `TREE_TEST_HOCL_HANDOVER`, which only
//! write combining turns off).
//!
//! ## Absorbing queued writers (the authors' ART baseline; issue 34)
//! The artifact's DM-ported ART hands HOCL's local lock over between
//! same-key writers of a CS, and a writer that receives it does not write
//! at all: it returns the result of the writer before it
//! (`out_of_place_update_leaf` of dmemsys/SMART, `TREE_TEST_HOCL_HANDOVER`).
//! That loses a writer that arrived after the other's CAS had taken
//! effect. [`Rdwc::absorb_writers`] is the sound version, for the RCU
//! leaves of the ART rungs: the leader, about to publish its own value,
//! covers the writers queued so far, at most [`ABSORB_MAX`] of them
//! ([`Lead::consume`] returns `None`, so it writes its own value, but marks
//! them covered); they are linearized
//! just before its CAS, their values overwritten at once, and receive its
//! result. Writers that queue later lead the next round. Off by default;
//! no effect with write combining on.
//!
//! ## Cancellation
//! A dropped leader (or a dropped follower that was promoted) passes the
//! lead to the next queued client, so nobody waits for a leader that is
//! gone; a dropped follower just leaves the queue. A rear lock handed over
//! passes on with the lead; if the group ends with nobody to take it, the
//! lock is freed by the CS's recovery with a membership, and otherwise by
//! the next write through the table ([`Handed`]). A leader's error is
//! handed to the clients it covered (their operations may or may not have
//! taken effect, like the leader's).

use crate::error::ArtError;
use crate::layout::Leaf;
use dm_runtime::lock::Member;
use dm_runtime::sync::SharedCell;
use dm_verbs::GlobalAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Followers one absorbing leader covers at most ([`Rdwc::absorb_writers`]):
/// the artifact's `MAX_HOCL_HANDOVER` (its local lock is handed over at
/// most about that many times before a writer must take the remote lock).
const ABSORB_MAX: usize = 8;

/// What a queued client receives.
#[derive(Clone, Debug)]
pub(crate) enum Msg<T> {
    /// The result of the operation that covered this client.
    Done(T),
    /// This client leads the next round.
    Lead,
}

pub(crate) type ReadResult = Result<Option<u64>, ArtError>;
pub(crate) type WriteResult = Result<bool, ArtError>;
type Cell<T> = Arc<SharedCell<Msg<T>>>;

/// An entry's read group. It stays in its entry between groups
/// (`active` false) and a new group overwrites the key, so a lone reader
/// neither makes nor drops a group (issue 32: dropping a group's two empty
/// queues was a sixth of a lone read leader's cost); queues that followers
/// grew go to [`Spare`] when their group ends, as before.
#[derive(Default)]
struct ReadGroup {
    /// A group is running (its leader has not finished, or passed the lead on).
    active: bool,
    key: crate::keys::Path,
    /// Served by the running leader (queued before it started).
    batch: Vec<Cell<ReadResult>>,
    /// The running leader's [`dm_runtime::unposted_mark`] from before its
    /// first READ was posted: a reader that joins with the same mark joins
    /// the batch at once (module docs). `None`: readers queue in `next`.
    mark: Option<dm_runtime::PostMark>,
    /// Queued while it runs.
    next: Vec<Cell<ReadResult>>,
}

struct WriteGroup {
    key: crate::keys::Path,
    /// The WCB: the latest value and its sequence number.
    latest: (u64, u64),
    next_seq: u64,
    /// Last sequence number the running leader's WRITE covers.
    consumed: Option<u64>,
    /// Followers with their sequence numbers, in arrival order.
    members: Vec<(u64, Cell<WriteResult>)>,
    /// A rear lock a finished leader left for the one it promoted (E-HOCL).
    handed: Option<Handed>,
}

/// A leaf's rear lock that a writer holds and passes to the next same-key
/// writer of its CS (E-HOCL's hand-over, SMART §5.3.1 and Fig. 19; module
/// docs): the leaf, its image as the giver WROTE it (lock word taken at
/// `image.seq`), the hand-overs so far in this run of them, and the CS
/// ledger's registration of the word (`dm_runtime::lock::CsWords`), which
/// the giver kept for the receiver to adopt (`None` without a membership).
/// Dropped untaken (the group ended: its receivers were cancelled), it
/// ends that registration, and the word, still taken, is one this CS's next
/// writer claims at once and another CS's waiter asks this CS to free
/// (`SmartTree::stale_rear`). Without a membership nothing would ever free
/// it, so a group that ends with its hand-over untaken leaves it to the
/// table as an orphan ([`Rdwc::take_orphans`]), which the CS's next write
/// through the table frees before its own.
pub(crate) struct Handed {
    pub(crate) leaf: GlobalAddr,
    pub(crate) image: Leaf,
    pub(crate) count: u32,
    pub(crate) hold: Option<(Arc<Member>, u64)>,
}

impl Drop for Handed {
    fn drop(&mut self) {
        if let Some((m, w)) = self.hold.take() {
            drop(m.cs_words().adopt(w));
        }
    }
}

#[derive(Default)]
struct LockEntry {
    read: ReadGroup,
    write: Option<WriteGroup>,
}

/// A lock entry behind its mutex, with a hint beside it: `queued` is set
/// (under the mutex) whenever a reader queues for the read group's next
/// round, and cleared (under it) when a leader's start moves that queue
/// into its batch. A leader that finds it clear starts without the mutex
/// (issue 32: a lone reader's start took a lock for nothing); a reader
/// whose setting it has not seen is one queued for the next round, as one
/// arriving after the start would be, so the hint only decides how much
/// a start delegates, never what a reader receives.
#[derive(Default)]
struct Entry {
    m: Mutex<LockEntry>,
    queued: AtomicBool,
}

/// What ended rounds leave for later ones, table-wide (issue 32: no
/// allocation per delegated read or combined write once warm): followers'
/// cells, reset, and the groups' emptied queues, at most [`SPARE`] of
/// each. Only followers touch it (a lone operation's group never grows a
/// queue): taken under an entry's mutex, never the other way round.
#[derive(Default)]
struct Spare {
    read_cells: Vec<Cell<ReadResult>>,
    write_cells: Vec<Cell<WriteResult>>,
    read_queues: Vec<Vec<Cell<ReadResult>>>,
    write_queues: Vec<Vec<(u64, Cell<WriteResult>)>>,
}

/// Cells and queues kept per kind.
const SPARE: usize = 64;

/// Keeps `q` (emptied) for a later group if it holds memory.
fn keep_queue<Q>(kept: &mut Vec<Vec<Q>>, mut q: Vec<Q>) {
    if q.capacity() > 0 && kept.len() < SPARE {
        q.clear();
        kept.push(q);
    }
}

/// Where the table keeps the cells of one kind (a [`Waiter`]'s type).
type CellsOf<T> = fn(&mut Spare) -> &mut Vec<Cell<T>>;

/// Counters of one CS's table (since creation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdwcStats {
    /// Searches answered by another client's remote search.
    pub delegated_reads: u64,
    /// Writes covered by another client's remote WRITE.
    pub combined_writes: u64,
    /// Writes that queued behind a same-key writer of this CS and then ran
    /// their own (the write queue without combining).
    pub queued_writes: u64,
    /// Operations that found their lock entry held for another key.
    pub conflicts: u64,
}

/// One compute server's local lock table for read delegation and write
/// combining; see the module docs.
pub struct Rdwc {
    entries: Box<[Entry]>,
    spare: Mutex<Spare>,
    read_delegation: bool,
    write_combining: bool,
    write_queue: bool,
    /// [`Rdwc::absorb_writers`].
    absorb: bool,
    delegated: AtomicU64,
    queued: AtomicU64,
    combined: AtomicU64,
    conflicts: AtomicU64,
    /// Rear locks handed over to writers that were cancelled, held by
    /// nobody, without a membership (their leaf, and the `seq` the lock
    /// word is taken at); `orphaned` says the list is not empty.
    orphans: Mutex<Vec<(GlobalAddr, u64)>>,
    orphaned: AtomicBool,
}

/// How a client joins.
pub(crate) enum Join<'a, T: Clone> {
    /// No delegation/combining for this operation (switched off, or a hash conflict).
    Alone,
    /// Run the remote operation, then [`Lead::finish`].
    Lead(Lead<'a>),
    /// Wait for a leader.
    Follow(Waiter<'a, T>),
}

fn hash(key: &[u8]) -> u64 {
    // FNV-1a, then a multiplicative finish: keys differing in one byte spread.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 17
}

impl Rdwc {
    /// A table of `entries` lock entries (at least 1; the paper finds 128
    /// enough for 16 clients per CS, Fig. 22e); each technique can be
    /// switched off for the factor analysis (§5.3.1).
    pub fn new(entries: usize, read_delegation: bool, write_combining: bool) -> Self {
        Rdwc {
            spare: Mutex::default(),
            entries: (0..entries.max(1)).map(|_| Entry::default()).collect(),
            read_delegation,
            write_combining,
            write_queue: false,
            absorb: false,
            delegated: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            combined: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
            orphans: Mutex::default(),
            orphaned: AtomicBool::new(false),
        }
    }

    /// Rear locks a cancelled E-HOCL receiver left held (module docs):
    /// their leaves and the `seq` each word is taken at, for the caller to
    /// free (`SmartTree`'s writes do, before their own). Empty, and no
    /// lock taken, in the usual case.
    pub(crate) fn take_orphans(&self) -> Vec<(GlobalAddr, u64)> {
        if !self.orphaned.load(Relaxed) {
            return Vec::new();
        }
        let mut o = self.orphans.lock().unwrap();
        self.orphaned.store(false, Relaxed);
        std::mem::take(&mut *o)
    }

    /// A hand-over nobody took: with a membership its registration ends
    /// (the recovery of `SmartTree::stale_rear` frees the word), without
    /// one it becomes an orphan.
    fn orphan(&self, h: Handed) {
        if h.hold.is_none() {
            self.orphans.lock().unwrap().push((h.leaf, h.image.seq));
            self.orphaned.store(true, Relaxed);
        }
        // Dropped: a registration, if any, ends (`Handed`'s drop).
    }

    /// With write combining off, whether same-key writers of this CS still
    /// queue behind one another (E-HOCL; see the module docs). Off unless
    /// set; no effect while write combining is on (it queues anyway).
    pub fn queue_writers(mut self, on: bool) -> Self {
        self.write_queue = on;
        self
    }

    /// With the write queue and without write combining, whether a leader
    /// about to publish covers the same-key writers queued so far, which
    /// then return its result without writing (module docs, "Absorbing
    /// queued writers"). Off unless set.
    pub fn absorb_writers(mut self, on: bool) -> Self {
        self.absorb = on;
        self
    }

    /// Whether a write leader may hand its rear lock to the next queued
    /// writer: the E-HOCL write queue, without combining or absorbing
    /// (module docs).
    fn hands_over(&self) -> bool {
        self.write_queue && !self.write_combining && !self.absorb
    }

    /// Whether same-key writers queue (write combining or the write queue).
    pub fn queues_writers(&self) -> bool {
        self.write_combining || self.write_queue
    }

    /// Counters.
    pub fn stats(&self) -> RdwcStats {
        RdwcStats {
            delegated_reads: self.delegated.load(Relaxed),
            combined_writes: self.combined.load(Relaxed),
            queued_writes: self.queued.load(Relaxed),
            conflicts: self.conflicts.load(Relaxed),
        }
    }

    /// The key's entry: its hash modulo the entries
    /// ([`dm_runtime::hint::table_index`]: a mask for the default 1,024).
    fn slot(&self, key: &[u8]) -> usize {
        dm_runtime::hint::table_index(hash(key), self.entries.len() as u64) as usize
    }

    pub(crate) fn join_read(&self, key: &[u8]) -> Join<'_, ReadResult> {
        if !self.read_delegation {
            return Join::Alone;
        }
        let idx = self.slot(key);
        let mut e = self.entries[idx].m.lock().unwrap();
        let g = &mut e.read;
        match g.active {
            false => {
                g.active = true;
                g.key.clear();
                g.key.extend_from_slice(key);
                g.mark = dm_runtime::unposted_mark();
                Join::Lead(Lead {
                    t: self,
                    idx,
                    write: false,
                    finished: false,
                    marked: g.mark.is_some(),
                })
            }
            true if g.key[..] == *key => {
                // Into the running batch (same mark: the leader's READs
                // have not reached the NIC) or the next round's queue.
                let now = g.mark.is_some() && g.mark == dm_runtime::unposted_mark();
                let q = if now { &mut g.batch } else { &mut g.next };
                let cell = {
                    let mut sp = self.spare.lock().unwrap();
                    if q.capacity() == 0 {
                        *q = sp.read_queues.pop().unwrap_or_default();
                    }
                    sp.read_cells.pop()
                };
                let cell = cell.unwrap_or_else(|| Arc::new(SharedCell::new()));
                q.push(cell.clone());
                if !now {
                    self.entries[idx].queued.store(true, Relaxed);
                }
                Join::Follow(Waiter {
                    t: self,
                    idx,
                    write: false,
                    cell,
                    cells: |s| &mut s.read_cells,
                    settled: false,
                })
            }
            true => {
                self.conflicts.fetch_add(1, Relaxed);
                Join::Alone
            }
        }
    }

    pub(crate) fn join_write(&self, key: &[u8], value: u64) -> Join<'_, WriteResult> {
        if !self.queues_writers() {
            return Join::Alone;
        }
        let idx = self.slot(key);
        let mut e = self.entries[idx].m.lock().unwrap();
        match &mut e.write {
            None => {
                e.write = Some(WriteGroup {
                    key: crate::keys::Path::from_slice(key),
                    latest: (0, value),
                    next_seq: 1,
                    consumed: None,
                    members: Vec::new(),
                    handed: None,
                });
                Join::Lead(Lead {
                    t: self,
                    idx,
                    write: true,
                    finished: false,
                    marked: false,
                })
            }
            Some(g) if g.key[..] == *key => {
                let seq = g.next_seq;
                g.next_seq += 1;
                if self.write_combining {
                    g.latest = (seq, value);
                }
                let cell = {
                    let mut sp = self.spare.lock().unwrap();
                    if g.members.capacity() == 0 {
                        g.members = sp.write_queues.pop().unwrap_or_default();
                    }
                    sp.write_cells.pop()
                };
                let cell = cell.unwrap_or_else(|| Arc::new(SharedCell::new()));
                g.members.push((seq, cell.clone()));
                Join::Follow(Waiter {
                    t: self,
                    idx,
                    write: true,
                    cell,
                    cells: |s| &mut s.write_cells,
                    settled: false,
                })
            }
            Some(_) => {
                self.conflicts.fetch_add(1, Relaxed);
                Join::Alone
            }
        }
    }

    /// Read groups: a queued client leads the next round (or the group
    /// ends). The new leader's batch is fixed when it starts.
    fn promote_read(&self, e: &mut LockEntry) {
        let r = &mut e.read;
        if !r.active {
            return;
        }
        // The new leader takes a mark when it starts, if it takes one.
        r.mark = None;
        if !r.batch.is_empty() {
            // The leader left without serving its batch: its first leads it.
            let l = r.batch.remove(0);
            l.set(Msg::Lead);
        } else if !r.next.is_empty() {
            let l = r.next.remove(0);
            l.set(Msg::Lead);
        } else {
            // The group ends: queues it grew serve later groups.
            r.active = false;
            if r.batch.capacity() + r.next.capacity() > 0 {
                let mut sp = self.spare.lock().unwrap();
                keep_queue(&mut sp.read_queues, std::mem::take(&mut r.batch));
                keep_queue(&mut sp.read_queues, std::mem::take(&mut r.next));
            }
        }
    }

    /// Write groups: the first uncovered follower leads (or the group ends).
    fn promote_write(&self, e: &mut LockEntry) {
        let Some(w) = &mut e.write else { return };
        w.consumed = None;
        if w.members.is_empty() {
            if let Some(mut w) = e.write.take() {
                if let Some(h) = w.handed.take() {
                    self.orphan(h);
                }
                if w.members.capacity() > 0 {
                    keep_queue(&mut self.spare.lock().unwrap().write_queues, w.members);
                }
            }
        } else {
            let (_, l) = w.members.remove(0);
            if !self.write_combining {
                self.queued.fetch_add(1, Relaxed);
            }
            l.set(Msg::Lead);
        }
    }
}

mod lead;
mod waiter;
pub(crate) use lead::Lead;
pub(crate) use waiter::Waiter;

#[cfg(test)]
mod tests;
