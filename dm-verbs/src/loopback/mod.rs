//! `loopback`: real threads, real races, real time. Each memory server's host
//! and device regions are memory of this process; every verb executes against
//! it in the thread that posts it, so races between cores are real races on
//! real memory. This is the backend that measures the CPU cost per operation
//! of an index (the sim charges modelled costs instead): [`Queues::cpu_cost`]
//! is zero and [`Queues::charge_cpu`] a no-op, because the CPU is really spent.
//!
//! ## Memory model
//! A region is an array of `AtomicU64` words, allocated zeroed by the system
//! allocator (`calloc`/`mmap` for large sizes), so a 1 GiB region costs
//! nothing until its pages are touched. A READ copies word by word with atomic
//! loads; a WRITE stores word by word, and the partial words at unaligned edges
//! are merged with a CAS loop, so a byte-granular WRITE never clobbers
//! neighbouring bytes written concurrently. Racing copies are therefore never
//! undefined behaviour (no plain `memcpy` over shared memory), and a READ that
//! overlaps a WRITE may return any mix of old and new 8-byte words: tearing at
//! 8-byte granularity, as on real RDMA. CAS and FAA are `compare_exchange` and
//! `fetch_add`, masked CAS is a CAS loop; all need 8-byte aligned addresses.
//!
//! ## Completion
//! Verbs complete synchronously inside [`Queues::post_list`], in posting
//! order; their completions wait in the core's CQ until polled. Per-QP order is
//! thus trivially the posting order. RPC handlers run inline in the posting
//! thread against a [`MsMemory`] view of their MS. The clock is monotonic
//! wall-clock ns since the fabric was created.
//!
//! ## Files
//! `words.rs`: regions as atomic words and the tearing READ/WRITE copies;
//! `memory.rs`: the memory servers and how each verb executes on them;
//! `fabric.rs`: [`LoopbackFabric`]; `queues.rs`: [`LoopbackQueues`], one
//! core's QPs and CQ.
//!
//! [`Queues::cpu_cost`]: crate::Queues::cpu_cost
//! [`Queues::charge_cpu`]: crate::Queues::charge_cpu
//! [`Queues::post_list`]: crate::Queues::post_list
//! [`MsMemory`]: crate::MsMemory

mod fabric;
mod memory;
mod queues;
#[cfg(test)]
mod tests;
mod words;

pub use fabric::LoopbackFabric;
pub use queues::LoopbackQueues;
// The rdma backend copies in and out of its staging MR with these too.
#[cfg(feature = "rdma")]
pub(crate) use words::{read_words, write_words};

use crate::MsConfig;

/// How a loopback cluster is built.
#[derive(Clone, Copy, Debug)]
pub struct LoopbackConfig {
    pub num_ms: u16,
    pub ms: MsConfig,
    /// Offer masked CAS (default true).
    pub masked_cas: bool,
}

impl Default for LoopbackConfig {
    fn default() -> Self {
        LoopbackConfig {
            num_ms: 1,
            ms: MsConfig::default(),
            masked_cas: true,
        }
    }
}
