//! Workload specs and the operation stream.
//!
//! YCSB core workloads (YCSB 0.11 `workloads/workload{a..f}`; request
//! distribution zipfian 0.99 unless `--theta`/`--dist` say otherwise):
//!
//! | name | mix | distribution |
//! |---|---|---|
//! | a | 50% read, 50% update | zipfian |
//! | b | 95% read, 5% update | zipfian |
//! | c | 100% read | zipfian |
//! | d | 95% read, 5% insert | latest |
//! | e | 95% scan (length uniform 1..=100), 5% insert | zipfian |
//! | f | 50% read, 50% read-modify-write | zipfian |
//! | load | 100% insert of new keys | (sequential key numbers, hashed) |
//!
//! Sherman's Table 2 mixes (Sherman §5.1): the loaded records are 80% of a key
//! space of `records / 0.8` key numbers; "insert" is an upsert of a key number
//! drawn from the distribution over the whole key space (so most inserts
//! update an existing key, as Sherman reports about 2/3), lookups and range
//! starts are drawn the same way; range length `--scan-len` (default 100).
//!
//! | name | mix |
//! |---|---|
//! | write-only | 100% insert |
//! | write-intensive | 50% insert, 50% lookup |
//! | read-intensive | 5% insert, 95% lookup |
//! | range-only | 100% range |
//! | range-write | 50% insert, 50% range |
//!
//! Key numbers map to keys with [`super::int_key`] (YCSB's FNV hashing), so
//! load key *i* is the key YCSB's own load phase writes as record *i*.

use super::gen::{ScrambledZipfian, SkewedLatest};
use super::{int_key, Op};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// Request distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    /// Scrambled zipfian with this constant (YCSB `requestdistribution=zipfian`).
    Zipfian(f64),
    Uniform,
    /// Skewed latest (YCSB `requestdistribution=latest`).
    Latest,
}

/// Operation proportions (sum to 1).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Mix {
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub rmw: f64,
}

impl Mix {
    /// Parses `--mix R,U,I,S,M`: five whole percentages (read, update,
    /// insert, scan, read-modify-write; YCSB's `readproportion`,
    /// `updateproportion`, `insertproportion`, `scanproportion`,
    /// `readmodifywriteproportion`) summing to 100.
    pub fn parse_percent(s: &str) -> anyhow::Result<Mix> {
        let v = crate::fabric_arg::parse_percentages::<5>(s, "read,update,insert,scan,rmw")?;
        let f = |i: usize| v[i] as f64 / 100.0;
        Ok(Mix {
            read: f(0),
            update: f(1),
            insert: f(2),
            scan: f(3),
            rmw: f(4),
        })
    }
}

/// The zipfian constants the generators take: finite, `0 <= theta < 1` (0
/// means uniform). YCSB's zipfian divides by `1 - theta`: it is undefined
/// at 1, and its formulas make no distribution above it.
pub fn check_theta(theta: f64) -> Result<(), String> {
    if theta.is_finite() && (0.0..1.0).contains(&theta) {
        Ok(())
    } else {
        Err(format!(
            "--theta {theta}: the zipfian constant must be finite, at least 0 and below 1 \
             (0 = uniform; YCSB's zipfian is undefined at 1)"
        ))
    }
}

/// `--theta`'s parser: a number that [`check_theta`] accepts.
pub fn parse_theta(s: &str) -> Result<f64, String> {
    let t: f64 = s
        .trim()
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))?;
    check_theta(t).map(|()| t)
}

/// `--load-fraction`'s parser: the loaded records' share of an upsert
/// mix's key space, finite, above 0 and at most 1.
pub fn parse_load_fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s
        .trim()
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))?;
    if f.is_finite() && f > 0.0 && f <= 1.0 {
        Ok(f)
    } else {
        Err(format!(
            "{f}: the loaded records' share of the key space is above 0 and at most 1"
        ))
    }
}

