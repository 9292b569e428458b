//! Client processes that may die (`ycsb --lease-ms`, issue 33 item 4):
//! this process's CSs join the membership table (`dm_runtime::lock::member`)
//! with a heartbeat thread of their own, and the barriers between client
//! processes stop waiting for one whose CSs died.
//!
//! ## The barrier bytes with leases
//! The bytes of [`crate::barrier`] (one per client process, WRITTEN by it
//! with the number of the last barrier it reached), and barrier `k` (1, 2,
//! ...) is passed once every other client's byte has reached `k` or that
//! client is gone. A client is gone when its first CS's membership record,
//! watched with [`LeaseWatch`], shows it dead: its heartbeat stood still
//! for a lease, or its incarnation moved on (a `--rejoin` process replaced
//! it). A client whose first CS has not joined yet (incarnation 0) is
//! waited for. A gone client's byte stays where it died; the others are
//! never more than one barrier apart, as [`crate::barrier::reached`]
//! needs. Without `--lease-ms` the same bytes, waiting for everyone
//! ([`crate::barrier::barrier`]).
//!
//! ## The heartbeat thread
//! One OS thread with its own executor and queues (CS `first`, core 0)
//! WRITEs every member's heartbeat word each `lease / 10` of wall time,
//! through every phase and barrier wait, until the run ends. A failed
//! heartbeat WRITE ends the thread and fails the run (others may have taken
//! this process's locks).

use crate::barrier;
use anyhow::{anyhow, Result};
use dm_index::Instance;
use dm_runtime::lock::{Holder, LeaseConfig, LeaseWatch, LockError, Member};
use dm_runtime::{ExecConfig, Executor};
use dm_verbs::Fabric;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

/// The lease of `--lease-ms`: a heartbeat every tenth of it.
pub(crate) fn lease(ms: u64) -> Result<LeaseConfig> {
    let ns = ms * 1_000_000;
    LeaseConfig::new(ns / 10, ns).map_err(|e| anyhow!("--lease-ms {ms}: {e}"))
}

/// Joins every local CS of `inst` (new incarnations), on `ex`.
pub(crate) fn join<Q: dm_verbs::Queues + 'static>(
    ex: &mut Executor<Q>,
    inst: &Arc<Instance>,
    cfg: LeaseConfig,
) -> Result<Vec<Arc<Member>>> {
    let mut members = Vec::new();
    for cs in inst.local_cs() {
        let i = inst.clone();
        let m = ex
            .block_on(async move { i.join(cs, cfg).await })
            .map_err(|e| anyhow!("CS {cs} cannot join the membership table: {e}"))?;
        members.push(m);
    }
    Ok(members)
}

/// The heartbeat thread's body: every `heartbeat_ns` one beat per member,
/// on an executor over queues of (`members[0]`'s CS, core 0), until `stop`
/// disconnects; between beats the executor runs the tasks a beat spawns
/// (release requests, `dm_runtime::lock::ask`) to their end, for at most
/// one period. Errors: a failed heartbeat WRITE.
pub(crate) fn beat<F: Fabric>(
    fabric: &F,
    members: &[Arc<Member>],
    cfg: LeaseConfig,
    stop: Receiver<()>,
) -> Result<(), String> {
    let q = fabric.open_queues(members[0].cs(), 0);
    let mut ex = Executor::new(q, fabric.num_ms(), ExecConfig::default());
    let period = Duration::from_nanos(cfg.heartbeat_ns);
    loop {
        let ms = members.to_vec();
        ex.block_on(async move {
            for m in &ms {
                m.beat().await?;
            }
            Ok::<_, LockError>(())
        })
        .map_err(|e| format!("heartbeat WRITE failed: {e}"))?;
        let t0 = std::time::Instant::now();
        while ex.live_tasks() > 0 && t0.elapsed() < period {
            ex.tick();
        }
        match stop.recv_timeout(period.saturating_sub(t0.elapsed())) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return Ok(()),
        }
    }
}

/// What this client knows of the others at the lease barriers.
pub(super) struct Peers {
    ci: usize,
    cs_per_client: u16,
    me: Arc<Member>,
    peers: Vec<Peer>,
}

#[derive(Default)]
struct Peer {
    /// Its first CS's incarnation when first seen (0: not yet).
    inc: u64,
    watch: LeaseWatch,
    gone: bool,
}

impl Peers {
    /// Client `ci` of `cn`, each with `cs_per_client` CSs, watching through
    /// member `me` (one of this process's).
    pub(super) fn new(ci: usize, cn: usize, cs_per_client: u16, me: Arc<Member>) -> Self {
        Peers {
            ci,
            cs_per_client,
            me,
            peers: (0..cn).map(|_| Peer::default()).collect(),
        }
    }

