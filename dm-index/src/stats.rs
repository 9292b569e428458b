//! Per-index statistics ([`IndexStats`]): each index instance counts its
//! own operations and verbs (no process-wide globals), sharded per core so
//! a core's counting never contends with another's; its locks in one
//! [`dm_runtime::lock::LockCounters`] its handles share.

pub use dm_art::dolphin::DolphinStats;
pub use dm_runtime::lock::LockStats;
use dm_verbs::VerbStats;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What one index did in this process (all its cores), since it was
/// created or opened here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Completed operations by kind (`range` counts as a scan).
    pub gets: u64,
    pub inserts: u64,
    pub updates: u64,
    pub removes: u64,
    pub scans: u64,
    /// Operations that returned an error (counted in their kind too).
    pub errors: u64,
    /// Verbs the operations posted (READs, WRITEs, CAS, FAA, RPCs, bytes,
    /// RTTs; doorbells count the QPs each task posted to per poll).
    pub verbs: VerbStats,
    /// Index-cache lookups that hit / missed (summed over the compute
    /// servers of this process; 0 for an index without a cache).
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Bytes the index caches hold now.
    pub cache_bytes: u64,
    /// Bytes of MS memory the index's handles carved from their chunks
    /// (nodes, leaves, special nodes; alignment padding included; the
    /// chunks' unused tails not), Sherman §4.2's allocator. Counted from
    /// [`crate::Instance::open`]'s handles (not the root `create_root`
    /// writes); the NAM designs' MS-side trees allocate on the MS: not counted.
    pub bytes_carved: u64,
    /// What the index's locks did (events, every core of this process):
    /// FG+'s in-node lock word and Sherman's global lock table slots with
    /// HOCL's local queue and hand-over (Sherman §4.3-4.5), also under
    /// DEX's tree; SMART's rear-embedded leaf lock (SMART §4.1.1) and its
    /// baselines' HOCL locks (§5.1.3); Dolphin's Spear holds (acquisitions)
    /// and waits (Dolphin §III-C; no lock CAS). Field by field:
    /// [`LockStats`]. The NAM hybrid's leaf locks are FG+ lock words
    /// (counted); the NAM trees' upper levels lock on the MS side (not
    /// counted, Ziegler et al. §3, §5).
    pub locks: LockStats,
    /// Dolphin's own counts (Spear lock waits, lost same-key update CASes,
    /// backtracks through special nodes, torn leaf images READ again;
    /// [`DolphinStats`]); zero for the other kinds. Its lock waits are also
    /// in `locks.waits`.
    pub dolphin: DolphinStats,
}

impl IndexStats {
    /// Operations of every kind.
    pub fn ops(&self) -> u64 {
        self.gets + self.inserts + self.updates + self.removes + self.scans
    }
}

/// Operation kinds, indexes into a shard's counters.
#[derive(Clone, Copy)]
pub(crate) enum Op {
    Get = 0,
    Insert = 1,
    Update = 2,
    Remove = 3,
    Scan = 4,
}

/// Counters per shard: 5 op kinds, errors, then the 9 verb counters.
const N: usize = 6 + 9;

/// One core's counters, on its own cache lines.
#[repr(align(128))]
#[derive(Default)]
struct Shard([AtomicU64; N]);

/// The counters of one index, one shard per core of the process (a core
/// writes only its shard: Relaxed loads and stores, no read-modify-write).
pub(crate) struct Counters {
    shards: Box<[Shard]>,
}

impl Counters {
    pub(crate) fn new(cores: usize) -> Self {
        Counters {
            shards: (0..cores.max(1)).map(|_| Shard::default()).collect(),
        }
    }

    /// The shard that core `core` counts into (cores beyond the count the
    /// index was built for share, modulo). Taken once per handle: the
    /// division is not on each operation's path (issue 32).
    pub(crate) fn shard_of(&self, core: usize) -> usize {
        core % self.shards.len()
    }

    /// Records one operation in shard `shard` ([`Counters::shard_of`]):
    /// its kind, whether it failed, and the verbs its task posted between
    /// the snapshots `before` and `after` ([`dm_runtime::task_stats`]).
    /// Every counter is added to, zeros too: a load, an add and a store
    /// per counter and no branch, on the shard's own lines (issue 32).
    pub(crate) fn record(
        &self,
        shard: usize,
        op: Op,
        failed: bool,
        before: &VerbStats,
        after: &VerbStats,
    ) {
        let s = &self.shards[shard].0;
        let bump = |i: usize, d: u64| s[i].store(s[i].load(Relaxed).wrapping_add(d), Relaxed);
        bump(op as usize, 1);
        bump(5, failed as u64);
        let (x, y) = (verb_fields(before), verb_fields(after));
        for i in 0..9 {
            bump(6 + i, y[i].wrapping_sub(x[i]));
        }
    }

    /// The sums over every shard.
    pub(crate) fn sum(&self) -> IndexStats {
        let mut t = [0u64; N];
        for s in self.shards.iter() {
            for (i, c) in s.0.iter().enumerate() {
                t[i] += c.load(Relaxed);
            }
        }
        IndexStats {
            gets: t[0],
            inserts: t[1],
            updates: t[2],
            removes: t[3],
            scans: t[4],
            errors: t[5],
            verbs: VerbStats {
                read: t[6],
                write: t[7],
                cas: t[8],
                faa: t[9],
                rpc: t[10],
                bytes_read: t[11],
                bytes_written: t[12],
                doorbells: t[13],
                rtts: t[14],
            },
            ..Default::default()
        }
    }
}

fn verb_fields(v: &VerbStats) -> [u64; 9] {
    [
        v.read,
        v.write,
        v.cas,
        v.faa,
        v.rpc,
        v.bytes_read,
        v.bytes_written,
        v.doorbells,
        v.rtts,
    ]
}
