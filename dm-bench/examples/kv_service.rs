//! A key-value service over one dm index (issue 31): a tokio TCP server
//! speaking a line protocol, each request handed to a dm core through the
//! index's `Client`.
//!
//! Protocol (keys are decimal u64, stored as 8 big-endian bytes):
//! `GET k` -> `VAL v` | `NONE`; `PUT k v` -> `OK`; `DEL k` -> `DELETED` |
//! `NONE`; `SCAN k n` -> `ENTRIES c k1=v1 k2=v2 ...`; errors `ERR message`.
//!
//! `--selftest N`: opens `--connections C` connections to itself and sends
//! N requests; connection i owns the keys `k % C == i`, so its model of
//! those keys is exact and every answer (scans included, on its own keys)
//! is checked. `--json FILE` writes the figures; a mismatch exits 1.
//!
//! Latencies: `e2e` at the client (request written to reply read);
//! `in_core` inside the dm core (the index operation); `handoff`, what the
//! submission path adds without the network: from the handler's call into
//! the core (submission queue, the core's next round) plus from the
//! operation's end back to the handler's waker (reply cell, wake);
//! `resume`, from that wake until tokio polls the handler again, is the
//! caller's own executor's queueing (16 connections on one tokio thread
//! keep it busy) and is reported apart.
//!
//! Run: `cargo run --release -p dm-bench --example kv_service -- --index
//! sherman --selftest 20000`.

#[path = "support/stalls.rs"]
mod stalls;
#[path = "support/upfront.rs"]
mod upfront;

use anyhow::Context as _;
use clap::Parser;
use dm_index::{Client, Cluster, FabricSpec, IndexConfig, IndexKind, ServiceConfig};
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

