//! The CS ledger of lock words that name a whole CS (issue 33; not in the
//! papers): which of them a task of this CS holds, or has a lock CAS in
//! flight on, across every core of the CS in this process.
//!
//! **Why.** Some lock words name only a CS, not a core: SMART's
//! rear-embedded leaf lock (`dm_art::layout::lock_taken`, 15 bits of name)
//! and the 16-bit lanes of the global lock table. On soft-RoCE a lock CAS
//! can take a word while its completion reports a failure (docs/rdma-guest-findings.md,
//! "Node locks taken without the CAS reporting it"). The word then names
//! this CS's live incarnation, so no lease ever expires, and the per-core
//! own-tag ledger (`super::ledger`) cannot tell it from a word held by
//! another core of the same CS. This ledger can: every taker registers the
//! word here *before* its lock CAS is posted ([`CsWords::begin`]) and keeps
//! it registered until its release has completed ([`CsHeld`] dropped after
//! the release verb). So a word that names this CS's current incarnation
//! while the ledger shows no holder and no CAS in flight for it was left by
//! a CAS whose success went unreported, and nobody holds it.
//!
//! **Claiming.** [`CsWords::claim`] registers the word as in flight only if
//! it is absent from the ledger (one mutex section), so at most one task of
//! the CS claims a stale word at a time; the claimer then CASes the word
//! from the stale value to the same value. The CAS proves the word still
//! holds it if no task of the CS took the word meanwhile, which its
//! registration shows: a legitimate taker registers before its CAS and
//! stays registered until its release. A taker that registered before the
//! claim's check makes the claim fail. One that registers while the claim
//! is in flight is what the check cannot see. A release moves a SMART word
//! to the next sequence number, so a SMART taker cannot bring back the
//! stale value. A GLT lane names only the CS, so a taker that found the
//! lane free (its holder released it after the claimer saw it) leaves the
//! same value. [`CsCas::confirm_claim`] therefore refuses a claim during
//! which any lock CAS on the word was registered (`ycsb --fabric loopback
//! --lease-ms`, sherman-onchip: two cores of one CS held a lane at once
//! and an update lost its key).
//!
//! **Another CS's waiter** cannot claim the word; it asks this CS
//! ([`super::Member::ask_release_cs`], a request slot of the membership
//! record), whose serving task checks this ledger the same way and CASes
//! the word to its free value ([`CsWordFormat`] says what that is).
//!
//! Cost: one mutex and one hash-map insert and remove per lock taken, only
//! for handles with a membership (`Member`); nothing without one.

use super::ledger::LEDGER_TAKEOVERS;
use super::member::Holder;
use super::LockError;
use crate::cas;
use dm_verbs::GlobalAddr;
use rustc_hash::FxHashMap as HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

/// How a lock word that names a whole CS reads: for a taken word, the
/// holder it names and the word that frees it; `None` for a free word.
/// SMART's rear lock registers `dm_art::layout::rear_release`.
pub type CsWordFormat = fn(u64) -> Option<(Holder, u64)>;

/// The ledger of one CS (one per [`super::Member`], shared by its cores).
#[derive(Default)]
pub struct CsWords {
    map: Mutex<HashMap<u64, Entry>>,
    format: OnceLock<CsWordFormat>,
}

#[derive(Default, Clone, Copy)]
struct Entry {
    held: u32,
    in_flight: u32,
    /// A claim ([`CsWords::claim`]) is in flight on the word.
    claim: bool,
    /// A lock CAS was registered while that claim was in flight
    /// ([`CsCas::confirm_claim`] then refuses it).
    spoiled: bool,
}

impl Entry {
    /// A registered lock CAS (or claim, `claim`) is no longer in flight;
    /// a claim's marks end with it.
    fn land(&mut self, claim: bool) {
        self.in_flight -= 1;
        if claim {
            (self.claim, self.spoiled) = (false, false);
        }
    }
}

