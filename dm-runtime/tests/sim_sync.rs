//! Runtime + sim fabric: synchronisation on a CS: the local lock table
//! (FIFO, bounded hand-over, exact keys), shared cells across cores, and
//! `sync_virtual_time`.

mod common;

use common::{rt, small_cfg};
use dm_runtime::read;
use dm_runtime::sync::{LocalLockTable, SharedCell};
use dm_verbs::GlobalAddr;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

#[test]
fn local_lock_fifo_and_bounded_hand_over() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let table = Rc::new(LocalLockTable::new(64, 2));
    let log = Rc::new(RefCell::new(Vec::new()));
    for i in 0..5u32 {
        let (t, l) = (table.clone(), log.clone());
        r.spawn_on(c, async move {
            let g = t.lock(7).await;
            l.borrow_mut().push((i, g.handed_over()));
            // Hold across a remote round trip, as a writer does.
            read(GlobalAddr::new(0, 0), 8).await.unwrap();
            if let Err(g) = g.try_hand_over() {
                drop(g);
            }
        });
    }
    r.run();
    let l = log.borrow();
    assert_eq!(
        l.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4],
        "FIFO"
    );
    assert_eq!(
        l.iter().map(|x| x.1).collect::<Vec<_>>(),
        vec![false, true, true, false, true],
        "at most 2 hand-overs in a row"
    );
}

#[test]
fn shared_cell_wakes_other_simulated_cores() {
    let mut r = rt(small_cfg());
    let a = r.add_core(0, 0);
    let b = r.add_core(0, 1);
    let cell = Arc::new(SharedCell::<Vec<u8>>::new());
    let waiters: Vec<_> = (0..10)
        .map(|_| {
            let c = cell.clone();
            r.spawn_on(b, async move { c.get().await })
        })
        .collect();
    let c = cell.clone();
    r.spawn_on(a, async move {
        let v = read(GlobalAddr::new(0, 0), 16).await.unwrap().into_vec();
        c.set(v);
    });
    r.run();
    for w in waiters {
        assert_eq!(w.try_take().map(Result::unwrap), Some(vec![0u8; 16]));
    }
}

/// Distinct keys never share a local lock (hand-over passes the remote lock
/// of *that* key), entries vanish when released, and a waiter cancelled after
/// being handed the remote lock passes it on instead of losing it.
#[test]
fn local_locks_are_exact_per_key_and_orphaned_hand_overs_survive() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    use std::future::Future;
    // One shard: every key collides in the map, never in the lock.
    let table = Rc::new(LocalLockTable::new(1, 4));
    let t = table.clone();
    let out = r
        .block_on(c, async move {
            let a = t.lock(1).await;
            let b = t.lock(2).await; // would deadlock if keys 1 and 2 shared a lock
            assert!(!a.handed_over() && !b.handed_over());
            assert_eq!(t.held_keys(), 2);
            drop(a);
            drop(b);
            assert_eq!(t.held_keys(), 0);
            // A waiter is handed the remote lock, then cancelled before it runs.
            let g = t.lock(9).await;
            let mut waiter = Box::pin(t.lock(9));
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            assert!(waiter.as_mut().poll(&mut cx).is_pending());
            assert_eq!(t.waiting(), 1);
            assert!(g.can_hand_over());
            assert!(g.try_hand_over().is_ok());
            assert_eq!(t.waiting(), 0, "the granted waiter left the queue");
            drop(waiter);
            // The next holder inherits the still-held remote lock.
            let next = t.lock(9).await;
            // A waiter dropped while queued leaves the count, and the
            // holder has nobody to hand over to.
            let mut gone = Box::pin(t.lock(9));
            assert!(gone.as_mut().poll(&mut cx).is_pending());
            assert!(next.can_hand_over() && t.waiting() == 1);
            drop(gone);
            assert!(!next.can_hand_over() && t.waiting() == 0);
            next.handed_over()
        })
        .unwrap();
    assert!(out, "the orphaned remote lock went to the next holder");
    assert_eq!(table.held_keys(), 0, "released after the block");
}

