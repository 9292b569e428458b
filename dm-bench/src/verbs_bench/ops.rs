//! The coroutines of `dm-bench verbs` and the final check of memory.
//!
//! Chunk layout on each MS (one chunk per MS, from the chunk-allocation RPC):
//! `[0, 8 KiB)` FAA counters, `[8 KiB, 16 KiB)` CAS counters (1024 u64 each),
//! `[16 KiB, chunk end)` data slots of `--size` bytes. A WRITE fills its slot
//! with words whose high 32 bits name the slot, so a READ (torn or not) or
//! the final check finds a byte that landed in the wrong place.

use dm_runtime::alloc::ChunkAlloc;
use dm_runtime::JoinError;
use dm_runtime::{cas, faa, read, write};
use dm_verbs::{GlobalAddr, VerbStats};
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// FAA counters, then as many CAS counters, per chunk.
const COUNTERS: u64 = 1024;
/// Where the data slots start in a chunk.
pub(super) const DATA_OFF: u64 = 16 << 10;

/// What every coroutine needs: the mix (read, write, cas, faa percentages),
/// the READ/WRITE size, the chunk of each MS, the seed, and the operations
/// of the run and the coroutines that share them ([`share`]).
#[derive(Clone, Copy)]
pub(super) struct Plan {
    pub mix: [u32; 4],
    pub size: u32,
    pub chunks: [GlobalAddr; 64],
    pub num_ms: u16,
    pub chunk_bytes: u64,
    pub seed: u64,
    pub ops: u64,
    pub tasks: u64,
}

/// Coroutine `id`'s share of `ops` operations over `tasks` coroutines:
/// `ops / tasks`, one more for the first `ops % tasks`, so that the shares
/// add up to `ops` exactly.
fn share(ops: u64, tasks: u64, id: u64) -> u64 {
    ops / tasks + u64::from(id < ops % tasks)
}

/// What one coroutine did.
pub(super) struct CoroOut {
    pub hist: Histogram<u64>,
    pub stats: VerbStats,
    pub counts: [u64; 4],
    pub bad_words: u64,
    /// The verb error that stopped this coroutine early, if any.
    pub error: Option<dm_verbs::VerbError>,
}

