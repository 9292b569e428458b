//! A long-lived, embeddable runtime: core threads that serve jobs submitted
//! from any thread, park when idle, and shut down cleanly (the role of
//! tokio's `Handle`, embassy's `SendSpawner`, glommio's parking).
//!
//! [`Runtime::start`] runs one OS thread per core, each ticking its own
//! [`Executor`]; [`Runtime::start_sim`] runs one OS thread that drives a
//! [`SimRuntime`] with a simulated core per entry. A [`Spawner`] (`Clone +
//! Send + Sync`) submits a job to one core: a `make` closure that runs on
//! the core thread and returns the future to spawn there, so the future
//! need not be `Send` (index operations hold `Rc`s and verb futures); its
//! output comes back through a [`Submitted`] future, awaitable on any
//! thread or executor.
//!
//! - **Submission.** Each core has a bounded queue (`intake.rs`, at most
//!   [`ServiceConfig::queue_depth`] jobs waiting): a mutex-guarded `Vec`
//!   plus a flag, drained in one batch at the start of a scheduling round
//!   (one relaxed load when nothing came).
//! - **Idle cores park.** With nothing ready, no verb in flight and nothing
//!   queued, a core keeps polling for [`ServiceConfig::spin_ns`] wall ns,
//!   then parks its thread; a submission, a cross-core wake of one of its
//!   tasks (through its inbox) or the shutdown unparks it (`Parker` in
//!   `inbox.rs` has the protocol). A core with verbs in flight never parks:
//!   it busy-polls its CQ as RDMA cores do.
//! - **Failures stay with their job.** A job whose `make` or future panics
//!   fails its own [`Submitted`] with [`SubmitError::Panicked`]; the core
//!   goes on serving.
//! - **Shutdown** ([`Runtime::shutdown`], or dropping the runtime) stops
//!   intake, runs the queued jobs and every live task to the end, joins the
//!   threads and returns each core's [`Executor::stats`].
//!
//! ```
//! use dm_runtime::{faa, Runtime, ServiceConfig};
//! use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
//! use dm_verbs::{GlobalAddr, MsConfig};
//! use std::sync::Arc;
//!
//! let ms = MsConfig { region_bytes: 1 << 20, chunk_bytes: 1 << 16, ..Default::default() };
//! let fabric = Arc::new(LoopbackFabric::new(LoopbackConfig { ms, ..Default::default() }));
//! let rt = Runtime::start(fabric, &[(0, 0), (0, 1)], ServiceConfig::default());
//! let counter = GlobalAddr::new(0, 4096);
//! // From any thread: the closure runs on core 1, the future it returns too.
//! let old = rt.spawner(1).block_on(move || async move { faa(counter, 1).await.unwrap() });
//! assert_eq!(old.unwrap(), 0);
//! let stats = rt.shutdown();
//! assert_eq!(stats[1].faa, 1);
//! ```

mod intake;
mod serve;
mod spawner;

pub use spawner::{Spawner, Submitted};

use crate::executor::{ExecConfig, Executor};
use crate::inbox::Parker;
use crate::sim_driver::SimRuntime;
use crate::task::JoinError;
use dm_verbs::sim::SimFabric;
use dm_verbs::{Fabric, VerbStats};
use intake::Intake;
use serve::CloseOnExit;
use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Tuning of a [`Runtime`].
#[derive(Clone, Copy, Debug)]
pub struct ServiceConfig {
    /// Pin core thread `i` to CPU `i` with `core_affinity` (the sim thread
    /// to CPU 0), when that CPU exists. As in [`crate::run_threads`], CPU
    /// `i` is the `i`-th of the CPUs the starting thread may run on
    /// (`core_affinity::get_core_ids`): start the runtime before pinning
    /// the thread that starts it. Default false.
    pub pin: bool,
    /// Wall ns an idle core keeps polling before it parks its thread
    /// (0: park at once). Default 50_000 (50 µs).
    pub spin_ns: u64,
    /// Most jobs submitted to one core and not yet spawned there; a full
    /// queue fails [`Spawner::try_spawn`] with [`SubmitError::QueueFull`]
    /// and makes [`Spawner::spawn`] wait. At least 1. Default 4096.
    pub queue_depth: usize,
    /// Each core's executor tuning. Default: [`ExecConfig::default`] with
    /// at most [`SERVICE_POLLS_PER_ROUND`] task polls per round.
    pub exec: ExecConfig,
}

