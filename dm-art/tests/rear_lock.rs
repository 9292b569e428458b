//! SMART's rear-embedded leaf lock under a membership (issue 33): words
//! that nobody holds are taken, a word a live member holds is not.
//! Soft-RoCE left two such words (docs/rdma.md): one naming the taker's
//! own CS after a CAS whose success went unreported, and one no writer
//! leaves (an old lock CAS executed again, torn with the unlock WRITE).
//! Each is planted here with a WRITE into the leaf's lock word. Sim,
//! virtual time, deterministic.

mod common;

use dm_art::layout::{lock_free, lock_taken, LeafGeometry};
use dm_art::{KeyCodec, SmartConfig, SmartTree};
use dm_runtime::lock::member::short_inc;
use dm_runtime::lock::{LeaseConfig, LockCounters, Member};
use dm_runtime::{now_ns, read, spawn, write, yield_until};
use dm_verbs::GlobalAddr;
use std::sync::Arc;

const LEASE: LeaseConfig = LeaseConfig::SIM;
const MAGIC: u64 = 0x5eed_1eaf_0bad_cafe;

fn cfg() -> SmartConfig {
    SmartConfig {
        keys: KeyCodec::fixed(8),
        chunk_bytes: common::CHUNK,
        num_ms: common::NUM_MS,
        ..Default::default()
    }
}

/// The leaf holding value `MAGIC` (8-byte keys: value at 32, lock at 40),
/// found by READing the first 4 MiB of each MS.
async fn find_leaf() -> GlobalAddr {
    let g = LeafGeometry::new(8);
    for ms in 0..common::NUM_MS {
        for piece in 0..64u64 {
            let base = piece << 16;
            let b = read(GlobalAddr::new(ms, base), 1 << 16).await.unwrap();
            for off in (32..b.len() - 16).step_by(8) {
                let v = u64::from_le_bytes(b[off..off + 8].try_into().unwrap());
                if v == MAGIC {
                    assert_eq!(off - 32 + g.lock_off(), off + 8);
                    return GlobalAddr::new(ms, base + off as u64 - 32);
                }
            }
        }
    }
    panic!("leaf not found");
}

async fn word(a: GlobalAddr) -> u64 {
    u64::from_le_bytes(read(a, 8).await.unwrap().try_into().unwrap())
}

/// How CS 0's handle finds the lock word of the key's leaf (seq 0 after
/// the insert): the planted word.
#[derive(Clone, Copy, Debug)]
enum Plant {
    /// Taken at the leaf's seq in CS 0's own name (an unreported CAS).
    OwnCs,
    /// A word no writer leaves: free bit clear, with a name.
    Torn,
    /// Taken at the leaf's seq by live CS 1, which holds it in its CS
    /// ledger for 4 leases and then releases it.
    LiveOther,
    /// Taken at the leaf's seq by live CS 1, none of whose tasks holds it
    /// (its unreported CAS): CS 1 releases it when CS 0 asks.
    StaleOther,
}

/// Plants `p` on the leaf of key 7 and updates it from CS 0; returns the
/// virtual ns the update took and CS 0's lock counters.
fn run(p: Plant) -> (u64, dm_runtime::lock::LockStats) {
    let mut rt = common::sim(11);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let m0 = Member::join(0, LEASE, common::CHUNK).await.unwrap();
        let m1 = Member::join(1, LEASE, common::CHUNK).await.unwrap();
        let hb0 = spawn(m0.clone().heartbeat());
        let hb1 = spawn(m1.clone().heartbeat());
        let counters = Arc::new(LockCounters::new());
        let t = SmartTree::create(cfg(), 0, 0)
            .await
            .unwrap()
            .with_member(m0.clone())
            .unwrap()
            .with_lock_counters(counters.clone());
        // CS 1's handle registers the rear lock's format with its member.
        let _t1 = SmartTree::open(cfg(), 1, 0)
            .unwrap()
            .with_member(m1.clone())
            .unwrap();
        let key = 7u64.to_be_bytes();
        t.insert(&key, MAGIC).await.unwrap();
        let leaf = find_leaf().await;
        let lock_a = leaf.add(LeafGeometry::new(8).lock_off() as u64);
        assert_eq!(word(lock_a).await, lock_free(0));
        let own = (short_inc(m0.incarnation()) as u64) << 9;
        let other = (short_inc(m1.incarnation()) as u64) << 9 | 1;
        let planted = match p {
            Plant::OwnCs => lock_taken(0, own),
            Plant::Torn => lock_free(0) | other << 49,
            Plant::LiveOther | Plant::StaleOther => lock_taken(0, other),
        };
        let held =
            matches!(p, Plant::LiveOther).then(|| m1.cs_words().begin(lock_a.to_u64()).took());
        write(lock_a, planted.to_le_bytes().to_vec()).await.unwrap();
        let start = now_ns();
        let release = async {
            if let Plant::LiveOther = p {
                yield_until(start + 4 * LEASE.lease_ns).await;
                // Still held, value unchanged: nobody took a live word.
                assert_eq!(word(lock_a).await, planted);
                write(lock_a, lock_free(0).to_le_bytes().to_vec())
                    .await
                    .unwrap();
            }
            drop(held);
        };
        let (updated, ()) = futures::join!(t.update(&key, 2), release);
        assert!(updated.unwrap());
        let took = now_ns() - start;
        assert_eq!(t.get(&key).await.unwrap(), Some(2));
        assert_eq!(word(lock_a).await, lock_free(1), "released at seq + 1");
        m0.stop();
        m1.stop();
        let _ = (hb0.await, hb1.await);
        (took, counters.snapshot())
    })
    .unwrap()
}

