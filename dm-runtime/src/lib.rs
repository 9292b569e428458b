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
//! - [`verbs`]: [`read`], [`write`](fn@write), [`cas`], [`masked_cas`], [`faa`], [`rpc`].
//! - [`sync`]: [`yield_now`], [`sync_virtual_time`] (orders accesses to
//!   CS-shared state by virtual time on sim), the local lock table with FIFO hand-over
//!   (Sherman's HOCL, §4.3), and [`sync::SharedCell`] for CS-wide state with
//!   cross-core wakes (SMART's read delegation, §4.2).
//! - [`alloc`]: chunk allocation through the MS RPC, carved locally (Sherman §4.2).
//! - [`sim_driver`]: [`SimRuntime`], many simulated cores in one OS thread.
//! - [`threads`]: [`run_threads`], one pinned OS thread per core on real fabrics.
//!
//! ## Tracing
//! At `trace` level the runtime emits `post` (a WR joins this round's post
//! list), `completion` (the CQ poll hands a result to its slot), `switch`
//! (a task poll ended; `ready` if it finished) and the lock table's `lock
//! wait` / `lock granted`. [`current_core_clock`] gives a subscriber the
//! core and its (virtual, on sim) time.
//!
//! ## Design notes (where this refines `ARCHITECTURE.md`)
//! - **Wakers carry no pointer.** A waker's data word is `(executor id << 32) |
//!   task key`; cloning and dropping are free and it is `Send` by construction.
//!   A same-core wake pushes the key on the run queue through a thread-local
//!   pointer to the running core; any other wake goes to the target core's
//!   mutex-guarded inbox, drained once per round (the sim driver turns those
//!   into simulator notifications). Completions for a task of the same core skip
//!   even the thread-local lookup (`executor::deliver`).
//! - **The in-flight slot owns the result.** A verb future that is dropped
//!   while its WR is in flight marks its slot abandoned; the completion frees it.
//!   `wr_id = generation << 32 | slot`, so a late completion cannot reach a reused slot.
//!   The table (`inflight`, private) keeps freed slots in place and marks them
//!   with generation 0, so taking and freeing a slot write a few words
//!   instead of moving an entry.
//! - **Per-task accounting in the task's own allocation.** A task's counters
//!   sit beside its future (`task::TaskCell`); the executor points the core
//!   at them for the poll, so a verb is counted once, where it is posted,
//!   and yields and lock waits cost no accounting. An RTT is counted when a
//!   task parks after posting in that poll, a doorbell per distinct QP it
//!   posted to in that poll. Core totals ([`Executor::stats`]) add up the
//!   finished and live tasks when asked, with the doorbells the core rang.
//!   (Until 2026-11-24 each poll's counters were a delta folded into the
//!   core and the task after the poll: 78 more instructions per verb switch
//!   together with the per-event tracing check, now read once per round.)
//! - **Tasks are polled in place.** The future stays in its slot during the
//!   poll (only the executor removes a slot, after a `Ready` poll), rather
//!   than being taken out of the slab and put back.
//! - **Virtual clocks are shared cells.** On `sim` each core's clock is an
//!   `Rc<Cell<u64>>` shared with the simulator, so charging CPU time and reading
//!   the clock never borrow the simulator.
//!
//! ## Measured (2-core development machine; release build)
//! `cargo run --release -p dm-bench -- runtime --reps 10` (1000 tasks x 1000
//! awaits; the variants interleaved, best of 10). Latest: six runs on
//! 2026-11-24 at 8b0eb1f (a later session, on a machine about 2.5 times as
//! fast as the one of the rows further below), dm-bench's allocator being
//! mimalloc (why: below the table):
//!
//! | variant | dm-runtime | tokio current-thread + `LocalSet` | ratio |
//! |---|---|---|---|
//! | task awaiting a loopback verb completion | 33.9-36.3 ns | 85.9-91.0 ns | 0.38-0.40 |
//! | pure `yield_now` | 11.2-12.6 ns | 54.1-55.5 ns | 0.21-0.23 |
//! | the fabric alone (no runtime) | 11.4-12.1 ns per READ | | |
//! | the leanest executor (a lower bound, see below) | 23.3-24.5 ns | | 0.26-0.27 |
//!
//! The same commit built with glibc's allocator (five runs): verb 41.4-46.1
//! ns against 89.4-105.1 (0.43-0.46), the fabric 18.4-19.7 ns, the leanest
//! executor 35.3-35.9 ns. The steps that day, each measured in alternating
//! runs of `--only dm-verb`: mimalloc (45-46 -> 38-39 ns at a51f7db, where
//! the glibc ratio was 0.47-0.52 over four runs); a CQ batch delivered
//! under one borrow of the in-flight table, task slab and run queue
//! (-> 35.6-36.4 ns); an in-flight slot in one 64-byte line (about 1 ns);
//! the verb future's drop inlined (about 0.7 ns).
//!
//! Why the allocator moves dm-runtime and not tokio: batching. A round
//! posts up to 256 READs in one list, the fabric allocates their 256 result
//! buffers, and the tasks free them a round later; glibc keeps 7 free
//! chunks per size per thread, so all but 7 of those mallocs and frees took
//! its slower paths (21 % of `perf`'s samples of the dm verb switch; with
//! `GLIBC_TUNABLES=glibc.malloc.tcache_count=4000` the a51f7db binary ran
//! 42.4-42.6 ns against tokio's unchanged 92.9-93.7). tokio's tasks post one
//! READ each and free its buffer before the next is allocated, which that
//! cache serves. mimalloc (the bench binary's global allocator since then)
//! has no such bound; both runtimes run under it in the same process.
//!
//! Three runs at 414f75e, on the slower machine and with glibc:
//!
//! | variant | dm-runtime | tokio current-thread + `LocalSet` | ratio |
//! |---|---|---|---|
//! | task awaiting a loopback verb completion | 86.0-116.7 ns | 195.4-206.7 ns | 0.44, 0.54, 0.58 |
//! | pure `yield_now` | 30.2-31.1 ns | 109.9-125.7 ns | 0.24-0.28 |
//! | the fabric alone (no runtime) | 38.9-47.8 ns per READ | | |
//! | the leanest executor (a lower bound, see below) | 64.0-80.3 ns | | 0.33-0.40 |
//!
//! The same day at f8bc387, before the changes listed below: verb 213 ns
//! against 249 (0.86), yield 27.9 ns against 114 (0.24), the fabric 63 ns.
//!
//! On that machine dm-runtime's best-of-10 moved between 86 and 117 ns from
//! one process to the next while tokio's stayed within 6 %; on the faster
//! one both stay within 5 %. Both verb
//! figures include the fabric's own work (executing the READ, allocating
//! and freeing its result, the CQ). The *leanest executor* (dm-bench's
//! `runtime_lean`) runs the same tasks on the same fabric with only what
//! that workload needs: one READ in flight per task, the task index as
//! `wr_id`, a thread-local run queue, no in-flight table, generations,
//! waiter kinds, per-MS post lists, accounting, bounded rounds, cross-core
//! wakes or tracing. dm-runtime spends about 11 ns per switch above it on
//! those features on the faster machine (22-36 ns on the slower one).
//!
//! Instruction counts are stable where wall time is not. Each variant alone
//! under callgrind (`valgrind --tool=callgrind dm-bench runtime --only
//! VARIANT --reps 1 --iters 200`; instructions per switch, per READ for the
//! fabric; the whole process, setup included):
//!
//! | binary | dm-runtime verb | tokio verb | dm-runtime yield | tokio yield | fabric alone | leanest |
//! |---|---|---|---|---|---|---|
//! | f8bc387 | 1,132 | 1,208 | 263 | 487 | 444 | |
//! | cabb09b | 991 | 1,261 | 221 | 491 | 444 | 679 |
//! | 414f75e | 885 | 1,251 | 234 | 491 | 376 | 612 |
//! | 8b0eb1f (mimalloc) | 684 | 1,090 | 229 | 488 | 249 | 473 |
//!
//! The last row counts mimalloc's `malloc` and `free` where the rows
//! before count glibc's (about 175 instructions less per READ buffer in the
//! fabric and verb columns; see the end of this section).
//!
//! tokio's verb count moved by 53 with no change to its code: the compiler
//! inlines the bench's tokio task differently in the two binaries (the
//! yield counts move by a few percent for the same reason). Instruction
//! counts understate what the rework gained in time: `perf annotate`
//! showed the hottest instructions of the verb switch waiting on
//! store-to-load forwarding that the CPU could not do (a struct written
//! with narrow stores, then read back with wider loads), in five places: the WR built on the stack and copied into the post list, a
//! 4-byte load of `num_ms` overlapping the byte of `cur_posted` (a flag since
//! folded into `cur_ms_mask`) stored just
//! before, and in the loopback fabric the completion pushed onto the CQ,
//! each completion drained through a temporary, and the READ's buffer
//! returned from a `Vec` kept on the stack. Each is now written in place.
//! The steps from 1,132 to 885: counting in the task's cell and reading the
//! tracing level once per round (-> 1,053), a statically chosen result
//! mapping in [`Verbed`] (the function pointer was not inlined; -> 1,026),
//! `with_current` inlined (-> 1,021), the in-flight table (-> 991), the
//! post path without read-backs (-> 963), the loopback CQ and READ buffer
//! (-> 895), the join wrapper as a plain future (-> 885). Earlier steps
//! (1,240 at 84090b1 -> 1,130): the loopback READ of whole words stores
//! each word without slicing, the verb functions return [`Verbed`] instead
//! of an `async fn`'s state machine, and a verb is counted once, not twice.
//! About 175 of the fabric's instructions are `malloc` and `free` of the
//! 8-byte READ results (a round's 256 results outgrow malloc's per-thread
//! cache). Earlier still, on a faster machine: 136 ns against tokio's 112
//! before in-flight slots named their task and the verb future's poll was
//! inlined.

