//! `--faults crash` on sim (issue 33): one of the two CSs dies at a random
//! verb boundary and comes back later with a new incarnation.
//!
//! - Both CSs join the membership table (`dm_index::Instance::join`,
//!   [`LeaseConfig::SIM`]) and beat their heartbeats as tasks.
//! - The victim is the CS that does not host the last core (where the
//!   head-node maintainer and DEX's mover run). Once the history holds `N`
//!   operations (each is logged at its call; `N` drawn from the seed within
//!   the run's first nine tenths), each of its tasks (clients and
//!   heartbeat) is dropped at its next poll: it posts
//!   nothing more, its posted verbs still complete, the locks it held stay
//!   taken. A task polls between verbs (the runtime switches after each
//!   posted verb), so the cut falls between any two verbs: before or after
//!   a lock CAS, between a write-back and its unlock, while holding HOCL's
//!   local queue.
//! - The operations it cut off stay in the history as maybes (their writes
//!   may or may not have taken effect; [`super::client`]).
//! - `restart_after` leases later (0 to 3, from the seed) the CS restarts
//!   on its first core: a new `Instance` for it (fresh caches and local
//!   lock table, as a new process would have), a new incarnation, and as
//!   many new clients as it had, each running `--ops` operations.
//! - When every client is done, a final scan of the whole key space runs
//!   on a survivor (checked with the history) and the heartbeats stop.
//!
//! The survivors finish every operation by taking over the dead CS's locks
//! after the lease (`dm_runtime::lock::member`); their recoveries are
//! counted ([`take_recoveries`]) for the report's `locks_recovered` line.

use super::args::Args;
use super::client::{client, key};
use super::dex;
use super::history::{Event, Kind};
use crate::kv::Kv;
use anyhow::{anyhow, Result};
use dm_index::{Handle, Index, Instance};
use dm_runtime::lock::{LeaseConfig, Member};
use dm_runtime::{now_ns, spawn, yield_now, yield_until, JoinHandle, SimCore, SimRuntime};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Virtual time the finisher waits for the last clients before it calls
/// the seed stuck (every survivor operation recovers within a few leases).
const GIVE_UP_NS: u64 = 1_000_000_000;

/// Most keys the final scan asks for (the check's key space is small).
const FINAL_SCAN_KEYS: u64 = 1 << 16;

/// The lease of crash runs (virtual time).
pub(super) const LEASE: LeaseConfig = LeaseConfig::SIM;