/// Task polls per scheduling round of a service core (the executor's own
/// default, 256, suits a benchmark's thousands of coroutines). A round
/// ends with the CQ poll and, in the service loop, the intake drain, so a
/// short round bounds how long a submission or a completion waits for it;
/// tasks that spin with `yield_now` (a DEX traversal waiting for a node
/// another task is loading, a lock retry) otherwise fill rounds of 256
/// polls. Measured with `kv_service --index dex --selftest 20000`
/// (loopback, 16 connections, 3 runs each): handoff p99 20.5-22.5 µs with
/// 256, 8.5-9.3 µs with 32; sherman, smart and dolphin unchanged within
/// the runs' spread (`docs/experiments/service.md`).
pub const SERVICE_POLLS_PER_ROUND: usize = 32;

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            pin: false,
            spin_ns: 50_000,
            queue_depth: 4096,
            exec: ExecConfig {
                max_polls_per_round: SERVICE_POLLS_PER_ROUND,
                ..ExecConfig::default()
            },
        }
    }
}

/// Why a submission has no output.
pub enum SubmitError {
    /// The core's queue holds `queue_depth` jobs ([`Spawner::try_spawn`]).
    QueueFull,
    /// The runtime's shutdown started before the job was queued, or the
    /// job never ran (its core thread died).
    ShutDown,
    /// The job's `make` or its future panicked; its core goes on serving.
    Panicked(JoinError),
}

impl fmt::Debug for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::QueueFull => f.write_str("QueueFull"),
            SubmitError::ShutDown => f.write_str("ShutDown"),
            SubmitError::Panicked(e) => f.debug_tuple("Panicked").field(e).finish(),
        }
    }
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::QueueFull => f.write_str("the core's submission queue is full"),
            SubmitError::ShutDown => f.write_str("the runtime is shut down"),
            SubmitError::Panicked(e) => write!(f, "submitted job failed: {e}"),
        }
    }
}

impl std::error::Error for SubmitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SubmitError::Panicked(e) => Some(e),
            _ => None,
        }
    }
}

thread_local! {
    /// Set on the threads a [`Runtime`] runs (for [`Spawner::block_on`]'s check).
    static SERVICE_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// True on a core (or sim) thread of some [`Runtime`].
fn on_service_thread() -> bool {
    SERVICE_THREAD.with(Cell::get)
}

/// Owns the core threads of a running service (module docs). `Send`, so
/// a service can keep it in a struct; dropping it shuts down as
/// [`Runtime::shutdown`] does (without joining while a panic unwinds).
pub struct Runtime {
    core_ids: Vec<(u16, u16)>,
    /// One per core, in the order of `core_ids`.
    intakes: Vec<Arc<Intake>>,
    /// One per thread: per core ([`Runtime::start`]) or one ([`Runtime::start_sim`]).
    parkers: Vec<Arc<Parker>>,
    /// Each returns the stats of the cores it ran, in order.
    threads: Vec<JoinHandle<Vec<VerbStats>>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("core_ids", &self.core_ids)
            .field("threads", &self.threads.len())
            .finish()
    }
}

/// The CPU for thread `i` when pinning.
fn cpu_for(pin: bool, i: usize) -> Option<core_affinity::CoreId> {
    if !pin {
        return None;
    }
    core_affinity::get_core_ids().and_then(|ids| ids.get(i).copied())
}

