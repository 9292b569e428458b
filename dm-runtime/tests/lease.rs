//! Lock recovery (issue 33, `dm_runtime::lock::member`): a lock held by a
//! member whose heartbeat stopped is taken over after the lease; one held
//! by a live member for several leases is not; one left by an earlier
//! incarnation of a restarted CS is. For every lock placement: the
//! in-node word (FG+), a 64-bit GLT slot, a 16-bit GLT lane (masked CAS).
//! Deterministic on `sim` (virtual time).

mod common;

use common::{rt, small_cfg, TwoMembers};
use dm_runtime::lock::{
    LeaseConfig, LockCounters, LockTableConfig, LockTechniques, Member, NodeLocks,
};
use dm_runtime::{now_ns, spawn, yield_until, SimRuntime};
use dm_verbs::GlobalAddr;
use std::sync::Arc;

const CHUNK: u64 = 1 << 20;
const LEASE: LeaseConfig = LeaseConfig::SIM;

fn placements() -> Vec<(&'static str, LockTechniques, LockTableConfig)> {
    let onchip = LockTechniques {
        combine: true,
        onchip_lock: true,
        ..LockTechniques::FG_PLUS
    };
    let table = |lanes16| LockTableConfig {
        device: true,
        lanes16,
        slots: 64,
    };
    vec![
        (
            "in-node word",
            LockTechniques::FG_PLUS,
            LockTableConfig::default(),
        ),
        ("64-bit GLT slot", onchip, table(false)),
        ("16-bit GLT lane", onchip, table(true)),
    ]
}

/// A handle of `cs`, core 0, joined to `m`, counting into `c`.
fn handle(
    t: LockTechniques,
    table: LockTableConfig,
    m: &Arc<Member>,
    c: &Arc<LockCounters>,
) -> NodeLocks {
    let mut h = NodeLocks::new(t, table, m.cs(), 0, 0, CHUNK)
        .unwrap()
        .with_counters(c.clone());
    h.set_member(m.clone()).unwrap();
    h
}

/// What a scenario saw: the waiter's lock counts and recovery times, and
/// the virtual time it got the lock at.
struct Seen {
    recovered: u64,
    recovery_ns: Vec<u64>,
    got_at: u64,
}

/// CS 0 takes the lock of `x` and then: `dies` (stops its heartbeat,
/// never releases), or holds it for `hold` leases and releases it.
/// CS 1 (or, with `restart`, CS 0's next incarnation) asks for it.
fn scenario(name: &str, dies: bool, hold: u64, restart: bool) {
    let mut r: SimRuntime = rt(small_cfg());
    let c0 = r.add_core(0, 0);
    for (label, t, table) in placements() {
        let out = r.block_on(c0, async move {
            let x = GlobalAddr::new(1, 4096 + 64);
            let (m0, m1) = (
                Member::join(0, LEASE, CHUNK).await.unwrap(),
                Member::join(1, LEASE, CHUNK).await.unwrap(),
            );
            let hb0 = spawn(m0.clone().heartbeat());
            let hb1 = spawn(m1.clone().heartbeat());
            let c = Arc::new(LockCounters::new());
            let a = handle(t, table, &m0, &c);
            let held = a.lock(x).await.unwrap();
            let waiter_member = if restart {
                Member::join(0, LEASE, CHUNK).await.unwrap()
            } else {
                m1.clone()
            };
            let wc = Arc::new(LockCounters::new());
            let b = handle(t, table, &waiter_member, &wc);
            if dies {
                m0.stop();
                std::mem::forget(held);
            } else {
                let start = now_ns();
                let until = start + hold * LEASE.lease_ns;
                let (got, ()) = futures::join!(b.lock(x), async {
                    yield_until(until).await;
                    a.release(held, Vec::new()).await.unwrap();
                });
                let at = now_ns() - start;
                b.release(got.unwrap(), Vec::new()).await.unwrap();
                m0.stop();
                m1.stop();
                let _ = (hb0.await, hb1.await);
                return (wc.snapshot().recovered, wc.recovery_ns(), at);
            }
            let got = b.lock(x).await.unwrap();
            let at = now_ns();
            b.release(got, Vec::new()).await.unwrap();
            m1.stop();
            let _ = (hb0.await, hb1.await);
            (wc.snapshot().recovered, wc.recovery_ns(), at)
        });
        let (recovered, recovery_ns, got_at) =
            out.unwrap_or_else(|| panic!("{name}, {label}: never finished"));
        let s = Seen {
            recovered,
            recovery_ns,
            got_at,
        };
        eprintln!(
            "{name}, {label}: recovered {} in {:?} ns, lock at {} ns",
            s.recovered, s.recovery_ns, s.got_at
        );
        check(name, label, dies, hold, restart, &s);
    }
}

