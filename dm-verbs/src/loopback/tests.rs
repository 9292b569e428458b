//! Tests of the loopback backend: unaligned and racing copies, per-QP order,
//! exact atomics under threads, masked CAS, typed errors, RPCs, and the CQ's
//! ownership across partial polls.

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

use super::{LoopbackConfig, LoopbackFabric, LoopbackQueues};
use crate::ms::{RPC_ALLOC_CHUNK, RPC_FREE_CHUNK, SUPERBLOCK_BYTES};
use crate::{
    Capability, CpuCost, Fabric, FabricKind, GlobalAddr, MsConfig, MsMemory, Queues, Verb,
    VerbError, VerbOutput, WorkRequest,
};
use std::sync::Arc;
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

/// A returned chunk is handed out again before the region's next one; a
/// chunk that is not handed out, or returned twice, is refused.
#[test]
fn a_returned_chunk_is_reused_and_a_bad_return_refused() {
    let f = fab(2, SUPERBLOCK_BYTES + 3 * 1024, true);
    let mut q = f.open_queues(0, 0);
    let alloc = |q: &mut _| match run(q, rpc(0, RPC_ALLOC_CHUNK, vec![])) {
        Ok(Rpc(r)) => u64::from_le_bytes(r[..8].try_into().unwrap()),
        other => panic!("{other:?}"),
    };
    let free = |q: &mut _, a: u64| run(q, rpc(0, RPC_FREE_CHUNK, a.to_le_bytes().to_vec()));
    let (a, b) = (alloc(&mut q), alloc(&mut q));
    assert_eq!(free(&mut q, a), Ok(Rpc(vec![])));
    assert_eq!(f.ms_bytes_used(0), SUPERBLOCK_BYTES + 1024);
    let refused = |r: Result<_, E>| {
        matches!(
            r,
            Err(E::RpcFailed {
                ms: 0,
                handler: RPC_FREE_CHUNK,
                ..
            })
        )
    };
    assert!(refused(free(&mut q, a)), "returned twice");
    assert!(refused(free(&mut q, b + 8)), "not a chunk's start");
    assert!(
        refused(free(
            &mut q,
            GlobalAddr::new(0, SUPERBLOCK_BYTES + 2048).to_u64()
        )),
        "never handed out"
    );
    assert!(
        refused(free(&mut q, GlobalAddr::new(1, SUPERBLOCK_BYTES).to_u64())),
        "another MS's"
    );
    assert!(
        refused(run(&mut q, rpc(0, RPC_FREE_CHUNK, vec![1, 2]))),
        "short request"
    );
    assert_eq!(alloc(&mut q), a, "the returned chunk first");
    assert_eq!(
        alloc(&mut q),
        GlobalAddr::new(0, SUPERBLOCK_BYTES + 2048).to_u64()
    );
    assert_eq!(
        run(&mut q, rpc(0, RPC_ALLOC_CHUNK, vec![])),
        Err(E::MsOutOfMemory { ms: 0 })
    );
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
    // A handler that panics completes its RPC with the panic, not never.
    f.register_rpc(
        7,
        Arc::new(|_: &mut dyn MsMemory, _: &[u8]| panic!("a bug")),
    );
    match run(&mut q, rpc(0, 7, vec![])) {
        Err(E::RpcFailed {
            ms: 0,
            handler: 7,
            reason,
        }) => {
            assert!(reason.contains("panicked: a bug"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
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
