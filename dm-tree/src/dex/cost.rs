//! DEX's cost model (§6.1): offload a miss at level `l` when the moving
//! average of offload RPC latency is below the estimate of fetching the
//! rest of the path one-sidedly, `(l + 1) * (T_read + T_search) * alpha`,
//! where `T_read` is the moving average of one node fetch (READ) latency.
//! Both averages cover the last `window` samples (50). The first `window`
//! decisions fetch and the next `window` offload, to fill both windows
//! (the paper's code); afterwards `explore` (1%) of the decisions take the
//! other action so that neither average goes stale. Latencies are in ns of
//! the core's clock (virtual on sim).

use super::config::DexConfig;
use std::collections::VecDeque;

pub(crate) struct CostModel {
    window: usize,
    search_ns: f64,
    alpha: f64,
    explore: f64,
    reads: VecDeque<u64>,
    read_sum: u64,
    rpcs: VecDeque<u64>,
    rpc_sum: u64,
    decisions: u64,
    rng: u64,
}

impl CostModel {
    pub fn new(c: &DexConfig, seed: u64) -> Self {
        CostModel {
            window: c.window.max(1),
            search_ns: c.search_ns as f64,
            alpha: c.alpha,
            explore: c.explore,
            reads: VecDeque::new(),
            read_sum: 0,
            rpcs: VecDeque::new(),
            rpc_sum: 0,
            decisions: 0,
            rng: seed | 1,
        }
    }

    fn push(q: &mut VecDeque<u64>, sum: &mut u64, w: usize, ns: u64) {
        q.push_back(ns);
        *sum += ns;
        if q.len() > w {
            *sum -= q.pop_front().unwrap();
        }
    }

    /// One node fetched by READ in `ns`.
    pub fn record_read(&mut self, ns: u64) {
        Self::push(&mut self.reads, &mut self.read_sum, self.window, ns);
    }

    /// One offload RPC answered in `ns`.
    pub fn record_offload(&mut self, ns: u64) {
        Self::push(&mut self.rpcs, &mut self.rpc_sum, self.window, ns);
    }

    /// (average READ fetch, average offload RPC), ns; 0 without samples.
    pub fn averages(&self) -> (u64, u64) {
        let avg = |s: u64, n: usize| if n == 0 { 0 } else { s / n as u64 };
        (
            avg(self.read_sum, self.reads.len()),
            avg(self.rpc_sum, self.rpcs.len()),
        )
    }

    /// Whether to offload a miss of a node at `level` (§6.1).
    pub fn offload(&mut self, level: u8) -> bool {
        self.decisions += 1;
        let w = self.window as u64;
        if self.decisions <= w {
            return false;
        }
        if self.decisions <= 2 * w {
            return true;
        }
        let (read, rpc) = self.averages();
        let est = (level as f64 + 1.0) * (read as f64 + self.search_ns) * self.alpha;
        let pick = (rpc as f64) < est;
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let u = (self.rng >> 11) as f64 / (1u64 << 53) as f64;
        if u < self.explore {
            !pick
        } else {
            pick
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warms_up_then_compares_the_averages() {
        let c = DexConfig {
            window: 2,
            explore: 0.0,
            ..Default::default()
        };
        let mut m = CostModel::new(&c, 7);
        assert!(!m.offload(1) && !m.offload(1));
        assert!(m.offload(1) && m.offload(1));
        // Fetching a node: 2000 ns; an RPC: 3000 ns.
        for _ in 0..3 {
            m.record_read(2000);
            m.record_offload(3000);
        }
        assert_eq!(m.averages(), (2000, 3000));
        // Level 0: (1)(2040)(1.2) = 2448 < 3000: fetch. Level 1: 4896 > 3000: offload.
        assert!(!m.offload(0));
        assert!(m.offload(1));
    }
}