impl fmt::Debug for CsWords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CsWords")
            .field("words", &self.lock().len())
            .finish()
    }
}

impl CsWords {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, word: u64, f: impl FnOnce(&mut Entry)) {
        let mut m = self.lock();
        let e = m.entry(word).or_default();
        f(e);
        if e.held == 0 && e.in_flight == 0 {
            m.remove(&word);
        }
    }

    /// Registers a lock CAS on `word` (a `GlobalAddr::to_u64`) about to be
    /// posted; call before posting it. The guard unregisters on drop (the
    /// CAS failed, errored or was cancelled) unless [`CsCas::took`] turns
    /// it into a hold.
    pub fn begin(&self, word: u64) -> CsCas<'_> {
        self.update(word, |e| {
            e.spoiled |= e.claim;
            e.in_flight += 1;
        });
        CsCas {
            words: self,
            word,
            claim: false,
        }
    }

    /// Registers a claim of `word`, which names this CS's incarnation, if
    /// no task of the CS holds it or has a lock CAS in flight on it (module
    /// docs); `None` otherwise. The caller then CASes the word from the
    /// value it read to the same value and, if that CAS returns it, holds
    /// the word ([`CsCas::took`]).
    pub fn claim(&self, word: u64) -> Option<CsCas<'_>> {
        let mut m = self.lock();
        if m.contains_key(&word) {
            return None;
        }
        m.insert(
            word,
            Entry {
                in_flight: 1,
                claim: true,
                ..Entry::default()
            },
        );
        Some(CsCas {
            words: self,
            word,
            claim: true,
        })
    }

    /// Sets the format of this CS's CS-named words, which serving a
    /// release request needs (`super::ask`); the first call wins: one
    /// format per CS (SMART's rear lock is the only such word so far).
    pub fn set_format(&self, f: CsWordFormat) {
        let _ = self.format.set(f);
    }

    /// Serves another CS's release request for word `w`, READ as `v`
    /// (`super::ask`, on this CS `cs`, incarnation `inc`): if `v` names
    /// this incarnation and no task of the CS holds or CASes `w`, claims
    /// it and CASes `v` to its free word. Whether it released it (counted
    /// in [`super::lock_takeovers`], warned). Errors: the CAS's.
    pub(super) async fn release_stale(
        &self,
        w: GlobalAddr,
        v: u64,
        cs: u16,
        inc: u64,
    ) -> Result<bool, LockError> {
        let Some((h, free)) = self.format.get().and_then(|f| f(v)) else {
            return Ok(false);
        };
        if !h.names(cs, inc) {
            return Ok(false);
        }
        let Some(claim) = self.claim(w.to_u64()) else {
            return Ok(false);
        };
        let released = cas(w, v, free).await? == v;
        drop(claim);
        if released {
            LEDGER_TAKEOVERS.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                word = format_args!("{:#x}", w.to_u64()),
                value = format_args!("{v:#x}"),
                "released a lock word naming this CS that none of its tasks held, \
                 as a waiter of another CS asked"
            );
        }
        Ok(released)
    }
}

