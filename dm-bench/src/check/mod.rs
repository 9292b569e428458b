//! `dm-bench check`: concurrent random operations against an index on `sim`
//! with faults (torn READs, delayed completions), or on a real fabric
//! (`loopback`, `rdma`), histories checked for linearizability.
//!
//! - Clients (tasks spread over simulated CS cores) run random get / insert /
//!   update / remove / scan on a small key space with small nodes, so conflicts,
//!   splits and root growth are frequent. Every written value is unique.
//! - Each CS has a tiny index cache (`--cache-nodes`), so lookups through
//!   stale and evicted leaf-parent copies are frequent.
//! - Times are the issuing core's virtual clock: every effect of an operation
//!   happens at or after its call time and before its return time, so ordering by
//!   these times never invents a real-time order that did not exist. Equal times
//!   count as concurrent.
//! - get/insert/update/remove: the history is split per key (a map is the
//!   product of independent per-key registers: P-compositionality) and each
//!   key's history is checked with Wing & Gong's algorithm with Lowe's
//!   memoisation (`todc-utils`' `WGLChecker`) against a sequential
//!   `Option<value>` register.
//! - scan: keys strictly increasing, none below the start, at most `count`;
//!   every returned pair was written by an operation called before the scan
//!   returned; every key present for the whole scan (inserted by an operation
//!   that returned before the scan was called, and no remove of it overlapping
//!   from that insert's call to the scan's return) inside the scanned range is returned.
//!
//! A failing seed is printed so it can be replayed with `--first-seed S --seeds 1`;
//! `--history-out FILE` writes the last (or the failing) seed's history as JSON
//! lines `{seed, client, op, key, value, call, ret, result}` (times in ns).
//!
//! ## Real fabrics (`--fabric loopback|rdma`)
//! The same clients run on OS threads, one per `--cores` (alternating between
//! two CSs), against real memory (`loopback`) or `dm-memserver` processes
//! (`rdma`). Nothing is injected (`--faults` is for sim): torn READs and
//! reordered completions are whatever the hardware does. Times are
//! `CLOCK_MONOTONIC` ns read before an operation is issued and after it
//! returns: one clock for every process of a machine. A seed fixes each
//! client's operations, not the interleaving, so a failing seed cannot be
//! replayed exactly; its history (`--history-out`) is the evidence.
//!
//! Lock tables are tiny here too: on even seeds the global lock table goes to
//! device memory when the fabric offers it (16-bit lanes with masked CAS),
//! otherwise, and on odd seeds, 16 64-bit slots in a host-memory chunk.
//!
//! With `--client I/N` (rdma), N processes run the same command with distinct
//! I: process I runs clients `I*clients..` on CSs `2I` and `2I+1`, process 0
//! creates each seed's tree, and they meet at barriers (an FAA word in MS 0's
//! superblock, as `ycsb --client`) after creation and after the run. Each
//! writes every seed's history to its `--history-out`; then
//! `dm-bench check --histories F0,F1,..` checks their union per seed. The
//! processes must share a clock (one machine); the memory servers must be
//! fresh (the barrier word starts at 0). DEX keeps its CSs' state in their
//! process, so there process I's clients draw only keys its two CSs own
//! (the I-th of N equal ranges), and a scan that returns fewer keys than
//! asked covers only up to that range's end (`hi` in the history).

mod dex;
mod dolphin;

use crate::fabric_arg::{barrier, check_ms, parse_client, parse_ms, MsArg, RdmaArgs};
use crate::kv::{parse_index, radix};
use crate::kv::{AnyIndex, Kv};
use crate::report::write_json;
use crate::verbs_bench::FabricArg;
use anyhow::{anyhow, bail, Context as _, Result};
use dm_art::{ArtCache, Rdwc, SmartConfig, SmartTree};
use dm_runtime::{ExecConfig, Executor, SimRuntime};
use dm_tree::{Design, FgTree, IndexCache, LockTableConfig, NamConfig, Techniques, TreeConfig};
use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
use dm_verbs::sim::{Faults, SimConfig, SimFabric, TearGranularity};
use dm_verbs::{Caps, Fabric, MsConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use todc_utils::{Action, History, Specification, WGLChecker};

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// fg, sherman-combine, sherman-onchip, sherman-hier, sherman, smart.
    #[arg(long, default_value = "fg")]
    pub index: String,
    /// Number of seeds (independent runs).
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    #[arg(long, default_value_t = 0)]
    pub first_seed: u64,
    /// Concurrent clients (tasks), spread over `--cores` cores on 2 CSs
    /// (per process with `--client`).
    #[arg(long, default_value_t = 16)]
    pub clients: u32,
    /// Cores: simulated on sim, OS threads on loopback and rdma.
    #[arg(long, default_value_t = 4)]
    pub cores: u16,
    /// Operations per client.
    #[arg(long, default_value_t = 150)]
    pub ops: u32,
    /// Key space (keys 0..N as 8-byte big-endian).
    #[arg(long, default_value_t = 48)]
    pub keys: u64,
    /// Node size: small nodes split often. Default 128 bytes, or 176 when
    /// leaves are unsorted (`--index sherman`): 5 entries per leaf either way.
    #[arg(long)]
    pub node_bytes: Option<usize>,
    /// Index cache per CS in leaf-parent nodes (tiny, so stale entries and evictions are frequent; 0 = none).
    #[arg(long, default_value_t = 4)]
    pub cache_nodes: u64,
    /// Comma-separated faults the simulator injects: torn (8-byte torn READs),
    /// torn-line (64-byte), delay. Default on sim: torn,delay. Sim only.
    #[arg(long)]
    pub faults: Option<String>,
    /// sim (deterministic, faults injected), loopback (threads, process
    /// memory) or rdma (dm-memserver processes; build with --features rdma).
    #[arg(long, value_enum, default_value = "sim")]
    pub fabric: FabricArg,
    /// Memory servers: a count (sim, loopback) or HOST:PORT[,HOST:PORT..]
    /// of dm-memserver processes (rdma; MS id = position).
    #[arg(long = "ms", default_value = "2", value_parser = parse_ms)]
    pub ms_spec: MsArg,
    #[command(flatten)]
    pub rdma: RdmaArgs,
    /// This process is client I of N (rdma); see the module docs. N > 1 needs
    /// --history-out, and the union is checked with --histories.
    #[arg(long, default_value = "0/1")]
    pub client: String,
    /// Check these history files (from `--client I/N` runs, same --keys)
    /// together, per seed, instead of running anything.
    #[arg(long, value_delimiter = ',')]
    pub histories: Vec<PathBuf>,
    #[arg(long)]
    pub history_out: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Head nodes (Ziegler et al. §4-5) on sim: a maintainer task on the
    /// last core runs passes with groups of N, then 2, then N+1 leaves, over
    /// and over until the clients are done, so heads are installed, refreshed
    /// and unlinked while scans cross them (fg, sherman*, nam-hybrid; 0: none).
    #[arg(long, default_value_t = 0)]
    pub head_nodes: usize,
    /// Set from `--index`.
    #[arg(skip = dm_tree::Techniques::FG_PLUS)]
    pub techniques: Techniques,
    /// Set from `--index` (nam-coarse, nam-hybrid).
    #[arg(skip)]
    pub design: Design,
}