fn check(name: &str, label: &str, dies: bool, hold: u64, restart: bool, s: &Seen) {
    if dies {
        assert_eq!(
            s.recovered, 1,
            "{name}, {label}: the dead holder's lock is taken over"
        );
        let ns = s.recovery_ns[0];
        // One lease of watching the name; a second of a still heartbeat,
        // unless the incarnation already moved on (a restart).
        let least = if restart { 1 } else { 2 } * LEASE.lease_ns;
        assert!(
            ns >= least,
            "{name}, {label}: recovered after {ns} ns, before {least}"
        );
        assert!(
            ns <= least + 2 * LEASE.lease_ns,
            "{name}, {label}: recovery took {ns} ns"
        );
    } else {
        assert_eq!(
            s.recovered, 0,
            "{name}, {label}: a live holder's lock is never taken over"
        );
        assert!(
            s.got_at >= hold * LEASE.lease_ns,
            "{name}, {label}: lock taken at {} ns",
            s.got_at
        );
    }
}

#[test]
fn a_dead_members_lock_is_taken_over_after_two_leases() {
    scenario("dead holder", true, 0, false);
}

#[test]
fn a_live_member_holding_for_many_leases_keeps_its_lock() {
    scenario("live holder", false, 5, false);
}

#[test]
fn a_restarted_cs_takes_over_its_earlier_incarnations_lock() {
    scenario("restart", true, 0, true);
}

#[test]
fn lease_config_needs_three_heartbeats_per_lease() {
    assert!(LeaseConfig::new(10, 29).is_err());
    assert!(LeaseConfig::new(0, 100).is_err());
    assert_eq!(LeaseConfig::new(10, 30).unwrap().lease_ns, 30);
}

/// More polling threads than CPUs: a live CS can miss its lease, and the
/// warning says so; one thread has a CPU.
#[test]
fn a_lease_over_more_threads_than_cpus_is_warned_about() {
    let l = LeaseConfig::REAL;
    assert_eq!(l.oversubscribed(1), None);
    let w = l.oversubscribed(1 << 20).expect("more threads than CPUs");
    assert!(
        w.contains("1048576 polling threads") && w.contains("lease of 10 ms"),
        "{w}"
    );
}

/// The same takeover on loopback, in wall time: a member that never beats
/// after joining holds a lock; another member's lock call takes it over
/// after two leases of 2 ms, for each lock placement.
#[test]
fn on_loopback_a_dead_members_lock_is_taken_over_in_wall_time() {
    use dm_runtime::{ExecConfig, Executor};
    use dm_verbs::Fabric;
    let f = common::loopback_fabric();
    let chunk = 1 << 16;
    let lease = LeaseConfig::new(500_000, 2_000_000).unwrap();
    for (label, t, table) in placements() {
        let mut ex = Executor::new(f.open_queues(0, 0), f.num_ms(), ExecConfig::default());
        let (n, ns) = ex.block_on(async move {
            let x = GlobalAddr::new(1, 4096 + 64);
            let m0 = Member::join(0, lease, chunk).await.unwrap();
            let m1 = Member::join(1, lease, chunk).await.unwrap();
            let c = Arc::new(LockCounters::new());
            let (a, b) = (handle(t, table, &m0, &c), handle(t, table, &m1, &c));
            std::mem::forget(a.lock(x).await.unwrap());
            let got = b.lock(x).await.unwrap();
            b.release(got, Vec::new()).await.unwrap();
            (c.snapshot().recovered, c.recovery_ns())
        });
        assert_eq!(n, 1, "{label}");
        assert!(ns[0] >= 2 * lease.lease_ns, "{label}: {ns:?}");
    }
}

