//! One attempt at a node's remote lock word ([`NodeLocks::try_take`]): the
//! lock CAS, its retries on a word found free under the other free value,
//! and the own-tag ledger's reading of a CAS that found this handle's tag.

use super::super::ask::ABANDONED;
use super::super::ledger::InFlight;
use super::super::LockError;
use super::{Attempt, LockWord, NodeLocks};
use crate::{cas, masked_cas, yield_now};
use dm_verbs::GlobalAddr;

impl NodeLocks {
    /// One attempt at the remote lock word of the node at `a`: the holder
    /// seen (0: taken by this attempt, `t.name` the value the word holds
    /// then; `t.stale` set if it was taken back from this handle's own
    /// name, [`super::Held::taken_stale`]; `t.retried` set if the holder
    /// seen is not that of a CAS posted at its first poll: it posted more
    /// than one, or waited before its first).
    pub(super) async fn try_take<'s>(
        &'s self,
        a: GlobalAddr,
        word: LockWord,
        attempt: u32,
        t: &mut Attempt<'s>,
    ) -> Result<u64, LockError> {
        Ok(match word {
            LockWord::Word(w) => {
                let key = (self.tag, w.to_u64());
                // A free word is 0, or ABANDONED: released at a waiter's
                // request (`super::ask`), what it guarded may be half done.
                // Each CAS expects the free value the last one found, until
                // one takes the word or finds a name (a CAS that finds the
                // other free value was raced: someone took and freed it).
                //
                // Each CAS is a new post in the own-tag ledger, behind the
                // CASes of ours posted before it. A retry kept under the
                // first CAS's number counted as the earliest in flight, so
                // when another task's retry, posted before it, took the
                // word, this one's own-tag result looked unexplained and
                // both tasks held the lock (`check --index fg --faults
                // torn,delay,writeback,crash --clients 8 --keys 16
                // --first-seed 77241`: two removes of one key).
                let mut expect = 0;
                // A member's take count: a CAS that expects an earlier
                // take's value finds this one's and fails (`super::super::
                // member`, "Holder names in lock words").
                let mine = self.take_name();
                let (mut h, in_flight) = loop {
                    let mut f = InFlight::new(key);
                    while f.asking() {
                        // A READ joined with this attempt goes out while
                        // this waits, before the CAS: not an image under
                        // the lock.
                        t.retried = true;
                        drop(f);
                        yield_now().await;
                        f = InFlight::new(key);
                    }
                    let h = cas(w, expect, mine).await?;
                    if (h == 0 || h == ABANDONED) && h != expect {
                        expect = h;
                        t.retried = true;
                        continue;
                    }
                    break (h, f);
                };
                if h == expect {
                    // Taken (a request's word counted by its server).
                    t.stale |= expect == ABANDONED;
                    t.name = mine;
                    h = 0;
                }
                let own = h != 0 && self.is_own(h);
                if own && attempt.is_power_of_two() {
                    tracing::trace!(
                        word = format_args!("{:#x}", w.to_u64()),
                        tag = format_args!("{:#x}", self.tag),
                        attempt,
                        unexplained = in_flight.unexplained(),
                        "lock CAS found this handle's own tag"
                    );
                }
                if own && in_flight.unexplained() {
                    self.count_takeover();
                    tracing::warn!(
                        node = ?a,
                        attempt,
                        "lock word holds this handle's tag but no task here holds or took it \
                         (a CAS of ours took it unreported); taking it"
                    );
                    t.stale = true;
                    // Held under the value the word holds.
                    t.name = h;
                    h = 0;
                }
                drop(in_flight);
                if h == 0 {
                    self.note_taken(w);
                }
                h
            }
            LockWord::Lane { word: w, shift } => {
                let m = 0xffffu64 << shift;
                let reg = self.lane_begin(w, shift);
                let h = (masked_cas(w, 0, self.lane_id() << shift, m, m).await? & m) >> shift;
                if h == 0 {
                    t.cs = reg.map(|r| r.took());
                }
                h
            }
        })
    }
}
