//! The library surface end to end: every index kind through a `Client` on
//! sim and loopback, checked against a model; typed errors; indexes opened
//! by name; submission from tokio.

use dm_index::{Cluster, Error, FabricSpec, IndexConfig, IndexKind};
use std::collections::BTreeMap;

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// A small deterministic mix on `kind`, every answer checked.
fn exercise(fabric: FabricSpec, kind: IndexKind) {
    let cluster = Cluster::builder()
        .fabric(fabric)
        .compute_servers(0, 2)
        .cores_per_cs(1)
        .build()
        .unwrap();
    let ix = cluster
        .create_index("t", IndexConfig::new(kind).with_cache_bytes(1 << 20))
        .unwrap();
    let mut model = BTreeMap::new();
    // A fixed permutation of 0..300 (x * 7 mod 300), values that change.
    for i in 0..300u64 {
        let k = (i * 7) % 300 * 1000;
        ix.insert_blocking(&key(k), i + 1).unwrap();
        model.insert(k, i + 1);
    }
    for i in 0..300u64 {
        let k = i * 1000;
        match i % 3 {
            0 => {
                let ok = ix.update_blocking(&key(k), i + 7).unwrap();
                assert!(ok, "{kind}: update of a present key");
                model.insert(k, i + 7);
            }
            1 => {
                assert!(ix.remove_blocking(&key(k)).unwrap(), "{kind}: remove");
                model.remove(&k);
            }
            _ => {}
        }
    }
    assert!(!ix.update_blocking(&key(1), 1).unwrap(), "{kind}: absent");
    assert!(!ix.remove_blocking(&key(1000)).unwrap(), "{kind}: removed");
    for k in (0..300u64).map(|i| i * 1000 + (i % 2)) {
        assert_eq!(
            ix.get_blocking(&key(k)).unwrap(),
            model.get(&k).copied(),
            "{kind}: get {k}"
        );
    }
    let s = ix.scan_blocking(&key(50_500), 10).unwrap();
    let want: Vec<_> = model
        .range(50_500..)
        .take(10)
        .map(|(k, v)| (key(*k).to_vec(), *v))
        .collect();
    assert_eq!(s, want, "{kind}: scan");
    // The same through a reused flat buffer: a longer scan, then a shorter.
    let mut buf = dm_index::ScanBuf::new();
    ix.scan_into_blocking(&key(0), 50, &mut buf).unwrap();
    assert_eq!(buf.len(), 50, "{kind}: scan_into");
    ix.scan_into_blocking(&key(50_500), 10, &mut buf).unwrap();
    assert_eq!(buf.to_entries(), want, "{kind}: scan_into reused");
    let r = ix
        .range_blocking(&key(10_000), &key(250_000), 1000)
        .unwrap();
    let want: Vec<_> = model
        .range(10_000..250_000)
        .map(|(k, v)| (key(*k).to_vec(), *v))
        .collect();
    assert_eq!(r, want, "{kind}: range past several batches");
    let r = ix.range_blocking(&key(10_000), &key(250_000), 5).unwrap();
    assert_eq!(r, want[..5], "{kind}: range limit");
    // A key of the wrong width changes nothing and says why.
    let e = ix.insert_blocking(&[1, 2, 3], 9).unwrap_err();
    assert!(matches!(e, Error::KeyLength { got: 3, .. }), "{kind}: {e}");
    let st = ix.stats();
    assert_eq!(st.inserts, 300, "{kind}: insert counter ({st:?})");
    assert!(st.errors >= 1 || st.inserts == 300, "{kind}");
    assert!(st.verbs.read + st.verbs.rpc > 0, "{kind}: verbs counted");
    let stats = cluster.shutdown();
    assert_eq!(stats.indexes.len(), 1);
    assert_eq!(stats.cores.len(), 2);
}

#[test]
fn every_index_on_sim() {
    for kind in IndexKind::ALL {
        exercise(FabricSpec::Sim(Default::default()), kind);
    }
}

#[test]
fn every_index_on_loopback() {
    for kind in IndexKind::ALL {
        exercise(FabricSpec::Loopback(Default::default()), kind);
    }
}

#[test]
fn two_indexes_by_name_share_a_fabric() {
    let cluster = Cluster::builder()
        .fabric(FabricSpec::Loopback(Default::default()))
        .cores_per_cs(2)
        .build()
        .unwrap();
    let users = cluster
        .create_index("users", IndexConfig::new(IndexKind::Sherman))
        .unwrap();
    let sessions = cluster
        .create_index(
            "sessions",
            IndexConfig::new(IndexKind::Smart).with_key_bytes(16),
        )
        .unwrap();
    for i in 0..500u64 {
        users.insert_blocking(&key(i), i).unwrap();
        let mut k = [0u8; 16];
        k[8..].copy_from_slice(&key(i));
        sessions.insert_blocking(&k, i * 2).unwrap();
    }
    // Opened by name: the same index (and the same instance in-process).
    let again = cluster.open_index("users").unwrap();
    assert_eq!(again.get_blocking(&key(77)).unwrap(), Some(77));
    let mut k = [0u8; 16];
    k[8..].copy_from_slice(&key(77));
    assert_eq!(sessions.get_blocking(&k).unwrap(), Some(154));
    assert!(matches!(
        cluster.open_index("nobody"),
        Err(Error::Catalog(_))
    ));
    assert!(matches!(
        cluster.create_index("users", IndexConfig::new(IndexKind::Sherman)),
        Err(Error::Catalog(_))
    ));
    assert!(matches!(
        cluster.open_or_create_index("users", IndexConfig::new(IndexKind::Dex)),
        Err(Error::Catalog(_))
    ));
    let names: Vec<String> = cluster
        .catalog()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let stats = cluster.shutdown();
    assert_eq!(stats.indexes.len(), 2);
    // After shutdown a client's request is refused, not hung.
    assert_eq!(users.get_blocking(&key(1)), Err(Error::ShutDown));
}