#[derive(Parser, Debug, Clone)]
struct Args {
    /// The index (`dm-bench ycsb --index` names).
    #[arg(long, default_value = "smart")]
    index: String,
    /// sim or loopback (rdma: build with `--features rdma` and pass `--ms`).
    #[arg(long, default_value = "loopback")]
    fabric: String,
    /// Memory servers for `--fabric rdma` (host:port, comma-separated).
    #[arg(long, value_delimiter = ',')]
    ms: Vec<String>,
    /// rdma: device, GID index, per-core staging MR in KiB.
    #[arg(long)]
    rdma_device: Option<String>,
    #[arg(long, default_value_t = 1)]
    rdma_gid_index: u8,
    #[arg(long, default_value_t = 32 << 10)]
    rdma_staging_kib: u64,
    /// Process I of N sharing the index "kv" (rdma): it runs compute
    /// server I of N, and its self-test connection c owns the keys
    /// `k % (N * C) == I * C + c`, so several processes test one index.
    #[arg(long, default_value = "0/1")]
    share: String,
    /// dm cores (one compute server).
    #[arg(long, default_value_t = 1)]
    cores: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Send N requests (at least 1) to itself and verify every answer, then
    /// exit.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    selftest: Option<u64>,
    /// Client connections of the self-test.
    #[arg(long, default_value_t = 16)]
    connections: u64,
    /// Keys of the self-test (0..keys).
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Leave the threads unpinned (default: dm cores on CPUs 0.., tokio on
    /// the next CPU).
    #[arg(long)]
    no_pin: bool,
    /// Before serving, leave the cluster idle this many ms and report the
    /// process CPU time it burnt meanwhile (`idle_cpu_ms_per_s`).
    #[arg(long, default_value_t = 0)]
    idle_ms: u64,
    /// Wall µs an idle dm core polls before it parks its thread (the
    /// library's default is 50; a service whose requests arrive further
    /// apart than the spin pays a thread wake-up, ~25 µs here, on each).
    #[arg(long, default_value_t = 1000)]
    spin_us: u64,
    /// Before starting the cluster, spin this many ms on each CPU the
    /// example uses and report how often the platform stalls it
    /// (`cpu_stalls`: the floor under the handoff tail; 0: skip).
    #[arg(long, default_value_t = 200)]
    probe_ms: u64,
    /// Write the self-test's figures as JSON here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// Latencies the server records (ns).
struct Lat {
    in_core: Histogram<u64>,
    handoff: Histogram<u64>,
    into_core: Histogram<u64>,
    back: Histogram<u64>,
    resume: Histogram<u64>,
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds")
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let kind = IndexKind::named(&a.index)?;
    let fabric = match a.fabric.as_str() {
        "sim" => FabricSpec::Sim(Default::default()),
        "loopback" => FabricSpec::Loopback(Default::default()),
        #[cfg(feature = "rdma")]
        "rdma" => FabricSpec::Rdma {
            cfg: dm_verbs::rdma::RdmaConfig {
                device: a.rdma_device.clone(),
                gid_index: a.rdma_gid_index,
                staging_bytes: a.rdma_staging_kib << 10,
                ..Default::default()
            },
            memory_servers: a.ms.iter().map(|s| s.parse()).collect::<Result<_, _>>()?,
        },
        f => anyhow::bail!("--fabric {f:?}: sim or loopback (rdma needs --features rdma)"),
    };
    let (i, n) = upfront::share(&a.share)?;
    if n > 1 && kind == IndexKind::Dex {
        // DEX routes a key to a core of its owner CS (§4, §7); between
        // processes that is the application's job, which this example
        // does not do.
        anyhow::bail!("--share N > 1 is not for dex: each process would get other CSs' keys");
    }
    let classes = n * a.connections;
    if a.selftest.is_some() && (a.connections == 0 || a.keys < classes) {
        anyhow::bail!("--selftest needs --connections >= 1 and --keys >= N x --connections");
    }
    let listener = upfront::listen(&a.listen)?;
    let json_file = a.json.as_deref().map(upfront::json_file).transpose()?;
    let stalls = (a.probe_ms > 0 && a.selftest.is_some()).then(|| {
        // The dm cores' CPUs and tokio's (see the pinning below).
        let cpus = core_affinity::get_core_ids().unwrap_or_default();
        let used = if a.no_pin {
            Vec::new()
        } else {
            cpus[..cpus.len().min(a.cores as usize + 1)].to_vec()
        };
        stalls::probe(used, a.probe_ms)
    });
    let cluster = Cluster::builder()
        .fabric(fabric)
        .compute_servers(i as u16, 1)
        .total_compute_servers(n as u16)
        .cores_per_cs(a.cores)
        .service(ServiceConfig {
            pin: !a.no_pin,
            spin_ns: a.spin_us * 1000,
            ..Default::default()
        })
        .build()?;
    if !a.no_pin {
        // dm cores on CPUs 0..cores, tokio on the next one (if any).
        let cpus = core_affinity::get_core_ids().unwrap_or_default();
        if let Some(c) = cpus.get(a.cores as usize) {
            core_affinity::set_for_current(*c);
        }
    }
    let index = cluster.open_or_create_index("kv", IndexConfig::new(kind))?;
    let idle = (a.idle_ms > 0).then(|| idle_cpu(a.idle_ms));
    // Parks before serving (the idle period's) are not the self-test's.
    let idle_parks = {
        let (p, w) = cluster.parks_and_wakes();
        (p.iter().sum::<u64>(), w.iter().sum::<u64>())
    };
    let lat = Arc::new(Mutex::new(Lat {
        in_core: hist(),
        handoff: hist(),
        into_core: hist(),
        back: hist(),
        resume: hist(),
    }));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let res = rt.block_on(serve(a.clone(), listener, index, lat.clone()));
    let (parks0, wakes0) = idle_parks;
    let stats = cluster.shutdown();
    let parks = stats.parks.iter().sum::<u64>() - parks0;
    let wakes = stats.wakes.iter().sum::<u64>() - wakes0;
    for (name, s) in &stats.indexes {
        eprintln!(
            "index {name}: {} ops ({} errors), {:.2} READs/op",
            s.ops(),
            s.errors,
            s.verbs.read as f64 / s.ops().max(1) as f64
        );
    }
    let Some(report) = res? else { return Ok(()) };
    let lat = lat.lock().unwrap();
    let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let j = serde_json::json!({
        "index": a.index,
        "requests": report.requests,
        "verified": report.verified,
        "mismatches": report.mismatches,
        "throughput_kops": report.requests as f64 / report.wall.as_secs_f64() / 1000.0,
        "e2e_p50_us": us(&report.e2e, 0.5),
        "e2e_p99_us": us(&report.e2e, 0.99),
        "in_core_p50_us": us(&lat.in_core, 0.5),
        "handoff_p50_us": us(&lat.handoff, 0.5),
        "handoff_p99_us": us(&lat.handoff, 0.99),
        "into_core_p50_us": us(&lat.into_core, 0.5),
        "into_core_p99_us": us(&lat.into_core, 0.99),
        "back_p50_us": us(&lat.back, 0.5),
        "back_p99_us": us(&lat.back, 0.99),
        "resume_p50_us": us(&lat.resume, 0.5),
        "idle_cpu_ms_per_s": idle,
        "core_parks": parks,
        "core_wakes": wakes,
        "cpu_stalls": stalls.map(|v| v.iter().map(|s| s.json()).collect::<Vec<_>>()),
    });
    println!("{j}");
    if let (Some(mut f), Some(p)) = (json_file, &a.json) {
        let text = serde_json::to_string_pretty(&j)? + "\n";
        std::io::Write::write_all(&mut f, text.as_bytes())
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    if report.mismatches > 0 || report.verified < report.requests {
        anyhow::bail!(
            "{} of {} answers wrong, {} verified",
            report.mismatches,
            report.requests,
            report.verified
        );
    }
    Ok(())
}

/// Sleeps `ms` and returns the process CPU time (ms) per second of it: what
/// the idle cluster's core threads burn (spinning, then parked).
fn idle_cpu(ms: u64) -> f64 {
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
    };
    let c0 = cpu();
    std::thread::sleep(Duration::from_millis(ms));
    (cpu() - c0) * 1000.0 / ms as f64
}

/// Serves on `listener` until the self-test ends (or for ever without one).
async fn serve(
    a: Args,
    listener: std::net::TcpListener,
    index: Client,
    lat: Arc<Mutex<Lat>>,
) -> anyhow::Result<Option<Report>> {
    let listener = TcpListener::from_std(listener)?;
    let addr = listener.local_addr()?;
    eprintln!("kv_service: index {} listening on {addr}", a.index);
    let accept = tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let (index, lat) = (index.clone(), lat.clone());
            tokio::spawn(async move {
                if let Err(e) = connection(s, index, lat).await {
                    eprintln!("connection: {e}");
                }
            });
        }
    });
    let Some(n) = a.selftest else {
        accept.await?;
        return Ok(None);
    };
    let r = selftest(&a, addr, n).await;
    accept.abort();
    r.map(Some)
}