    /// The clients found gone so far.
    pub(super) fn gone(&self) -> Vec<usize> {
        (0..self.peers.len())
            .filter(|&j| self.peers[j].gone)
            .collect()
    }

    /// Barrier `k` (module docs): passed when every other client arrived or
    /// is gone. Returns the state for the next barrier. Errors: a verb's.
    pub(super) async fn meet(mut self, k: u64) -> Result<Self, LockError> {
        barrier::arrive(self.ci, k).await?;
        loop {
            let bytes = barrier::bytes(self.peers.len()).await?;
            let mut waiting = false;
            for (j, &b) in bytes.iter().enumerate() {
                if j == self.ci || barrier::reached(b, k) || self.peers[j].gone {
                    continue;
                }
                if self.is_gone(j, k).await? {
                    self.peers[j].gone = true;
                    eprintln!(
                        "client {j} is gone (CS {}: heartbeat still for a lease, or replaced); \
                         the barriers no longer wait for it",
                        j as u16 * self.cs_per_client
                    );
                } else {
                    waiting = true;
                }
            }
            if !waiting {
                return Ok(self);
            }
            dm_runtime::yield_now().await;
        }
    }

    /// Whether client `j` is dead by its first CS's record (at most one
    /// READ per lease once its incarnation is known).
    async fn is_gone(&mut self, j: usize, k: u64) -> Result<bool, LockError> {
        let cs = j as u16 * self.cs_per_client;
        let p = &mut self.peers[j];
        if p.inc == 0 {
            p.inc = self.me.read_record(cs).await?.0;
            if p.inc == 0 {
                return Ok(false);
            }
        }
        let h = Holder {
            cs,
            inc: p.inc as u32,
            short: false,
        };
        Ok(p.watch.dead(&self.me, k, h).await?.is_some())
    }
}

#[cfg(test)]
mod tests {
    //! The lease barrier on sim (virtual time): a slow client that still
    //! heartbeats is waited for; a dead one is left behind after its lease.
    use super::*;
    use dm_runtime::{now_ns, spawn, yield_now, SimRuntime};
    use dm_verbs::sim::{SimConfig, SimFabric};

    const LEASE: LeaseConfig = LeaseConfig::SIM;

    /// Two clients of one CS each on one sim core: client 1 meets barrier
    /// 1, then (`dies`) stops its heartbeat and never meets again, or
    /// heartbeats on and meets barrier 2 three leases late. Returns client
    /// 0's (time past barrier 2, gone clients) and client 1's arrival time.
    fn two_clients(dies: bool) -> (u64, Vec<usize>, u64) {
        let mut r = SimRuntime::new(SimFabric::new(SimConfig::default()));
        let c = r.add_core(0, 0);
        r.block_on(c, async move {
            let chunk = SimConfig::default().ms.chunk_bytes;
            let m0 = Member::join(0, LEASE, chunk).await.unwrap();
            let m1 = Member::join(1, LEASE, chunk).await.unwrap();
            let hb0 = spawn(m0.clone().heartbeat());
            let hb1 = spawn(m1.clone().heartbeat());
            let late = 3 * LEASE.lease_ns;
            let one = spawn({
                let m1 = m1.clone();
                async move {
                    let p = Peers::new(1, 2, 1, m1.clone()).meet(1).await.unwrap();
                    if dies {
                        m1.stop();
                        return u64::MAX;
                    }
                    let until = now_ns() + late;
                    while now_ns() < until {
                        yield_now().await;
                    }
                    let t = now_ns();
                    p.meet(2).await.unwrap();
                    t
                }
            });
            let p = Peers::new(0, 2, 1, m0.clone()).meet(1).await.unwrap();
            let p = p.meet(2).await.unwrap();
            let passed = now_ns();
            let arrived = one.await.unwrap();
            m0.stop();
            m1.stop();
            hb0.await.unwrap().unwrap();
            hb1.await.unwrap().unwrap();
            (passed, p.gone(), arrived)
        })
        .unwrap()
    }

    #[test]
    fn a_slow_client_that_beats_is_waited_for() {
        let (passed, gone, arrived) = two_clients(false);
        assert!(gone.is_empty(), "{gone:?}");
        assert!(
            passed >= arrived,
            "passed at {passed} ns, client 1 came at {arrived} ns"
        );
    }

    #[test]
    fn a_dead_client_is_left_behind_after_its_lease() {
        let (passed, gone, _) = two_clients(true);
        assert_eq!(gone, vec![1]);
        // Not before one lease of watching, nor much after the heartbeat
        // stood still for another.
        assert!(passed >= LEASE.lease_ns, "{passed} ns");
        assert!(passed < 4 * LEASE.lease_ns, "{passed} ns");
    }
}