impl Runtime {
    /// Starts one OS thread per entry of `cores` (`(cs, core)` pairs), named
    /// `dm-core-{i}`, each with its own [`Executor`] over
    /// `fabric.open_queues(cs, core)` (opened on that thread). For
    /// `loopback` and `rdma`. Panics if a thread cannot be spawned.
    pub fn start<F: Fabric + Send + Sync + 'static>(
        fabric: Arc<F>,
        cores: &[(u16, u16)],
        cfg: ServiceConfig,
    ) -> Runtime {
        let mut rt = Runtime::empty(cores, cores.len(), cfg);
        for (i, &(cs, core)) in cores.iter().enumerate() {
            let (fabric, cpu) = (fabric.clone(), cpu_for(cfg.pin, i));
            let intake = rt.intakes[i].clone();
            let parker = rt.parkers[i].clone();
            let h = std::thread::Builder::new()
                .name(format!("dm-core-{i}"))
                .spawn(move || {
                    let intakes = [intake];
                    let _close = CloseOnExit(&intakes);
                    enter_service_thread(cpu, &parker);
                    let q = fabric.open_queues(cs, core);
                    let mut ex = Executor::new(q, fabric.num_ms(), cfg.exec);
                    ex.set_parker(parker.clone());
                    serve::serve_core(&mut ex, &intakes[0], &parker, cfg.spin_ns);
                    vec![ex.stats()]
                })
                .expect("dm-runtime: cannot spawn a core thread");
            rt.threads.push(h);
        }
        rt
    }

    /// Starts the simulator as a service: ONE OS thread (`dm-sim`) drives a
    /// [`SimRuntime`] over the fabric that `make_fabric` builds on that
    /// thread, with one simulated core per entry of `cores` (added in
    /// order, so `cores` must open every core of that fabric). Virtual
    /// time continues across submissions. The thread takes new jobs (and
    /// wakes from other threads) only between runs of the simulation to
    /// idle: a job whose task busy-waits in virtual time for another
    /// submission ([`crate::yield_until`] loops) never lets it return.
    ///
    /// Takes a constructor rather than a `SimFabric`: a `SimFabric` is
    /// `!Send` (an `Rc` handle), so it has to be built on the thread that
    /// runs it: `Runtime::start_sim(move || SimFabric::new(cfg), ...)`.
    pub fn start_sim<M>(make_fabric: M, cores: &[(u16, u16)], cfg: ServiceConfig) -> Runtime
    where
        M: FnOnce() -> SimFabric + Send + 'static,
    {
        let mut rt = Runtime::empty(cores, 1, cfg);
        let (intakes, parker) = (rt.intakes.clone(), rt.parkers[0].clone());
        let (core_ids, cpu) = (cores.to_vec(), cpu_for(cfg.pin, 0));
        let h = std::thread::Builder::new()
            .name("dm-sim".into())
            .spawn(move || {
                let _close = CloseOnExit(&intakes);
                enter_service_thread(cpu, &parker);
                let mut sim = SimRuntime::new(make_fabric()).with_exec_config(cfg.exec);
                let cores: Vec<_> = core_ids
                    .iter()
                    .map(|&(cs, c)| sim.add_core(cs, c))
                    .collect();
                sim.set_parker(&parker);
                serve::serve_sim(&mut sim, &cores, &intakes, &parker, cfg.spin_ns);
                cores.iter().map(|&c| sim.executor(c).stats()).collect()
            })
            .expect("dm-runtime: cannot spawn the sim thread");
        rt.threads.push(h);
        rt
    }

    /// A runtime with its queues and parkers, no thread yet.
    fn empty(cores: &[(u16, u16)], threads: usize, cfg: ServiceConfig) -> Runtime {
        let parkers: Vec<_> = (0..threads).map(|_| Arc::new(Parker::default())).collect();
        let intakes = (0..cores.len())
            .map(|i| {
                Arc::new(Intake::new(
                    cfg.queue_depth,
                    parkers[i.min(threads - 1)].clone(),
                ))
            })
            .collect();
        Runtime {
            core_ids: cores.to_vec(),
            intakes,
            parkers,
            threads: Vec::new(),
        }
    }

    /// Number of cores.
    pub fn cores(&self) -> usize {
        self.core_ids.len()
    }

    /// The `(cs, core)` pairs the runtime was started with.
    pub fn core_ids(&self) -> &[(u16, u16)] {
        &self.core_ids
    }

    /// A handle that submits to core `i` (an index into
    /// [`Runtime::core_ids`]). Panics if there is no core `i`.
    pub fn spawner(&self, i: usize) -> Spawner {
        Spawner {
            intake: self.intakes[i].clone(),
            core: i,
        }
    }

    /// Times each thread parked: one entry per core thread
    /// ([`Runtime::start`]), or a single one for the sim thread
    /// ([`Runtime::start_sim`]). Monotonic; read with relaxed atomics.
    pub fn parks(&self) -> Vec<u64> {
        self.parkers.iter().map(|p| p.parks()).collect()
    }

    /// Times each thread (as [`Runtime::parks`]) was found asleep and
    /// unparked by a submitter, a cross-core wake or the shutdown.
    pub fn wakes(&self) -> Vec<u64> {
        self.parkers.iter().map(|p| p.wakes()).collect()
    }

    /// Stops intake (later submissions fail with `ShutDown`), lets each
    /// core run the jobs already queued and every live task to the end,
    /// joins the threads and returns each core's [`Executor::stats`], in
    /// the order of [`Runtime::core_ids`]. Blocks until then: a task that
    /// waits for something that never comes keeps it waiting. A core
    /// thread's panic (a runtime bug: job panics are caught) resumes here.
    pub fn shutdown(mut self) -> Vec<VerbStats> {
        self.close();
        let mut stats = Vec::with_capacity(self.cores());
        for h in std::mem::take(&mut self.threads) {
            match h.join() {
                Ok(s) => stats.extend(s),
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        stats
    }

    fn close(&self) {
        for i in &self.intakes {
            i.close();
        }
    }
}

/// Marks the calling thread as a service thread, pins it, binds its parker.
fn enter_service_thread(cpu: Option<core_affinity::CoreId>, parker: &Parker) {
    SERVICE_THREAD.with(|s| s.set(true));
    if let Some(c) = cpu {
        core_affinity::set_for_current(c);
    }
    parker.bind_current();
}

impl Drop for Runtime {
    /// As [`Runtime::shutdown`], discarding the stats; a core thread's
    /// panic is logged. While a panic unwinds, the threads are told to
    /// stop but not joined (they end once their work does).
    fn drop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.close();
        if std::thread::panicking() {
            return;
        }
        for h in std::mem::take(&mut self.threads) {
            if h.join().is_err() {
                tracing::error!("dm-runtime: a core thread panicked");
            }
        }
    }
}
