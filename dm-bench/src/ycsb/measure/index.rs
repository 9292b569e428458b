//! Index creation and each core's handle, through the library
//! (`dm_index::Instance`, which holds each CS's shared state: the index
//! cache — B+tree leaf parents and top levels, SMART's ART cache, Dolphin's
//! cache — the local lock tables, and SMART's read delegation / write
//! combining tables, SMART §4.2.1): the index created from client 0's
//! first core ([`Bench::create`]), a core's handle opened with its CS's
//! state ([`Bench::open`]).

use super::Bench;
use dm_index::Index;
use std::future::Future;

impl Bench {
    /// Creates the index (from client 0's first core).
    pub(super) fn create(&self) -> impl Future<Output = Result<(), String>> + 'static {
        let inst = self.cl.inst.clone();
        let cs = inst.local_cs().start;
        async move { inst.create_root(cs, 0).await.map_err(|e| e.to_string()) }
    }

    /// Core `t` of CS `cs` of this process (`cs` counted from 0 in this
    /// process; `--client I/N` offsets it): its handle on the index.
    pub(super) fn open(&self, cs: u16, t: u16) -> Index {
        let inst = &self.cl.inst;
        let id = inst.local_cs().start + cs;
        // Each core counts into its own shard of the index's statistics.
        let shard = cs as usize * self.a.threads as usize + t as usize;
        inst.open(id, t, shard)
            .expect("the configuration was checked by opening a handle at set-up")
    }
}
