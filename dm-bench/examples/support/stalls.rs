//! How often the platform takes a CPU away from a spinning thread: the
//! floor under any wall-clock tail a busy-polling core can offer.
//!
//! A thread pinned to the CPU reads the monotonic clock in a tight loop
//! for a while; a gap of 30 µs or more between two reads is a stall (an
//! interrupt, a timer tick, a hypervisor exit, another thread). Requests
//! queued for a core while its CPU stalls wait at least that long, so a
//! p99 latency below the stall length needs fewer than 1% of requests to
//! meet a stall (see `docs/experiments/service.md`).

use std::time::{Duration, Instant};

/// Stalls seen on one CPU.
pub struct Stalls {
    /// The CPU probed (`None`: the calling thread, unpinned).
    pub cpu: Option<usize>,
    /// Gaps of at least 30 µs per second of probing.
    pub per_s: f64,
    /// Wall µs lost in them per second (the stalled fraction, in µs/s).
    pub lost_us_per_s: f64,
    /// The longest gap, µs.
    pub max_us: f64,
}

impl Stalls {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "cpu": self.cpu,
            "stalls_ge30us_per_s": (self.per_s * 10.0).round() / 10.0,
            "stalled_us_per_s": self.lost_us_per_s.round(),
            "max_us": self.max_us.round(),
        })
    }
}

/// Spins `ms` on each CPU of `cpus` in turn (pinned; unpinned, once, if
/// `cpus` is empty) and counts the stalls, on a thread of its own: the
/// caller's CPU set stays as it was (the runtime pins its cores among the
/// CPUs of the thread that starts it).
pub fn probe(cpus: Vec<core_affinity::CoreId>, ms: u64) -> Vec<Stalls> {
    std::thread::spawn(move || probe_here(&cpus, ms))
        .join()
        .expect("the stall probe does not panic")
}

fn probe_here(cpus: &[core_affinity::CoreId], ms: u64) -> Vec<Stalls> {
    let run = |cpu: Option<core_affinity::CoreId>| {
        if let Some(c) = cpu {
            core_affinity::set_for_current(c);
        }
        let (t0, span) = (Instant::now(), Duration::from_millis(ms));
        let (mut last, mut n, mut lost, mut max) = (t0, 0u64, Duration::ZERO, Duration::ZERO);
        loop {
            let now = Instant::now();
            let gap = now - last;
            if gap >= Duration::from_micros(30) {
                n += 1;
                lost += gap;
                max = max.max(gap);
            }
            last = now;
            if now - t0 >= span {
                break;
            }
        }
        let secs = (last - t0).as_secs_f64().max(1e-9);
        Stalls {
            cpu: cpu.map(|c| c.id),
            per_s: n as f64 / secs,
            lost_us_per_s: lost.as_secs_f64() * 1e6 / secs,
            max_us: max.as_secs_f64() * 1e6,
        }
    };
    if cpus.is_empty() {
        return vec![run(None)];
    }
    cpus.iter().map(|&c| run(Some(c))).collect()
}
