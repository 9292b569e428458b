//! Remote memory allocation for a CS core (Sherman §4.2): chunks come from the
//! memory servers by RPC ([`dm_verbs::ms::RPC_ALLOC_CHUNK`], default 8 MiB) in
//! round-robin order over the MSs, and are carved locally with no further
//! round trip. An MS that is out of memory is skipped; when every MS is, the
//! allocation fails with [`VerbError::MsOutOfMemory`].
//!
//! One refill at a time: the tasks of a core that find the chunk used up
//! while a refill RPC is in flight yield until it lands and carve the new
//! chunk, rather than each fetching (and all but the last dropping) a chunk
//! of its own; with 8 coroutines per core that race took up to 8 chunks per
//! refill.

use dm_verbs::ms::RPC_ALLOC_CHUNK;
use dm_verbs::{GlobalAddr, VerbError};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Bytes carved by every [`ChunkAlloc`] of this process (padding included).
static CARVED: AtomicU64 = AtomicU64::new(0);

/// Bytes every [`ChunkAlloc`] of this process has handed out so far, padding
/// for alignment included: the MS memory the indexes allocated for nodes,
/// leaves and locks, as opposed to the chunks they hold (whose unused tails
/// are not counted). Process-wide; read it before and after a run. One
/// index's share: [`ChunkAlloc::set_carved_counter`] on each of its carvers.
pub fn bytes_carved() -> u64 {
    CARVED.load(Relaxed)
}

/// Adds `bytes` that an MS-side handler carved in this process to
/// [`bytes_carved`]: the NAM designs' RPC handlers allocate their nodes on
/// the MS (`dm_tree::nam`), in this process on sim and loopback. A
/// `dm-memserver` process (rdma) counts its own, which this process does
/// not see.
pub fn count_carved(bytes: u64) {
    CARVED.fetch_add(bytes, Relaxed);
}

/// Per-core chunk carver. Not shared across cores.
pub struct ChunkAlloc {
    cur: Cell<GlobalAddr>,
    left: Cell<u64>,
    next_ms: Cell<u16>,
    /// A refill RPC is in flight (other tasks of this core wait for it).
    refilling: Cell<bool>,
    num_ms: u16,
    /// The MSs in rotation are `base_ms..base_ms + num_ms`.
    base_ms: u16,
    chunk_bytes: u64,
    /// The index's count of bytes carved, if it keeps one (besides the
    /// process total).
    carved: Option<Arc<AtomicU64>>,
}

impl ChunkAlloc {
    /// Carver over `num_ms` MSs whose chunks are `chunk_bytes` long; the first
    /// chunk is requested from `first_ms` (spread cores over MSs).
    pub fn new(num_ms: u16, chunk_bytes: u64, first_ms: u16) -> Self {
        ChunkAlloc {
            cur: Cell::new(GlobalAddr::NULL),
            left: Cell::new(0),
            next_ms: Cell::new(first_ms % num_ms.max(1)),
            refilling: Cell::new(false),
            num_ms,
            base_ms: 0,
            chunk_bytes,
            carved: None,
        }
    }

    /// Also counts the bytes this carver hands out (padding included) into
    /// `c`: one per index, shared by all its carvers, so the index's memory
    /// is its own ([`bytes_carved`] stays the process total).
    pub fn set_carved_counter(&mut self, c: Arc<AtomicU64>) {
        self.carved = Some(c);
    }

    /// Carver whose chunks all come from MS `ms` (placement that keeps a
    /// sub-tree on one MS, DEX §4); `MsOutOfMemory` once that MS has none left.
    pub fn on_ms(ms: u16, chunk_bytes: u64) -> Self {
        ChunkAlloc {
            base_ms: ms,
            ..ChunkAlloc::new(1, chunk_bytes, 0)
        }
    }

    /// Allocates `size` bytes aligned to `align` (a power of two, at most 4096).
    /// Errors: `OutOfBounds` if `size` exceeds a chunk, `MsOutOfMemory` when no
    /// MS has a chunk left, or any verb error of the RPC.
    pub async fn alloc(&self, size: u64, align: u64) -> Result<GlobalAddr, VerbError> {
        if size > self.chunk_bytes || !align.is_power_of_two() {
            return Err(VerbError::OutOfBounds {
                addr: GlobalAddr::NULL,
                len: size,
            });
        }
        loop {
            let cur = self.cur.get();
            if !cur.is_null() {
                let pad = (align - cur.local_offset() % align) % align;
                if pad + size <= self.left.get() {
                    let a = cur.add(pad);
                    self.cur.set(a.add(size));
                    self.left.set(self.left.get() - pad - size);
                    CARVED.fetch_add(pad + size, Relaxed);
                    if let Some(c) = &self.carved {
                        c.fetch_add(pad + size, Relaxed);
                    }
                    return Ok(a);
                }
            }
            if self.refilling.get() {
                crate::sync::yield_now().await;
                continue;
            }
            // Reset on drop too, so a cancelled refill does not stall the core.
            struct Refilling<'a>(&'a Cell<bool>);
            impl Drop for Refilling<'_> {
                fn drop(&mut self) {
                    self.0.set(false);
                }
            }
            self.refilling.set(true);
            let _guard = Refilling(&self.refilling);
            self.refill().await?;
        }
    }

    async fn refill(&self) -> Result<(), VerbError> {
        let mut last = VerbError::MsOutOfMemory { ms: 0 };
        for _ in 0..self.num_ms {
            let next = self.next_ms.get();
            self.next_ms.set((next + 1) % self.num_ms);
            let ms = self.base_ms + next;
            match crate::verbs::rpc(ms, RPC_ALLOC_CHUNK, Vec::new()).await {
                Ok(r) if r.len() == 8 => {
                    let a = GlobalAddr::from_u64(u64::from_le_bytes(r[..].try_into().unwrap()));
                    // The reply's buffer back to this thread's pool: the
                    // handler takes its reply from it (issue 32 item 2).
                    dm_verbs::buf::give(r);
                    self.cur.set(a);
                    self.left.set(self.chunk_bytes);
                    return Ok(());
                }
                Ok(_) => {
                    return Err(VerbError::RpcFailed {
                        ms,
                        handler: RPC_ALLOC_CHUNK,
                        reason: "bad reply".into(),
                    })
                }
                Err(e @ VerbError::MsOutOfMemory { .. }) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
}
