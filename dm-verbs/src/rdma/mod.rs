//! `rdma`: real RDMA verbs through rdma-core (cargo feature `rdma`).
//!
//! A compute-server process builds an [`RdmaFabric`] from the TCP addresses of
//! `dm-memserver` processes (MS id = position in the list). Each core then
//! opens its [`RdmaQueues`]: one CQ, one registered staging MR, and one RC QP
//! per memory server, each QP connected by a TCP handshake ([`wire`]) that
//! exchanges QP number, PSN, LID, GID and the server's region address, rkey,
//! length and chunk size. The TCP connection stays open for the QP's lifetime:
//! the memory server frees the QP when it closes, and a client notices a dead
//! memory server by its EOF.
//!
//! ## Data path
//! - **One doorbell per post list.** [`Queues::post_list`] turns its WRs into one
//!   chained `ibv_send_wr` list and calls `ibv_post_send` once. Only the last WR
//!   of the list is signalled: RC completes a send queue in order, so the
//!   completion of WR `n` means every earlier WR of that QP completed, and the
//!   backend synthesizes their completions (each posted WR's native `wr_id` is a
//!   per-QP sequence number; a completion with sequence `s` retires every
//!   outstanding WR up to `s`).
//! - **Buffers.** READ results and atomic old values land in a per-core staging
//!   MR (power-of-two size classes, 64 B up; default 32 MiB) and are copied out
//!   on completion. WRITEs of at most `max_inline_data` bytes (asked: 128) are
//!   posted inline; larger ones are copied into staging first. A WR that cannot
//!   get a buffer, SQ slot or RPC credit now waits in a per-QP backlog (order
//!   kept) until completions free them; one longer than the staging MR fails
//!   with `OutOfBounds`.
//! - **RPCs** are SEND/RECV: request `[wr_id, handler id, payload]`, reply
//!   `[wr_id, status, body]` by SEND from the memory server into one of the
//!   QP's pre-posted receive slots. A client has at most as many RPCs in
//!   flight per QP as the server has receive slots (credits), so no SEND ever
//!   meets an empty receive queue.
//! - **Local checks first.** Bounds (against the region length the server
//!   reported), alignment of atomics and masked CAS (unsupported: rxe has no
//!   masked atomics and ConnectX's need vendor verbs) are rejected with their
//!   typed error before anything is posted, as on `loopback`.
//!
//! ## Errors
//! A WR that completes in error retires the WRs before it normally, fails
//! itself with [`VerbError::OutOfBounds`] (remote access error: wrong rkey or
//! address) or [`VerbError::QpError`] (anything else: retry exceeded, flush,
//! ...), and breaks the QP: the QP is destroyed at once (so no DMA can reach a
//! freed buffer), every other outstanding WR, waiting RPC and backlogged WR
//! fails with `QpError`, and every later `post_list` to that MS completes at
//! once with `QpError`. Nothing is retried. A memory server whose TCP
//! connection closes (process killed) breaks the QP the same way, which also
//! covers RPCs whose SEND was acknowledged but whose reply will never come.
//!
//! ## Capabilities
//! `masked_cas: false` (ConnectX's masked atomics are vendor verbs, not
//! wired). `device_memory_bytes`: the smallest device-memory size the memory
//! servers offer (0 if any offers none). A `dm-memserver` allocates its
//! `--device-kib` with `ibv_alloc_dm` when the NIC has that much on-chip
//! memory (`max_dm_size`; ConnectX-5 and later) and registers it zero-based;
//! its welcome carries the size and the MR's rkey, and a device address
//! ([`GlobalAddr::device`]) goes out as that offset under that rkey. rxe has
//! none: the capability is absent, so indexes keep their locks in host
//! memory (`LockTableConfig::for_caps`). Device memory is reached by
//! one-sided verbs only (RPC handlers on the MS see host memory).
//!
//! ## Unsafe code
//! All of it is in [`ffi`], with its safety argument in that module's docs.

pub mod ffi;
pub mod server;
pub mod wire;

