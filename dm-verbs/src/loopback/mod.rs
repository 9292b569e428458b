//! `loopback`: real threads, real races, real time. Each memory server's host
//! and device regions are memory of this process; every verb executes against
//! it in the thread that posts it, so races between cores are real races on
//! real memory. This is the backend that measures the CPU cost per operation
//! of an index (the sim charges modelled costs instead): [`Queues::cpu_cost`]
//! is zero and [`Queues::charge_cpu`] a no-op, because the CPU is really spent.
//!
//! ## Memory model
//! A region is an array of `AtomicU64` words, allocated zeroed by the system
//! allocator (`calloc`/`mmap` for large sizes), so a 1 GiB region costs
//! nothing until its pages are touched. A READ copies word by word with atomic
//! loads; a WRITE stores word by word, and the partial words at unaligned edges
//! are merged with a CAS loop, so a byte-granular WRITE never clobbers
//! neighbouring bytes written concurrently. Racing copies are therefore never
//! undefined behaviour (no plain `memcpy` over shared memory), and a READ that
//! overlaps a WRITE may return any mix of old and new 8-byte words: tearing at
//! 8-byte granularity, as on real RDMA. CAS and FAA are `compare_exchange` and
//! `fetch_add`, masked CAS is a CAS loop; all need 8-byte aligned addresses.
//!
//! ## Completion
//! Verbs complete synchronously inside [`Queues::post_list`], in posting
//! order; their completions wait in the core's CQ until polled. Per-QP order is
//! thus trivially the posting order. RPC handlers run inline in the posting
//! thread against a [`MsMemory`] view of their MS. The clock is monotonic
//! wall-clock ns since the fabric was created.

use crate::ms::{check_bounds, masked_cas_apply, ChunkAllocator, RpcRegistry};
use crate::{
    Capability, Caps, Clock, Completion, CpuCost, Fabric, FabricKind, GlobalAddr, MsConfig,
    MsMemory, Queues, RpcHandler, Verb, VerbError, VerbOutput, WorkRequest,
};
use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

/// How a loopback cluster is built.
#[derive(Clone, Copy, Debug)]
pub struct LoopbackConfig {
    pub num_ms: u16,
    pub ms: MsConfig,
    /// Offer masked CAS (default true).
    pub masked_cas: bool,
}

impl Default for LoopbackConfig {
    fn default() -> Self {
        LoopbackConfig {
            num_ms: 1,
            ms: MsConfig::default(),
            masked_cas: true,
        }
    }
}

/// A zero-initialised array of atomic words that touches no page until used.
struct Words {
    ptr: NonNull<AtomicU64>,
    len: usize,
}

// SAFETY: `Words` owns its allocation and only hands out `&[AtomicU64]`, whose
// every access is atomic; sharing it between threads is sound.
unsafe impl Send for Words {}
unsafe impl Sync for Words {}

impl Words {
    fn zeroed(bytes: u64) -> Self {
        let len = usize::try_from(bytes.div_ceil(8)).expect("region too large");
        if len == 0 {
            return Words {
                ptr: NonNull::dangling(),
                len: 0,
            };
        }
        let layout = Layout::array::<AtomicU64>(len).expect("region too large");
        // SAFETY: the layout has non-zero size. All-zero bytes are a valid
        // `AtomicU64` (value 0), so the memory is initialised as returned.
        let p = unsafe { alloc_zeroed(layout) } as *mut AtomicU64;
        let ptr = NonNull::new(p).unwrap_or_else(|| handle_alloc_error(layout));
        Words { ptr, len }
    }

    fn as_slice(&self) -> &[AtomicU64] {
        // SAFETY: ptr/len describe our live, initialised allocation (or a
        // dangling, aligned pointer with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        if self.len > 0 {
            let layout = Layout::array::<AtomicU64>(self.len).unwrap();
            // SAFETY: allocated in `zeroed` with this same layout.
            unsafe { dealloc(self.ptr.as_ptr() as *mut u8, layout) }
        }
    }
}

