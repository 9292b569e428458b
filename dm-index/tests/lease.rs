//! A service's compute servers as members (issue 33): a cluster built with
//! a lease joins each local CS (incarnation 1 on fresh memory servers),
//! beats from its heartbeat thread, gives every index it opens the members,
//! and stops the thread at shutdown; sim refuses a lease.

use dm_index::{Cluster, Error, FabricSpec, IndexConfig, IndexKind, LeaseConfig};
use dm_verbs::loopback::LoopbackConfig;
use dm_verbs::sim::SimConfig;
use std::time::{Duration, Instant};

#[test]
fn a_cluster_with_a_lease_joins_beats_and_serves() {
    let lease = LeaseConfig::new(200_000, 2_000_000).unwrap();
    let cluster = Cluster::builder()
        .fabric(FabricSpec::Loopback(LoopbackConfig::default()))
        .compute_servers(0, 2)
        .cores_per_cs(1)
        .lease(lease)
        .build()
        .unwrap();
    for cs in 0..2 {
        let m = cluster.member(cs).expect("joined");
        assert_eq!((m.cs(), m.incarnation()), (cs, 1));
    }
    assert!(cluster.member(2).is_none());
    for kind in [IndexKind::Sherman, IndexKind::Smart] {
        let ix = cluster
            .create_index(kind.name(), IndexConfig::new(kind))
            .unwrap();
        for k in 0..200u64 {
            ix.insert_blocking(&k.to_be_bytes(), k + 1).unwrap();
        }
        for k in 0..200u64 {
            assert_eq!(ix.get_blocking(&k.to_be_bytes()).unwrap(), Some(k + 1));
        }
    }
    // The heartbeat thread keeps beating (waited for, not timed: the bound
    // only keeps a broken thread from hanging the test).
    let deadline = Instant::now() + Duration::from_secs(30);
    while (0..2).any(|cs| cluster.member(cs).unwrap().beats() < 5) {
        assert!(Instant::now() < deadline, "heartbeats stalled");
        std::thread::yield_now();
    }
    let m = cluster.member(0).unwrap();
    let stats = cluster.shutdown();
    assert!(m.stopped());
    let after = m.beats();
    assert!(stats.indexes.iter().all(|(_, s)| s.locks.recovered == 0));
    // Stopped with the cluster: nothing beats any more.
    assert_eq!(m.beats(), after);
}

#[test]
fn a_lease_on_sim_is_refused() {
    let r = Cluster::builder()
        .fabric(FabricSpec::Sim(SimConfig::default()))
        .lease(LeaseConfig::SIM)
        .build();
    match r {
        Err(Error::BadConfig(s)) => assert!(s.contains("loopback or rdma"), "{s}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a lease on sim was accepted"),
    }
}
