//! YCSB 0.11's request generators, with its semantics (core/.../generator/*.java):
//!
//! - [`fnvhash64`]: `Utils.FNVhash64`, FNV-1a over the 8 little-endian bytes of a
//!   long, then `Math.abs`. Load key *i* of a YCSB trace is `fnvhash64(i)`
//!   (`insertorder=hashed`), which the tests check against the real traces.
//! - [`Zipfian`]: `ZipfianGenerator`, Gray et al., "Quickly Generating
//!   Billion-Record Synthetic Databases" (SIGMOD'94): item 0 most popular.
//! - [`ScrambledZipfian`]: `ScrambledZipfianGenerator`: a zipfian over 10^10
//!   items whose draw is hashed with FNV into `[min, max]`, spreading the hot
//!   items over the key space. For theta 0.99 YCSB uses the precomputed
//!   `ZETAN = 26.46902820178302`; for other thetas it sums 10^10 terms, which we
//!   replace with an Euler–Maclaurin tail after 10^6 exact terms (relative error
//!   below 1e-9, checked against YCSB's constant in the tests).
//! - [`SkewedLatest`]: `SkewedLatestGenerator`: `latest - zipfian(latest)`, so the
//!   most recently inserted keys are the hottest (workload D).
//! - Uniform: `UniformLongGenerator`, `min + rand % (max-min+1)` style draws.
//!
//! Random numbers come from the caller's seeded RNG, so the same seed gives the
//! same stream (YCSB itself uses `ThreadLocalRandom`; streams are not bit-equal
//! to Java's, distributions are).

use rand::Rng;

/// `Utils.FNVhash64` of YCSB 0.11.
pub fn fnvhash64(val: u64) -> u64 {
    let mut v = val;
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= v & 0xff;
        v >>= 8;
        h = h.wrapping_mul(1_099_511_628_211);
    }
    // Math.abs on a long; Long.MIN_VALUE stays itself (and is then taken modulo as unsigned here).
    (h as i64).wrapping_abs() as u64
}

/// The zipfian constant YCSB uses by default.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// Items of the zipfian behind [`ScrambledZipfian`] (`ScrambledZipfianGenerator.ITEM_COUNT`).
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// YCSB's precomputed zeta(10^10, 0.99).
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// zeta(n, theta) = sum_{i=1..n} i^-theta: exact up to 10^6 terms, then an
/// Euler–Maclaurin estimate of the tail (YCSB sums every term).
pub fn zeta(n: u64, theta: f64) -> f64 {
    const EXACT: u64 = 1_000_000;
    let m = n.min(EXACT);
    let mut s = 0.0;
    for i in 1..=m {
        s += (i as f64).powf(-theta);
    }
    if n > m {
        let f = |x: f64| x.powf(-theta);
        let df = |x: f64| -theta * x.powf(-theta - 1.0);
        let (a, b) = (m as f64, n as f64);
        let integral = if (theta - 1.0).abs() < 1e-12 {
            (b / a).ln()
        } else {
            (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta)
        };
        // sum_{i=m+1}^{n} f(i) = integral + (f(b) - f(a))/2 + (f'(b) - f'(a))/12 - ...
        s += integral + (f(b) - f(a)) / 2.0 + (df(b) - df(a)) / 12.0;
    }
    s
}

/// `ZipfianGenerator` over `[base, base + items)`.
#[derive(Clone, Debug)]
pub struct Zipfian {
    base: u64,
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    zeta2: f64,
    count_for_zeta: u64,
}

