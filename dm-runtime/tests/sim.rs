//! Runtime + sim fabric: ordering, atomicity, tearing, determinism, scale,
//! errors, accounting. Local synchronisation is in `sim_sync.rs`.

mod common;

use common::{rt, small_cfg};
use dm_runtime::alloc::ChunkAlloc;
use dm_runtime::{cas, faa, read, write, yield_now, SimCore, SimRuntime};
use dm_verbs::ms::SUPERBLOCK_BYTES;
use dm_verbs::sim::{Faults, TearGranularity};
use dm_verbs::{Fabric, GlobalAddr, VerbError};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

#[test]
fn write_then_write_in_order_per_qp() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let a = GlobalAddr::new(1, 128);
    let out = r.block_on(c, async move {
        // Both WRITEs go out in one post list on the same QP; the second must win.
        let w1 = write(a, vec![1u8; 64]);
        let w2 = write(a, vec![2u8; 64]);
        let (x, y) = futures::join!(w1, w2);
        x.unwrap();
        y.unwrap();
        read(a, 64).await.unwrap()
    });
    assert_eq!(out.unwrap(), vec![2u8; 64]);
    assert_eq!(
        r.executor(c).stats().doorbells,
        2,
        "one doorbell for both WRITEs, one for the READ"
    );
}

#[test]
fn faa_and_cas_are_atomic_across_coroutines() {
    let mut r = rt(small_cfg());
    let a = GlobalAddr::new(0, 256);
    let b = GlobalAddr::new(0, 264);
    let cores: Vec<_> = (0..4).map(|i| r.add_core(i / 2, i % 2)).collect();
    for &c in &cores {
        for _ in 0..50 {
            r.spawn_on(c, async move {
                for _ in 0..20 {
                    faa(a, 1).await.unwrap();
                    loop {
                        let old = u64::from_le_bytes(read(b, 8).await.unwrap().try_into().unwrap());
                        if cas(b, old, old + 1).await.unwrap() == old {
                            break;
                        }
                        yield_now().await;
                    }
                }
            });
        }
    }
    r.run();
    let f = r.fabric();
    assert_eq!(
        u64::from_le_bytes(f.peek(a, 8).unwrap().try_into().unwrap()),
        4 * 50 * 20
    );
    assert_eq!(
        u64::from_le_bytes(f.peek(b, 8).unwrap().try_into().unwrap()),
        4 * 50 * 20
    );
}

/// Writer flips a 1 KiB page between all-0x00 and all-0xFF; readers count pages
/// that are neither (torn).
fn torn_reads(tear: TearGranularity, seed: u64) -> (u64, u64) {
    let mut cfg = small_cfg();
    cfg.seed = seed;
    cfg.faults = Faults {
        tear,
        tear_window_ns: 200,
        ..Default::default()
    };
    let mut r = rt(cfg);
    let page = GlobalAddr::new(0, SUPERBLOCK_BYTES);
    let w = r.add_core(0, 0);
    let rd = r.add_core(1, 0);
    r.spawn_on(w, async move {
        for i in 0..400u32 {
            write(page, vec![if i % 2 == 0 { 0xff } else { 0 }; 1024])
                .await
                .unwrap();
        }
    });
    let torn = Rc::new(RefCell::new((0u64, 0u64)));
    for _ in 0..8 {
        let t = torn.clone();
        r.spawn_on(rd, async move {
            for _ in 0..100 {
                let p = read(page, 1024).await.unwrap();
                let mixed = p.iter().any(|&b| b != p[0]);
                let mut t = t.borrow_mut();
                t.0 += mixed as u64;
                t.1 += 1;
            }
        });
    }
    r.run();
    let x = *torn.borrow();
    x
}

#[test]
fn torn_reads_visible_in_strict_model_and_absent_when_off() {
    let (torn, total) = torn_reads(TearGranularity::Word, 7);
    assert_eq!(total, 800);
    assert!(torn > 0, "strict model must show torn READs");
    let (torn_cl, _) = torn_reads(TearGranularity::CacheLine, 7);
    assert!(torn_cl > 0, "cache-line model must show torn READs");
    let (none, total) = torn_reads(TearGranularity::Off, 7);
    assert_eq!(total, 800);
    assert_eq!(none, 0, "tearing switched off: every READ is a snapshot");
}

