//! Checking a history ([`check_history`]).
//!
//! - get/insert/update/remove: the history is split per key (a map is the
//!   product of independent per-key registers: P-compositionality, Herlihy
//!   & Wing's locality) and each key's history is checked against a
//!   sequential `Option<value>` register by [`super::wgl`] (Wing & Gong's
//!   search with Lowe's memoisation), within a [`Budget`] of states per
//!   key: past it the check gives up ([`Failure::GaveUp`]), never passes.
//! - scan: a scan reads many keys, so it does not fit one key's register;
//!   it is checked against the per-key histories with conditions every
//!   linearizable history meets (so a failure is a real violation, while a
//!   pass proves the scans consistent with those conditions, not fully
//!   linearizable): keys strictly increasing, none below the start, at most
//!   `count`; every returned pair was written by an operation called before
//!   the scan returned; every key present for the whole scan (inserted by an
//!   operation that returned before the scan was called, and no remove of it
//!   overlapping from that insert's call to the scan's return) inside the
//!   scanned range is returned. The scanned range ends at the last key
//!   returned, or, for a scan that returned fewer pairs than it asked for,
//!   at its client's key range's end (`hi`, recorded with each operation).

use super::history::{Event, Kind};
use super::wgl::{check_key, Budget, Op, Outcome};
use std::collections::{BTreeMap, HashMap};

/// Why a history did not pass.
#[derive(Debug, Clone)]
pub(super) enum Failure {
    /// A violation: the history is not linearizable.
    Violation(String),
    /// The search ran out of its budget: not proven either way.
    GaveUp(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Violation(w) | Failure::GaveUp(w) => f.write_str(w),
        }
    }
}

/// Checks one history within `budget` states per key.
pub(super) fn check_history(h: &[Event], budget: Budget) -> Result<(), Failure> {
    // Per-key linearizability of get/insert/update/remove, keys in order.
    let mut by_key: BTreeMap<u64, Vec<Op>> = BTreeMap::new();
    for e in h {
        if !matches!(e.kind, Kind::Scan(..)) {
            by_key.entry(e.key).or_default().push(Op {
                kind: &e.kind,
                call: e.call,
                ret: e.ret,
            });
        }
    }
    for (k, ops) in &by_key {
        match check_key_maybe(ops, budget, *k) {
            Outcome::Linearizable => {}
            Outcome::NotLinearizable => {
                return Err(Failure::Violation(format!(
                    "key {k}: history of {} operations is not linearizable:{}",
                    ops.len(),
                    key_history(h, *k)
                )))
            }
            Outcome::GaveUp { states, bytes } => {
                return Err(Failure::GaveUp(format!(
                    "gave up after {states} states on key {k} ({} operations, {} MiB of memo); \
                     history not proven linearizable: reduce --clients/--ops or raise \
                     --check-budget (now {}; the memo is capped at {} MiB)",
                    ops.len(),
                    bytes >> 20,
                    budget.states,
                    budget.bytes >> 20
                )))
            }
        }
    }
    check_scans(h, &by_key).map_err(Failure::Violation)
}

/// Key `k`'s operations in `h` (scans left out), one per line in call
/// order: client, what it did and saw (values in hex: client id + 1 in the
/// high 32 bits, its operation number in the low), call and return in µs
/// after the first call. The evidence a failing seed leaves in a log where
/// the history files are not kept (CI's guest suite).
fn key_history(h: &[Event], k: u64) -> String {
    let mut ops: Vec<&Event> = h
        .iter()
        .filter(|e| e.key == k && !matches!(e.kind, Kind::Scan(..)))
        .collect();
    ops.sort_by_key(|e| (e.call, e.ret));
    let t0 = ops.first().map_or(0, |e| e.call);
    let us = |t: u64| match t {
        u64::MAX => "cut off".to_string(),
        t => format!("{:.1}", t.saturating_sub(t0) as f64 / 1e3),
    };
    let mut out = String::new();
    for e in ops {
        let what = match &e.kind {
            Kind::Get(r) => format!("get -> {}", r.map_or("none".into(), |v| format!("{v:#x}"))),
            Kind::Insert(v) => format!("insert {v:#x}"),
            Kind::Update(v, ok) => format!("update {v:#x} -> {ok}"),
            Kind::Remove(ok) => format!("remove -> {ok}"),
            Kind::UpdateMaybe(v) => format!("update {v:#x} -> ?"),
            Kind::RemoveMaybe => "remove -> ?".to_string(),
            Kind::Scan(..) => unreachable!("left out above"),
        };
        out.push_str(&format!(
            "\n  client {:>3} {what:<32} call {:>10} ret {:>10} us",
            e.client,
            us(e.call),
            us(e.ret)
        ));
    }
    out
}