/// A workload: mix, distribution and how inserts choose keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    pub name: String,
    pub mix: Mix,
    pub dist: Dist,
    /// Longest scan (YCSB `maxscanlength`, uniform 1..=max); Sherman's fixed length when `fixed_scan`.
    pub max_scan: u32,
    pub fixed_scan: bool,
    /// Sherman-style: key space = records / load_fraction and inserts are upserts in it.
    pub upsert_load_fraction: Option<f64>,
    /// Sherman-style upserts draw their keys uniformly from the key space
    /// (reads and scans keep `dist`).
    pub upsert_uniform: bool,
}

impl Spec {
    /// The spec named `name` (`a`..`f`, `load`, or a Sherman mix), with zipfian
    /// constant `theta` (0 means uniform) and Sherman range length `scan_len`.
    pub fn named(name: &str, theta: f64, scan_len: u32) -> Result<Spec, String> {
        check_theta(theta)?;
        let z = if theta == 0.0 {
            Dist::Uniform
        } else {
            Dist::Zipfian(theta)
        };
        let m = |read, update, insert, scan, rmw| Mix {
            read,
            update,
            insert,
            scan,
            rmw,
        };
        let ycsb = |mix, dist| Spec {
            name: name.to_string(),
            mix,
            dist,
            max_scan: 100,
            fixed_scan: false,
            upsert_load_fraction: None,
            upsert_uniform: false,
        };
        let sherman = |mix| Spec {
            name: name.to_string(),
            mix,
            dist: z,
            max_scan: scan_len.max(1),
            fixed_scan: true,
            upsert_load_fraction: Some(0.8),
            upsert_uniform: false,
        };
        Ok(match name.to_ascii_lowercase().as_str() {
            "a" => ycsb(m(0.5, 0.5, 0.0, 0.0, 0.0), z),
            "b" => ycsb(m(0.95, 0.05, 0.0, 0.0, 0.0), z),
            "c" => ycsb(m(1.0, 0.0, 0.0, 0.0, 0.0), z),
            "d" => ycsb(m(0.95, 0.0, 0.05, 0.0, 0.0), Dist::Latest),
            "e" => ycsb(m(0.0, 0.0, 0.05, 0.95, 0.0), z),
            "f" => ycsb(m(0.5, 0.0, 0.0, 0.0, 0.5), z),
            "load" | "la" => ycsb(m(0.0, 0.0, 1.0, 0.0, 0.0), z),
            "write-only" => sherman(m(0.0, 0.0, 1.0, 0.0, 0.0)),
            "write-intensive" => sherman(m(0.5, 0.0, 0.5, 0.0, 0.0)),
            "read-intensive" => sherman(m(0.95, 0.0, 0.05, 0.0, 0.0)),
            "range-only" => sherman(m(0.0, 0.0, 0.0, 1.0, 0.0)),
            "range-write" => sherman(m(0.0, 0.0, 0.5, 0.5, 0.0)),
            other => {
                return Err(format!(
                    "unknown workload {other:?}: use a-f, load, write-only, write-intensive, read-intensive, range-only or range-write"
                ))
            }
        })
    }
}

/// Deterministic operation stream for `spec` over `records` loaded records.
pub struct Stream {
    spec: Spec,
    rng: ChaCha8Rng,
    /// Key numbers in use: loaded records plus run-phase inserts (YCSB's insert counter).
    next_insert: u64,
    key_space: u64,
    zipf: Option<ScrambledZipfian>,
    latest: Option<SkewedLatest>,
    /// Key number -> key: YCSB's hashed integer keys, or a key file's keys.
    key_list: Option<Arc<Vec<Vec<u8>>>>,
    /// How a key number becomes an integer key (without a key list).
    map: KeyMap,
    /// Key numbers above which none is used: the loaded records and every
    /// run-phase insert (or the upsert mixes' key space).
    max_keynum: u64,
}

