//! Fabric selection shared by `verbs`, `ycsb` and `check`: `--ms` as a count
//! (sim, loopback) or a memory-server address list (rdma), the RDMA flags, and
//! `--client I/N` (several client processes meeting at barriers); and the
//! `--mix` percentages of `verbs` and `ycsb`.

use anyhow::{anyhow, bail, Result};

/// `--ms`: a number of memory servers, or `HOST:PORT[,HOST:PORT..]` of
/// `dm-memserver` processes (MS id = position in the list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MsArg {
    Count(u16),
    Addrs(Vec<String>),
}

impl MsArg {
    /// Number of memory servers.
    pub fn count(&self) -> u16 {
        match self {
            MsArg::Count(n) => *n,
            MsArg::Addrs(a) => a.len().min(u16::MAX as usize) as u16,
        }
    }
}

/// Parses `--ms`: all digits is a count, otherwise a comma-separated list of
/// `HOST:PORT` entries (each checked for a port, not resolved here).
pub fn parse_ms(s: &str) -> Result<MsArg, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse()
            .map(MsArg::Count)
            .map_err(|e| format!("--ms {t}: {e}"));
    }
    let mut v = Vec::new();
    for p in t.split(',') {
        let p = p.trim();
        let ok = p
            .rsplit_once(':')
            .is_some_and(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok());
        if !ok {
            return Err(format!(
                "--ms entry {p:?} is neither a count nor HOST:PORT (e.g. 127.0.0.1:7471)"
            ));
        }
        v.push(p.to_string());
    }
    Ok(MsArg::Addrs(v))
}

/// Flags of `--fabric rdma`.
#[derive(clap::Args, Clone, Debug)]
pub struct RdmaArgs {
    /// RDMA device (e.g. rxe0, mlx5_0); default: the first one.
    #[arg(long)]
    pub rdma_device: Option<String>,
    /// GID index (default 1: soft-RoCE over lo; the RoCE v2 IPv4 entry on
    /// ConnectX).
    #[arg(long)]
    pub rdma_gid_index: Option<u8>,
    /// RC local ACK timeout exponent: each try waits 4.096 us * 2^N before a
    /// retransmission (7 retries, then the QP fails). Default: the backend's
    /// (`RdmaConfig::default()`, 18 = 1.07 s).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=31))]
    pub rdma_timeout: Option<u8>,
    /// Per-core staging MR (READ results, atomic old values, WRITEs too long
    /// to post inline), KiB. Smaller means less memory to zero and register
    /// per core (what a client's start-up costs in a TCG guest); a WR waits
    /// while the MR is full, and one longer than the whole MR fails with
    /// `OutOfBounds`. Default: the backend's (`RdmaConfig::default()`, 32 MiB).
    #[arg(long, value_parser = clap::value_parser!(u64).range(64..))]
    pub rdma_staging_kib: Option<u64>,
}

impl RdmaArgs {
    /// Refuses these flags unless the fabric is rdma (`rdma`): on sim and
    /// loopback they would be ignored.
    pub fn check(&self, rdma: bool) -> Result<()> {
        let set = [
            ("--rdma-device", self.rdma_device.is_some()),
            ("--rdma-gid-index", self.rdma_gid_index.is_some()),
            ("--rdma-timeout", self.rdma_timeout.is_some()),
            ("--rdma-staging-kib", self.rdma_staging_kib.is_some()),
        ];
        match set.iter().find(|(_, on)| *on) {
            Some((f, _)) if !rdma => bail!("{f} is for --fabric rdma"),
            _ => Ok(()),
        }
    }
}

/// Checks that `--ms` fits the fabric: a count for sim/loopback, addresses for rdma.
pub fn check_ms(ms: &MsArg, rdma: bool) -> Result<()> {
    match (ms, rdma) {
        (MsArg::Addrs(_), false) => {
            bail!("--ms HOST:PORT lists are for --fabric rdma; sim and loopback take a count")
        }
        (MsArg::Count(_), true) => {
            bail!("--fabric rdma needs --ms HOST:PORT[,HOST:PORT..] of running dm-memserver processes")
        }
        _ => Ok(()),
    }
}

/// Connects to the memory servers of `--ms`.
#[cfg(feature = "rdma")]
pub fn connect(ms: &MsArg, r: &RdmaArgs) -> Result<dm_verbs::rdma::RdmaFabric> {
    use dm_verbs::rdma::{parse_ms_list, RdmaConfig, RdmaFabric};
    check_ms(ms, true)?;
    let MsArg::Addrs(list) = ms else {
        unreachable!()
    };
    let addrs = parse_ms_list(&list.join(","))?;
    let mut cfg = RdmaConfig {
        device: r.rdma_device.clone(),
        gid_index: r.rdma_gid_index.unwrap_or(1),
        ..Default::default()
    };
    if let Some(t) = r.rdma_timeout {
        cfg.timers.timeout = t;
    }
    if let Some(k) = r.rdma_staging_kib {
        cfg.staging_bytes = k << 10;
    }
    Ok(RdmaFabric::connect(cfg, &addrs)?)
}

