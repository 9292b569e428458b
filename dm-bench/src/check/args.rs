//! The arguments of `dm-bench check` ([`Args`]), their checks before
//! anything runs ([`Args::validate`]) and the simulator faults they ask for
//! ([`parse_faults`]: torn READs at 8- or 64-byte granularity, delayed
//! completions).

use crate::fabric_arg::{check_ms, parse_client, parse_ms, MsArg, RdmaArgs};
use crate::kv::radix;
use crate::limits::{self, at_most};
use crate::verbs_bench::FabricArg;
use anyhow::{bail, Result};
use dm_tree::{Design, Techniques};
use dm_verbs::sim::{Faults, TearGranularity};
use std::path::PathBuf;

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// fg, sherman-combine, sherman-onchip, sherman-hier, sherman, smart.
    #[arg(long, default_value = "fg")]
    pub index: String,
    /// Number of seeds (independent runs), at least 1.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub seeds: u64,
    /// The first seed; the last, --first-seed + --seeds - 1, must be at most
    /// 18446744073709551615 (u64::MAX).
    #[arg(long, default_value_t = 0)]
    pub first_seed: u64,
    /// Concurrent clients (tasks), spread over `--cores` cores on 2 CSs
    /// (per process with `--client`).
    #[arg(long, default_value_t = 16)]
    pub clients: u32,
    /// Cores: simulated on sim, OS threads on loopback and rdma.
    #[arg(long, default_value_t = 4)]
    pub cores: u16,
    /// Operations per client, at least 1 (a history of none is
    /// linearizable and checks nothing).
    #[arg(long, default_value_t = 150, value_parser = clap::value_parser!(u32).range(1..))]
    pub ops: u32,
    /// Key space (keys 0..N as 8-byte big-endian), 1 to 2^32 (with --index
    /// dex and --client I/N: at least N, a share for each process).
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
    /// torn-line (64-byte), torn-half (4-byte pieces inside the words of
    /// READs longer than 8 bytes, as soft-RoCE in a TCG guest with ERMS:
    /// docs/rdma.md; the radix family fails under it), delay, unreported (5% of the CASes that take
    /// their word report a failure, as soft-RoCE did: docs/rdma.md), replay
    /// (5% of the atomics that change their word run a second time, unreported,
    /// up to 20 µs later, as soft-RoCE's re-executed duplicates), redo (5%
    /// of the CASes that take their word run a second time up to 20 µs
    /// later and report that execution's result: a duplicate whose first
    /// response was lost), writeback (5% of the CASes that fail store the
    /// word they read up to 5 µs later, undoing a WRITE that landed
    /// meanwhile, as soft-RoCE's 6.1 CAS does: docs/rdma.md), crash
    /// (one of the two CSs dies at a random verb boundary and restarts with
    /// a new incarnation; its locks are taken over after the lease).
    /// Default on sim: torn,delay. Sim only.
    #[arg(long)]
    pub faults: Option<String>,
    /// Real fabrics: this process's CSs join the membership table with a
    /// lease of this many ms for each seed (new incarnations, a heartbeat
    /// thread every tenth of it), so their lock words name them and a lock
    /// word left naming a live core is released when a waiter asks
    /// (`dm_runtime::lock::ask`, issue 33). For the indexes whose locks
    /// recover; refused on sim (`--faults crash` runs leases there).
    /// From 10 (the library's `LeaseConfig::REAL`) to 60,000: shorter
    /// leases let the OS's time slices make live CSs miss them.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub lease_ms: Option<u64>,
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
    /// States the linearizability search may memoise per key (each a set of
    /// linearized operations and a value; the memo is also capped at 1 GiB).
    /// Past it the check stops with an error: the history is not proven
    /// linearizable (hot keys with many clients need the most).
    #[arg(long, default_value_t = 4_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub check_budget: u64,
    /// Dolphin's update as in `ycsb --dolphin-update`: `cas` (default,
    /// sound), or the paper's `paper` and the authors' `authors` (issue
    /// 34). Both pass on sim, whose WRITEs land whole and whose links
    /// deliver in order: what they assume is broken only on real NICs
    /// (`dm_art::DolphinUpdate`).
    #[arg(long, default_value = "cas", value_parser = ["cas", "paper", "authors"])]
    pub dolphin_update: String,
    /// Radix family: the CSs that queue same-key writers (odd ones) absorb
    /// them, as `ycsb --art-absorb` (`dm_art::Rdwc::absorb_writers`).
    #[arg(long)]
    pub art_absorb: bool,
    /// B+trees: the index cache's use as `ycsb --sherman-cache`: `ours`
    /// (default) or the published Sherman code's `authors`
    /// (`dm_tree::ShermanCache`).
    #[arg(long, default_value = "ours", value_parser = ["ours", "authors"])]
    pub sherman_cache: String,
    /// B+trees: how an unlocked node is READ, as `ycsb --node-read`:
    /// `checksum` (default) or DEX's Sherman baseline's `optimistic` read
    /// (`dm_tree::NodeRead`; its writers READ the locked node once and the
    /// version before a release that does not hand over).
    #[arg(long, default_value = "checksum", value_parser = ["checksum", "optimistic"])]
    pub node_read: String,
    /// Set from `--index`.
    #[arg(skip = dm_tree::Techniques::FG_PLUS)]
    pub techniques: Techniques,
    /// Set from `--index` (nam-coarse, nam-hybrid).
    #[arg(skip)]
    pub design: Design,
}