/// How [`Stream::key`] turns key number `n` into an 8-byte integer key.
#[derive(Clone, Copy, Debug)]
enum KeyMap {
    /// YCSB's `insertorder=hashed`: [`int_key`]`(n)`.
    Hashed,
    /// [`Stream::with_key_stride`]: `n x stride`.
    Stride(u64),
    /// [`Stream::with_scattered_keys`]: [`scatter`]`(n, space)`.
    Scattered { space: u64 },
}

impl Stream {
    /// `ops`: run-phase operations planned (YCSB sizes its key chooser with
    /// them: `records + 2 * ops * insertproportion` key numbers, redrawing any
    /// number not inserted yet).
    ///
    /// Errors: no records while the mix reads, updates or scans records of
    /// the insert counter's range (YCSB's workloads: a draw from an empty
    /// range; only an insert-only mix, or Sherman's upserts into their key
    /// space, can start empty); a zipfian constant [`check_theta`] refuses.
    pub fn new(spec: Spec, records: u64, ops: u64, seed: u64) -> Result<Self, String> {
        let m = spec.mix;
        let chooses = m.read + m.update + m.scan + m.rmw > 0.0;
        if records == 0 && chooses && spec.upsert_load_fraction.is_none() {
            return Err(format!(
                "--keys 0: workload {} reads, updates or scans loaded records, so it needs \
                 at least 1 (only insert-only mixes such as `load` start from no records)",
                spec.name
            ));
        }
        if let Dist::Zipfian(t) = spec.dist {
            check_theta(t)?;
        }
        let key_space = match spec.upsert_load_fraction {
            Some(f) => ((records as f64 / f).ceil() as u64).max(1),
            None => records.max(1),
        };
        let chooser_items = match spec.upsert_load_fraction {
            Some(_) => key_space,
            None => key_space.saturating_add((ops as f64 * spec.mix.insert * 2.0) as u64),
        };
        let zipf = match spec.dist {
            Dist::Zipfian(t) => Some(ScrambledZipfian::new(0, chooser_items - 1, t)),
            _ => None,
        };
        let latest = (spec.dist == Dist::Latest).then(|| SkewedLatest::new(records));
        Ok(Stream {
            spec,
            rng: ChaCha8Rng::seed_from_u64(seed),
            next_insert: records,
            key_space,
            zipf,
            latest,
            key_list: None,
            map: KeyMap::Hashed,
            max_keynum: key_space.max(records.saturating_add(ops)),
        })
    }

    /// Uses `keys[n]` as the key of key number `n` instead of [`int_key`]`(n)`
    /// (string keys from `--key-file`). A key number beyond the list makes
    /// [`Stream::key_numbers_used`] exceed its length; check it after generating.
    pub fn with_key_list(mut self, keys: Arc<Vec<Vec<u8>>>) -> Self {
        self.key_list = Some(keys);
        self
    }

    /// Key number `n` becomes the 8-byte big-endian key `n x stride`. At
    /// stride 1 YCSB's `insertorder=ordered`: dense keys, 256 to a 7-byte
    /// prefix, the key space Dolphin's leaves are built for (Dolphin
    /// §III-A; digest B2.3). At stride 2 a key space half filled, as
    /// Dolphin's evaluation loads its
    /// trees ("512 million items 50% full", §IV-A). `stride` at least 1;
    /// `n x stride` must fit 64 bits (the caller bounds the key count).
    pub fn with_key_stride(mut self, stride: u64) -> Self {
        self.map = KeyMap::Stride(stride.max(1));
        self
    }

    /// Key number `n` becomes the 8-byte big-endian key `p(n)`, where `p`
    /// maps the key numbers the stream can use one to one into a key
    /// space twice their count, in a scrambled order ([`scatter`]): dense
    /// keys, about half the key space filled at the end of the run,
    /// inserted in no order. What Dolphin's evaluation loads (§IV-A:
    /// "50% full"; its code takes each hashed key number modulo the key
    /// space, digest B2.3), without the modulo's duplicate keys.
    pub fn with_scattered_keys(mut self) -> Self {
        self.map = KeyMap::Scattered {
            space: self.max_keynum.saturating_mul(2).max(2),
        };
        self
    }