/// Copies `len` bytes at byte offset `off` out of `w` with one atomic load per
/// word (see the module docs: tearing at 8-byte granularity, never UB).
/// Panics if the range is outside `w`; callers check bounds first.
#[inline]
pub(crate) fn read_words(w: &[AtomicU64], off: u64, len: usize) -> Vec<u8> {
    if off.is_multiple_of(8) && len.is_multiple_of(8) {
        // Whole words (every node and lock read of the indexes): one load and
        // one 8-byte store per word, no per-word slicing. The buffer is
        // sized first and filled through a slice, so the `Vec` itself is
        // never written after it is made (extending it kept it on the stack
        // and the caller's wide copy of it stalled on the narrow stores).
        let mut out: Vec<u8> = Vec::with_capacity(len);
        let words = &w[(off / 8) as usize..][..len / 8];
        for (dst, word) in out.spare_capacity_mut().chunks_exact_mut(8).zip(words) {
            for (d, b) in dst.iter_mut().zip(word.load(Acquire).to_le_bytes()) {
                d.write(b);
            }
        }
        // SAFETY: the loop wrote all `len` bytes (`len / 8` whole words).
        unsafe { out.set_len(len) };
        return out;
    }
    let end = off + len as u64;
    let mut out = Vec::with_capacity(len);
    for i in off / 8..end.div_ceil(8) {
        let b = w[i as usize].load(Acquire).to_le_bytes();
        let lo = off.saturating_sub(i * 8) as usize;
        let hi = (end - i * 8).min(8) as usize;
        out.extend_from_slice(&b[lo..hi]);
    }
    out
}

/// Stores `data` at byte offset `off` of `w` word by word; partial words at
/// unaligned edges are merged with a CAS loop so neighbouring bytes written
/// concurrently survive. Panics if the range is outside `w`.
pub(crate) fn write_words(w: &[AtomicU64], off: u64, data: &[u8]) {
    let end = off + data.len() as u64;
    let mut src = data;
    for i in off / 8..end.div_ceil(8) {
        let lo = off.saturating_sub(i * 8) as usize;
        let hi = (end - i * 8).min(8) as usize;
        let (part, rest) = src.split_at(hi - lo);
        src = rest;
        let word = &w[i as usize];
        if hi - lo == 8 {
            word.store(u64::from_le_bytes(part.try_into().unwrap()), Release);
        } else {
            // Merge into the bytes around us without clobbering them.
            let _ = word.fetch_update(AcqRel, Acquire, |old| {
                let mut b = old.to_le_bytes();
                b[lo..hi].copy_from_slice(part);
                Some(u64::from_le_bytes(b))
            });
        }
    }
}

/// One memory server.
struct LbMs {
    host: Words,
    dev: Words,
    alloc: Mutex<ChunkAllocator>,
    rpc: RwLock<RpcRegistry>,
}

struct Shared {
    cfg: LoopbackConfig,
    ms: Vec<LbMs>,
    t0: Instant,
}

/// A loopback cluster. Cheap to clone (an `Arc` inside); `Send + Sync`.
#[derive(Clone)]
pub struct LoopbackFabric {
    s: Arc<Shared>,
}

