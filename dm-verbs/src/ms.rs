//! Memory server (MS): a registered host region, an optional device-memory
//! region, a chunk allocator reached by RPC, and the RPC handler registry.
//!
//! Host region layout (offsets from the region start):
//!
//! | offset                | bytes                   | what                                   |
//! |-----------------------|-------------------------|----------------------------------------|
//! | 0                     | [`SUPERBLOCK_BYTES`] (4 KiB) | superblock: well-known words (default roots, the catalog of named roots and its root areas; map in [`superblock`]); zeroed at start |
//! | 4096                  | `chunk_bytes` each      | chunks, handed out in address order by [`RPC_ALLOC_CHUNK`] |
//!
//! Chunks (default 8 MiB) are handed out whole: Sherman §4.2 allocates "in
//! chunks" through the MS and carves them locally on the CS; freed nodes are
//! recycled by the index, not the MS. When no whole chunk is left the RPC
//! fails with [`VerbError::MsOutOfMemory`]. A chunk a CS took and never
//! used (it lost a race to publish it, as two CSs creating the membership
//! table at once) goes back with [`RPC_FREE_CHUNK`]; the next allocation
//! takes a returned chunk first.

pub mod superblock;

use crate::{GlobalAddr, VerbError};
use std::sync::Arc;

/// Bytes at the start of every host region reserved for the superblock.
pub const SUPERBLOCK_BYTES: u64 = 4096;
/// RPC id of the built-in chunk allocator. Request: empty. Reply: the chunk's
/// [`GlobalAddr`] as 8 little-endian bytes; chunk length is `MsConfig::chunk_bytes`.
pub const RPC_ALLOC_CHUNK: u16 = 0;
/// RPC id of the built-in chunk release. Request: the chunk's [`GlobalAddr`]
/// as 8 little-endian bytes (as [`RPC_ALLOC_CHUNK`] replied it). Reply:
/// empty. Fails with [`VerbError::RpcFailed`] if the address is not a chunk
/// of this MS that is handed out (never allocated, already returned, or not
/// a chunk's start). Only for a chunk nothing was written into and no other
/// CS knows of: the MS cannot tell.
pub const RPC_FREE_CHUNK: u16 = 1;

/// How each memory server is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsConfig {
    /// Host region size in bytes (default 1 GiB; zero pages cost nothing until touched).
    pub region_bytes: u64,
    /// Chunk size handed out per allocation RPC (default 8 MiB, Sherman §4.2).
    pub chunk_bytes: u64,
    /// Device (on-chip) memory in bytes, 0 for none (default 256 KiB: ConnectX-5's
    /// on-chip memory, Sherman §4.3, holds the global lock table).
    pub device_bytes: u64,
    /// CPU cores that run RPC handlers (default 1: MSs have "almost no CPU").
    pub cores: u16,
}

impl Default for MsConfig {
    fn default() -> Self {
        MsConfig {
            region_bytes: 1 << 30,
            chunk_bytes: 8 << 20,
            device_bytes: 256 << 10,
            cores: 1,
        }
    }
}

/// Bump allocator of whole chunks over one host region, with the chunks
/// returned by [`RPC_FREE_CHUNK`] taken first.
#[derive(Clone, Debug)]
pub struct ChunkAllocator {
    next: u64,
    end: u64,
    chunk: u64,
    /// Offsets of returned chunks, reused last returned first.
    free: Vec<u64>,
}

impl ChunkAllocator {
    pub fn new(cfg: &MsConfig) -> Self {
        ChunkAllocator {
            next: SUPERBLOCK_BYTES,
            end: cfg.region_bytes,
            chunk: cfg.chunk_bytes.max(8),
            free: Vec::new(),
        }
    }

    /// Next chunk's offset, or `None` when the region has no whole chunk left.
    pub fn alloc(&mut self) -> Option<u64> {
        if let Some(off) = self.free.pop() {
            return Some(off);
        }
        if self.next + self.chunk > self.end {
            return None;
        }
        let off = self.next;
        self.next += self.chunk;
        Some(off)
    }