/// Two cores share a log through CS memory: five times, each charges CPU
/// (core 0 3 µs a step, core 1 2 µs), then (if `use_sync`) awaits
/// `sync_virtual_time`, then logs `(virtual ns, core)`.
fn shared_log(use_sync: bool) -> Vec<(u64, usize)> {
    let mut r = rt(small_cfg());
    let log = Rc::new(RefCell::new(Vec::new()));
    for (i, step) in [(0usize, 3_000u64), (1, 2_000)] {
        let c = r.add_core(0, i as u16);
        let log = log.clone();
        r.spawn_on(c, async move {
            for _ in 0..5 {
                dm_runtime::charge_cpu(step);
                if use_sync {
                    dm_runtime::sync_virtual_time().await;
                }
                log.borrow_mut().push((dm_runtime::now_ns(), i));
            }
        });
    }
    r.run();
    let v = log.borrow().clone();
    v
}

#[test]
fn sync_virtual_time_orders_cs_shared_accesses_by_virtual_time() {
    // Without it, core 0 runs all five steps in its first round (no WR, no
    // suspension) and logs 15 µs before core 1 logs 2 µs.
    let ahead = shared_log(false);
    assert_eq!(ahead.iter().filter(|e| e.1 == 0).count(), 5);
    assert!(!ahead.is_sorted(), "the test must see run-ahead: {ahead:?}");
    // With it, every access waits for the cores that are behind: the log is
    // in virtual-time order and both cores interleave.
    let synced = shared_log(true);
    assert_eq!(synced.len(), 10);
    assert!(
        synced.is_sorted(),
        "accesses out of virtual-time order: {synced:?}"
    );
    assert_eq!(synced[0].1, 1, "core 1 (2 µs) acts before core 0 (3 µs)");
    // A sync costs no virtual time: each core's accesses happen at its own
    // charges plus the one task poll that started it.
    let poll = dm_verbs::sim::SimConfig::default().net.cpu.poll_ns;
    let times =
        |c: usize| -> Vec<u64> { synced.iter().filter(|e| e.1 == c).map(|e| e.0).collect() };
    assert_eq!(
        times(0),
        (1..=5).map(|i| poll + 3_000 * i).collect::<Vec<_>>()
    );
    assert_eq!(
        times(1),
        (1..=5).map(|i| poll + 2_000 * i).collect::<Vec<_>>()
    );
}

/// Core 0's tick charges 1 µs of CPU before its READ, core 1's 0.1 µs, and
/// core 0 ticks first. Posts taken when the ticks make them let core 0's
/// later READ reserve their CS's NIC ahead of core 1's earlier one; with
/// `NetModel::posts_in_time_order` the NIC takes them in virtual-time order
/// and core 1's READ comes back a round trip after its post.
#[test]
fn posts_in_time_order_keep_a_core_that_ran_ahead_from_holding_up_the_nic() {
    let finish = |timed: bool| -> (u64, u64) {
        let mut cfg = small_cfg();
        cfg.net.posts_in_time_order = timed;
        let mut r = rt(cfg);
        let hs: Vec<_> = [1_000u64, 100]
            .into_iter()
            .enumerate()
            .map(|(i, cpu)| {
                let c = r.add_core(0, i as u16);
                r.spawn_on(c, async move {
                    dm_runtime::charge_cpu(cpu);
                    let t0 = dm_runtime::now_ns();
                    read(GlobalAddr::new(0, 64), 8).await.unwrap();
                    dm_runtime::now_ns() - t0
                })
            })
            .collect();
        r.run();
        let t: Vec<u64> = hs.iter().map(|h| h.try_take().unwrap().unwrap()).collect();
        (t[0], t[1])
    };
    let rtt = small_cfg().net.rtt_ns;
    let (ahead0, ahead1) = finish(false);
    assert!(
        ahead1 > rtt + 800,
        "core 1 held behind core 0's post: {ahead1}"
    );
    let (timed0, timed1) = finish(true);
    assert!(timed1 < rtt + 200, "core 1 not held up: {timed1}");
    assert!(
        timed0 < rtt + 200 && ahead0 < rtt + 200,
        "{timed0} {ahead0}"
    );
}