impl LoopbackFabric {
    /// Builds `cfg.num_ms` memory servers with zeroed regions.
    pub fn new(cfg: LoopbackConfig) -> Self {
        let ms = (0..cfg.num_ms)
            .map(|_| LbMs {
                host: Words::zeroed(cfg.ms.region_bytes),
                dev: Words::zeroed(cfg.ms.device_bytes),
                alloc: Mutex::new(ChunkAllocator::new(&cfg.ms)),
                rpc: RwLock::new(RpcRegistry::with_builtins()),
            })
            .collect();
        let t0 = Instant::now();
        LoopbackFabric {
            s: Arc::new(Shared { cfg, ms, t0 }),
        }
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

    fn execute(&self, verb: Verb) -> Result<VerbOutput, VerbError> {
        match verb {
            Verb::Read { addr, len } => self.read(addr, len as usize).map(VerbOutput::Read),
            Verb::Write { addr, data } => self.write(addr, &data).map(|()| VerbOutput::Write),
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
                h(&mut LbView { s: self, ms }, &payload).map(VerbOutput::Rpc)
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
    fn charge_cpu(&mut self, _ns: u64) {}
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

/// One core's QPs and CQ on the loopback fabric. `Send`, not shared.
pub struct LoopbackQueues {
    s: Arc<Shared>,
    /// Completions in posting order. `cq[cq_head..]` are not polled yet;
    /// the ones before `cq_head` were moved out bitwise by `poll_cq` and are
    /// never read or dropped again. A batch off the front moves neither the
    /// rest (as draining a `Vec` would) nor each completion through a
    /// temporary (as `VecDeque::drain` did: its 16-byte loads of the
    /// temporary could not be forwarded from the narrower stores that wrote
    /// it, the hottest instruction of a loopback verb switch in `perf`).
    cq: Vec<Completion>,
    cq_head: usize,
    broken: Vec<bool>,
}

impl LoopbackQueues {
    /// Fault injection: puts this core's QP to `ms` in the error state; every
    /// later WR to `ms` completes with [`VerbError::QpError`].
    pub fn break_qp(&mut self, ms: u16) {
        if let Some(b) = self.broken.get_mut(ms as usize) {
            *b = true;
        }
    }

    /// Re-creates the QP to `ms` (leaves the error state).
    pub fn reset_qp(&mut self, ms: u16) {
        if let Some(b) = self.broken.get_mut(ms as usize) {
            *b = false;
        }
    }
}

impl Drop for LoopbackQueues {
    fn drop(&mut self) {
        // Drop only the completions not polled yet (see `cq`).
        let (head, len) = (self.cq_head, self.cq.len());
        // SAFETY: `cq[..head]` were moved out; `cq[head..len]` are owned
        // here and dropped exactly once, after the length is cleared so a
        // panicking drop cannot reach them again.
        unsafe {
            self.cq.set_len(0);
            let p = self.cq.as_mut_ptr();
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(p.add(head), len - head));
        }
    }
}

impl Queues for LoopbackQueues {
    fn post_list(&mut self, ms: u16, wrs: &mut Vec<WorkRequest>) {
        let broken = self.broken.get(ms as usize).copied().unwrap_or(false);
        self.cq.reserve(wrs.len());
        for wr in wrs.drain(..) {
            let n = self.cq.len();
            // SAFETY: `reserve` made room for `wrs.len()` more completions;
            // slot `n` is written whole (both fields) before the length
            // covers it. The result is written in place rather than pushed:
            // a completion built on the stack and then copied into the CQ
            // made wide loads of narrow stores the CPU could not forward.
            unsafe {
                let dst = self.cq.as_mut_ptr().add(n);
                std::ptr::addr_of_mut!((*dst).wr_id).write(wr.wr_id);
                let result = std::ptr::addr_of_mut!((*dst).result);
                if broken {
                    result.write(Err(VerbError::QpError { ms }));
                } else {
                    result.write(self.s.execute(wr.verb));
                }
                self.cq.set_len(n + 1);
            }
        }
    }

    fn poll_cq(&mut self, out: &mut Vec<Completion>, max: usize) -> usize {
        let n = (self.cq.len() - self.cq_head).min(max);
        out.reserve(n);
        // SAFETY: `cq[cq_head..cq_head + n]` are initialised and not polled
        // yet; they are copied bitwise into `out`'s reserved spare capacity
        // and `cq_head` moves past them, so they are owned by `out` alone
        // (see the field docs). Nothing here can panic between the copy and
        // the length updates.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.cq.as_ptr().add(self.cq_head),
                out.as_mut_ptr().add(out.len()),
                n,
            );
            out.set_len(out.len() + n);
        }
        self.cq_head += n;
        if self.cq_head == self.cq.len() {
            // SAFETY: every element was moved out; forget them all.
            unsafe { self.cq.set_len(0) };
            self.cq_head = 0;
        } else if self.cq_head >= 1024 && 2 * self.cq_head >= self.cq.len() {
            // A CQ that is never drained to empty (new WRs posted between
            // partial polls) would otherwise grow for ever: move the unpolled
            // rest to the front (amortised: at least as many were polled).
            let rest = self.cq.len() - self.cq_head;
            // SAFETY: moves the owned `cq[head..len]` bitwise to `cq[..rest]`
            // (`copy` allows the overlap) and forgets the old places.
            unsafe {
                let p = self.cq.as_mut_ptr();
                std::ptr::copy(p.add(self.cq_head), p, rest);
                self.cq.set_len(rest);
            }
            self.cq_head = 0;
        }
        n
    }

    fn clock(&self) -> Clock {
        Clock::Wall(self.s.t0)
    }

    fn charge_cpu(&mut self, _ns: u64) {}

    fn cpu_cost(&self) -> CpuCost {
        CpuCost::default()
    }
}

#[cfg(test)]
mod tests {
    /// Partial polls, posts between them, the compaction of a CQ that never
    /// drains to empty, and a drop with results left in the CQ: every
    /// completion comes out once, in order, and nothing is dropped twice.
    #[test]
    fn cq_partial_polls_keep_order_and_ownership() {
        let f = fab(1, 1 << 20, false);
        let mut q = f.open_queues(0, 0);
        let (mut next, mut seen, mut out) = (0u64, 0u64, Vec::new());
        for round in 0..200 {
            let mut wrs: Vec<_> = (0..37)
                .map(|_| {
                    next += 1;
                    WorkRequest {
                        wr_id: next,
                        verb: Verb::Read {
                            addr: GlobalAddr::new(0, 4096),
                            len: 16,
                        },
                    }
                })
                .collect();
            q.post_list(0, &mut wrs);
            // Take fewer than were posted: the CQ never empties.
            q.poll_cq(&mut out, 30 + round % 7);
            for c in out.drain(..) {
                seen += 1;
                assert_eq!(c.wr_id, seen);
                assert_eq!(c.result.unwrap(), VerbOutput::Read(vec![0; 16]));
            }
        }
        assert!(q.cq.len() < 4096, "the CQ is compacted: {}", q.cq.len());
        assert!(next - seen > 100);
        q.poll_cq(&mut out, 5);
        assert_eq!(out.len(), 5);
        drop(q); // drops the unpolled rest
        drop(out);
    }

