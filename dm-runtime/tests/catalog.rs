//! The catalog of named roots (`dm_runtime::catalog`) on the sim fabric:
//! claim, publish, lookup and list; concurrent creators of one name under
//! torn READs and reordered completions; a full catalog, a full root-area
//! range, bad names, kind mismatches and a creator that never publishes.

mod common;

use common::{rt, small_cfg};
use dm_runtime::catalog::{self, CatalogError, Entry, BUSY_RETRIES, SLOTS};
use dm_runtime::{read, write, SimRuntime};
use dm_verbs::ms::superblock;
use dm_verbs::sim::Faults;
use dm_verbs::GlobalAddr;
use std::cell::Cell;
use std::rc::Rc;

fn word(r: &SimRuntime, a: GlobalAddr) -> u64 {
    u64::from_le_bytes(r.fabric().peek(a, 8).unwrap().try_into().unwrap())
}

fn bump(r: &SimRuntime) -> u64 {
    word(r, GlobalAddr::new(0, superblock::CATALOG_BUMP))
}

#[test]
fn claim_publish_lookup_list() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    // Garbage where the first root area will be: the claim zeroes it.
    let area = superblock::ROOT_AREAS;
    let (users, sessions) = r
        .block_on(c, async move {
            for ms in 0..2 {
                write(GlobalAddr::new(ms, area), vec![0xab; 32])
                    .await
                    .unwrap();
            }
            assert_eq!(catalog::lookup("users").await, Ok(None));
            let cl = catalog::claim("users", 7, 16, 1).await.unwrap();
            assert_eq!(cl.entry.root_off, superblock::ROOT_AREAS);
            assert_eq!(cl.entry.root_bytes, 16);
            // Claimed is not published.
            assert_eq!(catalog::lookup("users").await, Ok(None));
            assert_eq!(catalog::list().await, Ok(vec![]));
            let users = catalog::publish(cl).await.unwrap();
            assert_eq!(catalog::lookup("users").await, Ok(Some(users.clone())));
            // 20 bytes round up to 24, after the first area.
            let cl = catalog::claim("sessions", 9, 20, 2).await.unwrap();
            let sessions = catalog::publish(cl).await.unwrap();
            assert_eq!(sessions.root_off, superblock::ROOT_AREAS + 16);
            assert_eq!(sessions.root_bytes, 24);
            let mut all = catalog::list().await.unwrap();
            all.sort_by_key(|e| e.name.clone());
            assert_eq!(all, vec![sessions.clone(), users.clone()]);
            // A second claim of a published name gets it.
            assert_eq!(
                catalog::claim("users", 7, 16, 3).await.unwrap_err(),
                CatalogError::AlreadyExists(users.clone())
            );
            (users, sessions)
        })
        .unwrap();
    assert_eq!(
        (users.kind, users.tag, sessions.kind, sessions.tag),
        (7, 1, 9, 2)
    );
    assert_eq!(users.name, "users");
    // The lost claim gave its area back: 16 + 24 bytes handed out.
    assert_eq!(bump(&r), 40);
    for ms in 0..2 {
        let a = GlobalAddr::new(ms, area);
        assert_eq!(r.fabric().peek(a, 32).unwrap(), vec![0; 32], "MS {ms}");
    }
    // The entry's bytes as the module docs lay them out.
    let e = GlobalAddr::new(
        0,
        superblock::CATALOG_ENTRIES + users.slot as u64 * superblock::CATALOG_ENTRY_BYTES,
    );
    let b = r.fabric().peek(e, 64).unwrap();
    assert_eq!(b[0], 2, "ready");
    assert_eq!(&b[8..13], b"users");
    assert!(b[13..40].iter().all(|&x| x == 0));
    assert_eq!(u64::from_le_bytes(b[40..48].try_into().unwrap()), 7);
    assert_eq!(u32::from_le_bytes(b[48..52].try_into().unwrap()), 1024);
    assert_eq!(u32::from_le_bytes(b[52..56].try_into().unwrap()), 16);
    assert_eq!(u64::from_le_bytes(b[56..64].try_into().unwrap()), 1);
}

