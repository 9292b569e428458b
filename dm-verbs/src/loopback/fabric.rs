//! [`LoopbackFabric`]: a cluster of memory servers in this process, and the
//! [`Fabric`] impl that opens a core's [`LoopbackQueues`].

use super::memory::{LbMs, Shared};
use super::words::Words;
use super::{LoopbackConfig, LoopbackQueues};
use crate::ms::{ChunkAllocator, RpcRegistry};
use crate::{Caps, Fabric, FabricKind, MsConfig, RpcHandler};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

/// A loopback cluster. Cheap to clone (an `Arc` inside); `Send + Sync`.
#[derive(Clone)]
pub struct LoopbackFabric {
    s: Arc<Shared>,
}

impl LoopbackFabric {
    /// Builds `cfg.num_ms` memory servers with zeroed regions. Panics if
    /// the allocator refuses a region ([`LoopbackFabric::try_new`] returns
    /// the reason instead).
    pub fn new(cfg: LoopbackConfig) -> Self {
        Self::try_new(cfg).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`LoopbackFabric::new`], or why not: a host or device region (bytes
    /// of `cfg.ms`, per MS) that this process cannot allocate.
    pub fn try_new(cfg: LoopbackConfig) -> Result<Self, String> {
        let region = |bytes: u64, what: &str| {
            Words::try_zeroed(bytes).ok_or_else(|| {
                format!("loopback: cannot allocate a {what} of {bytes} bytes per MS")
            })
        };
        let ms = (0..cfg.num_ms)
            .map(|_| {
                Ok(LbMs {
                    host: region(cfg.ms.region_bytes, "host region")?,
                    dev: region(cfg.ms.device_bytes, "device region")?,
                    alloc: Mutex::new(ChunkAllocator::new(&cfg.ms)),
                    rpc: RwLock::new(RpcRegistry::with_builtins()),
                })
            })
            .collect::<Result<_, String>>()?;
        let t0 = Instant::now();
        Ok(LoopbackFabric {
            s: Arc::new(Shared { cfg, ms, t0 }),
        })
    }

    /// Bytes handed out by MS `ms`'s chunk allocator (superblock included);
    /// 0 for a nonexistent MS.
    pub fn ms_bytes_used(&self, ms: u16) -> u64 {
        let m = self.s.ms.get(ms as usize);
        m.map_or(0, |m| {
            m.alloc.lock().unwrap_or_else(|e| e.into_inner()).used()
        })
    }
}

impl Fabric for LoopbackFabric {
    type Queues = LoopbackQueues;

    fn kind(&self) -> FabricKind {
        FabricKind::Loopback
    }

    fn caps(&self) -> Caps {
        Caps {
            masked_cas: self.s.cfg.masked_cas,
            device_memory_bytes: self.s.cfg.ms.device_bytes,
        }
    }

    fn num_ms(&self) -> u16 {
        self.s.cfg.num_ms
    }

    fn ms_config(&self) -> MsConfig {
        self.s.cfg.ms
    }

    fn open_queues(&self, _cs: u16, _core: u16) -> LoopbackQueues {
        LoopbackQueues {
            s: self.s.clone(),
            cq: Vec::new(),
            cq_head: 0,
            broken: vec![false; self.s.cfg.num_ms as usize],
        }
    }

    fn register_rpc(&self, id: u16, h: RpcHandler) {
        for m in &self.s.ms {
            let mut reg = m.rpc.write().unwrap_or_else(|e| e.into_inner());
            reg.register(id, h.clone());
        }
    }
}