/// A sim cluster with `tear`ing, a writer that flips a 512-byte page
/// between all-0x00 and all-0xFF 200 times, and the core to READ it from.
fn flipping_page(tear: TearGranularity) -> (SimRuntime, GlobalAddr, SimCore) {
    let mut cfg = small_cfg();
    cfg.faults = Faults {
        tear,
        tear_window_ns: 200,
        ..Default::default()
    };
    let mut r = rt(cfg);
    let page = GlobalAddr::new(0, SUPERBLOCK_BYTES);
    let w = r.add_core(0, 0);
    let rd = r.add_core(1, 0);
    r.spawn_on(w, async move {
        for i in 0..200u32 {
            write(page, vec![if i % 2 == 0 { 0xff } else { 0 }; 512])
                .await
                .unwrap();
        }
    });
    (r, page, rd)
}

#[test]
fn torn_pieces_follow_granularity() {
    // With 64-byte granularity every cache line of a READ is uniform.
    let (mut r, page, rd) = flipping_page(TearGranularity::CacheLine);
    let h = r.spawn_on(rd, async move {
        let mut bad = 0;
        for _ in 0..200 {
            let p = read(page, 512).await.unwrap();
            bad += p
                .chunks(64)
                .filter(|l| l.iter().any(|&b| b != l[0]))
                .count();
        }
        bad
    });
    r.run();
    assert_eq!(h.try_take().map(Result::unwrap), Some(0));
}

/// `TearGranularity::HalfWord` (soft-RoCE in a TCG guest with ERMS): a
/// READ longer than a word returns words whose two 4-byte halves come from
/// different moments, never a half that mixes; an 8-byte READ stays whole.
#[test]
fn half_word_tears_split_words_of_long_reads_only() {
    let (mut r, page, rd) = flipping_page(TearGranularity::HalfWord);
    let h = r.spawn_on(rd, async move {
        let (mut split_words, mut bad_halves, mut bad_short) = (0, 0, 0);
        for k in 0..400 {
            if k % 2 == 0 {
                let p = read(page, 512).await.unwrap();
                split_words += p.chunks(8).filter(|w| w[0] != w[4]).count();
                bad_halves += p.chunks(4).filter(|h| h.iter().any(|&b| b != h[0])).count();
            } else {
                let p = read(page.add(64), 8).await.unwrap();
                bad_short += p.iter().any(|&b| b != p[0]) as u32;
            }
        }
        (split_words, bad_halves, bad_short)
    });
    r.run();
    let (split_words, bad_halves, bad_short) = h.try_take().unwrap().unwrap();
    assert!(
        split_words > 0,
        "long READs must show words split in halves"
    );
    assert_eq!((bad_halves, bad_short), (0, 0));
}

fn run_hash(seed: u64) -> (u64, u64) {
    run_hash_rec(seed, false).0
}

/// The run of [`run_hash`], with the sim's WR recorder on if `record`.
fn run_hash_rec(seed: u64, record: bool) -> ((u64, u64), Option<dm_verbs::sim::SimTrace>) {
    let mut cfg = small_cfg();
    cfg.seed = seed;
    cfg.faults.delay_prob = 0.3;
    cfg.faults.delay_max_ns = 5_000;
    let mut r = rt(cfg);
    let cores: Vec<_> = (0..3).map(|i| r.add_core(i, 0)).collect();
    for (i, &c) in cores.iter().enumerate() {
        for t in 0..20u64 {
            r.spawn_on(c, async move {
                let a = GlobalAddr::new((t % 2) as u16, SUPERBLOCK_BYTES + 64 * t);
                for k in 0..10u64 {
                    write(a, (i as u64 * 1000 + k).to_le_bytes().to_vec())
                        .await
                        .unwrap();
                    let _ = read(a, 64).await.unwrap();
                    faa(GlobalAddr::new(0, 8), 1).await.unwrap();
                }
            });
        }
    }
    if record {
        r.fabric().start_trace();
    }
    let end = r.run();
    ((r.fabric().trace_hash(), end), r.fabric().take_trace())
}

#[test]
fn recording_changes_nothing_and_orders_each_wrs_times() {
    let (plain, none) = run_hash_rec(42, false);
    let (rec, trace) = run_hash_rec(42, true);
    assert!(none.is_none());
    assert_eq!(plain, rec, "the recorder must not change the run");
    let t = trace.unwrap();
    // 3 cores x 20 tasks x 10 x (WRITE, READ, FAA).
    assert_eq!(t.wrs.len(), 1800);
    let in_lists: usize = t.doorbells.iter().map(|d| d.wrs.len()).sum();
    assert_eq!(in_lists, t.wrs.len());
    for w in &t.wrs {
        assert!(w.ok);
        assert!(
            w.posted_ns <= w.nic_tx_ns && w.nic_tx_ns < w.ms_arrive_ns,
            "{w:?}"
        );
        assert!(
            w.ms_arrive_ns <= w.exec_ns && w.exec_ns <= w.ms_done_ns,
            "{w:?}"
        );
        assert!(w.ms_done_ns < w.cq_ns, "{w:?}");
    }
}

