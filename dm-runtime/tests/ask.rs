//! Release requests (issue 33 item 5, `dm_runtime::lock::ask`): a lock word
//! left naming a live core that holds nothing (soft-RoCE re-executed a
//! retransmitted lock CAS after the unlock, docs/rdma.md; played here by
//! WRITing the name into the word) is released by that core when a waiter
//! asks, whether the waiter is another core of its CS or another CS, and
//! whether the named core is busy elsewhere or its handles are gone. A word
//! that a task really holds is not released. Deterministic on `sim`.

mod common;

use common::{rt, small_cfg, TwoMembers};
use dm_runtime::lock::{
    LeaseConfig, LockCounters, LockTableConfig, LockTechniques, Member, NodeLocks,
};
use dm_runtime::sync::LocalLockTable;
use dm_runtime::{now_ns, yield_now, yield_until};
use dm_verbs::GlobalAddr;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

const CHUNK: u64 = 1 << 20;
const LEASE: LeaseConfig = LeaseConfig::SIM;

/// What the core named in the word (CS 0, core 1) does.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Owner {
    /// Lives on, holding nothing.
    Idle,
    /// Its handle is dropped.
    Gone,
    /// Really holds the lock for this many leases, then releases it.
    Holds(u64),
}

/// One scenario's set-up.
#[derive(Clone, Copy, Debug)]
struct Case {
    owner: Owner,
    /// CS of the waiter (core 0): 0, the owner's CS, or 1.
    waiter_cs: u16,
    /// Sherman's HOCL with a one-slot host lock table (else FG+'s in-node
    /// word); with `local_held` leases of a local holder on the slot
    /// (played by taking its CS-local lock), as a receiver of a hand-over
    /// that holds the word under the giver's name.
    hocl: bool,
    local_held: u64,
}

/// What the waiter saw: ns until it got the lock, the owner's takeovers
/// (releases on request), the waiter's own recoveries and takeovers.
#[derive(Debug)]
struct Seen {
    got_after: u64,
    owner_released: u64,
    waiter: (u64, u64),
    /// The waiter's lock was taken stale (`Held::taken_stale`).
    stale: bool,
}

fn techniques(hocl: bool) -> (LockTechniques, LockTableConfig) {
    if !hocl {
        return (LockTechniques::FG_PLUS, LockTableConfig::default());
    }
    common::hocl(1, false)
}

fn handle(c: Case, m: &Arc<Member>, core: u16, local: &Arc<LocalLockTable>) -> NodeLocks {
    let (t, table) = techniques(c.hocl);
    let mut h = NodeLocks::new(t, table, m.cs(), core, 0, CHUNK)
        .unwrap()
        .with_counters(Arc::new(LockCounters::new()));
    h.set_member(m.clone()).unwrap();
    if c.hocl {
        h.set_local(local.clone());
    }
    h
}

/// The word guarding `x`: the node's own word, or the one host-table slot.
async fn word_of(c: Case, h: &NodeLocks, x: GlobalAddr) -> GlobalAddr {
    if !c.hocl {
        return x;
    }
    let base = dm_runtime::read(h.glt_ptr(x.ms()), 8).await.unwrap();
    GlobalAddr::from_u64(u64::from_le_bytes(base[..8].try_into().unwrap()))
}

