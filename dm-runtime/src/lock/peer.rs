//! Lock words left naming this CS although none of its tasks holds them
//! (not in the papers; see the [module docs](super), "A slot left named by
//! this CS under HOCL"): under HOCL, a task holding a slot's CS-local lock
//! takes a slot naming its own CS back.

use super::member::Holder;
use super::node_locks::LockWord;
use super::{LockError, NodeLocks};
use dm_verbs::GlobalAddr;

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
}