    /// Key numbers the stream has used so far (the load's `records`, or the
    /// key space of Sherman's mixes, plus the run's inserts of new keys).
    pub fn key_numbers_used(&self) -> u64 {
        self.next_insert.max(self.key_space)
    }

    /// The key of key number `n` (empty if `n` is beyond the key list).
    pub fn key(&self, n: u64) -> Vec<u8> {
        match &self.key_list {
            Some(l) => l.get(n as usize).cloned().unwrap_or_default(),
            None => match self.map {
                KeyMap::Hashed => int_key(n),
                KeyMap::Stride(k) => (n * k).to_be_bytes().to_vec(),
                KeyMap::Scattered { space } => scatter(n, space).to_be_bytes().to_vec(),
            },
        }
    }

    /// Key number for a request (YCSB's `nextKeynum`): below the insert counter.
    fn keynum(&mut self) -> u64 {
        let limit = if self.spec.upsert_load_fraction.is_some() {
            self.key_space
        } else {
            self.next_insert
        };
        let n = match self.spec.dist {
            Dist::Uniform => self.rng.gen_range(0..limit.max(1)),
            Dist::Latest => self
                .latest
                .as_mut()
                .unwrap()
                .next(&mut self.rng, self.next_insert.max(1) - 1),
            Dist::Zipfian(_) => {
                // YCSB redraws until the key number is below the insert
                // counter; no draw is below 0 ([`Stream::new`] refuses that).
                assert!(limit > 0, "a zipfian key number from an empty range");
                loop {
                    let n = self.zipf.as_mut().unwrap().next(&mut self.rng);
                    if n < limit {
                        break n;
                    }
                }
            }
        };
        n.min(limit.max(1) - 1)
    }

    /// The key of a request's key number.
    fn chosen_key(&mut self) -> Vec<u8> {
        let n = self.keynum();
        self.key(n)
    }

    /// The next operation.
    pub fn next_op(&mut self) -> Op {
        let m = self.spec.mix;
        let p: f64 = self.rng.gen();
        if p < m.read {
            Op::Read(self.chosen_key())
        } else if p < m.read + m.update {
            Op::Update(self.chosen_key())
        } else if p < m.read + m.update + m.insert {
            if self.spec.upsert_uniform {
                let n = self.rng.gen_range(0..self.key_space.max(1));
                Op::Insert(self.key(n))
            } else if self.spec.upsert_load_fraction.is_some() {
                Op::Insert(self.chosen_key())
            } else {
                let n = self.next_insert;
                self.next_insert += 1;
                Op::Insert(self.key(n))
            }
        } else if p < m.read + m.update + m.insert + m.scan {
            let k = self.chosen_key();
            let len = if self.spec.fixed_scan {
                self.spec.max_scan
            } else {
                self.rng.gen_range(1..=self.spec.max_scan)
            };
            Op::Scan(k, len)
        } else {
            Op::ReadModifyWrite(self.chosen_key())
        }
    }
}

