//! Configurations the library cannot run end in `BadConfig` before any
//! work, and a failed create leaves its name free (found by a sweep of the
//! API with bad inputs, 2026-11-29: each of these panicked on a core,
//! hung, aborted the process or failed later as a verb on address 0).

use dm_index::{Cluster, Error, FabricSpec, IndexConfig, IndexKind};
use dm_runtime::lock::LeaseConfig;
use dm_verbs::loopback::LoopbackConfig;
use dm_verbs::sim::SimConfig;

fn loopback() -> Cluster {
    Cluster::builder()
        .fabric(FabricSpec::Loopback(LoopbackConfig::default()))
        .build()
        .unwrap()
}

fn bad_config<T>(r: Result<T, Error>, why: &str) {
    match r {
        Err(Error::BadConfig(m)) => assert!(m.contains(why), "{m}"),
        Err(e) => panic!("want BadConfig({why}), got {e:?}"),
        Ok(_) => panic!("want BadConfig({why}), got Ok"),
    }
}

/// 32-byte keys in 64-byte nodes: the two fences overflow the node, whose
/// capacity wrapped to a huge number; every insert then panicked on its
/// core (nam-coarse's MS handler never answered). Refused at create, and
/// the name is still free for a good configuration.
#[test]
fn nodes_too_small_for_their_fences_are_refused_and_the_name_stays_free() {
    let c = loopback();
    for kind in [
        IndexKind::Fg,
        IndexKind::Sherman,
        IndexKind::NamCoarse,
        IndexKind::NamHybrid,
    ] {
        let cfg = IndexConfig::new(kind)
            .with_key_bytes(32)
            .with_node_bytes(64);
        bad_config(c.create_index("n", cfg), "fewer than 4 entries");
    }
    bad_config(
        c.create_index("n", IndexConfig::new(IndexKind::Fg).with_node_bytes(100)),
        "not a multiple of 8",
    );
    let mut dex = IndexConfig::new(IndexKind::Dex).with_node_bytes(0);
    bad_config(c.create_index("n", dex.clone()), "fewer than 4 entries");
    dex.dex.leaf_admission = f64::NAN;
    bad_config(
        c.create_index("n", dex.with_node_bytes(1024)),
        "probabilities",
    );
    let ix = c
        .create_index("n", IndexConfig::new(IndexKind::Fg))
        .unwrap();
    ix.insert_blocking(&7u64.to_be_bytes(), 1).unwrap();
    assert_eq!(ix.get_blocking(&7u64.to_be_bytes()).unwrap(), Some(1));
    // Opened with another node size: the message names the sizes.
    let other = IndexConfig::new(IndexKind::Fg).with_node_bytes(512);
    match c.open_or_create_index("n", other) {
        Err(Error::Catalog(m)) => assert!(m.contains("1024-byte nodes, not a fg"), "{m}"),
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("opened with another node size"),
    }
    // The radix family ignores node_bytes, so it is no part of the name's
    // kind: another value opens the same SMART index.
    let smart = IndexConfig::new(IndexKind::Smart);
    let ix = c.create_index("s", smart.clone()).unwrap();
    ix.insert_blocking(&7u64.to_be_bytes(), 2).unwrap();
    let again = c
        .open_or_create_index("s", smart.with_node_bytes(512))
        .unwrap();
    assert_eq!(again.get_blocking(&7u64.to_be_bytes()).unwrap(), Some(2));
}

/// SMART's table of usize::MAX entries overflowed its allocation; DEX's
/// cache of u64::MAX bytes aborted the process allocating its cooling map
/// (now a cache of `dm_tree::dex::MAX_FRAMES` frames, as good as no limit).
#[test]
fn table_and_cache_sizes_beyond_memory() {
    let c = loopback();
    let mut smart = IndexConfig::new(IndexKind::Smart);
    smart.rdwc_entries = usize::MAX;
    bad_config(c.create_index("s", smart), "rdwc_entries");
    let dex = IndexConfig::new(IndexKind::Dex).with_cache_bytes(u64::MAX);
    let ix = c.create_index("d", dex).unwrap();
    ix.insert_blocking(&7u64.to_be_bytes(), 1).unwrap();
    assert_eq!(ix.get_blocking(&7u64.to_be_bytes()).unwrap(), Some(1));
}

/// Memory servers that cannot hold a chunk, more cores than one process
/// runs, a zero lease, and a loopback region beyond the address space were
/// accepted (verbs on address 0 later, an abort, a 15 s create).
#[test]
fn clusters_that_cannot_run_are_refused_at_build() {
    let build = |f: fn(&mut LoopbackConfig)| {
        let mut c = LoopbackConfig::default();
        f(&mut c);
        Cluster::builder().fabric(FabricSpec::Loopback(c)).build()
    };
    bad_config(build(|c| c.num_ms = 0), "no memory servers");
    bad_config(build(|c| c.ms.chunk_bytes = 512), "chunk_bytes 512");
    bad_config(build(|c| c.ms.chunk_bytes = 4100), "chunk_bytes 4100");
    bad_config(build(|c| c.ms.region_bytes = 4096), "holds no chunk");
    bad_config(build(|c| c.ms.region_bytes = 1 << 50), "cannot allocate");
    let sim = SimConfig {
        num_ms: 0,
        ..Default::default()
    };
    bad_config(
        Cluster::builder().fabric(FabricSpec::Sim(sim)).build(),
        "no memory servers",
    );
    bad_config(
        Cluster::builder()
            .fabric(FabricSpec::Loopback(LoopbackConfig::default()))
            .cores_per_cs(2000)
            .build(),
        "at most 1024",
    );
    let zero = LeaseConfig {
        heartbeat_ns: 0,
        lease_ns: 0,
    };
    bad_config(
        Cluster::builder()
            .fabric(FabricSpec::Loopback(LoopbackConfig::default()))
            .lease(zero)
            .build(),
        "lease",
    );
}

/// DEX routed a key of the wrong width by owner first: `NotOwner` named
/// another process for a key no process takes.
#[test]
fn a_key_of_the_wrong_width_is_a_key_length_error_first() {
    let c = loopback();
    let ix = c
        .create_index("d", IndexConfig::new(IndexKind::Dex))
        .unwrap();
    for k in [&[][..], &[1u8; 7][..], &[0xffu8; 9][..]] {
        match ix.get_blocking(k) {
            Err(Error::KeyLength { got, .. }) => assert_eq!(got, k.len()),
            other => panic!("{} bytes: {other:?}", k.len()),
        }
    }
}
