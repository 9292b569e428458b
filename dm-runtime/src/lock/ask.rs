//! Release requests (issue 33 item 5; not in the papers): a lock word left
//! naming a live core that holds nothing is released by that core, when a
//! waiter asks.
//!
//! **Why.** On soft-RoCE a lock word was seen holding a handle's tag again
//! after that handle's unlock WRITE completed (rxe executing a retransmitted
//! lock CAS a second time: docs/rdma.md). The word then names a live member,
//! so no lease ever expires, and only the named core can tell that no task
//! of its own holds it (its own-tag ledger, `super::ledger`). A waiter
//! must never take such a word itself: between the owner's "not mine" and
//! the waiter's CAS the owner may take the word again (two attempts that
//! did this lost keys, docs/rdma.md).
//!
//! **Asking.** A member waiter whose CASes keep finding one name for a
//! lease asks its owner, at most once per lease ([`super::LeaseWatch`]):
//! - a name of its own CS and incarnation: straight to the owner's core
//!   through the process's owner table (`Owners`, in the [`Member`]);
//! - another CS's name: a CAS of the word's address into a free request
//!   slot of that CS's membership record ([`REQUEST_SLOTS`] 8-byte slots at
//!   offset [`REQUESTS_OFF`]); the holder CS's heartbeat ([`Member::beat`])
//!   READs its slots, clears each with a CAS, READs the word and passes a
//!   word naming its current incarnation on through its owner table.
//!
//! **Serving** (the owner's core, as a job in its executor's inbox, served
//! even when it idles or parks): the word is released by one CAS of the
//! name to [`ABANDONED`] only if, on that core's thread, the ledger shows no holder
//! and no lock CAS in flight for (name, word), and, under HOCL, the
//! word's CS-local lock is free (a holder handed the lock keeps the giver's
//! name in the word and holds the local lock). The release CAS is in the
//! ledger while in flight, so a task of the core whose CAS finds the name
//! meanwhile does not read it as a take of its own; the core's later CASes
//! go out after it on the same QP. [`ABANDONED`], not 0: the task that
//! left the word may have been dropped halfway through what the lock
//! guarded (a cancelled future), so the next taker takes it as it would a
//! dead holder's ([`super::Held::taken_stale`]) and repairs what the index
//! repairs then (Dolphin's cut split, `dm_art::dolphin::settle`). Before,
//! it was released to 0 and taken as a free word, and nobody repaired it.
//!
//! **A retired name.** A name whose handles are all dropped (a bench
//! phase's core threads ended) has no owner: no task can hold it, and the
//! one serving the request releases it (under HOCL after the same
//! local-lock check). The owner table marks the name `Releasing` meanwhile,
//! and a new handle of that name waits before its first lock CAS.
//!
//! **Words that name a whole CS** (SMART's rear lock; `super::cs_words`):
//! a waiter of another CS posts the word's address with bit 0 set
//! ([`CS_WORD_REQUEST`], [`Member::ask_release_cs`]); the holder CS's
//! serving task releases it to its free value if it names the CS's
//! current incarnation and the CS ledger shows no task holding or CASing
//! it (claimed there for the CAS). 16-bit GLT lanes name a CS too: their
//! requests set [`LANES_REQUEST`] as well, and the serving task frees the
//! word's lanes that name it and that its CS ledger shows untouched.

/// The value a served release request leaves in a 64-bit lock word (module
/// docs, "Serving"): free, but left by a task that may not have finished,
/// so its next taker takes it stale. Never a name: names carry a tag of a
/// CS id and core below 2^32 - 1.
pub const ABANDONED: u64 = u64::MAX;

