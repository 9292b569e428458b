//! `sim`: the embedded default backend, a deterministic discrete-event
//! simulation of a DM cluster in **virtual nanoseconds**.
//!
//! Memory servers are byte arrays. Every WR goes through a network model
//! ([`NetModel`], presets [`NetModel::cx5`] and [`NetModel::cx6`]): the CS
//! NIC's message rate and link, half an RTT on the wire, the MS NIC's message
//! rate (slower for host memory, which goes through PCIe, than for device
//! memory) and link, the NIC atomic unit (host-memory atomics pay PCIe and
//! serialise per bucket; device-memory atomics are fast), MS CPU cores for
//! RPCs, then half an RTT back. `docs/simulator.md` gives every parameter's
//! source and the calibration (`dm-bench calibrate`, Sherman Table 1). WRs on one QP execute in posting
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
//! Event loop (`queue.rs`): a timing wheel of 1 ns slots over the next
//! 4,096 ns, each slot a circular list of events in push order, found by a
//! scan of a two-level occupancy bitmap; events further out wait in a binary
//! heap until `now` comes within the wheel's span. It pops in exactly the
//! `(time, push order)` order of the binary min-heap it replaced (the
//! `sim-speed` trace hash did not change) at a bit scan per event instead of
//! ~8 dependent, mispredicted sift steps. An idle core whose completion
//! arrives runs at once rather than through a wake event. Speed and the
//! event queues tried: `docs/experiments/fabric.md`.
//!
//! ## Files
//! This file: the model's parameters ([`NetModel`], [`Faults`],
//! [`SimConfig`]) and the handles ([`SimFabric`], [`SimQueues`]). The
//! simulator itself is `World`: its state (`world.rs`), the event loop
//! (`schedule.rs`, over `queue.rs`), a WR's trip through the network model
//! (`network.rs`), verbs executing at the MS (`exec.rs`) on its memory
//! (`memory.rs`), RPCs on MS cores (`rpc.rs`), and the WR recorder
//! (`trace.rs`).

mod exec;
mod memory;
mod network;
mod queue;
mod rpc;
mod schedule;
mod trace;
mod world;
mod writeback;

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
    /// 4-byte halves of words, in READs longer than 8 bytes (an 8-byte READ
    /// stays whole): soft-RoCE in a TCG guest whose CPU has ERMS or FSRM,
    /// which copies a long READ's payload a byte at a time while a CAS
    /// changes a word in it (docs/rdma-guest-findings.md, "READs that tear inside a
    /// word"). Weaker than any RNIC; no index is built for it, and the
    /// radix family (SMART and its ART rungs, which follow slot words read
    /// out of node images) fails under it (`dm-bench check --faults
    /// torn-half`). For reproducing that, not for tests.
    HalfWord,
}

impl TearGranularity {
    /// The pieces a READ of `len` bytes tears into, bytes; `None` when
    /// tearing is off. Under `HalfWord` a READ of at most 8 bytes stays whole.
    pub(crate) fn granule(self, len: usize) -> Option<u64> {
        match self {
            TearGranularity::Off => None,
            TearGranularity::CacheLine => Some(64),
            TearGranularity::Word => Some(8),
            TearGranularity::HalfWord if len <= 8 => Some(8),
            TearGranularity::HalfWord => Some(4),
        }
    }
}