thread_local! {
    /// Recovery times (ns) of this thread's crash seeds, for the report.
    static RECOVERIES: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// Seeds whose CS died mid-run, and whose CS restarted.
    static CRASHES: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// The recovery times recorded so far (and forgets them).
pub(super) fn take_recoveries() -> Vec<u64> {
    RECOVERIES.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// Adds the recovery times `inst`'s handles counted to the report's.
fn record_recoveries(inst: &Instance) {
    let r = inst.lock_counters().recovery_ns();
    RECOVERIES.with(|x| x.borrow_mut().extend(r));
}

/// The CS that dies in a crash seed of `cores` cores: the one that does
/// not host the last core (where the head-node maintainer runs).
pub(super) fn victim(cores: usize) -> u16 {
    1 - ((cores.max(1) - 1) % 2) as u16
}

/// Seeds so far whose CS died mid-run, and those whose CS restarted (a
/// seed whose victim finished its operations before its cut kills nobody).
pub(super) fn crashes() -> (u64, u64) {
    CRASHES.with(Cell::get)
}

fn count_crash(restart: bool) {
    CRASHES.with(|c| {
        let (k, r) = c.get();
        c.set(if restart { (k, r + 1) } else { (k + 1, r) });
    });
}

/// What a seed's crash tasks share.
struct State {
    victim: u16,
    /// The victim's membership, stopped when it dies: a dead process
    /// serves no release request (its serving task would outlive the
    /// dropped heartbeat here).
    victim_member: Arc<Member>,
    /// The history so far: the CS dies once it holds `kill_at` operations
    /// (each logged at its call), a point anywhere in the run.
    log: Rc<RefCell<Vec<Event>>>,
    kill_at: usize,
    killed: Cell<bool>,
    /// Clients not finished yet (killed ones count as finished).
    live: Cell<usize>,
}

/// A client or heartbeat: counted in `live` until it ends; a victim's is
/// dropped at its first poll once the CS is dead.
struct Task<F> {
    f: Option<Pin<Box<F>>>,
    st: Rc<State>,
    victim: bool,
    client: bool,
}

impl<F: Future<Output = Result<(), String>>> Future for Task<F> {
    type Output = Result<(), String>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.victim && !self.st.killed.get() && self.st.log.borrow().len() >= self.st.kill_at {
            self.st.killed.set(true);
            self.st.victim_member.stop();
            count_crash(false);
        }
        let r = if self.victim && self.st.killed.get() {
            Poll::Ready(Ok(()))
        } else {
            match &mut self.f {
                Some(f) => f.as_mut().poll(cx),
                None => Poll::Ready(Ok(())),
            }
        };
        if r.is_ready() && self.f.take().is_some() && self.client {
            self.st.live.set(self.st.live.get() - 1);
        }
        r
    }
}

/// Joins both CSs to the membership table (before their handles open, so
/// every handle names its incarnation).
pub(super) fn join(
    rt: &mut SimRuntime,
    cores: &[SimCore],
    insts: &[Arc<Instance>],
) -> Result<Members> {
    let members: Members = Rc::default();
    for cs in 0..2u16 {
        let (inst, m) = (insts[cs as usize].clone(), members.clone());
        rt.block_on(cores[cs as usize], async move {
            let j = inst.join(cs, LEASE).await?;
            m.borrow_mut().push(j);
            Ok::<_, dm_index::Error>(())
        })
        .ok_or_else(|| anyhow!("joining CS {cs} never finished"))?
        .map_err(|e| anyhow!("CS {cs} cannot join: {e}"))?;
    }
    Ok(members)
}

/// The members of a seed: CS 0, CS 1, then the restarted one.
pub(super) type Members = Rc<RefCell<Vec<Arc<Member>>>>;

/// Everything a crash seed runs besides the simulator: the CSs' cores and
/// handles, the index, and how to build the restarted CS's instance.
pub(super) struct Seed<'a> {
    pub a: &'a Rc<Args>,
    pub seed: u64,
    pub cores: &'a [SimCore],
    pub handles: &'a [Rc<Index>],
    /// CS `cs`'s instance (one for both, except DEX's: see `run_seed`).
    pub insts: &'a [Arc<Instance>],
    pub fresh: Instance,
    pub log: &'a Rc<RefCell<Vec<Event>>>,
    pub members: Members,
}

/// Spawns the clients, heartbeats, the restart and the final scan; returns
/// the handles of all of them (the restarted clients' through the
/// restarter's).
pub(super) fn spawn_seed(rt: &mut SimRuntime, s: Seed<'_>) -> Vec<JoinHandle<Result<(), String>>> {
    let (a, cores) = (s.a, s.cores);
    let mut rng = ChaCha8Rng::seed_from_u64(s.seed ^ 0xc4a5_11ed);
    let victim = victim(cores.len());
    let on_victim = |c: u32| c as usize % cores.len() % 2 == victim as usize;
    let victim_clients = (0..a.clients).filter(|c| on_victim(*c)).count();
    // Anywhere in the first nine tenths of the run (the victim's clients
    // run as fast as the others').
    let total = a.clients as usize * a.ops as usize;
    let kill_at = rng.gen_range(0..=total * 9 / 10);
    let restart_leases = rng.gen_range(0..4u64);
    let st = Rc::new(State {
        victim,
        victim_member: s.members.borrow()[victim as usize].clone(),
        log: s.log.clone(),
        kill_at,
        killed: Cell::new(false),
        live: Cell::new(a.clients as usize),
    });
    let mut hs = Vec::new();
    for cs in 0..2u16 {
        let m = s.members.borrow()[cs as usize].clone();
        let beat = async move { m.heartbeat().await.map_err(|e| e.to_string()) };
        hs.push(rt.spawn_on(cores[cs as usize], task(&st, beat, cs == victim, false)));
    }
    for c in 0..a.clients {
        let i = c as usize % cores.len();
        let (h, log) = (s.handles[i].clone(), s.log.clone());
        let keys = dex::crash_keys(&s.insts[i % 2], a, (i % 2) as u16);
        let f = client(h, c, s.seed, a.clone(), keys, log, now_ns, true);
        hs.push(rt.spawn_on(cores[i], task(&st, f, on_victim(c), true)));
    }
    let restart = restarter(
        &st,
        s.fresh,
        victim_clients,
        restart_leases,
        a,
        s.seed,
        s.log,
        &s.members,
    );
    hs.push(rt.spawn_on(cores[victim as usize], restart));
    let h = s.handles[cores.len() - 1].clone();
    let mut insts = s.insts.to_vec();
    insts.dedup_by(|x, y| Arc::ptr_eq(x, y));
    let fin = finisher(st, h, a.keys, s.log.clone(), s.members, insts);
    hs.push(rt.spawn_on(cores[cores.len() - 1], fin));
    hs
}