use super::cs_words::CsWords;
use super::ledger::{ledger, name_of, InFlight, LEDGER_TAKEOVERS};
use super::member::{Holder, Member};
use super::node_locks::local_key_of;
use super::{LockCounters, LockError, LockEvent};
use crate::sync::LocalLockTable;
use crate::{cas, read};
use dm_verbs::GlobalAddr;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Release-request slots in a membership record (`super::member`'s layout).
pub const REQUEST_SLOTS: usize = 6;
/// Offset of the first request slot in a membership record.
pub const REQUESTS_OFF: u64 = 16;
/// Bit 0 of a request (lock words are 8-byte aligned): the word names a
/// whole CS in the format its [`CsWords`] knows (`super::cs_words`).
pub const CS_WORD_REQUEST: u64 = 1;

/// Set with [`CS_WORD_REQUEST`] in a release request: the word is a GLT
/// word of 16-bit lanes; free those naming the served CS that none of its
/// tasks holds (`CsWords::release_stale_lanes`).
pub const LANES_REQUEST: u64 = 2;

/// Who runs the handles of each 64-bit lock name of one CS (this process's
/// incarnation), and the CS's HOCL local tables; see the module docs.
#[derive(Default)]
pub(super) struct Owners {
    map: Mutex<HashMap<u64, Owner>>,
    hocl: Mutex<Vec<Hocl>>,
    /// A task serving the record's requests runs ([`Member::serve_requests`]).
    serving: AtomicBool,
    /// [`Member::stop`] ran: the CS left (or a test killed it), so it frees
    /// nothing on request any more; its words go to the lease.
    pub(super) stopped: AtomicBool,
    /// Lock words naming this whole CS that its tasks hold or CAS
    /// (`super::cs_words`).
    pub(super) cs_words: CsWords,
}

impl fmt::Debug for Owners {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Owners")
            .field("names", &self.map.lock().unwrap().len())
            .finish()
    }
}

enum Owner {
    /// Handles of this name run on executor `exec`.
    Live {
        exec: u32,
        handles: u32,
        counters: Arc<LockCounters>,
    },
    /// No handle: a retired name's word is being released.
    Releasing,
}

/// A HOCL local table of the CS and where its lock-table words are.
#[derive(Clone)]
pub(super) struct Hocl {
    pub(super) local: Arc<LocalLockTable>,
    pub(super) slots: u64,
    pub(super) device: bool,
    pub(super) glt_ptr_off: u64,
}

impl Hocl {
    /// The local-lock key of the lock-table word `w`, if it is one of this
    /// table's (one READ of the table's address on a host table).
    async fn key_of(&self, w: GlobalAddr) -> Result<Option<u64>, LockError> {
        let base = if self.device {
            GlobalAddr::device(w.ms(), 0)
        } else {
            let p = GlobalAddr::new(w.ms(), self.glt_ptr_off);
            GlobalAddr::from_u64(u64::from_le_bytes(read(p, 8).await?.try_into().unwrap()))
        };
        let (b, x) = (base.to_u64(), w.to_u64());
        if base.is_null() || b == 0 || x < b || x >= b + self.slots * 8 || (x - b) % 8 != 0 {
            return Ok(None);
        }
        Ok(Some(local_key_of(w.ms(), (x - b) / 8)))
    }
}

impl Owners {
    /// A handle of `name` runs on executor `exec` from now on; false while
    /// a retired name's word is being released (the caller yields, retries).
    pub(super) fn register(
        &self,
        name: u64,
        exec: u32,
        counters: &Arc<LockCounters>,
        hocl: Option<Hocl>,
    ) -> bool {
        let mut m = self.map.lock().unwrap();
        match m.get_mut(&name) {
            Some(Owner::Releasing) => return false,
            Some(Owner::Live {
                exec: e, handles, ..
            }) => {
                *e = exec;
                *handles += 1;
            }
            None => {
                m.insert(
                    name,
                    Owner::Live {
                        exec,
                        handles: 1,
                        counters: counters.clone(),
                    },
                );
            }
        }
        drop(m);
        if let Some(h) = hocl {
            let mut v = self.hocl.lock().unwrap();
            if !v.iter().any(|x| Arc::ptr_eq(&x.local, &h.local)) {
                v.push(h);
            }
        }
        true
    }

    /// A handle of `name` on executor `exec` is gone.
    pub(super) fn unregister(&self, name: u64, exec: u32) {
        let mut m = self.map.lock().unwrap();
        if let Some(Owner::Live {
            exec: e, handles, ..
        }) = m.get_mut(&name)
        {
            if *e == exec {
                *handles -= 1;
                if *handles == 0 {
                    m.remove(&name);
                }
            }
        }
    }