/// One client connection: a request per line, a reply per line.
async fn connection(s: TcpStream, index: Client, lat: Arc<Mutex<Lat>>) -> anyhow::Result<()> {
    s.set_nodelay(true)?;
    let (r, mut w) = s.into_split();
    let mut lines = BufReader::new(r).lines();
    while let Some(line) = lines.next_line().await? {
        let reply = match handle(&line, &index).await {
            Ok((reply, t)) => {
                let mut l = lat.lock().unwrap();
                l.in_core.saturating_record(t.in_core.as_nanos() as u64);
                l.handoff.saturating_record(t.handoff().as_nanos() as u64);
                l.resume.saturating_record(t.resume.as_nanos() as u64);
                l.into_core.saturating_record(t.into_core.as_nanos() as u64);
                l.back.saturating_record(t.back.as_nanos() as u64);
                reply
            }
            Err(e) => format!("ERR {e}"),
        };
        w.write_all(reply.as_bytes()).await?;
        w.write_all(b"\n").await?;
    }
    Ok(())
}

/// Where one request's time went between the tokio task and the dm core.
struct Times {
    /// Submission to the job starting on its core.
    into_core: Duration,
    /// The index operation on the core.
    in_core: Duration,
    /// The operation's end to the caller's waker being called.
    back: Duration,
    /// The wake to tokio polling the task again (tokio's own queueing).
    resume: Duration,
}

impl Times {
    /// What the submission path adds: into the core and back to the
    /// caller's waker (not the caller's executor's queueing: `resume`).
    fn handoff(&self) -> Duration {
        self.into_core + self.back
    }
}