#[derive(Clone, Debug)]
enum Kind {
    Get(Option<u64>),
    Insert(u64),
    Update(u64, bool),
    Remove(bool),
    Scan(u32, Vec<(u64, u64)>),
}

#[derive(Clone, Debug)]
struct Event {
    client: u32,
    key: u64,
    /// The end (exclusive) of the key range the client draws from: a scan
    /// that returns fewer than it asked for covers `key..hi` (DEX across
    /// processes: a scan stops where the process's partitions end).
    hi: u64,
    kind: Kind,
    call: u64,
    ret: u64,
}

/// The sequential specification of one key: a register holding `Option<value>`.
struct KeySpec;

impl Specification for KeySpec {
    type State = Option<u64>;
    type Operation = Kind;

    fn init() -> Self::State {
        None
    }

    fn apply(op: &Kind, s: &Option<u64>) -> (bool, Option<u64>) {
        match op {
            Kind::Get(r) => (r == s, *s),
            Kind::Insert(v) => (true, Some(*v)),
            Kind::Update(v, ok) => match s {
                Some(_) if *ok => (true, Some(*v)),
                None if !*ok => (true, None),
                _ => (false, *s),
            },
            Kind::Remove(ok) => (*ok == s.is_some(), None),
            Kind::Scan(..) => (true, *s),
        }
    }
}

fn key(k: u64) -> Vec<u8> {
    k.to_be_bytes().to_vec()
}

/// The NAM designs' partitions for a check: one more than there are MSs (so
/// one MS holds two), splitting the checked keys evenly.
fn nam_config(a: &Args, num_ms: u16) -> NamConfig {
    let keys: Vec<Vec<u8>> = (0..a.keys).map(key).collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
    NamConfig::from_sample(&refs, num_ms + 1)
}

/// Nanoseconds of `CLOCK_MONOTONIC`: the same clock in every process of a machine.
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// One client: `a.ops` random operations on keys drawn from `keys`, each
/// logged with its call and return times on `clock`. Stops at the first error.
async fn client<T: Kv>(
    t: Rc<T>,
    id: u32,
    seed: u64,
    a: Rc<Args>,
    keys: std::ops::Range<u64>,
    log: Rc<RefCell<Vec<Event>>>,
    clock: fn() -> u64,
) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(1_000_003) ^ id as u64);
    for i in 0..a.ops {
        let k = rng.gen_range(keys.clone());
        let value = ((id as u64 + 1) << 32) | (i as u64 + 1);
        let p = rng.gen_range(0..100);
        let call = clock();
        let kind = if p < 30 {
            t.insert(&key(k), value).await?;
            Kind::Insert(value)
        } else if p < 40 {
            Kind::Update(value, t.update(&key(k), value).await?)
        } else if p < 55 {
            Kind::Remove(t.remove(&key(k)).await?)
        } else if p < 90 {
            Kind::Get(t.get(&key(k)).await?)
        } else {
            let n = rng.gen_range(1..12u32);
            let r = t.scan(&key(k), n as usize).await?;
            Kind::Scan(
                n,
                r.into_iter()
                    .map(|(kk, v)| (u64::from_be_bytes(kk.try_into().unwrap()), v))
                    .collect(),
            )
        };
        log.borrow_mut().push(Event {
            client: id,
            key: k,
            hi: keys.end,
            kind,
            call,
            ret: clock(),
        });
    }
    Ok(())
}

