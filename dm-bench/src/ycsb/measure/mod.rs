//! `dm-bench ycsb`: load, then run a workload against an index on `sim` or
//! `loopback`, then verify every key touched.
//!
//! Operations come from the in-process YCSB generators ([`crate::ycsb`]) or from
//! index-microbench traces (`--trace-dir`). The run phase's operations are
//! split round-robin over every coroutine of every CS core. Every value the run
//! will write is known before it starts (a hash of the operation's index), so
//! verification is exact under concurrency:
//! - each read must return a value written to that key by the load or by some
//!   update (or nothing for a key not inserted yet);
//! - `update` of a loaded key must find it;
//! - each scan must return keys in strictly increasing order, none below its
//!   start, at most its length;
//! - at the end, every key touched must hold one of its written values, and a
//!   full scan must return exactly the keys loaded or inserted.
//!
//! Throughput and latency are in virtual time on `sim`, wall time on `loopback`.
//! On the wall-clock fabrics the report adds the core threads' CPU time per
//! operation and Mops per core ([`crate::cpu_time`]), and `--baseline` runs
//! the same stream against local ordered maps ([`crate::ycsb_baseline`]).

use crate::fabric_arg::{barrier, check_ms, parse_client, parse_ms, MsArg, RdmaArgs};
use crate::kv::{parse_index, AnyIndex, Kv, SMART};
use crate::report::{efficiency, per_op, verbs_posted, write_json, PerftestArgs};
use crate::verbs_bench::{FabricArg, TearArg};
use crate::ycsb::workload::{Mix, Spec, Stream};
use crate::ycsb::{gen::fnvhash64, keys, trace, Op};
use crate::ycsb_dex::DEX;
use anyhow::{anyhow, bail, Result};
use dm_art::{
    ArtCache, DolphinCache, DolphinConfig, DolphinTree, KeyCodec, Rdwc, SmartConfig, SmartTree,
};
use dm_runtime::{ExecConfig, Executor, SimRuntime};
use dm_tree::{Design, DexTree, FgTree, IndexCache, LockTableConfig, NamConfig, TreeConfig};
use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
use dm_verbs::sim::{Faults, SimConfig, SimFabric, TearGranularity};
use dm_verbs::{Caps, Fabric, MsConfig, VerbStats};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

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
    /// Run-phase operations (generator mode; a cap in trace mode).
    #[arg(long, default_value_t = 100_000)]
    pub ops: u64,
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
    /// creates the tree, and they meet at barriers (an FAA word at offset 2048
    /// of MS 0's superblock) after creation, load and run; each then verifies
    /// every key. Needs fresh memory servers per run.
    #[arg(long, default_value = "0/1")]
    pub client: String,
    #[arg(long, default_value_t = 2)]
    pub cs: u16,
    /// Cores (threads) per compute server.
    #[arg(long, default_value_t = 4)]
    pub threads: u16,
    /// Coroutines per thread.
    #[arg(long, default_value_t = 8)]
    pub coros: u32,
    /// Zipfian constant (0 = uniform).
    #[arg(long, default_value_t = 0.99)]
    pub theta: f64,
    /// Range length of Sherman's range mixes.
    #[arg(long, default_value_t = 100)]
    pub scan_len: u32,
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
    /// Tree key size in bytes (1..=32); shorter string keys are zero-padded.
    /// Default: 8 for integer keys, 32 for string keys (--key-file, string traces).
    #[arg(long)]
    pub key_bytes: Option<usize>,
    /// String keys, one a line (plain, .gz or .zst), e.g. pypi-names.txt.gz:
    /// key number n of the generated workload becomes the file's n-th key after
    /// a fixed shuffle; keys longer than --key-bytes are skipped and counted.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// Generated integer keys: `hashed` (YCSB's default `insertorder`: key
    /// number n becomes FNV(n), sparse) or `ordered` (key n is n: dense, 256
    /// keys to each 7-byte prefix, as Dolphin's evaluation loads its tree).
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
    /// cache of internal nodes, SMART \u{a7}4.3); 0 = no cache.
    #[arg(long, default_value_t = 64)]
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
    /// SMART techniques to switch off (comma list; SMART \u{a7}5.3.1's factor
    /// analysis): `lfi` lock-free internal nodes (ROWEX node locks instead),
    /// `ipl` in-place leaves (RCU instead; implies `rear`), `rear` the
    /// rear-embedded lock (a lock-table lock instead), `rd` read delegation,
    /// `wc` write combining, `cache` the ART cache (same as --cache-mb 0).
    /// Read delegation and write combining are on only for --index smart.
    #[arg(long, value_delimiter = ',')]
    pub smart_off: Vec<String>,
    /// Lock entries of SMART's per-CS read delegation / write combining
    /// table (\u{a7}4.2.1; the paper finds 128 enough for 16 clients per CS).
    #[arg(long, default_value_t = 1024)]
    pub rdwc_entries: usize,
    /// CPU cores per memory server that run RPC handlers (sim, loopback):
    /// what the NAM designs' MS-side work saturates (Ziegler et al. ran about
    /// 10 per MS: 2 MSs on a 20-core machine).
    #[arg(long, default_value_t = 1)]
    pub ms_cores: u16,
    /// nam-coarse / nam-hybrid: simulated MS CPU ns per node a handler reads
    /// or writes (`dm_tree::NamConfig::ms_node_ns`).
    #[arg(long, default_value_t = 300)]
    pub nam_node_ns: u32,
    /// nam-coarse / nam-hybrid: partition shares of the key-prefix space,
    /// one per partition (Ziegler et al. \u{a7}6's data skew: 80,12,5,3);
    /// default: one partition per MS holding equal shares of the loaded keys.
    #[arg(long, value_delimiter = ',')]
    pub nam_skew: Vec<u32>,
    #[command(flatten)]
    pub dex: crate::ycsb_dex::DexArgs,
    #[command(flatten)]
    pub head: crate::ycsb_head::HeadArgs,
    /// Also run the same load and operations against local ordered maps
    /// (comma list: btree = RwLock<BTreeMap>, skiplist = crossbeam's
    /// SkipMap) on as many OS threads, and report their thread CPU ns per
    /// op and Mops beside the index's, with the index's ratios to them.
    /// Wall-clock fabrics only: loopback, or rdma with --client 0/1.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub baseline: Vec<crate::ycsb_baseline::BaselineMap>,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print nothing (the report is still returned to `dm-bench figure`,
    /// which runs rows in-process, and written by --json).
    #[arg(long, hide = true)]
    pub quiet: bool,
}

/// Operation kinds in reports.
const KINDS: [&str; 6] = ["get", "insert", "update", "remove", "scan", "rmw"];

/// Everything the coroutines share (read-only).
struct Plan {
    load: Vec<Vec<u8>>,
    run: Vec<Op>,
    /// Values ever written to each key (load and run).
    allowed: HashMap<Vec<u8>, Vec<u64>>,
    /// Where the keys come from, for the report.
    keys_info: serde_json::Value,
    /// DEX: the mid-run repartitioning (`--dex-repartition-at`).
    repartition: Option<Arc<crate::ycsb_dex::Repartition>>,
    /// Head-node maintenance passes (`--head-nodes`).
    heads: Option<Arc<crate::ycsb_head::HeadMaint>>,
    /// The process-wide counters before this run (a process may run several:
    /// `dm-bench figure`), subtracted in the report.
    carved0: u64,
    dolphin0: dm_art::dolphin::DolphinStats,
}

pub(crate) fn load_value(i: usize) -> u64 {
    fnvhash64(i as u64 ^ 0x5eed_0000_0000)
}

pub(crate) fn run_value(j: usize) -> u64 {
    fnvhash64(j as u64 ^ 0x7a11_0000_0000)
}

#[derive(Default)]
struct Out {
    hist: Option<Histogram<u64>>,
    stats: [VerbStats; 6],
    counts: [u64; 6],
    mismatches: u64,
    first_mismatch: Option<String>,
    /// Leaves scans READ ahead from head lists, and used (one per core:
    /// [`FgTree::head_prefetch_stats`] of the core's handle).
    head_prefetch: (u64, u64),
}