/// `cores` tasks on as many CSs race to create each of `names`: each name is
/// created exactly once, every task gets the same entry, and the root word
/// the creator wrote before publishing is visible to every opener.
fn race(seed: u64, cores: u16, names: &[&'static str]) {
    let mut cfg = small_cfg();
    cfg.seed = seed;
    cfg.faults = Faults::torn_and_delayed();
    let mut r = rt(cfg);
    let created = Rc::new(Cell::new(0u32));
    let mut handles = Vec::new();
    for cs in 0..cores {
        let c = r.add_core(cs, 0);
        for &name in names {
            let created = created.clone();
            handles.push(r.spawn_on(c, async move {
                let tag = (cs as u64) << 16 | 1;
                let (e, made) = catalog::open_or_create(name, 5, 16, tag, |e: Entry| async move {
                    // The index's create: its root word in the area, on MS 0.
                    let root = GlobalAddr::new(0, e.root_off);
                    write(root, (e.tag | 1 << 40).to_le_bytes().to_vec()).await?;
                    Ok::<(), CatalogError>(())
                })
                .await
                .unwrap();
                if made {
                    created.set(created.get() + 1);
                }
                let root = read(GlobalAddr::new(0, e.root_off), 8).await.unwrap();
                let root = u64::from_le_bytes(root.try_into().unwrap());
                assert_eq!(root, e.tag | 1 << 40, "{name}: the creator's root word");
                (name, e, made)
            }));
        }
    }
    r.run();
    assert_eq!(created.get(), names.len() as u32, "seed {seed}");
    let out: Vec<(&str, Entry, bool)> = handles
        .iter()
        .map(|h| h.try_take().unwrap().unwrap())
        .collect();
    for &name in names {
        let mine: Vec<_> = out.iter().filter(|o| o.0 == name).collect();
        assert_eq!(
            mine.iter().filter(|o| o.2).count(),
            1,
            "{name}, seed {seed}"
        );
        assert!(mine.iter().all(|o| o.1 == mine[0].1), "{name}, seed {seed}");
    }
    let mut slots: Vec<u8> = out.iter().filter(|o| o.2).map(|o| o.1.slot).collect();
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), names.len(), "seed {seed}");
}

#[test]
fn concurrent_creators_of_one_name_agree() {
    for seed in 1..=8 {
        race(seed, 2, &["users"]);
    }
}

#[test]
fn concurrent_creators_of_many_names_agree() {
    for seed in 1..=4 {
        race(seed, 4, &["users", "sessions", "orders", "carts", "a", "b"]);
    }
}

#[test]
fn fourteen_names_fill_it() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    r.block_on(c, async move {
        let mut made = Vec::new();
        for i in 0..SLOTS {
            let cl = catalog::claim(&format!("index-{i}"), i as u64, 16, 1)
                .await
                .unwrap();
            made.push(catalog::publish(cl).await.unwrap());
        }
        assert_eq!(
            catalog::claim("one-more", 0, 16, 1).await.unwrap_err(),
            CatalogError::Full
        );
        // A published name is still found when every slot is taken.
        assert!(matches!(
            catalog::claim("index-3", 3, 16, 1).await,
            Err(CatalogError::AlreadyExists(e)) if e == made[3]
        ));
        for e in &made {
            assert_eq!(catalog::lookup(&e.name).await, Ok(Some(e.clone())));
        }
        assert_eq!(catalog::lookup("one-more").await, Ok(None));
        let mut all = catalog::list().await.unwrap();
        all.sort_by_key(|e| e.kind);
        assert_eq!(all, made);
    })
    .unwrap();
    // The failed claims gave their root areas back.
    assert_eq!(bump(&r), SLOTS as u64 * 16);
}