impl Zipfian {
    /// Items `[min, max]` with constant `theta` in (0, 1); `zetan` precomputed or `None`.
    pub fn new(min: u64, max: u64, theta: f64, zetan: Option<f64>) -> Self {
        let items = max - min + 1;
        let zetan = zetan.unwrap_or_else(|| zeta(items, theta));
        let zeta2 = zeta(2, theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian {
            base: min,
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
            zeta2,
            count_for_zeta: items,
        }
    }

    /// Next value among the first `itemcount` items (YCSB `nextLong(itemcount)`):
    /// growing `itemcount` extends zeta incrementally, as YCSB does.
    pub fn next_among(&mut self, rng: &mut impl Rng, itemcount: u64) -> u64 {
        if itemcount > self.count_for_zeta {
            let mut s = self.zetan;
            for i in self.count_for_zeta..itemcount {
                s += ((i + 1) as f64).powf(-self.theta);
            }
            self.zetan = s;
            self.count_for_zeta = itemcount;
            self.eta = (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
                / (1.0 - self.zeta2 / self.zetan);
        }
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }

    /// Next value over all items.
    pub fn next(&mut self, rng: &mut impl Rng) -> u64 {
        self.next_among(rng, self.items)
    }
}

/// `ScrambledZipfianGenerator` over `[min, max]`.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    min: u64,
    itemcount: u64,
    gen: Zipfian,
}

impl ScrambledZipfian {
    pub fn new(min: u64, max: u64, theta: f64) -> Self {
        let zetan = if theta == ZIPFIAN_CONSTANT {
            SCRAMBLED_ZETAN
        } else {
            zeta(SCRAMBLED_ITEM_COUNT + 1, theta)
        };
        ScrambledZipfian {
            min,
            itemcount: max - min + 1,
            gen: Zipfian::new(0, SCRAMBLED_ITEM_COUNT, theta, Some(zetan)),
        }
    }

    pub fn next(&mut self, rng: &mut impl Rng) -> u64 {
        self.min + fnvhash64(self.gen.next(rng)) % self.itemcount
    }
}

/// `SkewedLatestGenerator`: `latest - zipfian(latest)`; `latest` is the number
/// of records inserted so far minus one (YCSB's acknowledged counter).
#[derive(Clone, Debug)]
pub struct SkewedLatest {
    zipf: Zipfian,
}

impl SkewedLatest {
    /// `records`: records loaded before the run.
    pub fn new(records: u64) -> Self {
        SkewedLatest {
            zipf: Zipfian::new(0, records.max(1) - 1, ZIPFIAN_CONSTANT, None),
        }
    }

    /// A key number among `0..=last`.
    pub fn next(&mut self, rng: &mut impl Rng, last: u64) -> u64 {
        last - self.zipf.next_among(rng, last + 1).min(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn fnv_matches_the_real_trace() {
        // First load keys of ../shared/data/ycsb/load_randint_workloada (YCSB 0.11 output).
        assert_eq!(fnvhash64(0), 6284781860667377211);
        assert_eq!(fnvhash64(1), 8517097267634966620);
        assert_eq!(fnvhash64(2), 1820151046732198393);
    }

    #[test]
    fn zeta_tail_matches_ycsb_constant() {
        let z = zeta(SCRAMBLED_ITEM_COUNT + 1, ZIPFIAN_CONSTANT);
        assert!((z - SCRAMBLED_ZETAN).abs() / SCRAMBLED_ZETAN < 1e-9, "{z}");
        // Exact below the tail threshold.
        let exact: f64 = (1..=1000u64).map(|i| (i as f64).powf(-0.9)).sum();
        assert!((zeta(1000, 0.9) - exact).abs() < 1e-12);
    }

    #[test]
    fn scrambled_zipfian_has_ycsb_skew() {
        // The real trace (200k records, 200k ops of workload A/C) shows the hottest
        // key at about 3.8% of ops and about 94,500 distinct keys touched.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut g = ScrambledZipfian::new(0, 199_999, ZIPFIAN_CONSTANT);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..200_000 {
            *counts.entry(g.next(&mut rng)).or_insert(0u32) += 1;
        }
        let hottest = *counts.values().max().unwrap() as f64 / 200_000.0;
        assert!(
            (0.030..0.046).contains(&hottest),
            "hottest key share {hottest}"
        );
        assert!(
            (90_000..99_000).contains(&counts.len()),
            "distinct keys {}",
            counts.len()
        );
    }

    #[test]
    fn latest_prefers_recent_keys() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let mut g = SkewedLatest::new(1000);
        let recent = (0..10_000).filter(|_| g.next(&mut rng, 999) >= 990).count();
        assert!(recent > 3_000, "{recent}");
        assert!((0..1000).all(|_| g.next(&mut rng, 1500) <= 1500));
    }
}