async fn coroutine(plan: Plan, id: u64, ops: u64) -> CoroOut {
    let mut rng = ChaCha8Rng::seed_from_u64(plan.seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut hist = Histogram::<u64>::new(3).unwrap();
    let mut counts = [0u64; 4];
    let mut bad_words = 0;
    let slots = (plan.chunk_bytes - DATA_OFF) / plan.size as u64;
    let before = dm_runtime::task_stats();
    let mut error = None;
    for seq in 0..ops {
        if let Err(e) = one_op(
            &plan,
            &mut rng,
            seq,
            &mut counts,
            &mut bad_words,
            &mut hist,
            slots,
        )
        .await
        {
            error = Some(e);
            break;
        }
    }
    CoroOut {
        hist,
        stats: dm_runtime::task_stats().since(&before),
        counts,
        bad_words,
        error,
    }
}

async fn one_op(
    plan: &Plan,
    rng: &mut ChaCha8Rng,
    seq: u64,
    counts: &mut [u64; 4],
    bad_words: &mut u64,
    hist: &mut Histogram<u64>,
    slots: u64,
) -> Result<(), dm_verbs::VerbError> {
    {
        let base = plan.chunks[rng.gen_range(0..plan.num_ms) as usize];
        let p = rng.gen_range(0..100u32);
        let t0 = dm_runtime::now_ns();
        let kind = if p < plan.mix[0] {
            0
        } else if p < plan.mix[0] + plan.mix[1] {
            1
        } else if p < plan.mix[0] + plan.mix[1] + plan.mix[2] {
            2
        } else {
            3
        };
        match kind {
            0 | 1 => {
                let slot = rng.gen_range(0..slots);
                let addr = base.add(DATA_OFF + slot * plan.size as u64);
                if kind == 0 {
                    let data = read(addr, plan.size).await?;
                    *bad_words += check_slot(&data, slot);
                } else {
                    let word = (slot << 32) | (seq & 0xffff_ffff);
                    let data: Vec<u8> = (0..plan.size / 8)
                        .flat_map(|_| word.to_le_bytes())
                        .collect();
                    write(addr, data).await?;
                }
            }
            2 => {
                let a = base.add(8 * COUNTERS + 8 * rng.gen_range(0..COUNTERS));
                let mut old = u64::from_le_bytes(read(a, 8).await?.try_into().unwrap());
                loop {
                    let seen = cas(a, old, old + 1).await?;
                    if seen == old {
                        break;
                    }
                    old = seen;
                }
            }
            _ => {
                let a = base.add(8 * rng.gen_range(0..COUNTERS));
                faa(a, 1).await?;
            }
        }
        counts[kind] += 1;
        hist.record((dm_runtime::now_ns() - t0).max(1)).unwrap();
    }
    Ok(())
}

fn check_slot(data: &[u8], slot: u64) -> u64 {
    data.chunks(8)
        .filter(|w| {
            let v = u64::from_le_bytes((*w).try_into().unwrap());
            v != 0 && v >> 32 != slot
        })
        .count() as u64
}

/// Allocates one chunk on every MS.
pub(super) async fn setup(
    num_ms: u16,
    chunk_bytes: u64,
) -> Result<[GlobalAddr; 64], dm_verbs::VerbError> {
    let a = ChunkAlloc::new(num_ms, chunk_bytes, 0);
    let mut chunks = [GlobalAddr::NULL; 64];
    for c in chunks.iter_mut().take(num_ms as usize) {
        *c = a.alloc(chunk_bytes, 4096).await?;
    }
    Ok(chunks)
}

/// Sums of FAA and CAS counters and bad data words, read back through the fabric.
pub(super) async fn verify(plan: Plan) -> Result<(u64, u64, u64), dm_verbs::VerbError> {
    let (mut faa_sum, mut cas_sum, mut bad) = (0, 0, 0);
    for &base in plan.chunks.iter().take(plan.num_ms as usize) {
        let c = read(base, (16 * COUNTERS) as u32).await?;
        for (i, w) in c.chunks(8).enumerate() {
            let v = u64::from_le_bytes(w.try_into().unwrap());
            if (i as u64) < COUNTERS {
                faa_sum += v;
            } else {
                cas_sum += v;
            }
        }
        let data = read(base.add(DATA_OFF), (plan.chunk_bytes - DATA_OFF) as u32).await?;
        for (slot, s) in data.chunks(plan.size as usize).enumerate() {
            bad += check_slot(s, slot as u64);
        }
    }
    Ok((faa_sum, cas_sum, bad))
}

/// The `coros` coroutines of one core, the first numbered `first_id`.
pub(super) async fn run_core(plan: Plan, first_id: u64, coros: u32) -> Vec<CoroOut> {
    let hs: Vec<_> = (first_id..first_id + coros as u64)
        .map(|id| dm_runtime::spawn(coroutine(plan, id, share(plan.ops, plan.tasks, id))))
        .collect();
    let mut out = Vec::new();
    for h in hs {
        out.push(h.await.unwrap_or_else(JoinError::resume));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::share;

    /// `--ops N` runs N operations, not N rounded up to the coroutines.
    #[test]
    fn shares_add_up_to_the_operations() {
        for (ops, tasks) in [(1, 64), (2000, 64), (4000, 16), (7, 3), (64, 64)] {
            let s: Vec<u64> = (0..tasks).map(|id| share(ops, tasks, id)).collect();
            assert_eq!(s.iter().sum::<u64>(), ops, "{ops} over {tasks}");
            assert!(s.iter().max().unwrap() - s.iter().min().unwrap() <= 1);
        }
    }
}