/// The error of `--fabric rdma` in a build without the `rdma` feature.
#[cfg(not(feature = "rdma"))]
pub fn no_rdma() -> anyhow::Error {
    anyhow::anyhow!(
        "this dm-bench was built without RDMA support: \
         cargo build --release -p dm-bench --features rdma"
    )
}

/// `--nic`: the sim's network-model preset (dm-verbs `NetModel::preset`).
#[derive(Clone, Copy, Debug, clap::ValueEnum, PartialEq, Eq)]
pub enum NicArg {
    /// 100 Gbps ConnectX-5, Sherman's testbed (the default).
    Cx5,
    /// 100 Gbps ConnectX-6, SMART's testbed.
    Cx6,
}

/// The sim's network model: a NIC preset and overrides of the parameters
/// that users most often set to their own cluster's (docs/simulator.md).
#[derive(clap::Args, Clone, Debug)]
pub struct SimNetArgs {
    /// Network-model preset of the sim fabric (docs/simulator.md).
    #[arg(long, value_enum, default_value = "cx5")]
    pub nic: NicArg,
    /// Override the preset's round trip of a small verb, virtual ns (at
    /// most 1 s = 1000000000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=MAX_SIM_NS))]
    pub rtt_ns: Option<u64>,
    /// Override how long a host-memory atomic holds its NIC bucket, virtual
    /// ns (at most 1 s = 1000000000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=MAX_SIM_NS))]
    pub host_atomic_ns: Option<u64>,
    /// Override how long a failed host-memory CAS holds its bucket, virtual
    /// ns (at most 1 s = 1000000000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=MAX_SIM_NS))]
    pub host_cas_fail_ns: Option<u64>,
    /// Override how long an atomic on the MS NIC's device (on-chip) memory
    /// holds its NIC bucket, virtual ns (at most 1 s = 1000000000; the
    /// presets' 9 ns is Sherman §4.3's ~110 Mops of on-chip CAS, a rate
    /// over many addresses).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=MAX_SIM_NS))]
    pub device_atomic_ns: Option<u64>,
    /// Override the address bits below a NIC atomic bucket's 12 bits (at
    /// most 63: the shift of a 64-bit offset).
    #[arg(long, value_parser = clap::value_parser!(u32).range(..=63))]
    pub atomic_bucket_shift: Option<u32>,
    /// MS NIC processing units, each QP's requests on one of them in
    /// order, a host atomic waiting for its bucket holding its PU
    /// (`dm_verbs::sim::NetModel::nic_pus`; at most 4096). Default: none.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub nic_pus: Option<u32>,
    /// Override the CS CPU charged per index operation, virtual ns (at most
    /// 1 s = 1000000000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=MAX_SIM_NS))]
    pub op_cpu_ns: Option<u64>,
    /// Take each post list at the simulated NICs in the order the cores'
    /// ticks make it, as the simulator did before 2026-11-27, instead of at
    /// its core's clock in virtual-time order across cores (the default:
    /// `NetModel::posts_in_time_order`; docs/simulator.md). Only to rerun
    /// a figure of before then.
    #[arg(long)]
    pub posts_in_tick_order: bool,
    /// Carry both directions of each simulated MS link (WRITE payloads in,
    /// READ responses out) on one resource, as the simulator did before
    /// 2026-11-27, instead of apart as a real link does (the default:
    /// `NetModel::full_duplex_ms_links`). Only to rerun a figure of before
    /// then.
    #[arg(long)]
    pub half_duplex_ms_links: bool,
    /// Make a simulated WRITE of at most 8 bytes (a lock release) wait at
    /// the MS NIC for the atomics queued on its word's bucket, as an FAA
    /// release does (`NetModel::word_writes_wait_atomics`; off by default,
    /// docs/simulator.md "Word WRITEs behind queued atomics"): the switch
    /// under which FG+'s WRITE release collapses under skew as the
    /// paper's did (issue 34).
    #[arg(long)]
    pub word_writes_wait_atomics: bool,
}

/// The longest simulated duration a timing flag takes, virtual ns (1 s):
/// far above any real verb or CPU cost, and far below where sums of them
/// would wrap the simulator's u64 clock.
pub const MAX_SIM_NS: u64 = 1_000_000_000;

