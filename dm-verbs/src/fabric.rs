//! The `Fabric` abstraction the runtime and every index are generic over.
//!
//! A [`Fabric`] is the whole cluster as one compute server core sees it: `num_ms`
//! memory servers, their capabilities, and a way to open one core's [`Queues`]
//! (one RC QP per MS plus one CQ). The runtime owns the `Queues` of its core; it
//! hands each QP a post list once per scheduling round (one doorbell) and polls
//! the CQ in batches.

use crate::{Completion, MsConfig, RpcHandler, WorkRequest};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

/// A core's clock, in ns.
#[derive(Clone, Debug)]
pub enum Clock {
    /// Monotonic wall time since `Instant` (loopback, rdma).
    Wall(Instant),
    /// Virtual time of one simulated core (sim); the simulator advances it.
    Virtual(Rc<Cell<u64>>),
}

impl Clock {
    /// Nanoseconds since the fabric started.
    pub fn now_ns(&self) -> u64 {
        match self {
            Clock::Wall(t0) => t0.elapsed().as_nanos() as u64,
            Clock::Virtual(c) => c.get(),
        }
    }

    /// Charges `ns` of CPU work that the fabric cannot see (an index's local
    /// traversal of cached nodes): advances a virtual clock by `ns`; nothing
    /// on a wall clock, where doing the work takes the time.
    pub fn charge(&self, ns: u64) {
        if let Clock::Virtual(c) = self {
            c.set(c.get() + ns);
        }
    }
}

/// Optional capabilities; an index must work without any of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    /// Masked CAS (Sherman §4.3 uses it for 16-bit locks in one 64-bit word).
    MaskedCas,
    /// Device (on-chip) memory on the MS NIC (Sherman §4.3 lock table).
    DeviceMemory,
}

/// The capabilities a fabric offers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    pub masked_cas: bool,
    /// Bytes of device memory per MS (0 = none).
    pub device_memory_bytes: u64,
}

impl Caps {
    /// True if `c` is offered.
    pub fn has(&self, c: Capability) -> bool {
        match c {
            Capability::MaskedCas => self.masked_cas,
            Capability::DeviceMemory => self.device_memory_bytes > 0,
        }
    }
}

/// Which backend a fabric is (reports say it; indexes must not branch on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricKind {
    /// Discrete-event simulation, virtual nanoseconds.
    Sim,
    /// Real threads on shared process memory, wall-clock nanoseconds.
    Loopback,
    /// Real RDMA verbs (rdma-core).
    Rdma,
}

impl FabricKind {
    /// "virtual" for sim, "wall" otherwise: the clock [`Queues::now_ns`] reads.
    pub fn clock_name(self) -> &'static str {
        match self {
            FabricKind::Sim => "virtual",
            _ => "wall",
        }
    }
}

/// CPU costs the runtime charges to its core (sim only; zero elsewhere), in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuCost {
    /// Per poll of a task's future.
    pub poll_ns: u64,
    /// Per work request posted.
    pub post_ns: u64,
    /// Per CQ poll call that returned at least one completion.
    pub cq_poll_ns: u64,
    /// Per index operation, charged by the client that issues it (dm-bench's
    /// `ycsb` driver), not by the runtime: the application and index CPU work
    /// that polls, posts and CQ polls leave out (request handling, key
    /// generation, index-cache search, node search, checksums). See
    /// `docs/simulator.md` for how the default was chosen.
    pub op_ns: u64,
}

/// The cluster as seen by compute servers.
pub trait Fabric: Clone + 'static {
    /// One core's QPs and CQ.
    type Queues: Queues;

    fn kind(&self) -> FabricKind;
    fn caps(&self) -> Caps;
    /// Number of memory servers; their ids are `0..num_ms`.
    fn num_ms(&self) -> u16;
    /// Configuration every MS was built with.
    fn ms_config(&self) -> MsConfig;
    /// Opens core `core` of compute server `cs`: one QP per MS, one CQ.
    fn open_queues(&self, cs: u16, core: u16) -> Self::Queues;
    /// Registers `h` under `id` on every MS (id 0 is the built-in chunk allocator,
    /// see [`crate::ms::RPC_ALLOC_CHUNK`]). Replaces an earlier handler with that id.
    fn register_rpc(&self, id: u16, h: RpcHandler);
}

/// One core's QPs (one per MS) and CQ.
pub trait Queues {
    /// Posts `wrs` (all for memory server `ms`) as one post list: one doorbell.
    /// Drains `wrs`. Never blocks; errors arrive as error completions.
    fn post_list(&mut self, ms: u16, wrs: &mut Vec<WorkRequest>);
    /// Moves up to `max` completions into `out`; returns how many.
    fn poll_cq(&mut self, out: &mut Vec<Completion>, max: usize) -> usize;
    /// This core's clock in ns (virtual on sim, monotonic wall time otherwise).
    fn now_ns(&self) -> u64 {
        self.clock().now_ns()
    }
    /// A handle on this core's clock that the runtime can read without the queues.
    fn clock(&self) -> Clock;
    /// Charges `ns` of CPU time to this core (advances its virtual clock on sim).
    fn charge_cpu(&mut self, ns: u64);
    /// The CPU costs the runtime should charge. Fixed for the life of the
    /// queues: an executor reads them once, when it is built.
    fn cpu_cost(&self) -> CpuCost;
}
