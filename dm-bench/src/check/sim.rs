//! Running a seed's clients on `sim`: client `c` as a task on simulated
//! core `c % cores` (cores alternate between the two CSs), logging on the
//! core's virtual clock, and the history once the simulation has drained.

use super::args::Args;
use super::client::client;
use super::history::Event;
use crate::kv::Kv;
use anyhow::{bail, Result};
use dm_runtime::{JoinError, SimRuntime};
use std::cell::RefCell;
use std::rc::Rc;

/// The `--clients` clients of a sim seed, client `c` on core `c % cores`
/// with that core's tree handle, logging on the core's virtual clock.
pub(super) fn spawn_sim_clients<T: Kv + 'static>(
    rt: &mut SimRuntime,
    cores: &[dm_runtime::SimCore],
    trees: &[Rc<T>],
    a: &Rc<Args>,
    seed: u64,
    log: &Rc<RefCell<Vec<Event>>>,
) -> Vec<dm_runtime::JoinHandle<Result<(), String>>> {
    (0..a.clients)
        .map(|c| {
            let i = c as usize % cores.len();
            let f = client(
                trees[i].clone(),
                c,
                seed,
                a.clone(),
                0..a.keys,
                log.clone(),
                dm_runtime::now_ns,
                false,
            );
            rt.spawn_on(cores[i], f)
        })
        .collect()
}

/// The history of a finished sim seed, or why it has none.
pub(super) fn finish_seed(
    seed: u64,
    hs: &[dm_runtime::JoinHandle<Result<(), String>>],
    log: &Rc<RefCell<Vec<Event>>>,
) -> Result<Vec<Event>> {
    if hs.iter().any(|h| !h.is_finished()) {
        bail!("seed {seed}: some clients never finished (deadlock or lost wake-up)");
    }
    if let Some(e) = hs.iter().find_map(|h| {
        h.try_take()
            .and_then(|r| r.unwrap_or_else(JoinError::resume).err())
    }) {
        bail!("seed {seed}: a client failed: {e}");
    }
    let mut v = log.borrow().clone();
    super::client::drop_cut_reads(&mut v);
    Ok(v)
}