/// Network and CPU model. All times in virtual ns.
///
/// The defaults are the [`NetModel::cx5`] preset: the testbed of Sherman
/// (100 Gbps ConnectX-5, 8 MS + 8 CS), whose Table 1 and §4.3 give the
/// numbers the model is checked against. `docs/simulator.md` gives every
/// parameter's source and what `dm-bench calibrate` measures with it.
///
/// | parameter | cx5 (default) | source |
/// |---|---|---|
/// | `rtt_ns` | 2000 | RTT ~2 µs for small verbs on commodity RNICs (Sherman §3.1) |
/// | `link_bytes_per_ns` | 12.5 | 100 Gbps link = 12.5 GB/s each way (Sherman §5.1; SMART §3.2.2: Sherman's READs saturate it at 4.17 Mops of ~3 KB leaves) |
/// | `nic_msg_ns` | 22 | one RNIC's ~45 Mops of small verbs to host memory (SMART §3.2.2, §5.2), on CS and MS side |
/// | `device_msg_ns` | 9 | MS NIC time of a verb on device (on-chip) memory, no PCIe: ~110 Mops of on-chip CAS (Sherman §4.3) |
/// | `host_atomic_ns` | 1000 | a host-memory atomic that writes holds its NIC bucket for 2 PCIe transactions, read and write-back (Sherman §3.2.2); not fitted: docs/simulator.md measures Table 1 with it |
/// | `host_cas_fail_ns` | 500 | a failed host-memory CAS skips the write-back, one PCIe transaction (Sherman §3.2.2: "② can be omitted for failed RDMA_CAS") |
/// | `atomic_buckets` | 4096 | NIC atomic buckets keyed by 12 LSBs of the address (Sherman §3.2.2) |
/// | `atomic_bucket_shift` | 3 | the 12 bits are taken above the 3 that an 8-byte atomic's address always has 0: with byte bits 0..12, every 1 KB node's lock word would share 4 buckets per MS, and Table 1's read-intensive skewed column collapses (docs/simulator.md) |
/// | `device_atomic_ns` | 9 | ~110 Mops of CAS on on-chip memory (Sherman §4.3) |
/// | `word_writes_wait_atomics` | false | a switch, not a figure: a WRITE of at most 8 bytes waits for the atomics queued on its word's bucket (docs/simulator.md; issue 34) |
/// | `nic_pus` | 0 | a switch, not a figure: the MS NIC's processing units, each QP's requests on one in order, an atomic waiting for its bucket holding its unit (head-of-line blocking); 64 lands Table 1's FG collapse (docs/simulator.md; issue 34) |
/// | `ms_rpc_ns` | 1000 | MS CPU time to receive, dispatch and answer one RPC (order of one RTT's software path) |
/// | `cpu` | poll 60, post 30, cq_poll 40, op 1800 | CS CPU per task poll / WR posted / CQ poll (a few cache misses each), and per index operation (fitted to Table 1's read-intensive p50) |
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetModel {
    /// Round trip of a small verb on an idle network, ns (half each way).
    pub rtt_ns: u64,
    /// Link bandwidth of each NIC (CS and MS), bytes per ns, in each
    /// direction ([`NetModel::full_duplex_ms_links`]).
    pub link_bytes_per_ns: f64,
    /// NIC time per verb to or from host memory (message rate), ns.
    pub nic_msg_ns: u64,
    /// MS NIC time per verb on device memory, ns.
    pub device_msg_ns: u64,
    /// Time a host-memory atomic that writes (FAA, a CAS that succeeds)
    /// holds its NIC atomic bucket, ns.
    pub host_atomic_ns: u64,
    /// Time a host-memory CAS that fails holds its bucket, ns (no write-back).
    pub host_cas_fail_ns: u64,
    /// Number of NIC atomic buckets: `(offset >> atomic_bucket_shift) %
    /// atomic_buckets` picks an atomic's bucket.
    pub atomic_buckets: u64,
    /// Address bits below the bucket bits (3: an 8-byte word's index).
    pub atomic_bucket_shift: u32,
    /// Time a device-memory atomic holds its bucket, ns.
    pub device_atomic_ns: u64,
    /// MS CPU time per RPC, ns.
    pub ms_rpc_ns: u64,
    /// CS CPU costs, ns.
    pub cpu: CpuCost,
    /// A simulation method, not a NIC figure: take every post list at the
    /// NICs at its core's clock, in virtual-time order across cores (an
    /// event at that time), instead of when the core's tick makes it. A
    /// tick runs a core's tasks back to back, so a core charged CPU inside
    /// its tick (each operation's `cpu.op_ns`) posts at a clock ahead of
    /// cores whose events come later in the tick order, and the NICs'
    /// reservations then hold those cores' earlier posts behind its later
    /// one. Default true since 2026-11-27; false is the model every figure
    /// before then ran with (docs/simulator.md measures what it moves).
    pub posts_in_time_order: bool,
    /// Each MS link carries its two directions apart, as a real link does:
    /// WRITE payloads coming in do not wait for READ responses going out
    /// (the CS side is full duplex either way, `tx_free` and `rx_free`).
    /// Default true since 2026-11-27; false is one resource per MS for
    /// both, the model every figure before then ran with
    /// (docs/simulator.md measures what it moves).
    pub full_duplex_ms_links: bool,
    /// A WRITE of at most 8 bytes (a lock word's release) waits at the MS
    /// NIC until the atomics already queued on its word's bucket are done,
    /// as an FAA release does, instead of bypassing them (it does not hold
    /// the bucket itself). Not a fact any paper states: Sherman's FG
    /// (Table 1, FAA release) and FG+ (Fig. 5, WRITE release) collapse
    /// alike under skew at 176 clients (0.34 Mops, and about a 23.6th of
    /// Sherman's), which a WRITE that bypasses the queue cannot give, so
    /// it stands for whatever in the paper's NIC made the release wait.
    /// Default false; docs/simulator.md ("Word WRITEs behind queued
    /// atomics") measures what it moves (issue 34).
    pub word_writes_wait_atomics: bool,
    /// MS NIC processing units (PUs) that execute requests, each QP's on
    /// one of them in order, a PU holding each request until it starts
    /// executing: a host atomic that waits for its bucket holds its PU,
    /// and every QP of that PU waits behind it (head-of-line blocking).
    /// 0: no PUs (the NIC's message rate and per-QP order only).
    pub nic_pus: u32,
}

/// A NIC preset of [`NetModel`] (`dm-bench --nic`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nic {
    /// 100 Gbps ConnectX-5 as in Sherman's, DEX's and Dolphin's testbeds.
    Cx5,
    /// 100 Gbps ConnectX-6 as in SMART's testbed.
    Cx6,
}