/// A lock word holding a non-member name (incarnation 0) of a CS that has
/// joined since is stale: taken over after one lease (soft-RoCE left the low
/// half of a member's name in a word, docs/rdma.md). One of a CS that never
/// joined says nothing about its holder: kept until it is released.
#[test]
fn a_non_member_name_is_stale_once_its_cs_has_joined() {
    let mut r: SimRuntime = rt(small_cfg());
    let c0 = r.add_core(0, 0);
    let out = r.block_on(c0, async move {
        let (x, y) = (GlobalAddr::new(1, 4096 + 64), GlobalAddr::new(1, 8192));
        let ms = TwoMembers::join(LEASE, CHUNK).await;
        let c = Arc::new(LockCounters::new());
        let b = handle(
            LockTechniques::FG_PLUS,
            LockTableConfig::default(),
            &ms.m1,
            &c,
        );
        // CS 0, core 1, no incarnation: (0 << 16 | 1) + 1.
        dm_runtime::write(x, 2u64.to_le_bytes().to_vec())
            .await
            .unwrap();
        let start = now_ns();
        let h = b.lock(x).await.unwrap();
        let took_x = now_ns() - start;
        b.release(h, Vec::new()).await.unwrap();
        let after_x = c.snapshot().recovered;
        // CS 5, which never joined, core 0: (5 << 16 | 0) + 1.
        dm_runtime::write(y, 0x50001u64.to_le_bytes().to_vec())
            .await
            .unwrap();
        let start = now_ns();
        let until = start + 5 * LEASE.lease_ns;
        let (got, ()) = futures::join!(b.lock(y), async {
            yield_until(until).await;
            dm_runtime::write(y, 0u64.to_le_bytes().to_vec())
                .await
                .unwrap();
        });
        let took_y = now_ns() - start;
        b.release(got.unwrap(), Vec::new()).await.unwrap();
        ms.stop().await;
        (after_x, took_x, c.snapshot().recovered, took_y)
    });
    let (after_x, took_x, after_y, took_y) = out.unwrap();
    assert_eq!(after_x, 1, "the stale non-member name is taken over");
    assert!(
        (LEASE.lease_ns..=3 * LEASE.lease_ns).contains(&took_x),
        "after one lease: {took_x} ns"
    );
    assert_eq!(after_y, 1, "a never-joined CS's name is not taken over");
    assert!(took_y >= 5 * LEASE.lease_ns, "{took_y} ns");
}

/// Every CAS and FAA that changes its word executed a second time (sim's
/// replay fault, soft-RoCE's re-executed duplicates, docs/rdma.md): a
/// CS's incarnation word still names the incarnation its process runs.
/// It used to be an FAA: replayed, the record named an incarnation no
/// process ran, and every waiter took that live CS's locks for a dead
/// one's (`check --faults replay,crash --cores 3`, fg seed 55: lost keys).
#[test]
fn a_replayed_join_leaves_the_incarnation_as_joined() {
    let mut cfg = small_cfg();
    cfg.faults.replay_prob = 1.0;
    cfg.faults.replay_max_ns = 1_000;
    let mut r: SimRuntime = rt(cfg);
    let c0 = r.add_core(0, 0);
    let out = r.block_on(c0, async move {
        let a = Member::join(3, LEASE, CHUNK).await.unwrap();
        let b = Member::join(3, LEASE, CHUNK).await.unwrap();
        // Past every replay.
        yield_until(now_ns() + 10_000).await;
        let (inc, _) = a.read_record(3).await.unwrap();
        (a.incarnation(), b.incarnation(), inc)
    });
    assert_eq!(out.unwrap(), (1, 2, 2));
}

/// Four CSs join at once: each finds no membership table and allocates
/// one, one CAS publishes its chunk, and the three losers return theirs
/// (`dm_verbs::ms::RPC_FREE_CHUNK`), so MS 0 keeps one chunk for the table.
/// All four records are in the published table.
#[test]
fn joiners_that_lose_the_table_race_return_their_chunks() {
    let mut r: SimRuntime = rt(small_cfg());
    let before = r.fabric().ms_bytes_used(0);
    let hs: Vec<_> = (0..4u16)
        .map(|cs| {
            let c = r.add_core(cs, 0);
            r.spawn_on(c, async move {
                let m = Member::join(cs, LEASE, CHUNK).await.unwrap();
                m.read_record(cs).await.unwrap().0
            })
        })
        .collect();
    r.run();
    let incs: Vec<u64> = hs.iter().map(|h| h.try_take().unwrap().unwrap()).collect();
    assert_eq!(incs, [1, 1, 1, 1], "every CS's record says it joined once");
    let chunk = small_cfg().ms.chunk_bytes;
    assert_eq!(
        r.fabric().ms_bytes_used(0),
        before + chunk,
        "one table chunk"
    );
}

/// A fabric that reports every CAS that takes its word as failed (sim's
/// `unreported_cas_prob = 1.0`): each join CAS moves the incarnation word
/// and reads as lost, and the join ends with `BadConfig` after
/// `JOIN_CAS_TRIES` (64) CASes instead of looping for ever.
#[test]
fn a_join_whose_cases_all_read_as_lost_ends_in_an_error() {
    let mut cfg = small_cfg();
    cfg.faults.unreported_cas_prob = 1.0;
    let mut r: SimRuntime = rt(cfg);
    let c0 = r.add_core(0, 0);
    let out = r.block_on(c0, async move { Member::join(2, LEASE, CHUNK).await.err() });
    let e = out.unwrap().expect("the join fails");
    assert!(
        matches!(&e, dm_runtime::lock::LockError::BadConfig(m) if m.contains("64 CASes")),
        "{e}"
    );
}
