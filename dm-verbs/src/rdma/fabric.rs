//! [`RdmaFabric`]: the cluster over real verbs. Connecting probes every
//! memory server for its region; opening a core's queues creates its CQ,
//! staging MR and one RC QP per MS, each connected by a TCP handshake with
//! its receive slots for RPC replies pre-posted.

use super::ffi::{Cq, Device, Endpoint, Local, MemRegion, Qp, QpCaps};
use super::handshake::{handshake, random_psn};
use super::stage::Stage;
use super::state::{recv_wr_id, QpState, RdmaQueues};
use super::wire::{Hello, Welcome};
use super::{RdmaConfig, RdmaError};
use crate::{Caps, Clock, Fabric, FabricKind, MsConfig, RpcHandler};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

struct MsInfo {
    addr: SocketAddr,
    w: Welcome,
}

struct Shared {
    cfg: RdmaConfig,
    dev: Arc<Device>,
    ms: Vec<MsInfo>,
    t0: Instant,
    warned_rpc: AtomicBool,
}

/// The cluster over real verbs. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct RdmaFabric {
    s: Arc<Shared>,
}

impl RdmaFabric {
    /// Opens the device and asks every memory server for its region (a probe
    /// handshake, no QP). Errors: no device/port/GID, an unreachable or
    /// mismatched memory server.
    pub fn connect(cfg: RdmaConfig, ms: &[SocketAddr]) -> Result<Self, RdmaError> {
        if ms.is_empty() || ms.len() > 0xfffe {
            return Err(RdmaError("need 1..=65534 memory servers".into()));
        }
        let dev = Device::open(cfg.device.as_deref(), cfg.port, cfg.gid_index)?;
        let mut infos = Vec::new();
        for (i, &addr) in ms.iter().enumerate() {
            let hello = Hello {
                ms_id: i as u16,
                create_qp: false,
                qpn: 0,
                psn: 0,
                lid: dev.lid,
                gid: dev.gid,
            };
            let (_, w) = handshake(addr, &hello, cfg.connect_timeout)?;
            infos.push(MsInfo { addr, w });
        }
        tracing::info!(device = %dev.name, gid_index = dev.gid_index, ms = ms.len(), "rdma fabric up");
        Ok(RdmaFabric {
            s: Arc::new(Shared {
                cfg,
                dev,
                ms: infos,
                t0: Instant::now(),
                warned_rpc: AtomicBool::new(false),
            }),
        })
    }

    /// Name of the opened device.
    pub fn device_name(&self) -> &str {
        &self.s.dev.name
    }

    /// Device memory every memory server offers, bytes: the smallest size
    /// their welcomes report (0 if any has none).
    pub fn device_bytes(&self) -> u64 {
        self.s
            .ms
            .iter()
            .map(|m| m.w.device_bytes)
            .min()
            .unwrap_or(0)
    }