impl NetModel {
    /// Sherman's testbed (§5: 100 Gbps ConnectX-5, Xeon E5-2650 v4 CSs):
    /// the default. See the table above.
    pub fn cx5() -> Self {
        NetModel {
            rtt_ns: 2000,
            link_bytes_per_ns: 12.5,
            nic_msg_ns: 22,
            device_msg_ns: 9,
            host_atomic_ns: 1000,
            host_cas_fail_ns: 500,
            atomic_buckets: 4096,
            atomic_bucket_shift: 3,
            device_atomic_ns: 9,
            ms_rpc_ns: 1000,
            cpu: CpuCost {
                poll_ns: 60,
                post_ns: 30,
                cq_poll_ns: 40,
                op_ns: 1800,
            },
            posts_in_time_order: true,
            full_duplex_ms_links: true,
            word_writes_wait_atomics: false,
            nic_pus: 0,
        }
    }

    /// SMART's testbed (§5.1.1: 100 Gbps ConnectX-6 over RoCE, 2 MNs).
    /// SMART states one fact of the card, its ~45 Mops of small READs
    /// (§3.2.2), which [`NetModel::cx5`] already takes; it states no RTT,
    /// lock or CPU figure of its own. So today the two presets hold the same
    /// numbers: `cx6` names where they come from for SMART's figures, and is
    /// the place for a CX6's measured numbers (docs/simulator.md).
    pub fn cx6() -> Self {
        Self::cx5()
    }

    /// The preset `nic`.
    pub fn preset(nic: Nic) -> Self {
        match nic {
            Nic::Cx5 => Self::cx5(),
            Nic::Cx6 => Self::cx6(),
        }
    }
}

impl Default for NetModel {
    fn default() -> Self {
        Self::cx5()
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
    /// Probability that a CAS that took its word reports the word's new
    /// value as the old one, as a failure would: soft-RoCE's unreported
    /// success (a retransmitted CAS executed a second time, whose result
    /// the requester kept; docs/rdma.md). Default 0: the indexes' tests
    /// turn it on where their recovery covers it.
    pub unreported_cas_prob: f64,
    /// Probability that a CAS or FAA that changed its word is executed a
    /// second time later, unreported: soft-RoCE's
    /// duplicate of a retransmitted atomic that the responder executed
    /// again instead of answering from its saved result (a lock word
    /// seen naming a handle again right after its unlock WRITE completed,
    /// docs/rdma.md). The second execution applies the same verb (a CAS
    /// takes effect only if the word holds its `expect` again) at a time
    /// uniform in `(now, now + replay_max_ns]`, with no completion.
    /// Masked CAS (a ConnectX extended atomic soft-RoCE lacks) is not
    /// replayed: a replayed lane unlock would free the lane under another
    /// core of its CS, whose name is the same, and no lock protocol on
    /// CS-wide names survives that. Default 0.
    pub replay_prob: f64,
    /// Probability that a CAS that took its word is executed a second
    /// time later and its completion carries that second execution's
    /// result instead of the first's: soft-RoCE's duplicate of a CAS whose
    /// response was lost, re-executed by the responder (docs/rdma.md). The
    /// second execution runs at a time uniform in `(now, now +
    /// replay_max_ns]`, takes effect only if the word holds `expect` again,
    /// and returns the word's value then: `swap` if nothing wrote it since
    /// (what `unreported_cas_prob` plays), another writer's word if one
    /// did, `expect` (a success) if the word went back. The verb's
    /// completion waits for it. Default 0.
    pub redo_cas_prob: f64,
    /// Latest virtual ns after the first execution a replay or a redo runs.
    pub replay_max_ns: u64,
    /// Probability that a CAS that fails writes its word back later, over
    /// any WRITE that lands on the word meanwhile: soft-RoCE in a 6.1
    /// kernel executes a CAS as `value = *word; if value == compare {
    /// value = swap }; *word = value` under a lock that only atomics take
    /// (`rxe_resp.c`), so a WRITE that lands between the read and the
    /// store is undone (docs/rdma.md: a waiter's failed lock CAS can undo
    /// the holder's unlock WRITE). The store comes at a time uniform in
    /// `(now, now + writeback_window_ns]`, or at once when another atomic
    /// reaches the word first (rxe serialises atomics); it writes only if
    /// a WRITE landed on the word in between. Default 0.
    pub cas_writeback_prob: f64,
    /// Latest virtual ns after a failed CAS its write-back comes.
    pub writeback_window_ns: u64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            tear: TearGranularity::Word,
            tear_window_ns: 0,
            delay_prob: 0.0,
            delay_max_ns: 0,
            unreported_cas_prob: 0.0,
            replay_prob: 0.0,
            redo_cas_prob: 0.0,
            replay_max_ns: 0,
            cas_writeback_prob: 0.0,
            writeback_window_ns: 0,
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
            unreported_cas_prob: 0.0,
            replay_prob: 0.0,
            redo_cas_prob: 0.0,
            replay_max_ns: 0,
            cas_writeback_prob: 0.0,
            writeback_window_ns: 0,
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
