//! A service's compute servers as members (issue 33,
//! `dm_runtime::lock::member`): [`crate::ClusterBuilder::lease`] makes each
//! local CS join the membership table when the cluster starts (a new
//! incarnation per start), and a heartbeat thread submits one
//! [`Member::beat`] per CS every `heartbeat_ns` (wall clock) to that CS's
//! first core, so the cores still park when idle (a core woken once per
//! heartbeat period). Every index the cluster opens gets the members: its
//! lock words name them and it takes over dead members' locks after the
//! lease. A beat that finds its core's queue full is skipped: a CS whose
//! cores stay saturated for a whole lease looks dead; size the lease for it
//! (at least three periods, [`LeaseConfig::new`]).

use crate::error::Error;
use dm_runtime::lock::{LeaseConfig, Member};
use dm_runtime::{Spawner, SubmitError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The members of this process's CSs and their heartbeat thread.
pub(crate) struct Membership {
    pub(crate) members: Vec<Arc<Member>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Membership {
    /// Joins each CS of `first` (the spawner of its first core, its id)
    /// with `lease`, then starts the heartbeat thread. Errors: a join's.
    pub(crate) fn start(
        first: Vec<(u16, Spawner)>,
        lease: LeaseConfig,
        chunk_bytes: u64,
    ) -> Result<Self, Error> {
        let mut members = Vec::new();
        let mut beaters = Vec::new();
        for (cs, sp) in first {
            let m =
                sp.block_on(move || async move { Member::join(cs, lease, chunk_bytes).await })??;
            beaters.push((m.clone(), sp));
            members.push(m);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("dm-heartbeat".into())
            .spawn(move || beat_loop(beaters, lease, s))
            .map_err(|e| Error::BadConfig(format!("cannot start the heartbeat thread: {e}")))?;
        Ok(Membership {
            members,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the heartbeat thread (within one period).
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for m in &self.members {
            m.stop();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every `heartbeat_ns`, one beat per member on its core; ends on `stop`
/// or when the runtime shut down.
fn beat_loop(beaters: Vec<(Arc<Member>, Spawner)>, lease: LeaseConfig, stop: Arc<AtomicBool>) {
    let period = Duration::from_nanos(lease.heartbeat_ns);
    while !stop.load(Ordering::Relaxed) {
        for (m, sp) in &beaters {
            let m = m.clone();
            match sp.try_spawn(move || async move {
                if let Err(e) = m.beat().await {
                    tracing::warn!(cs = m.cs(), error = %e, "heartbeat WRITE failed");
                }
            }) {
                Ok(_) | Err(SubmitError::QueueFull) => {}
                Err(_) => return,
            }
        }
        std::thread::sleep(period);
    }
}