impl Out {
    fn new() -> Self {
        Out {
            hist: Some(Histogram::new(3).unwrap()),
            ..Default::default()
        }
    }
    fn bad(&mut self, what: String) {
        self.mismatches += 1;
        self.first_mismatch.get_or_insert(what);
    }
    fn merge(&mut self, o: Out) {
        if let (Some(h), Some(oh)) = (self.hist.as_mut(), o.hist.as_ref()) {
            h.add(oh).unwrap();
        }
        for i in 0..6 {
            self.stats[i].add(&o.stats[i]);
            self.counts[i] += o.counts[i];
        }
        self.mismatches += o.mismatches;
        self.head_prefetch.0 += o.head_prefetch.0;
        self.head_prefetch.1 += o.head_prefetch.1;
        if self.first_mismatch.is_none() {
            self.first_mismatch = o.first_mismatch;
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Load,
    Run,
}

async fn coroutine(
    tree: Rc<AnyIndex>,
    plan: Arc<Plan>,
    phase: Phase,
    id: usize,
    total: usize,
    pb: ProgressBar,
    ids: Option<Arc<Vec<usize>>>,
) -> Out {
    let mut out = Out::new();
    let n = if phase == Phase::Load {
        plan.load.len()
    } else {
        plan.run.len()
    };
    // All operations round-robin, or (DEX, partitioned) this CS's list.
    let mine: Box<dyn Iterator<Item = usize>> = match &ids {
        None => Box::new((id..n).step_by(total)),
        Some(v) => Box::new(v.iter().copied().skip(id).step_by(total)),
    };
    for j in mine {
        let t0 = dm_runtime::now_ns();
        dm_runtime::charge_op();
        let s0 = dm_runtime::task_stats();
        let kind = match phase {
            Phase::Load => {
                tree.insert(&plan.load[j], load_value(j))
                    .await
                    .expect("insert");
                1
            }
            Phase::Run => run_op(&tree, &plan, j, &mut out).await,
        };
        out.stats[kind].add(&dm_runtime::task_stats().since(&s0));
        out.counts[kind] += 1;
        out.hist
            .as_mut()
            .unwrap()
            .record((dm_runtime::now_ns() - t0).max(1))
            .unwrap();
        pb.inc(1);
        if let (Phase::Run, Some(r), AnyIndex::Dex(d)) = (phase, &plan.repartition, &*tree) {
            r.tick(d).await;
        }
        if let (Phase::Run, Some(h)) = (phase, &plan.heads) {
            h.tick(&tree).await;
        }
    }
    out
}

fn allowed(plan: &Plan, key: &[u8], v: u64) -> bool {
    plan.allowed.get(key).is_some_and(|vs| vs.contains(&v))
}

async fn run_op(tree: &AnyIndex, plan: &Plan, j: usize, out: &mut Out) -> usize {
    match &plan.run[j] {
        Op::Read(k) => {
            if let Some(v) = tree.get(k).await.expect("get") {
                if !allowed(plan, k, v) {
                    out.bad(format!("get {k:?} returned {v:#x}, never written"));
                }
            }
            0
        }
        Op::Insert(k) => {
            tree.insert(k, run_value(j)).await.expect("insert");
            1
        }
        Op::Update(k) => {
            if !tree.update(k, run_value(j)).await.expect("update") && plan.load.contains(k) {
                out.bad(format!("update of loaded key {k:?} did not find it"));
            }
            2
        }
        Op::Remove(k) => {
            tree.remove(k).await.expect("remove");
            3
        }
        Op::Scan(k, len) => {
            let r = tree.scan(k, *len as usize).await.expect("scan");
            let sorted = r.windows(2).all(|w| w[0].0 < w[1].0);
            if !sorted || r.len() > *len as usize || r.first().is_some_and(|(f, _)| f < k) {
                out.bad(format!(
                    "scan from {k:?} returned an unordered or out-of-range result"
                ));
            }
            4
        }
        Op::ReadModifyWrite(k) => {
            let _ = tree.get(k).await.expect("get");
            tree.update(k, run_value(j)).await.expect("update");
            5
        }
    }
}

/// The coroutines of one core: ids `first..first + coros` of `total`, over
/// every operation or (with `ids`) over the listed ones.
#[allow(clippy::too_many_arguments)]
async fn core_phase(
    tree: Rc<AnyIndex>,
    plan: Arc<Plan>,
    phase: Phase,
    first: usize,
    coros: usize,
    total: usize,
    pb: ProgressBar,
    ids: Option<Arc<Vec<usize>>>,
) -> Out {
    let hs: Vec<_> = (0..coros)
        .map(|c| {
            dm_runtime::spawn(coroutine(
                tree.clone(),
                plan.clone(),
                phase,
                first + c,
                total,
                pb.clone(),
                ids.clone(),
            ))
        })
        .collect();
    let mut out = Out::new();
    for h in hs {
        out.merge(h.await);
    }
    if let AnyIndex::Tree(t) = &*tree {
        out.head_prefetch = t.head_prefetch_stats();
    }
    out
}

/// Bulk-loads the B+tree `tcfg`, or DEX's tree when `dex` is given
/// (`--load bulk`, from client 0's first core).
async fn bulk_load(
    dex: Option<Arc<dm_tree::DexCluster>>,
    tcfg: TreeConfig,
    sorted: Vec<(Vec<u8>, u64)>,
    fill: f64,
) -> Result<(), dm_tree::TreeError> {
    match dex {
        Some(cl) => DexTree::bulk_load(cl, 0, 0, &sorted, fill)
            .await
            .map(|_| ()),
        None => FgTree::bulk_load(tcfg, 0, 0, &sorted, fill)
            .await
            .map(|_| ()),
    }
}

/// The final check of `tree`; for DEX, of the pool itself after every
/// CS's dirty pages are written back (so the write-backs are checked too).
async fn verify_view(tree: AnyIndex, plan: Arc<Plan>) -> (u64, u64, Option<String>) {
    if let AnyIndex::Dex(d) = &tree {
        if let Err(e) = d.flush().await {
            return (0, 1, Some(format!("flushing DEX's caches: {e}")));
        }
        let t = FgTree::open(d.cluster().tree_config(), 0, 0).expect("checked at creation");
        return verify(Rc::new(AnyIndex::Tree(t)), plan).await;
    }
    verify(Rc::new(tree), plan).await
}

/// Final check: every key's value, then a full scan. Returns (verified, mismatches, first).
/// The gets run [`VERIFY_DEPTH`] at a time in the one task (a real fabric's
/// RTT, milliseconds in the soft-RoCE guest, would otherwise make the check
/// of a few thousand keys the longest part of a run).
async fn verify(tree: Rc<AnyIndex>, plan: Arc<Plan>) -> (u64, u64, Option<String>) {
    use futures::stream::{self, StreamExt};
    let mut keys: Vec<&Vec<u8>> = plan.allowed.keys().collect();
    keys.sort();
    let mut out = Out::new();
    let mut verified = 0;
    let got: Vec<_> = stream::iter(&keys)
        .map(|k| tree.get(k))
        .buffered(VERIFY_DEPTH)
        .collect()
        .await;
    for (k, got) in keys.iter().zip(got) {
        match got.expect("get") {
            Some(v) if allowed(&plan, k, v) => verified += 1,
            Some(v) => out.bad(format!("key {k:?} holds {v:#x}, never written")),
            None if plan
                .run
                .iter()
                .any(|o| matches!(o, Op::Remove(r) if r == *k)) =>
            {
                verified += 1
            }
            None => out.bad(format!("key {k:?} is missing")),
        }
    }
    let all = tree
        .scan(&vec![0; tree_key_bytes(&keys)], usize::MAX)
        .await
        .expect("scan");
    let present: Vec<&Vec<u8>> = all.iter().map(|(k, _)| k).collect();
    let removed = plan.run.iter().any(|o| matches!(o, Op::Remove(_)));
    if !removed && present != keys {
        out.bad(format!(
            "full scan returned {} keys, {} were written",
            present.len(),
            keys.len()
        ));
    }
    (verified, out.mismatches, out.first_mismatch)
}

/// Gets in flight at once in [`verify`].
const VERIFY_DEPTH: usize = 16;

fn tree_key_bytes(keys: &[&Vec<u8>]) -> usize {
    keys.first().map_or(8, |k| k.len())
}

fn pad(k: &[u8], n: usize) -> Result<Vec<u8>> {
    if k.len() > n {
        bail!(
            "key {:?} is longer than --key-bytes {n}",
            String::from_utf8_lossy(k)
        );
    }
    let mut v = k.to_vec();
    v.resize(n, 0);
    Ok(v)
}

/// Tree key size: `--key-bytes`, else 8 for integer keys and 32 for strings.
fn key_bytes(a: &Args) -> usize {
    let strings = a.key_file.is_some() || (a.trace_dir.is_some() && a.key_type != "randint");
    a.key_bytes.unwrap_or(if strings { 32 } else { 8 })
}

fn build_plan(a: &Args) -> Result<Plan> {
    let mut keys_info =
        json!({"kind": "integer (YCSB FNV-hashed key numbers)", "key_bytes": key_bytes(a)});
    let (load, run): (Vec<Vec<u8>>, Vec<Op>) = match &a.trace_dir {
        Some(_) if a.key_file.is_some() => {
            bail!("--key-file applies to generated workloads; a trace brings its own keys")
        }
        Some(_) if a.mix.is_some() => {
            bail!("--mix applies to generated workloads; a trace brings its own operations")
        }
        Some(dir) => {
            let ints = a.key_type == "randint";
            if !ints {
                keys_info = json!({"kind": format!("trace key type {}", a.key_type), "key_bytes": key_bytes(a)});
            }
            let lp = trace::find(dir, "load", &a.key_type, &a.workload).map_err(|e| anyhow!(e))?;
            let tp = trace::find(dir, "txn", &a.key_type, &a.workload).map_err(|e| anyhow!(e))?;
            let load = trace::read_ops(&lp, ints, usize::MAX).map_err(|e| anyhow!(e))?;
            let run = trace::read_ops(&tp, ints, a.ops as usize).map_err(|e| anyhow!(e))?;
            let n = key_bytes(a);
            let load = load
                .iter()
                .map(|o| pad(o.key(), n))
                .collect::<Result<_>>()?;
            let run = run
                .into_iter()
                .map(|o| {
                    Ok(match o {
                        Op::Read(k) => Op::Read(pad(&k, n)?),
                        Op::Update(k) => Op::Update(pad(&k, n)?),
                        Op::Insert(k) => Op::Insert(pad(&k, n)?),
                        Op::Scan(k, l) => Op::Scan(pad(&k, n)?, l),
                        Op::ReadModifyWrite(k) => Op::ReadModifyWrite(pad(&k, n)?),
                        Op::Remove(k) => Op::Remove(pad(&k, n)?),
                    })
                })
                .collect::<Result<_>>()?;
            (load, run)
        }
        None => {
            let mut spec = Spec::named(&a.workload, a.theta, a.scan_len).map_err(|e| anyhow!(e))?;
            if let Some(m) = &a.mix {
                spec.mix = Mix::parse_percent(m)?;
            }
            let mut s = Stream::new(spec, a.keys, a.ops, a.seed);
            match &a.key_file {
                Some(path) => {
                    let kf = keys::load(path, key_bytes(a)).map_err(|e| anyhow!(e))?;
                    keys_info = json!({
                        "kind": "strings",
                        "file": path.display().to_string(),
                        "key_bytes": key_bytes(a),
                        "lines": kf.lines,
                        "usable": kf.keys.len(),
                        "skipped_too_long": kf.too_long,
                        "duplicates": kf.duplicates,
                    });
                    s = s.with_key_list(Arc::new(kf.keys));
                }
                None if key_bytes(a) != 8 => {
                    bail!("generated integer keys are 8 bytes; --key-bytes applies to string keys")
                }
                None if a.key_order == "ordered" => {
                    keys_info = json!({"kind": "integer (YCSB ordered key numbers: dense)", "key_bytes": 8});
                    s = s.with_ordered_keys();
                }
                None => {}
            }
            if a.key_order != "hashed" && (a.key_order != "ordered" || a.key_file.is_some()) {
                bail!("--key-order takes hashed or ordered, for generated integer keys only");
            }
            let load = (0..a.keys).map(|n| s.key(n)).collect();
            let run = (0..a.ops).map(|_| s.next_op()).collect();
            if let Some(usable) = keys_info["usable"].as_u64() {
                if s.key_numbers_used() > usable {
                    bail!(
                        "{}: the key file has {usable} usable keys; this workload uses {} \
                         (records or key space, plus inserts of new keys)",
                        a.key_file.as_ref().unwrap().display(),
                        s.key_numbers_used()
                    );
                }
            }
            (load, run)
        }
    };
    let mut allowed: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
    for (i, k) in load.iter().enumerate() {
        allowed.entry(k.clone()).or_default().push(load_value(i));
    }
    for (j, o) in run.iter().enumerate() {
        match o {
            Op::Insert(k) | Op::Update(k) | Op::ReadModifyWrite(k) => {
                allowed.entry(k.clone()).or_default().push(run_value(j))
            }
            _ => {}
        }
    }
    // Updates of keys never inserted write nothing; keep only keys something inserted.
    let inserted: std::collections::HashSet<&Vec<u8>> = load
        .iter()
        .chain(
            run.iter()
                .filter_map(|o| if let Op::Insert(k) = o { Some(k) } else { None }),
        )
        .collect();
    allowed.retain(|k, _| inserted.contains(k));
    Ok(Plan {
        carved0: dm_runtime::alloc::bytes_carved(),
        dolphin0: dm_art::dolphin::totals(),
        load,
        run,
        allowed,
        keys_info,
        repartition: None,
        heads: None,
    })
}

/// The load as sorted (key, value) pairs; a key loaded twice keeps its last value.
fn sorted_load(plan: &Plan) -> Vec<(Vec<u8>, u64)> {
    let mut m: std::collections::BTreeMap<Vec<u8>, u64> = std::collections::BTreeMap::new();
    for (i, k) in plan.load.iter().enumerate() {
        m.insert(k.clone(), load_value(i));
    }
    m.into_iter().collect()
}

/// The NAM designs' partitions: `--nam-skew` shares of the key-prefix
/// space, else one partition per MS with equal shares of the loaded keys.
fn nam_config(a: &Args, plan: &Plan) -> NamConfig {
    let mut c = if a.nam_skew.is_empty() {
        let mut keys: Vec<&[u8]> = plan.load.iter().map(|k| k.as_slice()).collect();
        keys.sort_unstable();
        NamConfig::from_sample(&keys, a.ms)
    } else {
        NamConfig::weighted(&a.nam_skew)
    };
    c.ms_node_ns = a.nam_node_ns;
    c
}

/// Load-phase counters of a bulk load (its verbs are not per-operation).
fn bulk_out(plan: &Plan) -> Out {
    let mut o = Out::new();
    o.counts[1] = plan.load.len() as u64;
    o
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg:>5} [{bar:40}] {pos}/{len} ops ({elapsed})")
            .unwrap()
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

pub fn run(a: Args) -> Result<()> {
    measure(a).map(|_| ())
}

/// [`run`], returning the report (the JSON that `--json` writes).
pub fn measure(a: Args) -> Result<serde_json::Value> {
    measure_with(a, None)
}

/// The warmed-up sim cluster that [`measure_with`] hands its hook after the
/// run phase and the final verification (`dm-bench trace` runs one traced
/// operation there while every client is idle).
pub(crate) struct Warm<'a> {
    pub rt: &'a mut SimRuntime,
    /// (CS, thread) of each core, in the order of `sim_cores` and `trees`.
    pub places: &'a [(u16, u16)],
    pub sim_cores: &'a [dm_runtime::SimCore],
    /// Each core's index handle (with its CS's caches, as the run used them).
    pub trees: &'a [Rc<AnyIndex>],
}

/// What runs on [`Warm`] (sim only).
pub(crate) type WarmHook<'h> = &'h mut dyn FnMut(Warm<'_>) -> Result<()>;

/// The key of generated key number `n` (`--key-order` hashed or ordered):
/// the load inserts key numbers `0..--keys`.
pub(crate) fn generated_key(a: &Args, n: u64) -> Result<Vec<u8>> {
    if a.key_file.is_some() || a.trace_dir.is_some() {
        bail!("key numbers name generated integer keys (no --key-file, --trace-dir)");
    }
    let spec = Spec::named(&a.workload, a.theta, a.scan_len).map_err(|e| anyhow!(e))?;
    let s = Stream::new(spec, a.keys, a.ops, a.seed);
    Ok(match a.key_order.as_str() {
        "ordered" => s.with_ordered_keys().key(n),
        _ => s.key(n),
    })
}

/// [`measure`]; on sim, `after` then runs on the cluster as the run and
/// the verification left it (caches warm, every task finished).
pub(crate) fn measure_with(
    mut a: Args,
    mut after: Option<WarmHook<'_>>,
) -> Result<serde_json::Value> {
    if after.is_some() && a.fabric != FabricArg::Sim {
        bail!("a traced operation runs on --fabric sim only");
    }
    a.ms = a.ms_spec.count();
    check_ms(&a.ms_spec, a.fabric == FabricArg::Rdma)?;
    let (ci, cn) = parse_client(&a.client)?;
    a.perftest.check(a.fabric == FabricArg::Sim)?;
    if cn > 1 && a.fabric != FabricArg::Rdma {
        bail!("--client I/N with N > 1 is for --fabric rdma (separate processes)");
    }
    if !a.baseline.is_empty() && a.fabric == FabricArg::Sim {
        bail!("--baseline compares real CPU time and wall-clock throughput: use --fabric loopback (sim's time is virtual)");
    }
    if !a.baseline.is_empty() && cn > 1 {
        bail!("--baseline runs the whole operation stream in one process: use --client 0/1");
    }
    #[cfg(feature = "rdma")]
    let rdma_fabric = match a.fabric {
        FabricArg::Rdma => Some(crate::fabric_arg::connect(&a.ms_spec, &a.rdma)?),
        _ => None,
    };
    #[cfg(not(feature = "rdma"))]
    if a.fabric == FabricArg::Rdma {
        return Err(crate::fabric_arg::no_rdma());
    }
    let (mut techniques, design, rung) = parse_index(&a.index)?;
    if let Some(b) = a.lock_backoff {
        techniques.lock_backoff = b;
    }
    techniques.unlock_faa = a.unlock_faa;
    let smart = rung.is_some();
    for t in &a.smart_off {
        if !["lfi", "ipl", "rear", "rd", "wc", "cache"].contains(&t.as_str()) {
            bail!("--smart-off takes lfi, ipl, rear, rd, wc and cache, got {t:?}");
        }
    }
    if !smart && !a.smart_off.is_empty() {
        bail!("--smart-off is for the radix family (--index smart, art, ...)");
    }
    if a.index != SMART {
        for t in ["rd", "wc"] {
            if !a.smart_off.iter().any(|x| x == t) {
                a.smart_off.push(t.into());
            }
        }
    }
    let mut art_techniques = rung.unwrap_or_default();
    for t in &a.smart_off {
        match t.as_str() {
            "lfi" => art_techniques.lock_free_internal = false,
            "ipl" => {
                art_techniques.in_place_leaf = false;
                art_techniques.rear_lock = false;
            }
            "rear" => art_techniques.rear_lock = false,
            _ => {}
        }
    }
    if smart && a.smart_off.iter().any(|t| t == "cache") {
        a.cache_mb = 0;
    }
    if smart && a.load == "bulk" {
        bail!("--load bulk is for the B+tree family; --index smart loads by insert");
    }
    if design != Design::Fine {
        if a.load == "bulk" {
            bail!(
                "--load bulk builds the fine-grained design only, not --index {}",
                a.index
            );
        }
        // Ziegler et al. run the NAM designs without a CS cache (App. A.4).
        a.cache_mb = 0;
    } else if !a.nam_skew.is_empty() {
        bail!("--nam-skew is for --index nam-coarse and nam-hybrid");
    }
    if a.ms_cores == 0 {
        bail!("--ms-cores must be at least 1");
    }
    let dex = a.index == DEX;
    let dolphin = a.index == crate::kv::DOLPHIN;
    if dolphin && a.load == "bulk" {
        bail!("--load bulk is for the B+tree family; --index dolphin loads by insert");
    }
    if dolphin && key_bytes(&a) != 8 {
        bail!("--index dolphin takes 8-byte integer keys (Dolphin \u{a7}III-A)");
    }
    if dex && cn > 1 && (a.dex.dex_forward || a.dex.dex_repartition_at != 0.0) {
        bail!(
            "--dex-forward and --dex-repartition-at keep every CS in one process: use --client 0/1"
        );
    }
    if a.load != "insert" && a.load != "bulk" {
        bail!("--load must be insert or bulk, got {:?}", a.load);
    }
    if a.ms == 0 || a.cs == 0 || a.threads == 0 || a.coros == 0 {
        bail!("--ms, --cs, --threads and --coros must be at least 1");
    }
    let mut plan = build_plan(&a)?;
    #[allow(unused_mut)]
    let mut chunk = 8u64 << 20;
    #[cfg(feature = "rdma")]
    if let Some(f) = &rdma_fabric {
        // The memory servers decide the chunk size.
        chunk = f.ms_config().chunk_bytes;
    }
    let nodes_estimate = (plan.allowed.len() as u64 * 3 / (a.node_bytes as u64 / 24).max(1) + 64)
        * a.node_bytes as u64;
    // Every core carves its own chunk on each MS it allocates from: with
    // many cores (16 CS x 2 threads at 1M keys) the chunks, not the nodes,
    // fill the region.
    let cores_total = (a.cs as u64) * (a.threads as u64);
    let mut region = (4096 + nodes_estimate * 2 / a.ms as u64 + (cores_total + 4) * chunk)
        .next_multiple_of(chunk)
        + 4096;
    if smart {
        // SMART: a leaf per key plus its share of internal nodes (well under
        // 1 KiB per key), spread over the MSs; each core carves its own
        // chunks on every MS it allocates from.
        let cores = (a.cs as u64) * (a.threads as u64);
        let mut smart_bytes =
            plan.allowed.len() as u64 * 1024 * 2 / a.ms as u64 + (cores + 4) * chunk;
        if !art_techniques.in_place_leaf {
            // RCU: a new leaf (at most 320 B with 255-byte keys) per write.
            smart_bytes += plan.run.len() as u64 * 320 / a.ms as u64;
        }
        region = region.max((4096 + smart_bytes).next_multiple_of(chunk) + 4096);
    }
    if dolphin {
        // Dolphin: a leaf per 7-byte prefix, about half full with dense
        // keys, but one per key with sparse ones (digest B2.3).
        let per_leaf = if a.key_order == "ordered" { 16 } else { 1 };
        let cores = (a.cs as u64) * (a.threads as u64);
        let leaves = plan.allowed.len() as u64 / per_leaf + 64;
        let bytes = leaves * (a.node_bytes as u64 + 512) * 2 / a.ms as u64 + (cores + 4) * chunk;
        region = region.max((4096 + bytes).next_multiple_of(chunk) + 4096);
    }
    let ms_cfg = MsConfig {
        region_bytes: region,
        chunk_bytes: chunk,
        cores: a.ms_cores,
        ..Default::default()
    };
    // sim and loopback get the default MS device memory and masked CAS as each
    // offers it; rdma what the memory servers and the NIC report.
    #[allow(unused_mut)]
    let mut caps = Caps {
        masked_cas: match a.fabric {
            FabricArg::Sim => SimConfig::default().masked_cas,
            FabricArg::Loopback => LoopbackConfig::default().masked_cas,
            FabricArg::Rdma => false,
        },
        device_memory_bytes: ms_cfg.device_bytes,
    };
    #[cfg(feature = "rdma")]
    if let Some(f) = &rdma_fabric {
        caps = f.caps();
    }
    let tcfg = TreeConfig {
        node_bytes: a.node_bytes,
        key_bytes: key_bytes(&a),
        chunk_bytes: chunk,
        num_ms: a.ms,
        techniques,
        lock_table: LockTableConfig::for_caps(caps),
        design,
        nam: if design == Design::Fine {
            NamConfig::default()
        } else {
            nam_config(&a, &plan)
        },
        ..Default::default()
    };
    let scfg = SmartConfig {
        keys: KeyCodec::fixed(key_bytes(&a)),
        chunk_bytes: chunk,
        num_ms: a.ms,
        techniques: art_techniques,
        lock_table: tcfg.lock_table,
        ..Default::default()
    };
    let dcfg = DolphinConfig {
        chunk_bytes: chunk,
        num_ms: a.ms,
        leaf_bytes: a.node_bytes,
        ..Default::default()
    };
    if smart {
        SmartTree::open(scfg, 0, 0).map_err(|e| anyhow!("{e}"))?;
    } else if dolphin {
        DolphinTree::open(dcfg, 0, 0).map_err(|e| anyhow!("{e}"))?;
    } else {
        FgTree::open(tcfg, 0, 0).map_err(|e| anyhow!("{e}"))?;
    }
    let dexcl = if dex {
        // With --client I/N, N x cs CSs own the partitions; this process
        // hosts CSs I*cs.. and runs only the operations on their keys.
        let local = (ci as u16 * a.cs)..((ci as u16 + 1) * a.cs);
        Some(crate::ycsb_dex::cluster(
            &a.dex,
            tcfg,
            &plan.load,
            (a.cs * cn as u16, local),
            a.cache_mb,
            a.fill,
            a.seed,
        )?)
    } else {
        None
    };
    if let Some(cl) = &dexcl {
        plan.repartition =
            crate::ycsb_dex::repartition_plan(&a.dex, cl, &plan.load, plan.run.len())?;
    } else if a.dex.dex_repartition_at != 0.0 {
        bail!("--dex-repartition-at is for --index dex");
    }
    let one_sided_btree = !smart && !dex && !dolphin && design != Design::Coarse;
    plan.heads = crate::ycsb_head::HeadMaint::plan(&a.head, one_sided_btree)?;
    let plan = Arc::new(plan);
    // DEX: each CS's coroutines run the operations on its own keys.
    let routes = match &dexcl {
        Some(cl) if !a.dex.dex_forward => Some(crate::ycsb_dex::routes(cl, &plan.load, &plan.run)),
        _ => None,
    };
    // (first coroutine id, coroutines in the group, the group's list) of core i.
    let group = |i: usize, (cs, t): (u16, u16), ph: Phase, coros: usize, total: usize| match &routes
    {
        None => (i * coros, total, None),
        Some((l, r)) => (
            t as usize * coros,
            a.threads as usize * coros,
            Some(if ph == Phase::Load { l } else { r }[ci * a.cs as usize + cs as usize].clone()),
        ),
    };
    // Creates the index (from client 0's first core).
    let dexc = dexcl.clone();
    let create = move || {
        let dexc = dexc.clone();
        async move {
            if let Some(cl) = dexc {
                return DexTree::create(cl, 0, 0)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string());
            }
            if dolphin {
                return DolphinTree::create(dcfg, 0, 0)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string());
            }
            if smart {
                SmartTree::create(scfg, 0, 0)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            } else {
                FgTree::create(tcfg, 0, 0)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        }
    };
    let cores: Vec<(u16, u16)> = (0..a.cs)
        .flat_map(|cs| (0..a.threads).map(move |t| (cs, t)))
        .collect();
    let coros = a.coros as usize;
    let total = cores.len() * coros;
    let caches: Vec<Arc<IndexCache>> = (0..a.cs)
        .map(|_| Arc::new(IndexCache::new(a.cache_mb << 20, a.node_bytes)))
        .collect();
    let art_caches: Vec<Arc<ArtCache>> = (0..a.cs)
        .map(|_| Arc::new(ArtCache::new((a.cache_mb << 20) as usize)))
        .collect();
    let dolphin_caches: Vec<Arc<DolphinCache>> = (0..a.cs)
        .map(|_| Arc::new(DolphinCache::new((a.cache_mb << 20) as usize)))
        .collect();
    let off = |t: &str| a.smart_off.iter().any(|x| x == t);
    // Without combining, same-key writers of a CS still queue in the local
    // lock table (HOCL's, which SMART §5.1.3 gives every baseline): in front
    // of the rear lock (E-HOCL, §5.3.1, Fig. 19) and of RCU leaf writes.
    // Lock-table-locked leaves queue in HOCL's own local table instead.
    let write_queue = off("wc") && (art_techniques.rear_lock || !art_techniques.in_place_leaf);
    let rdwcs: Vec<Arc<Rdwc>> = (0..a.cs)
        .map(|_| {
            let t = Rdwc::new(a.rdwc_entries, !off("rd"), !off("wc"));
            Arc::new(t.queue_writers(write_queue))
        })
        .collect();
    let llts: Vec<_> = (0..a.cs)
        .map(|_| {
            if smart {
                SmartTree::new_local_lock_table()
            } else {
                FgTree::new_local_lock_table(&tcfg)
            }
        })
        .collect();
    let open = |cs: u16, t: u16| {
        let id = (ci * a.cs as usize) as u16 + cs;
        if let Some(cl) = &dexcl {
            return AnyIndex::Dex(DexTree::open(cl.clone(), id, t).unwrap());
        }
        if dolphin {
            let tree = DolphinTree::open(dcfg, id, t).unwrap();
            return AnyIndex::Dolphin(if a.cache_mb > 0 {
                tree.with_cache(dolphin_caches[cs as usize].clone())
            } else {
                tree
            });
        }
        if smart {
            let tree = SmartTree::open(scfg, id, t)
                .unwrap()
                .with_local_locks(llts[cs as usize].clone())
                .with_rdwc(rdwcs[cs as usize].clone());
            return AnyIndex::Smart(if a.cache_mb > 0 {
                tree.with_cache(art_caches[cs as usize].clone())
            } else {
                tree
            });
        }
        let tree = FgTree::open(tcfg, id, t)
            .unwrap()
            .with_local_locks(llts[cs as usize].clone());
        AnyIndex::Tree(if a.cache_mb > 0 {
            tree.with_cache(caches[cs as usize].clone())
        } else {
            tree
        })
    };
    let wall = std::time::Instant::now();
    let load_pb = bar(plan.load.len() as u64, "load");
    let run_pb = bar(plan.run.len() as u64, "run");
    // The run on a real fabric (loopback, rdma): one OS thread per core; with
    // --client I/N, this process's share of the load and run, between barriers.
    let ncores = cores.len();
    macro_rules! real_run {
        ($fabric:expr, $q:expr) => {{
            let fabric = &$fabric;
            let mut ex = Executor::new($q, a.ms, ExecConfig::default());
            let meet = |ex: &mut Executor<_>, k: u64| -> Result<()> {
                if cn > 1 {
                    ex.block_on(barrier(cn as u64, k))?;
                }
                Ok(())
            };
            if ci == 0 && a.load != "bulk" {
                ex.block_on(create()).map_err(|e| anyhow!("{e}"))?;
            }
            let phase = |ph: Phase, pb: &ProgressBar| {
                let t0 = std::time::Instant::now();
                let outs = dm_runtime::run_threads(fabric, &cores, true, |i| {
                    let (cs, t) = cores[i];
                    let (first, all, ids) = group(ci * ncores + i, cores[i], ph, coros, cn * total);
                    // The core thread's CPU time over its share (crate::cpu_time).
                    crate::cpu_time::on_thread(core_phase(
                        Rc::new(open(cs, t)),
                        plan.clone(),
                        ph,
                        first,
                        coros,
                        all,
                        pb.clone(),
                        ids,
                    ))
                });
                let mut o = Out::new();
                let mut cpu = 0;
                for (x, ns) in outs {
                    o.merge(x);
                    cpu += ns;
                }
                pb.finish();
                (o, t0.elapsed().as_nanos() as u64, cpu)
            };
            let (lo, lns) = if a.load == "bulk" {
                let t0 = std::time::Instant::now();
                if ci == 0 {
                    let sorted = sorted_load(&plan);
                    let fill = a.fill;
                    ex.block_on(bulk_load(dexcl.clone(), tcfg, sorted, fill))
                        .map_err(|e| anyhow!("{e}"))?;
                }
                meet(&mut ex, 1)?;
                load_pb.finish_and_clear();
                let lo = if ci == 0 { bulk_out(&plan) } else { Out::new() };
                (lo, t0.elapsed().as_nanos() as u64)
            } else {
                meet(&mut ex, 1)?;
                let (lo, lns, _) = phase(Phase::Load, &load_pb);
                (lo, lns)
            };
            if let (0, Some(h)) = (ci, plan.heads.clone()) {
                let t = open(0, 0);
                ex.block_on(async move { h.pass(&t).await });
            }
            meet(&mut ex, 2)?;
            let (ro, rns, rcpu) = phase(Phase::Run, &run_pb);
            if let AnyIndex::Dex(d) = open(0, 0) {
                // Every process writes its CSs' dirty pages back before any
                // verifies the pool.
                ex.block_on(async move { d.flush().await })
                    .map_err(|e| anyhow!("flushing DEX's caches: {e}"))?;
            }
            meet(&mut ex, 3)?;
            let v = ex.block_on(verify_view(open(0, 0), plan.clone()));
            (lo, ro, lns, rns, v, Some(rcpu))
        }};
    }
    let (load_out, out, load_ns, run_ns, verified, run_cpu_ns, fabric_detail, ms_used) = match a
        .fabric
    {
        FabricArg::Sim => {
            let tear = match a.tear {
                TearArg::Off => TearGranularity::Off,
                TearArg::Line => TearGranularity::CacheLine,
                TearArg::Word => TearGranularity::Word,
            };
            let cfg = SimConfig {
                num_ms: a.ms,
                ms: ms_cfg,
                faults: Faults {
                    tear,
                    ..Default::default()
                },
                net: a.net.net(),
                seed: a.seed,
                ..Default::default()
            };
            let fabric = SimFabric::new(cfg);
            fabric.register_rpc(dm_tree::nam::RPC_NAM, dm_tree::nam::ms::handler());
            fabric.register_rpc(dm_tree::dex::RPC_DEX, dm_tree::dex::ms::handler());
            let mut rt = SimRuntime::new(fabric.clone());
            let sc: Vec<_> = cores.iter().map(|&(cs, t)| rt.add_core(cs, t)).collect();
            rt.block_on(sc[0], create())
                .unwrap()
                .map_err(|e| anyhow!("{e}"))?;
            let trees: Vec<Rc<AnyIndex>> =
                cores.iter().map(|&(cs, t)| Rc::new(open(cs, t))).collect();
            let phase = |rt: &mut SimRuntime, ph: Phase, pb: &ProgressBar| {
                let t0 = rt.fabric().now_ns();
                let hs: Vec<_> = sc
                    .iter()
                    .enumerate()
                    .map(|(i, &c)| {
                        let (first, all, ids) = group(i, cores[i], ph, coros, total);
                        rt.spawn_on(
                            c,
                            core_phase(
                                trees[i].clone(),
                                plan.clone(),
                                ph,
                                first,
                                coros,
                                all,
                                pb.clone(),
                                ids,
                            ),
                        )
                    })
                    .collect();
                let t1 = rt.run();
                let mut o = Out::new();
                for h in hs {
                    o.merge(h.try_take().expect("core finished"));
                }
                pb.finish();
                (o, t1 - t0)
            };
            let (lo, lns) = if a.load == "bulk" {
                let t0 = rt.fabric().now_ns();
                let sorted = sorted_load(&plan);
                let fill = a.fill;
                rt.block_on(sc[0], bulk_load(dexcl.clone(), tcfg, sorted, fill))
                    .unwrap()
                    .map_err(|e| anyhow!("{e}"))?;
                load_pb.finish_and_clear();
                (bulk_out(&plan), rt.fabric().now_ns() - t0)
            } else {
                phase(&mut rt, Phase::Load, &load_pb)
            };
            if let Some(h) = plan.heads.clone() {
                let t = open(0, 0);
                rt.block_on(sc[0], async move { h.pass(&t).await });
            }
            let (ro, rns) = phase(&mut rt, Phase::Run, &run_pb);
            let v = rt
                .block_on(sc[0], verify_view(open(0, 0), plan.clone()))
                .unwrap();
            if let Some(h) = after.as_mut() {
                h(Warm {
                    rt: &mut rt,
                    places: &cores,
                    sim_cores: &sc,
                    trees: &trees,
                })?;
            }
            let used: u64 = (0..a.ms).map(|m| fabric.ms_bytes_used(m)).sum();
            let detail = json!({"trace_hash": format!("{:016x}", fabric.trace_hash()), "tear": format!("{tear:?}"), "net": format!("{:?}", cfg.net)});
            (lo, ro, lns, rns, v, None, detail, used)
        }
        FabricArg::Loopback => {
            let fabric = LoopbackFabric::new(LoopbackConfig {
                num_ms: a.ms,
                ms: ms_cfg,
                ..Default::default()
            });
            fabric.register_rpc(dm_tree::nam::RPC_NAM, dm_tree::nam::ms::handler());
            fabric.register_rpc(dm_tree::dex::RPC_DEX, dm_tree::dex::ms::handler());
            let q = fabric.open_queues(0, 0);
            let (lo, ro, lns, rns, v, cpu) = real_run!(fabric, q);
            let used: u64 = (0..a.ms).map(|m| fabric.ms_bytes_used(m)).sum();
            (lo, ro, lns, rns, v, cpu, json!({}), used)
        }
        #[cfg(feature = "rdma")]
        FabricArg::Rdma => {
            let fabric = rdma_fabric.clone().expect("connected above");
            let q = fabric.try_open_queues((ci * a.cs as usize) as u16, 0)?;
            let (lo, ro, lns, rns, v, cpu) = real_run!(fabric, q);
            // Chunks this client's cores took (the MSs' own totals stay on the MSs).
            let detail = json!({"device": fabric.device_name(), "chunk_bytes": chunk, "client": ci, "clients": cn});
            (lo, ro, lns, rns, v, cpu, detail, 0)
        }
        #[cfg(not(feature = "rdma"))]
        FabricArg::Rdma => unreachable!("rejected above"),
    };
    let cache = if let Some(cl) = &dexcl {
        CacheReport::dex(cl)
    } else if dolphin {
        CacheReport::dolphin(&dolphin_caches, a.cs)
    } else if smart {
        CacheReport::art(&art_caches, a.cs)
    } else {
        CacheReport::tree(&caches, a.cs)
    };
    let wall_s = wall.elapsed().as_secs_f64();
    // --baseline: the same stream against local maps (crate::ycsb_baseline),
    // each core thread's operations on one OS thread.
    let by_thread = |ph: Phase, n: usize| -> Vec<Vec<usize>> {
        (0..ncores)
            .map(|i| {
                let (first, all, ids) = group(i, cores[i], ph, coros, total);
                crate::ycsb_baseline::core_ops(first, coros, all, ids.as_deref().map(|v| &v[..]), n)
            })
            .collect()
    };
    let baselines: Vec<_> = a
        .baseline
        .iter()
        .map(|&m| {
            let stream = crate::ycsb_baseline::Stream {
                load: &plan.load,
                run: &plan.run,
                allowed: &plan.allowed,
                load_value,
                run_value,
                load_by_thread: (a.load != "bulk").then(|| by_thread(Phase::Load, plan.load.len())),
                run_by_thread: by_thread(Phase::Run, plan.run.len()),
            };
            crate::ycsb_baseline::run(m, &stream)
        })
        .collect();
    let locks = if dolphin {
        let d = dm_art::dolphin::totals().since(plan.dolphin0);
        (
            format!(
                "Spear leaf locks (FAA only, Dolphin \u{a7}III-C): {} lock waits, {} same-key update CASes lost and rerun, {} backtracks through special nodes, {} torn images READ again",
                d.lock_waits, d.lost_update_cas, d.backtracks, d.rejected_images
            ),
            json!({"global_lock_table": false, "spear": {"lock_waits": d.lock_waits,
                "lost_update_cas": d.lost_update_cas, "backtracks": d.backtracks,
                "rejected_images": d.rejected_images}}),
        )
    } else if smart {
        let mut r = dm_art::RdwcStats::default();
        for t in &rdwcs {
            let s = t.stats();
            r.delegated_reads += s.delegated_reads;
            r.combined_writes += s.combined_writes;
            r.queued_writes += s.queued_writes;
            r.conflicts += s.conflicts;
        }
        let on = |t: &str| if off(t) { "off" } else { "on" };
        let t = art_techniques;
        let mut line = format!(
            "{}, {} (SMART \u{a7}4.1, \u{a7}5.3.1); read delegation {} ({} reads delegated), write combining {} ({} writes combined{}), {} hash conflicts",
            if t.lock_free_internal {
                "lock-free internal nodes (CAS on slots)"
            } else {
                "ROWEX internal nodes (node locks around each CAS)"
            },
            match (t.in_place_leaf, t.rear_lock) {
                (false, _) => "RCU leaves (new leaf + slot CAS per write)",
                (true, false) => "in-place leaves under a lock-table lock",
                (true, true) => "in-place leaves under a lock word at the rear of each leaf",
            },
            on("rd"),
            r.delegated_reads,
            on("wc"),
            r.combined_writes,
            if write_queue {
                let what = if t.rear_lock { "E-HOCL" } else { "HOCL's local lock" };
                format!("; same-key writers queue per CS ({what}): {} queued", r.queued_writes)
            } else {
                String::new()
            },
            r.conflicts
        );
        let mut v = json!({"global_lock_table": t.needs_locks(), "index": a.index,
            "techniques": {"lock_free_internal": t.lock_free_internal,
                "in_place_leaf": t.in_place_leaf, "rear_lock": t.rear_lock},
            "rdwc": {
                "read_delegation": !off("rd"), "write_combining": !off("wc"),
                "entries": a.rdwc_entries, "delegated_reads": r.delegated_reads,
                "combined_writes": r.combined_writes, "conflicts": r.conflicts,
                "write_queue": write_queue || !off("wc"),
                "queued_writes": r.queued_writes}});
        if t.needs_locks() {
            let hocl = TreeConfig {
                techniques: dm_art::baseline::HOCL,
                ..tcfg
            };
            let (l, p) = lock_placement(&hocl, caps);
            line = format!("{line}; HOCL: {l}");
            v["lock_table"] = p;
        }
        (line, v)
    } else {
        let (line, mut v) = lock_placement(&tcfg, caps);
        let n = dm_tree::lock_takeovers();
        v["takeovers"] = json!(n);
        (format!("{line}; {n} taken over (own-tag ledger)"), v)
    };
    // The NAM designs' partitioning and MS cost model (null for the others).
    let nam_json = (design != Design::Fine).then(|| {
        let shares: Vec<f64> = (0..tcfg.nam.parts as usize)
            .map(|p| {
                let lo = if p == 0 { 0 } else { tcfg.nam.splits[p - 1] };
                let hi = if p + 1 == tcfg.nam.parts as usize { u64::MAX } else { tcfg.nam.splits[p] };
                (hi - lo) as f64 / u64::MAX as f64
            })
            .collect();
        json!({"design": format!("{design:?}").to_lowercase(), "partitions": tcfg.nam.parts, "prefix_shares": shares, "ms_node_ns": tcfg.nam.ms_node_ns})
    });
    let mut sections = Vec::new();
    if let Some(cl) = &dexcl {
        let (l, v) = crate::ycsb_dex::report(cl, a.dex.dex_forward, plan.repartition.as_deref());
        sections.push(("dex", l, v));
    }
    if let Some(h) = &plan.heads {
        let (l, v) = h.report(out.head_prefetch);
        sections.push(("head nodes", l, v));
    }
    report(
        &a,
        &plan,
        locks,
        nam_json,
        sections,
        load_out,
        out,
        load_ns,
        run_ns,
        verified,
        fabric_detail,
        ms_used,
        cache,
        wall_s,
        run_cpu_ns,
        baselines,
    )
}

/// Where the node locks live, for the report: a line and its JSON.
fn lock_placement(t: &TreeConfig, caps: Caps) -> (String, serde_json::Value) {
    let fabric = format!(
        "fabric: {} bytes of device memory per MS, masked CAS {}",
        caps.device_memory_bytes,
        if caps.masked_cas { "offered" } else { "absent" }
    );
    if !t.techniques.onchip_lock {
        let line = format!("in each node, 64-bit CAS ({fabric})");
        return (line, json!({"global_lock_table": false}));
    }
    let lt = t.lock_table;
    let line = format!(
        "global lock table: {} {} slots per MS in {} memory ({fabric})",
        lt.slots,
        if lt.lanes16 {
            "16-bit masked-CAS"
        } else {
            "64-bit CAS"
        },
        if lt.device { "device" } else { "host" }
    );
    let v = json!({
        "global_lock_table": true,
        "memory": if lt.device { "device" } else { "host" },
        "slot_bits": if lt.lanes16 { 16 } else { 64 },
        "slots_per_ms": lt.slots,
        "fabric_device_memory_bytes": caps.device_memory_bytes,
        "fabric_masked_cas": caps.masked_cas,
    });
    (line, v)
}

#[allow(clippy::too_many_arguments)]
fn report(
    a: &Args,
    plan: &Plan,
    locks: (String, serde_json::Value),
    nam_json: Option<serde_json::Value>,
    sections: Vec<(&'static str, String, serde_json::Value)>,
    load: Out,
    mut out: Out,
    load_ns: u64,
    run_ns: u64,
    verified: (u64, u64, Option<String>),
    fabric_detail: serde_json::Value,
    ms_used: u64,
    cache: CacheReport,
    wall_s: f64,
    run_cpu_ns: Option<u64>,
    baselines: Vec<crate::ycsb_baseline::Baseline>,
) -> Result<serde_json::Value> {
    let clock = if a.fabric == FabricArg::Sim {
        "virtual"
    } else {
        "wall"
    };
    let ops: u64 = out.counts.iter().sum();
    let hist = out.hist.take().unwrap();
    let mut total = VerbStats::default();
    for s in &out.stats {
        total.add(s);
    }
    let mut load_total = VerbStats::default();
    for s in &load.stats {
        load_total.add(s);
    }
    let loaded = load.counts.iter().sum::<u64>();
    let mops = ops as f64 / (run_ns.max(1) as f64 / 1e9) / 1e6;
    let load_mops = loaded as f64 / (load_ns.max(1) as f64 / 1e9) / 1e6;
    // Real fabrics: the core threads' CPU time in the run (crate::cpu_time).
    let cost = run_cpu_ns.map(|c| crate::cpu_time::CpuCost {
        thread_cpu_ns: c,
        threads: a.cs as usize * a.threads as usize,
        ops,
        run_ns,
    });
    let (baseline_lines, baseline_json) = match &cost {
        Some(c) if !baselines.is_empty() => {
            let (l, v) = crate::ycsb_baseline::report(&baselines, c);
            (l, Some(v))
        }
        _ => (Vec::new(), None),
    };
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    // Run phase only; with --client I/N, this process's share.
    let (eff, eff_line) = efficiency(verbs_posted(&total), run_ns, &a.perftest);
    let by_kind: serde_json::Map<String, serde_json::Value> = KINDS
        .iter()
        .enumerate()
        .map(|(i, k)| (k.to_string(), per_op(&out.stats[i], out.counts[i])))
        .collect();
    let counts: serde_json::Map<String, serde_json::Value> = KINDS
        .iter()
        .enumerate()
        .map(|(i, k)| (k.to_string(), json!(out.counts[i])))
        .collect();
    let (ver, ver_bad, first_bad) = verified;
    // Memory (Dolphin's comparison, issue 8): what this process's chunk
    // carvers handed out (MS-side RPC handlers allocate inside their own
    // chunks, counted in `ms_used` only), against the bytes the verified
    // items themselves take (key and 8-byte value).
    let carved = dm_runtime::alloc::bytes_carved() - plan.carved0;
    let live = ver * (key_bytes(a) as u64 + 8);
    let mismatches = out.mismatches + load.mismatches + ver_bad;
    let first = out.first_mismatch.or(first_bad);
    let source = a
        .trace_dir
        .as_ref()
        .map_or("generator".to_string(), |d| d.display().to_string());
    let v = json!({
        "index": a.index,
        "workload": a.workload,
        "mix": a.mix,
        "source": source,
        "fabric": format!("{:?}", a.fabric).to_lowercase(),
        "clock": clock,
        "keys": plan.load.len(),
        "key_source": plan.keys_info,
        "load": {"mode": a.load, "fill": (a.load == "bulk").then_some(a.fill), "ns": load_ns, "per_op": per_op(&load_total, loaded)},
        "ops": ops,
        "ops_by_kind": counts,
        "cluster": {"ms": a.ms, "cs": a.cs, "threads": a.threads, "coros": a.coros, "ms_cores": a.ms_cores},
        "nam": nam_json,
        "dex": sections.iter().find(|s| s.0 == "dex").map(|s| s.2.clone()),
        "head_nodes": sections.iter().find(|s| s.0 == "head nodes").map(|s| s.2.clone()),
        "theta": a.theta,
        "throughput_mops": mops,
        "load_throughput_mops": load_mops,
        "latency_us": {"p50": us(0.5), "p99": us(0.99), "p999": us(0.999)},
        "per_op": per_op(&total, ops),
        "per_op_by_kind": by_kind,
        "cache": cache.json,
        "memory": {"ms_bytes_used": ms_used, "ms_bytes_allocated": carved,
            "ms_bytes_live_items": live, "cs_cache_bytes": cache.bytes,
            "cs_cache_items": cache.json["items"], "cs_cache_hit_ratio": cache.json["hit_ratio"]},
        "verified": ver,
        "mismatches": mismatches,
        "first_mismatch": first,
        "time": {"virtual": a.fabric == FabricArg::Sim, "load_ns": load_ns, "run_ns": run_ns, "seconds": wall_s},
        "fabric_detail": fabric_detail,
        "locks": locks.1,
        "verbs_per_s": eff["verbs_per_s"],
        "perftest_read_mops": eff["perftest_read_mops"],
        "rdma_efficiency": eff["rdma_efficiency"],
        "cpu_ns_per_op": cost.map(|c| c.cpu_ns_per_op()),
        "per_core_mops": cost.map(|c| c.per_core_mops()),
        "cpu": cost.map(|c| c.json()),
        "baseline": baseline_json,
    });
    if !a.quiet {
        println!(
            "dm-bench ycsb: index {}, workload {}{} ({source}), {} fabric ({clock} time)",
            a.index,
            a.workload,
            a.mix
                .as_ref()
                .map_or(String::new(), |m| format!(" with --mix {m}")),
            v["fabric"].as_str().unwrap()
        );
        println!(
            "  cluster      {} MS ({} RPC cores each), {} CS x {} threads x {} coroutines",
            a.ms, a.ms_cores, a.cs, a.threads, a.coros
        );
        println!(
            "  keys         {}",
            plan.keys_info["kind"].as_str().unwrap_or_default()
        );
        println!("  locks        {}", locks.0);
        if let Some(f) = plan.keys_info["file"].as_str() {
            println!(
                "               {f}: {} usable of {} lines at {} bytes ({} longer skipped, {} duplicates)",
                plan.keys_info["usable"],
                plan.keys_info["lines"],
                plan.keys_info["key_bytes"],
                plan.keys_info["skipped_too_long"],
                plan.keys_info["duplicates"]
            );
        }
        println!(
            "  load         {} keys by {}, {} Mops",
            plan.load.len(),
            if a.load == "bulk" {
                format!("bulk load at fill {}", a.fill)
            } else {
                "inserts".to_string()
            },
            crate::report::mops(load_mops)
        );
        let kinds: Vec<String> = KINDS
            .iter()
            .enumerate()
            .filter(|(i, _)| out.counts[*i] > 0)
            .map(|(i, k)| format!("{k} {}", out.counts[i]))
            .collect();
        println!(
            "  run          {ops} ops ({}), {} Mops",
            kinds.join(", "),
            crate::report::mops(mops)
        );
        println!(
            "  latency      p50 {:.2} us, p99 {:.2} us, p99.9 {:.2} us",
            us(0.5),
            us(0.99),
            us(0.999)
        );
        if let Some(c) = &cost {
            println!("  cpu          {} (run phase)", c.line());
        }
        if let Some(l) = eff_line {
            println!("  efficiency   {l} (run phase)");
        }
        let d = ops.max(1) as f64;
        println!(
            "  per op       read {:.2} write {:.2} cas {:.2} rpc {:.2} | bytes r {:.0} w {:.0} | rtts {:.2}",
            total.read as f64 / d,
            total.write as f64 / d,
            total.cas as f64 / d,
            total.rpc as f64 / d,
            total.bytes_read as f64 / d,
            total.bytes_written as f64 / d,
            total.rtts as f64 / d
        );
        println!("  cache        {}", cache.line);
        for (name, line, _) in &sections {
            println!("  {name:<12} {line}");
        }
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "  memory       {:.1} MiB of chunks on the MSs, {:.1} MiB allocated in them ({:.2}x the {:.1} MiB of live items); CS caches {:.1} MiB in {} items",
            mib(ms_used),
            mib(carved),
            carved as f64 / live.max(1) as f64,
            mib(live),
            mib(cache.bytes),
            cache.json["items"]
        );
        println!("  verified     {ver} keys, {mismatches} mismatches");
        for l in &baseline_lines {
            let head = if l.starts_with(' ') { "" } else { "baseline" };
            println!("  {head:<12} {}", l.trim_start());
        }
        if a.fabric == FabricArg::Sim {
            println!("  wall time    {wall_s:.2} s");
        } else {
            // Load and run are timed on this clock; the rest is set-up, barriers and verification.
            println!(
                "  wall time    {wall_s:.2} s (load {:.2} s, run {:.2} s)",
                load_ns as f64 / 1e9,
                run_ns as f64 / 1e9
            );
        }
    }
    write_json(a.json.as_deref(), &v)?;
    if mismatches > 0 {
        bail!(
            "{mismatches} mismatches; first: {}",
            first.unwrap_or_default()
        );
    }
    if let Some(b) = baselines.iter().find(|b| b.mismatches > 0) {
        bail!(
            "baseline {}: {} mismatches; first: {}",
            b.map.name(),
            b.mismatches,
            b.first_mismatch.as_deref().unwrap_or_default()
        );
    }
    Ok(v)
}

/// The report's cache line and JSON object, summed over the CSs.
struct CacheReport {
    line: String,
    json: serde_json::Value,
    bytes: u64,
}

impl CacheReport {
    fn tree(caches: &[Arc<IndexCache>], cs: u16) -> Self {
        let mut c = dm_tree::CacheStats::default();
        for k in caches {
            let s = k.stats();
            c.hits += s.hits;
            c.misses += s.misses;
            c.bytes += s.bytes;
            c.nodes += s.nodes;
            c.top_nodes += s.top_nodes;
        }
        CacheReport {
            line: format!(
                "hit ratio {:.3} (load and run), {} leaf parents + {} top-level nodes, {:.1} MiB over {cs} CS",
                c.hit_ratio(),
                c.nodes,
                c.top_nodes,
                c.bytes as f64 / (1 << 20) as f64,
            ),
            json: json!({"hit_ratio": c.hit_ratio(), "bytes": c.bytes, "items": c.nodes, "top_items": c.top_nodes, "hits": c.hits, "misses": c.misses}),
            bytes: c.bytes,
        }
    }

