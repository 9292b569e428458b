//! What to run, from the flags: the cluster's shape checked (`--ms`,
//! `--client I/N`, `--baseline` only on wall-clock fabrics), and the index
//! resolved ([`Choice`]): the B+tree techniques and design or the radix rung,
//! SMART's switched-off techniques (SMART §5.3.1), and the flags each index
//! family rejects.

use crate::fabric_arg::{check_ms, parse_client, MsArg};
use crate::kv::{parse_index, radix_only, SMART};
use crate::limits::{self, at_most, fits_memory};
use crate::verbs_bench::FabricArg;
use crate::ycsb::dex::DEX;
use crate::ycsb::keys::MAX_KEY_BYTES;
use crate::ycsb::plan::key_bytes;
use crate::ycsb::Args;
use anyhow::{bail, Result};
use dm_tree::Design;

/// The index a run builds, as the flags select it.
pub(super) struct Choice {
    /// This process is client `ci` of `cn` (`--client I/N`).
    pub ci: usize,
    pub cn: usize,
    /// The B+tree family's techniques and design (FG+ and the fine-grained
    /// design for the others, which do not use them).
    pub techniques: dm_tree::Techniques,
    pub design: Design,
    /// The radix family's techniques (`--index` rung less `--smart-off`).
    pub art_techniques: dm_art::Techniques,
    /// The radix family (SMART's ladder), DEX, Dolphin.
    pub smart: bool,
    pub dex: bool,
    pub dolphin: bool,
}

/// Checks the cluster's flags (a traced operation, `after`, runs on sim
/// only) and sets `a.ms`; returns `(I, N)` of `--client I/N`.
pub(super) fn check_cluster(a: &mut Args, traced: bool) -> Result<(usize, usize)> {
    if traced && a.fabric != FabricArg::Sim {
        bail!("a traced operation runs on --fabric sim only");
    }
    a.ms = a.ms_spec.count();
    check_ms(&a.ms_spec, a.fabric == FabricArg::Rdma)?;
    a.rdma.check(a.fabric == FabricArg::Rdma)?;
    let (ci, cn) = parse_client(&a.client)?;
    a.perftest.check(a.fabric == FabricArg::Sim)?;
    if a.fabric != FabricArg::Sim {
        if let Some(f) = a.net.first_set() {
            bail!("{f} sets the sim fabric's network model: on --fabric loopback and rdma the real threads and verbs take what they take");
        }
        if a.tear != crate::verbs_bench::TearArg::Word {
            bail!("--tear sets the sim fabric's torn READs: on --fabric loopback and rdma READs tear as the hardware tears them");
        }
    }
    if cn > 1 && a.fabric != FabricArg::Rdma {
        bail!("--client I/N with N > 1 is for --fabric rdma (separate processes)");
    }
    if !a.baseline.is_empty() && a.fabric == FabricArg::Sim {
        bail!("--baseline compares real CPU time and wall-clock throughput: use --fabric loopback (sim's time is virtual)");
    }
    if a.lease_ms.is_some() && a.fabric == FabricArg::Sim {
        bail!("--lease-ms is for the wall-clock fabrics; on sim, `check --faults crash` kills CSs");
    }
    if let Some(ms) = a.lease_ms {
        let lease = crate::ycsb::measure::peers::lease(ms)?;
        if let Some(w) = lease.oversubscribed(a.cs as usize * a.threads as usize) {
            tracing::warn!("{w}");
        }
    }
    if a.rejoin && (a.lease_ms.is_none() || cn < 2) {
        bail!("--rejoin replaces a dead client process: it needs --lease-ms and --client I/N with N >= 2");
    }
    if !a.baseline.is_empty() && cn > 1 {
        bail!("--baseline runs the whole operation stream in one process: use --client 0/1");
    }
    Ok((ci, cn))
}

/// Bytes a loaded key takes, plus twice its key bytes: the plan's copy and
/// the index's share of nodes on the MSs (measured before the plan lost
/// its map of values: about 320 B for fg and 560 B for smart with 8-byte
/// keys), for the radix family and Dolphin.
const KEY_BYTES: u128 = 640;
/// [`KEY_BYTES`] for the B+trees and DEX, whose nodes hold keys densely:
/// measured 102 B a key for sherman with `--load bulk` at 8 million keys
/// (peak RSS of the whole run; docs/experiments/allocs.md), doubled.
const BTREE_KEY_BYTES: u128 = 240;
/// [`KEY_BYTES`] or [`BTREE_KEY_BYTES`] for `--index`.
fn per_key(index: &str) -> u128 {
    match dm_index::IndexKind::named(index).map(|k| k.family()) {
        Ok(dm_index::Family::BTree | dm_index::Family::Dex) => BTREE_KEY_BYTES,
        _ => KEY_BYTES,
    }
}

