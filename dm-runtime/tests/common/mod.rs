//! Helpers shared by the sim test files: a small cluster and its runtime.

use dm_runtime::SimRuntime;
use dm_verbs::sim::{SimConfig, SimFabric};
use dm_verbs::MsConfig;

pub fn small_cfg() -> SimConfig {
    SimConfig {
        num_ms: 2,
        ms: MsConfig {
            region_bytes: 64 << 20,
            chunk_bytes: 1 << 20,
            device_bytes: 4096,
            cores: 1,
        },
        ..Default::default()
    }
}

pub fn rt(cfg: SimConfig) -> SimRuntime {
    SimRuntime::new(SimFabric::new(cfg))
}