/// Most operations of one key cut off by a crash (`UpdateMaybe`,
/// `RemoveMaybe`) whose outcomes [`check_key_maybe`] enumerates.
const MAX_MAYBE: usize = 10;

/// [`check_key`] for a key whose history may hold operations cut off by a
/// crash: each such update or remove returned true or false had it
/// finished (one that never took effect fits the linearization's end as
/// one of the two), so the key passes if one assignment of those outcomes
/// does. With none, one search as before.
fn check_key_maybe(ops: &[Op], budget: Budget, k: u64) -> Outcome {
    let maybe: Vec<usize> = (0..ops.len())
        .filter(|&i| matches!(ops[i].kind, Kind::UpdateMaybe(_) | Kind::RemoveMaybe))
        .collect();
    let name = format!("key {k} ({} operations)", ops.len());
    if maybe.is_empty() {
        return check_key(ops, budget, &name);
    }
    if maybe.len() > MAX_MAYBE {
        return Outcome::GaveUp {
            states: 0,
            bytes: 0,
        };
    }
    for mask in 0..1u32 << maybe.len() {
        let kinds: Vec<Kind> = maybe
            .iter()
            .enumerate()
            .map(|(j, &i)| {
                let ok = mask >> j & 1 == 1;
                match ops[i].kind {
                    Kind::UpdateMaybe(v) => Kind::Update(*v, ok),
                    _ => Kind::Remove(ok),
                }
            })
            .collect();
        let mut alt = ops.to_vec();
        for (j, &i) in maybe.iter().enumerate() {
            alt[i].kind = &kinds[j];
        }
        match check_key(&alt, budget, &name) {
            Outcome::NotLinearizable => continue,
            o => return o,
        }
    }
    Outcome::NotLinearizable
}

