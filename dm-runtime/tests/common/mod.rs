//! Helpers shared by the test files: a small sim cluster and its runtime,
//! and a small loopback fabric. Each test binary uses some of them.
#![allow(dead_code)]

use dm_runtime::lock::{LeaseConfig, LockError, LockTableConfig, LockTechniques, Member};
use dm_runtime::{spawn, yield_now, JoinHandle, SimRuntime};
use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
use dm_verbs::sim::{SimConfig, SimFabric};
use dm_verbs::MsConfig;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

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

/// CSs 0 and 1 joined to the membership with `lease`, each beating its
/// heartbeat as a task on the current core; [`TwoMembers::stop`] ends both.
pub struct TwoMembers {
    pub m0: Arc<Member>,
    pub m1: Arc<Member>,
    beats: [JoinHandle<Result<(), LockError>>; 2],
}

impl TwoMembers {
    pub async fn join(lease: LeaseConfig, chunk: u64) -> Self {
        let m0 = Member::join(0, lease, chunk).await.unwrap();
        let m1 = Member::join(1, lease, chunk).await.unwrap();
        let beats = [spawn(m0.clone().heartbeat()), spawn(m1.clone().heartbeat())];
        TwoMembers { m0, m1, beats }
    }

    /// Stops both heartbeats and waits for their tasks.
    pub async fn stop(self) {
        self.m0.stop();
        self.m1.stop();
        let [a, b] = self.beats;
        let _ = (a.await, b.await);
    }
}

/// A member another task of the same sim thread joins and leaves in `m`:
/// waits (yielding) until it is there.
pub async fn member_once_set(m: &Rc<RefCell<Option<Arc<Member>>>>) -> Arc<Member> {
    loop {
        if let Some(member) = m.borrow().clone() {
            return member;
        }
        yield_now().await;
    }
}
