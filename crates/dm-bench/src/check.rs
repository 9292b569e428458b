//! `dm-bench check`: concurrent random operations against an index on `sim`
//! with faults (torn READs, delayed completions), histories checked for
//! linearizability.
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
//! lines `{client, op, key, value, call, ret, result}` (times in virtual ns).

use crate::report::write_json;
use anyhow::{bail, Result};
use dm_runtime::SimRuntime;
use dm_tree::{FgTree, IndexCache, LockTableConfig, Techniques, TreeConfig};
use dm_verbs::sim::{Faults, SimConfig, SimFabric, TearGranularity};
use dm_verbs::MsConfig;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use todc_utils::{Action, History, Specification, WGLChecker};

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// fg, sherman-combine, sherman-onchip, sherman-hier, sherman.
    #[arg(long, default_value = "fg")]
    pub index: String,
    /// Number of seeds (independent runs).
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    #[arg(long, default_value_t = 0)]
    pub first_seed: u64,
    /// Concurrent clients (tasks), spread over `--cores` simulated cores on 2 CSs.
    #[arg(long, default_value_t = 16)]
    pub clients: u32,
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
    /// Comma-separated faults: torn (8-byte torn READs), torn-line (64-byte), delay.
    #[arg(long, default_value = "torn,delay")]
    pub faults: String,
    #[arg(long)]
    pub history_out: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Set from `--index`.
    #[arg(skip = dm_tree::Techniques::FG_PLUS)]
    pub techniques: Techniques,
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

async fn client(t: Rc<FgTree>, id: u32, seed: u64, a: Rc<Args>, log: Rc<RefCell<Vec<Event>>>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(1_000_003) ^ id as u64);
    for i in 0..a.ops {
        let k = rng.gen_range(0..a.keys);
        let value = ((id as u64 + 1) << 32) | (i as u64 + 1);
        let p = rng.gen_range(0..100);
        let call = dm_runtime::now_ns();
        let kind = if p < 30 {
            t.insert(&key(k), value).await.expect("insert");
            Kind::Insert(value)
        } else if p < 40 {
            Kind::Update(value, t.update(&key(k), value).await.expect("update"))
        } else if p < 55 {
            Kind::Remove(t.remove(&key(k)).await.expect("remove"))
        } else if p < 90 {
            Kind::Get(t.get(&key(k)).await.expect("get"))
        } else {
            let n = rng.gen_range(1..12u32);
            let r = t.scan(&key(k), n as usize).await.expect("scan");
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
            kind,
            call,
            ret: dm_runtime::now_ns(),
        });
    }
}

fn run_seed(a: &Rc<Args>, seed: u64) -> Result<Vec<Event>> {
    let chunk = 1 << 20;
    let mut faults = Faults {
        tear: TearGranularity::Off,
        tear_window_ns: 300,
        ..Default::default()
    };
    for f in a.faults.split(',').map(str::trim).filter(|f| !f.is_empty()) {
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
    // Lock tables are tiny so that unrelated nodes share lock slots often:
    // even seeds put 16-bit lanes in device memory (masked CAS), odd seeds
    // 64-bit words in a host-memory table.
    let lanes = seed.is_multiple_of(2);
    let cfg = SimConfig {
        num_ms: 2,
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
        num_ms: 2,
        techniques: a.techniques,
        lock_table: LockTableConfig {
            device: lanes,
            lanes16: lanes,
            slots: if lanes { 32 } else { 16 },
        },
        ..Default::default()
    };
    let mut rt = SimRuntime::new(SimFabric::new(cfg));
    let cores: Vec<_> = (0..a.cores.max(1))
        .map(|i| rt.add_core(i % 2, i / 2))
        .collect();
    rt.block_on(cores[0], FgTree::create(tcfg, 0, 0))
        .unwrap()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let log = Rc::new(RefCell::new(Vec::new()));
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
    let hs: Vec<_> = (0..a.clients)
        .map(|c| {
            let i = c as usize % cores.len();
            rt.spawn_on(
                cores[i],
                client(trees[i].clone(), c, seed, a.clone(), log.clone()),
            )
        })
        .collect();
    rt.run();
    if hs.iter().any(|h| !h.is_finished()) {
        bail!("seed {seed}: some clients never finished (deadlock or lost wake-up)");
    }
    let v = log.borrow().clone();
    Ok(v)
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
            keys
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

fn write_history(path: &PathBuf, h: &[Event]) -> Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for e in h {
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
            json!({"client": e.client, "op": op, "key": e.key, "value": value, "call": e.call, "ret": e.ret, "result": result})
        )?;
    }
    Ok(())
}

impl Args {
    fn node_bytes(&self) -> usize {
        self.node_bytes
            .unwrap_or(if self.techniques.two_level { 176 } else { 128 })
    }
}

pub fn run(a: Args) -> Result<()> {
    let Some(t) = Techniques::named(&a.index) else {
        bail!(
            "unknown --index {:?}: this build has {}",
            a.index,
            Techniques::NAMES.join(", ")
        );
    };
    let mut a = a;
    a.techniques = t;
    let a = Rc::new(a);
    let (mut ops, mut failed) = (0u64, None);
    let mut last = Vec::new();
    for seed in a.first_seed..a.first_seed + a.seeds {
        let h = run_seed(&a, seed)?;
        ops += h.len() as u64;
        if let Err(why) = check_history(&h, a.keys) {
            eprintln!("dm-bench check: seed {seed} FAILED: {why}");
            eprintln!("  replay: dm-bench check --index {} --first-seed {seed} --seeds 1 --faults {} --history-out h.jsonl", a.index, a.faults);
            failed = Some((seed, why));
            last = h;
            break;
        }
        last = h;
    }
    if let Some(p) = &a.history_out {
        write_history(p, &last)?;
    }
    let checked = failed
        .as_ref()
        .map_or(a.seeds, |(s, _)| s - a.first_seed + 1);
    println!(
        "dm-bench check: index {}, {checked} seeds, {} clients x {} ops, {} keys, faults {}: {ops} operations, {}",
        a.index,
        a.clients,
        a.ops,
        a.keys,
        a.faults,
        if failed.is_some() { "NOT linearizable" } else { "linearizable" }
    );
    write_json(
        a.json.as_deref(),
        &json!({"index": a.index, "seeds": checked, "operations": ops, "linearizable": failed.is_none(), "failed_seed": failed.as_ref().map(|f| f.0), "reason": failed.as_ref().map(|f| f.1.clone())}),
    )?;
    if let Some((seed, why)) = failed {
        bail!("seed {seed}: {why}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(client: u32, key: u64, kind: Kind, call: u64, ret: u64) -> Event {
        Event {
            client,
            key,
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
        let mut fine = base;
        fine.push(ev(1, 0, Kind::Scan(5, vec![(3, 7)]), 20, 30));
        assert!(check_history(&fine, 10).is_ok());
    }
}