    /// Asks the owner of the name in `value` (this CS, this incarnation;
    /// `value` as the word holds it, take count included) to release the
    /// word `w` if no task of it holds it: a job on the owner's core, or,
    /// for a retired name, served here. A request to a core that is gone
    /// is dropped (the asker asks again after a lease).
    pub(super) async fn request(
        self: &Arc<Self>,
        value: u64,
        w: GlobalAddr,
    ) -> Result<(), LockError> {
        let name = name_of(value);
        let live = {
            let mut m = self.map.lock().unwrap();
            match m.get(&name) {
                Some(Owner::Live { exec, .. }) => Some(*exec),
                Some(Owner::Releasing) => return Ok(()),
                None => {
                    m.insert(name, Owner::Releasing);
                    None
                }
            }
        };
        if let Some(exec) = live {
            let o = self.clone();
            crate::inbox::remote_job(
                exec,
                Box::new(move || {
                    drop(crate::spawn(async move {
                        if let Err(e) = o.serve(value, w, Some(exec)).await {
                            tracing::warn!(error = %e, "a release request failed");
                        }
                    }));
                }),
            );
            return Ok(());
        }
        let r = self.serve(value, w, None).await;
        let mut m = self.map.lock().unwrap();
        if matches!(m.get(&name), Some(Owner::Releasing)) {
            m.remove(&name);
        }
        r.map(|_| ())
    }

    /// Releases `w` from `value` if no task holds it (module docs): on the
    /// owner's executor `exec`, or, for a retired name (`None`), anywhere.
    /// Whether it released it. The CAS expects `value` with its take
    /// count: executed again after the core took the word once more
    /// (soft-RoCE's re-executed duplicates), it finds that take's count
    /// and fails, where a CAS of the bare name freed the word under the
    /// new holder (`dm-runtime/tests/ask_replay.rs`).
    async fn serve(&self, value: u64, w: GlobalAddr, exec: Option<u32>) -> Result<bool, LockError> {
        let name = name_of(value);
        let key = (name, w.to_u64());
        let counters = match exec {
            Some(e) => {
                let m = self.map.lock().unwrap();
                match m.get(&name) {
                    Some(Owner::Live {
                        exec: x, counters, ..
                    }) if *x == e => Some(counters.clone()),
                    _ => return Ok(false),
                }
            }
            None => None,
        };
        let free = || ledger(key, |e| e.held == 0 && e.in_flight.is_empty());
        if exec.is_some() && !free() {
            return Ok(false);
        }
        let tables = self.hocl.lock().unwrap().clone();
        let mut guard = None;
        for h in &tables {
            if let Some(k) = h.key_of(w).await? {
                match h.local.try_lock(k) {
                    Some(g) => {
                        guard = Some(g);
                        break;
                    }
                    None => return Ok(false),
                }
            }
        }
        // The READs above let the core's tasks run: look again, then post
        // the CAS with nothing in between.
        if (exec.is_some() && !free()) || self.stopped.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let in_flight = InFlight::new_ask(key);
        let old = cas(w, value, ABANDONED).await?;
        ledger(key, |e| e.epoch += 1);
        drop(in_flight);
        drop(guard);
        let released = old == value;
        if released {
            LEDGER_TAKEOVERS.fetch_add(1, Ordering::Relaxed);
            if let Some(c) = counters {
                c.count(LockEvent::TakenOver);
            }
            tracing::warn!(
                word = format_args!("{:#x}", w.to_u64()),
                name = format_args!("{value:#x}"),
                "released a lock word left naming this core (no task here held it), \
                 as a waiter asked"
            );
        }
        Ok(released)
    }
}

impl Member {
    /// A waiter's request that the holder named `value` release the 64-bit
    /// lock word `w` if it holds nothing there (module docs). Costs nothing
    /// remote for a name of this CS; one READ and at most one CAS on MS 0
    /// for another CS's. Errors: a verb's.
    pub(super) async fn ask_release(&self, w: GlobalAddr, value: u64) -> Result<(), LockError> {
        let h = Holder::of_word(value);
        if h.inc == 0 {
            return Ok(());
        }
        if h.cs == self.cs() && h.is(self.incarnation() as u64) {
            return self.owners().request(value, w).await;
        }
        self.post_request(h.cs, w.to_u64()).await
    }