use crate::loopback::{read_words, write_words};
use crate::ms::check_bounds;
use crate::{
    Capability, Caps, Clock, Completion, CpuCost, Fabric, FabricKind, GlobalAddr, MsConfig, Queues,
    RpcHandler, Verb, VerbError, VerbOutput, WorkRequest,
};
use ffi::{Cq, Device, Endpoint, Local, MemRegion, Qp, QpCaps, RcTimers, SendOp, SendWr, Src, Wc};
use std::collections::VecDeque;
use std::fmt;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wire::{Hello, Welcome};

/// A setup failure of the `rdma` backend (device, handshake, address list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdmaError(pub String);

impl fmt::Display for RdmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RdmaError {}

impl From<ffi::FfiError> for RdmaError {
    fn from(e: ffi::FfiError) -> Self {
        RdmaError(e.0)
    }
}

/// Device selection and QP parameters (both sides).
#[derive(Clone, Debug)]
pub struct RdmaConfig {
    /// Device name (`rxe0`, `mlx5_0`); `None` = the first device.
    pub device: Option<String>,
    /// Port number (1-based).
    pub port: u8,
    /// GID table index: 1 on soft-RoCE over `lo` (`::ffff:127.0.0.1`, RoCE v2);
    /// on ConnectX RoCE pick the RoCE v2 IPv4 entry (`show_gids`).
    pub gid_index: u8,
    /// Send-queue depth per QP (WRs outstanding at once).
    pub max_send_wr: u32,
    /// `max_rd_atomic`/`max_dest_rd_atomic`: READ/atomic WRs in flight per QP
    /// (capped by the device).
    pub rd_atomic: u8,
    /// Inline WRITE threshold asked of the QP, bytes.
    pub max_inline: u32,
    /// Per-core staging MR for READ/atomic results and large WRITEs, bytes.
    pub staging_bytes: u64,
    pub timers: RcTimers,
    /// TCP connect and handshake timeout.
    pub connect_timeout: Duration,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            device: None,
            port: 1,
            gid_index: 1,
            max_send_wr: 512,
            rd_atomic: 16,
            max_inline: 128,
            staging_bytes: 32 << 20,
            // 4.096 us * 2^18 = 1.07 s per try, 7 retries: a peer that stops
            // answering errors in ~8.6 s (a dead memory server is noticed
            // sooner, by its TCP connection). Shorter timers retransmit
            // spuriously when a completion is merely late: 2^14 (67 ms) gave
            // ~20 retransmissions per two-client ycsb run on soft-RoCE in the
            // test guest (`rdma statistic`: completer_retry_err), and a guest
            // stalled past 7 of them fails the QP mid-run.
            timers: RcTimers {
                timeout: 18,
                retry_cnt: 7,
                rnr_retry: 7,
                min_rnr_timer: 12,
            },
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// Parses `HOST:PORT[,HOST:PORT..]` (MS id = position). Errors name the bad entry.
pub fn parse_ms_list(s: &str) -> Result<Vec<SocketAddr>, RdmaError> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let p = part.trim();
        let a = p
            .to_socket_addrs()
            .map_err(|e| RdmaError(format!("memory server address {p:?}: {e}")))?
            .next()
            .ok_or_else(|| RdmaError(format!("memory server address {p:?} resolves to nothing")))?;
        out.push(a);
    }
    if out.is_empty() || out.len() > u16::MAX as usize {
        return Err(RdmaError(format!("bad memory server list {s:?}")));
    }
    Ok(out)
}

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

/// Opens a TCP connection to `addr` and exchanges `hello` for a welcome.
fn handshake(
    addr: SocketAddr,
    hello: &Hello,
    timeout: Duration,
) -> Result<(TcpStream, Welcome), RdmaError> {
    let err = |what: &str, e: std::io::Error| {
        RdmaError(format!(
            "memory server {addr} (MS {}): {what}: {e}",
            hello.ms_id
        ))
    };
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| err("connect", e))?;
    s.set_nodelay(true).map_err(|e| err("nodelay", e))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| err("timeout", e))?;
    s.write_all(&hello.encode()).map_err(|e| err("send", e))?;
    let mut b = [0u8; wire::WELCOME_BYTES];
    s.read_exact(&mut b).map_err(|e| err("handshake", e))?;
    let w = Welcome::decode(&b).map_err(|e| RdmaError(format!("memory server {addr}: {e}")))?;
    if w.ms_id != hello.ms_id {
        return Err(RdmaError(format!(
            "memory server {addr} is MS {}, but it is listed as MS {}",
            w.ms_id, hello.ms_id
        )));
    }
    Ok((s, w))
}