#[test]
fn same_seed_same_trace_other_seed_other_trace() {
    let a = run_hash(42);
    let b = run_hash(42);
    let c = run_hash(43);
    assert_eq!(a, b);
    assert_ne!(a.0, c.0);
}

#[test]
fn thousands_of_tasks_per_core() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let done = Rc::new(RefCell::new(0u32));
    for i in 0..10_000u64 {
        let d = done.clone();
        r.spawn_on(c, async move {
            let a = GlobalAddr::new((i % 2) as u16, SUPERBLOCK_BYTES + 8 * (i % 1000));
            faa(a, 1).await.unwrap();
            read(a, 8).await.unwrap();
            *d.borrow_mut() += 1;
        });
    }
    r.run();
    assert_eq!(*done.borrow(), 10_000);
    assert_eq!(r.executor(c).live_tasks(), 0);
    assert_eq!(r.executor(c).inflight(), 0);
    let s = r.executor(c).stats();
    assert_eq!((s.faa, s.read), (10_000, 10_000));
}

#[test]
fn error_completions_reach_the_task() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let out = r
        .block_on(c, async move {
            let oob = read(GlobalAddr::new(0, (64 << 20) - 4), 8).await;
            let bad_ms = read(GlobalAddr::new(9, 0), 8).await;
            let mis = cas(GlobalAddr::new(0, 3), 0, 1).await;
            let dev = cas(GlobalAddr::device(0, 8), 0, 1).await;
            (oob, bad_ms, mis, dev)
        })
        .unwrap();
    assert!(matches!(out.0, Err(VerbError::OutOfBounds { .. })));
    assert!(matches!(out.1, Err(VerbError::OutOfBounds { .. })));
    assert!(matches!(out.2, Err(VerbError::Misaligned { .. })));
    assert_eq!(out.3, Ok(0), "device memory exists on this fabric");

    let c2 = r.add_core(0, 1);
    r.fabric().break_qp(c2.0, 1);
    let out = r.block_on(c2, async move {
        (
            read(GlobalAddr::new(1, 0), 8).await,
            read(GlobalAddr::new(0, 0), 8).await,
        )
    });
    let (broken, fine) = out.unwrap();
    assert_eq!(broken, Err(VerbError::QpError { ms: 1 }));
    assert!(fine.is_ok());
}

#[test]
fn chunk_exhaustion_is_ms_out_of_memory() {
    let mut cfg = small_cfg();
    cfg.ms.region_bytes = SUPERBLOCK_BYTES + 3 * (1 << 20);
    let mut r = rt(cfg);
    let c = r.add_core(0, 0);
    let out = r
        .block_on(c, async move {
            let a = ChunkAlloc::new(2, 1 << 20, 0);
            let mut got = Vec::new();
            loop {
                match a.alloc(256 << 10, 64).await {
                    Ok(x) => got.push(x),
                    Err(e) => return (got, e),
                }
            }
        })
        .unwrap();
    // 2 MSs x 3 chunks x 4 allocations per chunk.
    assert_eq!(out.0.len(), 24);
    assert!(matches!(out.1, VerbError::MsOutOfMemory { .. }));
    let mut uniq = out.0.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), 24, "no address handed out twice");
    assert!(out.0.iter().any(|a| a.ms() == 0) && out.0.iter().any(|a| a.ms() == 1));
}

#[test]
fn per_task_accounting_counts_round_trips() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let s = r
        .block_on(c, async move {
            let before = dm_runtime::task_stats();
            let a = GlobalAddr::new(0, 64);
            // Round trip 1: CAS. Round trip 2: READ of two MSs in parallel (2 doorbells).
            cas(a, 0, 1).await.unwrap();
            let (x, y) = futures::join!(read(a, 32), read(GlobalAddr::new(1, 64), 32));
            x.unwrap();
            y.unwrap();
            // Round trip 3: WRITE + unlock WRITE in one post list.
            let (p, q) = futures::join!(write(a.add(8), vec![1; 24]), write(a, vec![0; 8]));
            p.unwrap();
            q.unwrap();
            dm_runtime::task_stats().since(&before)
        })
        .unwrap();
    assert_eq!((s.cas, s.read, s.write), (1, 2, 2));
    assert_eq!(s.rtts, 3);
    assert_eq!(s.doorbells, 4);
    assert_eq!(s.bytes_read, 64);
    assert_eq!(s.bytes_written, 32);
}

