//! `sim`: the embedded default backend, a deterministic discrete-event
//! simulation of a DM cluster in **virtual nanoseconds**.
//!
//! Memory servers are byte arrays. Every WR goes through a network model
//! ([`NetModel`]): the CS NIC's message rate and link, half an RTT on the wire,
//! the MS NIC's message rate and link, the NIC atomic unit (host-memory atomics
//! pay PCIe and serialise per bucket; device-memory atomics are fast), MS CPU
//! cores for RPCs, then half an RTT back. WRs on one QP execute in posting
//! order. One OS thread simulates every CS core; the runtime (dm-runtime's sim
//! driver) asks [`SimFabric::next_core`] which core runs next and ticks it.
//!
//! **Torn READs** ([`TearGranularity`]): with tearing on, a READ takes a
//! snapshot when it starts executing at the MS and another when its transfer
//! ends (`len / bandwidth + tear_window_ns` later); each aligned granule (8 B
//! words in the strict model, 64 B cache lines otherwise) of the result comes
//! from one of the two, chosen at random, independently of address order. So a
//! READ overlapping a WRITE returns any mix of old and new pieces in any order,
//! and every piece is a value that memory really held during the READ.
//! WRITEs and atomics apply at one instant.
//!
//! Same [`SimConfig`] (seed included) and same program give the same run: the
//! same events at the same virtual times, summarised by [`SimFabric::trace_hash`].
//!
//! **Recording** (`trace.rs`, off by default): [`SimFabric::start_trace`]
//! notes each WR's times at the CS core, CS NIC, MS NIC and MS and its
//! completion, and each post list (doorbell), for `dm-bench trace`'s
//! timelines; [`SimFabric::take_trace`] stops it and returns the
//! [`SimTrace`]. It changes neither events nor `trace_hash`.
//!
//! Event loop: a binary min-heap of `(time, seq)` keys packed in a `u128`, with
//! the events themselves in a slab (sifting moves 16-byte keys, not events). An
//! idle core whose completion arrives runs at once rather than through a wake
//! event. A monotone radix heap was tried and measured slower at this event
//! count (2.4 vs 3.3 M verbs/s), and so was a timing wheel of 1024 x 8 ns
//! buckets with an overflow heap (2.8-3.3 vs 3.5 M verbs/s, `sim-speed --reps 3`).
//!
//! Speed (2-core development machine, `cargo run --release -p dm-bench -- sim-speed`,
//! 16 simulated cores x 8 tasks, 64-byte READ/WRITE/FAA, torn READs on):
//! 3.5 M simulated verbs per wall second on one core (best of 3). The foundation issue's
//! target is 5 M; about a third of the time goes to the runtime's verb path
//! (see dm-runtime's crate docs), the rest to the event queue and the model.

mod trace;
mod world;

pub use trace::{Doorbell, SimTrace, WrTrace};

use crate::{
    Caps, Clock, Completion, CpuCost, Fabric, FabricKind, MsConfig, Queues, RpcHandler, WorkRequest,
};
use std::cell::RefCell;
use std::rc::Rc;
use world::World;

/// Granularity at which a torn READ mixes old and new data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TearGranularity {
    /// READs are atomic snapshots (tearing switched off).
    Off,
    /// 64-byte cache lines (what PCIe typically shows).
    CacheLine,
    /// 8-byte words: the strict model, all RDMA promises. Index tests use this.
    Word,
}

impl TearGranularity {
    pub(crate) fn bytes(self) -> Option<u64> {
        match self {
            TearGranularity::Off => None,
            TearGranularity::CacheLine => Some(64),
            TearGranularity::Word => Some(8),
        }
    }
}