/// Bytes a run operation takes in the plan, plus twice its key bytes
/// (measured: about 70 B with 8-byte keys).
const OP_BYTES: u128 = 160;
/// Bytes a coroutine takes (measured: about 26 KiB).
const CORO_BYTES: u128 = 32 << 10;
/// Bytes an entry of SMART's read-delegation / write-combining table takes.
const RDWC_ENTRY_BYTES: u128 = 256;

/// Checks the sizes the flags ask for against fixed caps and this
/// machine's memory ([`crate::limits`]) before anything is allocated:
/// memory servers, cores and coroutines, operations, SMART's tables, the
/// cache, and the keys and operations of the plan (generated workloads;
/// a trace's files bound their own).
pub(crate) fn check_sizes(a: &Args) -> Result<()> {
    let ms = match a.ms_spec {
        MsArg::Count(n) if a.fabric != FabricArg::Rdma => Some(n as u64),
        _ => None,
    };
    let cores = a.cs as u128 * a.threads as u128;
    limits::check_shape(ms, cores, cores * a.coros as u128, CORO_BYTES)?;
    at_most("--ops", a.ops, limits::MAX_COUNT, "operations of one run")?;
    at_most(
        "--warmup",
        a.warmup,
        limits::MAX_COUNT,
        "warm-up operations of one run",
    )?;
    limits::check_node_bytes(a.node_bytes as u64)?;
    if a.rdwc_entries == 0 {
        bail!("--rdwc-entries 0: at least 1 (lock entries per CS; the paper finds 128 enough)");
    }
    at_most(
        "--rdwc-entries",
        a.rdwc_entries as u64,
        limits::MAX_RDWC_ENTRIES,
        "lock entries per CS, allocated up front; the paper finds 128 enough",
    )?;
    at_most(
        "--cache-mb",
        a.cache_mb,
        limits::MAX_CACHE_MB,
        "an index cache of at most 1 TiB per CS",
    )?;
    fits_memory(
        &format!(
            "SMART's read-delegation tables (--cs {} x --rdwc-entries {})",
            a.cs, a.rdwc_entries
        ),
        a.cs as u128 * a.rdwc_entries as u128 * RDWC_ENTRY_BYTES,
        "take fewer entries",
    )?;
    if a.trace_dir.is_none() {
        // Longer keys are refused later (at most 255 bytes).
        let kb = key_bytes(a).min(1 << 10) as u128;
        let (what, fix) = match a.warmup {
            0 => (
                format!(
                    "the load's keys and the run's operations (--keys {}, --ops {})",
                    a.keys, a.ops
                ),
                "take fewer --keys or --ops",
            ),
            w => (
                format!(
                    "the load's keys and the run's and warm-up's operations \
                     (--keys {}, --ops {}, --warmup {w})",
                    a.keys, a.ops
                ),
                "take fewer --keys, --ops or --warmup",
            ),
        };
        fits_memory(
            &what,
            a.keys as u128 * (per_key(&a.index) + 2 * kb)
                + (a.ops as u128 + a.warmup as u128) * (OP_BYTES + 2 * kb),
            fix,
        )?;
    }
    Ok(())
}

/// Longest key of the B+tree family and DEX (`dm_tree::TreeConfig::key_bytes`).
const TREE_MAX_KEY: usize = 32;
/// Longest key of the radix family (`dm_art::KeyCodec`: SMART's paths,
/// `dm_art::SmartTree::open`).
const ART_MAX_KEY: usize = MAX_KEY_BYTES;

/// `--key-bytes` (or its default) against what the index takes: 1..=32
/// bytes for the B+trees and DEX, 1..=255 for the radix family (Dolphin's
/// 8 bytes are checked on their own).
fn check_key_bytes(a: &Args, radix: bool) -> Result<()> {
    let (max, family) = if radix {
        (ART_MAX_KEY, "the radix family's limit")
    } else {
        (TREE_MAX_KEY, "the limit of the B+tree family and dex")
    };
    let n = key_bytes(a);
    if n == 0 || n > max {
        bail!(
            "--key-bytes {n}: --index {} takes keys of 1 to {max} bytes ({family})",
            a.index
        );
    }
    Ok(())
}

