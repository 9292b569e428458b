//! The memory servers (MS) of a loopback cluster: their host and device
//! regions, chunk allocators and RPC registries, how each verb executes
//! against them (in the posting thread), and an RPC handler's view of its MS.

use super::words::{read_words, write_words, Words};
use super::LoopbackConfig;
use crate::ms::{check_bounds, masked_cas_apply, ChunkAllocator, RpcRegistry};
use crate::{Capability, GlobalAddr, MsMemory, Verb, VerbError, VerbOutput};
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::{Mutex, RwLock};
use std::time::Instant;

/// One memory server.
pub(super) struct LbMs {
    pub(super) host: Words,
    pub(super) dev: Words,
    pub(super) alloc: Mutex<ChunkAllocator>,
    pub(super) rpc: RwLock<RpcRegistry>,
}

pub(super) struct Shared {
    pub(super) cfg: LoopbackConfig,
    pub(super) ms: Vec<LbMs>,
    pub(super) t0: Instant,
}

impl Shared {
    /// The words of the region `[addr, addr+len)` lies in, and its local offset.
    fn words(&self, addr: GlobalAddr, len: u64) -> Result<(&[AtomicU64], u64), VerbError> {
        let c = &self.cfg;
        let off = check_bounds(addr, len, c.num_ms, c.ms.region_bytes, c.ms.device_bytes)?;
        let m = &self.ms[addr.ms() as usize];
        let w = if addr.is_device() { &m.dev } else { &m.host };
        Ok((w.as_slice(), off))
    }

    #[inline(always)]
    fn read(&self, addr: GlobalAddr, len: usize) -> Result<Vec<u8>, VerbError> {
        let (w, off) = self.words(addr, len as u64)?;
        Ok(read_words(w, off, len))
    }

    fn write(&self, addr: GlobalAddr, data: &[u8]) -> Result<(), VerbError> {
        let (w, off) = self.words(addr, data.len() as u64)?;
        write_words(w, off, data);
        Ok(())
    }

    /// The aligned word at `addr`, for the atomics.
    fn word(&self, addr: GlobalAddr) -> Result<&AtomicU64, VerbError> {
        if !addr.local_offset().is_multiple_of(8) {
            return Err(VerbError::Misaligned { addr });
        }
        let (w, off) = self.words(addr, 8)?;
        Ok(&w[(off / 8) as usize])
    }

    fn cas(&self, addr: GlobalAddr, expect: u64, swap: u64) -> Result<u64, VerbError> {
        let r = self
            .word(addr)?
            .compare_exchange(expect, swap, AcqRel, Acquire);
        Ok(r.unwrap_or_else(|old| old))
    }

    fn faa(&self, addr: GlobalAddr, add: u64) -> Result<u64, VerbError> {
        Ok(self.word(addr)?.fetch_add(add, AcqRel))
    }

    pub(super) fn execute(&self, verb: Verb) -> Result<VerbOutput, VerbError> {
        match verb {
            Verb::Read { addr, len } => self.read(addr, len as usize).map(VerbOutput::Read),
            Verb::Write { addr, data } => {
                let r = self.write(addr, &data).map(|()| VerbOutput::Write);
                crate::buf::give(data);
                r
            }
            Verb::Cas { addr, expect, swap } => {
                self.cas(addr, expect, swap).map(VerbOutput::Atomic)
            }
            Verb::Faa { addr, add } => self.faa(addr, add).map(VerbOutput::Atomic),
            Verb::MaskedCas {
                addr,
                expect,
                swap,
                compare_mask,
                swap_mask,
            } => {
                if !self.cfg.masked_cas {
                    return Err(VerbError::Unsupported(Capability::MaskedCas));
                }
                let f = |o| masked_cas_apply(o, expect, swap, compare_mask, swap_mask);
                let r = self.word(addr)?.fetch_update(AcqRel, Acquire, f);
                Ok(VerbOutput::Atomic(r.unwrap_or_else(|old| old)))
            }
            Verb::Rpc {
                ms,
                handler,
                payload,
            } => {
                let Some(m) = self.ms.get(ms as usize) else {
                    let addr = GlobalAddr::new(ms, 0);
                    return Err(VerbError::OutOfBounds { addr, len: 0 });
                };
                // Clone the handler so the registry lock is not held while it runs.
                let h = m
                    .rpc
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(handler)
                    .cloned();
                let h = h.ok_or(VerbError::UnknownRpc { ms, handler })?;
                let r = crate::ms::call_handler(ms, handler, || {
                    h(&mut LbView { s: self, ms }, &payload)
                })
                .map(VerbOutput::Rpc);
                crate::buf::give(payload);
                r
            }
        }
    }
}

/// An RPC handler's view of its MS: local access to that MS only.
struct LbView<'a> {
    s: &'a Shared,
    ms: u16,
}

impl LbView<'_> {
    fn local(&self, addr: GlobalAddr, len: u64) -> Result<(), VerbError> {
        if addr.ms() == self.ms {
            Ok(())
        } else {
            Err(VerbError::OutOfBounds { addr, len })
        }
    }
}

impl MsMemory for LbView<'_> {
    fn ms_id(&self) -> u16 {
        self.ms
    }
    fn read(&mut self, addr: GlobalAddr, len: usize) -> Result<Vec<u8>, VerbError> {
        self.local(addr, len as u64)?;
        self.s.read(addr, len)
    }
    fn write(&mut self, addr: GlobalAddr, data: &[u8]) -> Result<(), VerbError> {
        self.local(addr, data.len() as u64)?;
        self.s.write(addr, data)
    }
    fn cas(&mut self, addr: GlobalAddr, expect: u64, swap: u64) -> Result<u64, VerbError> {
        self.local(addr, 8)?;
        self.s.cas(addr, expect, swap)
    }
    fn faa(&mut self, addr: GlobalAddr, add: u64) -> Result<u64, VerbError> {
        self.local(addr, 8)?;
        self.s.faa(addr, add)
    }
    fn alloc_chunk(&mut self) -> Result<GlobalAddr, VerbError> {
        let ms = self.ms;
        let mut a = self.s.ms[ms as usize]
            .alloc
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        a.alloc()
            .map(|off| GlobalAddr::new(ms, off))
            .ok_or(VerbError::MsOutOfMemory { ms })
    }
    fn free_chunk(&mut self, off: u64) -> Result<(), String> {
        self.s.ms[self.ms as usize]
            .alloc
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .free(off)
    }
    fn charge_cpu(&mut self, _ns: u64) {}
}
