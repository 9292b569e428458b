//! Two indexes on one fabric (issue 31: "The catalog owns the superblock;
//! nothing else writes fixed offsets"). A Sherman B+tree with a host-memory
//! lock table (its address at root + 8 on every MS) and a SMART tree (or
//! the ART baseline, whose HOCL locks keep a lock-table address too) share
//! one simulated fabric: their default roots used to overlap (SMART's root
//! slot was the B+tree's lock-table pointer). Both creation orders, with
//! the default roots of the superblock map and with root areas from the
//! catalog ("users" and "sessions", looked up by name on every core); then
//! interleaved inserts into both and every key read back from both.
//!
//! This drives the library crates directly (dm-tree, dm-art, dm-runtime),
//! not the CLI.

use dm_art::{SmartConfig, SmartTree, Techniques as ArtTechniques};
use dm_runtime::catalog;
use dm_runtime::sync::LocalLockTable;
use dm_runtime::SimRuntime;
use dm_tree::{FgTree, LockTableConfig, Techniques, TreeConfig};
use dm_verbs::ms::superblock;
use dm_verbs::sim::{Faults, SimConfig, SimFabric};
use dm_verbs::MsConfig;
use futures::future::join_all;
use std::sync::Arc;

type Error = Box<dyn std::error::Error>;

const NUM_MS: u16 = 2;
const CHUNK: u64 = 1 << 20;
/// Keys inserted into each index.
const KEYS: u64 = 1000;
/// Compute servers, cores per CS, coroutines per core.
const CS: u16 = 2;
const CORES: u16 = 2;
const COROS: u64 = 4;
/// Catalog kind descriptors of the two indexes (family << 48 | key bytes << 32).
const KIND_SHERMAN: u64 = 1 << 48 | 8 << 32;
const KIND_RADIX: u64 = 2 << 48 | 8 << 32;

#[derive(Clone, Copy, Debug)]
struct Case {
    /// Create the B+tree first (else the radix tree).
    btree_first: bool,
    /// Roots from the catalog (else the superblock map's defaults).
    catalog: bool,
    /// The radix tree is the ART baseline (HOCL locks in a host lock table).
    art: bool,
}

fn sim(seed: u64) -> SimRuntime {
    let cfg = SimConfig {
        num_ms: NUM_MS,
        ms: MsConfig {
            region_bytes: 64 << 20,
            chunk_bytes: CHUNK,
            device_bytes: 0,
            cores: 1,
        },
        faults: Faults::torn_and_delayed(),
        seed,
        ..Default::default()
    };
    SimRuntime::new(SimFabric::new(cfg))
}

/// Both configurations at their default roots.
fn configs(case: Case) -> (TreeConfig, SmartConfig) {
    let tcfg = TreeConfig {
        chunk_bytes: CHUNK,
        num_ms: NUM_MS,
        techniques: Techniques::SHERMAN,
        lock_table: LockTableConfig::default(),
        ..Default::default()
    };
    let scfg = SmartConfig {
        chunk_bytes: CHUNK,
        num_ms: NUM_MS,
        techniques: if case.art {
            ArtTechniques::ART
        } else {
            ArtTechniques::SMART
        },
        lock_table: LockTableConfig::default(),
        ..Default::default()
    };
    assert!(!tcfg.lock_table.device && tcfg.techniques.locks.hier_lock);
    (tcfg, scfg)
}

/// The configurations as a process that knows only the names finds them.
async fn resolve(case: Case) -> Result<(TreeConfig, SmartConfig), Error> {
    let (tcfg, scfg) = configs(case);
    if !case.catalog {
        return Ok((tcfg, scfg));
    }
    let users = catalog::lookup("users")
        .await?
        .ok_or("no index called users")?;
    let sessions = catalog::lookup("sessions")
        .await?
        .ok_or("no index called sessions")?;
    assert_eq!((users.kind, sessions.kind), (KIND_SHERMAN, KIND_RADIX));
    Ok((
        tcfg.in_root_area(users.root_off),
        scfg.in_root_area(sessions.root_off),
    ))
}

/// Creates one of the two indexes from core `core` of CS `cs`.
async fn create(case: Case, btree: bool, cs: u16, core: u16) -> Result<(), Error> {
    let (tcfg, scfg) = configs(case);
    let tag = ((cs as u64) << 16 | core as u64) + 1;
    match (case.catalog, btree) {
        (false, true) => FgTree::create(tcfg, cs, core).await.map(drop)?,
        (false, false) => SmartTree::create(scfg, cs, core).await.map(drop)?,
        (true, true) => {
            let (e, made) = catalog::open_or_create(
                "users",
                KIND_SHERMAN,
                tcfg.root_bytes(),
                tag,
                |e| async move {
                    let t = FgTree::create(tcfg.in_root_area(e.root_off), cs, core).await?;
                    drop(t);
                    Ok::<(), Error>(())
                },
            )
            .await?;
            assert!(made && e.root_bytes == TreeConfig::ROOT_BYTES);
        }
        (true, false) => {
            let (e, made) = catalog::open_or_create(
                "sessions",
                KIND_RADIX,
                scfg.root_bytes(),
                tag,
                |e| async move {
                    let t = SmartTree::create(scfg.in_root_area(e.root_off), cs, core).await?;
                    drop(t);
                    Ok::<(), Error>(())
                },
            )
            .await?;
            assert!(made && e.root_bytes == SmartConfig::ROOT_BYTES);
        }
    }
    Ok(())
}

