//! The barrier of `--client I/N` runs: client processes meet between a
//! run's phases (`ycsb`: creation, load, warm-up, run; `check`: each seed's
//! creation and end) on the bytes at [`BARRIER_OFF`] of MS 0's superblock
//! (`dm_verbs::ms::superblock::BENCH_BARRIER`).
//!
//! Byte `i` holds the number, mod 256, of the last barrier client process
//! `i` reached; only process `i` WRITEs it (one 1-byte WRITE per barrier).
//! Barrier `k` is passed once every byte has reached `k` ([`reached`]).
//! The bytes start at 0 (a fresh memory server zeroes its superblock), and
//! every process passes the same barriers in order, so no two processes
//! are ever more than one barrier apart and a byte's number mod 256 says
//! where its process is.
//!
//! **Why not a counter.** The barrier used to be one word every process
//! FAA'd. Soft-RoCE in the guest's 6.1 kernel executes the duplicate of a
//! retransmitted atomic a second time (docs/rdma.md), and one FAA counted
//! twice lets the first process to arrive at every later barrier pass it
//! alone: in `check`, process 1 would run a seed's clients before process
//! 0 had created that seed's tree (which resets the shared root slot), or
//! process 0 would reset it under process 1's clients still running the
//! last seed, and the histories would show keys lost or values no
//! operation of the seed wrote. A WRITE of the same byte is idempotent, and
//! rxe answers a duplicate WRITE without executing it again.

use dm_verbs::{GlobalAddr, VerbError};

/// Superblock offset (MS 0) of the barrier bytes.
pub const BARRIER_OFF: u64 = dm_verbs::ms::superblock::BENCH_BARRIER;

/// Client processes a barrier serves: one byte each.
pub const MAX_PROCS: usize = dm_verbs::ms::superblock::BENCH_BARRIER_BYTES as usize;

/// Whether a process whose barrier byte reads `b` has reached barrier `k`
/// (1, 2, ...): `b` is `k` or `k + 1` mod 256, not `k - 1` (module docs:
/// processes are never more than one barrier apart, so the difference
/// mod 256 tells ahead from behind).
pub fn reached(b: u8, k: u64) -> bool {
    b.wrapping_sub(k as u8) < 128
}

/// Marks client process `i` as arrived at barrier `k`: one WRITE of the
/// byte `k mod 256` at `BARRIER_OFF + i`. Errors: the WRITE's.
pub async fn arrive(i: usize, k: u64) -> Result<(), VerbError> {
    debug_assert!(i < MAX_PROCS);
    let w = GlobalAddr::new(0, BARRIER_OFF + i as u64);
    dm_runtime::write(w, vec![k as u8]).await
}

/// The barrier bytes of processes `0..n` (one READ of whole words).
/// Errors: the READ's.
pub async fn bytes(n: usize) -> Result<Vec<u8>, VerbError> {
    let words = n.div_ceil(8).max(1) as u32;
    let b = dm_runtime::read(GlobalAddr::new(0, BARRIER_OFF), 8 * words).await?;
    Ok(b[..n].to_vec())
}

/// Meets the other processes of `n` at barrier `k` as process `i`
/// ([`arrive`], then [`bytes`] until every one has [`reached`] `k`).
/// Errors: a verb's.
pub async fn barrier(i: usize, n: usize, k: u64) -> Result<(), VerbError> {
    arrive(i, k).await?;
    loop {
        if bytes(n).await?.iter().all(|&b| reached(b, k)) {
            return Ok(());
        }
        dm_runtime::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_reaches_its_barrier_and_the_next_across_the_wrap() {
        for k in 1..=600u64 {
            let at = k as u8;
            assert!(reached(at, k), "{k}");
            assert!(reached(at.wrapping_add(1), k), "{k}: one ahead");
            assert!(!reached(at.wrapping_sub(1), k), "{k}: one behind");
        }
        // Fresh bytes are 0: no process has reached barrier 1.
        assert!(!reached(0, 1));
    }

    /// Three threads as three client processes on one loopback MS, 300
    /// barriers (past the byte's wrap): none passes barrier `k` before all
    /// three arrived at it, also when process 0 arrives twice at each (a
    /// WRITE executed again: with the FAA counter that let a process pass
    /// alone).
    #[test]
    fn no_process_passes_a_barrier_before_every_process_reached_it() {
        use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
        const N: usize = 3;
        const K: u64 = 300;
        let fabric = crate::runtime_bench::fabric();
        let arrived: std::sync::Arc<Vec<AtomicU64>> =
            std::sync::Arc::new((0..=K).map(|_| AtomicU64::new(0)).collect());
        let cores: Vec<(u16, u16)> = (0..N as u16).map(|i| (i, 0)).collect();
        let outs = dm_runtime::run_threads(&fabric, &cores, false, |i| {
            let arrived = arrived.clone();
            async move {
                for k in 1..=K {
                    arrived[k as usize].fetch_add(1, SeqCst);
                    if i == 0 {
                        arrive(0, k).await?;
                    }
                    barrier(i, N, k).await?;
                    let n = arrived[k as usize].load(SeqCst);
                    if n != N as u64 {
                        return Ok(Some((k, n)));
                    }
                }
                Ok::<_, VerbError>(None)
            }
        });
        for (i, o) in outs.into_iter().enumerate() {
            assert_eq!(
                o.unwrap(),
                None,
                "process {i} passed (barrier, arrivals) early"
            );
        }
    }
}