impl Args {
    /// The seeds to run, `--first-seed` to `--first-seed + --seeds - 1`.
    /// Errors: no seed, or the last beyond u64::MAX.
    pub(super) fn seed_range(&self) -> Result<std::ops::RangeInclusive<u64>> {
        let (first, n) = (self.first_seed, self.seeds);
        if n == 0 {
            bail!("--seeds 0: nothing to check; run at least 1 seed");
        }
        match first.checked_add(n - 1) {
            Some(last) => Ok(first..=last),
            None => bail!(
                "--first-seed {first} with --seeds {n} runs past the last seed, {}: \
                 at most {} seeds start at {first}",
                u64::MAX,
                u64::MAX - first + 1
            ),
        }
    }

    /// Whether `--faults` asks for a CS crash ([`super::crash`]).
    pub(super) fn crash(&self) -> bool {
        self.faults
            .as_deref()
            .is_some_and(|f| f.split(',').any(|x| x.trim() == "crash"))
    }

    /// Whether the CSs join the membership table (leases): `--faults
    /// crash` on sim, `--lease-ms` elsewhere.
    pub(super) fn leases(&self) -> bool {
        self.crash() || self.lease_ms.is_some()
    }

    /// The checker's budget per key (`--check-budget`).
    pub(super) fn budget(&self) -> super::wgl::Budget {
        super::wgl::Budget {
            states: self.check_budget,
            bytes: super::wgl::MEMO_BYTES,
        }
    }

    pub(super) fn node_bytes(&self) -> usize {
        self.node_bytes
            .unwrap_or(if self.techniques.two_level { 176 } else { 128 })
    }

    /// The checks of a run (not of `--histories`), after `--index` set
    /// `techniques` and `design`: this process's `--client` `(I, N)`.
    pub(super) fn validate(&self) -> Result<(usize, usize)> {
        let a = self;
        check_ms(&a.ms_spec, a.fabric == FabricArg::Rdma)?;
        a.rdma.check(a.fabric == FabricArg::Rdma)?;
        let (ci, cn) = parse_client(&a.client)?;
        if cn > 1 && a.fabric != FabricArg::Rdma {
            bail!("--client I/N with N > 1 is for --fabric rdma (separate processes)");
        }
        if cn > 1 && a.history_out.is_none() {
            bail!("--client I/N with N > 1 needs --history-out (check the union with --histories)");
        }
        if a.fabric == FabricArg::Sim {
            parse_faults(a)?;
        } else if a.faults.as_deref().is_some_and(|f| !f.trim().is_empty()) {
            bail!(
                "--faults are injected by the simulator; on {} nothing is injected",
                format!("{:?}", a.fabric).to_lowercase()
            );
        }
        if a.head_nodes > 0
            && (a.fabric != FabricArg::Sim
                || radix(&a.index).is_some()
                || a.index == crate::ycsb::dex::DEX
                || a.design == Design::Coarse)
        {
            bail!("--head-nodes is for fg, sherman* and nam-hybrid on --fabric sim");
        }
        crate::kv::dolphin_update(&a.dolphin_update, &a.index, a.leases())?;
        crate::kv::btree_switches(&a.index, &a.node_read, &a.sherman_cache)?;
        crate::kv::radix_only("--art-absorb", a.art_absorb, radix(&a.index).is_some())?;
        if a.crash() && a.cores < 2 {
            bail!("--faults crash kills one of the two CSs: take --cores 2 or more");
        }
        if let Some(ms) = a.lease_ms {
            if a.fabric == FabricArg::Sim {
                bail!("--lease-ms is for real fabrics; on sim, --faults crash runs leases");
            }
            let lease = crate::ycsb::measure::peers::lease(ms)?;
            if let Some(w) = lease.oversubscribed(self.cores as usize) {
                tracing::warn!("{w}");
            }
        }
        let n_ms = a.ms_spec.count();
        if n_ms == 0 || a.cores == 0 || a.clients == 0 {
            bail!("--ms, --cores and --clients must be at least 1");
        }
        a.check_sizes()?;
        if a.keys == 0 {
            bail!("--keys 0: the clients draw keys from 0..--keys; take at least 1");
        }
        if a.index == crate::ycsb::dex::DEX && a.keys < cn as u64 {
            bail!(
                "--keys {}: with --index dex each of the {cn} processes draws from its own \
                 share of the keys; take at least {cn}",
                a.keys
            );
        }
        self.seed_range()?;
        Ok((ci, cn))
    }
}

