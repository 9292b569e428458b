//! The `rdma` backend against in-process memory servers on a real RDMA device.
//! Ignored by default (needs a device): `scripts/test-rdma.sh` runs them in the
//! soft-RoCE guest with `--ignored`. No sleeps, no clocks: each wait is a
//! busy poll of the CQ until the completion arrives.
#![cfg(feature = "rdma")]

use dm_verbs::ms::{RpcRegistry, RPC_ALLOC_CHUNK, SUPERBLOCK_BYTES};
use dm_verbs::rdma::server::{MemServer, MemServerConfig};
use dm_verbs::rdma::{parse_ms_list, RdmaConfig, RdmaFabric, RdmaQueues};
use dm_verbs::{
    Capability, Fabric, GlobalAddr, MsConfig, Queues, Verb, VerbError, VerbOutput, WorkRequest,
};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

const CHUNK: u64 = 64 << 10;

struct Ms {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    h: Option<JoinHandle<()>>,
}

impl Ms {
    fn start(id: u16, chunks: u64) -> Ms {
        Ms::start_with(id, chunks, 0)
    }

    /// A memory server that offers `device_bytes` of device memory if its
    /// NIC has them.
    fn start_with(id: u16, chunks: u64, device_bytes: u64) -> Ms {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let st = stop.clone();
        let h = std::thread::spawn(move || {
            let cfg = MemServerConfig {
                ms_id: id,
                ms: MsConfig {
                    region_bytes: SUPERBLOCK_BYTES + chunks * CHUNK,
                    chunk_bytes: CHUNK,
                    device_bytes,
                    cores: 1,
                },
                ..Default::default()
            };
            let mut s = MemServer::bind(cfg, RpcRegistry::with_builtins(), "127.0.0.1:0")
                .expect("memory server");
            tx.send(s.local_addr().unwrap()).unwrap();
            s.run(&st).unwrap();
        });
        Ms {
            addr: rx.recv().unwrap(),
            stop,
            h: Some(h),
        }
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.h.take().unwrap().join().unwrap();
    }
}

fn fabric(ms: &[&Ms]) -> RdmaFabric {
    let addrs: Vec<SocketAddr> = ms.iter().map(|m| m.addr).collect();
    RdmaFabric::connect(RdmaConfig::default(), &addrs).expect("connect")
}

/// Waits (busy-polling the CQ) until `n` completions arrived; returns them in CQ order.
fn wait(q: &mut RdmaQueues, n: usize) -> Vec<(u64, Result<VerbOutput, VerbError>)> {
    let mut out = Vec::new();
    while out.len() < n {
        q.poll_cq(&mut out, 64);
    }
    out.into_iter().map(|c| (c.wr_id, c.result)).collect()
}

fn run(q: &mut RdmaQueues, verb: Verb) -> Result<VerbOutput, VerbError> {
    q.post_list(verb.ms(), &mut vec![WorkRequest { wr_id: 1, verb }]);
    wait(q, 1).pop().unwrap().1
}

fn rpc(ms: u16, handler: u16) -> Verb {
    Verb::Rpc {
        ms,
        handler,
        payload: vec![],
    }
}

