//! `loopback`: real threads, real time. Each memory server's host and device
//! regions are memory of this process; verbs execute against it in the posting
//! thread, so races between cores are real races. This is where CPU cost per
//! operation is measured.
//!
//! Memory model: regions are arrays of `AtomicU64`. A READ copies word by word
//! with atomic loads; a WRITE stores word by word, and the partial words at
//! unaligned edges are merged with a CAS loop so bytes outside the WRITE are
//! never clobbered. Racing copies are therefore never undefined behaviour, and a
//! READ overlapping a WRITE can see any mix of old and new 8-byte words, as on
//! real RDMA. CAS/FAA/masked CAS are real atomics on aligned words.
//!
//! Verbs complete synchronously inside [`Queues::post_list`] (their completions
//! wait in the core's CQ until polled), so per-QP order is trivially the
//! posting order. RPC handlers run inline in the posting thread.
//!
//! Clock: wall-clock ns since the fabric was created.

use crate::ms::{check_bounds, masked_cas_apply, ChunkAllocator, RpcRegistry};
use crate::{
    Capability, Caps, Clock, Completion, CpuCost, Fabric, FabricKind, GlobalAddr, MsConfig,
    MsMemory, Queues, RpcHandler, Verb, VerbError, VerbOutput, WorkRequest,
};
use std::sync::atomic::{AtomicU64, Ordering};
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
    ptr: *mut AtomicU64,
    len: usize,
}

// SAFETY: `Words` owns its allocation; all access goes through `AtomicU64`.
unsafe impl Send for Words {}
unsafe impl Sync for Words {}

impl Words {
    fn zeroed(bytes: u64) -> Self {
        let len = (bytes as usize).div_ceil(8);
        if len == 0 {
            return Words {
                ptr: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            };
        }
        let layout = std::alloc::Layout::array::<AtomicU64>(len).expect("region too large");
        // SAFETY: layout has non-zero size; all-zero bytes are a valid AtomicU64 (0).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut AtomicU64;
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Words { ptr, len }
    }

    fn as_slice(&self) -> &[AtomicU64] {
        // SAFETY: ptr/len describe our live, initialised (zeroed) allocation.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        if self.len > 0 {
            let layout = std::alloc::Layout::array::<AtomicU64>(self.len).unwrap();
            // SAFETY: allocated in `zeroed` with the same layout.
            unsafe { std::alloc::dealloc(self.ptr as *mut u8, layout) }
        }
    }
}

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

/// A loopback cluster. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct LoopbackFabric {
    s: Arc<Shared>,
}

impl LoopbackFabric {
    pub fn new(cfg: LoopbackConfig) -> Self {
        let ms = (0..cfg.num_ms)
            .map(|_| LbMs {
                host: Words::zeroed(cfg.ms.region_bytes),
                dev: Words::zeroed(cfg.ms.device_bytes),
                alloc: Mutex::new(ChunkAllocator::new(&cfg.ms)),
                rpc: RwLock::new(RpcRegistry::with_builtins()),
            })
            .collect();
        LoopbackFabric {
            s: Arc::new(Shared {
                cfg,
                ms,
                t0: Instant::now(),
            }),
        }
    }

    /// Bytes handed out by MS `ms`'s chunk allocator (superblock included).
    pub fn ms_bytes_used(&self, ms: u16) -> u64 {
        self.s
            .ms
            .get(ms as usize)
            .map_or(0, |m| m.alloc.lock().unwrap().used())
    }
}

impl Shared {
    fn words(&self, addr: GlobalAddr, len: u64) -> Result<(&[AtomicU64], u64), VerbError> {
        let c = &self.cfg;
        let off = check_bounds(addr, len, c.num_ms, c.ms.region_bytes, c.ms.device_bytes)?;
        let m = &self.ms[addr.ms() as usize];
        Ok((
            if addr.is_device() {
                m.dev.as_slice()
            } else {
                m.host.as_slice()
            },
            off,
        ))
    }

    fn read(&self, addr: GlobalAddr, len: usize) -> Result<Vec<u8>, VerbError> {
        let (w, off) = self.words(addr, len as u64)?;
        let mut out = Vec::with_capacity(len);
        let (first, last) = (off / 8, (off + len as u64).div_ceil(8));
        for i in first..last {
            let b = w[i as usize].load(Ordering::Acquire).to_le_bytes();
            let lo = if i == first { (off % 8) as usize } else { 0 };
            let hi = ((off + len as u64 - i * 8).min(8)) as usize;
            out.extend_from_slice(&b[lo..hi]);
        }
        Ok(out)
    }

