//! The smallest embedding of dm (issue 31): a loopback cluster with one
//! compute server of one core, a SMART index, insert, get, scan, shut down.
//! Run: `cargo run --release -p dm-bench --example embed`.

use dm_index::{Cluster, FabricSpec, IndexConfig, IndexKind};

fn main() -> Result<(), dm_index::Error> {
    // Memory servers in this process (real loads, stores and atomics).
    let cluster = Cluster::builder()
        .fabric(FabricSpec::Loopback(Default::default()))
        .compute_servers(0, 1)
        .cores_per_cs(1)
        .build()?;
    // Created under a name in the catalog on MS 0; another process would
    // `open_index("users")`.
    let users = cluster.create_index("users", IndexConfig::new(IndexKind::Smart))?;
    for id in 0..100u64 {
        users.insert_blocking(&id.to_be_bytes(), id * 10)?;
    }
    assert_eq!(users.get_blocking(&42u64.to_be_bytes())?, Some(420));
    let first = users.scan_blocking(&10u64.to_be_bytes(), 3)?;
    assert_eq!(first.len(), 3);
    println!("scan from 10: {first:?}");
    let stats = cluster.shutdown();
    let (name, s) = &stats.indexes[0];
    println!(
        "{name}: {} ops, {} READs, {} WRITEs, {} CAS",
        s.ops(),
        s.verbs.read,
        s.verbs.write,
        s.verbs.cas
    );
    Ok(())
}