/// Network and CPU model. All times in virtual ns. Defaults and their sources:
///
/// | parameter | default | source |
/// |---|---|---|
/// | `rtt_ns` | 2000 | RTT ~2 µs for small verbs (Sherman §2, SMART §2.1) |
/// | `link_bytes_per_ns` | 12.5 | 100 Gbps ConnectX-5/6 link = 12.5 GB/s (Sherman §5.1, SMART §3.2.2) |
/// | `nic_msg_ns` | 22 | ~45 M small verbs/s per ConnectX-6 NIC (SMART §3.2.2), on CS and MS side |
/// | `host_atomic_ns` | 600 | host-memory atomics take 2 PCIe transactions and serialise per bucket (Sherman §3.2.2); value to be calibrated (issue 9) |
/// | `atomic_buckets` | 4096 | NIC atomic buckets keyed by 12 LSBs of the address (Sherman §3.2.2) |
/// | `device_atomic_ns` | 9 | ~110 Mops of CAS on on-chip memory (Sherman §4.3) |
/// | `ms_rpc_ns` | 1000 | MS CPU time to receive, dispatch and answer one RPC (placeholder, issue 7 calibrates) |
/// | `cpu` | poll 60, post 30, cq_poll 40 | CS CPU time per task poll / WR posted / CQ poll (order of a few cache misses) |
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetModel {
    pub rtt_ns: u64,
    pub link_bytes_per_ns: f64,
    pub nic_msg_ns: u64,
    pub host_atomic_ns: u64,
    pub atomic_buckets: u64,
    pub device_atomic_ns: u64,
    pub ms_rpc_ns: u64,
    pub cpu: CpuCost,
}

impl Default for NetModel {
    fn default() -> Self {
        NetModel {
            rtt_ns: 2000,
            link_bytes_per_ns: 12.5,
            nic_msg_ns: 22,
            host_atomic_ns: 600,
            atomic_buckets: 4096,
            device_atomic_ns: 9,
            ms_rpc_ns: 1000,
            cpu: CpuCost {
                poll_ns: 60,
                post_ns: 30,
                cq_poll_ns: 40,
            },
        }
    }
}

/// Fault injection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Faults {
    /// Torn READs; default [`TearGranularity::Word`] (the strict model).
    pub tear: TearGranularity,
    /// Extra virtual ns a READ's execution window lasts beyond its transfer time,
    /// widening the chance to overlap a WRITE (default 0).
    pub tear_window_ns: u64,
    /// Probability that a completion is delayed (reorders completions across QPs;
    /// execution order per QP is unchanged). Default 0.
    pub delay_prob: f64,
    /// Maximum extra delay of a delayed completion, ns (uniform in `0..=max`).
    pub delay_max_ns: u64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            tear: TearGranularity::Word,
            tear_window_ns: 0,
            delay_prob: 0.0,
            delay_max_ns: 0,
        }
    }
}

impl Faults {
    /// The fault mix the index crates' tests run: 8-byte torn READs with
    /// a READ window 500 ns longer than its transfer, and 20% of
    /// completions delayed by up to 3 µs (reordered across QPs).
    pub fn torn_and_delayed() -> Self {
        Faults {
            tear: TearGranularity::Word,
            tear_window_ns: 500,
            delay_prob: 0.2,
            delay_max_ns: 3000,
        }
    }
}

/// Everything a simulated cluster is built from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimConfig {
    pub num_ms: u16,
    pub ms: MsConfig,
    pub net: NetModel,
    pub faults: Faults,
    /// Offer masked CAS (ConnectX extended atomics); default true.
    pub masked_cas: bool,
    /// Seed of every random choice (tearing, delays).
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            num_ms: 1,
            ms: MsConfig::default(),
            net: NetModel::default(),
            faults: Faults::default(),
            masked_cas: true,
            seed: 1,
        }
    }
}

/// A simulated cluster. Cheap to clone (shared handle); single-threaded (`!Send`).
#[derive(Clone)]
pub struct SimFabric {
    world: Rc<RefCell<World>>,
}

impl SimFabric {
    pub fn new(cfg: SimConfig) -> Self {
        SimFabric {
            world: Rc::new(RefCell::new(World::new(cfg))),
        }
    }

    /// The configuration the cluster was built with.
    pub fn config(&self) -> SimConfig {
        self.world.borrow().cfg
    }

    /// Global virtual time, ns.
    pub fn now_ns(&self) -> u64 {
        self.world.borrow().now
    }

    /// Runs network events until some core is due to run; returns its index
    /// (as [`SimQueues::core_index`]) with the global clock set to its start
    /// time. `None` when nothing at all is scheduled (the simulation is idle).
    pub fn next_core(&self) -> Option<usize> {
        self.world.borrow_mut().next_core()
    }

