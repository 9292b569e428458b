//! The memory-server side of the `rdma` backend: one registered host region,
//! the chunk allocator and the [`RpcRegistry`] handlers, served to compute
//! servers over RC QPs. Driven by the `dm-memserver` binary (dm-bench).
//!
//! One thread does everything ([`MemServer::run`]): accept TCP connections and
//! run their handshakes (one QP each, see [`super::wire`]), poll the one CQ for
//! RPC requests (RECV completions) and reply SENDs, run each request's handler
//! on this core, and drop the QP of a connection that closed. After
//! `IDLE_SPINS` empty polls it blocks (`MemServer::wait_idle`) on the CQ's
//! completion channel and the listening socket, at most `IDLE_WAIT`
//! (100 ms): an idle memory server wakes about 10 times a second, and an
//! RPC that finds it blocked pays one interrupt-driven wake-up (it slept
//! 50 us between polls before, 20,000 wake-ups a second). One-sided verbs
//! never involve this thread.
//!
//! Handlers touch the region through atomic 8-byte words (as on `loopback`).
//! Their CAS/FAA are CPU atomics: atomic against each other, but, as on real
//! NICs without PCIe atomics, not against remote RDMA atomics on the same word.

use super::ffi::{
    Cq, Device, DeviceMem, Endpoint, Local, MemRegion, Qp, QpCaps, SendOp, SendWr, Src, Wc,
};
use super::handshake::random_psn;
use super::wire::{self, Hello, Welcome};
use super::{RdmaConfig, RdmaError};
use crate::loopback::{read_words, write_words};
use crate::ms::{check_bounds, ChunkAllocator, RpcRegistry};
use crate::{GlobalAddr, MsConfig, MsMemory, VerbError};
use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Empty polls before the loop blocks ([`MemServer::wait_idle`]).
const IDLE_SPINS: u32 = 1000;
/// Longest block of an idle loop: how soon it sees the stop flag and
/// closed clients.
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// How a memory server is built.
#[derive(Clone, Debug)]
pub struct MemServerConfig {
    /// This server's MS id (clients list it at this position in `--ms`).
    pub ms_id: u16,
    /// Region and chunk size, and device memory to offer (`device_bytes`:
    /// allocated with `ibv_alloc_dm` if the NIC has that much, else none).
    pub ms: MsConfig,
    /// Receive slots per QP = RPCs a client core may have in flight to us.
    pub rpc_slots: u32,
    /// Largest RPC request or reply, bytes (header included).
    pub msg_bytes: u32,
    /// Device, port, GID index and QP timers.
    pub rdma: RdmaConfig,
}

impl Default for MemServerConfig {
    fn default() -> Self {
        MemServerConfig {
            ms_id: 0,
            ms: MsConfig::default(),
            rpc_slots: 32,
            msg_bytes: 4096,
            rdma: RdmaConfig::default(),
        }
    }
}

/// Native wr_id bit of the server's SENDs (RECVs have it clear).
const SEND_BIT: u64 = 1 << 63;

struct Conn {
    qp: Qp,
    tcp: TcpStream,
    peer: SocketAddr,
    /// `rpc_slots` receive slots, then `rpc_slots` send slots, `msg_bytes` each.
    bufs: Arc<MemRegion>,
    free_send: Vec<u32>,
    /// Replies waiting for a free send slot.
    deferred: VecDeque<Vec<u8>>,
}

/// A memory server bound to a TCP address. See the module docs.
pub struct MemServer {
    cfg: MemServerConfig,
    dev: Arc<Device>,
    region: Arc<MemRegion>,
    /// Device memory, if `cfg.ms.device_bytes > 0` and the NIC has it.
    dm: Option<Arc<DeviceMem>>,
    /// Why there is none, for the start-up log.
    no_dm: String,
    cq: Arc<Cq>,
    registry: RpcRegistry,
    alloc: ChunkAllocator,
    listener: TcpListener,
    conns: HashMap<u32, Conn>,
    next_conn: u32,
    /// Idle waits so far: times the loop blocked, and wall ns spent blocked.
    idle_waits: u64,
    idle_ns: u64,
}