pub mod alloc;
mod core;
pub mod executor;
mod inflight;
pub mod sim_driver;
pub mod sync;
mod task;
pub mod threads;
pub mod verbs;

pub use executor::{ExecConfig, Executor};
pub use sim_driver::{SimCore, SimRuntime};
pub use sync::{sync_virtual_time, yield_now, yield_until};
pub use task::JoinHandle;
pub use threads::run_threads;
pub use verbs::{cas, faa, masked_cas, read, rpc, write, VerbFuture, VerbResult, Verbed};

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

/// The polling core's executor id ([`Executor::id`]) and clock (ns), or
/// `None` outside a dm-runtime executor's tick. For `tracing` subscribers
/// that stamp the runtime's events (`post`, `completion`, `switch`, `lock
/// wait`, `lock granted`) with the core's virtual time (`dm-bench trace`).
pub fn current_core_clock() -> Option<(u32, u64)> {
    core::try_current(|c| (c.exec_id, c.clock.now_ns()))
}

/// Charges `ns` of local CPU work to the current core: an index's traversal
/// of its CS-side cache, which posts no verb and so costs nothing on `sim`
/// unless charged. Advances the core's virtual clock on sim (later events of
/// this core, and `now_ns`, move by `ns`); no-op on wall-clock fabrics.
pub fn charge_cpu(ns: u64) {
    core::with_current(|c| c.clock.charge(ns))
}

/// Charges the fabric's CPU cost of one index operation
/// ([`dm_verbs::CpuCost::op_ns`], set by the sim's network model; 0 on real
/// fabrics, where the CPU is really spent) to the current core. Called by
/// the client that issues operations (dm-bench's `ycsb` driver), once per
/// operation before it starts.
pub fn charge_op() {
    core::with_current(|c| c.clock.charge(c.op_ns))
}

/// Verb counters of the running task so far (take a difference around an
/// operation to get its per-operation cost).
pub fn task_stats() -> VerbStats {
    core::with_current(|c| {
        // SAFETY: as in `CoreState::post`.
        let mut s = unsafe { *c.cur_stats.get() };
        // The round trip this poll is about to wait for is not counted yet.
        s.doorbells += c.cur_ms_mask.get().count_ones() as u64;
        s
    })
}

/// Number of memory servers the current core reaches.
pub fn num_ms() -> u16 {
    core::with_current(|c| c.num_ms)
}