#[test]
#[ignore = "needs an RDMA device: run in the soft-RoCE guest (scripts/test-rdma.sh)"]
fn verbs_post_lists_rpcs_and_typed_errors() {
    let (m0, m1) = (Ms::start(0, 3), Ms::start(1, 3));
    let f = fabric(&[&m0, &m1]);
    assert_eq!(f.num_ms(), 2);
    assert!(!f.caps().has(Capability::DeviceMemory));
    assert!(!f.caps().has(Capability::MaskedCas));
    assert_eq!(f.ms_config().chunk_bytes, CHUNK);
    let mut q = f.try_open_queues(0, 0).unwrap();
    // Chunks until the MS runs out of memory.
    for i in 0..3 {
        let want = GlobalAddr::new(1, SUPERBLOCK_BYTES + i * CHUNK);
        let got = run(&mut q, rpc(1, RPC_ALLOC_CHUNK));
        assert_eq!(
            got,
            Ok(VerbOutput::Rpc(want.to_u64().to_le_bytes().to_vec()))
        );
    }
    assert_eq!(
        run(&mut q, rpc(1, RPC_ALLOC_CHUNK)),
        Err(VerbError::MsOutOfMemory { ms: 1 })
    );
    assert_eq!(
        run(&mut q, rpc(0, 77)),
        Err(VerbError::UnknownRpc { ms: 0, handler: 77 })
    );
    // WRITE inline and through staging, READ back, atomics.
    let a = GlobalAddr::new(0, 8192);
    for len in [5usize, 128, 129, 4096, 100_000] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        let w = run(
            &mut q,
            Verb::Write {
                addr: a.add(3),
                data: data.clone(),
            },
        );
        assert_eq!(w, Ok(VerbOutput::Write), "len {len}");
        let r = run(
            &mut q,
            Verb::Read {
                addr: a.add(3),
                len: len as u32,
            },
        );
        assert_eq!(r, Ok(VerbOutput::Read(data)), "len {len}");
    }
    let c = GlobalAddr::new(1, 64);
    let cas = |expect, swap| Verb::Cas {
        addr: c,
        expect,
        swap,
    };
    assert_eq!(run(&mut q, cas(0, 5)), Ok(VerbOutput::Atomic(0)));
    assert_eq!(run(&mut q, cas(0, 9)), Ok(VerbOutput::Atomic(5)));
    assert_eq!(
        run(&mut q, Verb::Faa { addr: c, add: 10 }),
        Ok(VerbOutput::Atomic(5))
    );
    assert_eq!(
        run(&mut q, Verb::Read { addr: c, len: 8 }),
        Ok(VerbOutput::Read(15u64.to_le_bytes().to_vec()))
    );
    // One post list (one doorbell) of 200 WRs: in order, every one completed.
    let b = GlobalAddr::new(0, 4096);
    let mut list: Vec<WorkRequest> = (0..199u64)
        .map(|i| WorkRequest {
            wr_id: 100 + i,
            verb: if i % 2 == 0 {
                Verb::Write {
                    addr: b,
                    data: i.to_le_bytes().to_vec(),
                }
            } else {
                Verb::Faa {
                    addr: b.add(8),
                    add: 1,
                }
            },
        })
        .collect();
    list.push(WorkRequest {
        wr_id: 999,
        verb: Verb::Read { addr: b, len: 16 },
    });
    q.post_list(0, &mut list);
    let done = wait(&mut q, 200);
    let mut ids: Vec<u64> = done.iter().map(|d| d.0).collect();
    ids.sort();
    assert_eq!(ids, (100..299).chain([999]).collect::<Vec<_>>());
    assert!(done.iter().all(|d| d.1.is_ok()));
    let last = done.iter().find(|d| d.0 == 999).unwrap().1.clone();
    let want = [198u64.to_le_bytes(), 99u64.to_le_bytes()].concat();
    assert_eq!(last, Ok(VerbOutput::Read(want)));
    // Errors found before posting leave the QP intact.
    let mis = GlobalAddr::new(0, 4100);
    assert_eq!(
        run(&mut q, Verb::Faa { addr: mis, add: 1 }),
        Err(VerbError::Misaligned { addr: mis })
    );
    let far = GlobalAddr::new(0, SUPERBLOCK_BYTES + 3 * CHUNK - 4);
    assert_eq!(
        run(&mut q, Verb::Read { addr: far, len: 8 }),
        Err(VerbError::OutOfBounds { addr: far, len: 8 })
    );
    let m = Verb::MaskedCas {
        addr: c,
        expect: 0,
        swap: 0,
        compare_mask: 1,
        swap_mask: 1,
    };
    assert_eq!(
        run(&mut q, m),
        Err(VerbError::Unsupported(Capability::MaskedCas))
    );
    assert!(!q.qp_broken(0) && !q.qp_broken(1));
    drop(q);
    let (mut m0, mut m1) = (m0, m1);
    m0.stop();
    m1.stop();
}