/// The faults of `--faults` (sim only; default torn,delay).
fn parse_faults(a: &Args) -> Result<Faults> {
    let mut faults = Faults {
        tear: TearGranularity::Off,
        tear_window_ns: 300,
        ..Default::default()
    };
    let spec = a.faults.as_deref().unwrap_or("torn,delay");
    for f in spec.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        match f {
            "torn" => faults.tear = TearGranularity::Word,
            "torn-line" => faults.tear = TearGranularity::CacheLine,
            "delay" => {
                faults.delay_prob = 0.2;
                faults.delay_max_ns = 4_000;
            }
            other => bail!("unknown fault {other:?}: use torn, torn-line, delay"),
        }
    }
    Ok(faults)
}

fn run_seed(a: &Rc<Args>, seed: u64) -> Result<Vec<Event>> {
    let chunk = 1 << 20;
    let faults = parse_faults(a)?;
    let num_ms = a.ms_spec.count();
    // Lock tables are tiny so that unrelated nodes share lock slots often:
    // even seeds put 16-bit lanes in device memory (masked CAS), odd seeds
    // 64-bit words in a host-memory table.
    let lanes = seed.is_multiple_of(2);
    let cfg = SimConfig {
        num_ms,
        ms: MsConfig {
            region_bytes: 4096 + 8 * chunk,
            chunk_bytes: chunk,
            device_bytes: if lanes { 64 } else { 0 },
            cores: 1,
        },
        faults,
        seed,
        ..Default::default()
    };
    let tcfg = TreeConfig {
        node_bytes: a.node_bytes(),
        chunk_bytes: chunk,
        num_ms,
        techniques: a.techniques,
        lock_table: LockTableConfig {
            device: lanes,
            lanes16: lanes,
            slots: if lanes { 32 } else { 16 },
        },
        design: a.design,
        nam: nam_config(a, num_ms),
        ..Default::default()
    };
    let fabric = SimFabric::new(cfg);
    fabric.register_rpc(dm_tree::nam::RPC_NAM, dm_tree::nam::ms::handler());
    fabric.register_rpc(dm_tree::dex::RPC_DEX, dm_tree::dex::ms::handler());
    let mut rt = SimRuntime::new(fabric);
    let cores: Vec<_> = (0..a.cores.max(1))
        .map(|i| rt.add_core(i % 2, i / 2))
        .collect();
    if a.index == crate::ycsb_dex::DEX {
        return dex::run_seed(a, seed, rt, &cores, tcfg);
    }
    if a.index == crate::kv::DOLPHIN {
        return dolphin::run_seed(a, seed, rt, &cores, chunk, num_ms);
    }
    let log = Rc::new(RefCell::new(Vec::new()));
    if let Some(t) = radix(&a.index) {
        let scfg = smart_config(chunk, num_ms, t, tcfg.lock_table);
        rt.block_on(cores[0], SmartTree::create(scfg, 0, 0))
            .unwrap()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let per_cs = SmartPerCs::new();
        let trees: Vec<_> = (0..cores.len())
            .map(|i| Rc::new(per_cs.open(scfg, (i % 2) as u16, (i / 2) as u16, i % 2)))
            .collect();
        let hs = spawn_sim_clients(&mut rt, &cores, &trees, a, seed, &log);
        rt.run();
        return finish_seed(seed, &hs, &log);
    }
    rt.block_on(cores[0], FgTree::create(tcfg, 0, 0))
        .unwrap()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    // Per CS: an index cache of `--cache-nodes` leaf parents and a local lock table.
    let caches: Vec<_> = (0..2)
        .map(|_| {
            Arc::new(IndexCache::new(
                a.cache_nodes * a.node_bytes() as u64,
                a.node_bytes(),
            ))
        })
        .collect();
    let llts: Vec<_> = (0..2)
        .map(|_| FgTree::new_local_lock_table(&tcfg))
        .collect();
    let trees: Vec<_> = (0..cores.len())
        .map(|i| {
            let cs = i % 2;
            let mut t = FgTree::open(tcfg, cs as u16, (i / 2) as u16)
                .unwrap()
                .with_local_locks(llts[cs].clone());
            if a.cache_nodes > 0 {
                t = t.with_cache(caches[cs].clone());
            }
            Rc::new(t)
        })
        .collect();
    let hs = spawn_sim_clients(&mut rt, &cores, &trees, a, seed, &log);
    let maint = (a.head_nodes > 0).then(|| {
        let t = trees[cores.len() - 1].clone();
        let (n, log, total) = (a.head_nodes, log.clone(), (a.clients * a.ops) as usize);
        rt.spawn_on(cores[cores.len() - 1], async move {
            let mut changes = 0;
            for g in [n, 2, n + 1].into_iter().cycle() {
                if log.borrow().len() >= total {
                    break;
                }
                let p = t.maintain_head_nodes(g).await.map_err(|e| e.to_string())?;
                changes += p.installed + p.refreshed + p.removed;
                dm_runtime::yield_until(dm_runtime::now_ns() + 2_000).await;
            }
            Ok::<u64, String>(changes)
        })
    });
    rt.run();
    if let Some(m) = maint {
        match m.try_take() {
            Some(Ok(n)) => {
                HEAD_CHANGES.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }
            Some(Err(e)) => bail!("seed {seed}: head-node maintenance failed: {e}"),
            None => bail!("seed {seed}: head-node maintenance never finished"),
        }
    }
    finish_seed(seed, &hs, &log)
}

/// Head nodes installed, refreshed or unlinked by `--head-nodes` maintainers.
static HEAD_CHANGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The `--clients` clients of a sim seed, client `c` on core `c % cores`
/// with that core's tree handle, logging on the core's virtual clock.
fn spawn_sim_clients<T: Kv + 'static>(
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
            );
            rt.spawn_on(cores[i], f)
        })
        .collect()
}

