//! A release request's CAS executed a second time after its report
//! (soft-RoCE re-executes retransmitted atomics, docs/rdma-sim-faults.md;
//! sim's `Faults::replay_prob`), once the named core has taken the word
//! again: the CAS expects the name it released, so it must not find that
//! name on a word a live task of that core holds (`dm_runtime::lock`,
//! "Atomics executed twice"). Played here by posting the request's CAS
//! again by hand, at the worst moment. Deterministic on `sim`.

mod common;

use common::{rt, small_cfg, TwoMembers};
use dm_runtime::lock::ask::ABANDONED;
use dm_runtime::lock::{LeaseConfig, LockCounters, LockTechniques, Member, NodeLocks};
use dm_runtime::{cas, now_ns, read, yield_now, yield_until};
use dm_verbs::GlobalAddr;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

const CHUNK: u64 = 1 << 20;
const LEASE: LeaseConfig = LeaseConfig::SIM;

fn handle(m: &Arc<Member>, core: u16) -> NodeLocks {
    let mut h = NodeLocks::new(
        LockTechniques::FG_PLUS,
        Default::default(),
        m.cs(),
        core,
        0,
        CHUNK,
    )
    .unwrap()
    .with_counters(Arc::new(LockCounters::new()));
    h.set_member(m.clone()).unwrap();
    h
}

async fn word(x: GlobalAddr) -> u64 {
    u64::from_le_bytes(read(x, 8).await.unwrap()[..8].try_into().unwrap())
}

/// What happened: the left name, the replayed CAS's old value, when the
/// owner released its second hold and when the waiter took the word after
/// the replay (virtual ns).
#[derive(Debug)]
struct Seen {
    left: u64,
    replay_found: u64,
    owner_released_at: u64,
    waiter_took_at: u64,
}

fn scenario(waiter_cs: u16) -> Seen {
    let mut r = rt(small_cfg());
    let c0 = r.add_core(0, 0);
    let c1 = r.add_core(0, 1);
    let x = GlobalAddr::new(1, 4096 + 64);
    let m0: Rc<RefCell<Option<Arc<Member>>>> = Rc::default();
    let phase = Rc::new(Cell::new(0u8));
    let left = Rc::new(Cell::new(0u64));
    let released_at = Rc::new(Cell::new(0u64));
    let (m, p, l, rel) = (m0.clone(), phase.clone(), left.clone(), released_at.clone());
    let left_w = left.clone();
    // The owner: CS 0, core 1.
    r.spawn_on(c1, async move {
        let member = common::member_once_set(&m).await;
        let a = handle(&member, 1);
        // A task that holds the word and is dropped (a cancelled future):
        // the word stays named by this core, and its ledger shows no holder.
        let h = a.lock(x).await.unwrap();
        l.set(word(x).await);
        drop(h);
        p.set(1);
        // The waiter has it released on request, takes it and releases it.
        while p.get() != 2 {
            yield_now().await;
        }
        // This core takes the word again and holds it for 5 leases.
        let h = a.lock(x).await.unwrap();
        p.set(3);
        yield_until(now_ns() + 5 * LEASE.lease_ns).await;
        rel.set(now_ns());
        a.release(h, Vec::new()).await.unwrap();
        while p.get() != 4 {
            yield_until(now_ns() + LEASE.heartbeat_ns).await;
        }
    });
    let out = r.block_on(c0, async move {
        let ms = TwoMembers::join(LEASE, CHUNK).await;
        let wm = if waiter_cs == 0 {
            ms.m0.clone()
        } else {
            ms.m1.clone()
        };
        let b = handle(&wm, 0);
        *m0.borrow_mut() = Some(ms.m0.clone());
        while phase.get() != 1 {
            yield_now().await;
        }
        // Asked after a lease, released by the owner's core.
        let got = b.lock(x).await.unwrap();
        assert!(got.taken_stale(), "released on request");
        b.release(got, Vec::new()).await.unwrap();
        phase.set(2);
        while phase.get() != 3 {
            yield_now().await;
        }
        // The release request's CAS, executed again.
        let replay_found = cas(x, left_w.get(), ABANDONED).await.unwrap();
        let got = b.lock(x).await.unwrap();
        let waiter_took_at = now_ns();
        b.release(got, Vec::new()).await.unwrap();
        phase.set(4);
        yield_until(now_ns() + 2 * LEASE.heartbeat_ns).await;
        ms.stop().await;
        (replay_found, waiter_took_at)
    });
    let (replay_found, waiter_took_at) = out.expect("never finished");
    Seen {
        left: left.get(),
        replay_found,
        owner_released_at: released_at.get(),
        waiter_took_at,
    }
}

#[test]
fn a_replayed_release_request_does_not_free_a_word_taken_again() {
    for waiter_cs in [0, 1] {
        let s = scenario(waiter_cs);
        assert_ne!(
            s.replay_found, s.left,
            "waiter CS {waiter_cs}: the core took the word again under the name it released: {s:?}"
        );
        assert!(
            s.waiter_took_at >= s.owner_released_at,
            "waiter CS {waiter_cs}: two holders: {s:?}"
        );
    }
}
