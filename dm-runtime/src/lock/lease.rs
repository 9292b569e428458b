//! Taking over a lock whose holder died (issue 33; the protocol is in
//! [`super::member`]): a waiter watches the name its failed lock CASes
//! return; once one member's name stayed for a lease it READs the holder's
//! membership record, and once the holder's heartbeat stood still for
//! another lease (or its incarnation moved on) it CASes the stale name to
//! its own. No verb is added before a lease has passed, so live contention
//! costs what it did.

use super::ledger::InFlight;
use super::member::{Holder, Member};
use super::node_locks::LockWord;
use super::{LockError, LockEvent, NodeLocks};
use crate::{cas, masked_cas, now_ns, read};
use dm_verbs::GlobalAddr;

/// What a waiter saw of one holder: its lock value, since when (own
/// clock, ns), the last heartbeat it read with when it read it, and the
/// last time it knew the holder alive (the READ before a heartbeat that
/// moved; at first, when it first saw the name).
#[derive(Default)]
pub(super) struct Watch {
    value: u64,
    since: u64,
    beat: Option<(u64, u64)>,
    alive: u64,
}

impl NodeLocks {
    /// After a failed attempt on `word` that returned `value`: whether this
    /// handle has now taken the lock over from a dead holder (counted as
    /// [`LockEvent::Recovered`] with its recovery time: from the last time
    /// this waiter knew the holder alive, or first saw its name, to the
    /// takeover; a live holder may keep a lock for many leases first). Never for a handle without a member, a holder without one,
    /// or a holder of this handle's own CS incarnation.
    pub(super) async fn take_over_if_dead(
        &self,
        watch: &mut Watch,
        a: GlobalAddr,
        word: LockWord,
        value: u64,
        attempt: u32,
    ) -> Result<bool, LockError> {
        let Some(me) = self.member() else {
            return Ok(false);
        };
        let h = match word {
            LockWord::Word(_) => Holder::of_word(value),
            LockWord::Lane { .. } => Holder::of_lane(value),
        };
        if h.inc == 0 || (h.cs == me.cs() && h.is(me.incarnation() as u64)) {
            return Ok(false);
        }
        let now = now_ns();
        if watch.value != value || watch.since == 0 {
            *watch = Watch {
                value,
                since: now.max(1),
                beat: None,
                alive: now,
            };
            return Ok(false);
        }
        let lease = me.lease().lease_ns;
        let last = watch.beat.map_or(watch.since, |(_, t)| t);
        if now.saturating_sub(last) < lease {
            return Ok(false);
        }
        let (inc, beat) = read_record(me, h.cs).await?;
        let dead = !h.is(inc) || watch.beat.is_some_and(|(b, _)| b == beat);
        if !dead {
            if watch.beat.is_some() {
                // The heartbeat moved: alive within the last lease.
                watch.alive = last;
            }
            watch.beat = Some((beat, now));
            return Ok(false);
        }
        if !self.cas_stale(word, value).await? {
            *watch = Watch::default();
            return Ok(false);
        }
        let ns = now_ns().saturating_sub(watch.alive);
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

    /// One CAS of `stale` to this handle's name on `word`: whether it took.
    async fn cas_stale(&self, word: LockWord, stale: u64) -> Result<bool, LockError> {
        Ok(match word {
            LockWord::Word(w) => {
                // In the own-tag ledger while in flight, as every lock CAS
                // of this tag: a CAS of another task of this handle posted
                // after it and completed first must not read this one's
                // success as unreported.
                let in_flight = InFlight::new((self.tag(), w.to_u64()));
                let took = cas(w, stale, self.tag()).await? == stale;
                if took {
                    self.note_taken(w);
                }
                drop(in_flight);
                took
            }
            LockWord::Lane { word: w, shift } => {
                let m = 0xffffu64 << shift;
                let old = masked_cas(w, stale << shift, self.lane_id() << shift, m, m).await?;
                (old & m) >> shift == stale
            }
        })
    }
}

/// CS `cs`'s membership record: (incarnation, heartbeat). One READ of 16
/// bytes; the two words are each written whole, so a torn READ only mixes
/// two values each of which was there.
async fn read_record(me: &Member, cs: u16) -> Result<(u64, u64), LockError> {
    let r = read(me.record(cs), 16).await?;
    let w = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().unwrap());
    Ok((w(0), w(8)))
}