    /// A waiter's request that CS `holder` release the lock word `w`,
    /// which names that whole CS (`super::cs_words`: SMART's rear lock),
    /// if none of its tasks holds it: one READ and at most one CAS on MS
    /// 0. Nothing for this CS's own name (its waiters claim such a word
    /// themselves) or a non-member's. Errors: a verb's.
    pub async fn ask_release_cs(&self, w: GlobalAddr, holder: Holder) -> Result<(), LockError> {
        if holder.inc == 0 || holder.cs == self.cs() {
            return Ok(());
        }
        self.post_request(holder.cs, w.to_u64() | CS_WORD_REQUEST)
            .await
    }

    /// A waiter's request that CS `holder` free the 16-bit lanes of GLT
    /// word `w` that name it and that none of its tasks holds: as
    /// [`Member::ask_release_cs`]. Errors: a verb's.
    pub async fn ask_release_lanes(&self, w: GlobalAddr, holder: Holder) -> Result<(), LockError> {
        if holder.inc == 0 || holder.cs == self.cs() {
            return Ok(());
        }
        self.post_request(holder.cs, w.to_u64() | CS_WORD_REQUEST | LANES_REQUEST)
            .await
    }

    /// CASes request `raw` into a free request slot of CS `cs`'s record,
    /// unless it is there already (all slots taken: dropped, asked again
    /// after a lease).
    async fn post_request(&self, cs: u16, raw: u64) -> Result<(), LockError> {
        let at = self.record(cs).add(REQUESTS_OFF);
        let r = read(at, REQUEST_SLOTS as u32 * 8).await?;
        let mut free = None;
        for (i, v) in request_words(&r).enumerate() {
            if v == raw {
                return Ok(());
            }
            if v == 0 && free.is_none() {
                free = Some(i);
            }
        }
        if let Some(i) = free {
            cas(at.add(i as u64 * 8), 0, raw).await?;
        }
        Ok(())
    }

    /// The heartbeat's part (module docs), spawned as a task of its own
    /// (one at a time) so that it never delays a beat: a heartbeat that
    /// waited on these verbs stood still for a lease on a loaded `sim`
    /// fabric, and its CS was taken for dead (`check --faults crash`, seed
    /// 22 of nam-hybrid).
    pub(super) fn serve_requests(&self) {
        let owners = self.owners().clone();
        if owners.serving.swap(true, Ordering::Acquire) {
            return;
        }
        let at = self.record(self.cs()).add(REQUESTS_OFF);
        let (cs, inc) = (self.cs(), self.incarnation() as u64);
        drop(crate::spawn(async move {
            if let Err(e) = serve_slots(&owners, at, cs, inc).await {
                tracing::warn!(error = %e, "serving release requests failed");
            }
            owners.serving.store(false, Ordering::Release);
        }));
    }
}

/// The request slots of a READ of the request area, as words.
fn request_words(r: &[u8]) -> impl Iterator<Item = u64> + '_ {
    r.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
}

/// READs the request slots at `at` (CS `cs`, incarnation `inc`), clears
/// each request with a CAS and passes on those whose word names `cs`'s
/// incarnation `inc`. A word that cannot be READ is skipped. Errors: a
/// verb's on the record.
async fn serve_slots(
    owners: &Arc<Owners>,
    at: GlobalAddr,
    cs: u16,
    inc: u64,
) -> Result<(), LockError> {
    let r = read(at, REQUEST_SLOTS as u32 * 8).await?;
    for (i, x) in request_words(&r).enumerate() {
        if owners.stopped.load(Ordering::Relaxed) {
            break;
        }
        if x == 0 || cas(at.add(i as u64 * 8), x, 0).await? != x {
            continue;
        }
        let w = GlobalAddr::from_u64(x & !(CS_WORD_REQUEST | LANES_REQUEST));
        let v = match read(w, 8).await {
            Ok(b) => u64::from_le_bytes(b[..8].try_into().unwrap()),
            Err(e) => {
                tracing::warn!(word = format_args!("{x:#x}"), error = %e, "a release request names a word that cannot be read");
                continue;
            }
        };
        if x & LANES_REQUEST != 0 {
            owners.cs_words.release_stale_lanes(w, v, cs, inc).await?;
            continue;
        }
        if x & CS_WORD_REQUEST != 0 {
            owners.cs_words.release_stale(w, v, cs, inc).await?;
            continue;
        }
        let h = Holder::of_word(v);
        if h.names(cs, inc) {
            owners.request(v, w).await?;
        }
    }
    Ok(())
}