    use super::*;
    use crate::ms::{RPC_ALLOC_CHUNK, SUPERBLOCK_BYTES};
    use VerbError as E;
    use VerbOutput::{Atomic, Read, Rpc};

    fn fab(num_ms: u16, region_bytes: u64, masked_cas: bool) -> LoopbackFabric {
        let ms = MsConfig {
            region_bytes,
            chunk_bytes: 1024,
            device_bytes: 64,
            cores: 1,
        };
        LoopbackFabric::new(LoopbackConfig {
            num_ms,
            ms,
            masked_cas,
        })
    }

    /// Posts one WR and returns its completion's result.
    fn run(q: &mut LoopbackQueues, verb: Verb) -> Result<VerbOutput, VerbError> {
        q.post_list(verb.ms(), &mut vec![WorkRequest { wr_id: 7, verb }]);
        let mut out = Vec::new();
        assert_eq!(q.poll_cq(&mut out, 8), 1);
        assert_eq!(out[0].wr_id, 7);
        out.pop().unwrap().result
    }
    fn rd(q: &mut LoopbackQueues, addr: GlobalAddr, len: u32) -> Vec<u8> {
        match run(q, Verb::Read { addr, len }) {
            Ok(Read(b)) => b,
            r => panic!("{r:?}"),
        }
    }
    fn wr(q: &mut LoopbackQueues, addr: GlobalAddr, data: Vec<u8>) {
        assert_eq!(run(q, Verb::Write { addr, data }), Ok(VerbOutput::Write));
    }
    fn mcas(addr: GlobalAddr, expect: u64, swap: u64, compare_mask: u64, swap_mask: u64) -> Verb {
        Verb::MaskedCas {
            addr,
            expect,
            swap,
            compare_mask,
            swap_mask,
        }
    }
    fn rpc(ms: u16, handler: u16, payload: Vec<u8>) -> Verb {
        Verb::Rpc {
            ms,
            handler,
            payload,
        }
    }

    #[test]
    fn round_trip_unaligned_offsets_and_lengths() {
        let f = fab(1, 1 << 16, true);
        let mut q = f.open_queues(0, 0);
        let base = GlobalAddr::new(0, 64);
        for off in 0..17u64 {
            for len in 0..25usize {
                wr(&mut q, base, vec![0xaa; 64]);
                let data: Vec<u8> = (1..=len as u8).collect();
                wr(&mut q, base.add(8 + off), data.clone());
                let mut want = vec![0xaa; 64];
                want[8 + off as usize..][..len].copy_from_slice(&data);
                assert_eq!(rd(&mut q, base, 64), want, "off {off} len {len}");
                assert_eq!(rd(&mut q, base.add(8 + off), len as u32), data);
            }
        }
        assert_eq!(rd(&mut q, GlobalAddr::device(0, 61), 3), vec![0; 3]);
    }

