//! Typed verb errors. Every verb completes with `Ok` or exactly one of these;
//! none of them is a panic and none hangs the waiting task.

use crate::{Capability, GlobalAddr};
use std::fmt;

/// Why a work request (or an RPC) failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerbError {
    /// The QP from this core to memory server `ms` is in the error state (a
    /// previous WR failed on real RDMA, or a fault was injected). Every WR posted
    /// to it completes with this error until the QP is re-created.
    QpError { ms: u16 },
    /// `[addr, addr+len)` is not inside a registered region of that MS (wrong
    /// MS id, past the region end, or device memory the MS does not have).
    /// On real RDMA this is a remote access error (`IBV_WC_REM_ACCESS_ERR`).
    OutOfBounds { addr: GlobalAddr, len: u64 },
    /// An 8-byte atomic (CAS/FAA) whose address is not 8-byte aligned.
    Misaligned { addr: GlobalAddr },
    /// The backend lacks a capability the verb needs (masked CAS, device memory).
    Unsupported(Capability),
    /// The memory server has no chunk left to hand out (chunk allocation RPC).
    MsOutOfMemory { ms: u16 },
    /// No RPC handler is registered under this id on that MS.
    UnknownRpc { ms: u16, handler: u16 },
    /// An RPC handler rejected its request; the string is the handler's reason.
    RpcFailed {
        ms: u16,
        handler: u16,
        reason: String,
    },
}

impl fmt::Display for VerbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerbError::QpError { ms } => {
                write!(f, "QP to memory server {ms} is in the error state")
            }
            VerbError::OutOfBounds { addr, len } => {
                write!(
                    f,
                    "{len} bytes at {addr:?} are outside every registered region"
                )
            }
            VerbError::Misaligned { addr } => write!(f, "8-byte atomic at unaligned {addr:?}"),
            VerbError::Unsupported(c) => write!(f, "the fabric lacks capability {c:?}"),
            VerbError::MsOutOfMemory { ms } => write!(f, "memory server {ms} is out of memory"),
            VerbError::UnknownRpc { ms, handler } => {
                write!(f, "no RPC handler {handler} on memory server {ms}")
            }
            VerbError::RpcFailed {
                ms,
                handler,
                reason,
            } => {
                write!(
                    f,
                    "RPC handler {handler} on memory server {ms} failed: {reason}"
                )
            }
        }
    }
}

impl std::error::Error for VerbError {}
