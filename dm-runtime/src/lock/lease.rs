//! Taking over a lock whose holder died (issue 33; the protocol is in
//! [`super::member`]): a waiter watches the name its failed lock attempts
//! find ([`LeaseWatch`]); once one member's name stayed for a lease it READs
//! the holder's membership record, and once the holder's heartbeat stood
//! still for another lease (or its incarnation moved on) the holder is dead
//! and the waiter CASes the stale name to its own. No verb is added before
//! a lease has passed, so live contention costs what it did.
//!
//! A live holder's name that stays for a lease is also a question to its
//! owner: release it if no task of yours holds it ([`super::ask`]).
//!
//! [`NodeLocks`] uses it for every lock word it takes; an index with a lock
//! of its own (SMART's rear-embedded leaf lock, `dm_art`) uses
//! [`LeaseWatch`] directly with the holder its lock word names.

use super::cs_words::CsHeld;
use super::ledger::InFlight;
use super::member::{Holder, Member};
use super::node_locks::{Attempt, LockWord};
use super::{LockError, LockEvent, NodeLocks};
use crate::{cas, masked_cas, now_ns};
use dm_verbs::GlobalAddr;

/// What a waiter saw of one lock's holder: the lock value, since when (own
/// clock, ns), the last heartbeat it read with when it read it, and the
/// last time it knew the holder alive (the READ before a heartbeat that
/// moved; at first, when it first saw the name). One per lock attempt
/// loop; [`LeaseWatch::dead`] after each attempt that found the lock held.
#[derive(Default, Debug)]
pub struct LeaseWatch {
    value: u64,
    since: u64,
    beat: Option<(u64, u64)>,
    alive: u64,
    /// For release requests (`super::ask`): the value watched, since when,
    /// and when its owner was last asked (0: not yet).
    ask: (u64, u64, u64),
}

impl LeaseWatch {
    /// A watch that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// After an attempt by member `me` that found the lock held with
    /// lock-word value `value`, naming `holder`: `Some(recovery_ns)` once
    /// the holder is dead (ns from the last time this waiter knew it alive,
    /// or first saw its name; the caller then CASes `value` to its own name
    /// and counts the recovery), else `None`. At most one READ of the
    /// holder's record per lease, none in the first lease. Never dead:
    /// `me`'s own CS incarnation, or a holder that is not a member
    /// (incarnation 0) of a CS that never joined. A non-member name of a
    /// CS that has joined since is stale (one process runs a CS at a time,
    /// and it runs as a member): soft-RoCE left such a word, the low half
    /// of a member's name, when it executed a retransmitted lock CAS a
    /// second time while the unlock WRITE landed (docs/rdma.md).
    /// Errors: the READ's.
    pub async fn dead(
        &mut self,
        me: &Member,
        value: u64,
        holder: Holder,
    ) -> Result<Option<u64>, LockError> {
        let h = holder;
        if h.names(me.cs(), me.incarnation() as u64) {
            return Ok(None);
        }
        let now = now_ns();
        if self.value != value || self.since == 0 {
            *self = LeaseWatch {
                value,
                since: now.max(1),
                beat: None,
                alive: now,
                ask: self.ask,
            };
            return Ok(None);
        }
        let last = self.beat.map_or(self.since, |(_, t)| t);
        if now.saturating_sub(last) < me.lease().lease_ns {
            return Ok(None);
        }
        let (inc, beat) = me.read_record(h.cs).await?;
        if h.inc == 0 && inc == 0 {
            // Not a member, of a CS that never joined: nothing says.
            return Ok(None);
        }
        let dead = !h.is(inc) || self.beat.is_some_and(|(b, _)| b == beat);
        if !dead {
            if self.beat.is_some() {
                // The heartbeat moved: alive within the last lease.
                self.alive = last;
            }
            self.beat = Some((beat, now));
            return Ok(None);
        }
        Ok(Some(now_ns().saturating_sub(self.alive)))
    }

    /// Forget the holder (after a takeover CAS that lost).
    pub fn reset(&mut self) {
        *self = LeaseWatch::default();
    }

