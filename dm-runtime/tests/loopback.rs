//! Runtime on real threads over the loopback fabric.

use dm_runtime::sync::{LocalLockTable, SharedCell};
use dm_runtime::{cas, faa, read, run_threads, write, yield_now, ExecConfig, Executor};
use dm_verbs::ms::SUPERBLOCK_BYTES;
use dm_verbs::{Fabric, GlobalAddr, VerbError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod common;

use common::loopback_fabric;

fn word(ex: &mut Executor<impl dm_verbs::Queues>, a: GlobalAddr) -> u64 {
    ex.block_on(async move { u64::from_le_bytes(read(a, 8).await.unwrap().try_into().unwrap()) })
}

#[test]
fn faa_and_cas_exact_across_threads_and_tasks() {
    let f = loopback_fabric();
    let (x, y) = (
        GlobalAddr::new(0, SUPERBLOCK_BYTES),
        GlobalAddr::new(1, SUPERBLOCK_BYTES + 8),
    );
    let cores = [(0, 0), (0, 1), (1, 0), (1, 1)];
    run_threads(&f, &cores, false, |_| async move {
        let hs: Vec<_> = (0..16)
            .map(|_| {
                dm_runtime::spawn(async move {
                    for _ in 0..200 {
                        faa(x, 1).await.unwrap();
                        let mut old = 0;
                        loop {
                            let seen = cas(y, old, old + 1).await.unwrap();
                            if seen == old {
                                break;
                            }
                            old = seen;
                            yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    let mut ex = Executor::new(f.open_queues(0, 0), 2, ExecConfig::default());
    assert_eq!(word(&mut ex, x), 4 * 16 * 200);
    assert_eq!(word(&mut ex, y), 4 * 16 * 200);
}

#[test]
fn writes_in_posting_order_on_one_qp() {
    let f = loopback_fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), 2, ExecConfig::default());
    let a = GlobalAddr::new(1, SUPERBLOCK_BYTES + 64);
    let got = ex.block_on(async move {
        let (p, q) = futures::join!(write(a, vec![1; 32]), write(a, vec![2; 32]));
        p.unwrap();
        q.unwrap();
        read(a, 32).await.unwrap()
    });
    assert_eq!(got, vec![2; 32]);
    assert_eq!(ex.stats().doorbells, 2);
}

#[test]
fn shared_cell_and_local_lock_wake_across_threads() {
    let f = loopback_fabric();
    let cell = Arc::new(SharedCell::<u64>::new());
    let table = Arc::new(LocalLockTable::new(16, 4));
    let counter = Arc::new(AtomicU64::new(0));
    let cores = [(0, 0), (0, 1)];
    let out = run_threads(&f, &cores, false, |i| {
        let (cell, table, counter) = (cell.clone(), table.clone(), counter.clone());
        async move {
            // Core 1's tasks wait for core 0 to publish a value read from MS memory.
            if i == 0 {
                let v = faa(GlobalAddr::new(0, SUPERBLOCK_BYTES + 128), 41)
                    .await
                    .unwrap()
                    + 41;
                cell.set(v);
            }
            let v = cell.get().await;
            // Then both cores' tasks contend on one local lock; the critical section
            // spans a remote round trip, so waiters park and are woken across threads.
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    let (table, counter) = (table.clone(), counter.clone());
                    dm_runtime::spawn(async move {
                        for _ in 0..50 {
                            let g = table.lock(99).await;
                            let c = counter.load(Ordering::Relaxed);
                            read(GlobalAddr::new(1, 0), 8).await.unwrap();
                            counter.store(c + 1, Ordering::Relaxed);
                            drop(g);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
            v
        }
    });
    assert_eq!(out, vec![41, 41]);
    assert_eq!(
        counter.load(Ordering::Relaxed),
        2 * 8 * 50,
        "the local lock excluded every other holder"
    );
}

#[test]
fn broken_qp_and_bad_address_complete_with_errors() {
    let f = loopback_fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), 2, ExecConfig::default());
    ex.queues_mut().break_qp(1);
    let (a, b, c) = ex.block_on(async {
        (
            read(GlobalAddr::new(1, 0), 8).await,
            read(GlobalAddr::new(0, 0), 8).await,
            write(GlobalAddr::new(7, 0), vec![1; 8]).await,
        )
    });
    assert_eq!(a, Err(VerbError::QpError { ms: 1 }));
    assert!(b.is_ok());
    assert!(matches!(c, Err(VerbError::OutOfBounds { .. })));
    assert_eq!(ex.inflight(), 0);
}

#[test]
fn sync_virtual_time_returns_at_once_on_a_wall_clock() {
    let f = loopback_fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), 2, ExecConfig::default());
    let h = ex.spawn(async {
        dm_runtime::sync_virtual_time().await;
        7
    });
    ex.tick();
    assert_eq!(
        h.try_take().map(Result::unwrap),
        Some(7),
        "finished in its first poll"
    );
}

/// The `i`-th 16-byte word of the `read_round` tests, alternating MSs.
fn at(i: u64) -> GlobalAddr {
    GlobalAddr::new((i % 2) as u16, SUPERBLOCK_BYTES + 256 + 16 * i)
}

/// WRITEs `byte(i)` over each of the words `at(0..n)`.
async fn fill_words(n: u64, byte: impl Fn(u64) -> u8) {
    for i in 0..n {
        write(at(i), vec![byte(i); 16]).await.unwrap();
    }
}

#[test]
fn read_round_returns_buffers_in_address_order() {
    let f = loopback_fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), 2, ExecConfig::default());
    // 20 READs (more than `join_inline` keeps inline) over both MSs.
    ex.block_on(async move {
        fill_words(20, |i| i as u8).await;
        for _ in 0..3 {
            let mut round = dm_runtime::read_round((0..20).map(|i| (at(i), 16))).await;
            assert_eq!(round.len(), 20);
            for (i, b) in round.drain().enumerate() {
                assert_eq!(&b.unwrap()[..], &[i as u8; 16]);
            }
        }
        let empty = dm_runtime::read_round(std::iter::empty()).await;
        assert!(empty.is_empty());
    });
}

#[test]
fn a_read_round_dropped_in_flight_leaves_the_core_serving() {
    let f = loopback_fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), 2, ExecConfig::default());
    ex.block_on(async move {
        fill_words(12, |i| i as u8 + 1).await;
        // Posted on the first poll, then dropped before any completion.
        let mut round = Box::pin(dm_runtime::read_round((0..12).map(|i| (at(i), 16))));
        assert!(futures::poll!(round.as_mut()).is_pending());
        drop(round);
        // The abandoned READs complete into nobody; the next round, which
        // reuses the recycled storage, gets its own buffers.
        let mut round = dm_runtime::read_round((0..12).rev().map(|i| (at(i), 16))).await;
        for (k, b) in round.drain().enumerate() {
            assert_eq!(&b.unwrap()[..], &[12 - k as u8; 16]);
        }
    });
}

#[test]
fn a_read_round_gives_each_result_in_its_place_an_error_included() {
    let f = loopback_fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), 2, ExecConfig::default());
    let good = GlobalAddr::new(1, SUPERBLOCK_BYTES + 512);
    let bad = GlobalAddr::new(0, u64::MAX / 4);
    ex.block_on(async move {
        write(good, vec![7; 8]).await.unwrap();
        let mut round = dm_runtime::read_round([(good, 8), (bad, 8)]).await;
        let r: Vec<_> = round.drain().collect();
        assert_eq!(&r[0].as_ref().unwrap()[..], &[7; 8]);
        assert!(
            r[1].is_err(),
            "a READ past the MS's memory fails: {:?}",
            r[1].as_ref().err()
        );
    });
}