#[test]
fn rpc_handlers_run_on_ms_cores_and_serialise() {
    let mut cfg = small_cfg();
    cfg.ms.cores = 1;
    let mut r = rt(cfg);
    // A handler that charges 10 us of MS CPU and increments a word.
    r.fabric().register_rpc(
        7,
        Arc::new(|m: &mut dyn dm_verbs::MsMemory, req: &[u8]| {
            m.charge_cpu(10_000);
            let a = GlobalAddr::new(m.ms_id(), u64::from_le_bytes(req.try_into().unwrap()));
            Ok((m.faa(a, 1)? + 1).to_le_bytes().to_vec())
        }),
    );
    let c = r.add_core(0, 0);
    let out = r
        .block_on(c, async move {
            let t0 = dm_runtime::now_ns();
            let req = || 4096u64.to_le_bytes().to_vec();
            let (a, b) = futures::join!(dm_runtime::rpc(0, 7, req()), dm_runtime::rpc(0, 7, req()));
            let t1 = dm_runtime::now_ns();
            let unknown = dm_runtime::rpc(1, 99, vec![]).await;
            (a.unwrap(), b.unwrap(), t1 - t0, unknown)
        })
        .unwrap();
    let mut got = [
        u64::from_le_bytes(out.0.try_into().unwrap()),
        u64::from_le_bytes(out.1.try_into().unwrap()),
    ];
    got.sort();
    assert_eq!(got, [1, 2]);
    assert!(
        out.2 >= 2 * 10_000,
        "one MS core runs the two handlers one after the other: {} ns",
        out.2
    );
    assert_eq!(out.3, Err(VerbError::UnknownRpc { ms: 1, handler: 99 }));
}

#[test]
fn dropped_verb_future_never_wakes_a_reused_slot() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let a = GlobalAddr::new(0, 512);
    let b = GlobalAddr::new(1, 512);
    let out = r
        .block_on(c, async move {
            write(a, vec![0xaa; 8]).await.unwrap();
            write(b, vec![0xbb; 8]).await.unwrap();
            {
                // Post a READ of `a`, then drop its future while the WR is in flight.
                let mut f = Box::pin(read(a, 8));
                assert!(futures::poll!(f.as_mut()).is_pending());
            }
            // The next verbs may reuse the in-flight slot; they must get their own results.
            let x = read(b, 8).await.unwrap();
            let y = read(b, 8).await.unwrap();
            (x.into_vec(), y.into_vec())
        })
        .unwrap();
    assert_eq!(out, (vec![0xbb; 8], vec![0xbb; 8]));
    assert_eq!(
        r.executor(c).inflight(),
        0,
        "the abandoned slot was freed by its completion"
    );
}

/// Sherman §3.2.2: host-memory atomics on one NIC bucket run one after the
/// other, each holding it for its PCIe transactions: two (read, write-back)
/// for an FAA, one for a failed CAS. Eight of each in one doorbell on one
/// word: the eight FAAs take 7 x (1,000 - 500) ns longer than the CASes.
#[test]
fn host_atomics_serialise_per_bucket_and_a_failed_cas_skips_the_write_back() {
    let elapsed = |use_faa: bool| {
        let mut r = rt(small_cfg());
        let net = dm_verbs::sim::NetModel::default();
        let c = r.add_core(0, 0);
        let a = GlobalAddr::new(0, 4096);
        let t = r
            .block_on(c, async move {
                let t0 = dm_runtime::now_ns();
                let ops = (0..8).map(|_| async move {
                    if use_faa {
                        faa(a, 0).await.unwrap()
                    } else {
                        cas(a, 1, 2).await.unwrap() // the word is 0: fails
                    }
                });
                futures::future::join_all(ops).await;
                dm_runtime::now_ns() - t0
            })
            .unwrap();
        (t, net)
    };
    let (cas_ns, net) = elapsed(false);
    let (faa_ns, _) = elapsed(true);
    assert!(cas_ns >= net.rtt_ns + 7 * net.host_cas_fail_ns, "{cas_ns}");
    let extra = faa_ns - cas_ns;
    let want = 7 * (net.host_atomic_ns - net.host_cas_fail_ns);
    assert!(
        extra.abs_diff(want) < 100,
        "FAAs {faa_ns} ns, failed CASes {cas_ns} ns: {extra} ns apart, want ~{want}"
    );
}