/// SMART's per-CS state for the two CSs of a check (sim and real fabrics
/// alike): an ART cache (§4.3), roomy on the first CS and too small for the
/// tree on the second (misses and evictions), each going stale behind the
/// other's splits; read delegation and write combining (§4.2) with 16 lock
/// entries for the 48 keys, so same-key groups and hash conflicts both happen
/// (the second CS queues same-key writers without combining, E-HOCL);
/// the local lock tables of the ladder's lock-table locks (`dm_art::baseline`).
struct SmartPerCs {
    caches: [Arc<ArtCache>; 2],
    rdwcs: [Arc<Rdwc>; 2],
    llts: [Arc<dm_runtime::sync::LocalLockTable>; 2],
}

impl SmartPerCs {
    fn new() -> Self {
        SmartPerCs {
            caches: [
                Arc::new(ArtCache::new(64 << 20)),
                Arc::new(ArtCache::new(4 << 10)),
            ],
            rdwcs: [
                Arc::new(Rdwc::new(16, true, true)),
                // E-HOCL: same-key writers queue, each writes its own value.
                Arc::new(Rdwc::new(16, true, false).queue_writers(true)),
            ],
            llts: [
                SmartTree::new_local_lock_table(),
                SmartTree::new_local_lock_table(),
            ],
        }
    }

    /// The handle of core `core` of CS `cs`, the `k`-th (0 or 1) CS of the check.
    fn open(&self, scfg: SmartConfig, cs: u16, core: u16, k: usize) -> SmartTree {
        SmartTree::open(scfg, cs, core)
            .expect("the configuration was checked")
            .with_local_locks(self.llts[k].clone())
            .with_cache(self.caches[k].clone())
            .with_rdwc(self.rdwcs[k].clone())
    }
}

/// The radix tree of a check: rung `techniques`, its locks (if any) in
/// the check's deliberately tiny lock table.
fn smart_config(
    chunk_bytes: u64,
    num_ms: u16,
    techniques: dm_art::Techniques,
    lock_table: LockTableConfig,
) -> SmartConfig {
    SmartConfig {
        chunk_bytes,
        num_ms,
        techniques,
        lock_table,
        ..Default::default()
    }
}

/// The history of a finished sim seed, or why it has none.
fn finish_seed(
    seed: u64,
    hs: &[dm_runtime::JoinHandle<Result<(), String>>],
    log: &Rc<RefCell<Vec<Event>>>,
) -> Result<Vec<Event>> {
    if hs.iter().any(|h| !h.is_finished()) {
        bail!("seed {seed}: some clients never finished (deadlock or lost wake-up)");
    }
    if let Some(e) = hs.iter().find_map(|h| h.try_take().and_then(Result::err)) {
        bail!("seed {seed}: a client failed: {e}");
    }
    let v = log.borrow().clone();
    Ok(v)
}

/// The lock table of `seed` on a real fabric (see the module docs).
fn real_lock_table(caps: Caps, seed: u64) -> LockTableConfig {
    let device = seed.is_multiple_of(2) && caps.device_memory_bytes >= 128;
    LockTableConfig {
        device,
        lanes16: device && caps.masked_cas,
        slots: if device && caps.masked_cas { 32 } else { 16 },
    }
}

/// This process among the check's client processes (`--client I/N`: `ci`
/// of `cn`) and the seeds run before the current one (`round`, which
/// numbers the barriers).
#[derive(Clone, Copy, Debug)]
pub(super) struct Proc {
    pub ci: usize,
    pub cn: usize,
    pub round: u64,
}

impl Proc {
    /// Waits at barrier `k` (1: the index is created, 2: every client is
    /// done) of this seed for all `cn` processes.
    fn meet<Q: dm_verbs::Queues>(&self, ex: &mut Executor<Q>, k: u64, seed: u64) -> Result<()> {
        if self.cn > 1 {
            ex.block_on(barrier(self.cn as u64, 2 * self.round + k))
                .map_err(|e| anyhow!("seed {seed}: barrier: {e}"))?;
        }
        Ok(())
    }
}

/// One seed on a real fabric (see the module docs). `ex` runs on this
/// thread (creation, barriers); the clients run on `a.cores` threads.
fn run_seed_real<F: Fabric + Send + Sync>(
    fabric: &F,
    ex: &mut Executor<F::Queues>,
    a: &Args,
    seed: u64,
    p: Proc,
) -> Result<Vec<Event>> {
    let tcfg = TreeConfig {
        node_bytes: a.node_bytes(),
        chunk_bytes: fabric.ms_config().chunk_bytes,
        num_ms: fabric.num_ms(),
        techniques: a.techniques,
        lock_table: real_lock_table(fabric.caps(), seed),
        design: a.design,
        nam: nam_config(a, fabric.num_ms()),
        ..Default::default()
    };
    if a.index == crate::ycsb_dex::DEX {
        return dex::run_seed_real(fabric, ex, a, seed, p, tcfg);
    }
    if a.index == crate::kv::DOLPHIN {
        return dolphin::run_seed_real(fabric, ex, a, seed, p);
    }
    let rung = radix(&a.index);
    let scfg = smart_config(
        fabric.ms_config().chunk_bytes,
        fabric.num_ms(),
        rung.unwrap_or_default(),
        tcfg.lock_table,
    );
    if rung.is_some() {
        SmartTree::open(scfg, 0, 0).map_err(|e| anyhow!("{e}"))?;
    } else {
        FgTree::open(tcfg, 0, 0).map_err(|e| anyhow!("{e}"))?;
    }
    let create = |ex: &mut Executor<F::Queues>| {
        if rung.is_some() {
            ex.block_on(async move { SmartTree::create(scfg, 0, 0).await.map(|_| ()) })
                .map_err(|e| e.to_string())
        } else {
            ex.block_on(async move { FgTree::create(tcfg, 0, 0).await.map(|_| ()) })
                .map_err(|e| e.to_string())
        }
    };
    let caches: Vec<Arc<IndexCache>> = (0..2)
        .map(|_| {
            Arc::new(IndexCache::new(
                a.cache_nodes * a.node_bytes() as u64,
                a.node_bytes(),
            ))
        })
        .collect();
    let llts: Vec<_> = (0..2)
        .map(|_| FgTree::new_local_lock_table(&tcfg))
        .collect();
    let per_cs = SmartPerCs::new();
    run_clients(fabric, ex, a, seed, p, 0..a.keys, create, |cs, core| {
        let k = cs as usize % 2;
        if rung.is_some() {
            return AnyIndex::Smart(per_cs.open(scfg, cs, core, k));
        }
        let mut t = FgTree::open(tcfg, cs, core)
            .expect("checked above")
            .with_local_locks(llts[k].clone());
        if a.cache_nodes > 0 {
            t = t.with_cache(caches[k].clone());
        }
        AnyIndex::Tree(t)
    })
}