#[test]
fn a_config_the_index_cannot_take_is_refused() {
    let cluster = Cluster::builder().build().unwrap();
    let e = cluster
        .create_index("d", IndexConfig::new(IndexKind::Dolphin).with_key_bytes(16))
        .err()
        .unwrap();
    assert!(matches!(e, Error::BadConfig(_)), "{e}");
    let e = cluster
        .create_index("", IndexConfig::new(IndexKind::Fg))
        .err()
        .unwrap();
    assert!(matches!(e, Error::Catalog(_)), "{e}");
    assert!(Cluster::builder().cores_per_cs(0).build().is_err());
}

#[test]
fn clients_await_on_tokio() {
    let cluster = Cluster::builder()
        .fabric(FabricSpec::Loopback(Default::default()))
        .cores_per_cs(2)
        .build()
        .unwrap();
    let ix = cluster
        .create_index("kv", IndexConfig::new(IndexKind::Dex))
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for t in 0..8u64 {
            let ix = ix.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..200u64 {
                    let k = key(i * 8 + t);
                    ix.insert(&k, i).await.unwrap();
                    assert_eq!(ix.get(&k).await.unwrap(), Some(i));
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let all = ix.scan(&key(0), 2000).await.unwrap();
        assert_eq!(all.len(), 1600);
    });
    assert_eq!(ix.stats().gets, 1600);
    cluster.shutdown();
}

/// Lock statistics are per index (issue 31): inserts into one index count
/// its lock acquisitions, not another's in the same process; each family's
/// lock is counted (Sherman's GLT/HOCL and FG+'s lock word, SMART's rear
/// lock on an update, Dolphin's Spear holds); so are the bytes carved.
#[test]
fn lock_statistics_are_per_index() {
    use dm_index::stats::LockStats;
    let cluster = Cluster::builder()
        .fabric(FabricSpec::Loopback(Default::default()))
        .compute_servers(0, 2)
        .cores_per_cs(1)
        .build()
        .unwrap();
    let new = |name: &str, kind| cluster.create_index(name, IndexConfig::new(kind)).unwrap();
    let sherman = new("sherman", IndexKind::Sherman);
    let fg = new("fg", IndexKind::Fg);
    let smart = new("smart", IndexKind::Smart);
    let dolphin = new("dolphin", IndexKind::Dolphin);
    let n = 200u64;
    for i in 0..n {
        sherman.insert_blocking(&key(i * 13), i).unwrap();
    }
    let s = sherman.stats().locks;
    assert!(
        s.acquisitions >= n,
        "one leaf lock per insert at least: {s:?}"
    );
    for other in [&fg, &smart, &dolphin] {
        assert_eq!(other.stats().locks, LockStats::default());
        assert_eq!(other.stats().bytes_carved, 0, "memory is per index too");
    }
    let carved = sherman.stats().bytes_carved;
    assert!(carved > 0, "leaves split: new nodes carved");
    for i in 0..n {
        fg.insert_blocking(&key(i), i).unwrap();
    }
    assert!(fg.stats().locks.acquisitions >= n, "{:?}", fg.stats().locks);
    assert_eq!(sherman.stats().locks, s, "fg's inserts are not sherman's");
    assert_eq!(sherman.stats().bytes_carved, carved);
    // SMART publishes a new key by CAS; an upsert of a present one takes
    // the leaf's rear lock.
    for i in 0..50 {
        smart.insert_blocking(&key(i), i).unwrap();
    }
    assert_eq!(smart.stats().locks.acquisitions, 0);
    for i in 0..50 {
        smart.insert_blocking(&key(i), i + 1).unwrap();
    }
    let m = smart.stats().locks;
    assert!(m.acquisitions >= 50, "{m:?}");
    for i in 0..50 {
        dolphin.insert_blocking(&key(i), i).unwrap();
        assert!(dolphin.update_blocking(&key(i), i + 1).unwrap());
    }
    let d = dolphin.stats();
    // The first insert hangs the prefix's new leaf (no hold); every other
    // insert holds the leaf exclusively, every update a share.
    assert!(d.locks.acquisitions >= 99, "Spear holds: {d:?}");
    assert_eq!(d.locks.cas_failures, 0, "Spear takes no CAS");
    assert_eq!(d.locks.waits, d.dolphin.lock_waits);
    assert_eq!(sherman.stats().locks, s);
    assert_eq!(sherman.stats().dolphin, Default::default());
    cluster.shutdown();
}
