//! Many simulated cores in one OS thread, driven by the simulator's virtual clock.
//!
//! [`SimRuntime`] owns one [`Executor`] per simulated CS core. [`SimRuntime::run`]
//! asks the simulator which core is due next ([`SimFabric::next_core`]), ticks
//! that core's executor (its CPU costs advance the core's virtual clock), and
//! reports back whether the core still has ready tasks. Cross-core wakes
//! (inboxes) are turned into simulator notifications after each tick. The run
//! ends when no event is left: every task finished, or the remaining ones wait
//! on something that will never happen (their join handles stay empty, nothing hangs).

use crate::executor::{ExecConfig, Executor};
use crate::inbox::{sim_driver_alive, Parker, REMOTE_WOKEN};
use crate::task::{take_orphan_panic, JoinError, JoinHandle};
use dm_verbs::sim::{SimFabric, SimQueues};
use dm_verbs::Fabric;
use std::collections::HashMap;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A simulated cluster's compute side: executors for simulated cores.
pub struct SimRuntime {
    fabric: SimFabric,
    execs: Vec<Executor<SimQueues>>,
    by_exec_id: HashMap<u32, usize>,
    cfg: ExecConfig,
    ticks: u64,
}

/// Identifies a simulated core inside its [`SimRuntime`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SimCore(pub usize);

impl SimRuntime {
    pub fn new(fabric: SimFabric) -> Self {
        sim_driver_alive(true);
        SimRuntime {
            fabric,
            execs: Vec::new(),
            by_exec_id: HashMap::new(),
            cfg: ExecConfig::default(),
            ticks: 0,
        }
    }

    /// Executor tuning for cores added afterwards.
    pub fn with_exec_config(mut self, cfg: ExecConfig) -> Self {
        self.cfg = cfg;
        self
    }

    pub fn fabric(&self) -> &SimFabric {
        &self.fabric
    }

    /// Adds core `core` of compute server `cs`.
    pub fn add_core(&mut self, cs: u16, core: u16) -> SimCore {
        let q = self.fabric.open_queues(cs, core);
        let idx = q.core_index();
        assert_eq!(
            idx,
            self.execs.len(),
            "open every core of a SimFabric through one SimRuntime"
        );
        let ex = Executor::new(q, self.fabric.num_ms(), self.cfg);
        self.by_exec_id.insert(ex.id(), idx);
        self.execs.push(ex);
        SimCore(idx)
    }

    /// Spawns `fut` on `core`.
    pub fn spawn_on<F: Future + 'static>(
        &mut self,
        core: SimCore,
        fut: F,
    ) -> JoinHandle<F::Output> {
        let h = self.execs[core.0].spawn(fut);
        self.fabric.notify(core.0);
        h
    }

    /// The executor of `core` (stats, live tasks).
    pub fn executor(&self, core: SimCore) -> &Executor<SimQueues> {
        &self.execs[core.0]
    }

    /// Number of cores.
    pub fn cores(&self) -> usize {
        self.execs.len()
    }

    /// Scheduling rounds run so far (all cores).
    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    /// Runs until the simulation is idle. Returns the virtual time then, ns.
    /// A task that panics fails alone (its handle yields a
    /// [`JoinError`]); if its handle had been dropped, nobody would see the
    /// error, so the panic resumes here (a failed assertion in a detached
    /// task still fails the test).
    pub fn run(&mut self) -> u64 {
        while let Some(c) = self.fabric.next_core() {
            self.ticks += 1;
            self.execs[c].tick();
            if let Some(e) = take_orphan_panic() {
                e.resume::<()>();
            }
            self.yielded(c);
        }
        self.fabric.now_ns()
    }

    /// [`SimRuntime::run`] for the sim service thread (`crate::service`),
    /// which must keep serving: a panic out of a tick (a task's drop after
    /// it finished) is logged, not resumed, and so is a detached task's
    /// panic (already logged when caught).
    pub(crate) fn run_serving(&mut self) {
        while let Some(c) = self.fabric.next_core() {
            self.ticks += 1;
            if catch_unwind(AssertUnwindSafe(|| self.execs[c].tick())).is_err() {
                tracing::error!(
                    core = c,
                    "dm-runtime: a panic escaped a sim core's tick; it goes on"
                );
            }
            drop(take_orphan_panic());
            self.yielded(c);
        }
    }

    /// After a tick of core `c`: routes the tick's cross-core wakes and
    /// tells the simulator whether `c` still has ready tasks.
    fn yielded(&mut self, c: usize) {
        self.route_remote_wakes();
        let runnable = self.execs[c].has_ready();
        self.fabric.core_yielded(c, runnable);
    }

    /// Registers the thread that parks when the simulation idles
    /// (`crate::service`) with every core's inbox.
    pub(crate) fn set_parker(&self, p: &Arc<Parker>) {
        for ex in &self.execs {
            ex.set_parker(p.clone());
        }
    }

    /// Runs `f` with `core` current (so [`crate::spawn`] inside spawns
    /// there) and schedules the core.
    pub(crate) fn run_on(&mut self, core: SimCore, f: impl FnOnce()) {
        self.execs[core.0].run_entered(f);
        self.fabric.notify(core.0);
    }

    /// Schedules every core with ready tasks or a non-empty inbox: wakes
    /// from other OS threads, which [`REMOTE_WOKEN`] (this thread's record)
    /// does not see. Returns whether any core was scheduled.
    pub(crate) fn notify_ready(&mut self) -> bool {
        let mut any = false;
        for (i, ex) in self.execs.iter().enumerate() {
            if ex.has_ready() {
                self.fabric.notify(i);
                any = true;
            }
        }
        any
    }

    /// True if some core has ready tasks or a non-empty inbox.
    pub(crate) fn any_ready(&self) -> bool {
        self.execs.iter().any(|ex| ex.has_ready())
    }

    /// Tasks not yet finished, all cores.
    pub(crate) fn live_tasks(&self) -> usize {
        self.execs.iter().map(|ex| ex.live_tasks()).sum()
    }

    /// Runs `fut` on `core` until the simulation is idle and returns its output,
    /// or `None` if it never finished (it waited on something that never came).
    /// If `fut` panicked, the panic resumes here once the simulation is idle.
    pub fn block_on<F: Future + 'static>(&mut self, core: SimCore, fut: F) -> Option<F::Output> {
        let h = self.spawn_on(core, fut);
        self.run();
        h.try_take().map(|r| r.unwrap_or_else(JoinError::resume))
    }

    fn route_remote_wakes(&mut self) {
        let woken = REMOTE_WOKEN.with(|w| {
            let mut w = w.borrow_mut();
            if w.is_empty() {
                Vec::new()
            } else {
                std::mem::take(&mut *w)
            }
        });
        for id in woken {
            if let Some(&idx) = self.by_exec_id.get(&id) {
                self.fabric.notify(idx);
            }
        }
    }
}

impl Drop for SimRuntime {
    /// The cores first (each drops its tasks with itself current), then this
    /// thread stops recording wakes for the simulator if no driver is left.
    fn drop(&mut self) {
        self.execs.clear();
        sim_driver_alive(false);
    }
}