#[test]
fn a_word_naming_this_cs_that_none_of_its_tasks_holds_is_claimed_at_once() {
    let (took, s) = run(Plant::OwnCs);
    assert_eq!((s.takeovers, s.recovered), (1, 0), "{s:?}");
    assert!(took < LEASE.lease_ns, "claimed without a lease: {took} ns");
}

#[test]
fn a_word_no_writer_leaves_is_taken_after_a_lease() {
    let (took, s) = run(Plant::Torn);
    assert_eq!((s.takeovers, s.recovered), (0, 1), "{s:?}");
    assert!(took >= LEASE.lease_ns, "{took} ns");
}

#[test]
fn a_word_naming_a_live_cs_that_none_of_its_tasks_holds_is_released_by_it_when_asked() {
    let (took, s) = run(Plant::StaleOther);
    assert_eq!((s.takeovers, s.recovered), (0, 0), "{s:?}");
    assert!(
        (LEASE.lease_ns..4 * LEASE.lease_ns).contains(&took),
        "asked after a lease, released by CS 1: {took} ns"
    );
}

#[test]
fn a_word_a_live_member_holds_waits_for_its_release() {
    let (took, s) = run(Plant::LiveOther);
    assert_eq!((s.takeovers, s.recovered), (0, 0), "{s:?}");
    assert!(took >= 4 * LEASE.lease_ns, "{took} ns");
}