    fn write(&self, addr: GlobalAddr, data: &[u8]) -> Result<(), VerbError> {
        let (w, off) = self.words(addr, data.len() as u64)?;
        let end = off + data.len() as u64;
        let mut pos = off;
        while pos < end {
            let i = (pos / 8) as usize;
            let lo = (pos % 8) as usize;
            let hi = ((end - (i as u64) * 8).min(8)) as usize;
            let src = &data[(pos - off) as usize..(pos - off) as usize + (hi - lo)];
            if lo == 0 && hi == 8 {
                w[i].store(
                    u64::from_le_bytes(src.try_into().unwrap()),
                    Ordering::Release,
                );
            } else {
                let _ = w[i].fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                    let mut b = old.to_le_bytes();
                    b[lo..hi].copy_from_slice(src);
                    Some(u64::from_le_bytes(b))
                });
            }
            pos = i as u64 * 8 + hi as u64;
        }
        Ok(())
    }

    fn atomic(&self, addr: GlobalAddr, f: impl Fn(u64) -> Option<u64>) -> Result<u64, VerbError> {
        if !addr.local_offset().is_multiple_of(8) {
            return Err(VerbError::Misaligned { addr });
        }
        let (w, off) = self.words(addr, 8)?;
        let a = &w[(off / 8) as usize];
        Ok(
            match a.fetch_update(Ordering::AcqRel, Ordering::Acquire, &f) {
                Ok(old) | Err(old) => old,
            },
        )
    }

    fn execute(&self, verb: Verb) -> Result<VerbOutput, VerbError> {
        match verb {
            Verb::Read { addr, len } => self.read(addr, len as usize).map(VerbOutput::Read),
            Verb::Write { addr, data } => self.write(addr, &data).map(|_| VerbOutput::Write),
            Verb::Cas { addr, expect, swap } => self
                .atomic(addr, |o| (o == expect).then_some(swap))
                .map(VerbOutput::Atomic),
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
                self.atomic(addr, |o| {
                    masked_cas_apply(o, expect, swap, compare_mask, swap_mask)
                })
                .map(VerbOutput::Atomic)
            }
            Verb::Faa { addr, add } => self
                .atomic(addr, |o| Some(o.wrapping_add(add)))
                .map(VerbOutput::Atomic),
            Verb::Rpc {
                ms,
                handler,
                payload,
            } => {
                let Some(m) = self.ms.get(ms as usize) else {
                    return Err(VerbError::OutOfBounds {
                        addr: GlobalAddr::new(ms.min(0x7fff), 0),
                        len: 0,
                    });
                };
                let h = m.rpc.read().unwrap().get(handler).cloned();
                let h = h.ok_or(VerbError::UnknownRpc { ms, handler })?;
                let mut view = LbView { s: self, ms };
                h(&mut view, &payload).map(VerbOutput::Rpc)
            }
        }
    }
}

/// An RPC handler's view of its MS.
struct LbView<'a> {
    s: &'a Shared,
    ms: u16,
}

impl LbView<'_> {
    fn local(&self, addr: GlobalAddr) -> Result<(), VerbError> {
        if addr.ms() == self.ms {
            Ok(())
        } else {
            Err(VerbError::OutOfBounds { addr, len: 0 })
        }
    }
}

impl MsMemory for LbView<'_> {
    fn ms_id(&self) -> u16 {
        self.ms
    }
    fn read(&mut self, addr: GlobalAddr, len: usize) -> Result<Vec<u8>, VerbError> {
        self.local(addr)?;
        self.s.read(addr, len)
    }
    fn write(&mut self, addr: GlobalAddr, data: &[u8]) -> Result<(), VerbError> {
        self.local(addr)?;
        self.s.write(addr, data)
    }
    fn cas(&mut self, addr: GlobalAddr, expect: u64, swap: u64) -> Result<u64, VerbError> {
        self.local(addr)?;
        self.s.atomic(addr, |o| (o == expect).then_some(swap))
    }
    fn faa(&mut self, addr: GlobalAddr, add: u64) -> Result<u64, VerbError> {
        self.local(addr)?;
        self.s.atomic(addr, |o| Some(o.wrapping_add(add)))
    }
    fn alloc_chunk(&mut self) -> Result<GlobalAddr, VerbError> {
        let ms = self.ms;
        match self.s.ms[ms as usize].alloc.lock().unwrap().alloc() {
            Some(off) => Ok(GlobalAddr::new(ms, off)),
            None => Err(VerbError::MsOutOfMemory { ms }),
        }
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
            broken: vec![false; self.s.cfg.num_ms as usize],
        }
    }

    fn register_rpc(&self, id: u16, h: RpcHandler) {
        for m in &self.s.ms {
            m.rpc.write().unwrap().register(id, h.clone());
        }
    }
}

