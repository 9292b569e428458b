//! Lock words left naming this CS although none of its tasks holds them
//! (not in the papers; see the [module docs](super), "A slot left named by
//! this CS under HOCL" and "A word left named by another core"): the HOCL
//! rule, and asking another core of this process whether a word naming it
//! is stale.
//!
//! Each thread that takes 64-bit lock words registers the tags it runs
//! ([`register`]) in a process-wide table; a waiter whose CAS keeps finding
//! the tag of another core of its CS (same CS id and incarnation) asks that
//! core through its mailbox ([`Peer::ask`]). The asked thread answers from
//! its own-tag ledger at its next lock CAS or unlock ([`serve`]): *stale*
//! if none of its handles holds the word or has a CAS on it in flight (and
//! it then keeps a marker in the word's ledger entry, so that no CAS of its
//! own takes the word back through the ledger while the asker takes it
//! over), *busy* otherwise. The asker CASes the stale tag to its own and
//! sends [`Peer::done`], which removes the marker. The tags of an executor
//! that was dropped (or a thread that ended, [`Peer::gone`]) are stale at
//! once: no handle runs them any more.
//!
//! Costs on the lock path: one `Relaxed` load (is any mail pending in the
//! process?) and a look-up of the tag among the few this thread runs.

use super::ledger::{ledger, MARKER};
use super::member::Holder;
use super::node_locks::LockWord;
use super::{LockError, NodeLocks};
use dm_verbs::GlobalAddr;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// The answer of an asked core ([`Reply::get`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Not answered yet.
    Asked,
    /// No handle of that core holds the word or has a CAS on it in flight;
    /// a marker keeps its ledger from taking it back until [`Peer::done`].
    Stale,
    /// That core holds the word, or is taking it.
    Busy,
}

/// Where an asked core writes its [`Answer`].
#[derive(Default)]
pub(super) struct Reply(AtomicU8);

impl Reply {
    pub(super) fn get(&self) -> Answer {
        match self.0.load(Ordering::Acquire) {
            0 => Answer::Asked,
            1 => Answer::Stale,
            _ => Answer::Busy,
        }
    }
}

enum Mail {
    Ask(u64, Arc<Reply>),
    Done(u64),
}

/// One tag as run by one thread: its mailbox, and whether the thread ended.
pub(super) struct Peer {
    /// (fabric, tag): a tag names a core of a CS of one fabric.
    key: (usize, u64),
    /// The executor (core) whose handles run the tag.
    exec: u32,
    gone: AtomicBool,
    /// Another thread's registration of the key replaced this one in the
    /// table ([`register`] puts it back at this thread's next lock CAS).
    superseded: AtomicBool,
    mail: Mutex<Vec<Mail>>,
}

/// Mails sent and not yet served, in the whole process (the lock path's
/// one load).
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Every running tag of the process, by (fabric, tag).
type Peers = Mutex<HashMap<(usize, u64), Arc<Peer>>>;

static PEERS: LazyLock<Peers> = LazyLock::new(Mutex::default);

/// The tags this thread runs; marks them gone when the thread ends.
struct Own(RefCell<Vec<Arc<Peer>>>);

impl Drop for Own {
    fn drop(&mut self) {
        for p in self.0.borrow().iter() {
            p.gone.store(true, Ordering::SeqCst);
            p.drain();
        }
    }
}

thread_local! {
    static OWN: Own = const { Own(RefCell::new(Vec::new())) };
}

impl Peer {
    /// The thread running this tag ended.
    pub(super) fn gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }

    fn send(&self, m: Mail) {
        self.mail.lock().unwrap().push(m);
        PENDING.fetch_add(1, Ordering::Release);
        if self.gone() {
            // Ended while we sent: nobody will serve it.
            self.drain();
        }
    }

    /// Mails dropped unserved (the thread ended).
    fn drain(&self) {
        let n = std::mem::take(&mut *self.mail.lock().unwrap()).len();
        PENDING.fetch_sub(n, Ordering::Release);
    }

    /// Asks whether the lock word `w` naming this tag is stale.
    pub(super) fn ask(&self, w: u64) -> Arc<Reply> {
        let r = Arc::new(Reply::default());
        self.send(Mail::Ask(w, r.clone()));
        r
    }

    /// After a [`Answer::Stale`] answer about `w`: the asker is done with it.
    pub(super) fn done(&self, w: u64) {
        self.send(Mail::Done(w));
    }
}