fn task<F: Future<Output = Result<(), String>>>(
    st: &Rc<State>,
    f: F,
    victim: bool,
    client: bool,
) -> Task<F> {
    Task {
        f: Some(Box::pin(f)),
        st: st.clone(),
        victim,
        client,
    }
}

/// Waits for the victim's death (or the end of its clients), then
/// restarts it: a new incarnation, a heartbeat, `n` new clients.
#[allow(clippy::too_many_arguments)]
fn restarter(
    st: &Rc<State>,
    inst: Instance,
    n: usize,
    leases: u64,
    a: &Rc<Args>,
    seed: u64,
    log: &Rc<RefCell<Vec<Event>>>,
    members: &Members,
) -> impl Future<Output = Result<(), String>> {
    let (st, a, log, members) = (st.clone(), a.clone(), log.clone(), members.clone());
    st.live.set(st.live.get() + 1);
    async move {
        let r = async {
            while !st.killed.get() && st.live.get() > 1 {
                yield_now().await;
            }
            if !st.killed.get() {
                return Ok(());
            }
            yield_until(now_ns() + leases * LEASE.lease_ns).await;
            let inst = Arc::new(inst);
            let m = inst
                .join(st.victim, LEASE)
                .await
                .map_err(|e| e.to_string())?;
            members.borrow_mut().push(m.clone());
            count_crash(true);
            let beat = spawn(m.clone().heartbeat());
            let h = Rc::new(
                inst.open(st.victim, 0, st.victim as usize)
                    .map_err(|e| e.to_string())?,
            );
            let clients: Vec<_> = (0..n as u32)
                .map(|i| {
                    spawn(client(
                        h.clone(),
                        a.clients + i,
                        seed,
                        a.clone(),
                        dex::crash_keys(&inst, &a, st.victim),
                        log.clone(),
                        now_ns,
                        true,
                    ))
                })
                .collect();
            for c in clients {
                c.await.map_err(|e| e.to_string())??;
            }
            m.stop();
            beat.await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            record_recoveries(&inst);
            Ok(())
        }
        .await;
        st.live.set(st.live.get() - 1);
        r
    }
}

/// Once every client is done: a scan of the whole key space, logged; the
/// heartbeats stop; the survivors' recoveries are recorded.
async fn finisher(
    st: Rc<State>,
    h: Rc<Index>,
    keys: u64,
    log: Rc<RefCell<Vec<Event>>>,
    members: Members,
    insts: Vec<Arc<Instance>>,
) -> Result<(), String> {
    let start = now_ns();
    while st.live.get() > 0 {
        if now_ns() - start > GIVE_UP_NS {
            // Stop the heartbeats, or the simulation never drains.
            for m in members.borrow().iter() {
                m.stop();
            }
            return Err(format!(
                "{} clients still running after {GIVE_UP_NS} virtual ns \
                 (a killed task never polled again, or a survivor stuck)",
                st.live.get()
            ));
        }
        yield_now().await;
    }
    let call = now_ns();
    let n = keys.min(FINAL_SCAN_KEYS) as u32;
    // DEX's partitions are served by two processes here, and a scan stops
    // at its process's last partition: read the pool, which holds every
    // acknowledged write in lease mode, through the plain B-link handle.
    let r = match h.handle() {
        Handle::Dex(t) => Kv::scan(t.fg(), &key(0), n as usize).await?,
        _ => Kv::scan(&*h, &key(0), n as usize).await?,
    };
    let pairs = r
        .into_iter()
        .map(|(k, v)| (u64::from_be_bytes(k.try_into().unwrap()), v))
        .collect();
    log.borrow_mut().push(Event {
        client: u32::MAX,
        key: 0,
        hi: keys,
        kind: Kind::Scan(n, pairs),
        call,
        ret: now_ns(),
    });
    for m in members.borrow().iter() {
        m.stop();
    }
    for i in &insts {
        record_recoveries(i);
    }
    Ok(())
}