#[test]
#[ignore = "needs an RDMA device: run in the soft-RoCE guest (scripts/test-rdma.sh)"]
fn wrong_rkey_and_dead_memory_server_fail_without_hanging() {
    let (mut m0, mut m1) = (Ms::start(0, 2), Ms::start(1, 2));
    let f = fabric(&[&m0, &m1]);
    let mut q = f.try_open_queues(0, 0).unwrap();
    let a0 = GlobalAddr::new(0, 4096);
    let a1 = GlobalAddr::new(1, 4096);
    assert!(run(&mut q, Verb::Read { addr: a0, len: 8 }).is_ok());
    // Wrong rkey: a remote access error, then the QP is broken for good.
    q.set_rkey(0, 0x1234_5678);
    let mut list = vec![
        WorkRequest {
            wr_id: 1,
            verb: Verb::Read { addr: a0, len: 8 },
        },
        WorkRequest {
            wr_id: 2,
            verb: Verb::Faa { addr: a0, add: 1 },
        },
    ];
    q.post_list(0, &mut list);
    let done = wait(&mut q, 2);
    assert_eq!(
        done[0],
        (1, Err(VerbError::OutOfBounds { addr: a0, len: 8 }))
    );
    assert_eq!(done[1], (2, Err(VerbError::QpError { ms: 0 })));
    assert!(q.qp_broken(0));
    assert_eq!(
        run(&mut q, Verb::Read { addr: a0, len: 8 }),
        Err(VerbError::QpError { ms: 0 })
    );
    assert_eq!(
        run(&mut q, rpc(0, RPC_ALLOC_CHUNK)),
        Err(VerbError::QpError { ms: 0 })
    );
    // The other QP is unaffected.
    assert!(run(&mut q, Verb::Read { addr: a1, len: 8 }).is_ok());
    // A memory server that goes away: its QP breaks, the WR errors.
    m1.stop();
    let r = run(&mut q, Verb::Read { addr: a1, len: 8 });
    assert_eq!(r, Err(VerbError::QpError { ms: 1 }));
    assert!(q.qp_broken(1));
    drop(q);
    m0.stop();
    // A memory server that is not there: a setup error, not a panic.
    let gone = parse_ms_list(&m1.addr.to_string()).unwrap();
    assert!(RdmaFabric::connect(RdmaConfig::default(), &gone).is_err());
}

/// Device memory (Sherman §4.3's on-chip lock table): a memory server asked
/// for 64 KiB offers it if the NIC has that much (`ibv_alloc_dm`), and then
/// one-sided verbs on device addresses work as on host memory; on a NIC
/// without it (rxe) the capability is absent and device addresses are out
/// of bounds, an error and not a hang.
#[test]
#[ignore = "needs an RDMA device: run in the soft-RoCE guest (scripts/test-rdma.sh)"]
fn device_memory_when_the_nic_has_it() {
    let mut m = Ms::start_with(0, 1, 64 << 10);
    let f = fabric(&[&m]);
    let mut q = f.try_open_queues(0, 0).unwrap();
    let d = GlobalAddr::device(0, 64);
    let n = f.caps().device_memory_bytes;
    eprintln!("device memory offered: {n} bytes");
    if n == 0 {
        assert!(!f.caps().has(Capability::DeviceMemory));
        assert_eq!(f.ms_config().device_bytes, 0);
        assert_eq!(
            run(&mut q, Verb::Read { addr: d, len: 8 }),
            Err(VerbError::OutOfBounds { addr: d, len: 8 })
        );
    } else {
        assert!(n >= 64 << 10);
        assert_eq!(f.ms_config().device_bytes, n);
        let cas = |expect, swap| Verb::Cas {
            addr: d,
            expect,
            swap,
        };
        assert_eq!(run(&mut q, cas(0, 5)), Ok(VerbOutput::Atomic(0)));
        assert_eq!(run(&mut q, cas(0, 9)), Ok(VerbOutput::Atomic(5)));
        assert_eq!(
            run(&mut q, Verb::Faa { addr: d, add: 10 }),
            Ok(VerbOutput::Atomic(5))
        );
        let w = GlobalAddr::device(0, 128);
        let data: Vec<u8> = (0..64u8).collect();
        assert_eq!(
            run(
                &mut q,
                Verb::Write {
                    addr: w,
                    data: data.clone()
                }
            ),
            Ok(VerbOutput::Write)
        );
        assert_eq!(
            run(&mut q, Verb::Read { addr: w, len: 64 }),
            Ok(VerbOutput::Read(data))
        );
        assert_eq!(
            run(&mut q, Verb::Read { addr: d, len: 8 }),
            Ok(VerbOutput::Read(15u64.to_le_bytes().to_vec()))
        );
        let past = GlobalAddr::device(0, n);
        assert_eq!(
            run(&mut q, Verb::Read { addr: past, len: 8 }),
            Err(VerbError::OutOfBounds { addr: past, len: 8 })
        );
    }
    // Host memory is unaffected.
    let h = GlobalAddr::new(0, 64);
    assert_eq!(
        run(&mut q, Verb::Faa { addr: h, add: 1 }),
        Ok(VerbOutput::Atomic(0))
    );
    drop(q);
    m.stop();
}

