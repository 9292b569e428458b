//! Work requests (WRs), their completions, and per-verb accounting.

use crate::{GlobalAddr, VerbError};

/// One verb. One-sided verbs name remote memory by [`GlobalAddr`]; the target MS
/// is the address's MS. `Rpc` is the two-sided SEND/RECV pair to a handler that
/// runs on an MS core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verb {
    /// RDMA READ of `len` bytes. Not atomic above 8 bytes: see the crate docs.
    Read { addr: GlobalAddr, len: u32 },
    /// RDMA WRITE of `data`. Not atomic above 8 bytes; WRITEs on one QP execute in
    /// posting order.
    Write { addr: GlobalAddr, data: Vec<u8> },
    /// 8-byte compare-and-swap at an 8-byte aligned address; completes with the old value.
    Cas {
        addr: GlobalAddr,
        expect: u64,
        swap: u64,
    },
    /// Masked CAS (ConnectX extended atomics, Sherman §4.3): compares
    /// `old & compare_mask` with `expect & compare_mask` and, if equal, writes
    /// `(old & !swap_mask) | (swap & swap_mask)`. Needs [`crate::Capability::MaskedCas`].
    MaskedCas {
        addr: GlobalAddr,
        expect: u64,
        swap: u64,
        compare_mask: u64,
        swap_mask: u64,
    },
    /// 8-byte fetch-and-add (wrapping) at an 8-byte aligned address; completes with the old value.
    Faa { addr: GlobalAddr, add: u64 },
    /// Two-sided RPC: `payload` goes to handler `handler` on memory server `ms`.
    Rpc {
        ms: u16,
        handler: u16,
        payload: Vec<u8>,
    },
}

impl Verb {
    /// The memory server the verb goes to (selects the QP).
    pub fn ms(&self) -> u16 {
        match self {
            Verb::Read { addr, .. }
            | Verb::Write { addr, .. }
            | Verb::Cas { addr, .. }
            | Verb::MaskedCas { addr, .. }
            | Verb::Faa { addr, .. } => addr.ms(),
            Verb::Rpc { ms, .. } => *ms,
        }
    }

    /// The remote address a one-sided verb targets; `None` for an RPC.
    pub fn addr(&self) -> Option<GlobalAddr> {
        match self {
            Verb::Read { addr, .. }
            | Verb::Write { addr, .. }
            | Verb::Cas { addr, .. }
            | Verb::MaskedCas { addr, .. }
            | Verb::Faa { addr, .. } => Some(*addr),
            Verb::Rpc { .. } => None,
        }
    }

    /// The kind, for accounting.
    pub fn kind(&self) -> VerbKind {
        match self {
            Verb::Read { .. } => VerbKind::Read,
            Verb::Write { .. } => VerbKind::Write,
            Verb::Cas { .. } | Verb::MaskedCas { .. } => VerbKind::Cas,
            Verb::Faa { .. } => VerbKind::Faa,
            Verb::Rpc { .. } => VerbKind::Rpc,
        }
    }

    /// Payload bytes the CS sends (WRITE data, atomic operands, RPC request).
    pub fn bytes_out(&self) -> u64 {
        match self {
            Verb::Read { .. } => 0,
            Verb::Write { data, .. } => data.len() as u64,
            Verb::Cas { .. } | Verb::Faa { .. } => 16,
            Verb::MaskedCas { .. } => 32,
            Verb::Rpc { payload, .. } => payload.len() as u64,
        }
    }
}

/// Verb kinds as the accounting counts them (masked CAS counts as CAS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VerbKind {
    Read,
    Write,
    Cas,
    Faa,
    Rpc,
}

/// A work request: the verb and the `wr_id` its completion carries back.
#[derive(Clone, Debug)]
pub struct WorkRequest {
    /// Opaque to the fabric; the runtime packs a slab key and a generation in it.
    pub wr_id: u64,
    pub verb: Verb,
}

/// What a successful verb returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerbOutput {
    /// READ: exactly `len` bytes (possibly torn, see the crate docs).
    Read(Vec<u8>),
    /// WRITE: nothing.
    Write,
    /// CAS / masked CAS / FAA: the 8-byte value before the atomic.
    Atomic(u64),
    /// RPC: the handler's reply.
    Rpc(Vec<u8>),
}

/// A work completion (WC) as it comes out of a CQ.
#[derive(Clone, Debug)]
pub struct Completion {
    pub wr_id: u64,
    pub result: Result<VerbOutput, VerbError>,
}

/// Counters kept per core and per task (operation). All counts are plain
/// event counts; bytes are payload bytes (not headers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerbStats {
    pub read: u64,
    pub write: u64,
    /// CAS and masked CAS.
    pub cas: u64,
    pub faa: u64,
    pub rpc: u64,
    /// Bytes returned by READs and RPC replies.
    pub bytes_read: u64,
    /// Bytes carried by WRITEs and RPC requests.
    pub bytes_written: u64,
    /// Post lists handed to a QP (one doorbell each).
    pub doorbells: u64,
    /// Round trips: times a task parked waiting for at least one verb it posted.
    pub rtts: u64,
}

impl VerbStats {
    /// Counts one posted verb (bytes_written for outgoing payloads).
    pub fn count_post(&mut self, verb: &Verb) {
        match verb.kind() {
            VerbKind::Read => self.read += 1,
            VerbKind::Write => self.write += 1,
            VerbKind::Cas => self.cas += 1,
            VerbKind::Faa => self.faa += 1,
            VerbKind::Rpc => self.rpc += 1,
        }
        if matches!(verb, Verb::Write { .. } | Verb::Rpc { .. }) {
            self.bytes_written += verb.bytes_out();
        }
    }

    /// Counts the bytes a completion brought back.
    pub fn count_completion(&mut self, out: &VerbOutput) {
        match out {
            VerbOutput::Read(b) | VerbOutput::Rpc(b) => self.bytes_read += b.len() as u64,
            _ => {}
        }
    }

    /// Total verbs of all kinds.
    pub fn verbs(&self) -> u64 {
        self.read + self.write + self.cas + self.faa + self.rpc
    }

    /// Field-wise `self - earlier` (for per-operation deltas).
    pub fn since(&self, earlier: &VerbStats) -> VerbStats {
        VerbStats {
            read: self.read - earlier.read,
            write: self.write - earlier.write,
            cas: self.cas - earlier.cas,
            faa: self.faa - earlier.faa,
            rpc: self.rpc - earlier.rpc,
            bytes_read: self.bytes_read - earlier.bytes_read,
            bytes_written: self.bytes_written - earlier.bytes_written,
            doorbells: self.doorbells - earlier.doorbells,
            rtts: self.rtts - earlier.rtts,
        }
    }

    /// Field-wise sum.
    pub fn add(&mut self, o: &VerbStats) {
        self.read += o.read;
        self.write += o.write;
        self.cas += o.cas;
        self.faa += o.faa;
        self.rpc += o.rpc;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.doorbells += o.doorbells;
        self.rtts += o.rtts;
    }
}