/// Tasks of one CS on two cores update the same keys concurrently: every
/// lock CAS of theirs goes through the CS ledger, and none is mistaken for
/// an unreported take (delayed completions reorder them on sim).
#[test]
fn contended_updates_of_one_cs_take_nothing_over() {
    let mut rt = common::sim(5);
    let c0 = rt.add_core(0, 0);
    let c1 = rt.add_core(0, 1);
    let slot: Arc<std::sync::Mutex<Option<Arc<Member>>>> = Arc::default();
    let counters = Arc::new(LockCounters::new());
    let (s1, k1) = (slot.clone(), counters.clone());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d1 = done.clone();
    rt.spawn_on(c1, async move {
        let m = loop {
            if let Some(m) = s1.lock().unwrap().clone() {
                break m;
            }
            dm_runtime::yield_now().await;
        };
        let t = SmartTree::open(cfg(), 0, 1)
            .unwrap()
            .with_member(m)
            .unwrap()
            .with_lock_counters(k1);
        for i in 0..300u64 {
            t.update(&(i % 3).to_be_bytes(), 1000 + i).await.unwrap();
        }
        d1.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let s = rt
        .block_on(c0, async move {
            let m = Member::join(0, LEASE, common::CHUNK).await.unwrap();
            let hb = spawn(m.clone().heartbeat());
            let t = SmartTree::create(cfg(), 0, 0)
                .await
                .unwrap()
                .with_member(m.clone())
                .unwrap()
                .with_lock_counters(counters.clone());
            for k in 0..3u64 {
                t.insert(&k.to_be_bytes(), 0).await.unwrap();
            }
            *slot.lock().unwrap() = Some(m.clone());
            for i in 0..300u64 {
                t.update(&(i % 3).to_be_bytes(), 2000 + i).await.unwrap();
            }
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                dm_runtime::yield_now().await;
            }
            m.stop();
            let _ = hb.await;
            counters.snapshot()
        })
        .unwrap();
    assert_eq!(s.acquisitions, 600, "{s:?}");
    assert_eq!((s.takeovers, s.recovered), (0, 0), "{s:?}");
    assert!(s.cas_failures + s.waits > 0, "the cores contended: {s:?}");
}

/// CS 0's and CS 1's memberships.
type Members = (Arc<Member>, Arc<Member>);

/// E-HOCL (SMART §5.3.1; `dm_art::rdwc`'s write queue without combining):
/// 16 tasks on two cores of CS 0 update one key while 4 tasks of CS 1
/// update it too, under torn READs and delayed completions. CS 0's queued
/// writers receive the rear lock by hand-over (no READ, no CAS) from the
/// writer before them, at most `HOCL.max_handover` times in a row; CS 1's
/// writers CAS for it between the runs. Every locked write moves the
/// leaf's `seq` by one, so after `n` updates the word is free at `n`;
/// nothing is taken over, and the last value written is the one read.
#[test]
fn e_hocl_hands_the_rear_lock_to_queued_writers_of_its_cs() {
    let mut rt = common::sim(9);
    let c0 = rt.add_core(0, 0);
    let c1 = rt.add_core(0, 1);
    let c2 = rt.add_core(1, 0);
    const PER_TASK: u64 = 40;
    let slot: Arc<std::sync::Mutex<Option<Members>>> = Arc::default();
    let counters = Arc::new(LockCounters::new());
    let rdwc = Arc::new(dm_art::Rdwc::new(64, false, false).queue_writers(true));
    let done = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let key = 7u64.to_be_bytes();
    let side = |core: u16, cs: u16, tasks: u64, base: u64| {
        let (slot, k, r, d) = (slot.clone(), counters.clone(), rdwc.clone(), done.clone());
        async move {
            let m = loop {
                if let Some((m0, m1)) = slot.lock().unwrap().clone() {
                    break if cs == 0 { m0 } else { m1 };
                }
                dm_runtime::yield_now().await;
            };
            let mut t = SmartTree::open(cfg(), cs, core)
                .unwrap()
                .with_member(m)
                .unwrap()
                .with_lock_counters(k);
            if cs == 0 {
                t = t.with_rdwc(r);
            }
            let t = std::rc::Rc::new(t);
            let hs: Vec<_> = (0..tasks)
                .map(|j| {
                    let t = t.clone();
                    spawn(async move {
                        for i in 0..PER_TASK {
                            assert!(t.update(&key, base + j * 1000 + i).await.unwrap());
                        }
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
            d.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    };
    rt.spawn_on(c1, side(1, 0, 8, 1_000_000));
    rt.spawn_on(c2, side(0, 1, 4, 2_000_000));
    let main = side(0, 0, 8, 3_000_000);
    let (s, last, lock) = rt
        .block_on(c0, async move {
            let m0 = Member::join(0, LEASE, common::CHUNK).await.unwrap();
            let m1 = Member::join(1, LEASE, common::CHUNK).await.unwrap();
            let hbs = [spawn(m0.clone().heartbeat()), spawn(m1.clone().heartbeat())];
            let t = SmartTree::create(cfg(), 0, 0).await.unwrap();
            t.insert(&key, MAGIC).await.unwrap();
            let leaf = find_leaf().await;
            *slot.lock().unwrap() = Some((m0.clone(), m1.clone()));
            main.await;
            while done.load(std::sync::atomic::Ordering::SeqCst) < 3 {
                dm_runtime::yield_now().await;
            }
            let last = t.get(&key).await.unwrap().unwrap();
            let lock = word(leaf.add(LeafGeometry::new(8).lock_off() as u64)).await;
            m0.stop();
            m1.stop();
            for h in hbs {
                let _ = h.await;
            }
            (counters.snapshot(), last, lock)
        })
        .unwrap();
    let n = 20 * PER_TASK;
    assert_eq!(
        lock,
        lock_free(n),
        "free at seq {n}: every write moved it once"
    );
    assert!(
        last >= 1_000_000 && last % 1000 == PER_TASK - 1,
        "a task's last value: {last}"
    );
    assert!(s.handovers > 0, "{s:?}");
    assert_eq!(s.acquisitions + s.handovers, n, "{s:?}");
    assert_eq!((s.takeovers, s.recovered), (0, 0), "{s:?}");
}

/// A queued E-HOCL writer cancelled after the rear lock was handed to it
/// (its future dropped), on a handle without a membership: nothing but
/// this CS frees the word, so the table keeps it as an orphan and the
/// CS's next write frees it before its own (`dm_art::rdwc::Handed`).
#[test]
fn a_hand_over_whose_receiver_was_cancelled_is_freed_by_the_next_write() {
    let mut rt = common::sim(3);
    let c = rt.add_core(0, 0);
    rt.block_on(c, async move {
        let counters = Arc::new(LockCounters::new());
        let t = SmartTree::create(cfg(), 0, 0)
            .await
            .unwrap()
            .with_rdwc(Arc::new(
                dm_art::Rdwc::new(16, false, false).queue_writers(true),
            ))
            .with_lock_counters(counters.clone());
        let key = 7u64.to_be_bytes();
        t.insert(&key, MAGIC).await.unwrap();
        let lock_a = find_leaf()
            .await
            .add(LeafGeometry::new(8).lock_off() as u64);
        let (a, b) = (Box::pin(t.update(&key, 1)), Box::pin(t.update(&key, 2)));
        // `a` leads and, `b` queued behind it, WRITEs with the word taken
        // and hands it over; `b` is dropped unpolled after that.
        match futures::future::select(a, b).await {
            futures::future::Either::Left((r, b)) => {
                assert!(r.unwrap());
                drop(b);
            }
            futures::future::Either::Right(_) => panic!("the follower finished first"),
        }
        assert_eq!(
            word(lock_a).await,
            lock_taken(1, 0),
            "held for the cancelled writer"
        );
        assert!(t.update(&key, 3).await.unwrap());
        assert_eq!(t.get(&key).await.unwrap(), Some(3));
        assert_eq!(
            word(lock_a).await,
            lock_free(2),
            "freed, then taken and freed"
        );
        let s = counters.snapshot();
        assert_eq!((s.acquisitions, s.handovers), (2, 0), "{s:?}");
    })
    .unwrap();
}