/// Resolves `--index` and the technique flags into a [`Choice`] and checks
/// the flags against the index (`--smart-off` without rd and wc for all
/// but SMART; no CS cache for the NAM designs).
pub(super) fn choose_index(a: &mut Args, (ci, cn): (usize, usize)) -> Result<Choice> {
    let (mut techniques, design, rung) = parse_index(&a.index)?;
    if let Some(b) = a.lock_backoff {
        techniques.locks.lock_backoff = b;
    }
    techniques.locks.unlock_faa = a.unlock_faa;
    let smart = rung.is_some();
    for t in &a.smart_off {
        if !["lfi", "ipl", "rear", "rd", "wc", "cache"].contains(&t.as_str()) {
            bail!("--smart-off takes lfi, ipl, rear, rd, wc and cache, got {t:?}");
        }
    }
    crate::kv::btree_switches(&a.index, &a.node_read, &a.sherman_cache)?;
    radix_only("--art-absorb", a.art_absorb, smart)?;
    radix_only("--smart-drop-stale-hints", a.smart_drop_stale_hints, smart)?;
    radix_only("--smart-fifo-ns", a.smart_fifo_ns > 0, smart)?;
    if a.smart_fifo_ns > 0 {
        if a.fabric != FabricArg::Sim {
            bail!("--smart-fifo-ns models a CPU cost on the sim fabric only: on loopback and rdma the cache's real lock costs what it costs");
        }
        if a.smart_fifo_ns > 1_000_000_000 {
            bail!(
                "--smart-fifo-ns {} is over 1 s per admission",
                a.smart_fifo_ns
            );
        }
    }
    crate::kv::dolphin_update(&a.dolphin_update, &a.index, a.lease_ms.is_some())?;
    radix_only("--smart-off", !a.smart_off.is_empty(), smart)?;
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
    // Absorbing needs the table's write queue: write combining off, and
    // leaves not under lock-table locks (those queue in HOCL's own table).
    if a.art_absorb {
        let why = if !a.smart_off.iter().any(|t| t == "wc") {
            Some("write combining is on")
        } else if art_techniques.in_place_leaf && !art_techniques.rear_lock {
            Some("its leaves' writers queue in HOCL's lock table")
        } else {
            None
        };
        if let Some(why) = why {
            bail!(
                "--art-absorb needs same-key writers queued without write combining \
                 (--index art or lockfree-art, or smart with --smart-off wc): \
                 with --index {}, {why}",
                a.index
            );
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
        if a.cache_mb != 0 && a.cache_mb != crate::ycsb::args::CACHE_MB {
            bail!(
                "--cache-mb {}: the NAM designs run without a CS cache (Ziegler et al. App. A.4); \
                 --index {} takes 0 only",
                a.cache_mb,
                a.index
            );
        }
        a.cache_mb = 0;
        let n = a.nam_skew.len();
        if n > dm_tree::nam::MAX_PARTITIONS || a.nam_skew.contains(&0) {
            bail!(
                "--nam-skew takes 1 to {} shares, each at least 1: got {n} ({:?})",
                dm_tree::nam::MAX_PARTITIONS,
                a.nam_skew
            );
        }
    } else if !a.nam_skew.is_empty() {
        bail!("--nam-skew is for --index nam-coarse and nam-hybrid");
    } else if a.nam_node_ns != crate::ycsb::args::NAM_NODE_NS {
        bail!("--nam-node-ns is for --index nam-coarse and nam-hybrid");
    }
    if !smart && a.rdwc_entries != crate::ycsb::args::RDWC_ENTRIES {
        bail!("--rdwc-entries is for the radix family's read delegation and write combining table (--index smart, art, ...)");
    }
    if a.ms_cores == 0 {
        bail!("--ms-cores must be at least 1");
    }
    let dex = a.index == DEX;
    let dolphin = a.index == crate::kv::DOLPHIN;
    if dolphin && a.load == "bulk" {
        bail!("--load bulk is for the B+tree family; --index dolphin loads by insert");
    }
    if dolphin && key_bytes(a) != 8 {
        bail!("--index dolphin takes 8-byte integer keys (Dolphin \u{a7}III-A)");
    }
    check_key_bytes(a, smart)?;
    if !dex {
        if let Some(f) = a.dex.first_set() {
            bail!("{f} is for --index dex");
        }
    }
    let node_locks = !smart && !dolphin;
    if !node_locks && (a.lock_backoff.is_some() || a.unlock_faa) {
        bail!(
            "--lock-backoff and --unlock-faa are for the B+tree family's node locks, \
             not --index {}",
            a.index
        );
    }
    if a.unlock_faa && techniques.locks.onchip_lock {
        bail!(
            "--unlock-faa is for locks in the node (fg, sherman-combine): --index {} \
             releases its lock-table locks by masked CAS",
            a.index
        );
    }
    // A flag that changes nothing would read as a result about lock
    // collisions that was never measured.
    let lock_table = if smart {
        art_techniques.needs_locks()
    } else {
        !dolphin && techniques.locks.onchip_lock
    };
    if a.lock_slots.is_some() && !lock_table {
        bail!(
            "--lock-slots is for the indexes whose locks are in a global lock table \
             (sherman-onchip, sherman-hier, sherman; the radix rungs art and smart-inplace, \
             and smart with --smart-off rear): --index {} takes its locks elsewhere",
            a.index
        );
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
    Ok(Choice {
        ci,
        cn,
        techniques,
        design,
        art_techniques,
        smart,
        dex,
        dolphin,
    })
}