/// Records when a future's waker is called (the last time before it
/// completes), forwarding the wake.
struct Stamp {
    at: Mutex<Option<Instant>>,
    inner: Mutex<Option<Waker>>,
}

impl Wake for Stamp {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        *self.at.lock().unwrap() = Some(Instant::now());
        if let Some(w) = self.inner.lock().unwrap().as_ref() {
            w.wake_by_ref();
        }
    }
}

/// `fut` with its wakes stamped.
async fn stamped<F: Future>(fut: F) -> (F::Output, Option<Instant>) {
    let stamp = Arc::new(Stamp {
        at: Mutex::new(None),
        inner: Mutex::new(None),
    });
    let waker = Waker::from(stamp.clone());
    let mut fut = std::pin::pin!(fut);
    let out = std::future::poll_fn(|cx| {
        *stamp.inner.lock().unwrap() = Some(cx.waker().clone());
        fut.as_mut().poll(&mut Context::from_waker(&waker))
    })
    .await;
    let at = *stamp.at.lock().unwrap();
    (out, at)
}

/// Runs one request: its reply and where its time went.
async fn handle(line: &str, index: &Client) -> anyhow::Result<(String, Times)> {
    let mut it = line.split_ascii_whitespace();
    let cmd = it.next().unwrap_or("");
    let mut num = || -> anyhow::Result<u64> {
        Ok(it
            .next()
            .ok_or_else(|| anyhow::anyhow!("missing argument"))?
            .parse()?)
    };
    let key = num()?.to_be_bytes();
    let arg = match cmd {
        "PUT" | "SCAN" => num()?,
        "GET" | "DEL" => 0,
        c => anyhow::bail!("unknown command {c:?}"),
    };
    let core = index.core_of(&key).ok();
    let cmd = cmd.to_string();
    let t0 = Instant::now();
    let (r, woken) = stamped(index.run(core, move |ix| async move {
        let start = Instant::now();
        let reply = match cmd.as_str() {
            "GET" => match ix.get(&key).await? {
                Some(v) => format!("VAL {v}"),
                None => "NONE".into(),
            },
            "PUT" => ix.insert(&key, arg).await.map(|_| "OK".to_string())?,
            "DEL" => if ix.remove(&key).await? {
                "DELETED"
            } else {
                "NONE"
            }
            .into(),
            _ => {
                let e = ix.scan(&key, arg as usize).await?;
                let mut s = format!("ENTRIES {}", e.len());
                for (k, v) in e {
                    let k = u64::from_be_bytes(k.as_slice().try_into().unwrap_or([0; 8]));
                    s.push_str(&format!(" {k}={v}"));
                }
                s
            }
        };
        Ok((reply, start, Instant::now()))
    }))
    .await;
    let back_at = Instant::now();
    let (reply, start, end) = r?;
    // Completed without waiting (never woken): nothing came back late.
    let woken = woken.unwrap_or(back_at).max(end);
    Ok((
        reply,
        Times {
            into_core: start.saturating_duration_since(t0),
            in_core: end - start,
            back: woken - end,
            resume: back_at.saturating_duration_since(woken),
        },
    ))
}

/// What the self-test saw.
struct Report {
    requests: u64,
    verified: u64,
    mismatches: u64,
    wall: Duration,
    e2e: Histogram<u64>,
}

/// `C` connections, each sending its share of `n` requests on its own keys
/// and checking every reply against its model.
async fn selftest(a: &Args, addr: std::net::SocketAddr, n: u64) -> anyhow::Result<Report> {
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    let (p, procs) = upfront::share(&a.share)?;
    for c in 0..a.connections {
        let share = n / a.connections + u64::from(c < n % a.connections);
        // This connection's key class of all processes' connections.
        let (keys, conns, seed) = (a.keys, procs * a.connections, a.seed);
        let c = p * a.connections + c;
        tasks.push(tokio::spawn(async move {
            client(addr, c, conns, keys, share, seed).await
        }));
    }
    let mut r = Report {
        requests: 0,
        verified: 0,
        mismatches: 0,
        wall: Duration::ZERO,
        e2e: hist(),
    };
    for t in tasks {
        let (req, ok, e2e) = t.await??;
        r.requests += req;
        r.verified += ok;
        r.mismatches += req - ok;
        r.e2e.add(&e2e)?;
    }
    r.wall = t0.elapsed();
    Ok(r)
}