#[test]
fn no_room_takes_no_slot_and_no_bytes() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let room = superblock::ROOT_AREAS_END - superblock::ROOT_AREAS;
    r.block_on(c, async move {
        assert_eq!(
            catalog::claim("big", 0, room as u32 + 1, 1)
                .await
                .unwrap_err(),
            CatalogError::NoRoom {
                want: room + 8,
                left: room
            }
        );
        let cl = catalog::claim("most", 0, room as u32 - 8, 1).await.unwrap();
        catalog::publish(cl).await.unwrap();
        assert_eq!(
            catalog::claim("two-words", 0, 16, 1).await.unwrap_err(),
            CatalogError::NoRoom { want: 16, left: 8 }
        );
        let cl = catalog::claim("last", 0, 8, 1).await.unwrap();
        assert_eq!(cl.entry.root_off, superblock::ROOT_AREAS_END - 8);
        catalog::publish(cl).await.unwrap();
        assert_eq!(catalog::list().await.unwrap().len(), 2);
    })
    .unwrap();
    assert_eq!(bump(&r), room);
}

#[test]
fn bad_names_are_errors() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    r.block_on(c, async move {
        let long = "x".repeat(33);
        for bad in ["", long.as_str(), "a\0b"] {
            assert_eq!(
                catalog::claim(bad, 0, 16, 1).await.unwrap_err(),
                CatalogError::BadName(bad.to_string())
            );
            assert_eq!(
                catalog::lookup(bad).await,
                Err(CatalogError::BadName(bad.to_string()))
            );
        }
        // A name of a megabyte is shown by its first 64 characters.
        let huge = "y".repeat(1 << 20);
        let shown = format!("{}... (1048576 bytes)", "y".repeat(64));
        assert_eq!(
            catalog::lookup(&huge).await,
            Err(CatalogError::BadName(shown))
        );
        // 32 bytes is the longest name.
        let cl = catalog::claim(&"é".repeat(16), 0, 16, 1).await.unwrap();
        let e = catalog::publish(cl).await.unwrap();
        assert_eq!(catalog::lookup(&"é".repeat(16)).await, Ok(Some(e)));
    })
    .unwrap();
    assert_eq!(bump(&r), 16);
}

#[test]
fn open_or_create_checks_the_kind() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    r.block_on(c, async move {
        let nothing = |_e: Entry| async { Ok::<(), CatalogError>(()) };
        let (e, made) = catalog::open_or_create("users", 1, 16, 1, nothing)
            .await
            .unwrap();
        assert!(made);
        let (again, made) = catalog::open_or_create("users", 1, 16, 2, nothing)
            .await
            .unwrap();
        assert_eq!((again, made), (e, false));
        let err = catalog::open_or_create("users", 2, 16, 2, nothing)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            CatalogError::KindMismatch {
                name: "users".into(),
                want: 2,
                found: 1
            }
        );
        assert!(err.to_string().contains("users"), "{err}");
    })
    .unwrap();
}

/// A create that fails abandons its claim: the next creator of the name
/// claims the slot again at once (no `BUSY_RETRIES` wait), in its own root
/// area, and publishes; a lookup meanwhile finds nothing.
#[test]
fn a_failed_create_abandons_its_claim_to_the_next_creator() {
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let (first, second, reads) = r
        .block_on(c, async move {
            let fail = |e: Entry| async move { Err::<(), _>(CatalogError::Busy(e.name)) };
            let err = catalog::open_or_create("users", 1, 16, 1, fail).await;
            let first = catalog::claim("other", 1, 16, 1).await.unwrap().entry;
            assert_eq!(catalog::lookup("users").await, Ok(None));
            let before = dm_runtime::task_stats().read;
            let ok = |_e: Entry| async { Ok::<(), CatalogError>(()) };
            let (e, made) = catalog::open_or_create("users", 1, 16, 2, ok)
                .await
                .unwrap();
            assert!(made && err.is_err());
            let reads = dm_runtime::task_stats().read - before;
            assert_eq!(catalog::lookup("users").await, Ok(Some(e.clone())));
            (first, e, reads)
        })
        .unwrap();
    // The abandoned slot is "users"'s again, with a fresh root area.
    assert_ne!(second.slot, first.slot);
    assert_eq!(second.tag, 2);
    assert!(second.root_off > first.root_off, "{second:?} {first:?}");
    assert!(reads < 10, "{reads} READs: no busy wait");
}

