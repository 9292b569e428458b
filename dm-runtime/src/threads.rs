//! One OS thread per core on real fabrics (`loopback`, `rdma`).

use crate::executor::{ExecConfig, Executor};
use dm_verbs::Fabric;
use std::future::Future;

/// Runs one OS thread per entry of `cores` (`(cs, core)` pairs), pinned to CPU
/// `i` with `core_affinity` when `pin` and that CPU exists; each thread drives its
/// own [`Executor`] until the future `make(i)` built on that thread finishes.
/// Returns the outputs in the order of `cores`.
pub fn run_threads<F, M, Fut>(
    fabric: &F,
    cores: &[(u16, u16)],
    pin: bool,
    make: M,
) -> Vec<Fut::Output>
where
    F: Fabric + Send + Sync,
    M: Fn(usize) -> Fut + Send + Sync,
    Fut: Future + 'static,
    Fut::Output: Send,
{
    let cpus = if pin {
        core_affinity::get_core_ids().unwrap_or_default()
    } else {
        Vec::new()
    };
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..cores.len())
            .map(|i| {
                let (cs, core) = cores[i];
                let make = &make;
                let cpu = cpus.get(i).copied();
                s.spawn(move || {
                    if let Some(c) = cpu {
                        core_affinity::set_for_current(c);
                    }
                    let q = fabric.open_queues(cs, core);
                    let mut ex = Executor::new(q, fabric.num_ms(), ExecConfig::default());
                    ex.block_on(make(i))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("core thread panicked"))
            .collect()
    })
}