/// A permutation of `0..space` applied to `n < space`: a bijection of
/// `0..2^k` (the smallest power of two at least `space`; odd multipliers
/// and xor-shifts, each one to one on k bits) walked until it lands below
/// `space` (cycle walking: the walk from `n` stays on `n`'s cycle, which
/// returns below `space`, so it ends; at most 2 steps expected). A key
/// number at or past `space` maps to itself, outside the permutation's
/// range, so the mapping stays one to one (and the walk never starts on a
/// cycle with no end below `space`).
pub fn scatter(n: u64, space: u64) -> u64 {
    if n >= space || space > 1 << 62 {
        return n;
    }
    let k = space.next_power_of_two().trailing_zeros().max(1);
    let mask = if k >= 64 { u64::MAX } else { (1u64 << k) - 1 };
    let s = k / 2 + 1;
    let step = |mut x: u64| {
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask;
        x ^= x >> s;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9) & mask;
        x ^ (x >> s)
    };
    let mut x = step(n);
    while x >= space {
        x = step(x);
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The load phase: key numbers `0..records`, each inserted once, in order.
    pub fn load_keys(records: u64) -> impl Iterator<Item = Vec<u8>> {
        (0..records).map(int_key)
    }

    fn ops(name: &str, n: usize, seed: u64) -> Vec<Op> {
        let mut s = Stream::new(
            Spec::named(name, 0.99, 100).unwrap(),
            10_000,
            n as u64,
            seed,
        )
        .unwrap();
        (0..n).map(|_| s.next_op()).collect()
    }

    #[test]
    fn scattered_keys_are_a_permutation_of_twice_the_key_numbers() {
        for space in [2u64, 3, 10, 1000, 4096, 400_000] {
            let mut seen: Vec<u64> = (0..space).map(|n| super::scatter(n, space)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..space).collect::<Vec<_>>(), "space {space}");
            assert_eq!(super::scatter(space + 5, space), space + 5);
        }
        let st = Stream::new(Spec::named("c", 0.99, 100).unwrap(), 1000, 10, 1)
            .unwrap()
            .with_scattered_keys();
        let keys: Vec<Vec<u8>> = (0..8).map(|n| st.key(n)).collect();
        assert!(
            keys.windows(2).any(|w| w[0] > w[1]),
            "not in order: {keys:?}"
        );
    }

    #[test]
    fn ordered_keys_are_key_numbers_times_the_stride() {
        let s = || Stream::new(Spec::named("c", 0.99, 100).unwrap(), 1000, 10, 1).unwrap();
        assert_eq!(s().with_key_stride(1).key(7), 7u64.to_be_bytes().to_vec());
        assert_eq!(s().with_key_stride(2).key(7), 14u64.to_be_bytes().to_vec());
        assert_eq!(s().key(7), int_key(7));
    }

    #[test]
    fn a_mix_replaces_the_proportions_and_is_checked() {
        let m = Mix::parse_percent("40, 30,10,20,0").unwrap();
        assert_eq!(
            (m.read, m.update, m.insert, m.scan, m.rmw),
            (0.4, 0.3, 0.1, 0.2, 0.0)
        );
        for bad in ["40,30,10,20", "40,30,10,20,1", "a,b,c,d,e", ""] {
            assert!(Mix::parse_percent(bad).is_err(), "{bad}");
        }
        let mut spec = Spec::named("a", 0.99, 100).unwrap();
        spec.mix = m;
        let mut s = Stream::new(spec, 1000, 2000, 1).unwrap();
        let v: Vec<Op> = (0..2000).map(|_| s.next_op()).collect();
        for kind in ["read", "update", "insert", "scan"] {
            assert!(v.iter().any(|o| o.kind() == kind), "{kind}");
        }
        assert!(v.iter().all(|o| !matches!(o, Op::ReadModifyWrite(_))));
    }

    #[test]
    fn an_empty_range_or_a_bad_theta_is_an_error_not_a_hang() {
        for name in ["a", "b", "c", "d", "e", "f"] {
            let spec = Spec::named(name, 0.99, 100).unwrap();
            assert!(Stream::new(spec, 0, 100, 1).is_err(), "{name}");
        }
        // Insert-only and Sherman's upserts can start from no records.
        for name in ["load", "write-only", "write-intensive"] {
            let mut s = Stream::new(Spec::named(name, 0.99, 100).unwrap(), 0, 100, 1).unwrap();
            assert!((0..100).all(|_| matches!(s.next_op(), Op::Insert(_) | Op::Read(_))));
        }
        for t in [1.0, f64::NAN, f64::INFINITY, 2.0, -1.0, -0.0 - 1e-9] {
            assert!(Spec::named("a", t, 100).is_err(), "{t}");
            assert!(parse_theta(&t.to_string()).is_err(), "{t}");
        }
        assert_eq!(parse_theta("0.5"), Ok(0.5));
        let mut spec = Spec::named("a", 0.99, 100).unwrap();
        spec.dist = Dist::Zipfian(1.0);
        assert!(Stream::new(spec, 10, 10, 1).is_err());
    }

    #[test]
    fn same_seed_same_stream() {
        assert_eq!(ops("a", 1000, 5), ops("a", 1000, 5));
        assert_ne!(ops("a", 1000, 5), ops("a", 1000, 6));
    }

    #[test]
    fn mixes_match_specs() {
        let count = |v: &[Op]| {
            let mut c = HashMap::new();
            for o in v {
                *c.entry(o.kind()).or_insert(0usize) += 1;
            }
            c
        };
        let c = count(&ops("a", 20_000, 1));
        assert!((9_500..10_500).contains(&c["read"]) && (9_500..10_500).contains(&c["update"]));
        let c = count(&ops("e", 20_000, 1));
        assert!((18_600..19_400).contains(&c["scan"]), "{c:?}");
        let c = count(&ops("write-intensive", 20_000, 1));
        assert!((9_500..10_500).contains(&c["insert"]), "{c:?}");
        assert!(Spec::named("zz", 0.99, 100).is_err());
    }

    #[test]
    fn reads_address_existing_keys_and_inserts_are_new() {
        let records = 10_000u64;
        for name in ["a", "b", "c", "d", "e", "f"] {
            let mut live: std::collections::HashSet<Vec<u8>> = load_keys(records).collect();
            let mut s =
                Stream::new(Spec::named(name, 0.99, 100).unwrap(), records, 5_000, 3).unwrap();
            for _ in 0..5_000 {
                match s.next_op() {
                    Op::Insert(k) => assert!(live.insert(k), "{name}: insert of an existing key"),
                    o => assert!(
                        live.contains(o.key()),
                        "{name}: {o:?} addresses a key never inserted"
                    ),
                }
            }
        }
    }

    #[test]
    fn sherman_inserts_are_mostly_updates() {
        let records = 100_000u64;
        let live: std::collections::HashSet<Vec<u8>> = load_keys(records).collect();
        let mut s = Stream::new(
            Spec::named("write-only", 0.0, 100).unwrap(),
            records,
            10_000,
            4,
        )
        .unwrap();
        let hits = (0..10_000)
            .filter(|_| live.contains(s.next_op().key()))
            .count();
        // Uniform over a key space 1.25x the loaded records: 80% hit an existing key.
        assert!((7_700..8_300).contains(&hits), "{hits}");
    }

    /// `upsert_uniform`: a range-write mix's upserts no longer follow the
    /// zipfian its ranges keep (the hottest key's share of upserts drops
    /// from percents to a few in 10,000).
    #[test]
    fn uniform_upserts_leave_the_ranges_skewed() {
        let top_share = |uniform: bool, pick: fn(&Op) -> bool| {
            let mut spec = Spec::named("range-write", 0.99, 100).unwrap();
            spec.upsert_uniform = uniform;
            let mut s = Stream::new(spec, 100_000, 40_000, 5).unwrap();
            let mut n: HashMap<Vec<u8>, u32> = HashMap::new();
            let mut all = 0;
            for _ in 0..40_000 {
                let o = s.next_op();
                if pick(&o) {
                    *n.entry(o.key().to_vec()).or_default() += 1;
                    all += 1;
                }
            }
            *n.values().max().unwrap() as f64 / all as f64
        };
        let upsert = |o: &Op| matches!(o, Op::Insert(_));
        let scan = |o: &Op| matches!(o, Op::Scan(..));
        assert!(top_share(false, upsert) > 0.02);
        assert!(top_share(true, upsert) < 0.002);
        assert!(top_share(true, scan) > 0.02);
    }
}