impl CsWords {
    /// A hold of `word` that a HOCL hand-over passed on: the giver kept its
    /// registration (it forgot its [`CsHeld`]); the receiver's guard ends it.
    pub fn adopt(&self, word: u64) -> CsHeld<'_> {
        CsHeld { words: self, word }
    }

    /// Serves another CS's request for the 16-bit lanes of GLT word `w`,
    /// READ as `v` (on this CS `cs`, incarnation `inc`; `NodeLocks`'
    /// lanes): frees, with one masked CAS each, the lanes that name this
    /// incarnation and that no task of the CS holds or CASes (claimed for
    /// the CAS). How many it freed (counted in [`super::lock_takeovers`],
    /// warned). Errors: a CAS's.
    pub(super) async fn release_stale_lanes(
        &self,
        w: GlobalAddr,
        v: u64,
        cs: u16,
        inc: u64,
    ) -> Result<u32, LockError> {
        let mut freed = 0;
        for shift in [0u32, 16, 32, 48] {
            let lane = (v >> shift) & 0xffff;
            if lane == 0 || !Holder::of_lane(lane).names(cs, inc) {
                continue;
            }
            let Some(claim) = self.claim(lane_key(w, shift)) else {
                continue;
            };
            // Prove the name stale first, then free it as its holder: a
            // lane names only the CS, so a core of this CS that took it
            // while the claim was in flight leaves the same name
            // (`CsCas::confirm_claim`), and freeing it outright would free
            // that core's lock.
            let m = 0xffffu64 << shift;
            let old = crate::masked_cas(w, lane << shift, lane << shift, m, m).await?;
            if (old & m) >> shift != lane {
                continue;
            }
            let Some(held) = claim.confirm_claim() else {
                continue;
            };
            let release = crate::masked_cas(w, lane << shift, 0, m, m);
            if (while_releasing(Some(held), release).await? & m) >> shift == lane {
                freed += 1;
                tracing::warn!(
                    word = format_args!("{:#x}", w.to_u64()),
                    lane = format_args!("{lane:#x}"),
                    "released a lock lane naming this CS that none of its tasks held, \
                     as a waiter of another CS asked"
                );
            }
        }
        Ok(freed)
    }
}

/// The CS ledger's key of lane `shift` (0, 16, 32, 48) of the GLT word
/// `w`: the word's address plus 1 to 4 (a 64-bit word's key is its
/// 8-aligned address).
pub(super) fn lane_key(w: GlobalAddr, shift: u32) -> u64 {
    w.to_u64() + 1 + (shift / 16) as u64
}

/// A registered lock CAS (or claim) in flight ([`CsWords::begin`]).
#[must_use = "dropping it unregisters the CAS"]
pub struct CsCas<'a> {
    words: &'a CsWords,
    word: u64,
    /// From [`CsWords::claim`].
    claim: bool,
}

impl<'a> CsCas<'a> {
    /// The CAS took the word: it stays registered as held until the
    /// returned guard is dropped, after the release verb has completed.
    pub fn took(self) -> CsHeld<'a> {
        let (words, word, claim) = (self.words, self.word, self.claim);
        std::mem::forget(self);
        words.update(word, |e| {
            e.land(claim);
            e.held += 1;
        });
        CsHeld { words, word }
    }

    /// A claim's CAS returned the stale value: the claimer holds the word
    /// (as [`CsCas::took_over`]) unless a lock CAS of this CS on it was
    /// registered while the claim was in flight, which may have taken the
    /// word and left that same value (module docs); then `None`, the claim
    /// ends, and the word is left as it is (the claim's CAS changed
    /// nothing).
    pub fn confirm_claim(self) -> Option<CsHeld<'a>> {
        let (words, word) = (self.words, self.word);
        {
            let mut m = words.lock();
            let e = m.get_mut(&word)?;
            if e.spoiled {
                // Dropping `self` (after the guard) ends the claim.
                return None;
            }
            e.land(true);
            e.held += 1;
        }
        std::mem::forget(self);
        LEDGER_TAKEOVERS.fetch_add(1, Ordering::Relaxed);
        Some(CsHeld { words, word })
    }

    /// The claim's CAS took a stale word of this CS ([`CsWords::claim`]):
    /// as [`CsCas::took`], and counted with the own-tag ledger's takeovers
    /// in [`super::lock_takeovers`] (the caller counts it per index and
    /// warns).
    pub fn took_over(self) -> CsHeld<'a> {
        LEDGER_TAKEOVERS.fetch_add(1, Ordering::Relaxed);
        self.took()
    }
}

impl Drop for CsCas<'_> {
    fn drop(&mut self) {
        let claim = self.claim;
        self.words.update(self.word, |e| e.land(claim));
    }
}

