//! CPU cost per operation on real fabrics (issue 9, item 4: "CPU cost per
//! operation on loopback").
//!
//! What is counted: the CPU time of the core threads of the run phase, read
//! with `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` by each core thread itself,
//! when its share of the run starts (the first poll of its coroutines'
//! parent task) and when its last coroutine finishes, summed over the
//! threads. That is user and system time the kernel charged to those
//! threads, in ns; not wall time x threads, so a thread descheduled by a
//! neighbour on a shared machine does not count, and a thread that finishes
//! its share early stops counting (it exits).
//!
//! Everything the core thread does in between is counted:
//! - the index's own work (traversals, caches, locks, coroutine switches,
//!   the executor's scheduling) and the benchmark's per-operation
//!   bookkeeping (latency histogram, verb counters, checks of each result
//!   against the values ever written), which the baseline
//!   ([`crate::ycsb::baseline`]) does too;
//! - busy-polling the completion queue while every coroutine waits: an RDMA
//!   client burns that CPU too (polling a CQ is how a one-sided client
//!   waits), so it belongs to the cost of going through the fabric;
//! - on `loopback`, executing the verbs themselves: a READ or WRITE is a
//!   word-by-word copy to or from the memory server's region, CAS and FAA
//!   atomics, and RPC handlers run inline, all in the posting thread. On
//!   RDMA the NIC and the memory server's cores do that work, so loopback's
//!   number is an upper bound of the compute-side CPU an RDMA client spends
//!   (minus the NIC driver's posting cost, which loopback does not have).
//!
//! Not counted: the load phase, verification, set-up (opening trees,
//! spawning threads), and the main thread.
//!
//! Units: `cpu_ns_per_op` is ns of thread CPU time per completed operation;
//! `per_core_mops` is operations / (run wall seconds x core threads) / 1e6,
//! millions of operations per second per core thread of wall time.

use serde_json::{json, Value};
use std::future::Future;

/// CPU time consumed so far by the calling thread, ns
/// (`CLOCK_THREAD_CPUTIME_ID`: user + system time of this thread).
pub fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Runs `f` and returns its output with the CPU time of the thread that
/// polls it, ns, and the heap allocations that thread made
/// ([`crate::alloc_count`]), from its first poll to its completion. Meant
/// for a future that a single thread drives to completion (a core's
/// executor), so that the thread's CPU time and allocations in between are
/// the future's.
pub async fn on_thread<F: Future>(f: F) -> (F::Output, u64, u64) {
    let (t0, a0) = (thread_cpu_ns(), crate::alloc_count::thread_allocs());
    let out = f.await;
    let allocs = crate::alloc_count::thread_allocs().saturating_sub(a0);
    (out, thread_cpu_ns().saturating_sub(t0), allocs)
}

/// The CPU cost of one run phase: thread CPU time summed over its threads.
#[derive(Clone, Copy, Debug)]
pub struct CpuCost {
    /// Thread CPU time of all the run's threads, ns.
    pub thread_cpu_ns: u64,
    /// Threads that ran the operations.
    pub threads: usize,
    /// Operations completed.
    pub ops: u64,
    /// Wall time of the run phase, ns.
    pub run_ns: u64,
    /// Heap allocations of the run's threads ([`crate::alloc_count`]).
    pub allocs: u64,
}

impl CpuCost {
    /// Thread CPU ns per completed operation.
    pub fn cpu_ns_per_op(&self) -> f64 {
        self.thread_cpu_ns as f64 / self.ops.max(1) as f64
    }

    /// Heap allocations of the core threads per completed operation.
    pub fn allocs_per_op(&self) -> f64 {
        self.allocs as f64 / self.ops.max(1) as f64
    }

    /// Millions of operations per second of wall time per thread.
    pub fn per_core_mops(&self) -> f64 {
        self.ops as f64 / (self.run_ns.max(1) as f64 / 1e9 * self.threads.max(1) as f64) / 1e6
    }

    /// Throughput of the whole run, Mops of wall time.
    pub fn mops(&self) -> f64 {
        self.ops as f64 / (self.run_ns.max(1) as f64 / 1e9) / 1e6
    }

    /// Share of the threads' wall time they were on a CPU (1.0 = never off
    /// it: busy all along, no descheduling).
    pub fn busy(&self) -> f64 {
        self.thread_cpu_ns as f64 / (self.run_ns.max(1) as f64 * self.threads.max(1) as f64)
    }

    /// The report's `cpu` object (the headline numbers are also top-level
    /// keys of the ycsb report: `cpu_ns_per_op`, `per_core_mops`).
    pub fn json(&self) -> Value {
        json!({
            "clock": "CLOCK_THREAD_CPUTIME_ID",
            "counted": "core threads, run phase, busy-polling and (loopback) verb execution included",
            "thread_cpu_ns": self.thread_cpu_ns,
            "threads": self.threads,
            "cpu_ns_per_op": self.cpu_ns_per_op(),
            "per_core_mops": self.per_core_mops(),
            "busy": self.busy(),
            "allocs": self.allocs,
            "allocs_per_op": self.allocs_per_op(),
        })
    }

    /// The report line.
    pub fn line(&self) -> String {
        format!(
            "{:.0} ns of thread CPU per op, {:.2} heap allocations per op, {} Mops per core ({} thread{} on a CPU {:.0}% of the run's wall time; busy-polling included)",
            self.cpu_ns_per_op(),
            self.allocs_per_op(),
            crate::report::mops(self.per_core_mops()),
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.busy() * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_time_advances_with_work() {
        let t0 = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > t0);
    }

    #[test]
    fn per_op_and_per_core_arithmetic() {
        let c = CpuCost {
            thread_cpu_ns: 4_000_000_000,
            threads: 2,
            ops: 1_000_000,
            run_ns: 2_000_000_000,
            allocs: 3_000_000,
        };
        assert_eq!(c.allocs_per_op(), 3.0);
        assert_eq!(c.cpu_ns_per_op(), 4000.0);
        assert_eq!(c.mops(), 0.5);
        assert_eq!(c.per_core_mops(), 0.25);
        assert_eq!(c.busy(), 1.0);
    }
}
