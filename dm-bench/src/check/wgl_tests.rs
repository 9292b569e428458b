//! Tests of [`super::check_key`]: small registers by hand, a budget that
//! runs out, random histories against a brute-force search of every order,
//! and a hot key with 16 clients.

use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BIG: Budget = Budget {
    states: 1 << 22,
    bytes: MEMO_BYTES,
};

fn run(h: &[(Kind, u64, u64)], b: Budget) -> Outcome {
    let ops: Vec<Op> = h
        .iter()
        .map(|(kind, call, ret)| Op {
            kind,
            call: *call,
            ret: *ret,
        })
        .collect();
    check_key(&ops, b, "test")
}

#[test]
fn the_register_is_checked() {
    use Kind::*;
    let ok = [(Insert(1), 0, 10), (Get(None), 5, 30)];
    assert_eq!(run(&ok, BIG), Outcome::Linearizable);
    let stale = [(Insert(1), 0, 10), (Get(None), 20, 30)];
    assert_eq!(run(&stale, BIG), Outcome::NotLinearizable);
    // Equal times are concurrent.
    let touch = [(Insert(1), 0, 10), (Get(None), 10, 30)];
    assert_eq!(run(&touch, BIG), Outcome::Linearizable);
    // Overlapping writes: both orders are tried.
    let both = [
        (Insert(1), 0, 10),
        (Insert(2), 0, 10),
        (Get(Some(1)), 20, 30),
        (Update(3, true), 40, 50),
        (Remove(true), 60, 70),
        (Update(4, false), 80, 90),
        (Remove(false), 80, 90),
    ];
    assert_eq!(run(&both, BIG), Outcome::Linearizable);
    // A value read back after a later write replaced it for good.
    let lost = [
        (Insert(1), 0, 10),
        (Get(Some(1)), 5, 30),
        (Insert(2), 20, 25),
        (Get(Some(1)), 40, 50),
    ];
    assert_eq!(run(&lost, BIG), Outcome::NotLinearizable);
    // A write of the value there already is not read-only: placed later,
    // it brings 3 back for the get.
    let again = [
        (Get(Some(3)), 13, 19),
        (Insert(3), 7, 7),
        (Insert(2), 8, 9),
        (Remove(false), 2, 13),
        (Remove(true), 14, 21),
        (Insert(3), 8, 18),
    ];
    assert_eq!(run(&again, BIG), Outcome::Linearizable);
    let no_ops: [(Kind, u64, u64); 0] = [];
    assert_eq!(run(&no_ops, BIG), Outcome::Linearizable);
}

#[test]
fn a_search_past_its_budget_gives_up() {
    // Overlapping inserts and removes, then a read no order explains: the
    // search has to try many orders before it can tell.
    let mut h: Vec<(Kind, u64, u64)> = (0..10).map(|v| (Kind::Insert(v), 0, 100)).collect();
    h.extend((0..6).map(|_| (Kind::Remove(true), 0, 100)));
    h.push((Kind::Get(Some(0)), 200, 210));
    h.push((Kind::Get(Some(1)), 220, 230));
    let tiny = Budget {
        states: 50,
        bytes: MEMO_BYTES,
    };
    assert!(matches!(run(&h, tiny), Outcome::GaveUp { states: 51, .. }));
    assert_eq!(run(&h, BIG), Outcome::NotLinearizable);
    let few_bytes = Budget {
        states: 1 << 20,
        bytes: 1000,
    };
    assert!(matches!(run(&h, few_bytes), Outcome::GaveUp { .. }));
}

/// Whether some order of `h` respects real time and the register: every
/// order tried, no memo, no pruning.
fn brute_force(h: &[(Kind, u64, u64)]) -> bool {
    fn go(h: &[(Kind, u64, u64)], done: &mut Vec<bool>, s: Option<u64>) -> bool {
        if done.iter().all(|&d| d) {
            return true;
        }
        for i in 0..h.len() {
            // Minimal: nothing left returned before it was called.
            if done[i] || (0..h.len()).any(|j| !done[j] && h[j].2 < h[i].1) {
                continue;
            }
            let (ok, after) = apply(&h[i].0, s);
            if ok {
                done[i] = true;
                if go(h, done, after) {
                    return true;
                }
                done[i] = false;
            }
        }
        false
    }
    go(h, &mut vec![false; h.len()], None)
}

/// A random operation on values 1..=3 (repeats allowed) with a random
/// result.
fn random_kind(r: &mut ChaCha8Rng) -> Kind {
    let v = r.gen_range(1..=3);
    match r.gen_range(0..4) {
        0 => Kind::Get(r.gen_bool(0.7).then_some(v)),
        1 => Kind::Insert(v),
        2 => Kind::Update(v, r.gen_bool(0.5)),
        _ => Kind::Remove(r.gen_bool(0.5)),
    }
}