/// One seed's clients on a real fabric: process 0 runs `create`, all
/// processes meet, then process `ci` runs its clients (ids `ci * clients..`)
/// on `a.cores` threads over its two CSs (thread `i` is core `i / 2` of CS
/// `2ci + i % 2`), each thread's on the handle `open(cs, core)`, drawing
/// keys from `keys`; all meet again when their clients are done.
#[allow(clippy::too_many_arguments)]
fn run_clients<F, T>(
    fabric: &F,
    ex: &mut Executor<F::Queues>,
    a: &Args,
    seed: u64,
    p: Proc,
    keys: std::ops::Range<u64>,
    create: impl FnOnce(&mut Executor<F::Queues>) -> Result<(), String>,
    open: impl Fn(u16, u16) -> T + Send + Sync,
) -> Result<Vec<Event>>
where
    F: Fabric + Send + Sync,
    T: Kv + 'static,
{
    if p.ci == 0 {
        create(ex).map_err(|e| anyhow!("seed {seed}: creating the tree: {e}"))?;
    }
    p.meet(ex, 1, seed)?;
    let cs0 = (2 * p.ci) as u16;
    let cores: Vec<(u16, u16)> = (0..a.cores.max(1)).map(|i| (cs0 + i % 2, i / 2)).collect();
    let ncores = cores.len();
    let outs = dm_runtime::run_threads(fabric, &cores, true, |i| {
        let (cs, core) = cores[i];
        let c = CoreClients {
            i,
            ncores,
            ci: p.ci,
            seed,
            keys: keys.clone(),
        };
        let f: BoxedClients = Box::pin(c.run(Rc::new(open(cs, core)), Rc::new(a.clone())));
        f
    });
    p.meet(ex, 2, seed)?;
    let mut events = Vec::new();
    for o in outs {
        events.extend(o.map_err(|e| anyhow!("seed {seed}: a client failed: {e}"))?);
    }
    Ok(events)
}

type BoxedClients =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<Event>, String>>>>;

/// The clients of thread `i` (of `ncores`) of client process `ci`.
struct CoreClients {
    i: usize,
    ncores: usize,
    ci: usize,
    seed: u64,
    keys: std::ops::Range<u64>,
}

impl CoreClients {
    /// Runs them on one tree handle: their events, or the first error.
    async fn run<T: Kv + 'static>(self, t: Rc<T>, a: Rc<Args>) -> Result<Vec<Event>, String> {
        let log = Rc::new(RefCell::new(Vec::new()));
        let hs: Vec<_> = (0..a.clients)
            .filter(|c| *c as usize % self.ncores == self.i)
            .map(|c| {
                let id = self.ci as u32 * a.clients + c;
                dm_runtime::spawn(client(
                    t.clone(),
                    id,
                    self.seed,
                    a.clone(),
                    self.keys.clone(),
                    log.clone(),
                    monotonic_ns,
                ))
            })
            .collect();
        let mut err = None;
        for h in hs {
            if let Err(e) = h.await {
                err.get_or_insert(e.to_string());
            }
        }
        let events = log.take();
        match err {
            None => Ok(events),
            Some(e) => Err(e),
        }
    }
}