/// A word this CS holds ([`CsCas::took`]); drop it once the release verb
/// has completed (or failed: a verb error leaves the word to the lease).
#[must_use = "dropping it marks the word released"]
pub struct CsHeld<'a> {
    words: &'a CsWords,
    word: u64,
}

impl Drop for CsHeld<'_> {
    fn drop(&mut self) {
        self.words.update(self.word, |e| e.held -= 1);
    }
}

impl<'a> CsHeld<'a> {
    /// The hold while its release verb may be in flight: end it with
    /// [`CsReleasing::done`] once the verb completed (or failed). Dropped
    /// before (the releasing future was dropped: a cancelled operation),
    /// it keeps the word held in this ledger for ever: otherwise a claimer
    /// on another core, whose CAS goes out on another QP, could take the
    /// word before the posted release lands and then lose it, or its
    /// write, to that release. The cost: no claim or release request ever
    /// frees that word again in this incarnation.
    pub fn releasing(self) -> CsReleasing<'a> {
        CsReleasing(Some(self))
    }
}

/// Awaits `release`, the verb that frees the word `held` holds (if any),
/// with the hold kept as [`CsHeld::releasing`] meanwhile: ended once the
/// verb completed or failed, kept for ever if this future is dropped first.
pub async fn while_releasing<T>(held: Option<CsHeld<'_>>, release: impl Future<Output = T>) -> T {
    let held = held.map(CsHeld::releasing);
    let r = release.await;
    if let Some(h) = held {
        h.done();
    }
    r
}

/// A [`CsHeld`] whose release verb may be in flight ([`CsHeld::releasing`]).
#[must_use = "dropping it keeps the word held in the CS ledger for ever"]
pub struct CsReleasing<'a>(Option<CsHeld<'a>>);

impl CsReleasing<'_> {
    /// The release verb completed (or failed): the hold ends.
    pub fn done(mut self) {
        drop(self.0.take());
    }
}

impl Drop for CsReleasing<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            std::mem::forget(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_is_claimable_only_when_nobody_of_the_cs_touches_it() {
        let w = CsWords::default();
        let c = w.begin(8);
        assert!(w.claim(8).is_none(), "a CAS is in flight");
        let h = c.took();
        assert!(w.claim(8).is_none(), "held");
        drop(h);
        let claim = w.claim(8).expect("nobody holds it");
        assert!(w.claim(8).is_none(), "one claim at a time");
        drop(claim);
        assert!(
            w.claim(8).is_some(),
            "a dropped claim leaves nothing behind"
        );
        let c = w.begin(16);
        drop(c);
        assert!(w.claim(16).is_some(), "a failed CAS leaves nothing behind");
    }

    #[test]
    fn a_claim_during_which_a_cas_was_registered_is_refused() {
        let w = CsWords::default();
        let claim = w.claim(8).unwrap();
        // Another core registers a lock CAS while the claim is in flight:
        // its CAS may take the word and leave the value the claim proves.
        let c = w.begin(8);
        drop(c);
        assert!(claim.confirm_claim().is_none(), "spoiled");
        assert!(w.lock().is_empty(), "nothing left behind");
        let claim = w.claim(8).unwrap();
        let h = claim.confirm_claim().expect("nobody registered meanwhile");
        assert!(w.claim(8).is_none(), "held");
        let c = w.begin(8);
        drop(c);
        drop(h);
        assert!(w.lock().is_empty(), "a hold leaves no claim flag behind");
        let claim = w.claim(8).unwrap();
        assert!(
            claim.confirm_claim().is_some(),
            "a later claim is not spoiled"
        );
    }

    #[test]
    fn a_release_cut_off_keeps_its_hold_and_a_finished_one_ends_it() {
        let w = CsWords::default();
        w.begin(8).took().releasing().done();
        assert!(w.claim(8).is_some(), "released");
        drop(w.begin(24).took().releasing());
        assert!(
            w.claim(24).is_none(),
            "a release whose verb may still land is never claimable"
        );
    }
}
