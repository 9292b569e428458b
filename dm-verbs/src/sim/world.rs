//! The simulator's state: memory servers (MS) with their NIC, link, atomic
//! bucket and RPC-core resources, CS NICs, simulated cores with their CQs,
//! and the pending events. See the parent module for the model; the
//! behaviour is in the sibling files (`schedule.rs` runs the event loop).

use super::queue::EventQueue;
use super::trace::Recorder;
use super::SimConfig;
use crate::ms::{ChunkAllocator, RpcRegistry};
use crate::{Completion, GlobalAddr, RpcHandler, Verb, VerbError, WorkRequest};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;

/// One memory server.
pub(super) struct SimMs {
    /// The host region: an anonymous mapping, so its pages are the OS's
    /// zero pages until written (a paper-sized cluster reserves gigabytes
    /// and touches megabytes), also when the process's allocator would
    /// recycle and zero a freed region of an earlier run (mimalloc does).
    pub(super) host: memmap2::MmapMut,
    pub(super) dev: Vec<u8>,
    pub(super) alloc: ChunkAllocator,
    pub(super) rpc: RpcRegistry,
    /// NIC message-rate resource: free again at this time.
    pub(super) nic_free: u64,
    /// NIC link (bytes) resource: both directions, or the outgoing one
    /// (READ responses, RPC replies) with `NetModel::full_duplex_ms_links`.
    pub(super) link_free: u64,
    /// The incoming direction (WRITE payloads) with
    /// `NetModel::full_duplex_ms_links`; unused otherwise.
    pub(super) link_in_free: u64,
    /// Atomic unit buckets: each free again at this time.
    pub(super) buckets: Vec<u64>,
    /// Processing units (`NetModel::nic_pus`): each free again at this time.
    pub(super) pus: Vec<u64>,
    /// RPC cores: busy flag per core; RPCs waiting for a core.
    pub(super) cores_busy: Vec<bool>,
    pub(super) rpc_queue: VecDeque<(usize, u64, u16, Vec<u8>)>,
}

/// One CS NIC (shared by the cores of that CS).
#[derive(Default, Clone)]
pub(super) struct CsNic {
    pub(super) tx_free: u64,
    pub(super) rx_free: u64,
}

pub(super) struct Core {
    pub(super) cs: u16,
    pub(super) clock: Rc<Cell<u64>>,
    pub(super) scheduled: bool,
    /// Completions in arrival order; a `Vec` so the usual full drain is one
    /// `append` (a `VecDeque` drain extends element by element).
    pub(super) cq: Vec<Completion>,
    /// Per MS: QP in error state.
    pub(super) broken: Vec<bool>,
    /// Per MS: execution time of the QP's last WR (in-order execution).
    pub(super) qp_last_exec: Vec<u64>,
}

pub(super) enum Event {
    CoreWake(usize),
    Exec {
        core: usize,
        wr_id: u64,
        verb: Verb,
    },
    ReadEnd {
        core: usize,
        wr_id: u64,
        addr: GlobalAddr,
        old: Vec<u8>,
    },
    RpcDone {
        core: usize,
        wr_id: u64,
        ms: u16,
        ms_core: usize,
        reply: Result<Vec<u8>, VerbError>,
    },
    Deliver {
        core: usize,
        c: Completion,
    },
    /// A post list taken at the NICs at its core's clock `t0`
    /// ([`super::NetModel::posts_in_time_order`]).
    Post {
        core: usize,
        ms: u16,
        t0: u64,
        wrs: Vec<WorkRequest>,
    },
    /// A second, unreported execution of an atomic (`Faults::replay_prob`).
    Replay(Verb),
    /// A failed CAS's write-back of its word (`Faults::cas_writeback_prob`),
    /// named by the CAS's number among the verbs executed.
    WriteBack(u64),
    /// A second execution of a CAS whose completion reports it
    /// (`Faults::redo_cas_prob`).
    Redo {
        core: usize,
        wr_id: u64,
        verb: Verb,
    },
}