impl SimNetArgs {
    /// The first of these flags given away from its default, if any: they
    /// set the sim fabric's model and change nothing on a wall-clock one.
    pub fn first_set(&self) -> Option<&'static str> {
        [
            (self.nic != NicArg::Cx5, "--nic"),
            (self.rtt_ns.is_some(), "--rtt-ns"),
            (self.host_atomic_ns.is_some(), "--host-atomic-ns"),
            (self.host_cas_fail_ns.is_some(), "--host-cas-fail-ns"),
            (self.device_atomic_ns.is_some(), "--device-atomic-ns"),
            (self.atomic_bucket_shift.is_some(), "--atomic-bucket-shift"),
            (self.nic_pus.is_some(), "--nic-pus"),
            (self.op_cpu_ns.is_some(), "--op-cpu-ns"),
            (self.posts_in_tick_order, "--posts-in-tick-order"),
            (self.half_duplex_ms_links, "--half-duplex-ms-links"),
            (self.word_writes_wait_atomics, "--word-writes-wait-atomics"),
        ]
        .into_iter()
        .find_map(|(set, flag)| set.then_some(flag))
    }

    /// The network model these flags select.
    pub fn net(&self) -> dm_verbs::sim::NetModel {
        let mut m = dm_verbs::sim::NetModel::preset(match self.nic {
            NicArg::Cx5 => dm_verbs::sim::Nic::Cx5,
            NicArg::Cx6 => dm_verbs::sim::Nic::Cx6,
        });
        if let Some(v) = self.nic_pus {
            m.nic_pus = v;
        }
        if let Some(v) = self.rtt_ns {
            m.rtt_ns = v;
        }
        if let Some(v) = self.host_atomic_ns {
            m.host_atomic_ns = v;
        }
        if let Some(v) = self.host_cas_fail_ns {
            m.host_cas_fail_ns = v;
        }
        if let Some(v) = self.device_atomic_ns {
            m.device_atomic_ns = v;
        }
        if let Some(v) = self.atomic_bucket_shift {
            m.atomic_bucket_shift = v;
        }
        if let Some(v) = self.op_cpu_ns {
            m.cpu.op_ns = v;
        }
        m.posts_in_time_order = !self.posts_in_tick_order;
        m.full_duplex_ms_links = !self.half_duplex_ms_links;
        m.word_writes_wait_atomics = self.word_writes_wait_atomics;
        m
    }
}

/// Parses `--mix`: `N` comma-separated whole percentages, each at most 100,
/// summing to 100 (summed without wrapping: `4294967295,0,0,0,101` is
/// refused, not read as 100); `names` (e.g. `"read,write,cas,faa"`) says
/// what they are in the error.
pub fn parse_percentages<const N: usize>(s: &str, names: &str) -> Result<[u32; N]> {
    let bad = || anyhow!("--mix needs {N} percentages ({names}) summing to 100, got {s:?}");
    let v: Vec<u32> = s
        .split(',')
        .map(|x| x.trim().parse())
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let v: [u32; N] = v.try_into().map_err(|_| bad())?;
    if v.iter().map(|&p| u64::from(p)).sum::<u64>() != 100 {
        return Err(bad());
    }
    Ok(v)
}

/// Parses `--client I/N` (`I < N`) into `(I, N)`.
pub fn parse_client(s: &str) -> Result<(usize, usize)> {
    let bad = || anyhow!("--client wants I/N with I < N, got {s:?}");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (i.trim().parse()?, n.trim().parse()?);
    if n == 0 || i >= n {
        return Err(bad());
    }
    if n > crate::barrier::MAX_PROCS {
        bail!(
            "--client I/N takes N <= {} (one byte of the barrier per client process)",
            crate::barrier::MAX_PROCS
        );
    }
    Ok((i, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ms_counts_and_lists() {
        assert_eq!(parse_ms("2"), Ok(MsArg::Count(2)));
        assert_eq!(
            parse_ms("127.0.0.1:7471, host:1"),
            Ok(MsArg::Addrs(vec!["127.0.0.1:7471".into(), "host:1".into()]))
        );
        assert_eq!(parse_ms("a:1,b:2").unwrap().count(), 2);
        for bad in ["", "host", "host:", ":1", "h:99999", "1,2", "99999999"] {
            assert!(parse_ms(bad).is_err(), "{bad}");
        }
        assert!(check_ms(&MsArg::Count(2), false).is_ok());
        assert!(check_ms(&MsArg::Count(2), true).is_err());
        assert!(check_ms(&MsArg::Addrs(vec!["a:1".into()]), false).is_err());
    }

    /// A sum that wrapped in `u32` to 100 ran another mix with exit 0.
    #[test]
    fn mix_percentages_do_not_wrap() {
        assert_eq!(
            parse_percentages::<4>("70,10,10,10", "r,w,c,f").unwrap(),
            [70, 10, 10, 10]
        );
        for bad in [
            "4294967295,0,0,101",
            "4294967295,1,0,100",
            "101,0,0,0",
            "50,50,0",
            "x,0,0,100",
        ] {
            assert!(parse_percentages::<4>(bad, "r,w,c,f").is_err(), "{bad}");
        }
    }

    #[test]
    fn client_processes_fit_the_barrier_bytes() {
        assert_eq!(parse_client("0/1").unwrap(), (0, 1));
        let n = crate::barrier::MAX_PROCS;
        assert_eq!(parse_client(&format!("{}/{n}", n - 1)).unwrap(), (n - 1, n));
        let e = parse_client(&format!("0/{}", n + 1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("one byte of the barrier per client process"),
            "{e}"
        );
        for bad in ["1/1", "0/0", "x/2", "2"] {
            assert!(parse_client(bad).is_err(), "{bad}");
        }
    }
}