/// Records that this thread runs handles with `tag` on the current core's
/// fabric (a no-op after the first time).
pub(super) fn register(tag: u64) {
    let Some((exec, fabric)) = crate::core::try_current(|c| (c.exec_id, c.fabric_id)) else {
        return;
    };
    let key = (fabric, tag);
    OWN.with(|o| {
        if let Some(p) = o.0.borrow().iter().find(|p| p.key == key) {
            if p.superseded.swap(false, Ordering::Relaxed) {
                // Another thread ran this tag since (one at a time): the
                // table names this thread again.
                publish(p);
            }
            return;
        }
        let p = Arc::new(Peer {
            key,
            exec,
            gone: AtomicBool::new(false),
            superseded: AtomicBool::new(false),
            mail: Mutex::default(),
        });
        publish(&p);
        o.0.borrow_mut().push(p);
    });
}

/// Makes `p` the one the table names for its key; the one it named before
/// (another thread's) re-publishes itself when its thread runs the tag
/// again.
fn publish(p: &Arc<Peer>) {
    if let Some(old) = PEERS.lock().unwrap().insert(p.key, p.clone()) {
        if !Arc::ptr_eq(&old, p) {
            old.superseded.store(true, Ordering::Relaxed);
        }
    }
}

/// The executor `exec` was dropped: its handles will not run again, so
/// the tags it ran are gone (their mail dropped, their entries removed).
pub(crate) fn executor_ended(exec: u32) {
    OWN.with(|o| {
        o.0.borrow_mut().retain(|p| {
            if p.exec != exec {
                return true;
            }
            p.gone.store(true, Ordering::SeqCst);
            p.drain();
            let mut m = PEERS.lock().unwrap();
            if m.get(&p.key).is_some_and(|q| Arc::ptr_eq(q, p)) {
                m.remove(&p.key);
            }
            false
        })
    });
}

/// The thread that last registered `tag` on the current core's fabric, if
/// any.
pub(super) fn lookup(tag: u64) -> Option<Arc<Peer>> {
    let key = (crate::core::current_fabric_id(), tag);
    PEERS.lock().unwrap().get(&key).cloned()
}

/// Answers the mail sent to this thread's tags, from its ledger. Call
/// outside any ledger borrow.
pub(super) fn serve() {
    if PENDING.load(Ordering::Relaxed) == 0 {
        return;
    }
    OWN.with(|o| {
        for p in o.0.borrow().iter() {
            let mails = std::mem::take(&mut *p.mail.lock().unwrap());
            PENDING.fetch_sub(mails.len(), Ordering::Release);
            for m in mails {
                match m {
                    Mail::Ask(w, r) => {
                        let stale = ledger((p.key.1, w), |e| {
                            let idle = e.held == 0 && e.in_flight.is_empty();
                            if idle {
                                e.in_flight.push(MARKER);
                            }
                            idle
                        });
                        r.0.store(if stale { 1 } else { 2 }, Ordering::Release);
                    }
                    Mail::Done(w) => ledger((p.key.1, w), |e| e.in_flight.retain(|x| *x != MARKER)),
                }
            }
        }
    });
}

/// After how many failed attempts on one unchanged value naming another
/// core of this CS a waiter asks that core (live contention between two
/// cores changes the value long before).
const ASK_AFTER: u32 = 64;

/// What a waiter saw of a lock word naming another core of its CS, and
/// its question to that core. One per lock attempt loop. Dropped with a
/// question out (the attempt loop ended, or was cancelled), it tells the
/// core it is done, so a *stale* answer's marker never outlives it.
#[derive(Default)]
pub(super) struct PeerWatch {
    value: u64,
    since: u32,
    /// The word asked about (raw address), while `reply` is out.
    word: u64,
    reply: Option<(Arc<Peer>, Arc<Reply>)>,
}

impl Drop for PeerWatch {
    fn drop(&mut self) {
        if let Some((p, _)) = self.reply.take() {
            p.done(self.word);
        }
    }
}

