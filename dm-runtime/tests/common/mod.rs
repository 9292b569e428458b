//! Helpers shared by the test files: a small sim cluster and its runtime,
//! and a small loopback fabric. Each test binary uses some of them.
#![allow(dead_code)]

use dm_runtime::lock::{LockTableConfig, LockTechniques};
use dm_runtime::SimRuntime;
use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
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

/// Two MSs of 1 MiB (64 KiB chunks, 4 KiB of device memory), masked CAS.
pub fn loopback_fabric() -> LoopbackFabric {
    LoopbackFabric::new(LoopbackConfig {
        num_ms: 2,
        ms: MsConfig {
            region_bytes: 1 << 20,
            chunk_bytes: 1 << 16,
            device_bytes: 4096,
            cores: 1,
        },
        masked_cas: true,
    })
}

/// Sherman's hierarchical lock (HOCL, §4.3) with combined release: its
/// techniques, and a lock table of `slots` 64-bit slots in device memory
/// (`device`) or host memory.
pub fn hocl(slots: u64, device: bool) -> (LockTechniques, LockTableConfig) {
    let t = LockTechniques {
        combine: true,
        onchip_lock: true,
        hier_lock: true,
        ..LockTechniques::FG_PLUS
    };
    let table = LockTableConfig {
        device,
        lanes16: false,
        slots,
    };
    (t, table)
}