fn scenario(c: Case) -> Seen {
    let mut r = rt(small_cfg());
    let c0 = r.add_core(0, 0);
    let c1 = r.add_core(0, 1);
    let x = GlobalAddr::new(1, 4096 + 64);
    let y = GlobalAddr::new(1, 8192);
    // Shared by the two cores' tasks (one OS thread under sim).
    let m0: Rc<RefCell<Option<Arc<Member>>>> = Rc::default();
    let local0 = NodeLocks::new_local_table(&techniques(true).0);
    let phase = Rc::new(Cell::new(0u8));
    let released = Rc::new(Cell::new(0u64));
    let (m, l, p, rel) = (m0.clone(), local0.clone(), phase.clone(), released.clone());
    // The owner: CS 0, core 1, on its own core.
    r.spawn_on(c1, async move {
        let member = common::member_once_set(&m).await;
        let a = handle(c, &member, 1, &l);
        // Its first lock registers its name on this core.
        let h = a.lock(y).await.unwrap();
        a.release(h, Vec::new()).await.unwrap();
        if let Owner::Holds(n) = c.owner {
            let h = a.lock(x).await.unwrap();
            p.set(1);
            yield_until(now_ns() + n * LEASE.lease_ns).await;
            a.release(h, Vec::new()).await.unwrap();
        } else {
            p.set(1);
        }
        if c.owner == Owner::Gone {
            drop(a);
            return;
        }
        while p.get() != 2 {
            yield_until(now_ns() + LEASE.heartbeat_ns).await;
        }
        rel.set(a.counters().snapshot().takeovers);
    });
    let out = r.block_on(c0, async move {
        let ms = TwoMembers::join(LEASE, CHUNK).await;
        let (member0, member1) = (ms.m0.clone(), ms.m1.clone());
        let (wm, local_w) = if c.waiter_cs == 0 {
            (member0.clone(), local0.clone())
        } else {
            (
                member1.clone(),
                NodeLocks::new_local_table(&techniques(true).0),
            )
        };
        let b = handle(c, &wm, 0, &local_w);
        if c.hocl {
            b.create_tables(2).await.unwrap();
        }
        *m0.borrow_mut() = Some(member0.clone());
        while phase.get() != 1 {
            yield_now().await;
        }
        let w = word_of(c, &b, x).await;
        if !matches!(c.owner, Owner::Holds(_)) {
            // The owner's name, left in the word: incarnation 1 above bit
            // 48, take count 0, (0 << 16 | 1) + 1.
            let name = 1u64 << 48 | 2;
            dm_runtime::write(w, name.to_le_bytes().to_vec())
                .await
                .unwrap();
        }
        let start = now_ns();
        let local_guard = (c.local_held > 0).then(|| local0.try_lock(1u64 << 48).unwrap());
        let (got, ()) = futures::join!(b.lock(x), async {
            if let Some(g) = local_guard {
                yield_until(start + c.local_held * LEASE.lease_ns).await;
                drop(g);
            }
        });
        let got_after = now_ns() - start;
        let got = got.unwrap();
        let stale = got.taken_stale();
        b.release(got, Vec::new()).await.unwrap();
        phase.set(2);
        yield_until(now_ns() + 2 * LEASE.heartbeat_ns).await;
        ms.stop().await;
        let s = b.counters().snapshot();
        (got_after, (s.recovered, s.takeovers), stale)
    });
    let (got_after, waiter, stale) = out.unwrap_or_else(|| panic!("{c:?}: never finished"));
    Seen {
        got_after,
        owner_released: released.get(),
        waiter,
        stale,
    }
}

fn case(owner: Owner, waiter_cs: u16) -> Case {
    Case {
        owner,
        waiter_cs,
        hocl: false,
        local_held: 0,
    }
}

/// Asked after a lease; a request to another CS waits for its heartbeat.
/// The word comes back released to `ABANDONED`, so the waiter takes it
/// stale: whatever the lock guarded may have been left half done by the
/// task that held it, which the index repairs (`Held::taken_stale`).
fn assert_released_soon(c: Case, s: &Seen) {
    assert!(
        (LEASE.lease_ns..=3 * LEASE.lease_ns).contains(&s.got_after),
        "{c:?}: {s:?}"
    );
    assert_eq!(s.waiter, (0, 0), "{c:?}: the waiter takes nothing over");
    assert!(
        s.stale,
        "{c:?}: a served request's word is taken stale: {s:?}"
    );
}

#[test]
fn another_core_of_the_cs_asks_and_the_named_core_releases() {
    let c = case(Owner::Idle, 0);
    let s = scenario(c);
    assert_released_soon(c, &s);
    assert_eq!(s.owner_released, 1, "{s:?}");
}

#[test]
fn another_cs_asks_through_the_membership_record() {
    let c = case(Owner::Idle, 1);
    let s = scenario(c);
    assert_released_soon(c, &s);
    assert_eq!(s.owner_released, 1, "{s:?}");
}

#[test]
fn a_name_whose_handles_are_gone_is_released_by_its_cs() {
    for waiter_cs in [0, 1] {
        let c = case(Owner::Gone, waiter_cs);
        assert_released_soon(c, &scenario(c));
    }
}

#[test]
fn a_word_really_held_is_not_released_on_request() {
    for waiter_cs in [0, 1] {
        let c = case(Owner::Holds(5), waiter_cs);
        let s = scenario(c);
        assert!(s.got_after >= 5 * LEASE.lease_ns, "{c:?}: {s:?}");
        assert_eq!((s.owner_released, s.waiter), (0, (0, 0)), "{c:?}: {s:?}");
        assert!(!s.stale, "{c:?}: released by its holder: {s:?}");
    }
}

/// Under HOCL a task that holds the slot's CS-local lock may hold the word
/// under another core's name (a hand-over): no release while it does.
#[test]
fn hocl_no_release_while_the_local_lock_is_held() {
    let c = Case {
        owner: Owner::Idle,
        waiter_cs: 1,
        hocl: true,
        local_held: 4,
    };
    let s = scenario(c);
    assert!(
        (4 * LEASE.lease_ns..=7 * LEASE.lease_ns).contains(&s.got_after),
        "{c:?}: {s:?}"
    );
    assert_eq!((s.owner_released, s.waiter), (1, (0, 0)), "{s:?}");
    assert!(s.stale, "{s:?}");
    let c = Case { local_held: 0, ..c };
    let s = scenario(c);
    assert_released_soon(c, &s);
    assert_eq!(s.owner_released, 1, "{s:?}");
}
