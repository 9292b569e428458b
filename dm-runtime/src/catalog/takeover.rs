//! A catalog claim whose creator died (issue 33): a creator that is a
//! member ([`crate::lock::member`]) names itself in bits 8..24 of its
//! claim's state word, `(incarnation mod 63) << 10 | cs) + 1` as a 16-bit
//! GLT lane names its holder (0: not a member; a CS id of 1024 or more
//! claims anonymously). Another member that waits on that claim (same
//! hash, unpublished) watches it with a [`LeaseWatch`]: once the named
//! creator is dead (its heartbeat stood still for a lease after the claim
//! stayed for one, or its incarnation moved on), it CASes the claim word
//! to its own and proceeds as if it had taken the slot empty: it writes
//! its entry body over the dead creator's and runs its own create in its
//! own, freshly zeroed root area (the dead creator's area and anything it
//! wrote there are leaked). The slot goes from one claim to another,
//! never back to empty, so the probe argument of the module docs holds.
//!
//! A member publishes with a CAS from its claim word, so a creator that
//! was only stalled past the lease (the lease's assumption broken)
//! publishes nothing and gets [`CatalogError::ClaimLost`].

use super::{place, state_word, word_state, CatalogError, CLAIMED};
use crate::lock::{Holder, LeaseWatch, LockError, Member};
use crate::verbs::cas;

/// Where a claim word holds its creator's name.
const HOLDER_SHIFT: u32 = 8;

/// The claim word of hash `h` by `me` (anonymous without one).
pub(super) fn claim_word(h: u32, me: Option<&Member>) -> u64 {
    let id = me.filter(|m| m.cs() < 1024).map_or(0, |m| m.lane_name());
    state_word(h, CLAIMED) | id << HOLDER_SHIFT
}

/// Whether claim word `w` names a member.
pub(super) fn names_a_member(w: u64) -> bool {
    (w >> HOLDER_SHIFT) & 0xffff != 0
}

/// [`LeaseWatch::dead`] fails only with its READ's verb error.
fn lock_err(name: &str, e: LockError) -> CatalogError {
    match e {
        LockError::Verb(v) => CatalogError::Verb(v),
        other => CatalogError::Busy(format!("{name} ({other})")),
    }
}

/// One waiter's watch of the claim in one slot.
pub(super) struct Watch(LeaseWatch);

impl Watch {
    pub(super) fn new() -> Self {
        Watch(LeaseWatch::new())
    }

    /// After member `me` found claim word `w` (same hash, unpublished) in
    /// `slot`: if it names a member that is dead, CAS it to `mine`.
    /// `Ok(Ok(()))`: the slot is this creator's now; `Ok(Err(now))`: not
    /// taken, `now` the word as last seen (`w` unless the CAS lost).
    pub(super) async fn take_if_dead(
        &mut self,
        me: &Member,
        slot: u8,
        w: u64,
        mine: u64,
    ) -> Result<Result<(), u64>, CatalogError> {
        if word_state(w) != CLAIMED || !names_a_member(w) {
            return Ok(Err(w));
        }
        let holder = Holder::of_lane((w >> HOLDER_SHIFT) & 0xffff);
        let Some(recovery_ns) = self
            .0
            .dead(me, w, holder)
            .await
            .map_err(|e| lock_err("a catalog claim", e))?
        else {
            return Ok(Err(w));
        };
        let old = cas(place::entry(slot), w, mine).await?;
        if old != w {
            return Ok(Err(old));
        }
        tracing::warn!(
            slot,
            holder = ?holder,
            recovery_ns,
            "took over a catalog claim whose creator is dead (lease expired)"
        );
        Ok(Ok(()))
    }
}