    /// Takes back the chunk at `off`; the reason if `off` is not the start
    /// of a chunk handed out and not yet returned.
    pub fn free(&mut self, off: u64) -> Result<(), String> {
        let handed = off >= SUPERBLOCK_BYTES
            && off < self.next
            && (off - SUPERBLOCK_BYTES).is_multiple_of(self.chunk);
        if !handed {
            return Err(format!("offset {off:#x} is not a chunk handed out"));
        }
        if self.free.contains(&off) {
            return Err(format!("chunk at {off:#x} was already returned"));
        }
        self.free.push(off);
        Ok(())
    }

    /// Bytes handed out and not returned (superblock included).
    pub fn used(&self) -> u64 {
        self.next - self.free.len() as u64 * self.chunk
    }
}

/// What an RPC handler may do on its MS: local (CPU) access to the MS's memory,
/// the chunk allocator, and charging CPU time (sim: delays the reply; MS cores
/// serialise handlers, so saturation shows).
pub trait MsMemory {
    fn ms_id(&self) -> u16;
    /// Reads `len` bytes at `addr` (must be on this MS).
    fn read(&mut self, addr: GlobalAddr, len: usize) -> Result<Vec<u8>, VerbError>;
    fn write(&mut self, addr: GlobalAddr, data: &[u8]) -> Result<(), VerbError>;
    /// 8-byte CAS; returns the old value.
    fn cas(&mut self, addr: GlobalAddr, expect: u64, swap: u64) -> Result<u64, VerbError>;
    /// 8-byte FAA; returns the old value.
    fn faa(&mut self, addr: GlobalAddr, add: u64) -> Result<u64, VerbError>;
    /// Takes one chunk from this MS's allocator.
    fn alloc_chunk(&mut self) -> Result<GlobalAddr, VerbError>;
    /// Returns the chunk at offset `off` of this MS to its allocator
    /// ([`ChunkAllocator::free`]'s reason on a bad offset).
    fn free_chunk(&mut self, off: u64) -> Result<(), String>;
    /// Charges `ns` of MS CPU time to the running handler.
    fn charge_cpu(&mut self, ns: u64);
}

/// An RPC handler: runs on an MS core with the request payload, returns the reply.
pub type RpcHandler =
    Arc<dyn Fn(&mut dyn MsMemory, &[u8]) -> Result<Vec<u8>, VerbError> + Send + Sync>;

/// The built-in handler behind [`RPC_ALLOC_CHUNK`].
pub fn alloc_chunk_handler() -> RpcHandler {
    Arc::new(|mem: &mut dyn MsMemory, _req: &[u8]| {
        let a = mem.alloc_chunk()?;
        Ok(crate::buf::le64(a.to_u64()))
    })
}

/// The built-in handler behind [`RPC_FREE_CHUNK`].
pub fn free_chunk_handler() -> RpcHandler {
    Arc::new(|mem: &mut dyn MsMemory, req: &[u8]| {
        let ms = mem.ms_id();
        let failed = |reason: String| VerbError::RpcFailed {
            ms,
            handler: RPC_FREE_CHUNK,
            reason,
        };
        let raw: [u8; 8] = req
            .try_into()
            .map_err(|_| failed(format!("a {}-byte request, not 8", req.len())))?;
        let a = GlobalAddr::from_u64(u64::from_le_bytes(raw));
        if a.ms() != ms || a.is_device() {
            return Err(failed(format!("{a:?} is not in this MS's host region")));
        }
        mem.free_chunk(a.offset()).map_err(failed)?;
        Ok(Vec::new())
    })
}