    /// Opens one core's CQ, staging MR and QPs (one TCP handshake per MS).
    pub fn try_open_queues(&self, cs: u16, core: u16) -> Result<RdmaQueues, RdmaError> {
        let cfg = &self.s.cfg;
        let dev = &self.s.dev;
        let slots: Vec<u32> = self
            .s
            .ms
            .iter()
            .map(|m| m.w.rpc_slots.clamp(1, 256))
            .collect();
        let msg: Vec<u64> = self.s.ms.iter().map(|m| m.w.msg_bytes as u64).collect();
        let reserved: u64 = slots.iter().zip(&msg).map(|(&s, &m)| s as u64 * m).sum();
        let sq = cfg.max_send_wr.clamp(2, dev.max_qp_wr.max(2));
        let cqe = self.s.ms.len() as u32 * (sq + 256) + 64;
        let cq = Cq::new(dev, cqe)?;
        let staging = MemRegion::new(dev, reserved + cfg.staging_bytes)?;
        let mut qps = Vec::new();
        let mut off = 0;
        for (i, m) in self.s.ms.iter().enumerate() {
            let ms = i as u16;
            let mut qp = Qp::new_rc(
                &cq,
                vec![staging.clone()],
                QpCaps {
                    max_send_wr: sq,
                    max_recv_wr: slots[i],
                    max_inline: cfg.max_inline,
                },
            )?;
            let psn = random_psn();
            let ep = qp.endpoint(psn);
            let hello = Hello {
                ms_id: ms,
                create_qp: true,
                qpn: ep.qpn,
                psn,
                lid: ep.lid,
                gid: ep.gid,
            };
            let (tcp, w) = handshake(m.addr, &hello, cfg.connect_timeout)?;
            let remote = Endpoint {
                qpn: w.qpn,
                psn: w.psn,
                lid: w.lid,
                gid: w.gid,
            };
            qp.connect(psn, &remote, cfg.rd_atomic, cfg.timers)?;
            let recv: Vec<u64> = (0..slots[i] as u64).map(|k| off + k * msg[i]).collect();
            off += slots[i] as u64 * msg[i];
            for (k, &o) in recv.iter().enumerate() {
                let l = Local {
                    mr: &staging,
                    off: o,
                    len: msg[i] as u32,
                };
                qp.post_recv(recv_wr_id(ms, k), l)?;
            }
            tcp.set_nonblocking(true)
                .map_err(|e| RdmaError(format!("{}: {e}", m.addr)))?;
            tracing::debug!(
                cs,
                core,
                ms,
                qpn = ep.qpn,
                remote_qpn = w.qpn,
                "QP connected"
            );
            qps.push(QpState {
                ms,
                max_inline: qp.max_inline(),
                qp: Some(qp),
                tcp: Some(tcp),
                credits: slots[i].min(w.rpc_slots) as usize,
                msg_bytes: msg[i],
                w,
                sq: sq as usize,
                next_seq: 0,
                outstanding: VecDeque::new(),
                backlog: VecDeque::new(),
                rpcs: Vec::new(),
                recv,
            });
        }
        Ok(RdmaQueues {
            stage: Stage::new(reserved, staging.len()),
            qps,
            staging: Some(staging),
            cq: Some(cq),
            wcs: Vec::new(),
            ready: VecDeque::new(),
            blocked: None,
            idle: 0,
            clock: Clock::Wall(self.s.t0),
        })
    }
}

impl Fabric for RdmaFabric {
    type Queues = RdmaQueues;

    fn kind(&self) -> FabricKind {
        FabricKind::Rdma
    }

    fn caps(&self) -> Caps {
        Caps {
            masked_cas: false,
            device_memory_bytes: self.device_bytes(),
        }
    }

    fn num_ms(&self) -> u16 {
        self.s.ms.len() as u16
    }

    /// MS 0's region and chunk size (as its `dm-memserver` reported them),
    /// the device memory every MS offers, one RPC core.
    fn ms_config(&self) -> MsConfig {
        let w = &self.s.ms[0].w;
        MsConfig {
            region_bytes: w.region_bytes,
            chunk_bytes: w.chunk_bytes,
            device_bytes: self.device_bytes(),
            cores: 1,
        }
    }

    /// Opens the queues; if that fails the error is logged and every QP of the
    /// returned queues is broken (each WR completes with `QpError`). Use
    /// [`RdmaFabric::try_open_queues`] to get the error itself.
    fn open_queues(&self, cs: u16, core: u16) -> RdmaQueues {
        match self.try_open_queues(cs, core) {
            Ok(q) => q,
            Err(e) => {
                tracing::error!(cs, core, error = %e, "opening RDMA queues failed; all QPs broken");
                RdmaQueues::broken(self.num_ms(), Clock::Wall(self.s.t0))
            }
        }
    }

    /// Handlers run inside the `dm-memserver` processes and are compiled into
    /// them; a closure cannot be shipped to another process, so this only logs
    /// (once). The built-in chunk allocator (id 0) is always there.
    fn register_rpc(&self, id: u16, _h: RpcHandler) {
        if !self.s.warned_rpc.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                id,
                "register_rpc on rdma: handlers must be built into dm-memserver"
            );
        }
    }
}
