//! `dm-bench ycsb`'s flags: the index and its techniques, the workload
//! (generated, from a key file or from index-microbench traces), the cluster
//! shape (MSs, CSs, cores, coroutines) and fabric, and the report. DEX's and
//! the head nodes' flag groups live with their code ([`super::dex`],
//! [`super::head`]).

use crate::fabric_arg::{parse_ms, MsArg, RdmaArgs};
use crate::report::PerftestArgs;
use crate::verbs_bench::{FabricArg, TearArg};
use std::path::PathBuf;

/// `--cache-mb`'s default, MiB per CS.
pub const CACHE_MB: u64 = 64;
/// `--rdwc-entries`' default.
pub const RDWC_ENTRIES: usize = 1024;
/// `--nam-node-ns`' default, virtual ns.
pub const NAM_NODE_NS: u32 = 300;

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Index: fg (FG+ B-link tree), or Sherman's ladder over it:
    /// sherman-combine, sherman-onchip, sherman-hier, sherman (all of them plus
    /// two-level versions with unsorted leaves); smart (SMART's adaptive radix
    /// tree, dm-art; insert load only) and its ladder down to the DM-ported
    /// ART: art (ROWEX, RCU leaves, HOCL), lockfree-art (+ lock-free internal
    /// nodes), smart-inplace (+ in-place leaves under a lock-table lock).
    #[arg(long, default_value = "fg")]
    pub index: String,
    /// a-f, load, write-only, write-intensive, read-intensive, range-only, range-write.
    #[arg(long, default_value = "a")]
    pub workload: String,
    /// Operation proportions in percent, `read,update,insert,scan,rmw`
    /// (summing to 100), replacing the workload's; the workload still sets
    /// the key distribution, the scan lengths and how inserts pick keys
    /// (new keys, or Sherman's mixes' upserts). Generated workloads only.
    #[arg(long)]
    pub mix: Option<String>,
    /// Records loaded before the run (generator mode).
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// Run-phase operations (generator mode; a cap in trace mode), at
    /// least 1: a run of none would report a throughput of nothing.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub ops: u64,
    /// Operations run after the load and before the measured run phase,
    /// from the same stream (the run's first N; in trace mode the trace's
    /// first N), checked like the run's but counted in no figure (the
    /// C++ benches warm their caches with 5,000). Default 0.
    #[arg(long, default_value_t = 0)]
    pub warmup: u64,
    #[arg(long, value_enum, default_value = "sim")]
    pub fabric: FabricArg,
    /// Memory servers: a count (sim, loopback) or HOST:PORT[,HOST:PORT..]
    /// of dm-memserver processes (rdma; MS id = position).
    #[arg(long = "ms", default_value = "2", value_parser = parse_ms)]
    pub ms_spec: MsArg,
    /// Number of memory servers (from `--ms`).
    #[arg(skip)]
    pub ms: u16,
    #[command(flatten)]
    pub rdma: RdmaArgs,
    #[command(flatten)]
    pub perftest: PerftestArgs,
    /// This process is client I of N (rdma): all N run the same command; each
    /// loads and runs its share of the operations (CS ids I*cs..), client 0
    /// creates the tree, and they meet at barriers (a byte per process at
    /// offset 72 of MS 0's superblock; N at most 56) after creation, load
    /// and run; each then verifies every key. Needs fresh memory servers
    /// per run.
    #[arg(long, default_value = "0/1")]
    pub client: String,
    /// Compute servers join the membership table and heartbeat (issue 33,
    /// `dm_runtime::lock::member`): their lock words name them, and a CS
    /// that waits on a lock whose holder's heartbeat stood still for this
    /// lease (ms, wall clock; a heartbeat every lease / 10) takes it over.
    /// With --client I/N the barriers stop waiting for a client process
    /// whose CSs died, so the others finish and verify. Wall-clock
    /// fabrics; the indexes `check --faults crash` runs. From 10 (the
    /// library's `LeaseConfig::REAL`): shorter leases let the OS's time
    /// slices make live CSs miss them (docs/architecture.md).
    #[arg(long, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub lease_ms: Option<u64>,
    /// With --lease-ms and --client I/N: this process replaces client I,
    /// which died. Its CSs join with new incarnations (so the dead one's
    /// locks are taken over after one lease), it skips creation, load and
    /// the barriers, runs client I's share of the run and verifies every key.
    #[arg(long)]
    pub rejoin: bool,
    #[arg(long, default_value_t = 2)]
    pub cs: u16,
    /// Cores (threads) per compute server.
    #[arg(long, default_value_t = 4)]
    pub threads: u16,
    /// Coroutines per thread.
    #[arg(long, default_value_t = 8)]
    pub coros: u32,
    /// Zipfian constant, 0 <= theta < 1 (0 = uniform; YCSB's zipfian is
    /// undefined at 1).
    #[arg(
        long,
        default_value_t = 0.99,
        allow_negative_numbers = true,
        value_parser = crate::ycsb::workload::parse_theta
    )]
    pub theta: f64,
    /// Range length of Sherman's range mixes, at least 1 (records per
    /// range).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub scan_len: u32,
    /// Sherman's upsert mixes (write-only, write-intensive, read-intensive,
    /// range-only, range-write): the loaded records' share of the key space
    /// that operations draw from; an upsert of a key number not loaded
    /// inserts it. Default 0.8 (Sherman §5.1); SMART's skew sweep
    /// (its artifact's `zipfian_test`, Fig. 22a) loads 0.2.
    #[arg(long, value_parser = crate::ycsb::workload::parse_load_fraction)]
    pub load_fraction: Option<f64>,
    /// Sherman's upsert mixes: draw the upserts' keys uniformly from the
    /// key space while reads and ranges keep `--theta` (Sherman's Table 3
    /// states only that "the targeted range follows the skewed access
    /// pattern"; docs/experiments/claims-sherman.md, sherman-table3).
    #[arg(long)]
    pub upsert_uniform: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Torn-READ model on sim.
    #[arg(long, value_enum, default_value = "word")]
    pub tear: TearArg,
    #[command(flatten)]
    pub net: crate::fabric_arg::SimNetArgs,
    /// Read load_<key-type>_workload<W> and txn_<key-type>_workload<W> from here.
    #[arg(long)]
    pub trace_dir: Option<PathBuf>,
    /// Trace key type: randint (decimal u64) or anything else (string keys).
    #[arg(long, default_value = "randint")]
    pub key_type: String,
    /// Tree key size in bytes: 1..=32 for the B+trees and dex, 1..=255 for
    /// the radix family, 8 for dolphin; shorter string keys are zero-padded.
    /// Default: 8 for integer keys, 32 for string keys (--key-file, string traces).
    #[arg(long)]
    pub key_bytes: Option<usize>,
    /// String keys, one a line (plain, .gz or .zst), e.g. pypi-names.txt.gz:
    /// key number n of the generated workload becomes the file's n-th key after
    /// a fixed shuffle; keys longer than --key-bytes are skipped and counted.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// Generated integer keys: `hashed` (YCSB's default `insertorder`: key
    /// number n becomes FNV(n), sparse), `ordered` (key n is n: dense, 256
    /// keys to each 7-byte prefix, as Dolphin's leaves are built for) or
    /// `half` (key n is 2n: a key space half filled, as Dolphin's evaluation
    /// loads its trees, §IV-A) or `scattered` (key numbers mapped one to
    /// one over twice their count in a scrambled order: dense and half
    /// filled like `half`, but inserted in no order, as Dolphin's code
    /// hashes its key numbers into its key space).
    #[arg(long, default_value = "hashed")]
    pub key_order: String,
    /// Load phase: `insert` (YCSB's load: one insert per record, all coroutines)
    /// or `bulk` (sorted bulk load at --fill, as Sherman loads its trees).
    #[arg(long, default_value = "insert")]
    pub load: String,
    /// Node fill factor of --load bulk.
    #[arg(long, default_value_t = 0.8)]
    pub fill: f64,
    /// Index cache per compute server, MiB, shared by its cores (B+trees:
    /// leaf parents, the top two levels kept on top of it; smart: the ART
    /// cache of internal nodes, SMART §4.3); 0 = no cache. The NAM
    /// designs run without one (Ziegler et al. App. A.4): they take 0 only.
    #[arg(long, default_value_t = CACHE_MB)]
    pub cache_mb: u64,
    /// Tree node size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub node_bytes: usize,
    /// B+tree rungs: most yields between two failed node-lock CASes; 0
    /// retries at once, as FG does (Sherman §3.2.2, Table 1). Default 32.
    #[arg(long)]
    pub lock_backoff: Option<u32>,
    /// B+tree rungs with in-node locks: release by FAA, as FG does (Sherman
    /// §3.1), instead of FG+'s WRITE.
    #[arg(long)]
    pub unlock_faa: bool,
    /// B+tree rungs: how a node is READ without its lock. `checksum`
    /// (default): one READ, validated by the node's checksum. `optimistic`:
    /// the optimistic remote read DEX ran its Sherman baseline with (DEX
    /// §8.1; version word, node, version word again: 3 READs per node),
    /// the cause of DEX Table 2's 3.02 READs per Sherman lookup.
    #[arg(long, default_value = "checksum", value_parser = ["checksum", "optimistic"])]
    pub node_read: String,
    /// B+tree rungs: how the index cache is used when the tree changed
    /// under it. `ours` (default): a stale leaf is left by moving right
    /// along siblings, and the top two levels are cached too. `authors`:
    /// the published Sherman code's (SMART's Sherman baseline): leaf
    /// parents only, a stale entry dropped and the operation (a writer
    /// after unlocking) taken again from the root, a split's parent found
    /// from the root.
    #[arg(long, default_value = "ours", value_parser = ["ours", "authors"])]
    pub sherman_cache: String,
    /// How each phase's operations are dealt to the coroutines:
    /// `round-robin` (default: operation j to coroutine j mod N) or
    /// `chunks` (coroutine i runs the i-th of N contiguous chunks of the
    /// stream, as the SMART artifact splits its traces,
    /// `ycsb/split_workload.py`). With YCSB D's latest distribution a read
    /// then mostly finds a key its own coroutine inserted shortly before.
    #[arg(long, default_value = "round-robin", value_parser = ["round-robin", "chunks"])]
    pub split: String,
    /// Radix family: same-key writers that queue in a CS's local lock
    /// table (the ART rungs, write combining off) are absorbed: a leader
    /// about to publish covers the writers queued so far, which return its
    /// result without writing; the sound version of the SMART artifact's
    /// ART baseline hand-over (`dm_art::Rdwc::absorb_writers`).
    #[arg(long)]
    pub art_absorb: bool,
    /// Radix family, sim only: model the authors' central cache FIFO. Each
    /// admission of a node READ into a CS's ART cache holds one CS-wide
    /// lock for this many virtual ns, so the CS's threads admit one at a
    /// time (the artifact's usage counter and FIFO queue, which DEX
    /// §8.2 profiles at 49% of SMART's CPU cycles). 0 (default): off.
    #[arg(long, default_value_t = 0)]
    pub smart_fifo_ns: u64,
    /// Radix family: the ART cache drops an entry whose node type hint
    /// proves stale, as the SMART artifact does (its `Tree::insert` and
    /// `search` invalidate a cached node whose READ found another type),
    /// instead of refreshing the hint in place (the default); under the
    /// ART rungs' RCU leaves also an entry whose leaf address proves
    /// replaced (the artifact's `search` on an invalid leaf). For the
    /// Dolphin paper's LOAD claim (issue 34), whose SMART "invalidates a
    /// cached internal node" per insert
    #[arg(long)]
    pub smart_drop_stale_hints: bool,
    /// Dolphin: how an update publishes its value. `cas` (default, sound):
    /// WRITE the item's other value buffer and CAS its key word; a lost CAS
    /// runs the update again. `paper`: one WRITE of the item, last writer
    /// wins, relying on the NIC applying that WRITE whole (Dolphin
    /// §III-C; RDMA does not promise it). `authors`: as `paper`, and
    /// the update returns without waiting for that WRITE (the authors'
    /// code; not linearizable). For measuring the paper's claims (issue
    /// 34), not for use.
    #[arg(long, default_value = "cas", value_parser = ["cas", "paper", "authors"])]
    pub dolphin_update: String,
    /// Lock-table designs (Sherman's rungs with the global lock table, the
    /// ART rungs' HOCL): slots of the global lock table per MS instead of
    /// all the NIC's device memory holds (sim and loopback: 131,072 16-bit
    /// locks in 256 KiB). Fewer slots put more nodes on each lock, as a
    /// larger tree does on the same on-chip memory (SMART Fig. 19: HOCL's
    /// lock-fail retries). At least 1, at most the default; refused for an
    /// index without a global lock table.
    #[arg(long)]
    pub lock_slots: Option<u64>,
    /// SMART techniques to switch off (comma list; SMART §5.3.1's factor
    /// analysis): `lfi` lock-free internal nodes (ROWEX node locks instead),
    /// `ipl` in-place leaves (RCU instead; implies `rear`), `rear` the
    /// rear-embedded lock (a lock-table lock instead), `rd` read delegation,
    /// `wc` write combining, `cache` the ART cache (same as --cache-mb 0).
    /// Read delegation and write combining are on only for --index smart.
    #[arg(long, value_delimiter = ',')]
    pub smart_off: Vec<String>,
    /// Lock entries of SMART's per-CS read delegation / write combining
    /// table (§4.2.1; the paper finds 128 enough for 16 clients per CS).
    #[arg(long, default_value_t = RDWC_ENTRIES)]
    pub rdwc_entries: usize,
    /// CPU cores per memory server that run RPC handlers (sim, loopback):
    /// what the NAM designs' MS-side work saturates (Ziegler et al. ran about
    /// 10 per MS: 2 MSs on a 20-core machine).
    #[arg(long, default_value_t = 1)]
    pub ms_cores: u16,
    /// nam-coarse / nam-hybrid: simulated MS CPU ns per node a handler reads
    /// or writes (`dm_tree::NamConfig::ms_node_ns`); at most 1 s = 1000000000.
    #[arg(long, default_value_t = NAM_NODE_NS,
        value_parser = clap::value_parser!(u32).range(..=crate::fabric_arg::MAX_SIM_NS as i64))]
    pub nam_node_ns: u32,
    /// nam-coarse / nam-hybrid: partition shares of the loaded keys, one
    /// whole number per partition, 1 to 16 of them, each at least 1
    /// (Ziegler et al. §6's data skew: 80,12,5,3); partition p lives on
    /// MS p mod --ms. Default: one partition per MS, equal shares.
    #[arg(long, value_delimiter = ',')]
    pub nam_skew: Vec<u32>,
    #[command(flatten)]
    pub dex: super::dex::DexArgs,
    #[command(flatten)]
    pub head: super::head::HeadArgs,
    /// Also run the same load and operations against local ordered maps
    /// (comma list: btree = RwLock<BTreeMap>, skiplist = crossbeam's
    /// SkipMap) on as many OS threads, and report their thread CPU ns per
    /// op and Mops beside the index's, with the index's ratios to them.
    /// Wall-clock fabrics only: loopback, or rdma with --client 0/1. The
    /// maps run as many threads as the index (`--cs` x `--threads`; `--cs`
    /// defaults to 2): one-thread ratios need `--cs 1 --threads 1`, and
    /// with two threads the btree's writers contend for its lock (YCSB A:
    /// about 3x its CPU per op at one thread; docs/experiments/cpu-ratios.md).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub baseline: Vec<super::baseline::BaselineMap>,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print nothing (the report is still returned to `dm-bench figure`,
    /// which runs rows in-process, and written by --json).
    #[arg(long, hide = true)]
    pub quiet: bool,
}
