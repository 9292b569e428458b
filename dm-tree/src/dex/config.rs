//! [`DexConfig`]: DEX's knobs, the partition bounds (§4), the cache budget
//! and admission (§5), the offload level and the cost model (§6), with the
//! paper's (or its code's) defaults.

/// DEX's knobs; defaults are the paper's (or its code's) constants.
#[derive(Clone, Debug, PartialEq)]
pub struct DexConfig {
    /// Partition bounds, strictly increasing, `key_bytes` long: CS `i` owns
    /// `[bounds[i-1], bounds[i])` (one fewer than there are CSs).
    pub bounds: Vec<Vec<u8>>,
    /// Cache budget per CS in bytes (frames of `node_bytes`, at least 4
    /// and at most [`super::MAX_FRAMES`] of them; the paper's default is
    /// 256 MB per CS, 8% of the data).
    pub cache_bytes: u64,
    /// Offload level M (§4 placement, §6): sub-trees rooted at level M live
    /// on one MS, and only misses at levels <= M may be offloaded (code: 3).
    pub offload_level: u8,
    /// Cost-aware offloading on (§6); off = always fetch.
    pub offload: bool,
    /// Probability that a missed leaf is admitted to the cache (§5.3: 0.1;
    /// inner nodes are always admitted).
    pub leaf_admission: f64,
    /// Cost model (§6.1): local search time of one node, ns (code: 40).
    /// Also the CPU time charged on `sim` per cached node a traversal
    /// visits ([`dm_runtime::charge_cpu`]), so that a cache hit is not free.
    pub search_ns: u64,
    /// Cost model: factor for cache overheads (code: 1.2).
    pub alpha: f64,
    /// Cost model: moving-average window of both latencies (50).
    pub window: usize,
    /// Cost model: share of decisions that take the other action (1%).
    pub explore: f64,
    /// Operations on another CS's keys run against the owner's cache
    /// (in-process forwarding) instead of failing with `NotOwner`.
    pub forward: bool,
    /// The CSs whose state lives in this process (default: all). With CSs
    /// spread over several processes (`dm-bench --client I/N` on rdma),
    /// each process's [`DexCluster`](super::DexCluster) serves only its own CSs: forwarding
    /// reaches these only, and a key owned by a CS outside the range is
    /// [`TreeError::NotOwner`](crate::tree::TreeError::NotOwner) (a scan stops there, as at a partition end
    /// without forwarding). Routing requests between processes is the
    /// application's job (DEX §7: each CS's clients issue its own keys).
    pub local_cs: std::ops::Range<u16>,
    /// MS CPU time charged per node the offload handler visits, ns (sim).
    pub ms_node_ns: u32,
    /// Seed of the sampling, admission and exploration draws.
    pub seed: u64,
}

impl Default for DexConfig {
    fn default() -> Self {
        DexConfig {
            bounds: Vec::new(),
            cache_bytes: 256 << 20,
            offload_level: 3,
            offload: true,
            leaf_admission: 0.1,
            search_ns: 40,
            alpha: 1.2,
            window: 50,
            explore: 0.01,
            forward: false,
            local_cs: 0..u16::MAX,
            ms_node_ns: 300,
            seed: 1,
        }
    }
}

impl DexConfig {
    /// Bounds that give each of `num_cs` CSs an equal share of `sorted`
    /// (the loaded keys, ascending; §7: equal ranges). Fewer keys than CSs
    /// give fewer bounds (and CSs without keys).
    pub fn even_bounds(sorted: &[&[u8]], num_cs: u16) -> Vec<Vec<u8>> {
        let n = sorted.len();
        let mut b: Vec<Vec<u8>> = (1..num_cs as usize)
            .filter_map(|i| sorted.get(i * n / num_cs as usize).map(|k| k.to_vec()))
            .collect();
        b.dedup();
        b
    }
}