/// Keys of a check's key space at most: 2^32 (a check wants conflicts, and
/// the key space's splits are computed in 64 bits).
pub(super) const MAX_KEYS: u64 = 1 << 32;
/// Index cache nodes per CS at most (a check's cache is meant to be tiny).
const MAX_CACHE_NODES: u64 = 1 << 24;
/// Bytes a client takes (its task), and an operation (its event in the
/// history, the checker's copy): measured about 2.7 KiB and 190 B.
const CLIENT_BYTES: u128 = 8 << 10;
const OP_BYTES: u128 = 384;

impl Args {
    /// The sizes of a run against fixed caps and this machine's memory
    /// ([`crate::limits`]), before anything is allocated.
    fn check_sizes(&self) -> Result<()> {
        let a = self;
        let ms = match a.ms_spec {
            MsArg::Count(n) if a.fabric != FabricArg::Rdma => Some(n as u64),
            _ => None,
        };
        let clients = a.clients as u128;
        limits::check_shape(ms, a.cores as u128, clients, CLIENT_BYTES)?;
        at_most(
            "--keys",
            a.keys,
            MAX_KEYS,
            "a check's key space; each key needs operations to conflict",
        )?;
        at_most("--seeds", a.seeds, limits::MAX_COUNT, "seeds of one run")?;
        if let Some(n) = a.node_bytes {
            limits::check_node_bytes(n as u64)?;
        }
        at_most(
            "--cache-nodes",
            a.cache_nodes,
            MAX_CACHE_NODES,
            "a check's index cache is tiny on purpose",
        )?;
        limits::fits_memory(
            &format!("the history of --clients {} x --ops {}", a.clients, a.ops),
            clients * a.ops as u128 * OP_BYTES,
            "take fewer --clients or --ops",
        )
    }
}

/// The faults of `--faults` (sim only; default torn,delay).
pub(super) fn parse_faults(a: &Args) -> Result<Faults> {
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
            "torn-half" => faults.tear = TearGranularity::HalfWord,
            "delay" => {
                faults.delay_prob = 0.2;
                faults.delay_max_ns = 4_000;
            }
            // soft-RoCE's unreported CAS success (docs/rdma.md): 5% of the
            // CASes that take their word report a failure.
            "unreported" => faults.unreported_cas_prob = 0.05,
            // soft-RoCE's duplicate atomics executed twice (docs/rdma.md).
            "replay" => {
                faults.replay_prob = 0.05;
                faults.replay_max_ns = 20_000;
            }
            // soft-RoCE's duplicate of a CAS whose response was lost: run
            // again up to 20 µs later, and its result is the one reported.
            "redo" => {
                faults.redo_cas_prob = 0.05;
                faults.replay_max_ns = faults.replay_max_ns.max(20_000);
            }
            // soft-RoCE's failed CAS that writes its word back, undoing a
            // WRITE that landed in between (docs/rdma.md): 5% of the
            // failed CASes, their store up to 5 µs later.
            "writeback" => {
                faults.cas_writeback_prob = 0.05;
                faults.writeback_window_ns = 5_000;
            }
            // Not the fabric's: `super::crash` kills a CS.
            "crash" => {}
            other => {
                bail!("unknown fault {other:?}: use torn, torn-line, torn-half, delay, unreported, replay, redo, writeback, crash")
            }
        }
    }
    Ok(faults)
}