/// The results a register gives `h`'s operations applied in the order of
/// `points` (one time inside each operation's interval).
fn with_results(h: &mut [(Kind, u64, u64)], points: &[u64]) {
    let mut order: Vec<usize> = (0..h.len()).collect();
    order.sort_by_key(|&i| (points[i], i));
    let mut s = None;
    for i in order {
        h[i].0 = match h[i].0 {
            Kind::Get(_) => Kind::Get(s),
            Kind::Update(v, _) => Kind::Update(v, s.is_some()),
            Kind::Remove(_) => Kind::Remove(s.is_some()),
            ref k => k.clone(),
        };
        s = apply(&h[i].0, s).1;
    }
}

#[test]
fn random_histories_agree_with_brute_force() {
    let mut r = ChaCha8Rng::seed_from_u64(33);
    let (mut yes, mut no) = (0, 0);
    for case in 0..6000 {
        let n = r.gen_range(1..=8);
        let mut h: Vec<(Kind, u64, u64)> = (0..n)
            .map(|_| {
                let call = r.gen_range(0..20);
                (random_kind(&mut r), call, call + r.gen_range(0..12))
            })
            .collect();
        if case % 2 == 0 {
            // Linearizable by construction (unless rewritten below).
            let points: Vec<u64> = h.iter().map(|o| r.gen_range(o.1..=o.2)).collect();
            with_results(&mut h, &points);
            if case % 6 == 0 {
                let i = r.gen_range(0..n);
                h[i].0 = random_kind(&mut r);
            }
        }
        let want = brute_force(&h);
        let got = run(&h, BIG);
        let expect = if want {
            Outcome::Linearizable
        } else {
            Outcome::NotLinearizable
        };
        assert_eq!(got, expect, "case {case}: {h:?}");
        if want {
            yes += 1;
        } else {
            no += 1;
        }
    }
    assert!(yes > 2000 && no > 1000, "{yes} linearizable, {no} not");
}

/// A hot key: `clients` clients of `ops` operations each, unique values,
/// mostly long writes and short reads, results from linearization points
/// inside each interval.
fn hot_key(clients: u64, ops: u64, seed: u64) -> Vec<(Kind, u64, u64)> {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    let (mut h, mut points) = (Vec::new(), Vec::new());
    for c in 0..clients {
        let mut t = r.gen_range(0..1000);
        for i in 0..ops {
            let v = ((c + 1) << 32) | (i + 1);
            let kind = match r.gen_range(0..100) {
                0..30 => Kind::Insert(v),
                30..40 => Kind::Update(v, false),
                40..55 => Kind::Remove(false),
                _ => Kind::Get(None),
            };
            let long = !matches!(kind, Kind::Get(_));
            let d = if long {
                r.gen_range(1000..30_000)
            } else {
                r.gen_range(500..3000)
            };
            points.push(r.gen_range(t..=t + d));
            h.push((kind, t, t + d));
            t += d + r.gen_range(0..500);
        }
    }
    with_results(&mut h, &points);
    h
}

#[test]
fn a_hot_key_with_16_clients_is_checked_quickly() {
    let start = Instant::now();
    for seed in 0..5 {
        let h = hot_key(16, 20, seed);
        assert_eq!(run(&h, BIG), Outcome::Linearizable, "seed {seed}");
        // A read of a value written only after the read returned.
        let mut bad = h.clone();
        let (i, j) = (0..h.len())
            .flat_map(|i| (0..h.len()).map(move |j| (i, j)))
            .find(|&(i, j)| {
                matches!(h[i].0, Kind::Get(_))
                    && matches!(h[j].0, Kind::Insert(_))
                    && h[j].1 > h[i].2
            })
            .expect("a get before an insert");
        let Kind::Insert(v) = h[j].0 else {
            unreachable!()
        };
        bad[i].0 = Kind::Get(Some(v));
        assert_eq!(run(&bad, BIG), Outcome::NotLinearizable, "seed {seed}");
        // A lost update: the last successful write's value replaced by a
        // read of the value before it, after everything returned.
        let end = h.iter().map(|o| o.2).max().unwrap();
        let mut stale = h.clone();
        let first = h.iter().find_map(|o| match o.0 {
            Kind::Get(Some(v)) => Some(v),
            _ => None,
        });
        if let Some(v) = first {
            stale.push((Kind::Insert(7), end + 10, end + 20));
            stale.push((Kind::Get(Some(v)), end + 30, end + 40));
            assert_eq!(run(&stale, BIG), Outcome::NotLinearizable, "seed {seed}");
        }
    }
    assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
}
