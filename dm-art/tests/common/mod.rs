//! The sim cluster the radix family's tests share: 2 MSs of 64 MiB with
//! 1 MiB chunks and one RPC core each, no device memory, 8-byte torn READs
//! and delayed completions (`Faults::torn_and_delayed`).

use dm_runtime::SimRuntime;
use dm_verbs::sim::{Faults, SimConfig, SimFabric};
use dm_verbs::MsConfig;

/// MSs in the cluster.
pub const NUM_MS: u16 = 2;
/// Chunk size the MSs hand out.
pub const CHUNK: u64 = 1 << 20;

/// A runtime over the shared cluster, seeded with `seed`.
#[allow(dead_code)] // each test file uses one of the two
pub fn sim(seed: u64) -> SimRuntime {
    sim_with(seed, Faults::torn_and_delayed())
}

/// The shared cluster with the faults `faults`.
#[allow(dead_code)] // each test file uses one of the two
pub fn sim_with(seed: u64, faults: Faults) -> SimRuntime {
    let cfg = SimConfig {
        num_ms: NUM_MS,
        ms: MsConfig {
            region_bytes: 64 << 20,
            chunk_bytes: CHUNK,
            device_bytes: 0,
            cores: 1,
        },
        faults,
        seed,
        ..Default::default()
    };
    SimRuntime::new(SimFabric::new(cfg))
}
