//! The simulator's state and event loop. See the parent module for the model.

use super::queue::EventQueue;
use super::trace::Recorder;
use super::SimConfig;
use crate::ms::{check_bounds, masked_cas_apply, ChunkAllocator, RpcRegistry};
use crate::{
    Capability, Completion, GlobalAddr, MsMemory, RpcHandler, Verb, VerbError, VerbOutput,
    WorkRequest,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;

/// One memory server.
struct SimMs {
    host: Vec<u8>,
    dev: Vec<u8>,
    alloc: ChunkAllocator,
    rpc: RpcRegistry,
    /// NIC message-rate resource: free again at this time.
    nic_free: u64,
    /// NIC link (bytes) resource.
    link_free: u64,
    /// Atomic unit buckets: each free again at this time.
    buckets: Vec<u64>,
    /// RPC cores: busy flag per core; RPCs waiting for a core.
    cores_busy: Vec<bool>,
    rpc_queue: VecDeque<(usize, u64, u16, Vec<u8>)>,
}

/// One CS NIC (shared by the cores of that CS).
#[derive(Default, Clone)]
struct CsNic {
    tx_free: u64,
    rx_free: u64,
}

struct Core {
    cs: u16,
    clock: Rc<Cell<u64>>,
    scheduled: bool,
    /// Completions in arrival order; a `Vec` so the usual full drain is one
    /// `append` (a `VecDeque` drain extends element by element).
    cq: Vec<Completion>,
    /// Per MS: QP in error state.
    broken: Vec<bool>,
    /// Per MS: execution time of the QP's last WR (in-order execution).
    qp_last_exec: Vec<u64>,
}

enum Event {
    CoreWake(usize),
    Exec {
        core: usize,
        wr_id: u64,
        verb: Verb,
    },
    ReadEnd {
        core: usize,
        wr_id: u64,
        addr: GlobalAddr,
        old: Vec<u8>,
    },
    RpcDone {
        core: usize,
        wr_id: u64,
        ms: u16,
        ms_core: usize,
        reply: Result<Vec<u8>, VerbError>,
    },
    Deliver {
        core: usize,
        c: Completion,
    },
}

pub(super) struct World {
    pub(super) cfg: SimConfig,
    pub(super) now: u64,
    pub(super) trace_hash: u64,
    pub(super) verbs_executed: u64,
    rng: ChaCha8Rng,
    /// Link time per byte in picoseconds (from `link_bytes_per_ns`).
    ps_per_byte: u64,
    ms: Vec<SimMs>,
    cs_nics: Vec<CsNic>,
    cores: Vec<Core>,
    /// Pending events, popped in time order; ties in time in push order.
    events: EventQueue<Event>,
    /// The WR recorder, when on ([`super::SimFabric::start_trace`]).
    pub(super) rec: Option<Box<Recorder>>,
}

/// Folds `v` into the trace hash (one multiply-rotate round; order-sensitive).
fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

impl World {
    pub(super) fn new(cfg: SimConfig) -> Self {
        let ms = (0..cfg.num_ms)
            .map(|_| SimMs {
                host: vec![0; cfg.ms.region_bytes as usize],
                dev: vec![0; cfg.ms.device_bytes as usize],
                alloc: ChunkAllocator::new(&cfg.ms),
                rpc: RpcRegistry::with_builtins(),
                nic_free: 0,
                link_free: 0,
                buckets: vec![0; cfg.net.atomic_buckets.max(1) as usize],
                cores_busy: vec![false; cfg.ms.cores.max(1) as usize],
                rpc_queue: VecDeque::new(),
            })
            .collect();
        World {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            ps_per_byte: (1000.0 / cfg.net.link_bytes_per_ns).round().max(1.0) as u64,
            cfg,
            now: 0,
            trace_hash: 0xcbf2_9ce4_8422_2325,
            verbs_executed: 0,
            ms,
            cs_nics: Vec::new(),
            cores: Vec::new(),
            events: EventQueue::new(),
            rec: None,
        }
    }

    /// Inlined, with the queue's push, so each event is built in its node.
    #[inline(always)]
    fn push(&mut self, time: u64, ev: Event) {
        debug_assert!(time >= self.now, "sim: an event scheduled in the past");
        self.events.push(time, ev);
    }

    pub(super) fn add_core(&mut self, cs: u16) -> usize {
        if self.cs_nics.len() <= cs as usize {
            self.cs_nics.resize(cs as usize + 1, CsNic::default());
        }
        let n = self.cfg.num_ms as usize;
        self.cores.push(Core {
            cs,
            clock: Rc::new(Cell::new(self.now)),
            scheduled: false,
            cq: Vec::new(),
            broken: vec![false; n],
            qp_last_exec: vec![0; n],
        });
        self.cores.len() - 1
    }

    pub(super) fn register_rpc(&mut self, id: u16, h: RpcHandler) {
        for m in &mut self.ms {
            m.rpc.register(id, h.clone());
        }
    }

    pub(super) fn break_qp(&mut self, core: usize, ms: u16) {
        if let Some(b) = self.cores[core].broken.get_mut(ms as usize) {
            *b = true;
        }
    }

    pub(super) fn core_clock(&self, core: usize) -> Rc<Cell<u64>> {
        self.cores[core].clock.clone()
    }

    pub(super) fn ms_bytes_used(&self, ms: u16) -> u64 {
        self.ms.get(ms as usize).map_or(0, |m| m.alloc.used())
    }

    pub(super) fn peek(&self, addr: GlobalAddr, len: usize) -> Result<Vec<u8>, VerbError> {
        let off = self.bounds(addr, len as u64)? as usize;
        let m = &self.ms[addr.ms() as usize];
        let mem = if addr.is_device() { &m.dev } else { &m.host };
        Ok(mem[off..off + len].to_vec())
    }

    fn bounds(&self, addr: GlobalAddr, len: u64) -> Result<u64, VerbError> {
        check_bounds(
            addr,
            len,
            self.cfg.num_ms,
            self.cfg.ms.region_bytes,
            self.cfg.ms.device_bytes,
        )
    }

    /// Time to move `bytes` over one link, ns (rounded up).
    fn transfer_ns(&self, bytes: u64) -> u64 {
        (bytes * self.ps_per_byte).div_ceil(1000)
    }

    pub(super) fn next_core(&mut self) -> Option<usize> {
        while let Some((time, ev)) = self.events.pop() {
            self.now = time;
            match ev {
                Event::CoreWake(c) => {
                    self.trace_hash = mix(mix(self.trace_hash, self.now), c as u64);
                    let core = &mut self.cores[c];
                    core.scheduled = false;
                    core.clock.set(core.clock.get().max(self.now));
                    return Some(c);
                }
                Event::Exec { core, wr_id, verb } => self.exec(core, wr_id, verb),
                Event::ReadEnd {
                    core,
                    wr_id,
                    addr,
                    old,
                } => self.read_end(core, wr_id, addr, old),
                Event::RpcDone {
                    core,
                    wr_id,
                    ms,
                    ms_core,
                    reply,
                } => self.rpc_done(core, wr_id, ms, ms_core, reply),
                Event::Deliver { core, c } => {
                    if let Some(r) = self.rec.as_deref_mut() {
                        r.delivered(core, c.wr_id, self.now);
                    }
                    self.trace_hash =
                        mix(mix(mix(self.trace_hash, self.now), core as u64), c.wr_id);
                    self.cores[core].cq.push(c);
                    let k = &mut self.cores[core];
                    if !k.scheduled && k.clock.get() <= self.now {
                        // Idle core, due now: run it at once instead of a CoreWake round trip
                        // through the heap (same virtual time, same determinism).
                        self.trace_hash = mix(mix(self.trace_hash, self.now), core as u64);
                        k.clock.set(self.now);
                        return Some(core);
                    }
                    self.wake(core);
                }
            }
        }
        None
    }

    fn wake(&mut self, core: usize) {
        if !self.cores[core].scheduled {
            self.cores[core].scheduled = true;
            let t = self.cores[core].clock.get().max(self.now);
            self.push(t, Event::CoreWake(core));
        }
    }

    pub(super) fn core_yielded(&mut self, core: usize, runnable: bool) {
        if runnable || !self.cores[core].cq.is_empty() {
            self.wake(core);
        }
    }

    pub(super) fn notify(&mut self, core: usize) {
        self.wake(core);
    }

    pub(super) fn poll_cq(&mut self, core: usize, out: &mut Vec<Completion>, max: usize) -> usize {
        let cq = &mut self.cores[core].cq;
        let n = cq.len().min(max);
        if n == cq.len() {
            out.append(cq);
        } else {
            out.extend(cq.drain(..n));
        }
        n
    }

    /// Completes `wr_id` on `core` at `at` (+ an injected delay).
    fn complete(
        &mut self,
        core: usize,
        wr_id: u64,
        at: u64,
        result: Result<VerbOutput, VerbError>,
    ) {
        let f = self.cfg.faults;
        let mut t = at;
        if f.delay_prob > 0.0 && self.rng.gen_bool(f.delay_prob.min(1.0)) {
            t += self.rng.gen_range(0..=f.delay_max_ns);
        }
        if let Some(r) = self.rec.as_deref_mut() {
            let old = match &result {
                Ok(VerbOutput::Atomic(v)) => Some(*v),
                _ => None,
            };
            r.complete(core, wr_id, t, result.is_ok(), old);
        }
        self.push(
            t,
            Event::Deliver {
                core,
                c: Completion { wr_id, result },
            },
        );
    }

    /// Time for a response of `bytes` to get back to `core`'s CS from now-ish `t`.
    fn return_path(&mut self, core: usize, t: u64, bytes: u64) -> u64 {
        let x = self.transfer_ns(bytes);
        let cs = self.cores[core].cs as usize;
        let arrive = t + self.cfg.net.rtt_ns / 2;
        let nic = &mut self.cs_nics[cs];
        let done = arrive.max(nic.rx_free) + x;
        nic.rx_free = done;
        if let Some(r) = self.rec.as_deref_mut() {
            r.reply = Some((t, bytes));
        }
        done
    }

    pub(super) fn post_list(&mut self, core: usize, ms: u16, wrs: &mut Vec<WorkRequest>) {
        let t0 = self.cores[core].clock.get();
        assert!(
            t0 >= self.now,
            "sim: core {core} posts at {t0} ns, before global time {} ns",
            self.now
        );
        let net = self.cfg.net;
        let db = self.rec.as_deref_mut().map(|r| r.doorbell(core, ms, t0));
        for wr in wrs.drain(..) {
            if ms >= self.cfg.num_ms || self.cores[core].broken[ms as usize] {
                let err = if ms >= self.cfg.num_ms {
                    VerbError::OutOfBounds {
                        addr: GlobalAddr::new(ms.min(0x7fff), 0),
                        len: 0,
                    }
                } else {
                    VerbError::QpError { ms }
                };
                if let (Some(r), Some(db)) = (self.rec.as_deref_mut(), db) {
                    let cs = self.cores[core].cs;
                    let t = (t0, t0, t0, t0);
                    r.post(db, core, cs, ms, wr.wr_id, &wr.verb, t);
                }
                self.complete(core, wr.wr_id, t0 + net.rtt_ns, Err(err));
                continue;
            }
            // CS NIC: message rate, then the outgoing payload on the link.
            let cs = self.cores[core].cs as usize;
            let out = self.transfer_ns(wr.verb.bytes_out());
            let nic = &mut self.cs_nics[cs];
            let start = t0.max(nic.tx_free);
            nic.tx_free = start + net.nic_msg_ns + out;
            let arrive = nic.tx_free + net.rtt_ns / 2;
            // MS NIC: message rate; in-order execution per QP.
            let m = &mut self.ms[ms as usize];
            let target = wr.verb.addr();
            let on_chip = target.is_some_and(|a| a.is_device());
            let mut exec = arrive.max(m.nic_free);
            m.nic_free = exec
                + if on_chip {
                    net.device_msg_ns
                } else {
                    net.nic_msg_ns
                };
            let is_atomic = matches!(
                wr.verb,
                Verb::Cas { .. } | Verb::MaskedCas { .. } | Verb::Faa { .. }
            );
            if let (true, Some(addr)) = (is_atomic, target) {
                // The bucket is reserved here, in post order; a host CAS
                // reserves its PCIe read only, and `atomic` extends the
                // reservation by the write-back if it succeeds (Sherman
                // §3.2.2: a failed CAS skips it).
                let b = bucket(addr, &net, m.buckets.len());
                exec = exec.max(m.buckets[b]);
                m.buckets[b] = exec
                    + match wr.verb {
                        _ if on_chip => net.device_atomic_ns,
                        Verb::Faa { .. } => net.host_atomic_ns,
                        _ => net.host_cas_fail_ns,
                    };
            }
            let q = &mut self.cores[core].qp_last_exec[ms as usize];
            exec = exec.max(*q);
            *q = exec;
            if let (Some(r), Some(db)) = (self.rec.as_deref_mut(), db) {
                let t = (t0, arrive - net.rtt_ns / 2, arrive, exec);
                r.post(db, core, cs as u16, ms, wr.wr_id, &wr.verb, t);
            }
            self.push(
                exec,
                Event::Exec {
                    core,
                    wr_id: wr.wr_id,
                    verb: wr.verb,
                },
            );
        }
    }

    fn exec(&mut self, core: usize, wr_id: u64, verb: Verb) {
        self.verbs_executed += 1;
        self.trace_hash = mix(mix(mix(self.trace_hash, self.now), core as u64), wr_id);
        let now = self.now;
        match verb {
            Verb::Read { addr, len } => {
                let res = self.peek(addr, len as usize);
                match (res, self.cfg.faults.tear.bytes()) {
                    (Ok(old), Some(_)) => {
                        let end =
                            self.link(addr.ms(), now, len as u64) + self.cfg.faults.tear_window_ns;
                        self.push(
                            end,
                            Event::ReadEnd {
                                core,
                                wr_id,
                                addr,
                                old,
                            },
                        );
                    }
                    (Ok(data), None) => {
                        let t = self.link(addr.ms(), now, len as u64);
                        let t = self.return_path(core, t, len as u64);
                        self.complete(core, wr_id, t, Ok(VerbOutput::Read(data)));
                    }
                    (Err(e), _) => {
                        let t = self.return_path(core, now, 0);
                        self.complete(core, wr_id, t, Err(e));
                    }
                }
            }
            Verb::Write { addr, data } => {
                let res = self.store(addr, &data);
                self.trace_hash = mix(self.trace_hash, data.len() as u64);
                let t = self.link(addr.ms(), now, data.len() as u64);
                let t = self.return_path(core, t, 0);
                self.complete(core, wr_id, t, res.map(|_| VerbOutput::Write));
            }
            Verb::Cas { addr, expect, swap } => {
                let res = self.atomic(addr, |old| (old == expect).then_some(swap));
                if res == Ok(expect) {
                    self.cas_write_back(addr);
                }
                let t = self.return_path(core, now, 8);
                self.complete(core, wr_id, t, res.map(VerbOutput::Atomic));
            }
            Verb::MaskedCas {
                addr,
                expect,
                swap,
                compare_mask,
                swap_mask,
            } => {
                let res = if self.cfg.masked_cas {
                    let cas = |old| masked_cas_apply(old, expect, swap, compare_mask, swap_mask);
                    let res = self.atomic(addr, cas);
                    if res.as_ref().is_ok_and(|&old| cas(old).is_some()) {
                        self.cas_write_back(addr);
                    }
                    res
                } else {
                    Err(VerbError::Unsupported(Capability::MaskedCas))
                };
                let t = self.return_path(core, now, 8);
                self.complete(core, wr_id, t, res.map(VerbOutput::Atomic));
            }
            Verb::Faa { addr, add } => {
                let res = self.atomic(addr, |old| Some(old.wrapping_add(add)));
                let t = self.return_path(core, now, 8);
                self.complete(core, wr_id, t, res.map(VerbOutput::Atomic));
            }
            Verb::Rpc {
                ms,
                handler,
                payload,
            } => {
                let m = &mut self.ms[ms as usize];
                if let Some(i) = m.cores_busy.iter().position(|b| !b) {
                    self.run_rpc(core, wr_id, ms, i, handler, payload);
                } else {
                    m.rpc_queue.push_back((core, wr_id, handler, payload));
                }
            }
        }
    }

    /// Occupies MS `ms`'s link for `bytes` starting no earlier than `t`; returns the end.
    fn link(&mut self, ms: u16, t: u64, bytes: u64) -> u64 {
        let x = self.transfer_ns(bytes);
        let m = &mut self.ms[ms as usize];
        let end = t.max(m.link_free) + x;
        m.link_free = end;
        end
    }

    fn read_end(&mut self, core: usize, wr_id: u64, addr: GlobalAddr, old: Vec<u8>) {
        let g = self.cfg.faults.tear.bytes().unwrap_or(8);
        let mut out = old;
        let off = self
            .bounds(addr, out.len() as u64)
            .expect("bounds checked at start") as usize;
        let m = &self.ms[addr.ms() as usize];
        let mem = if addr.is_device() {
            &m.dev[off..]
        } else {
            &m.host[off..]
        };
        // Granules are aligned to absolute addresses; each keeps the value seen at
        // the start of the READ or takes the one in memory now, at random.
        let base = addr.local_offset();
        let mut i = 0usize;
        let (mut bits, mut left) = (0u64, 0u32);
        while i < out.len() {
            let abs = base + i as u64;
            let end = ((abs / g + 1) * g - base) as usize;
            let end = end.min(out.len());
            if left == 0 {
                bits = self.rng.gen();
                left = 64;
            }
            if bits & 1 == 0 {
                out[i..end].copy_from_slice(&mem[i..end]);
            }
            bits >>= 1;
            left -= 1;
            i = end;
        }
        let len = out.len() as u64;
        let t = self.link(addr.ms(), self.now, 0);
        let t = self.return_path(core, t, len);
        self.complete(core, wr_id, t, Ok(VerbOutput::Read(out)));
    }

    fn store(&mut self, addr: GlobalAddr, data: &[u8]) -> Result<(), VerbError> {
        let off = self.bounds(addr, data.len() as u64)? as usize;
        let m = &mut self.ms[addr.ms() as usize];
        let mem = if addr.is_device() {
            &mut m.dev
        } else {
            &mut m.host
        };
        mem[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn atomic(
        &mut self,
        addr: GlobalAddr,
        f: impl FnOnce(u64) -> Option<u64>,
    ) -> Result<u64, VerbError> {
        if !addr.local_offset().is_multiple_of(8) {
            return Err(VerbError::Misaligned { addr });
        }
        // In place: one bounds check, no buffer (an atomic is a third of the verbs).
        let off = self.bounds(addr, 8)? as usize;
        let m = &mut self.ms[addr.ms() as usize];
        let mem = if addr.is_device() {
            &mut m.dev
        } else {
            &mut m.host
        };
        let word: &mut [u8; 8] = (&mut mem[off..off + 8]).try_into().unwrap();
        let old = u64::from_le_bytes(*word);
        if let Some(new) = f(old) {
            *word = new.to_le_bytes();
        }
        self.trace_hash = mix(self.trace_hash, old);
        Ok(old)
    }

    /// A CAS verb on `addr` succeeded: on host memory its write-back's PCIe
    /// transaction holds the NIC bucket on (post reserved the read only).
    /// Atomics already queued behind keep their times: a model
    /// approximation, see docs/simulator.md. Not for the MS CPU's atomics
    /// in RPC handlers, which do not go through the NIC.
    fn cas_write_back(&mut self, addr: GlobalAddr) {
        if !addr.is_device() {
            let net = self.cfg.net;
            let m = &mut self.ms[addr.ms() as usize];
            let b = bucket(addr, &net, m.buckets.len());
            m.buckets[b] = m.buckets[b].max(self.now + net.host_atomic_ns);
        }
    }

    fn run_rpc(
        &mut self,
        core: usize,
        wr_id: u64,
        ms: u16,
        ms_core: usize,
        handler: u16,
        payload: Vec<u8>,
    ) {
        let base = self.cfg.net.ms_rpc_ns;
        let h = self.ms[ms as usize].rpc.get(handler).cloned();
        let (reply, cost) = match h {
            None => (Err(VerbError::UnknownRpc { ms, handler }), base),
            Some(h) => {
                let mut view = MsView {
                    w: self,
                    ms,
                    cpu_ns: 0,
                };
                let r = h(&mut view, &payload);
                let c = view.cpu_ns;
                (r, base + c)
            }
        };
        self.ms[ms as usize].cores_busy[ms_core] = true;
        let done = self.now + cost;
        if let Some(r) = self.rec.as_deref_mut() {
            r.exec(core, wr_id, self.now);
        }
        self.push(
            done,
            Event::RpcDone {
                core,
                wr_id,
                ms,
                ms_core,
                reply,
            },
        );
    }

    fn rpc_done(
        &mut self,
        core: usize,
        wr_id: u64,
        ms: u16,
        ms_core: usize,
        reply: Result<Vec<u8>, VerbError>,
    ) {
        let len = reply.as_ref().map_or(0, |r| r.len() as u64);
        let t = self.link(ms, self.now, len);
        let t = self.return_path(core, t, len);
        self.complete(core, wr_id, t, reply.map(VerbOutput::Rpc));
        self.ms[ms as usize].cores_busy[ms_core] = false;
        if let Some((c, w, h, p)) = self.ms[ms as usize].rpc_queue.pop_front() {
            self.run_rpc(c, w, ms, ms_core, h, p);
        }
    }
}

/// An RPC handler's view of its MS.
struct MsView<'a> {
    w: &'a mut World,
    ms: u16,
    cpu_ns: u64,
}

impl MsView<'_> {
    fn local(&self, addr: GlobalAddr) -> Result<(), VerbError> {
        if addr.ms() != self.ms {
            return Err(VerbError::OutOfBounds { addr, len: 0 });
        }
        Ok(())
    }
}

impl MsMemory for MsView<'_> {
    fn ms_id(&self) -> u16 {
        self.ms
    }
    fn read(&mut self, addr: GlobalAddr, len: usize) -> Result<Vec<u8>, VerbError> {
        self.local(addr)?;
        self.w.peek(addr, len)
    }
    fn write(&mut self, addr: GlobalAddr, data: &[u8]) -> Result<(), VerbError> {
        self.local(addr)?;
        self.w.store(addr, data)
    }
    fn cas(&mut self, addr: GlobalAddr, expect: u64, swap: u64) -> Result<u64, VerbError> {
        self.local(addr)?;
        self.w.atomic(addr, |old| (old == expect).then_some(swap))
    }
    fn faa(&mut self, addr: GlobalAddr, add: u64) -> Result<u64, VerbError> {
        self.local(addr)?;
        self.w.atomic(addr, |old| Some(old.wrapping_add(add)))
    }
    fn alloc_chunk(&mut self) -> Result<GlobalAddr, VerbError> {
        let ms = self.ms;
        match self.w.ms[ms as usize].alloc.alloc() {
            Some(off) => Ok(GlobalAddr::new(ms, off)),
            None => Err(VerbError::MsOutOfMemory { ms }),
        }
    }
    fn charge_cpu(&mut self, ns: u64) {
        self.cpu_ns += ns;
    }
}

/// The NIC atomic bucket of `addr`: the 12 LSBs of its 8-byte word's index
/// by default (Sherman §3.2.2; [`super::NetModel::atomic_bucket_shift`]).
fn bucket(addr: GlobalAddr, net: &super::NetModel, buckets: usize) -> usize {
    (addr.local_offset() >> net.atomic_bucket_shift) as usize % buckets
}