impl NodeLocks {
    /// Whether the lock value `holder` names this CS as it is now (this
    /// incarnation; under HOCL any core, else another core than this
    /// handle's).
    fn names_own_cs(&self, holder: u64) -> bool {
        let mine = Holder::of_word(self.tag());
        let h = Holder::of_word(holder);
        h.cs == mine.cs && h.inc == mine.inc
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
    pub(super) fn names_this_cs(&self, word: LockWord, holder: u64) -> bool {
        if !self.hocl_host_table() {
            return false;
        }
        match word {
            LockWord::Word(_) => self.names_own_cs(holder),
            LockWord::Lane { .. } => holder == self.lane_id(),
        }
    }

    /// Takes over a slot left named by this CS ([`NodeLocks::names_this_cs`])
    /// with one CAS of `holder` to this handle's name; counted as a takeover
    /// (as the own-tag ledger's).
    pub(super) async fn take_from_this_cs(
        &self,
        a: GlobalAddr,
        word: LockWord,
        holder: u64,
        attempt: u32,
    ) -> Result<bool, LockError> {
        if !self.cas_stale(word, holder).await? {
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

    /// Whether a 64-bit lock word this handle takes names the task that
    /// holds it, as far as this process goes: not under HOCL, whose
    /// hand-over passes a word still naming the giver to another core, and
    /// not in a device-memory lock table, whose slots every tree on the MS
    /// shares (a HOCL tree among them may have handed one over).
    fn words_name_holders(&self) -> bool {
        !self.hier_lock() && !self.device_table()
    }

    /// Without HOCL: after a failed attempt on the 64-bit word `word` that
    /// found `holder`, the tag of another core of this CS. Once the same
    /// value stayed for [`ASK_AFTER`] attempts, asks that core ([`Peer`]);
    /// on a stale answer (or if its thread ended) CASes the value to this
    /// handle's tag. Whether this handle took the lock.
    pub(super) async fn take_from_other_core(
        &self,
        watch: &mut PeerWatch,
        a: GlobalAddr,
        word: LockWord,
        holder: u64,
        attempt: u32,
    ) -> Result<bool, LockError> {
        let LockWord::Word(w) = word else {
            return Ok(false);
        };
        if !self.words_name_holders() || holder == self.tag() || !self.names_own_cs(holder) {
            return Ok(false);
        }
        if watch.value != holder {
            *watch = PeerWatch {
                value: holder,
                since: attempt,
                word: w.to_u64(),
                reply: None,
            };
            return Ok(false);
        }
        if attempt - watch.since < ASK_AFTER {
            return Ok(false);
        }
        // No running executor of this process has that tag (its executor
        // ended, or it is left from a process that ran this CS before),
        // or the one that had it ended: nothing runs it any more.
        let absent = match lookup(holder) {
            None => None,
            Some(p) if p.gone() => Some(p),
            Some(peer) => {
                match &watch.reply {
                    None => {
                        let r = peer.ask(w.to_u64());
                        watch.reply = Some((peer, r));
                        return Ok(false);
                    }
                    Some((_, r)) => match r.get() {
                        Answer::Asked => return Ok(false),
                        Answer::Busy => {
                            *watch = PeerWatch::default();
                            return Ok(false);
                        }
                        Answer::Stale => {}
                    },
                }
                let took = self.cas_stale(word, holder).await;
                if let Some((p, _)) = watch.reply.take() {
                    p.done(w.to_u64());
                }
                *watch = PeerWatch::default();
                return self.took_from_other_core(took?, a, holder, attempt);
            }
        };
        *watch = PeerWatch::default();
        if !self.cas_stale(word, holder).await? {
            return Ok(false);
        }
        // A handle with that tag may have started meanwhile (it registers
        // before its first CAS) and taken the word through its own-tag
        // ledger before our CAS landed: then give the word back to it.
        let now = lookup(holder);
        let new = match (&absent, &now) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(p), Some(q)) => !Arc::ptr_eq(p, q),
        };
        if new {
            self.give_back(word, holder).await?;
            return Ok(false);
        }
        self.took_from_other_core(true, a, holder, attempt)
    }

    /// After the CAS of a takeover from another core: counts and warns it
    /// if it `took`.
    fn took_from_other_core(
        &self,
        took: bool,
        a: GlobalAddr,
        holder: u64,
        attempt: u32,
    ) -> Result<bool, LockError> {
        if !took {
            return Ok(false);
        }
        self.count_takeover();
        tracing::warn!(
            node = ?a,
            holder = format_args!("{holder:#x}"),
            attempt,
            "lock word holds the tag of another core of this CS that neither holds nor \
             takes it; taking it"
        );
        Ok(true)
    }
}