impl MemServer {
    /// Opens the device, registers a zeroed region of `cfg.ms.region_bytes`
    /// and listens on `addr` (e.g. `0.0.0.0:7471`; port 0 picks one).
    pub fn bind(
        cfg: MemServerConfig,
        registry: RpcRegistry,
        addr: &str,
    ) -> Result<MemServer, RdmaError> {
        let r = &cfg.rdma;
        let dev = Device::open(r.device.as_deref(), r.port, r.gid_index)?;
        let region = MemRegion::new(&dev, cfg.ms.region_bytes)?;
        let (dm, no_dm) = match cfg.ms.device_bytes {
            0 => (None, "none asked".to_string()),
            n => match DeviceMem::new(&dev, n) {
                Ok(d) => (Some(d), String::new()),
                Err(e) => (None, e.to_string()),
            },
        };
        let cq = Cq::with_channel(&dev, 4096)?;
        let listener =
            TcpListener::bind(addr).map_err(|e| RdmaError(format!("listen on {addr}: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| RdmaError(format!("{addr}: {e}")))?;
        let alloc = ChunkAllocator::new(&cfg.ms);
        Ok(MemServer {
            cfg,
            dev,
            region,
            dm,
            no_dm,
            cq,
            registry,
            alloc,
            listener,
            conns: HashMap::new(),
            next_conn: 0,
            idle_waits: 0,
            idle_ns: 0,
        })
    }

    /// The TCP address clients connect to.
    pub fn local_addr(&self) -> Result<SocketAddr, RdmaError> {
        self.listener
            .local_addr()
            .map_err(|e| RdmaError(e.to_string()))
    }

    /// Device name, GID index, MR keys and device memory, for the start-up log.
    pub fn describe(&self) -> String {
        let dm = match &self.dm {
            Some(d) => format!("{} bytes, rkey {:#x}", d.len(), d.rkey()),
            None => format!("none ({})", self.no_dm),
        };
        format!(
            "MS {} on {} port {} GID index {}: region {} bytes at {:#x}, rkey {:#x}, chunks of {} bytes; device memory {dm}",
            self.cfg.ms_id,
            self.dev.name,
            self.dev.port,
            self.dev.gid_index,
            self.cfg.ms.region_bytes,
            self.region.addr(),
            self.region.rkey(),
            self.cfg.ms.chunk_bytes
        )
    }

    /// Device memory offered to clients, bytes (0: none).
    pub fn device_bytes(&self) -> u64 {
        self.dm.as_ref().map_or(0, |d| d.len())
    }

    /// Bytes handed out by the chunk allocator (superblock included).
    pub fn bytes_used(&self) -> u64 {
        self.alloc.used()
    }

    /// Connected QPs.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Serves until `stop` is set; then closes every QP and returns.
    pub fn run(&mut self, stop: &AtomicBool) -> Result<(), RdmaError> {
        let mut wcs: Vec<Wc> = Vec::new();
        let mut idle: u32 = 0;
        let mut round: u64 = 0;
        while !stop.load(Ordering::Relaxed) {
            round += 1;
            let mut busy = false;
            match self.listener.accept() {
                Ok((s, peer)) => {
                    busy = true;
                    if let Err(e) = self.accept(s, peer) {
                        tracing::warn!(%peer, error = %e, "handshake failed");
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => tracing::warn!(error = %e, "accept failed"),
            }
            wcs.clear();
            let n = self.cq.poll(&mut wcs, 32)?;
            for wc in wcs.drain(..) {
                self.on_wc(wc);
            }
            busy |= n > 0;
            if round.is_multiple_of(256) || (!busy && idle == 0) {
                self.reap_closed();
            }
            if busy {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                if idle > IDLE_SPINS {
                    self.wait_idle(&mut wcs)?;
                    idle = 0;
                }
            }
        }
        tracing::info!(
            connections = self.conns.len(),
            bytes_used = self.alloc.used(),
            idle_waits = self.idle_waits,
            idle_ns = self.idle_ns,
            "memory server stopping"
        );
        self.conns.clear();
        Ok(())
    }

    fn accept(&mut self, mut s: TcpStream, peer: SocketAddr) -> Result<(), RdmaError> {
        let io = |e: std::io::Error| RdmaError(e.to_string());
        s.set_nonblocking(false).map_err(io)?;
        s.set_nodelay(true).map_err(io)?;
        s.set_read_timeout(Some(self.cfg.rdma.connect_timeout))
            .map_err(io)?;
        let mut b = [0u8; wire::HELLO_BYTES];
        s.read_exact(&mut b).map_err(io)?;
        let hello = match Hello::decode(&b) {
            Ok(h) => h,
            Err(e) => {
                let _ = s.write_all(&Welcome::refuse(&e));
                return Err(RdmaError(e));
            }
        };
        if hello.ms_id != self.cfg.ms_id {
            let why = format!(
                "this is memory server {}, the client lists it as {}",
                self.cfg.ms_id, hello.ms_id
            );
            let _ = s.write_all(&Welcome::refuse(&why));
            return Err(RdmaError(why));
        }
        let slots = self.cfg.rpc_slots.max(1);
        let msg = self.cfg.msg_bytes.max(wire::REPLY_HEADER as u32 + 64);
        let mut w = Welcome {
            ms_id: self.cfg.ms_id,
            qpn: 0,
            psn: 0,
            lid: self.dev.lid,
            gid: self.dev.gid,
            region_addr: self.region.addr(),
            rkey: self.region.rkey(),
            region_bytes: self.cfg.ms.region_bytes,
            chunk_bytes: self.cfg.ms.chunk_bytes,
            device_bytes: self.device_bytes(),
            rpc_slots: slots,
            msg_bytes: msg,
            dm_rkey: self.dm.as_ref().map_or(0, |d| d.rkey()),
        };
        if !hello.create_qp {
            s.write_all(&w.encode()).map_err(io)?;
            return Ok(());
        }
        let bufs = MemRegion::new(&self.dev, 2 * slots as u64 * msg as u64)?;
        let mut qp = Qp::new_rc(
            &self.cq,
            vec![bufs.clone(), self.region.clone()],
            QpCaps {
                max_send_wr: 2 * slots,
                max_recv_wr: slots,
                max_inline: 0,
            },
        )?;
        let psn = random_psn();
        let remote = Endpoint {
            qpn: hello.qpn,
            psn: hello.psn,
            lid: hello.lid,
            gid: hello.gid,
        };
        let r = &self.cfg.rdma;
        qp.connect(psn, &remote, r.rd_atomic, r.timers)?;
        let id = self.next_conn;
        self.next_conn = self.next_conn.wrapping_add(1) & 0x7fff_ffff;
        for k in 0..slots {
            let l = Local {
                mr: &bufs,
                off: k as u64 * msg as u64,
                len: msg,
            };
            qp.post_recv(((id as u64) << 32) | k as u64, l)?;
        }
        w.qpn = qp.qpn();
        w.psn = psn;
        s.write_all(&w.encode()).map_err(io)?;
        s.set_nonblocking(true).map_err(io)?;
        tracing::info!(%peer, conn = id, qpn = w.qpn, remote_qpn = hello.qpn, "QP connected");
        self.conns.insert(
            id,
            Conn {
                qp,
                tcp: s,
                peer,
                bufs,
                free_send: (slots..2 * slots).collect(),
                deferred: VecDeque::new(),
            },
        );
        Ok(())
    }

    /// Drops the QPs of connections whose client closed TCP (or died).
    /// Blocks until a completion, a connecting client or [`IDLE_WAIT`]:
    /// arms the CQ, polls it once more (a completion that came before the
    /// arming raises no event), then `poll(2)` on the completion channel
    /// and the listening socket. An idle server thus wakes every
    /// `IDLE_WAIT` (100 ms: the stop flag, closed clients), not every 50 µs
    /// as it did (issue 32, item 5; its CPU only serves RPCs).
    fn wait_idle(&mut self, wcs: &mut Vec<Wc>) -> Result<(), RdmaError> {
        use std::os::fd::AsRawFd;
        self.cq.arm()?;
        wcs.clear();
        if self.cq.poll(wcs, 32)? > 0 {
            for wc in wcs.drain(..) {
                self.on_wc(wc);
            }
            return Ok(());
        }
        let Some(chan) = self.cq.channel_fd() else {
            std::thread::sleep(Duration::from_micros(50));
            return Ok(());
        };
        let mut fds = [
            libc::pollfd {
                fd: chan,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let t0 = std::time::Instant::now();
        // SAFETY: two valid pollfd entries for open descriptors. EINTR (a
        // stop signal) and timeouts return like an event: the loop re-checks.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, IDLE_WAIT.as_millis() as i32) };
        self.idle_ns += t0.elapsed().as_nanos() as u64;
        self.idle_waits += 1;
        self.cq.take_events();
        Ok(())
    }

    /// Times the loop blocked while idle, and the wall ns it spent so.
    pub fn idle_waits(&self) -> (u64, u64) {
        (self.idle_waits, self.idle_ns)
    }

    fn reap_closed(&mut self) {
        let mut b = [0u8; 1];
        self.conns.retain(|id, c| {
            let closed = match c.tcp.peek(&mut b) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => e.kind() != ErrorKind::WouldBlock,
            };
            if closed {
                tracing::info!(peer = %c.peer, conn = id, "client closed; QP destroyed");
            }
            !closed
        });
    }

    fn on_wc(&mut self, wc: Wc) {
        let id = ((wc.wr_id >> 32) & 0x7fff_ffff) as u32;
        let slot = (wc.wr_id & 0xffff_ffff) as u32;
        if let Some((st, vendor)) = wc.error {
            if let Some(c) = self.conns.remove(&id) {
                tracing::warn!(
                    peer = %c.peer,
                    conn = id,
                    status = super::ffi::wc_status_name(st),
                    vendor,
                    "WR failed; QP destroyed"
                );
            }
            return;
        }
        let msg = self.cfg.msg_bytes.max(wire::REPLY_HEADER as u32 + 64) as u64;
        if wc.wr_id & SEND_BIT != 0 {
            if let Some(c) = self.conns.get_mut(&id) {
                c.free_send.push(slot);
                if let Some(m) = c.deferred.pop_front() {
                    Self::send(c, id, &m, msg);
                }
            }
            return;
        }
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let off = slot as u64 * msg;
        let req = read_words(c.bufs.words(), off, (wc.byte_len as u64).min(msg) as usize);
        // Re-arm the slot before replying, so the client's next SEND finds it.
        let l = Local {
            mr: &c.bufs,
            off,
            len: msg as u32,
        };
        if let Err(e) = c.qp.post_recv(wc.wr_id, l) {
            tracing::warn!(peer = %c.peer, error = %e, "re-posting a RECV failed; QP destroyed");
            self.conns.remove(&id);
            return;
        }
        let Some((tag, handler, payload)) = wire::decode_request(&req) else {
            tracing::warn!(peer = %c.peer, len = req.len(), "malformed RPC request ignored");
            return;
        };
        let ms = self.cfg.ms_id;
        let result = match self.registry.get(handler).cloned() {
            None => Err(VerbError::UnknownRpc { ms, handler }),
            Some(h) => {
                let mut view = View {
                    ms,
                    words: self.region.words(),
                    region_bytes: self.cfg.ms.region_bytes,
                    alloc: &mut self.alloc,
                };
                crate::ms::call_handler(ms, handler, || h(&mut view, payload))
            }
        };
        tracing::debug!(conn = id, handler, ok = result.is_ok(), "RPC");
        let mut reply = wire::encode_reply(tag, &result);
        if reply.len() as u64 > msg {
            let e = VerbError::RpcFailed {
                ms,
                handler,
                reason: format!(
                    "reply of {} bytes exceeds the {msg}-byte message",
                    reply.len()
                ),
            };
            reply = wire::encode_reply(tag, &Err(e));
        }
        let c = self.conns.get_mut(&id).expect("connection checked above");
        if c.free_send.is_empty() {
            c.deferred.push_back(reply);
        } else {
            Self::send(c, id, &reply, msg);
        }
    }

    /// SENDs `m` from a free send slot of `c` (signalled: the slot comes back
    /// with its completion).
    fn send(c: &mut Conn, id: u32, m: &[u8], msg: u64) {
        let Some(slot) = c.free_send.pop() else {
            c.deferred.push_back(m.to_vec());
            return;
        };
        let off = slot as u64 * msg;
        write_words(c.bufs.words(), off, m);
        let wr = SendWr {
            wr_id: SEND_BIT | ((id as u64) << 32) | slot as u64,
            signaled: true,
            op: SendOp::Send {
                src: Src::Buf(Local {
                    mr: &c.bufs,
                    off,
                    len: m.len() as u32,
                }),
            },
        };
        if let Err(e) = c.qp.post_send(&[wr]) {
            // The QP is unusable; its connection is reaped when the client notices.
            tracing::warn!(peer = %c.peer, error = %e, "reply SEND refused");
        }
    }
}

/// An RPC handler's view of this memory server.
struct View<'a> {
    ms: u16,
    words: &'a [AtomicU64],
    region_bytes: u64,
    alloc: &'a mut ChunkAllocator,
}

impl View<'_> {
    fn local(&self, addr: GlobalAddr, len: u64) -> Result<u64, VerbError> {
        if addr.ms() != self.ms || addr.is_device() {
            return Err(VerbError::OutOfBounds { addr, len });
        }
        check_bounds(addr, len, self.ms + 1, self.region_bytes, 0)
    }

    fn word(&self, addr: GlobalAddr) -> Result<&AtomicU64, VerbError> {
        if !addr.local_offset().is_multiple_of(8) {
            return Err(VerbError::Misaligned { addr });
        }
        let off = self.local(addr, 8)?;
        Ok(&self.words[(off / 8) as usize])
    }
}

impl MsMemory for View<'_> {
    fn ms_id(&self) -> u16 {
        self.ms
    }
    fn read(&mut self, addr: GlobalAddr, len: usize) -> Result<Vec<u8>, VerbError> {
        let off = self.local(addr, len as u64)?;
        Ok(read_words(self.words, off, len))
    }
    fn write(&mut self, addr: GlobalAddr, data: &[u8]) -> Result<(), VerbError> {
        let off = self.local(addr, data.len() as u64)?;
        write_words(self.words, off, data);
        Ok(())
    }
    fn cas(&mut self, addr: GlobalAddr, expect: u64, swap: u64) -> Result<u64, VerbError> {
        let w = self.word(addr)?;
        Ok(
            w.compare_exchange(expect, swap, Ordering::AcqRel, Ordering::Acquire)
                .unwrap_or_else(|old| old),
        )
    }
    fn faa(&mut self, addr: GlobalAddr, add: u64) -> Result<u64, VerbError> {
        Ok(self.word(addr)?.fetch_add(add, Ordering::AcqRel))
    }
    fn alloc_chunk(&mut self) -> Result<GlobalAddr, VerbError> {
        let ms = self.ms;
        self.alloc
            .alloc()
            .map(|off| GlobalAddr::new(ms, off))
            .ok_or(VerbError::MsOutOfMemory { ms })
    }
    fn free_chunk(&mut self, off: u64) -> Result<(), String> {
        self.alloc.free(off)
    }
    fn charge_cpu(&mut self, _ns: u64) {}
}