    /// DEX (§5): one frame per cached node image (inner and leaf nodes
    /// alike), `node_bytes` each; the hit ratio is over traversals (a
    /// traversal that reached its leaf without I/O is a hit).
    fn dex(cl: &dm_tree::DexCluster) -> Self {
        let n = cl.num_cs();
        let (mut hits, mut misses, mut frames) = (0u64, 0u64, 0u64);
        for c in 0..n {
            let s = cl.stats(c);
            hits += s.cache.hits;
            misses += s.cache.misses;
            frames += cl.cache_frames(c).0 as u64;
        }
        let bytes = frames * cl.tree_config().node_bytes as u64;
        let ratio = hits as f64 / (hits + misses).max(1) as f64;
        CacheReport {
            line: format!(
                "DEX cache: hit ratio {ratio:.3} (traversals without I/O, load and run), {frames} node frames (inner and leaf), {:.1} MiB over {n} CS",
                bytes as f64 / (1 << 20) as f64,
            ),
            json: json!({"hit_ratio": ratio, "bytes": bytes, "items": frames, "hits": hits, "misses": misses}),
            bytes,
        }
    }

    fn dolphin(caches: &[Arc<DolphinCache>], cs: u16) -> Self {
        let mut c = dm_art::dolphin::DolphinCacheStats::default();
        for k in caches {
            let s = k.stats();
            c.art.hits += s.art.hits;
            c.art.misses += s.art.misses;
            c.art.entries += s.art.entries;
            c.art.invalidations += s.art.invalidations;
            c.specials += s.specials;
            c.special_hits += s.special_hits;
            c.special_misses += s.special_misses;
            c.bytes += s.bytes;
        }
        let ratio = |h: u64, m: u64| h as f64 / (h + m).max(1) as f64;
        let (ra, rs) = (
            ratio(c.art.hits, c.art.misses),
            ratio(c.special_hits, c.special_misses),
        );
        let items = c.art.entries + c.specials;
        CacheReport {
            line: format!(
                "Dolphin cache: ART hit ratio {ra:.3}, special-node hit ratio {rs:.3}; {} node snapshots + {} special nodes, {:.1} MiB over {cs} CS, {} stale entries dropped",
                c.art.entries,
                c.specials,
                c.bytes as f64 / (1 << 20) as f64,
                c.art.invalidations,
            ),
            json: json!({"hit_ratio": ra, "special_hit_ratio": rs, "bytes": c.bytes, "items": items, "art_items": c.art.entries, "special_items": c.specials, "hits": c.art.hits, "misses": c.art.misses, "invalidations": c.art.invalidations}),
            bytes: c.bytes,
        }
    }

    fn art(caches: &[Arc<ArtCache>], cs: u16) -> Self {
        let mut c = dm_art::CacheStats::default();
        for k in caches {
            let s = k.stats();
            c.hits += s.hits;
            c.misses += s.misses;
            c.invalidations += s.invalidations;
            c.evictions += s.evictions;
            c.stale_leaves += s.stale_leaves;
            c.entries += s.entries;
            c.bytes += s.bytes;
        }
        let ratio = c.hits as f64 / (c.hits + c.misses).max(1) as f64;
        CacheReport {
            line: format!(
                "ART cache: hit ratio {ratio:.3} (load and run; a hit starts below the root), {} node snapshots, {:.1} MiB over {cs} CS, {} stale entries dropped, {} evicted, {} cached leaf addresses found replaced (RCU)",
                c.entries,
                c.bytes as f64 / (1 << 20) as f64,
                c.invalidations,
                c.evictions,
                c.stale_leaves,
            ),
            json: json!({"hit_ratio": ratio, "bytes": c.bytes, "items": c.entries, "hits": c.hits, "misses": c.misses, "invalidations": c.invalidations, "evictions": c.evictions, "stale_leaves": c.stale_leaves}),
            bytes: c.bytes,
        }
    }
}
