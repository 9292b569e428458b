//! [`Held`]: a node lock held, with its entries in the own-tag ledger
//! (`super::super::ledger`, 64-bit words) and in the CS ledger
//! (`super::super::cs_words`, 16-bit lanes of a member), let go at release
//! or hand-over, or when the `Held` is dropped.

use super::super::cs_words::CsHeld;
use super::super::ledger::ledger;
use super::{LockWord, NodeLocks};
use crate::sync::LocalLockGuard;

/// A held node lock (remote, plus the local one under HOCL). Give it back
/// with [`NodeLocks::release`]: dropped, it leaves the remote lock word
/// taken (a `debug` line of target `dm_runtime::lock` says so; a task
/// dropped mid-operation, as `check --faults crash` does or a service
/// that cancels an operation's future, leaves it so). The own-tag ledger
/// then shows no holder, so this core's next attempt on the word takes it
/// back, and a release request from another CS is granted
/// ([`super::super::ask`]); what the dropped task had posted still lands, as
/// after a crash (the index docs say why a taker needs no repair).
pub struct Held<'t> {
    pub(super) word: LockWord,
    pub(super) local: Option<LocalLockGuard<'t>>,
    pub(super) unreleased: Unreleased,
    /// A member's 16-bit lane: its hold in the CS ledger (`lanes.rs`).
    pub(super) cs: Option<CsHeld<'t>>,
    /// Taken from a name that was not released ([`Held::taken_stale`]).
    pub(super) stale: bool,
    /// The value a 64-bit lock word holds while held (a member's take
    /// count included); 0 for a lane or a lock received by hand-over.
    pub(super) name: u64,
}

impl Held<'_> {
    /// Whether [`NodeLocks::release`] now would hand the lock over (HOCL: a
    /// local waiter is queued and the hand-over bound allows it) instead of
    /// releasing the remote lock word. A waiter that gives up before the
    /// release makes the release take the word back after all.
    pub fn hands_over(&self) -> bool {
        self.local.as_ref().is_some_and(|g| g.can_hand_over())
    }

    /// Whether this lock was taken from a holder that never released it: a
    /// dead member's name taken over after its lease, or a name of this
    /// core or CS that no task here held (a task dropped while holding it,
    /// a CAS whose success went unreported), claimed back, or released to
    /// [`ABANDONED`](super::super::ask::ABANDONED) by such a core at a
    /// waiter's request (`super::super::ask`). Whatever that
    /// holder was doing under the lock may be half done; an index whose
    /// structure changes span several nodes (Dolphin's leaf split,
    /// `dm_art::dolphin`) repairs before it acts. `false` for a lock taken
    /// from the free word or received by hand-over.
    pub fn taken_stale(&self) -> bool {
        self.stale
    }
}

/// A [`Held`]'s entry in the own-tag ledger, let go by
/// [`Unreleased::let_go`] or, with a `debug` line, on drop. `word`: the
/// lock word's address (0: let go); `tag`: the handle's tag, 0 for a lane.
pub(super) struct Unreleased {
    word: u64,
    tag: u64,
}

impl Unreleased {
    /// Records in the own-tag ledger that this handle no longer holds the
    /// word: it released it, or handed the lock over (HOCL, possibly to
    /// another core, whose thread has its own ledger), or the task holding
    /// it was dropped. Without the hand-over's record the giver's entry
    /// stayed held for ever once the receiver released the word from
    /// another core, and the giver could never again recognise a CAS of its
    /// own that took the word unreported (the sherman-hier hang on
    /// soft-RoCE of 2026-11-24, docs/rdma.md); without the drop's, neither
    /// this core's next attempt nor a release request could take the word
    /// back (`check --faults unreported,crash` hung on the seed after a
    /// crash that cut a release off, whose CS reused the dead one's tag).
    pub(super) fn let_go(&mut self, why: &'static str) {
        let word = std::mem::take(&mut self.word);
        if word == 0 || self.tag == 0 {
            return;
        }
        tracing::trace!(
            word = format_args!("{word:#x}"),
            tag = format_args!("{:#x}", self.tag),
            why,
            "lock let go"
        );
        ledger((self.tag, word), |e| {
            e.held = e.held.saturating_sub(1);
            e.epoch += 1;
        });
    }
}

impl Drop for Unreleased {
    fn drop(&mut self) {
        if self.word != 0 {
            tracing::debug!(
                word = format_args!("{:#x}", self.word),
                "node lock dropped without release: its lock word stays taken"
            );
            self.let_go("dropped");
        }
    }
}

impl NodeLocks {
    pub(super) fn held<'t>(
        &self,
        word: LockWord,
        local: Option<LocalLockGuard<'t>>,
        cs: Option<CsHeld<'t>>,
    ) -> Held<'t> {
        Held {
            word,
            local,
            cs,
            stale: false,
            name: 0,
            unreleased: Unreleased {
                word: word.raw(),
                tag: match word {
                    LockWord::Word(_) => self.tag,
                    LockWord::Lane { .. } => 0,
                },
            },
        }
    }
}