/// Checks one history; `Err(reason)` on a violation.
fn check_history(h: &[Event], keys: u64) -> Result<(), String> {
    // Per-key linearizability of get/insert/update/remove.
    let mut by_key: HashMap<u64, Vec<&Event>> = HashMap::new();
    for e in h.iter().filter(|e| !matches!(e.kind, Kind::Scan(..))) {
        by_key.entry(e.key).or_default().push(e);
    }
    for (k, evs) in &by_key {
        // (time, is_response, client, op): calls sort before responses at equal times.
        let mut acts: Vec<(u64, bool, u32, &Kind)> = Vec::new();
        for e in evs {
            acts.push((e.call, false, e.client, &e.kind));
            acts.push((e.ret, true, e.client, &e.kind));
        }
        acts.sort_by_key(|x| (x.0, x.1));
        let actions: Vec<(usize, Action<Kind>)> = acts
            .into_iter()
            .map(|(_, resp, c, op)| {
                (
                    c as usize,
                    if resp {
                        Action::Response(op.clone())
                    } else {
                        Action::Call(op.clone())
                    },
                )
            })
            .collect();
        if !WGLChecker::<KeySpec>::is_linearizable(History::from_actions(actions)) {
            return Err(format!(
                "key {k}: history of {} operations is not linearizable",
                evs.len()
            ));
        }
    }
    // Scans.
    let written: HashMap<(u64, u64), u64> = h
        .iter()
        .filter_map(|e| match e.kind {
            Kind::Insert(v) | Kind::Update(v, true) => Some(((e.key, v), e.call)),
            _ => None,
        })
        .collect();
    for s in h {
        let Kind::Scan(n, r) = &s.kind else { continue };
        if r.len() > *n as usize
            || r.windows(2).any(|w| w[0].0 >= w[1].0)
            || r.first().is_some_and(|x| x.0 < s.key)
        {
            return Err(format!(
                "scan from {} (client {}): unordered, too long or below its start: {r:?}",
                s.key, s.client
            ));
        }
        for (k, v) in r {
            if written.get(&(*k, *v)).is_none_or(|&call| call > s.ret) {
                return Err(format!("scan from {} returned {k} -> {v:#x}, which no operation wrote before it returned", s.key));
            }
        }
        let end = if r.len() < *n as usize {
            keys.min(s.hi)
        } else {
            r.last().map_or(keys, |x| x.0)
        };
        for k in s.key..end {
            if r.iter().any(|x| x.0 == k) {
                continue;
            }
            let present = h.iter().any(|i| {
                matches!(i.kind, Kind::Insert(_))
                    && i.key == k
                    && i.ret < s.call
                    && !h.iter().any(|x| {
                        matches!(x.kind, Kind::Remove(_))
                            && x.key == k
                            && x.ret >= i.call
                            && x.call <= s.ret
                    })
            });
            if present {
                return Err(format!(
                    "scan from {} (client {}) missed key {k}, present for the whole scan",
                    s.key, s.client
                ));
            }
        }
    }
    Ok(())
}

/// Writes `(seed, history)` pairs as JSON lines (see the module docs).
fn write_history(path: &PathBuf, hs: &[(u64, Vec<Event>)]) -> Result<()> {
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?,
    );
    for (e, seed) in hs.iter().flat_map(|(s, h)| h.iter().map(move |e| (e, *s))) {
        let (op, value, result) = match &e.kind {
            Kind::Get(r) => ("get", json!(null), json!(r)),
            Kind::Insert(v) => ("insert", json!(v), json!(null)),
            Kind::Update(v, ok) => ("update", json!(v), json!(ok)),
            Kind::Remove(ok) => ("remove", json!(null), json!(ok)),
            Kind::Scan(n, r) => ("scan", json!(n), json!(r)),
        };
        writeln!(
            f,
            "{}",
            json!({"seed": seed, "client": e.client, "op": op, "key": e.key, "hi": e.hi, "value": value, "call": e.call, "ret": e.ret, "result": result})
        )?;
    }
    f.flush()?;
    Ok(())
}

/// One line of [`write_history`] back: `(seed, event)`.
fn parse_event(v: &Value) -> Option<(u64, Event)> {
    let u = |k: &str| v.get(k).and_then(Value::as_u64);
    let value = v.get("value");
    let result = v.get("result")?;
    let kind = match v.get("op")?.as_str()? {
        "get" => Kind::Get(if result.is_null() {
            None
        } else {
            Some(result.as_u64()?)
        }),
        "insert" => Kind::Insert(value?.as_u64()?),
        "update" => Kind::Update(value?.as_u64()?, result.as_bool()?),
        "remove" => Kind::Remove(result.as_bool()?),
        "scan" => Kind::Scan(
            u32::try_from(value?.as_u64()?).ok()?,
            result
                .as_array()?
                .iter()
                .map(|p| Some((p.get(0)?.as_u64()?, p.get(1)?.as_u64()?)))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    };
    Some((
        u("seed")?,
        Event {
            client: u32::try_from(u("client")?).ok()?,
            key: u("key")?,
            hi: u("hi").unwrap_or(u64::MAX),
            kind,
            call: u("call")?,
            ret: u("ret")?,
        },
    ))
}

/// The union of history files, per seed. Errors: unreadable or malformed
/// lines, and a client id found in two files (the same `--client` twice).
fn read_histories(paths: &[PathBuf]) -> Result<BTreeMap<u64, Vec<Event>>> {
    let mut by_seed: BTreeMap<u64, Vec<Event>> = BTreeMap::new();
    let mut owner: HashMap<u32, usize> = HashMap::new();
    for (fi, p) in paths.iter().enumerate() {
        let text = std::fs::read_to_string(p)
            .with_context(|| format!("cannot read history {}", p.display()))?;
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let (seed, e) = serde_json::from_str::<Value>(line)
                .ok()
                .as_ref()
                .and_then(parse_event)
                .ok_or_else(|| anyhow!("{}:{}: not a history line", p.display(), n + 1))?;
            if *owner.entry(e.client).or_insert(fi) != fi {
                bail!(
                    "client {} appears in {} and {} (was one --client given twice?)",
                    e.client,
                    paths[owner[&e.client]].display(),
                    p.display()
                );
            }
            by_seed.entry(seed).or_default().push(e);
        }
    }
    if by_seed.is_empty() {
        bail!("the histories hold no operations");
    }
    Ok(by_seed)
}

