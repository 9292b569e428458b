//! # dm-runtime: a thread-per-core executor for DM indexes
//!
//! Indexes are async state machines; every remote access is a verb future; one
//! executor per core polls that core's CQ and switches tasks after each posted
//! verb, after a lock failure ([`yield_now`]) and on a queue wait (the local
//! lock table, [`sync`]). The design is in `docs/architecture.md`; what a task
//! switch costs against tokio, and how it got there, in
//! `docs/experiments/runtime.md`.
//!
//! ## What lives where
//! | module | what |
//! |---|---|
//! | [`executor`] | [`Executor`], one per core: scheduling rounds, one doorbell per QP per round, batched CQ polls, per-task verb accounting; [`spawn`] |
//! | [`verbs`] | [`read`], [`write`](fn@write), [`cas`], [`masked_cas`], [`faa`], [`rpc`]: verb futures ([`Verbed`]) |
//! | [`sync`] | [`yield_now`], [`yield_until`], [`sync_virtual_time`] (orders accesses to CS-shared state by virtual time on sim), the local lock table with FIFO hand-over (Sherman's HOCL, §4.3), [`sync::SharedCell`] for CS-wide state with cross-core wakes (SMART's read delegation, §4.2) |
//! | [`lock`] | one-sided node locks: FG+'s lock word and Sherman's lock techniques (Sherman §4.3-4.5); membership, leases and the takeover of a dead holder's locks ([`lock::member`], issue 33); release requests to a live holder ([`lock::ask`]) and the CS ledger of lock words that name a whole CS ([`lock::cs_words`]) |
//! | [`checksum`] | the node checksum behind checksum-validated READs |
//! | [`hint`] | CPU hints for the indexes' CS-side searches ([`hint::prefetch`]), which forbid `unsafe` themselves |
//! | [`scan`] | [`ScanBuf`]: a range scan's entries in flat arrays, which the indexes' `scan_into` fill without an allocation per key (issue 32) |
//! | [`join`] | [`join_inline`]: `join_all` for a round of a few verbs without its two heap allocations; [`read_round`]: a round of any number of READs in storage recycled per thread (a scan's leaf READs; issue 32) |
//! | [`alloc`] | chunk allocation through the MS RPC, carved locally (Sherman §4.2) |
//! | [`catalog`] | named roots on MS 0: [`catalog::open_or_create`] an index by name from any process, its root words in a root area of the superblock (issue 31) |
//! | [`sim_driver`] | [`SimRuntime`]: many simulated cores in one OS thread |
//! | [`threads`] | [`run_threads`]: one pinned OS thread per core on real fabrics, scoped: returns when every core's future ends |
//! | [`service`] | [`Runtime`]: long-lived core threads (or one sim thread) serving jobs submitted from any thread through a [`Spawner`] (`Send + Sync`), answered through [`Submitted`] futures; idle cores park; clean shutdown |
//! | `core` | per-core state the futures reach through a thread local; [`now_ns`], [`clock_is_virtual`], [`charge_cpu`], [`charge_op`], [`task_stats`], [`num_ms`], [`current_core_clock`], [`unposted_mark`] (whether this core rang a doorbell since a mark: what SMART's read delegation batches by) |
//! | `waker` | allocation-free task wakers; a core's own wakers decoded to task keys |
//! | `task` | a task's allocation (counters, future), its slab slot, [`JoinHandle`] |
//! | `inflight` | the in-flight table: one slot per posted WR until its result is taken |
//! | `inbox` | cross-core wakes: each executor's inbox and the registry of inboxes; the `Parker` of a service thread, which a wake unparks |
//! | `waiter` | whom a completion wakes: a task key or a foreign waker |
//!
//! The private modules are layered without cycles: `waiter`, `task` and
//! `inbox` are leaves; `inflight` uses `waiter`; `core` uses `inflight`, `task`
//! and `inbox`; `waker` uses `core`; `executor`, `verbs` and `sync` sit on top;
//! `sim_driver` and `threads` drive executors, and `service` drives both.
//!
//! ## Invariants
//! - **One thread per core.** An [`Executor`] and everything it owns (task
//!   slab, run queue, in-flight table, post lists: `core`'s `CoreState`) is
//!   touched only by the OS thread that ticks it; it is `!Send` (an `Rc`), and
//!   so is a [`JoinHandle`]. Spawned futures need not be `Send`.
//! - **Runtime calls need a task.** Verb futures, [`spawn`], [`now_ns`],
//!   [`charge_op`] and the other free functions find their core through a
//!   thread local the executor sets while it polls (through a guard that
//!   restores it also when a panic unwinds); outside a poll they panic.
//! - **A panicking task fails alone.** Its poll's panic is caught, the task
//!   ends with a [`JoinError`] for its [`JoinHandle`], and the core serves its
//!   other tasks. A panic whose handle was dropped is resumed by the
//!   run-to-completion drivers ([`Executor::block_on`], [`SimRuntime::run`]).
//! - **Cores meet only through wakers and `sync`.** A waker's data word is
//!   `(executor id << 32) | task key`: cloning and dropping are free and it is
//!   `Send`. A same-core wake pushes the key on the run queue; any other wake
//!   goes to the target core's mutex-guarded inbox, found in a lock-free
//!   table and drained once per round, and unparks the core's thread if it
//!   parked (service cores); only a thread that runs a sim driver
//!   records the wake for the simulator. The lock table and
//!   [`sync::SharedCell`] are the runtime's only state shared by cores.
//! - **The in-flight slot owns the result.** `wr_id = generation << 32 |
//!   slot`: a late completion cannot reach a reused slot. A verb future dropped
//!   while its WR is in flight marks its slot abandoned (checked by
//!   generation); the completion frees it. Verb futures are `!Send`: they
//!   belong to the core that posts them.
//!   Task keys stay below `u32::MAX`, which marks an abandoned slot.
//! - **Tasks are polled in place.** The future stays in its slab slot during
//!   the poll; only the executor removes a slot, after a `Ready` poll.
//! - **Service.** A [`Runtime`] owns its threads: [`Runtime::start`] runs
//!   one OS thread per core, which alone owns and ticks that core's
//!   [`Executor`] (opened on that thread); [`Runtime::start_sim`] runs one
//!   OS thread that owns the `SimFabric` and its [`SimRuntime`] with every
//!   simulated core. Other threads reach a core only through its
//!   submission queue (a mutex-guarded `Vec` of boxed jobs and a flag,
//!   drained in one batch per round, bounded by
//!   [`ServiceConfig::queue_depth`]) and its inbox. A job's `make` runs on
//!   the core thread and the future it returns is spawned there (it need
//!   not be `Send`); its [`Submitted`] is `Send` and may be awaited on any
//!   thread or executor: tokio, `futures::executor`, a dm-runtime task on
//!   any core. [`Spawner::block_on`] must not run on a core thread (it
//!   panics there: it would block the core). **Parking:** a core with no
//!   ready task, no verb in flight and no queued job polls on for
//!   [`ServiceConfig::spin_ns`] wall ns, then sets its `sleeping` flag,
//!   fences, re-checks its queue, its inbox flag and shutdown, and only
//!   then parks; a submitter or a cross-core waker publishes its flag,
//!   fences, and unparks the thread if its swap clears `sleeping`, so no
//!   wake is lost. A core with verbs in flight never parks.
//! - **Virtual clocks are shared cells.** On `sim` each core's clock is an
//!   `Rc<Cell<u64>>` shared with the simulator, so charging CPU time and
//!   reading the clock never borrow the simulator.
//!
//! ## Accounting
//! A task's verb counters sit beside its future in the task's allocation; the
//! executor points the core at them for the poll, so a verb is counted once,
//! where it is posted ([`task_stats`]), and yields and lock waits cost no
//! accounting. An RTT is counted when a task parks after posting in that poll,
//! a doorbell per distinct QP it posted to in that poll. Core totals
//! ([`Executor::stats`]) add up the finished and live tasks when asked, with
//! the doorbells the core rang.
//!
//! ## Tracing
//! At `trace` level the runtime emits `post` (a WR joins this round's post
//! list), `completion` (the CQ poll hands a result to its slot), `switch`
//! (a task poll ended; `ready` if it finished) and the lock table's `lock
//! wait` / `lock granted`. [`current_core_clock`] gives a subscriber the
//! core and its (virtual, on sim) time.
//!
//! ## Use
//! On `sim`: build a [`SimRuntime`] over a `dm_verbs::sim::SimFabric`, add
//! cores with [`SimRuntime::add_core`], spawn index operations with
//! [`SimRuntime::spawn_on`] (or [`SimRuntime::block_on`] one future) and
//! [`SimRuntime::run`] until the simulation is idle; inside, index code awaits
//! [`read`], [`cas`], ... and [`yield_now`] after a failed lock. On `loopback`
//! and `rdma`: [`run_threads`], or an [`Executor`] over a core's queues and
//! [`Executor::block_on`]. `tests/sim.rs` and `tests/loopback.rs` are small
//! complete examples. A service that submits work from its own threads
//! (tokio handlers, say) starts a [`Runtime`] and keeps it; `tests/service.rs`
//! shows both fabrics.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod alloc;
pub mod catalog;
pub mod checksum;
mod core;
pub mod executor;
pub mod hint;
mod inbox;
mod inflight;
pub mod join;
pub mod lock;
pub mod scan;
pub mod service;
pub mod sim_driver;
pub mod sync;
mod task;
pub mod threads;
pub mod verbs;
mod waiter;
mod waker;

pub use self::core::{
    charge_cpu, charge_op, clock_is_virtual, current_core_clock, now_ns, num_ms, task_stats,
    unposted_mark, PostMark,
};
pub use executor::{spawn, ExecConfig, Executor};
pub use join::{join_inline, read_round, ReadRound};
pub use scan::ScanBuf;
pub use service::{Runtime, ServiceConfig, Spawner, SubmitError, Submitted};
pub use sim_driver::{SimCore, SimRuntime};
pub use sync::{sync_virtual_time, yield_now, yield_until};
pub use task::{JoinError, JoinHandle};
pub use threads::run_threads;
pub use verbs::{cas, faa, masked_cas, read, rpc, write, ReadBuf, VerbFuture, VerbResult, Verbed};
