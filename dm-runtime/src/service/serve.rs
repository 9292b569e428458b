//! The loops of the service threads: [`serve_core`] (one real core per
//! thread) and [`serve_sim`] (every simulated core in one thread).

use super::intake::{Intake, Job};
use crate::executor::Executor;
use crate::inbox::Parker;
use crate::sim_driver::{SimCore, SimRuntime};
use crate::task::take_orphan_panic;
use dm_verbs::Queues;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

/// Closes (and empties) an intake when its thread ends, also by a panic:
/// jobs nobody will run fail with `ShutDown` instead of never answering.
pub(super) struct CloseOnExit<'a>(pub(super) &'a [Arc<Intake>]);

impl Drop for CloseOnExit<'_> {
    fn drop(&mut self) {
        for i in self.0 {
            i.close_and_discard();
        }
    }
}

/// How long an idle thread keeps polling before it parks.
struct Spin {
    spin_ns: u64,
    idle_since: Option<Instant>,
}

impl Spin {
    fn new(spin_ns: u64) -> Self {
        Spin {
            spin_ns,
            idle_since: None,
        }
    }

    /// The thread did work: the next idle stretch starts afresh.
    fn busy(&mut self) {
        self.idle_since = None;
    }

    /// The thread is idle: true once it has been for `spin_ns` (wall ns).
    fn should_park(&mut self) -> bool {
        if self.spin_ns == 0 {
            return true;
        }
        let since = *self.idle_since.get_or_insert_with(Instant::now);
        since.elapsed().as_nanos() >= u128::from(self.spin_ns)
    }
}

/// One scheduling round that survives a panic escaping the tick (a task's
/// drop after it finished): the core logs it and goes on. A detached
/// task's panic was logged when caught and is dropped here.
fn tick_serving<Q: Queues>(ex: &mut Executor<Q>) {
    if catch_unwind(AssertUnwindSafe(|| ex.tick())).is_err() {
        tracing::error!(
            core = ex.id(),
            "dm-runtime: a panic escaped a core's tick; it goes on"
        );
    }
    drop(take_orphan_panic());
}

/// Drives one real core until shutdown: each round spawns the queued jobs
/// and ticks; with nothing ready, in flight or queued it spins for
/// `spin_ns` wall ns, then parks (`Parker`: a submission, a cross-core
/// wake or the shutdown unparks it). A core with verbs in flight never
/// parks. After `intake` closed, it runs the queued jobs and every live
/// task to the end, then returns.
pub(super) fn serve_core<Q: Queues>(
    ex: &mut Executor<Q>,
    intake: &Intake,
    parker: &Parker,
    spin_ns: u64,
) {
    let mut jobs: Vec<Job> = Vec::new();
    let mut wakers: Vec<Waker> = Vec::new();
    let mut spin = Spin::new(spin_ns);
    loop {
        if intake.drain(&mut jobs, &mut wakers) {
            ex.run_entered(|| jobs.drain(..).for_each(|job| job()));
        }
        tick_serving(ex);
        if ex.has_ready() || ex.inflight() > 0 || intake.has_jobs() {
            spin.busy();
            continue;
        }
        // Closed first: every job queued before the close is then seen.
        if intake.is_closed() && !intake.has_jobs() && ex.live_tasks() == 0 {
            return;
        }
        if !spin.should_park() {
            continue;
        }
        let ex: &Executor<Q> = ex;
        parker.park_unless(|| {
            intake.has_jobs() || ex.has_ready() || (intake.is_closed() && ex.live_tasks() == 0)
        });
        spin.busy();
    }
}

/// Drives a [`SimRuntime`] whose core `cores[i]` takes the jobs of
/// `intakes[i]`, until shutdown: each pass spawns every core's queued jobs
/// on that core, schedules the cores woken from other threads, and runs
/// the simulation until it is idle (virtual time continues across passes);
/// idle, the thread spins for `spin_ns` wall ns and parks. After the
/// intakes closed, it runs the queued jobs and every live task to the end.
pub(super) fn serve_sim(
    rt: &mut SimRuntime,
    cores: &[SimCore],
    intakes: &[Arc<Intake>],
    parker: &Parker,
    spin_ns: u64,
) {
    let mut jobs: Vec<Job> = Vec::new();
    let mut wakers: Vec<Waker> = Vec::new();
    let mut spin = Spin::new(spin_ns);
    loop {
        let mut work = false;
        for (&core, intake) in cores.iter().zip(intakes) {
            if intake.drain(&mut jobs, &mut wakers) {
                rt.run_on(core, || jobs.drain(..).for_each(|job| job()));
                work = true;
            }
        }
        work |= rt.notify_ready();
        if work {
            rt.run_serving();
            spin.busy();
            continue;
        }
        let queued = || intakes.iter().any(|i| i.has_jobs());
        // Closed first: every job queued before the close is then seen.
        let closed = || intakes.iter().all(|i| i.is_closed());
        if closed() && !queued() && rt.live_tasks() == 0 {
            return;
        }
        if !spin.should_park() {
            continue;
        }
        let rt: &SimRuntime = rt;
        parker.park_unless(|| queued() || rt.any_ready() || (closed() && rt.live_tasks() == 0));
        spin.busy();
    }
}
