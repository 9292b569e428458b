//! A member's 16-bit GLT lanes in its CS ledger (issue 33,
//! `dm_runtime::lock` lanes): a lane left naming a live CS that none of its
//! tasks holds (a task dropped while holding it, as a service cancelling an
//! operation's future does) is claimed by another core of that CS, or
//! freed by that CS when a waiter of another CS asks; a lane a task
//! really holds is neither. Sherman's on-chip lock without HOCL (§4.3):
//! device memory, masked CAS. Deterministic on `sim`.

mod common;

use common::{rt, small_cfg, TwoMembers};
use dm_runtime::lock::{
    LeaseConfig, LockCounters, LockTableConfig, LockTechniques, Member, NodeLocks,
};
use dm_runtime::{now_ns, yield_now, yield_until};
use dm_verbs::GlobalAddr;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

const CHUNK: u64 = 1 << 20;
const LEASE: LeaseConfig = LeaseConfig::SIM;

fn handle(m: &Arc<Member>, core: u16) -> NodeLocks {
    let t = LockTechniques {
        onchip_lock: true,
        ..LockTechniques::FG_PLUS
    };
    let table = LockTableConfig {
        device: true,
        lanes16: true,
        slots: 4,
    };
    let mut h = NodeLocks::new(t, table, m.cs(), core, 0, CHUNK)
        .unwrap()
        .with_counters(Arc::new(LockCounters::new()));
    h.set_member(m.clone()).unwrap();
    h
}

/// CS 0's core 1 takes the lock of `x` and then drops its `Held`
/// (`drop_it`) or holds it for `hold_leases` leases and releases it; the
/// waiter, core 0 of CS `waiter_cs`, then locks `x`. Returns ns until the
/// waiter got it and its (recoveries, takeovers).
fn scenario(waiter_cs: u16, drop_it: bool, hold_leases: u64) -> (u64, (u64, u64)) {
    let mut r = rt(small_cfg());
    let c0 = r.add_core(0, 0);
    let c1 = r.add_core(0, 1);
    let x = GlobalAddr::new(1, 4096);
    let m0: Rc<RefCell<Option<Arc<Member>>>> = Rc::default();
    let phase = Rc::new(Cell::new(0u8));
    let (m, p) = (m0.clone(), phase.clone());
    r.spawn_on(c1, async move {
        let member = common::member_once_set(&m).await;
        let a = handle(&member, 1);
        let h = a.lock(x).await.unwrap();
        p.set(1);
        if drop_it {
            drop(h);
        } else {
            yield_until(now_ns() + hold_leases * LEASE.lease_ns).await;
            a.release(h, Vec::new()).await.unwrap();
        }
        while p.get() != 2 {
            yield_until(now_ns() + LEASE.heartbeat_ns).await;
        }
    });
    let out = r.block_on(c0, async move {
        let ms = TwoMembers::join(LEASE, CHUNK).await;
        let b = handle(if waiter_cs == 0 { &ms.m0 } else { &ms.m1 }, 0);
        *m0.borrow_mut() = Some(ms.m0.clone());
        while phase.get() != 1 {
            yield_now().await;
        }
        let start = now_ns();
        let h = b.lock(x).await.unwrap();
        let got_after = now_ns() - start;
        b.release(h, Vec::new()).await.unwrap();
        phase.set(2);
        yield_until(now_ns() + 2 * LEASE.heartbeat_ns).await;
        ms.stop().await;
        let s = b.counters().snapshot();
        (got_after, (s.recovered, s.takeovers))
    });
    let (got_after, waiter) = out.expect("never finished");
    (got_after, waiter)
}

#[test]
fn another_core_of_the_cs_claims_a_lane_whose_holder_was_dropped() {
    let (got_after, waiter) = scenario(0, true, 0);
    assert!(
        got_after < LEASE.lease_ns,
        "claimed at once: {got_after} ns"
    );
    assert_eq!(waiter, (0, 1), "one takeover by claim");
}

#[test]
fn another_cs_asks_and_the_named_cs_frees_the_lane() {
    let (got_after, waiter) = scenario(1, true, 0);
    assert!(
        (LEASE.lease_ns..=4 * LEASE.lease_ns).contains(&got_after),
        "asked after a lease, freed at a heartbeat: {got_after} ns"
    );
    assert_eq!(
        waiter,
        (0, 0),
        "the waiter takes nothing over: CS 0 freed it"
    );
}

#[test]
fn a_lane_really_held_is_neither_claimed_nor_freed() {
    for waiter_cs in [0, 1] {
        let (got_after, waiter) = scenario(waiter_cs, false, 4);
        assert!(
            got_after >= 4 * LEASE.lease_ns,
            "{waiter_cs}: {got_after} ns"
        );
        assert_eq!(waiter, (0, 0), "{waiter_cs}");
    }
}
