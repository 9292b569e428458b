//! Checking a history ([`check_history`]).
//!
//! - get/insert/update/remove: the history is split per key (a map is the
//!   product of independent per-key registers: P-compositionality) and each
//!   key's history is checked with Wing & Gong's algorithm with Lowe's
//!   memoisation (`todc-utils`' `WGLChecker`) against a sequential
//!   `Option<value>` register ([`KeySpec`]).
//! - scan: keys strictly increasing, none below the start, at most `count`;
//!   every returned pair was written by an operation called before the scan
//!   returned; every key present for the whole scan (inserted by an operation
//!   that returned before the scan was called, and no remove of it overlapping
//!   from that insert's call to the scan's return) inside the scanned range is returned.

use super::history::{Event, Kind};
use std::collections::HashMap;
use todc_utils::{Action, History, Specification, WGLChecker};

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

/// Checks one history; `Err(reason)` on a violation.
pub(super) fn check_history(h: &[Event], keys: u64) -> Result<(), String> {
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
