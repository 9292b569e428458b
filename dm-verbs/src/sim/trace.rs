//! The simulator's optional WR recorder (off by default): what `dm-bench
//! trace` draws as a sequence diagram.
//!
//! While on ([`super::SimFabric::start_trace`] .. [`super::SimFabric::take_trace`])
//! the simulator notes, for every WR it is handed, the virtual ns at which it
//! passes each stage of the network model (see the parent module):
//!
//! 1. `posted_ns`: the CS core hands its post list to the QP (one doorbell
//!    per post list, [`Doorbell`]);
//! 2. `nic_tx_ns`: the CS NIC has sent it (message rate, then the payload on
//!    the link);
//! 3. `ms_arrive_ns`: it reaches the MS NIC, half an RTT later;
//! 4. `exec_ns`: the MS executes it (after the MS NIC's message rate, the
//!    atomic unit's bucket for CAS/FAA, in-order execution per QP; for an
//!    RPC, when an MS core starts its handler);
//! 5. `ms_done_ns`: the response leaves the MS (READ data or RPC reply
//!    transferred over the MS link);
//! 6. `cq_ns`: the completion lands in the core's CQ (half an RTT and the CS
//!    NIC's receive link later, plus any injected delay).
//!
//! Recording reads the model's times and changes nothing: the same run gives
//! the same events and [`super::SimFabric::trace_hash`] with it on or off.
//! Off, each hook is one branch on an `Option`.

use crate::{GlobalAddr, Verb, VerbKind};
use std::collections::HashMap;

/// One WR's trip through the model. Times in virtual ns (global clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrTrace {
    /// Simulator core index (as `SimQueues::core_index`).
    pub core: usize,
    /// Compute server of the core.
    pub cs: u16,
    pub ms: u16,
    pub wr_id: u64,
    pub kind: VerbKind,
    /// A masked CAS (counted as a CAS in `kind`).
    pub masked: bool,
    /// Remote address (`None` for an RPC).
    pub addr: Option<GlobalAddr>,
    /// RPC handler id.
    pub rpc_handler: Option<u16>,
    /// Payload the CS sends: WRITE data, atomic operands, RPC request.
    pub bytes_out: u64,
    /// Payload that comes back: READ data, atomic old value, RPC reply.
    pub bytes_in: u64,
    /// Index of its post list in [`SimTrace::doorbells`].
    pub doorbell: usize,
    pub posted_ns: u64,
    pub nic_tx_ns: u64,
    pub ms_arrive_ns: u64,
    pub exec_ns: u64,
    pub ms_done_ns: u64,
    pub cq_ns: u64,
    /// The verb succeeded (an error completion has `ok == false`).
    pub ok: bool,
    /// Old value returned by an atomic (CAS/FAA), for reading lock words.
    pub atomic_old: Option<u64>,
    /// A CAS's compare value and compare mask (all ones for a plain CAS):
    /// it succeeded iff `old & mask == expect & mask`.
    pub cas_expect: Option<(u64, u64)>,
}

/// One post list handed to a QP: one doorbell ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doorbell {
    pub core: usize,
    pub ms: u16,
    /// Core clock when the list was posted, ns.
    pub ns: u64,
    /// WRs in the list (indices into [`SimTrace::wrs`]).
    pub wrs: Vec<usize>,
}

/// What the recorder saw, in posting order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimTrace {
    pub wrs: Vec<WrTrace>,
    pub doorbells: Vec<Doorbell>,
    /// Global virtual time when recording started, ns.
    pub start_ns: u64,
}

/// The live recorder inside the simulator.
#[derive(Default)]
pub(super) struct Recorder {
    pub(super) trace: SimTrace,
    /// (core, wr_id) -> index in `trace.wrs`, while the WR is in flight.
    open: HashMap<(usize, u64), usize>,
    /// Set by the return path just before the completion is scheduled:
    /// (time the response leaves the MS, response bytes).
    pub(super) reply: Option<(u64, u64)>,
}

impl Recorder {
    pub(super) fn new(start_ns: u64) -> Self {
        Recorder {
            trace: SimTrace {
                start_ns,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A new post list of `core` to `ms` at `ns`; returns its index.
    pub(super) fn doorbell(&mut self, core: usize, ms: u16, ns: u64) -> usize {
        self.trace.doorbells.push(Doorbell {
            core,
            ms,
            ns,
            wrs: Vec::new(),
        });
        self.trace.doorbells.len() - 1
    }

    /// A WR of post list `db`, with the times the model computed at posting.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn post(
        &mut self,
        db: usize,
        core: usize,
        cs: u16,
        ms: u16,
        wr_id: u64,
        verb: &Verb,
        (posted, tx, arrive, exec): (u64, u64, u64, u64),
    ) {
        let (addr, handler, masked, expect) = match verb {
            Verb::Read { addr, .. } | Verb::Write { addr, .. } | Verb::Faa { addr, .. } => {
                (Some(*addr), None, false, None)
            }
            Verb::Cas { addr, expect, .. } => (Some(*addr), None, false, Some((*expect, !0))),
            Verb::MaskedCas {
                addr,
                expect,
                compare_mask,
                ..
            } => (Some(*addr), None, true, Some((*expect, *compare_mask))),
            Verb::Rpc { handler, .. } => (None, Some(*handler), false, None),
        };
        let bytes_in = match verb {
            Verb::Read { len, .. } => *len as u64,
            Verb::Write { .. } | Verb::Rpc { .. } => 0,
            _ => 8,
        };
        let i = self.trace.wrs.len();
        self.trace.wrs.push(WrTrace {
            core,
            cs,
            ms,
            wr_id,
            kind: verb.kind(),
            masked,
            addr,
            rpc_handler: handler,
            bytes_out: verb.bytes_out(),
            bytes_in,
            doorbell: db,
            posted_ns: posted,
            nic_tx_ns: tx,
            ms_arrive_ns: arrive,
            exec_ns: exec,
            ms_done_ns: exec,
            cq_ns: 0,
            ok: true,
            atomic_old: None,
            cas_expect: expect,
        });
        self.trace.doorbells[db].wrs.push(i);
        self.open.insert((core, wr_id), i);
    }

    fn get(&mut self, core: usize, wr_id: u64) -> Option<&mut WrTrace> {
        let i = *self.open.get(&(core, wr_id))?;
        Some(&mut self.trace.wrs[i])
    }

    /// The MS starts executing the WR (an RPC: its handler starts) at `ns`.
    pub(super) fn exec(&mut self, core: usize, wr_id: u64, ns: u64) {
        if let Some(w) = self.get(core, wr_id) {
            w.exec_ns = ns;
        }
    }

    /// The completion is scheduled: the response left the MS as the return
    /// path noted (if it did), the CQ gets it at `cq`.
    pub(super) fn complete(
        &mut self,
        core: usize,
        wr_id: u64,
        cq: u64,
        ok: bool,
        old: Option<u64>,
    ) {
        let reply = self.reply.take();
        if let Some(w) = self.get(core, wr_id) {
            if let Some((t, bytes)) = reply {
                w.ms_done_ns = t;
                w.bytes_in = bytes;
            }
            w.cq_ns = cq;
            w.ok = ok;
            w.atomic_old = old;
        }
    }

    /// The completion reached the CQ at `ns` (the delivery event ran).
    pub(super) fn delivered(&mut self, core: usize, wr_id: u64, ns: u64) {
        if let Some(i) = self.open.remove(&(core, wr_id)) {
            self.trace.wrs[i].cq_ns = ns;
        }
    }
}
