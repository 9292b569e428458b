//! # dm-runtime: a thread-per-core executor for DM indexes
//!
//! Indexes are async state machines; every remote access is a verb future; one
//! executor per core polls that core's CQ and switches tasks after each posted
//! verb, after a lock failure ([`yield_now`]) and on a queue wait (the local
//! lock table, [`sync`]).
//!
//! ## What lives where
//! - [`executor`]: [`Executor`], one per core: scheduling rounds, one doorbell per
//!   QP per round, batched CQ polls, per-task verb accounting.
//! - `task` (private): task slots, allocation-free wakers, [`JoinHandle`].
//! - `core` (private): per-core state the futures reach through a thread local.
//! - [`verbs`]: [`read`], [`write`], [`cas`], [`masked_cas`], [`faa`], [`rpc`].
//! - [`sync`]: [`yield_now`], the local lock table with FIFO hand-over
//!   (Sherman's HOCL, §4.3), and [`sync::SharedCell`] for CS-wide state with
//!   cross-core wakes (SMART's read delegation, §4.2).
//! - [`alloc`]: chunk allocation through the MS RPC, carved locally (Sherman §4.2).
//! - [`sim_driver`]: [`SimRuntime`], many simulated cores in one OS thread.
//! - [`threads`]: [`run_threads`], one pinned OS thread per core on real fabrics.
//!
//! ## Measured
//! See `dm-bench runtime` (README); figures are recorded in the README's
//! "Measured" section with the command that produced them.

pub mod alloc;
mod core;
pub mod executor;
pub mod sim_driver;
pub mod sync;
mod task;
pub mod threads;
pub mod verbs;

pub use executor::{ExecConfig, Executor};
pub use sim_driver::{SimCore, SimRuntime};
pub use sync::yield_now;
pub use task::JoinHandle;
pub use threads::run_threads;
pub use verbs::{cas, faa, masked_cas, read, rpc, write, VerbFuture};

use dm_verbs::VerbStats;
use std::future::Future;

/// Spawns `fut` on the current core. Panics outside a dm-runtime task.
pub fn spawn<F: Future + 'static>(fut: F) -> JoinHandle<F::Output> {
    core::with_current(|c| executor::spawn_on(c, fut))
}

/// The current core's clock, ns (virtual on sim, wall otherwise).
pub fn now_ns() -> u64 {
    core::with_current(|c| c.clock.now_ns())
}

/// Verb counters of the running task so far (take a difference around an
/// operation to get its per-operation cost).
pub fn task_stats() -> VerbStats {
    core::with_current(|c| {
        let mut s = c
            .cur_task
            .get()
            .map_or_else(VerbStats::default, |k| c.tasks.borrow()[k as usize].stats);
        s.add(&c.cur.borrow());
        // The round trip this poll is about to wait for is not counted yet.
        s.doorbells += c.cur_ms_mask.get().count_ones() as u64;
        s
    })
}

/// Number of memory servers the current core reaches.
pub fn num_ms() -> u16 {
    core::with_current(|c| c.num_ms)
}
