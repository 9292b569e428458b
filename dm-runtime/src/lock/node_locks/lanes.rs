//! A member's 16-bit GLT lanes in its CS ledger (issue 33; not in the
//! papers). A lane (Sherman §4.3's on-chip lock, masked CAS) names a whole
//! CS, `(short incarnation << 10 | cs) + 1`, so the per-core own-tag ledger
//! cannot tell a lane left taken by a CAS of this CS that nobody holds
//! (soft-RoCE re-executing a duplicate CAS after the unlock; a task
//! dropped while holding it) from one another core holds. The CS ledger
//! ([`CsWords`], in the [`super::Member`]) can, as for SMART's rear lock:
//! - every lane lock CAS of a member is registered before it is posted and
//!   held until its unlock has completed ([`NodeLocks::lane_begin`]); a
//!   hand-over passes the hold to the receiver ([`NodeLocks::lane_adopt`]);
//! - a waiter of this CS that finds the lane naming this incarnation while
//!   the ledger shows nobody on it claims it, masked-CASes the name to
//!   itself to prove it unchanged, and holds it unless a lock CAS of the
//!   CS on the lane was registered meanwhile ([`NodeLocks::claim_own_lane`],
//!   [`CsCas::confirm_claim`]);
//! - a waiter of another CS asks this one after a lease (request word
//!   `address | CS_WORD_REQUEST | LANES_REQUEST`,
//!   [`super::super::Member::ask_release_lanes`]); its serving task frees
//!   every lane of the word that names it and that the ledger shows
//!   untouched ([`CsWords::release_stale_lanes`]).
//!
//! A release dropped while its unlock may be in flight keeps the hold
//! ([`CsHeld::releasing`]): the ledger then never frees that lane for a claim or a
//! request in this incarnation, since a claimer on another core (another
//! QP) could otherwise take the lane before the posted unlock lands and
//! lose it to that unlock. Without a membership nothing changes (lanes
//! then name the CS id only).

use super::super::cs_words::{lane_key, CsCas, CsHeld, CsWords};
use super::super::{LockError, LockEvent};
use super::{LockWord, NodeLocks};
use crate::masked_cas;
use dm_verbs::GlobalAddr;

impl NodeLocks {
    /// The member's CS ledger, if any.
    fn cs_words(&self) -> Option<&CsWords> {
        self.member().map(|m| m.cs_words())
    }

    /// Registers a lock CAS on lane `shift` of GLT word `w` about to be
    /// posted (members only).
    pub(in crate::lock) fn lane_begin(&self, w: GlobalAddr, shift: u32) -> Option<CsCas<'_>> {
        self.cs_words().map(|c| c.begin(lane_key(w, shift)))
    }

    /// The hold a HOCL hand-over passed with a member's lane (the giver
    /// kept it registered).
    pub(super) fn lane_adopt(&self, word: LockWord) -> Option<CsHeld<'_>> {
        match word {
            LockWord::Lane { word: w, shift } => {
                self.cs_words().map(|c| c.adopt(lane_key(w, shift)))
            }
            LockWord::Word(_) => None,
        }
    }

    /// After an attempt on `word` found `holder`: if it is a member's lane
    /// naming this CS's incarnation and the CS ledger shows no task on it,
    /// claims it and masked-CASes the name to itself; whether it now holds
    /// it (in `cs`), counted as a takeover and warned.
    pub(super) async fn claim_own_lane<'s>(
        &'s self,
        a: GlobalAddr,
        word: LockWord,
        holder: u64,
        cs: &mut Option<CsHeld<'s>>,
    ) -> Result<bool, LockError> {
        let (LockWord::Lane { word: w, shift }, Some(words)) = (word, self.cs_words()) else {
            return Ok(false);
        };
        let name = self.lane_id();
        if holder != name {
            return Ok(false);
        }
        let Some(claim) = words.claim(lane_key(w, shift)) else {
            return Ok(false);
        };
        let m = 0xffffu64 << shift;
        let old = masked_cas(w, name << shift, name << shift, m, m).await?;
        if (old & m) >> shift != name {
            return Ok(false);
        }
        // A lane names only the CS: a core of this CS that took it while
        // the claim was in flight leaves the same name (`CsCas::confirm_claim`).
        let Some(held) = claim.confirm_claim() else {
            return Ok(false);
        };
        *cs = Some(held);
        self.counters().count(LockEvent::TakenOver);
        tracing::warn!(
            node = ?a,
            lane = format_args!("{name:#x}"),
            "lock lane names this CS but no task of it holds it (a CAS of ours took it \
             unreported, or re-executed, or its holder was dropped); taking it"
        );
        Ok(true)
    }
}