/// A claim never published (its creator died): another creator of the name
/// gives up after `BUSY_RETRIES` READs; other names are unaffected.
#[test]
fn an_unpublished_claim_leaves_its_name_busy() {
    let mut r = rt(small_cfg());
    let (a, b) = (r.add_core(0, 0), r.add_core(1, 0));
    r.block_on(a, async move {
        let _dead = catalog::claim("users", 1, 16, 1).await.unwrap();
    })
    .unwrap();
    let out = r
        .block_on(b, async move {
            let busy = catalog::claim("users", 1, 16, 2).await.unwrap_err();
            let reads = dm_runtime::task_stats().read;
            let other = catalog::claim("sessions", 1, 16, 2).await.map(|c| c.entry);
            (busy, reads, other)
        })
        .unwrap();
    assert_eq!(out.0, CatalogError::Busy("users".into()));
    assert!(out.1 >= BUSY_RETRIES as u64, "{} READs", out.1);
    assert!(out.2.is_ok(), "{:?}", out.2);
}

/// A claim by a member that dies before publishing is taken over by
/// another member after the lease (issue 33): the second creator creates
/// and publishes the name, and the dead creator's late publish (a zombie,
/// stalled past the lease) publishes nothing. A live member's claim is
/// waited for, never taken over, however long its create takes.
#[test]
fn a_dead_creators_claim_is_taken_over_and_a_live_ones_is_not() {
    use dm_runtime::lock::{LeaseConfig, Member};
    use dm_runtime::{now_ns, spawn, yield_until};
    const LEASE: LeaseConfig = LeaseConfig::SIM;
    let mut r = rt(small_cfg());
    let c = r.add_core(0, 0);
    let out = r.block_on(c, async move {
        let (m0, m1) = (
            Member::join(0, LEASE, 1 << 20).await.unwrap(),
            Member::join(1, LEASE, 1 << 20).await.unwrap(),
        );
        let hb0 = spawn(m0.clone().heartbeat());
        let hb1 = spawn(m1.clone().heartbeat());
        // Live: CS 0 claims "slow", creates for three leases, publishes;
        // CS 1 asks meanwhile and gets CS 0's entry.
        let cl = catalog::claim_as("slow", 5, 8, 10, Some(&m0))
            .await
            .unwrap();
        let until = now_ns() + 3 * LEASE.lease_ns;
        let (theirs, mine) = futures::join!(
            catalog::open_or_create_as("slow", 5, 8, 11, Some(&m1), |_| async {
                Ok::<(), CatalogError>(())
            }),
            async {
                yield_until(until).await;
                catalog::publish(cl).await.unwrap()
            }
        );
        let (entry, created) = theirs.unwrap();
        assert!(!created, "a live creator's claim was taken over");
        assert_eq!(entry, mine);
        assert_eq!(entry.tag, 10);
        // Dead: CS 0 claims "orders" and stops beating before it publishes.
        let zombie = catalog::claim_as("orders", 5, 8, 20, Some(&m0))
            .await
            .unwrap();
        m0.stop();
        let t0 = now_ns();
        let (entry, created) =
            catalog::open_or_create_as("orders", 5, 8, 21, Some(&m1), |_| async {
                Ok::<(), CatalogError>(())
            })
            .await
            .unwrap();
        let took = now_ns() - t0;
        assert!(created, "the dead creator's claim was not taken over");
        assert_eq!((entry.tag, entry.slot), (21, zombie.entry.slot));
        assert!(took >= LEASE.lease_ns, "taken over after {took} ns");
        // The zombie's publish finds its claim gone.
        assert_eq!(
            catalog::publish(zombie).await.unwrap_err(),
            CatalogError::ClaimLost("orders".into())
        );
        assert_eq!(catalog::lookup("orders").await.unwrap(), Some(entry));
        m1.stop();
        let _ = (hb0.await, hb1.await);
        took
    });
    let took = out.expect("never finished");
    assert!(took <= 5 * LeaseConfig::SIM.lease_ns, "took {took} ns");
}