fn random_psn() -> u32 {
    rand::random::<u32>() & 0xff_ffff
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

/// Written into an atomic's result buffer before posting: a completion that
/// leaves it there had its old value never delivered (a warning), and the
/// caller sees this marker rather than a stale value (such as 0, which a lock
/// CAS would take for success). See docs/rdma.md.
const UNWRITTEN: u64 = 0xa5c3_5a3c_0bad_f00d;

/// Native `wr_id` bit of receive WRs (send WRs carry a per-QP sequence number).
const RECV_BIT: u64 = 1 << 63;

fn recv_wr_id(ms: u16, slot: usize) -> u64 {
    RECV_BIT | ((ms as u64) << 16) | slot as u64
}

/// Staging buffers: power-of-two classes from 64 B, carved by a bump pointer,
/// recycled through per-class free lists; reset when nothing is in use.
struct Stage {
    base: u64,
    end: u64,
    bump: u64,
    free: Vec<Vec<u64>>,
    in_use: usize,
}

impl Stage {
    fn new(base: u64, end: u64) -> Self {
        Stage {
            base,
            end,
            bump: base,
            free: vec![Vec::new(); 48],
            in_use: 0,
        }
    }

    fn class(len: u64) -> usize {
        (len.max(64).next_power_of_two().trailing_zeros() - 6) as usize
    }

    /// True if a buffer of `len` bytes can ever be had.
    fn fits(&self, len: u64) -> bool {
        len.max(64).next_power_of_two() <= self.end - self.base
    }

    fn alloc(&mut self, len: u64) -> Option<(u64, usize)> {
        let k = Self::class(len);
        let size = 64u64 << k;
        let off = match self.free[k].pop() {
            Some(o) => o,
            None => {
                if self.in_use == 0 {
                    self.bump = self.base;
                    self.free.iter_mut().for_each(Vec::clear);
                }
                let o = self.bump.next_multiple_of(size.min(4096));
                if o + size > self.end {
                    return None;
                }
                self.bump = o + size;
                o
            }
        };
        self.in_use += 1;
        Some((off, k))
    }

    fn release(&mut self, (off, k): (u64, usize)) {
        self.free[k].push(off);
        self.in_use -= 1;
    }
}

#[derive(Clone, Copy, Debug)]
enum OutKind {
    Read,
    Write,
    Atomic,
    RpcSend,
}

/// A posted send WR not yet retired.
struct Outstanding {
    seq: u64,
    wr_id: u64,
    kind: OutKind,
    addr: GlobalAddr,
    len: u64,
    buf: Option<(u64, usize)>,
}

struct QpState {
    ms: u16,
    qp: Option<Qp>,
    tcp: Option<TcpStream>,
    w: Welcome,
    max_inline: u32,
    credits: usize,
    msg_bytes: u64,
    sq: usize,
    next_seq: u64,
    outstanding: VecDeque<Outstanding>,
    backlog: VecDeque<WorkRequest>,
    /// RPCs whose reply has not arrived: (wr_id, handler).
    rpcs: Vec<(u64, u16)>,
    /// Offsets of this QP's receive slots in the staging MR.
    recv: Vec<u64>,
}

impl QpState {
    fn broken(&self) -> bool {
        self.qp.is_none()
    }
}

/// One core's QPs (one per MS), CQ and staging MR. `Send`, not shared.
pub struct RdmaQueues {
    // Drop order: QPs (which hold the CQ and staging MR) first.
    qps: Vec<QpState>,
    staging: Option<Arc<MemRegion>>,
    cq: Option<Arc<Cq>>,
    stage: Stage,
    wcs: Vec<Wc>,
    ready: VecDeque<Completion>,
    /// The MS whose backlog waits for staging space; others do not allocate
    /// meanwhile, so in-use buffers drain and the waiter gets its turn.
    blocked: Option<u16>,
    idle: u32,
    clock: Clock,
}

/// What a WR becomes when it is taken off the backlog.
enum Plan {
    Done(Result<VerbOutput, VerbError>),
    Post(Outstanding),
    Wait,
}

impl RdmaQueues {
    fn broken(num_ms: u16, clock: Clock) -> RdmaQueues {
        let qps = (0..num_ms)
            .map(|ms| QpState {
                ms,
                qp: None,
                tcp: None,
                w: Welcome {
                    ms_id: ms,
                    qpn: 0,
                    psn: 0,
                    lid: 0,
                    gid: [0; 16],
                    region_addr: 0,
                    rkey: 0,
                    region_bytes: 0,
                    chunk_bytes: 0,
                    device_bytes: 0,
                    rpc_slots: 0,
                    msg_bytes: 0,
                    dm_rkey: 0,
                },
                max_inline: 0,
                credits: 0,
                msg_bytes: 0,
                sq: 0,
                next_seq: 0,
                outstanding: VecDeque::new(),
                backlog: VecDeque::new(),
                rpcs: Vec::new(),
                recv: Vec::new(),
            })
            .collect();
        RdmaQueues {
            qps,
            staging: None,
            cq: None,
            stage: Stage::new(0, 0),
            wcs: Vec::new(),
            ready: VecDeque::new(),
            blocked: None,
            idle: 0,
            clock,
        }
    }
}

/// A WRITE/SEND source: the staging buffer if one was taken, else inline.
fn src_of<'a>(buf: Option<(u64, usize)>, staging: &'a Arc<MemRegion>, bytes: &'a [u8]) -> Src<'a> {
    match buf {
        Some((off, _)) => Src::Buf(Local {
            mr: staging,
            off,
            len: bytes.len() as u32,
        }),
        None => Src::Inline(bytes),
    }
}

/// The address and length a verb names (for errors before posting).
fn verb_target(v: &Verb) -> (GlobalAddr, u64) {
    match v {
        Verb::Read { addr, len } => (*addr, *len as u64),
        Verb::Write { addr, data } => (*addr, data.len() as u64),
        Verb::Cas { addr, .. } | Verb::Faa { addr, .. } | Verb::MaskedCas { addr, .. } => {
            (*addr, 8)
        }
        Verb::Rpc { ms, .. } => (GlobalAddr::new(*ms, 0), 0),
    }
}

impl RdmaQueues {
    /// Fault injection: WRs to MS `ms` name `rkey` instead of the region's
    /// (a wrong rkey makes the next one-sided WR fail with a remote access
    /// error, which breaks the QP).
    pub fn set_rkey(&mut self, ms: u16, rkey: u32) {
        if let Some(q) = self.qps.get_mut(ms as usize) {
            q.w.rkey = rkey;
        }
    }

    /// True if the QP to `ms` is broken (every WR to it fails with `QpError`).
    pub fn qp_broken(&self, ms: u16) -> bool {
        self.qps.get(ms as usize).is_none_or(QpState::broken)
    }

    /// Decides what to do with `wr` on QP `i` now; `planned` WRs (of which
    /// `rpcs_planned` RPCs) are already taken for this post list.
    fn plan(&mut self, i: usize, wr: &WorkRequest, planned: usize, rpcs_planned: usize) -> Plan {
        let num_ms = self.qps.len() as u16;
        let q = &self.qps[i];
        let ms = q.ms;
        if q.outstanding.len() + planned >= q.sq {
            return Plan::Wait;
        }
        let bounds = |addr: GlobalAddr, len: u64| {
            check_bounds(addr, len, num_ms, q.w.region_bytes, q.w.device_bytes)
        };
        let (kind, addr, len, buf_len) = match &wr.verb {
            Verb::Read { addr, len } => {
                if let Err(e) = bounds(*addr, *len as u64) {
                    return Plan::Done(Err(e));
                }
                if *len == 0 {
                    return Plan::Done(Ok(VerbOutput::Read(Vec::new())));
                }
                (OutKind::Read, *addr, *len as u64, *len as u64)
            }
            Verb::Write { addr, data } => {
                let n = data.len() as u64;
                if let Err(e) = bounds(*addr, n) {
                    return Plan::Done(Err(e));
                }
                if n == 0 {
                    return Plan::Done(Ok(VerbOutput::Write));
                }
                let b = if n <= q.max_inline as u64 { 0 } else { n };
                (OutKind::Write, *addr, n, b)
            }
            Verb::Cas { addr, .. } | Verb::Faa { addr, .. } => {
                if !addr.local_offset().is_multiple_of(8) {
                    return Plan::Done(Err(VerbError::Misaligned { addr: *addr }));
                }
                if let Err(e) = bounds(*addr, 8) {
                    return Plan::Done(Err(e));
                }
                (OutKind::Atomic, *addr, 8, 8)
            }
            Verb::MaskedCas { .. } => {
                return Plan::Done(Err(VerbError::Unsupported(Capability::MaskedCas)))
            }
            Verb::Rpc {
                handler, payload, ..
            } => {
                let n = (wire::REQ_HEADER + payload.len()) as u64;
                if n > q.msg_bytes {
                    return Plan::Done(Err(VerbError::RpcFailed {
                        ms,
                        handler: *handler,
                        reason: format!(
                            "request of {n} bytes exceeds the {}-byte RPC message",
                            q.msg_bytes
                        ),
                    }));
                }
                if q.rpcs.len() + rpcs_planned >= q.credits {
                    return Plan::Wait;
                }
                let b = if n <= q.max_inline as u64 { 0 } else { n };
                (OutKind::RpcSend, GlobalAddr::new(ms, 0), n, b)
            }
        };
        let buf = if buf_len > 0 {
            if !self.stage.fits(buf_len) {
                return Plan::Done(Err(VerbError::OutOfBounds { addr, len }));
            }
            if self.blocked.is_some_and(|b| b != ms) {
                return Plan::Wait;
            }
            match self.stage.alloc(buf_len) {
                Some(b) => {
                    self.blocked = None;
                    Some(b)
                }
                None => {
                    self.blocked = Some(ms);
                    return Plan::Wait;
                }
            }
        } else {
            None
        };
        Plan::Post(Outstanding {
            seq: 0,
            wr_id: wr.wr_id,
            kind,
            addr,
            len,
            buf,
        })
    }

    /// Posts as much of QP `i`'s backlog as resources allow: one post list.
    fn pump(&mut self, i: usize) {
        if self.qps[i].broken() {
            let ms = self.qps[i].ms;
            for wr in self.qps[i].backlog.drain(..) {
                self.ready.push_back(Completion {
                    wr_id: wr.wr_id,
                    result: Err(VerbError::QpError { ms }),
                });
            }
            return;
        }
        let mut taken: Vec<(WorkRequest, Outstanding)> = Vec::new();
        let mut rpcs_planned = 0;
        while let Some(wr) = self.qps[i].backlog.pop_front() {
            match self.plan(i, &wr, taken.len(), rpcs_planned) {
                Plan::Done(result) => self.ready.push_back(Completion {
                    wr_id: wr.wr_id,
                    result,
                }),
                Plan::Wait => {
                    self.qps[i].backlog.push_front(wr);
                    break;
                }
                Plan::Post(o) => {
                    rpcs_planned += matches!(o.kind, OutKind::RpcSend) as usize;
                    taken.push((wr, o));
                }
            }
        }
        if taken.is_empty() {
            return;
        }
        let (Some(staging), q) = (self.staging.as_ref(), &mut self.qps[i]) else {
            return;
        };
        let bodies: Vec<Option<Vec<u8>>> = taken
            .iter()
            .map(|(wr, _)| match &wr.verb {
                Verb::Rpc {
                    handler, payload, ..
                } => Some(wire::encode_request(wr.wr_id, *handler, payload)),
                _ => None,
            })
            .collect();
        for ((wr, o), body) in taken.iter_mut().zip(&bodies) {
            o.seq = q.next_seq;
            q.next_seq += 1;
            if let Some((off, _)) = o.buf {
                match (&wr.verb, body) {
                    (Verb::Write { data, .. }, _) => write_words(staging.words(), off, data),
                    (_, Some(m)) => write_words(staging.words(), off, m),
                    (Verb::Cas { .. } | Verb::Faa { .. }, _) => {
                        write_words(staging.words(), off, &UNWRITTEN.to_le_bytes())
                    }
                    _ => {}
                }
            }
        }
        let n = taken.len();
        let (region, rkey, dm_rkey) = (q.w.region_addr, q.w.rkey, q.w.dm_rkey);
        let wrs: Vec<SendWr<'_>> = taken
            .iter()
            .zip(&bodies)
            .enumerate()
            .map(|(j, ((wr, o), body))| {
                // Device memory is registered zero-based (module docs).
                let (remote, rkey) = if o.addr.is_device() {
                    (o.addr.local_offset(), dm_rkey)
                } else {
                    (region + o.addr.local_offset(), rkey)
                };
                let off = o.buf.map_or(0, |b| b.0);
                let local = |len: u32| Local {
                    mr: staging,
                    off,
                    len,
                };
                let src = |bytes| src_of(o.buf, staging, bytes);
                let op = match &wr.verb {
                    Verb::Read { len, .. } => SendOp::Read {
                        dst: local(*len),
                        remote,
                        rkey,
                    },
                    Verb::Write { data, .. } => SendOp::Write {
                        src: src(data),
                        remote,
                        rkey,
                    },
                    Verb::Cas { expect, swap, .. } => SendOp::Cas {
                        dst: local(8),
                        remote,
                        rkey,
                        expect: *expect,
                        swap: *swap,
                    },
                    Verb::Faa { add, .. } => SendOp::Faa {
                        dst: local(8),
                        remote,
                        rkey,
                        add: *add,
                    },
                    Verb::Rpc { .. } | Verb::MaskedCas { .. } => SendOp::Send {
                        src: src(body.as_deref().unwrap_or_default()),
                    },
                };
                SendWr {
                    wr_id: o.seq,
                    signaled: j + 1 == n,
                    op,
                }
            })
            .collect();
        let r = match q.qp.as_mut() {
            Some(qp) => qp.post_send(&wrs),
            None => Err(ffi::FfiError("QP gone".into())),
        };
        drop(wrs);
        for (wr, o) in taken {
            if let Verb::Rpc { handler, .. } = wr.verb {
                q.rpcs.push((wr.wr_id, handler));
            }
            q.outstanding.push_back(o);
        }
        if let Err(e) = r {
            tracing::warn!(ms = q.ms, error = %e, "post list refused; QP broken");
            self.fail_qp(i, None);
        }
    }

    /// The output of a WR that completed successfully; frees its buffer.
    /// `None` for an RPC's SEND (the RPC completes with its reply).
    fn retire_ok(&mut self, o: &Outstanding) -> Option<Result<VerbOutput, VerbError>> {
        let words = self.staging.as_ref().map_or(&[][..], |m| m.words());
        let r = match (o.kind, o.buf) {
            (OutKind::Read, Some((off, _))) => {
                Some(Ok(VerbOutput::Read(read_words(words, off, o.len as usize))))
            }
            (OutKind::Atomic, Some((off, _))) => {
                let v = u64::from_le_bytes(read_words(words, off, 8).try_into().unwrap());
                if v == UNWRITTEN {
                    tracing::warn!(
                        ms = o.addr.ms(),
                        addr = ?o.addr,
                        "atomic completed without its old value in the buffer \
                         (or the word really held the marker {UNWRITTEN:#x})"
                    );
                }
                Some(Ok(VerbOutput::Atomic(v)))
            }
            (OutKind::Write, _) => Some(Ok(VerbOutput::Write)),
            _ => None,
        };
        if let Some(b) = o.buf {
            self.stage.release(b);
        }
        r
    }

    /// Breaks QP `i`: destroys it, retires the WRs before `failing` (sequence,
    /// `ibv_wc_status`), fails that one with its mapped error and everything
    /// else outstanding, waiting or backlogged with `QpError`.
    fn fail_qp(&mut self, i: usize, failing: Option<(u64, u32)>) {
        let q = &mut self.qps[i];
        let ms = q.ms;
        // After ibv_destroy_qp no WR of this QP touches the staging MR any more,
        // so its buffers can be reused below.
        q.qp = None;
        q.tcp = None;
        if self.blocked == Some(ms) {
            self.blocked = None;
        }
        let outs: Vec<Outstanding> = q.outstanding.drain(..).collect();
        let rpcs: Vec<(u64, u16)> = q.rpcs.drain(..).collect();
        let backlog: Vec<WorkRequest> = q.backlog.drain(..).collect();
        let qp_err = || Err(VerbError::QpError { ms });
        for o in &outs {
            let r = match failing {
                Some((s, _)) if o.seq < s => self.retire_ok(o),
                Some((s, st)) if o.seq == s => {
                    if let Some(b) = o.buf {
                        self.stage.release(b);
                    }
                    match o.kind {
                        OutKind::RpcSend => None,
                        _ if ffi::is_remote_access_error(st) => Some(Err(VerbError::OutOfBounds {
                            addr: o.addr,
                            len: o.len,
                        })),
                        _ => Some(qp_err()),
                    }
                }
                _ => {
                    if let Some(b) = o.buf {
                        self.stage.release(b);
                    }
                    (!matches!(o.kind, OutKind::RpcSend)).then(qp_err)
                }
            };
            if let Some(result) = r {
                self.ready.push_back(Completion {
                    wr_id: o.wr_id,
                    result,
                });
            }
        }
        for (wr_id, _) in rpcs {
            self.ready.push_back(Completion {
                wr_id,
                result: qp_err(),
            });
        }
        for wr in backlog {
            self.ready.push_back(Completion {
                wr_id: wr.wr_id,
                result: qp_err(),
            });
        }
    }

    fn on_wc(&mut self, wc: Wc) {
        if wc.wr_id & RECV_BIT != 0 {
            let i = ((wc.wr_id >> 16) & 0xffff) as usize;
            let slot = (wc.wr_id & 0xffff) as usize;
            let Some(q) = self.qps.get(i) else { return };
            if q.broken() {
                return;
            }
            if let Some((st, vendor)) = wc.error {
                tracing::warn!(
                    ms = q.ms,
                    status = ffi::wc_status_name(st),
                    vendor,
                    "RECV failed; QP broken"
                );
                self.fail_qp(i, None);
                return;
            }
            let (Some(staging), q) = (self.staging.as_ref(), &mut self.qps[i]) else {
                return;
            };
            let off = q.recv[slot];
            let msg = read_words(
                staging.words(),
                off,
                (wc.byte_len as u64).min(q.msg_bytes) as usize,
            );
            let l = Local {
                mr: staging,
                off,
                len: q.msg_bytes as u32,
            };
            let repost = q.qp.as_mut().map(|qp| qp.post_recv(wc.wr_id, l));
            match wire::decode_reply(&msg) {
                Some((tag, st, body)) => match q.rpcs.iter().position(|r| r.0 == tag) {
                    Some(p) => {
                        let (_, handler) = q.rpcs.swap_remove(p);
                        let result = if st == 0 {
                            Ok(VerbOutput::Rpc(body.to_vec()))
                        } else {
                            Err(wire::decode_error(body, q.ms, handler))
                        };
                        self.ready.push_back(Completion { wr_id: tag, result });
                    }
                    None => tracing::warn!(ms = q.ms, tag, "RPC reply for no pending RPC"),
                },
                None => tracing::warn!(ms = q.ms, len = msg.len(), "malformed RPC reply"),
            }
            if let Some(Err(e)) = repost {
                tracing::warn!(ms = self.qps[i].ms, error = %e, "re-posting a RECV failed; QP broken");
                self.fail_qp(i, None);
            }
            return;
        }
        // A send-queue completion: find its QP (a destroyed QP's stragglers match none).
        let Some(i) = self
            .qps
            .iter()
            .position(|q| q.qp.as_ref().is_some_and(|qp| qp.qpn() == wc.qp_num))
        else {
            return;
        };
        if let Some((st, vendor)) = wc.error {
            tracing::warn!(
                ms = self.qps[i].ms,
                status = ffi::wc_status_name(st),
                vendor,
                "WR completed in error; QP broken"
            );
            self.fail_qp(i, Some((wc.wr_id, st)));
            return;
        }
        while self.qps[i]
            .outstanding
            .front()
            .is_some_and(|o| o.seq <= wc.wr_id)
        {
            let o = self.qps[i].outstanding.pop_front().unwrap();
            if let Some(result) = self.retire_ok(&o) {
                self.ready.push_back(Completion {
                    wr_id: o.wr_id,
                    result,
                });
            }
        }
    }

    /// Breaks every QP with work in flight whose memory server closed its TCP
    /// connection (process gone: its QP no longer answers, and an RPC whose
    /// SEND was acknowledged would otherwise wait for its reply forever).
    fn check_liveness(&mut self) {
        for i in 0..self.qps.len() {
            let q = &self.qps[i];
            if q.broken() || (q.outstanding.is_empty() && q.rpcs.is_empty()) {
                continue;
            }
            let mut b = [0u8; 1];
            let dead = match q.tcp.as_ref().map(|t| t.peek(&mut b)) {
                Some(Ok(0)) => true,
                Some(Err(e)) => e.kind() != std::io::ErrorKind::WouldBlock,
                _ => false,
            };
            if dead {
                tracing::warn!(ms = q.ms, "memory server closed its connection; QP broken");
                self.fail_qp(i, None);
            }
        }
    }
}

/// Empty CQ polls (with work in flight) between two TCP liveness checks.
const LIVENESS_EVERY: u32 = 4096;

impl Queues for RdmaQueues {
    fn post_list(&mut self, ms: u16, wrs: &mut Vec<WorkRequest>) {
        let i = ms as usize;
        match self.qps.get_mut(i) {
            None => {
                for wr in wrs.drain(..) {
                    let (addr, len) = verb_target(&wr.verb);
                    self.ready.push_back(Completion {
                        wr_id: wr.wr_id,
                        result: Err(VerbError::OutOfBounds { addr, len }),
                    });
                }
            }
            Some(q) => {
                q.backlog.extend(wrs.drain(..));
                self.pump(i);
            }
        }
    }

    fn poll_cq(&mut self, out: &mut Vec<Completion>, max: usize) -> usize {
        if self.ready.len() < max {
            if let Some(cq) = self.cq.clone() {
                let mut wcs = std::mem::take(&mut self.wcs);
                wcs.clear();
                let n = match cq.poll(&mut wcs, 32) {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::error!(error = %e, "ibv_poll_cq failed; all QPs broken");
                        for i in 0..self.qps.len() {
                            if !self.qps[i].broken() {
                                self.fail_qp(i, None);
                            }
                        }
                        0
                    }
                };
                for wc in wcs.drain(..) {
                    self.on_wc(wc);
                }
                self.wcs = wcs;
                if n > 0 {
                    self.idle = 0;
                    for i in 0..self.qps.len() {
                        if !self.qps[i].backlog.is_empty() {
                            self.pump(i);
                        }
                    }
                } else if self.ready.is_empty() {
                    self.idle = self.idle.wrapping_add(1);
                    if self.idle.is_multiple_of(LIVENESS_EVERY) {
                        self.check_liveness();
                    }
                }
            }
        }
        let n = self.ready.len().min(max);
        out.extend(self.ready.drain(..n));
        n
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    fn charge_cpu(&mut self, _ns: u64) {}

    fn cpu_cost(&self) -> CpuCost {
        CpuCost::default()
    }
}