    /// Whether to ask the owner of `value` to release the word now
    /// (`super::ask`): once the same value has been seen for `lease_ns`,
    /// and then at most once per `lease_ns`.
    fn ask_due(&mut self, value: u64, lease_ns: u64) -> bool {
        let now = now_ns().max(1);
        let (v, since, asked) = self.ask;
        if v != value || since == 0 {
            self.ask = (value, now, 0);
            return false;
        }
        if now - since < lease_ns || (asked != 0 && now - asked < lease_ns) {
            return false;
        }
        self.ask.2 = now;
        true
    }

    /// After [`LeaseWatch::dead`] said `None` for the lock word `w` holding
    /// `value`, which names a whole CS (`holder`; `super::cs_words`): asks
    /// that CS to release it if none of its tasks holds it, once the value
    /// stood for a lease and then at most once per lease
    /// ([`Member::ask_release_cs`]). Errors: the request's verbs.
    pub async fn ask_cs(
        &mut self,
        me: &Member,
        w: GlobalAddr,
        value: u64,
        holder: Holder,
    ) -> Result<(), LockError> {
        if holder.inc != 0 && holder.cs != me.cs() && self.ask_due(value, me.lease().lease_ns) {
            me.ask_release_cs(w, holder).await?;
        }
        Ok(())
    }
}

impl NodeLocks {
    /// After a failed attempt on `word` that returned `value`: whether this
    /// handle has now taken the lock over from a dead holder
    /// ([`LeaseWatch::dead`], then one CAS), counted as
    /// [`LockEvent::Recovered`] with its recovery time.
    pub(super) async fn take_over_if_dead<'s>(
        &'s self,
        watch: &mut LeaseWatch,
        a: GlobalAddr,
        word: LockWord,
        value: u64,
        attempt: u32,
        t: &mut Attempt<'s>,
    ) -> Result<bool, LockError> {
        let Some(me) = self.member() else {
            return Ok(false);
        };
        let h = match word {
            LockWord::Word(_) => Holder::of_word(value),
            LockWord::Lane { .. } => Holder::of_lane(value),
        };
        let Some(ns) = watch.dead(me, value, h).await? else {
            match word {
                LockWord::Word(w) => {
                    if !self.is_own(value) && watch.ask_due(value, me.lease().lease_ns) {
                        me.ask_release(w, value).await?;
                    }
                }
                LockWord::Lane { word: w, .. } => {
                    // A live CS's name for a lease (`node_locks/lanes.rs`).
                    if h.inc != 0 && h.cs != me.cs() && watch.ask_due(value, me.lease().lease_ns) {
                        me.ask_release_lanes(w, h).await?;
                    }
                }
            }
            return Ok(false);
        };
        if !self.cas_stale(word, value, &mut t.cs, &mut t.name).await? {
            watch.reset();
            return Ok(false);
        }
        self.counters().recovered(ns);
        self.counters().count(LockEvent::Recovered);
        tracing::warn!(
            node = ?a,
            holder = format_args!("{value:#x}"),
            cs = h.cs,
            attempt,
            recovery_ns = ns,
            "took over a lock whose holder is dead (lease expired)"
        );
        Ok(true)
    }

    /// One CAS of `stale` to this handle's name on `word`: whether it took
    /// (`*name`: the value it wrote in a 64-bit word,
    /// [`NodeLocks::take_name`]). A member's lane taken is registered in
    /// its CS ledger before the CAS and held in `cs`
    /// (`node_locks/lanes.rs`).
    pub(super) async fn cas_stale<'s>(
        &'s self,
        word: LockWord,
        stale: u64,
        cs: &mut Option<CsHeld<'s>>,
        name: &mut u64,
    ) -> Result<bool, LockError> {
        Ok(match word {
            LockWord::Word(w) => {
                // In the own-tag ledger while in flight, as every lock CAS
                // of this tag: a CAS of another task of this handle posted
                // after it and completed first must not read this one's
                // success as unreported.
                let in_flight = InFlight::new((self.tag(), w.to_u64()));
                let mine = self.take_name();
                let took = cas(w, stale, mine).await? == stale;
                if took {
                    *name = mine;
                    self.note_taken(w);
                }
                drop(in_flight);
                took
            }
            LockWord::Lane { word: w, shift } => {
                let m = 0xffffu64 << shift;
                let reg = self.lane_begin(w, shift);
                let old = masked_cas(w, stale << shift, self.lane_id() << shift, m, m).await?;
                let took = (old & m) >> shift == stale;
                if took {
                    *cs = reg.map(|r| r.took());
                }
                took
            }
        })
    }
}