/// One core's QPs and CQ on the loopback fabric. `Send`.
pub struct LoopbackQueues {
    s: Arc<Shared>,
    cq: Vec<Completion>,
    broken: Vec<bool>,
}

impl LoopbackQueues {
    /// Fault injection: puts the QP to `ms` in the error state.
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

impl Queues for LoopbackQueues {
    fn post_list(&mut self, ms: u16, wrs: &mut Vec<WorkRequest>) {
        let broken = self.broken.get(ms as usize).copied().unwrap_or(false);
        for wr in wrs.drain(..) {
            let result = if broken {
                Err(VerbError::QpError { ms })
            } else {
                self.s.execute(wr.verb)
            };
            self.cq.push(Completion {
                wr_id: wr.wr_id,
                result,
            });
        }
    }

    fn poll_cq(&mut self, out: &mut Vec<Completion>, max: usize) -> usize {
        let n = self.cq.len().min(max);
        if n == self.cq.len() {
            out.append(&mut self.cq);
        } else {
            out.extend(self.cq.drain(..n));
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
    use super::*;
    use crate::ms::{RPC_ALLOC_CHUNK, SUPERBLOCK_BYTES};

    fn fab(num_ms: u16, region: u64) -> LoopbackFabric {
        LoopbackFabric::new(LoopbackConfig {
            num_ms,
            ms: MsConfig {
                region_bytes: region,
                chunk_bytes: 1024,
                device_bytes: 64,
                cores: 1,
            },
            masked_cas: false,
        })
    }

    fn run(q: &mut LoopbackQueues, verb: Verb) -> Result<VerbOutput, VerbError> {
        let ms = verb.ms();
        q.post_list(ms, &mut vec![WorkRequest { wr_id: 7, verb }]);
        let mut out = Vec::new();
        assert_eq!(q.poll_cq(&mut out, 8), 1);
        assert_eq!(out[0].wr_id, 7);
        out.pop().unwrap().result
    }

    #[test]
    fn unaligned_round_trip_keeps_neighbours() {
        let f = fab(1, 1 << 16);
        let mut q = f.open_queues(0, 0);
        let a = GlobalAddr::new(0, 100);
        run(
            &mut q,
            Verb::Write {
                addr: a,
                data: vec![0xaa; 40],
            },
        )
        .unwrap();
        run(
            &mut q,
            Verb::Write {
                addr: a.add(3),
                data: (1..=13).collect(),
            },
        )
        .unwrap();
        let got = run(&mut q, Verb::Read { addr: a, len: 40 }).unwrap();
        let mut want = vec![0xaa; 40];
        want[3..16].copy_from_slice(&(1..=13).collect::<Vec<u8>>());
        assert_eq!(got, VerbOutput::Read(want));
        assert_eq!(
            run(
                &mut q,
                Verb::Read {
                    addr: a.add(41),
                    len: 2
                }
            )
            .unwrap(),
            VerbOutput::Read(vec![0, 0])
        );
    }

    #[test]
    fn writes_on_one_qp_in_order() {
        let f = fab(1, 1 << 16);
        let mut q = f.open_queues(0, 0);
        let a = GlobalAddr::new(0, 64);
        let mut wrs = vec![
            WorkRequest {
                wr_id: 1,
                verb: Verb::Write {
                    addr: a,
                    data: vec![1; 16],
                },
            },
            WorkRequest {
                wr_id: 2,
                verb: Verb::Write {
                    addr: a,
                    data: vec![2; 16],
                },
            },
        ];
        q.post_list(0, &mut wrs);
        let mut done = Vec::new();
        assert_eq!(q.poll_cq(&mut done, 8), 2);
        assert_eq!(done.iter().map(|c| c.wr_id).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(
            run(&mut q, Verb::Read { addr: a, len: 16 }),
            Ok(VerbOutput::Read(vec![2; 16]))
        );
    }

    #[test]
    fn atomics_exact_under_threads() {
        let f = fab(1, 1 << 16);
        let (x, y) = (GlobalAddr::new(0, 8), GlobalAddr::new(0, 16));
        std::thread::scope(|s| {
            for _ in 0..4 {
                let f = f.clone();
                s.spawn(move || {
                    let mut q = f.open_queues(0, 0);
                    for _ in 0..10_000 {
                        run(&mut q, Verb::Faa { addr: x, add: 1 }).unwrap();
                        let mut old = 0;
                        loop {
                            match run(
                                &mut q,
                                Verb::Cas {
                                    addr: y,
                                    expect: old,
                                    swap: old + 1,
                                },
                            )
                            .unwrap()
                            {
                                VerbOutput::Atomic(v) if v == old => break,
                                VerbOutput::Atomic(v) => old = v,
                                o => panic!("{o:?}"),
                            }
                        }
                    }
                });
            }
        });
        let mut q = f.open_queues(0, 0);
        assert_eq!(
            run(&mut q, Verb::Faa { addr: x, add: 0 }).unwrap(),
            VerbOutput::Atomic(40_000)
        );
        assert_eq!(
            run(&mut q, Verb::Faa { addr: y, add: 0 }).unwrap(),
            VerbOutput::Atomic(40_000)
        );
    }

    #[test]
    fn typed_errors() {
        let f = fab(1, 1 << 16);
        let mut q = f.open_queues(0, 0);
        let oob = run(
            &mut q,
            Verb::Read {
                addr: GlobalAddr::new(0, (1 << 16) - 4),
                len: 8,
            },
        );
        assert!(matches!(oob, Err(VerbError::OutOfBounds { .. })));
        let mis = run(
            &mut q,
            Verb::Cas {
                addr: GlobalAddr::new(0, 4),
                expect: 0,
                swap: 1,
            },
        );
        assert!(matches!(mis, Err(VerbError::Misaligned { .. })));
        let m = Verb::MaskedCas {
            addr: GlobalAddr::new(0, 8),
            expect: 0,
            swap: 1,
            compare_mask: 1,
            swap_mask: 1,
        };
        assert_eq!(
            run(&mut q, m),
            Err(VerbError::Unsupported(Capability::MaskedCas))
        );
        assert_eq!(
            run(
                &mut q,
                Verb::Cas {
                    addr: GlobalAddr::device(0, 8),
                    expect: 0,
                    swap: 5
                }
            ),
            Ok(VerbOutput::Atomic(0))
        );
        q.break_qp(0);
        assert_eq!(
            run(
                &mut q,
                Verb::Read {
                    addr: GlobalAddr::new(0, 0),
                    len: 8
                }
            ),
            Err(VerbError::QpError { ms: 0 })
        );
        q.reset_qp(0);
        assert!(run(
            &mut q,
            Verb::Read {
                addr: GlobalAddr::new(0, 0),
                len: 8
            }
        )
        .is_ok());
        assert_eq!(
            run(
                &mut q,
                Verb::Rpc {
                    ms: 0,
                    handler: 99,
                    payload: vec![]
                }
            ),
            Err(VerbError::UnknownRpc { ms: 0, handler: 99 })
        );
    }

    #[test]
    fn chunks_until_out_of_memory_and_custom_rpc() {
        let f = fab(1, SUPERBLOCK_BYTES + 2048);
        let mut q = f.open_queues(0, 0);
        let alloc = || Verb::Rpc {
            ms: 0,
            handler: RPC_ALLOC_CHUNK,
            payload: vec![],
        };
        let a = run(&mut q, alloc()).unwrap();
        assert_eq!(
            a,
            VerbOutput::Rpc(
                GlobalAddr::new(0, SUPERBLOCK_BYTES)
                    .to_u64()
                    .to_le_bytes()
                    .to_vec()
            )
        );
        run(&mut q, alloc()).unwrap();
        assert_eq!(
            run(&mut q, alloc()),
            Err(VerbError::MsOutOfMemory { ms: 0 })
        );
        assert_eq!(f.ms_bytes_used(0), SUPERBLOCK_BYTES + 2048);
        // A handler that increments a word and returns it.
        f.register_rpc(
            5,
            Arc::new(|m: &mut dyn MsMemory, req: &[u8]| {
                let a = GlobalAddr::new(m.ms_id(), u64::from_le_bytes(req.try_into().unwrap()));
                let old = m.faa(a, 1)?;
                m.write(a.add(8), &[9; 8])?;
                Ok((old + 1).to_le_bytes().to_vec())
            }),
        );
        let r = run(
            &mut q,
            Verb::Rpc {
                ms: 0,
                handler: 5,
                payload: 64u64.to_le_bytes().to_vec(),
            },
        );
        assert_eq!(r, Ok(VerbOutput::Rpc(1u64.to_le_bytes().to_vec())));
        assert_eq!(
            run(
                &mut q,
                Verb::Read {
                    addr: GlobalAddr::new(0, 72),
                    len: 8
                }
            ),
            Ok(VerbOutput::Read(vec![9; 8]))
        );
    }
}