/// Produces one seed's history (`round` = seeds done before).
type SeedRunner<'a> = Box<dyn FnMut(u64, u64) -> Result<Vec<Event>> + 'a>;

impl Args {
    fn node_bytes(&self) -> usize {
        self.node_bytes
            .unwrap_or(if self.techniques.two_level { 176 } else { 128 })
    }
}

pub fn run(a: Args) -> Result<()> {
    let (t, d, _) = parse_index(&a.index)?;
    let mut a = a;
    a.techniques = t;
    a.design = d;
    if !a.histories.is_empty() {
        return check_files(&a);
    }
    check_ms(&a.ms_spec, a.fabric == FabricArg::Rdma)?;
    let (ci, cn) = parse_client(&a.client)?;
    if cn > 1 && a.fabric != FabricArg::Rdma {
        bail!("--client I/N with N > 1 is for --fabric rdma (separate processes)");
    }
    if cn > 1 && a.history_out.is_none() {
        bail!("--client I/N with N > 1 needs --history-out (check the union with --histories)");
    }
    if a.fabric == FabricArg::Sim {
        parse_faults(&a)?;
    } else if a.faults.as_deref().is_some_and(|f| !f.trim().is_empty()) {
        bail!(
            "--faults are injected by the simulator; on {} nothing is injected",
            format!("{:?}", a.fabric).to_lowercase()
        );
    }
    if a.head_nodes > 0
        && (a.fabric != FabricArg::Sim
            || radix(&a.index).is_some()
            || a.index == crate::ycsb_dex::DEX
            || d == Design::Coarse)
    {
        bail!("--head-nodes is for fg, sherman* and nam-hybrid on --fabric sim");
    }
    let n_ms = a.ms_spec.count();
    if n_ms == 0 || a.cores == 0 || a.clients == 0 {
        bail!("--ms, --cores and --clients must be at least 1");
    }
    let a = Rc::new(a);
    #[cfg(feature = "rdma")]
    let rdma = match a.fabric {
        FabricArg::Rdma => {
            let f = crate::fabric_arg::connect(&a.ms_spec, &a.rdma)?;
            let q = f.try_open_queues((2 * ci) as u16, 0)?;
            let ex = Executor::new(q, f.num_ms(), ExecConfig::default());
            Some((f, ex))
        }
        _ => None,
    };
    #[cfg(feature = "rdma")]
    let rdma = RefCell::new(rdma);
    let mut produce: SeedRunner = match a.fabric {
        FabricArg::Sim => Box::new(|seed, _| run_seed(&a, seed)),
        FabricArg::Loopback => Box::new(|seed, round| {
            // A fresh cluster per seed (memory is not reused).
            let chunk = 1 << 20;
            let f = LoopbackFabric::new(LoopbackConfig {
                num_ms: n_ms,
                ms: MsConfig {
                    region_bytes: 4096 + (a.cores as u64 + 4) * chunk,
                    chunk_bytes: chunk,
                    ..Default::default()
                },
                ..Default::default()
            });
            f.register_rpc(dm_tree::nam::RPC_NAM, dm_tree::nam::ms::handler());
            f.register_rpc(dm_tree::dex::RPC_DEX, dm_tree::dex::ms::handler());
            let mut ex = Executor::new(f.open_queues(0, 0), n_ms, ExecConfig::default());
            run_seed_real(&f, &mut ex, &a, seed, Proc { ci, cn, round })
        }),
        #[cfg(feature = "rdma")]
        FabricArg::Rdma => Box::new(|seed, round| {
            let mut g = rdma.borrow_mut();
            let (f, ex) = g.as_mut().expect("connected above");
            run_seed_real(f, ex, &a, seed, Proc { ci, cn, round })
        }),
        #[cfg(not(feature = "rdma"))]
        FabricArg::Rdma => return Err(crate::fabric_arg::no_rdma()),
    };
    let mut ops = 0u64;
    let mut failed = None;
    let mut kept: Vec<(u64, Vec<Event>)> = Vec::new();
    let mut done = 0;
    for (round, seed) in (a.first_seed..a.first_seed + a.seeds).enumerate() {
        let h = produce(seed, round as u64)?;
        ops += h.len() as u64;
        done += 1;
        if cn > 1 {
            kept.push((seed, h));
            continue;
        }
        let r = check_history(&h, a.keys);
        kept = vec![(seed, h)];
        if let Err(why) = r {
            eprintln!("dm-bench check: seed {seed} FAILED: {why}");
            if a.fabric == FabricArg::Sim {
                eprintln!(
                    "  replay: dm-bench check --index {} --first-seed {seed} --seeds 1 --faults {} --history-out h.jsonl",
                    a.index,
                    a.faults.as_deref().unwrap_or("torn,delay")
                );
            } else {
                eprintln!("  (a real fabric's interleaving cannot be replayed; --history-out keeps the evidence)");
            }
            failed = Some((seed, why));
            break;
        }
    }
    drop(produce);
    if let Some(p) = &a.history_out {
        write_history(p, &kept)?;
    }
    let fabric = format!("{:?}", a.fabric).to_lowercase();
    let faults = match a.fabric {
        FabricArg::Sim => a.faults.clone().unwrap_or_else(|| "torn,delay".into()),
        _ => "none injected".into(),
    };
    if cn > 1 {
        println!(
            "dm-bench check: index {}, {fabric} fabric, client {ci}/{cn}: {done} seeds, {} clients x {} ops, {} keys: {ops} operations recorded in {}; check the union with --histories; {} locks taken over (own-tag ledger)",
            a.index,
            a.clients,
            a.ops,
            a.keys,
            a.history_out.as_ref().unwrap().display(),
            dm_tree::lock_takeovers()
        );
        write_json(
            a.json.as_deref(),
            &json!({"index": a.index, "fabric": fabric, "client": ci, "clients_processes": cn, "seeds": done, "operations": ops, "linearizable": null, "lock_takeovers": dm_tree::lock_takeovers()}),
        )?;
        return Ok(());
    }
    report(&a, &format!("{fabric} fabric"), &faults, done, ops, failed)
}