    /// Tells the simulator that `core` finished a tick. `runnable`: it still has
    /// ready tasks, so it runs again at its own clock; otherwise it sleeps until
    /// a completion or [`SimFabric::notify`] wakes it.
    pub fn core_yielded(&self, core: usize, runnable: bool) {
        self.world.borrow_mut().core_yielded(core, runnable)
    }

    /// Wakes `core` (a cross-core wake): it runs at `max(now, its clock)`.
    pub fn notify(&self, core: usize) {
        self.world.borrow_mut().notify(core)
    }

    /// Puts the QP from `core` to memory server `ms` in the error state (fault
    /// injection): later WRs on it complete with `VerbError::QpError`.
    pub fn break_qp(&self, core: usize, ms: u16) {
        self.world.borrow_mut().break_qp(core, ms)
    }

    /// Hash of every event processed so far (time, kind, core, wr_id, data).
    pub fn trace_hash(&self) -> u64 {
        self.world.borrow().trace_hash
    }

    /// Starts recording every WR's trip through the model (a fresh
    /// [`SimTrace`]; see the `trace` module). Changes no event, time or
    /// [`Self::trace_hash`]; off by default.
    pub fn start_trace(&self) {
        let mut w = self.world.borrow_mut();
        let now = w.now;
        w.rec = Some(Box::new(trace::Recorder::new(now)));
    }

    /// Stops recording and returns what was recorded (`None` if it was off).
    pub fn take_trace(&self) -> Option<SimTrace> {
        self.world.borrow_mut().rec.take().map(|r| r.trace)
    }

    /// Verbs executed at memory servers so far.
    pub fn verbs_executed(&self) -> u64 {
        self.world.borrow().verbs_executed
    }

    /// Bytes handed out by memory server `ms`'s chunk allocator (superblock included).
    pub fn ms_bytes_used(&self, ms: u16) -> u64 {
        self.world.borrow().ms_bytes_used(ms)
    }

    /// Reads MS memory directly, outside simulated time (tests and checks only).
    pub fn peek(&self, addr: crate::GlobalAddr, len: usize) -> Result<Vec<u8>, crate::VerbError> {
        self.world.borrow().peek(addr, len)
    }
}

impl Fabric for SimFabric {
    type Queues = SimQueues;

    fn kind(&self) -> FabricKind {
        FabricKind::Sim
    }

    fn caps(&self) -> Caps {
        let c = self.world.borrow().cfg;
        Caps {
            masked_cas: c.masked_cas,
            device_memory_bytes: c.ms.device_bytes,
        }
    }

    fn num_ms(&self) -> u16 {
        self.world.borrow().cfg.num_ms
    }

    fn ms_config(&self) -> MsConfig {
        self.world.borrow().cfg.ms
    }

    fn open_queues(&self, cs: u16, _core: u16) -> SimQueues {
        let core = self.world.borrow_mut().add_core(cs);
        let clock = self.world.borrow().core_clock(core);
        SimQueues {
            world: self.world.clone(),
            core,
            clock,
        }
    }

    fn register_rpc(&self, id: u16, h: RpcHandler) {
        self.world.borrow_mut().register_rpc(id, h)
    }
}

/// One simulated core's QPs and CQ.
pub struct SimQueues {
    world: Rc<RefCell<World>>,
    core: usize,
    /// This core's virtual clock, shared with the simulator.
    clock: Rc<std::cell::Cell<u64>>,
}

impl SimQueues {
    /// Index of this core in the simulator (what [`SimFabric::next_core`] returns).
    pub fn core_index(&self) -> usize {
        self.core
    }
}

impl Queues for SimQueues {
    fn post_list(&mut self, ms: u16, wrs: &mut Vec<WorkRequest>) {
        self.world.borrow_mut().post_list(self.core, ms, wrs)
    }

    fn poll_cq(&mut self, out: &mut Vec<Completion>, max: usize) -> usize {
        self.world.borrow_mut().poll_cq(self.core, out, max)
    }

    fn clock(&self) -> Clock {
        Clock::Virtual(self.clock.clone())
    }

    fn charge_cpu(&mut self, ns: u64) {
        self.clock.set(self.clock.get() + ns);
    }

    fn cpu_cost(&self) -> CpuCost {
        self.world.borrow().cfg.net.cpu
    }
}