    #[test]
    fn concurrent_byte_writes_keep_neighbours() {
        let f = fab(1, 1 << 16, true);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let mut q = f.open_queues(0, t as u16);
                s.spawn(move || {
                    for i in 0..5_000u32 {
                        wr(&mut q, GlobalAddr::new(0, 64 + 3 * t), vec![i as u8; 3]);
                    }
                });
            }
        });
        let mut q = f.open_queues(0, 0);
        assert_eq!(
            rd(&mut q, GlobalAddr::new(0, 64), 12),
            vec![4_999u32 as u8; 12]
        );
    }

    #[test]
    fn writes_on_one_qp_in_posting_order() {
        let f = fab(1, 1 << 16, true);
        let mut q = f.open_queues(0, 0);
        let a = GlobalAddr::new(0, 64);
        let w = |wr_id, addr, data| WorkRequest {
            wr_id,
            verb: Verb::Write { addr, data },
        };
        q.post_list(
            0,
            &mut vec![w(1, a, vec![1; 24]), w(2, a.add(3), vec![2; 16])],
        );
        let mut done = Vec::new();
        assert_eq!(q.poll_cq(&mut done, 1), 1);
        assert_eq!(q.poll_cq(&mut done, 8), 1);
        assert_eq!(done.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [1, 2]);
        let mut want = vec![1; 24];
        want[3..19].fill(2);
        assert_eq!(rd(&mut q, a, 24), want);
    }

    #[test]
    fn faa_and_cas_exact_under_four_threads() {
        let f = fab(1, 1 << 16, true);
        let (x, y) = (GlobalAddr::new(0, 8), GlobalAddr::new(0, 16));
        std::thread::scope(|s| {
            for t in 0..4 {
                let mut q = f.open_queues(0, t);
                s.spawn(move || {
                    for _ in 0..10_000 {
                        run(&mut q, Verb::Faa { addr: x, add: 1 }).unwrap();
                        let mut old = 0;
                        let cas = |old: u64| Verb::Cas {
                            addr: y,
                            expect: old,
                            swap: old + 1,
                        };
                        while let Ok(Atomic(v)) = run(&mut q, cas(old)) {
                            if v == old {
                                break;
                            }
                            old = v;
                        }
                    }
                });
            }
        });
        let mut q = f.open_queues(0, 0);
        assert_eq!(rd(&mut q, x, 8), 40_000u64.to_le_bytes());
        assert_eq!(rd(&mut q, y, 8), 40_000u64.to_le_bytes());
    }

    #[test]
    fn masked_cas_compares_and_swaps_under_masks() {
        let f = fab(1, 1 << 16, true);
        assert!(f.caps().has(Capability::MaskedCas));
        let mut q = f.open_queues(0, 0);
        let a = GlobalAddr::device(0, 8);
        wr(&mut q, a, 0x00ffu64.to_le_bytes().to_vec());
        assert_eq!(
            run(&mut q, mcas(a, 0, 0x1100, 0xff00, 0xff00)),
            Ok(Atomic(0xff))
        );
        assert_eq!(
            run(&mut q, mcas(a, 0, 0x2200, 0xff00, 0xff00)),
            Ok(Atomic(0x11ff))
        );
        assert_eq!(rd(&mut q, a, 8), 0x11ffu64.to_le_bytes());
    }

    #[test]
    fn typed_errors() {
        let f = fab(2, 1 << 16, false);
        assert!(!f.caps().has(Capability::MaskedCas));
        let mut q = f.open_queues(0, 0);
        for (addr, len) in [
            (GlobalAddr::new(0, (1 << 16) - 4), 8),
            (GlobalAddr::new(2, 0), 8),
            (GlobalAddr::device(0, 60), 8),
            (GlobalAddr::NULL, 1),
        ] {
            let r = run(&mut q, Verb::Read { addr, len });
            assert_eq!(
                r,
                Err(E::OutOfBounds {
                    addr,
                    len: len as u64
                })
            );
        }
        let far = GlobalAddr::new(0, 1 << 16);
        assert!(matches!(
            run(&mut q, Verb::Faa { addr: far, add: 1 }),
            Err(E::OutOfBounds { .. })
        ));
        let addr = GlobalAddr::new(0, 4);
        let mis = Verb::Cas {
            addr,
            expect: 0,
            swap: 1,
        };
        assert_eq!(run(&mut q, mis), Err(E::Misaligned { addr }));
        assert_eq!(
            run(&mut q, Verb::Faa { addr, add: 1 }),
            Err(E::Misaligned { addr })
        );
        let m = mcas(GlobalAddr::new(0, 8), 0, 1, 1, 1);
        assert_eq!(run(&mut q, m), Err(E::Unsupported(Capability::MaskedCas)));
        q.break_qp(1);
        let a1 = GlobalAddr::new(1, 0);
        assert_eq!(
            run(&mut q, Verb::Read { addr: a1, len: 8 }),
            Err(E::QpError { ms: 1 })
        );
        assert_eq!(run(&mut q, rpc(1, 0, vec![])), Err(E::QpError { ms: 1 }));
        assert_eq!(
            rd(&mut q, GlobalAddr::new(0, 0), 8),
            [0; 8],
            "other QPs unaffected"
        );
        q.reset_qp(1);
        assert_eq!(rd(&mut q, a1, 8), [0; 8]);
        let unknown = E::UnknownRpc { ms: 0, handler: 99 };
        assert_eq!(run(&mut q, rpc(0, 99, vec![])), Err(unknown));
        let nowhere = E::OutOfBounds {
            addr: GlobalAddr::new(9, 0),
            len: 0,
        };
        assert_eq!(run(&mut q, rpc(9, 0, vec![])), Err(nowhere));
    }

    #[test]
    fn chunk_rpc_until_out_of_memory() {
        let f = fab(1, SUPERBLOCK_BYTES + 2048 + 100, true);
        let mut q = f.open_queues(0, 0);
        assert_eq!(f.ms_bytes_used(0), SUPERBLOCK_BYTES);
        for i in 0..2 {
            let a = GlobalAddr::new(0, SUPERBLOCK_BYTES + i * 1024);
            let want = Rpc(a.to_u64().to_le_bytes().to_vec());
            assert_eq!(run(&mut q, rpc(0, RPC_ALLOC_CHUNK, vec![])), Ok(want));
        }
        let oom = run(&mut q, rpc(0, RPC_ALLOC_CHUNK, vec![]));
        assert_eq!(oom, Err(E::MsOutOfMemory { ms: 0 }));
        assert_eq!(f.ms_bytes_used(0), SUPERBLOCK_BYTES + 2048);
    }

    #[test]
    fn custom_rpc_reads_and_writes_ms_memory() {
        let f = fab(2, 1 << 16, true);
        // Adds 1 to the word at the payload's offset, writes 9s after it and
        // returns the new value.
        f.register_rpc(
            5,
            Arc::new(|m: &mut dyn MsMemory, req: &[u8]| {
                let a = GlobalAddr::new(m.ms_id(), u64::from_le_bytes(req.try_into().unwrap()));
                let old = m.faa(a, 1)?;
                assert_eq!(m.cas(a, old + 1, old + 1)?, old + 1);
                m.write(a.add(9), &[9; 7])?;
                m.charge_cpu(100);
                m.read(a, 16)
            }),
        );
        // Touches another MS's memory, which a handler cannot.
        f.register_rpc(
            6,
            Arc::new(|m: &mut dyn MsMemory, _: &[u8]| m.read(GlobalAddr::new(1, 0), 8)),
        );
        let mut q = f.open_queues(0, 0);
        for ms in 0..2 {
            for n in 1..3u8 {
                let r = run(&mut q, rpc(ms, 5, 64u64.to_le_bytes().to_vec()));
                let want = [[n, 0, 0, 0, 0, 0, 0, 0], [0, 9, 9, 9, 9, 9, 9, 9]].concat();
                assert_eq!(r, Ok(Rpc(want.clone())));
                assert_eq!(rd(&mut q, GlobalAddr::new(ms, 64), 16), want);
            }
        }
        let other = GlobalAddr::new(1, 0);
        assert_eq!(
            run(&mut q, rpc(0, 6, vec![])),
            Err(E::OutOfBounds {
                addr: other,
                len: 8
            })
        );
        assert_eq!(rd(&mut q, other, 8), [0; 8]);
        // Re-registering replaces the handler on every MS.
        f.register_rpc(
            5,
            Arc::new(|m: &mut dyn MsMemory, _: &[u8]| Ok(vec![m.ms_id() as u8])),
        );
        assert_eq!(run(&mut q, rpc(1, 5, vec![])), Ok(Rpc(vec![1])));
    }

    #[test]
    fn default_fabric_is_lazy_and_reports_itself() {
        fn assert_send<T: Send>(_: &T) {}
        let f = LoopbackFabric::new(LoopbackConfig::default());
        assert_eq!((f.kind(), f.num_ms()), (FabricKind::Loopback, 1));
        let caps = f.caps();
        assert!(caps.masked_cas);
        assert_eq!(caps.device_memory_bytes, MsConfig::default().device_bytes);
        let mut q = f.open_queues(0, 0);
        assert_send(&q);
        assert_eq!(q.cpu_cost(), CpuCost::default());
        q.charge_cpu(1_000_000);
        let end = GlobalAddr::new(0, MsConfig::default().region_bytes - 8);
        wr(&mut q, end, vec![5; 8]);
        assert_eq!(rd(&mut q, end, 8), [5; 8]);
        let t = q.now_ns();
        assert!(q.clock().now_ns() >= t);
    }
}