/// Runs RPC handler `handler` of MS `ms` (`f`), a panic in it turned into
/// [`VerbError::RpcFailed`] naming the panic: the caller's RPC completes
/// with an error instead of never (loopback runs handlers inside the
/// poster's verb post, rdma in the memory server's loop) or taking the
/// simulator's thread down. The handler's partial effects on MS memory
/// stay as they are.
pub(crate) fn call_handler<R>(
    ms: u16,
    handler: u16,
    f: impl FnOnce() -> Result<R, VerbError>,
) -> Result<R, VerbError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        Err(VerbError::RpcFailed {
            ms,
            handler,
            reason: format!("the handler panicked: {what}"),
        })
    })
}

/// Handler table of one MS, indexed by handler id.
#[derive(Clone, Default)]
pub struct RpcRegistry {
    handlers: Vec<Option<RpcHandler>>,
}

impl RpcRegistry {
    /// A registry holding the built-in chunk allocator.
    pub fn with_builtins() -> Self {
        let mut r = RpcRegistry::default();
        r.register(RPC_ALLOC_CHUNK, alloc_chunk_handler());
        r.register(RPC_FREE_CHUNK, free_chunk_handler());
        r
    }

    pub fn register(&mut self, id: u16, h: RpcHandler) {
        let i = id as usize;
        if self.handlers.len() <= i {
            self.handlers.resize(i + 1, None);
        }
        self.handlers[i] = Some(h);
    }

    pub fn get(&self, id: u16) -> Option<&RpcHandler> {
        self.handlers.get(id as usize).and_then(|h| h.as_ref())
    }
}

/// Checks that `[addr, addr+len)` lies in a region of MS `ms` with host region
/// `region_bytes` and device memory `device_bytes`; returns the local offset.
pub fn check_bounds(
    addr: GlobalAddr,
    len: u64,
    num_ms: u16,
    region_bytes: u64,
    device_bytes: u64,
) -> Result<u64, VerbError> {
    let limit = if addr.is_device() {
        device_bytes
    } else {
        region_bytes
    };
    let off = addr.local_offset();
    if addr.is_null() || addr.ms() >= num_ms || off.checked_add(len).is_none_or(|e| e > limit) {
        return Err(VerbError::OutOfBounds { addr, len });
    }
    Ok(off)
}

/// Applies a masked CAS to `old`; returns the new value if it matches.
pub fn masked_cas_apply(
    old: u64,
    expect: u64,
    swap: u64,
    compare_mask: u64,
    swap_mask: u64,
) -> Option<u64> {
    if old & compare_mask == expect & compare_mask {
        Some((old & !swap_mask) | (swap & swap_mask))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_allocator_exhausts() {
        let cfg = MsConfig {
            region_bytes: SUPERBLOCK_BYTES + 3 * 1024,
            chunk_bytes: 1024,
            ..Default::default()
        };
        let mut a = ChunkAllocator::new(&cfg);
        assert_eq!(a.alloc(), Some(SUPERBLOCK_BYTES));
        assert_eq!(a.alloc(), Some(SUPERBLOCK_BYTES + 1024));
        assert_eq!(a.alloc(), Some(SUPERBLOCK_BYTES + 2048));
        assert_eq!(a.alloc(), None);
    }

    #[test]
    fn bounds() {
        assert!(check_bounds(GlobalAddr::new(0, 0), 8, 1, 64, 0).is_ok());
        assert!(check_bounds(GlobalAddr::new(0, 60), 8, 1, 64, 0).is_err());
        assert!(check_bounds(GlobalAddr::new(1, 0), 8, 1, 64, 0).is_err());
        assert!(check_bounds(GlobalAddr::device(0, 0), 8, 1, 64, 0).is_err());
        assert!(check_bounds(GlobalAddr::device(0, 0), 8, 1, 64, 16).is_ok());
        assert!(check_bounds(GlobalAddr::NULL, 8, 1, 64, 0).is_err());
    }

    #[test]
    fn masked_cas() {
        assert_eq!(
            masked_cas_apply(0x00ff, 0x0000, 0x1100, 0xff00, 0xff00),
            Some(0x11ff)
        );
        assert_eq!(
            masked_cas_apply(0x01ff, 0x0000, 0x1100, 0xff00, 0xff00),
            None
        );
    }
}