/// `NetModel::word_writes_wait_atomics` (issue 34): sixteen failed CASes on
/// a word, then, a round trip later, from another core (its own QP) a WRITE
/// of that word. By default the WRITE passes the bucket's queue and
/// completes in about one RTT; with the switch it waits for the CASes
/// still queued (8,000 ns of bucket time from their arrival at 1,000 ns).
/// A WRITE longer than 8 bytes passes either way.
#[test]
fn a_word_write_waits_for_queued_atomics_only_with_the_switch() {
    let elapsed = |wait: bool, len: usize| {
        let mut cfg = small_cfg();
        cfg.net.word_writes_wait_atomics = wait;
        let net = cfg.net;
        let mut r = rt(cfg);
        let spinner = r.add_core(0, 0);
        let writer = r.add_core(1, 0);
        let a = GlobalAddr::new(0, 4096);
        r.spawn_on(spinner, async move {
            let ops = (0..16).map(|_| async move { cas(a, 1, 2).await.unwrap() });
            futures::future::join_all(ops).await;
        });
        let t = r
            .block_on(writer, async move {
                // One round trip elsewhere: the spinner's CASes are queued.
                read(GlobalAddr::new(1, 4096), 8).await.unwrap();
                let t0 = dm_runtime::now_ns();
                write(a, vec![0; len]).await.unwrap();
                dm_runtime::now_ns() - t0
            })
            .unwrap();
        (t, net)
    };
    let (passes, net) = elapsed(false, 8);
    let (waits, _) = elapsed(true, 8);
    let (long, _) = elapsed(true, 16);
    assert!(passes < net.rtt_ns + net.host_cas_fail_ns, "{passes}");
    assert!(long < net.rtt_ns + net.host_cas_fail_ns, "{long}");
    assert!(
        waits >= passes + 8 * net.host_cas_fail_ns,
        "{waits} ns against {passes}: the WRITE did not wait for the queued CASes"
    );
}

/// `Faults::cas_writeback_prob` (soft-RoCE 6.1's failed CAS storing the
/// word it read): the word after a failed CAS (it holds 5) with a WRITE
/// of 7 in the same doorbell (`then` 0), that WRITE and an FAA of +1
/// behind it (1: the FAA settles the write-back first, rxe serialising
/// atomics), or the WRITE only after the window (2).
fn after_failed_cas(prob: f64, then: u8) -> u64 {
    let mut cfg = small_cfg();
    cfg.seed = 3;
    cfg.faults = Faults {
        cas_writeback_prob: prob,
        writeback_window_ns: 10_000,
        ..Default::default()
    };
    let mut r = rt(cfg);
    let c = r.add_core(0, 0);
    let w = GlobalAddr::new(0, SUPERBLOCK_BYTES);
    let seven = move || write(w, 7u64.to_le_bytes().to_vec());
    // Past the window: READs of about a round trip each.
    let wait = move || async move {
        for _ in 0..20 {
            read(w, 8).await.unwrap();
        }
    };
    let out = r.block_on(c, async move {
        write(w, 5u64.to_le_bytes().to_vec()).await.unwrap();
        match then {
            0 => {
                let (old, wr) = futures::join!(cas(w, 0, 1), seven());
                assert_eq!((old.unwrap(), wr.unwrap()), (5, ()));
            }
            1 => {
                let (old, wr, f) = futures::join!(cas(w, 0, 1), seven(), faa(w, 1));
                assert_eq!((old.unwrap(), wr.unwrap(), f.unwrap()), (5, (), 5));
            }
            _ => {
                assert_eq!(cas(w, 0, 1).await.unwrap(), 5);
                wait().await;
                seven().await.unwrap();
            }
        }
        wait().await;
        u64::from_le_bytes(read(w, 8).await.unwrap().try_into().unwrap())
    });
    out.unwrap()
}

#[test]
fn a_failed_cas_that_writes_back_undoes_a_write_in_between() {
    assert_eq!(after_failed_cas(1.0, 0), 5, "the WRITE undone");
    assert_eq!(after_failed_cas(0.0, 0), 7, "fault off");
    assert_eq!(after_failed_cas(1.0, 1), 6, "undone before the FAA");
    assert_eq!(
        after_failed_cas(1.0, 2),
        7,
        "a WRITE after the window stays"
    );
}
