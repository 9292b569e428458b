//! Releasing a node lock ([`NodeLocks::release`]): the write-back WRITEs,
//! then the unlock (combined in one doorbell or not), or a HOCL hand-over.

use super::super::cs_words::{while_releasing, CsHeld};
use super::super::LockError;
use super::{Held, LockWord, NodeLocks};
use crate::{faa, masked_cas, write, Verbed};
use dm_verbs::GlobalAddr;
use smallvec::SmallVec;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

impl NodeLocks {
    /// Releases `held` after `writes` (node images, in order). The own-tag
    /// ledger lets the word go once the unlock completed (or the hand-over
    /// passed it on); a release that fails or is dropped lets it go too. Writes on
    /// another MS than the lock word complete first; the rest and the unlock
    /// go out as one doorbell with `combine`, one by one otherwise; under
    /// HOCL with a local waiter the writes complete and the lock is handed over.
    pub async fn release(
        &self,
        held: Held<'_>,
        writes: impl IntoIterator<Item = (GlobalAddr, Vec<u8>)>,
    ) -> Result<(), LockError> {
        let Held {
            word,
            local,
            mut unreleased,
            cs,
            name,
            ..
        } = held;
        let mut far = Verbs::new();
        let mut near: Writes = SmallVec::new();
        for (a, d) in writes {
            if a.ms() != word.ms() {
                far.push(write(a, d));
            } else {
                near.push((a, d));
            }
        }
        all_ok(&mut far).await?;
        let combine = self.t.combine;
        let local = match local {
            Some(g) if g.can_hand_over() => {
                self.post_writes(near, combine).await?;
                match g.try_hand_over() {
                    Ok(()) => {
                        unreleased.let_go("handed over");
                        // The receiver adopts the CS ledger's hold.
                        std::mem::forget(cs);
                        return Ok(());
                    }
                    Err(g) => {
                        while_releasing(cs, self.unlock_word(word, name)).await?;
                        unreleased.let_go("released");
                        drop(g);
                        return Ok(());
                    }
                }
            }
            g => g,
        };
        if combine {
            // The WRITEs, then the unlock, in one doorbell: one collection
            // of verbs posted in order at its first poll, no join of two
            // futures (issue 32: callgrind counted the join's layers on
            // every wake of a Sherman update).
            let mut all: Verbs = near.into_iter().map(|(a, d)| write(a, d)).collect();
            all.push(self.unlock_verb(word, name));
            // `while_releasing` written out: awaited in place, the verbs
            // are not moved into a wrapper future's state (issue 32: a
            // 150-byte copy per update).
            let releasing = cs.map(CsHeld::releasing);
            let r = all_ok(&mut all).await;
            if let Some(h) = releasing {
                h.done();
            }
            r?;
        } else {
            self.post_writes(near, false).await?;
            while_releasing(cs, self.unlock_word(word, name)).await?;
        }
        unreleased.let_go("released");
        drop(local);
        Ok(())
    }

    /// [`NodeLocks::release`] without a hand-over: the remote lock word is
    /// released even if a local waiter is queued (HOCL), which then takes
    /// it by CAS. For a protocol that decided before its last round trip
    /// that it would not hand over (DEX's Sherman baseline checks
    /// `can_hand_over` before it READs the version it writes back with the
    /// unlock; `dm_tree::NodeRead::Optimistic`).
    pub async fn release_remote(
        &self,
        mut held: Held<'_>,
        writes: impl IntoIterator<Item = (GlobalAddr, Vec<u8>)>,
    ) -> Result<(), LockError> {
        // Without its local guard the release takes the remote path; the
        // guard, dropped after, passes the local lock on without the
        // remote one.
        let local = held.local.take();
        let r = self.release(held, writes).await;
        drop(local);
        r
    }

    /// WRITEs in order: all in one doorbell if `together`, else each completed
    /// before the next is posted.
    async fn post_writes(&self, writes: Writes, together: bool) -> Result<(), LockError> {
        if together {
            let mut all: Verbs = writes.into_iter().map(|(a, d)| write(a, d)).collect();
            all_ok(&mut all).await?;
        } else {
            for (a, d) in writes {
                write(a, d).await?;
            }
        }
        Ok(())
    }

    async fn unlock_word(&self, w: LockWord, name: u64) -> Result<(), LockError> {
        Ok(self.unlock_verb(w, name).await?)
    }

    /// The verb that frees lock word `w`, held under `name`
    /// ([`Held`]'s), its result dropped.
    fn unlock_verb(&self, w: LockWord, name: u64) -> Verbed<()> {
        match w {
            LockWord::Word(a) if self.t.unlock_faa && name != 0 => {
                // The word holds `name`: adding its negation leaves 0.
                // (FG's FAA release runs without HOCL, so a lock is never
                // received by hand-over, where the name is the giver's.)
                faa(a, name.wrapping_neg()).discard()
            }
            LockWord::Word(a) => {
                let mut zero = dm_verbs::buf::take(8);
                zero.extend_from_slice(&[0; 8]);
                write(a, zero)
            }
            LockWord::Lane { word, shift } => {
                let m = 0xffffu64 << shift;
                masked_cas(word, self.lane_id() << shift, 0, m, m).discard()
            }
        }
    }
}

/// A release's WRITEs, inline for the usual one or two (no allocation).
type Writes = SmallVec<[(GlobalAddr, Vec<u8>); 2]>;
/// Verbs polled together (posted in order at their first poll): a
/// release's WRITEs and its unlock, inline for up to three.
type Verbs = SmallVec<[Verbed<()>; 3]>;

/// Completes when every verb of `fs` has (the first error at once, as
/// `try_join_all`, which allocated a `Vec` of futures per call): all are
/// posted in order at the first poll, so they share one doorbell. By
/// reference: the verbs stay where the caller made them (moving them into
/// the future was a copy per release; issue 32).
fn all_ok(fs: &mut Verbs) -> impl Future<Output = Result<(), dm_verbs::VerbError>> + '_ {
    std::future::poll_fn(move |cx| {
        let mut i = 0;
        while i < fs.len() {
            match Pin::new(&mut fs[i]).poll(cx) {
                Poll::Ready(r) => {
                    r?;
                    fs.remove(i);
                }
                Poll::Pending => i += 1,
            }
        }
        if fs.is_empty() {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    })
}