pub(super) struct World {
    pub(super) cfg: SimConfig,
    pub(super) now: u64,
    pub(super) trace_hash: u64,
    pub(super) verbs_executed: u64,
    pub(super) rng: ChaCha8Rng,
    /// Link time per byte in picoseconds (from `link_bytes_per_ns`).
    pub(super) ps_per_byte: u64,
    pub(super) ms: Vec<SimMs>,
    pub(super) cs_nics: Vec<CsNic>,
    pub(super) cores: Vec<Core>,
    /// Pending events, popped in time order; ties in time in push order.
    pub(super) events: EventQueue<Event>,
    /// The WR recorder, when on ([`super::SimFabric::start_trace`]).
    pub(super) rec: Option<Box<Recorder>>,
    /// Emptied post lists of deferred posts (`Event::Post`), reused by the
    /// next deferral: a warm operation allocates nothing (issue 32).
    pub(super) spare_lists: Vec<Vec<WorkRequest>>,
    /// Failed CASes whose write-back is still to come
    /// (`Faults::cas_writeback_prob`; `writeback.rs`).
    pub(super) writebacks: Vec<super::writeback::Pending>,
}

/// Folds `v` into the trace hash (one multiply-rotate round; order-sensitive).
pub(super) fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

impl World {
    pub(super) fn new(cfg: SimConfig) -> Self {
        let ms = (0..cfg.num_ms)
            .map(|_| SimMs {
                host: memmap2::MmapMut::map_anon(cfg.ms.region_bytes as usize)
                    .expect("an anonymous mapping of the MS region (address space)"),
                dev: vec![0; cfg.ms.device_bytes as usize],
                alloc: ChunkAllocator::new(&cfg.ms),
                rpc: RpcRegistry::with_builtins(),
                nic_free: 0,
                link_free: 0,
                link_in_free: 0,
                buckets: vec![0; cfg.net.atomic_buckets.max(1) as usize],
                pus: vec![0; cfg.net.nic_pus as usize],
                cores_busy: vec![false; cfg.ms.cores.max(1) as usize],
                rpc_queue: VecDeque::new(),
            })
            .collect();
        World {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            ps_per_byte: (1000.0 / cfg.net.link_bytes_per_ns).round().max(1.0) as u64,
            cfg,
            now: 0,
            trace_hash: 0xcbf2_9ce4_8422_2325,
            verbs_executed: 0,
            ms,
            cs_nics: Vec::new(),
            cores: Vec::new(),
            events: EventQueue::new(),
            rec: None,
            spare_lists: Vec::new(),
            writebacks: Vec::new(),
        }
    }

    /// Inlined, with the queue's push, so each event is built in its node.
    #[inline(always)]
    pub(super) fn push(&mut self, time: u64, ev: Event) {
        debug_assert!(time >= self.now, "sim: an event scheduled in the past");
        self.events.push(time, ev);
    }

    pub(super) fn add_core(&mut self, cs: u16) -> usize {
        if self.cs_nics.len() <= cs as usize {
            self.cs_nics.resize(cs as usize + 1, CsNic::default());
        }
        let n = self.cfg.num_ms as usize;
        self.cores.push(Core {
            cs,
            clock: Rc::new(Cell::new(self.now)),
            scheduled: false,
            cq: Vec::new(),
            broken: vec![false; n],
            qp_last_exec: vec![0; n],
        });
        self.cores.len() - 1
    }

    pub(super) fn register_rpc(&mut self, id: u16, h: RpcHandler) {
        for m in &mut self.ms {
            m.rpc.register(id, h.clone());
        }
    }

    pub(super) fn break_qp(&mut self, core: usize, ms: u16) {
        if let Some(b) = self.cores[core].broken.get_mut(ms as usize) {
            *b = true;
        }
    }

    pub(super) fn core_clock(&self, core: usize) -> Rc<Cell<u64>> {
        self.cores[core].clock.clone()
    }

    pub(super) fn ms_bytes_used(&self, ms: u16) -> u64 {
        self.ms.get(ms as usize).map_or(0, |m| m.alloc.used())
    }

    /// Time to move `bytes` over one link, ns (rounded up).
    pub(super) fn transfer_ns(&self, bytes: u64) -> u64 {
        (bytes * self.ps_per_byte).div_ceil(1000)
    }
}