/// The scans' conditions (see the module docs); `by_key`: each key's
/// other operations.
fn check_scans(h: &[Event], by_key: &BTreeMap<u64, Vec<Op>>) -> Result<(), String> {
    // The earliest call of a write of each (key, value).
    let mut written: HashMap<(u64, u64), u64> = HashMap::new();
    for e in h {
        if let Kind::Insert(v) | Kind::Update(v, true) | Kind::UpdateMaybe(v) = e.kind {
            let c = written.entry((e.key, v)).or_insert(e.call);
            *c = (*c).min(e.call);
        }
    }
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
            s.hi
        } else {
            r.last().map_or(s.hi, |x| x.0)
        };
        // Only keys with operations can be present.
        for (&k, ops) in by_key.range(s.key..end.max(s.key)) {
            if r.iter().any(|x| x.0 == k) {
                continue;
            }
            let present = ops.iter().any(|i| {
                matches!(i.kind, Kind::Insert(_))
                    && i.ret < s.call
                    && !ops.iter().any(|x| {
                        matches!(x.kind, Kind::Remove(_) | Kind::RemoveMaybe)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::wgl::MEMO_BYTES;

    const BUDGET: Budget = Budget {
        states: 1 << 22,
        bytes: MEMO_BYTES,
    };

    fn check(h: &[Event]) -> Result<(), String> {
        check_history(h, BUDGET).map_err(|f| match f {
            Failure::Violation(w) => w,
            Failure::GaveUp(w) => panic!("gave up: {w}"),
        })
    }

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
        assert!(check(&bad).is_err());
        // Overlapping: get may see either.
        let ok = vec![
            ev(0, 5, Kind::Insert(1), 0, 10),
            ev(1, 5, Kind::Get(None), 5, 30),
        ];
        assert!(check(&ok).is_ok());
        // A lost update: two inserts, later a get of the first one's value.
        let lost = vec![
            ev(0, 5, Kind::Insert(1), 0, 10),
            ev(1, 5, Kind::Insert(2), 20, 30),
            ev(2, 5, Kind::Get(Some(1)), 40, 50),
        ];
        assert!(check(&lost).is_err());
        // remove reporting success on an absent key.
        let bad_rm = vec![ev(0, 5, Kind::Remove(true), 0, 10)];
        assert!(check(&bad_rm).is_err());
    }

    #[test]
    fn a_violation_lists_the_keys_operations_in_call_order() {
        let lost = vec![
            ev(1, 5, Kind::Insert(2), 120_000, 130_000),
            ev(2, 5, Kind::Get(Some(1)), 140_000, 150_500),
            ev(0, 5, Kind::Insert(1), 100_000, 110_000),
            ev(3, 6, Kind::Remove(false), 90_000, 200_000),
        ];
        let w = check(&lost).unwrap_err();
        let lines: Vec<&str> = w.lines().collect();
        assert_eq!(lines.len(), 4, "{w}");
        assert!(
            lines[0].starts_with("key 5: history of 3 operations"),
            "{w}"
        );
        assert!(lines[1].contains("client   0 insert 0x1"), "{w}");
        assert!(
            lines[1].ends_with("call        0.0 ret       10.0 us"),
            "{w}"
        );
        assert!(lines[2].contains("client   1 insert 0x2"), "{w}");
        assert!(lines[3].contains("client   2 get -> 0x1"), "{w}");
        assert!(
            lines[3].ends_with("call       40.0 ret       50.5 us"),
            "{w}"
        );
    }

    #[test]
    fn operations_cut_off_by_a_crash_may_or_may_not_have_taken_effect() {
        const CUT: u64 = u64::MAX;
        let base = || vec![ev(0, 5, Kind::Insert(1), 0, 10)];
        // A cut-off update seen by a later get: it took effect.
        let mut seen = base();
        seen.push(ev(1, 5, Kind::UpdateMaybe(2), 20, CUT));
        seen.push(ev(2, 5, Kind::Get(Some(2)), 40, 50));
        assert!(check(&seen).is_ok());
        // Not seen: it never did (or did after the get).
        let mut unseen = base();
        unseen.push(ev(1, 5, Kind::UpdateMaybe(2), 20, CUT));
        unseen.push(ev(2, 5, Kind::Get(Some(1)), 40, 50));
        assert!(check(&unseen).is_ok());
        // A cut-off remove, then the key absent, then present again:
        // nothing wrote 1 again, so the get of 1 after the None is stale.
        let mut stale = base();
        stale.push(ev(1, 5, Kind::RemoveMaybe, 20, CUT));
        stale.push(ev(2, 5, Kind::Get(None), 40, 50));
        stale.push(ev(2, 5, Kind::Get(Some(1)), 60, 70));
        assert!(check(&stale).is_err());
        // A cut-off update cannot explain a value nobody wrote.
        let mut phantom = base();
        phantom.push(ev(1, 5, Kind::UpdateMaybe(2), 20, CUT));
        phantom.push(ev(2, 5, Kind::Get(Some(3)), 40, 50));
        assert!(check(&phantom).is_err());
        // A scan may return a cut-off update's value, and need not return
        // a key a cut-off remove may have removed.
        let mut scans = base();
        scans.push(ev(1, 5, Kind::UpdateMaybe(2), 20, CUT));
        scans.push(ev(2, 0, Kind::Scan(5, vec![(5, 2)]), 40, 50));
        assert!(check(&scans).is_ok());
        let mut gone = base();
        gone.push(ev(1, 5, Kind::RemoveMaybe, 20, CUT));
        gone.push(ev(2, 0, Kind::Scan(5, vec![]), 40, 50));
        gone.push(ev(2, 5, Kind::Get(None), 60, 70));
        assert!(check(&gone).is_ok());
    }

    #[test]
    fn checker_rejects_bad_scans() {
        let base = vec![ev(0, 3, Kind::Insert(7), 0, 10)];
        let mut missed = base.clone();
        missed.push(ev(1, 0, Kind::Scan(5, vec![]), 20, 30));
        assert!(check(&missed).unwrap_err().contains("missed key 3"));
        let mut phantom = base.clone();
        phantom.push(ev(1, 0, Kind::Scan(5, vec![(3, 7), (4, 9)]), 20, 30));
        assert!(check(&phantom).is_err());
        let mut fine = base.clone();
        fine.push(ev(1, 0, Kind::Scan(5, vec![(3, 7)]), 20, 30));
        assert!(check(&fine).is_ok());
        // A short scan covers its client's key range only (`hi`): key 3 lies
        // beyond a range ending at 3, but not beyond one ending at 4.
        let short = |hi| {
            let mut h = base.clone();
            h.push(Event {
                hi,
                ..ev(1, 0, Kind::Scan(5, vec![]), 20, 30)
            });
            check(&h)
        };
        assert!(short(3).is_ok());
        assert!(short(4).unwrap_err().contains("missed key 3"));
    }
}
