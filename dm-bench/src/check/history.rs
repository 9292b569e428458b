//! A check's history: one [`Event`] per operation (client, key, what it did
//! and saw, call and return times in ns), and its JSON-lines form
//! (`--history-out`, `--histories`): `{seed, client, op, key, hi, value,
//! call, ret, result}` per line.
//!
//! Times are the issuing core's virtual clock on sim, `CLOCK_MONOTONIC` on a
//! real fabric: every effect of an operation happens at or after its call
//! time and before its return time, so ordering by these times never invents
//! a real-time order that did not exist. Equal times count as concurrent.

use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;

/// An operation with its argument and what it returned: get's value,
/// insert's value, update's value and whether the key was there, remove's
/// whether it was, scan's count and pairs.
#[derive(Clone, Debug)]
pub(super) enum Kind {
    Get(Option<u64>),
    Insert(u64),
    Update(u64, bool),
    Remove(bool),
    Scan(u32, Vec<(u64, u64)>),
    /// An update cut off by its CS's crash (`--faults crash`): it may have
    /// taken effect; what it would have returned is unknown. Return time
    /// `u64::MAX`.
    UpdateMaybe(u64),
    /// A remove cut off likewise.
    RemoveMaybe,
}

/// One operation of a history: its client, key and [`Kind`], and its call
/// and return times (ns).
#[derive(Clone, Debug)]
pub(super) struct Event {
    pub client: u32,
    pub key: u64,
    /// The end (exclusive) of the key range the client draws from: a scan
    /// that returns fewer than it asked for covers `key..hi` (DEX across
    /// processes: a scan stops where the process's partitions end).
    pub hi: u64,
    pub kind: Kind,
    pub call: u64,
    pub ret: u64,
}

/// Writes `(seed, history)` pairs as JSON lines (see the module docs).
pub(super) fn write_history(path: &PathBuf, hs: &[(u64, Vec<Event>)]) -> Result<()> {
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
            Kind::UpdateMaybe(v) => ("update", json!(v), json!(null)),
            Kind::RemoveMaybe => ("remove", json!(null), json!(null)),
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

/// One line of [`write_history`] back: `(seed, event)`; `default_hi` for a
/// line without `hi` (written before it was recorded).
fn parse_event(v: &Value, default_hi: u64) -> Option<(u64, Event)> {
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
        "update" if result.is_null() => Kind::UpdateMaybe(value?.as_u64()?),
        "update" => Kind::Update(value?.as_u64()?, result.as_bool()?),
        "remove" if result.is_null() => Kind::RemoveMaybe,
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
            hi: u("hi").unwrap_or(default_hi),
            kind,
            call: u("call")?,
            ret: u("ret")?,
        },
    ))
}

/// The union of history files, per seed; `default_hi` (`--keys`) is the
/// key range's end for lines that do not record theirs. Errors: unreadable
/// or malformed lines, and a client id found in two files (the same
/// `--client` twice).
pub(super) fn read_histories(
    paths: &[PathBuf],
    default_hi: u64,
) -> Result<BTreeMap<u64, Vec<Event>>> {
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
                .and_then(|v| parse_event(v, default_hi))
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