/// The promise every index relies on (docs/rdma-guest-findings.md, "READs that tear
/// inside a word"): a READ longer than a word that races CASes on one of
/// its words returns each word whole, old or new, never a mix. One thread
/// swaps a word between two values by CAS while another READs the
/// 2,064 bytes around it (a 256-slot radix node) 50,000 times. Real RNICs
/// read whole cache lines; soft-RoCE copies a READ's payload with the
/// kernel's `memcpy`, which in a TCG guest whose CPU has ERMS/FSRM
/// (`-cpu max`) moves bytes: 104 of 300,000 such READs returned a word
/// with bytes of both values (2026-11-27), and a radix walk followed one
/// into memory that never validated. `run-guest.sh` boots the guest
/// without those features.
#[test]
#[ignore = "needs an RDMA device: run in the soft-RoCE guest (scripts/test-rdma.sh)"]
fn a_long_read_racing_cases_returns_each_word_whole() {
    const A: u64 = 0x0102_0304_0506_0708;
    const B: u64 = 0xf1f2_f3f4_f5f6_f7f8;
    const LEN: u32 = 2064;
    const AT: usize = 1000;
    let mut m0 = Ms::start(0, 3);
    let f = Arc::new(fabric(&[&m0]));
    let base = GlobalAddr::new(0, 8192);
    let a = base.add(AT as u64);
    let mut q = f.try_open_queues(0, 0).unwrap();
    let w = run(
        &mut q,
        Verb::Write {
            addr: a,
            data: A.to_le_bytes().to_vec(),
        },
    );
    assert_eq!(w, Ok(VerbOutput::Write));
    let stop = Arc::new(AtomicBool::new(false));
    let (f2, st) = (f.clone(), stop.clone());
    let swapper = std::thread::spawn(move || {
        let mut q = f2.try_open_queues(0, 1).unwrap();
        let (mut cur, mut n) = (A, 0u64);
        while !st.load(Ordering::Relaxed) {
            let next = if cur == A { B } else { A };
            let r = run(
                &mut q,
                Verb::Cas {
                    addr: a,
                    expect: cur,
                    swap: next,
                },
            );
            assert_eq!(r, Ok(VerbOutput::Atomic(cur)));
            cur = next;
            n += 1;
        }
        n
    });
    let mut torn = Vec::new();
    for _ in 0..50_000 {
        let Ok(VerbOutput::Read(b)) = run(
            &mut q,
            Verb::Read {
                addr: base,
                len: LEN,
            },
        ) else {
            panic!("READ failed");
        };
        let v = u64::from_le_bytes(b[AT..AT + 8].try_into().unwrap());
        if v != A && v != B {
            torn.push(v);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let cases = swapper.join().unwrap();
    assert!(cases > 1000, "only {cases} CASes raced the READs");
    assert!(
        torn.is_empty(),
        "{} of 50000 READs returned the word torn (first {:#x}, values {A:#x} and {B:#x}); \
         is the guest CPU model copying with rep movsb (run-guest.sh)?",
        torn.len(),
        torn[0]
    );
    drop(q);
    m0.stop();
}