/// Connection `c` of `conns`: `share` requests on the keys `k % conns == c`
/// below `keys`; returns (requests, verified, e2e latencies).
async fn client(
    addr: std::net::SocketAddr,
    c: u64,
    conns: u64,
    keys: u64,
    share: u64,
    seed: u64,
) -> anyhow::Result<(u64, u64, Histogram<u64>)> {
    let s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let (r, mut w) = s.into_split();
    let mut lines = BufReader::new(r).lines();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ (c + 1).wrapping_mul(0x9e37_79b9));
    let mut model = std::collections::BTreeMap::<u64, u64>::new();
    let (mut ok, mut e2e) = (0, hist());
    let own = (keys - c).div_ceil(conns);
    for i in 0..share {
        let k = c + rng.gen_range(0..own) * conns;
        let p = rng.gen_range(0..100);
        let n = rng.gen_range(1..=16usize);
        let req = match p {
            0..=44 => format!("GET {k}"),
            45..=79 => format!("PUT {k} {}", i + 1),
            80..=89 => format!("DEL {k}"),
            _ => format!("SCAN {k} {n}"),
        };
        let t = Instant::now();
        w.write_all(req.as_bytes()).await?;
        w.write_all(b"\n").await?;
        let reply = lines
            .next_line()
            .await?
            .ok_or_else(|| anyhow::anyhow!("server closed the connection"))?;
        e2e.saturating_record(t.elapsed().as_nanos() as u64);
        let good = match p {
            0..=44 => reply == model.get(&k).map_or("NONE".into(), |v| format!("VAL {v}")),
            45..=79 => {
                model.insert(k, i + 1);
                reply == "OK"
            }
            80..=89 => {
                reply
                    == if model.remove(&k).is_some() {
                        "DELETED"
                    } else {
                        "NONE"
                    }
            }
            _ => scan_matches(&reply, (k, n), c, conns, &model),
        };
        if good {
            ok += 1;
        } else {
            eprintln!("connection {c}: {req:?} -> {reply:?} (model disagrees)");
        }
    }
    Ok((share, ok, e2e))
}

/// A scan's reply, on this connection's keys: in key order from `from`,
/// and exactly the model's own keys (with their values) in the range the
/// reply covers (to its last key if it holds the `n` asked for, else to
/// the end of the key space).
fn scan_matches(
    reply: &str,
    (from, n): (u64, usize),
    c: u64,
    conns: u64,
    model: &std::collections::BTreeMap<u64, u64>,
) -> bool {
    let mut it = reply.split_ascii_whitespace();
    if it.next() != Some("ENTRIES") {
        return false;
    }
    let Some(Ok(count)) = it.next().map(str::parse::<usize>) else {
        return false;
    };
    let mut got = Vec::new();
    for e in it {
        let Some((k, v)) = e.split_once('=') else {
            return false;
        };
        let (Ok(k), Ok(v)) = (k.parse::<u64>(), v.parse::<u64>()) else {
            return false;
        };
        got.push((k, v));
    }
    if got.len() != count
        || got.windows(2).any(|w| w[0].0 >= w[1].0)
        || got.first().is_some_and(|f| f.0 < from)
    {
        return false;
    }
    let end = if count == n {
        got.last().map_or(from, |l| l.0)
    } else {
        u64::MAX
    };
    let own: Vec<(u64, u64)> = got
        .iter()
        .copied()
        .filter(|(k, _)| k % conns == c)
        .collect();
    let want: Vec<(u64, u64)> = model.range(from..=end).map(|(k, v)| (*k, *v)).collect();
    own == want
}

#[cfg(test)]
mod tests {
    /// `--selftest 0` would report a vacuous self-test.
    #[test]
    fn selftest_sends_at_least_one_request() {
        use clap::Parser;
        assert!(super::Args::try_parse_from(["kv_service", "--selftest", "0"]).is_err());
        assert!(super::Args::try_parse_from(["kv_service", "--selftest", "1"]).is_ok());
    }
}