/// Prints the verdict and writes the JSON report (`source`: "sim fabric",
/// "2 histories (16 clients)"); an error if a seed failed.
fn report(
    a: &Args,
    source: &str,
    faults: &str,
    seeds: u64,
    ops: u64,
    failed: Option<(u64, String)>,
) -> Result<()> {
    // Histories read back carry their own shape (`source` names it).
    let shape = if a.histories.is_empty() {
        format!("{} clients x {} ops, ", a.clients, a.ops)
    } else {
        String::new()
    };
    let heads = HEAD_CHANGES.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "dm-bench check: index {}, {source}, {seeds} seeds, {shape}{} keys, faults {faults}: {ops} operations, {}{}{}",
        a.index,
        a.keys,
        if failed.is_some() { "NOT linearizable" } else { "linearizable" },
        if a.histories.is_empty() {
            format!("; {} locks taken over (own-tag ledger)", dm_tree::lock_takeovers())
        } else {
            String::new()
        },
        if a.head_nodes > 0 {
            format!("; {heads} head nodes installed, refreshed or unlinked")
        } else {
            String::new()
        }
    );
    write_json(
        a.json.as_deref(),
        &json!({"index": a.index, "source": source, "seeds": seeds, "operations": ops, "linearizable": failed.is_none(), "failed_seed": failed.as_ref().map(|f| f.0), "reason": failed.as_ref().map(|f| f.1.clone()), "lock_takeovers": dm_tree::lock_takeovers(), "head_node_changes": heads}),
    )?;
    if let Some((seed, why)) = failed {
        bail!("seed {seed}: {why}");
    }
    Ok(())
}

/// `--histories`: the union of the files, checked per seed.
fn check_files(a: &Args) -> Result<()> {
    let by_seed = read_histories(&a.histories)?;
    let (mut ops, mut failed, mut seeds) = (0u64, None, 0);
    let mut clients = std::collections::HashSet::new();
    for (seed, h) in &by_seed {
        ops += h.len() as u64;
        seeds += 1;
        clients.extend(h.iter().map(|e| e.client));
        if let Err(why) = check_history(h, a.keys) {
            eprintln!("dm-bench check: seed {seed} FAILED: {why}");
            failed = Some((*seed, why));
            break;
        }
    }
    let what = format!(
        "{} history files ({} clients)",
        a.histories.len(),
        clients.len()
    );
    report(a, &what, "as recorded", seeds, ops, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(client: u32, key: u64, kind: Kind, call: u64, ret: u64) -> Event {
        Event {
            client,
            key,
            hi: u64::MAX,
            kind,
            call,
            ret,
        }
    }

    #[test]
    fn checker_accepts_linearizable_and_rejects_stale_reads() {
        // insert(1) then, strictly later, get -> None: not linearizable.
        let bad = vec![
            ev(0, 5, Kind::Insert(1), 0, 10),
            ev(1, 5, Kind::Get(None), 20, 30),
        ];
        assert!(check_history(&bad, 10).is_err());
        // Overlapping: get may see either.
        let ok = vec![
            ev(0, 5, Kind::Insert(1), 0, 10),
            ev(1, 5, Kind::Get(None), 5, 30),
        ];
        assert!(check_history(&ok, 10).is_ok());
        // A lost update: two inserts, later a get of the first one's value.
        let lost = vec![
            ev(0, 5, Kind::Insert(1), 0, 10),
            ev(1, 5, Kind::Insert(2), 20, 30),
            ev(2, 5, Kind::Get(Some(1)), 40, 50),
        ];
        assert!(check_history(&lost, 10).is_err());
        // remove reporting success on an absent key.
        let bad_rm = vec![ev(0, 5, Kind::Remove(true), 0, 10)];
        assert!(check_history(&bad_rm, 10).is_err());
    }

    #[test]
    fn checker_rejects_bad_scans() {
        let base = vec![ev(0, 3, Kind::Insert(7), 0, 10)];
        let mut missed = base.clone();
        missed.push(ev(1, 0, Kind::Scan(5, vec![]), 20, 30));
        assert!(check_history(&missed, 10)
            .unwrap_err()
            .contains("missed key 3"));
        let mut phantom = base.clone();
        phantom.push(ev(1, 0, Kind::Scan(5, vec![(3, 7), (4, 9)]), 20, 30));
        assert!(check_history(&phantom, 10).is_err());
        let mut fine = base.clone();
        fine.push(ev(1, 0, Kind::Scan(5, vec![(3, 7)]), 20, 30));
        assert!(check_history(&fine, 10).is_ok());
        // A short scan covers its client's key range only (`hi`): key 3 lies
        // beyond a range ending at 3, but not beyond one ending at 4.
        let short = |hi| {
            let mut h = base.clone();
            h.push(Event {
                hi,
                ..ev(1, 0, Kind::Scan(5, vec![]), 20, 30)
            });
            check_history(&h, 10)
        };
        assert!(short(3).is_ok());
        assert!(short(4).unwrap_err().contains("missed key 3"));
    }
}
