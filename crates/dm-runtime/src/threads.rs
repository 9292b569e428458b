//! One OS thread per core on real fabrics (`loopback`, `rdma`).

use crate::executor::{ExecConfig, Executor};
use dm_verbs::Fabric;
use std::future::Future;

/// Runs `n` cores of compute server `cs`, each on its own OS thread (pinned to a
/// CPU with `core_affinity` when `pin` and the CPU exists), each driving its own
/// [`Executor`] until the future `make(i)` built on that thread finishes.
/// Returns the outputs in core order.
pub fn run_threads<F, M, Fut>(fabric: &F, cs: u16, n: usize, pin: bool, make: M) -> Vec<Fut::Output>
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
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let make = &make;
                let cpu = cpus.get(i).copied();
                s.spawn(move || {
                    if let Some(c) = cpu {
                        core_affinity::set_for_current(c);
                    }
                    let q = fabric.open_queues(cs, i as u16);
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