fn key(i: u64) -> [u8; 8] {
    // splitmix64: keys spread over the whole space, deterministic.
    let mut z = i
        .wrapping_add(0x9e37_79b9_7f4a_7c15)
        .wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).to_be_bytes()
}

fn btree_value(i: u64) -> u64 {
    i << 8 | 0xb7
}

fn radix_value(i: u64) -> u64 {
    i << 8 | 0x5a
}

/// Core `core` of CS `cs`: opens both indexes (by name when the case uses
/// the catalog) and runs `COROS` coroutines, each inserting its share of the
/// keys into both, alternately; then, when `verify`, reads every key back
/// from both.
async fn worker(
    case: Case,
    cs: u16,
    core: u16,
    locks: (Arc<LocalLockTable>, Arc<LocalLockTable>),
) -> Result<(), Error> {
    let (tcfg, scfg) = resolve(case).await?;
    let bt = FgTree::open(tcfg, cs, core)?.with_local_locks(locks.0);
    let rx = SmartTree::open(scfg, cs, core)?.with_local_locks(locks.1);
    let me = (cs * CORES + core) as u64;
    let (bt, rx) = (&bt, &rx);
    let runs = (0..COROS).map(|j| async move {
        let lane = me * COROS + j;
        let lanes = (CS * CORES) as u64 * COROS;
        for i in (lane..KEYS).step_by(lanes as usize) {
            bt.insert(&key(i), btree_value(i)).await?;
            rx.insert(&key(i), radix_value(i)).await?;
        }
        Ok::<(), Error>(())
    });
    for r in join_all(runs).await {
        r?;
    }
    Ok(())
}

/// Reads every key back from both indexes, from core `core` of CS `cs`.
async fn verify(case: Case, cs: u16, core: u16) -> Result<(), Error> {
    let (tcfg, scfg) = resolve(case).await?;
    let bt = FgTree::open(tcfg, cs, core)?;
    let rx = SmartTree::open(scfg, cs, core)?;
    for i in 0..KEYS {
        assert_eq!(
            bt.get(&key(i)).await?,
            Some(btree_value(i)),
            "{case:?}: B+tree key {i}"
        );
        assert_eq!(
            rx.get(&key(i)).await?,
            Some(radix_value(i)),
            "{case:?}: radix key {i}"
        );
    }
    assert_eq!(bt.get(&key(KEYS)).await?, None);
    assert_eq!(rx.get(&key(KEYS)).await?, None);
    Ok(())
}

fn run(case: Case, seed: u64) {
    let mut rt = sim(seed);
    let cores: Vec<_> = (0..CS)
        .flat_map(|cs| (0..CORES).map(move |c| (cs, c)))
        .map(|(cs, c)| (cs, c, rt.add_core(cs, c)))
        .collect();
    // The first index from CS 0, the second from CS 1.
    let order = [case.btree_first, !case.btree_first];
    for (i, btree) in order.into_iter().enumerate() {
        let (cs, core, c) = cores[i * CORES as usize];
        rt.block_on(c, create(case, btree, cs, core))
            .expect("creation finishes")
            .unwrap_or_else(|e| panic!("{case:?}: create: {e}"));
    }
    let (tcfg, _) = configs(case);
    let tables: Vec<_> = (0..CS)
        .map(|_| {
            (
                FgTree::new_local_lock_table(&tcfg),
                SmartTree::new_local_lock_table(),
            )
        })
        .collect();
    let handles: Vec<_> = cores
        .iter()
        .map(|&(cs, core, c)| {
            let locks = tables[cs as usize].clone();
            rt.spawn_on(c, worker(case, cs, core, locks))
        })
        .collect();
    rt.run();
    for h in handles {
        let r = h.try_take().expect("every worker finishes").unwrap();
        r.unwrap_or_else(|e| panic!("{case:?}: insert: {e}"));
    }
    for &(cs, core, c) in &cores {
        rt.block_on(c, verify(case, cs, core))
            .expect("verification finishes")
            .unwrap_or_else(|e| panic!("{case:?}: get: {e}"));
    }
    if case.catalog {
        // Root areas handed out in creation order, 16 bytes each.
        let first = superblock::ROOT_AREAS;
        let f = rt.fabric();
        let bump = f
            .peek(dm_verbs::GlobalAddr::new(0, superblock::CATALOG_BUMP), 8)
            .unwrap();
        assert_eq!(u64::from_le_bytes(bump.try_into().unwrap()), 32);
        let fixed = f
            .peek(dm_verbs::GlobalAddr::new(0, 0), first as usize)
            .unwrap();
        assert!(
            fixed[..superblock::CATALOG_BUMP as usize]
                .iter()
                .all(|&b| b == 0),
            "{case:?}: an index wrote a fixed root"
        );
    }
}

#[test]
fn sherman_and_smart_share_a_fabric() {
    for catalog in [false, true] {
        for btree_first in [true, false] {
            let case = Case {
                btree_first,
                catalog,
                art: false,
            };
            run(case, 1);
        }
    }
}

#[test]
fn sherman_and_the_art_baseline_share_a_fabric() {
    for catalog in [false, true] {
        for btree_first in [true, false] {
            let case = Case {
                btree_first,
                catalog,
                art: true,
            };
            run(case, 2);
        }
    }
}
