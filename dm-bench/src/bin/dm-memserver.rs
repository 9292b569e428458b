//! `dm-memserver`: one memory server (MS) on real RDMA.
//!
//! Registers a zeroed host region of `--region-mb` MiB as one MR, serves the
//! chunk allocator (RPC 0), the NAM designs' handler (RPC 16,
//! `dm_tree::nam::ms`) and the other built-in RPC handlers to compute
//! servers, and exchanges QP endpoints with them over TCP on `--listen` (one
//! connection per QP; see `dm_verbs::rdma::wire`). Stops cleanly on SIGINT or
//! SIGTERM. Logs with `tracing` (`RUST_LOG=debug` for every QP and RPC).
//!
//! ```text
//! dm-memserver --listen 0.0.0.0:7471 --id 0 --region-mb 1024 --device rxe0 --gid-index 1
//! ```

use clap::Parser;
use dm_verbs::ms::RpcRegistry;
use dm_verbs::rdma::server::{MemServer, MemServerConfig};
use dm_verbs::rdma::RdmaConfig;
use dm_verbs::MsConfig;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "dm-memserver",
    version,
    about = "A memory server for dm on real RDMA"
)]
struct Args {
    /// TCP address for QP handshakes.
    #[arg(long, default_value = "0.0.0.0:7471")]
    listen: String,
    /// This MS's id: its position in the clients' `--ms` list.
    #[arg(long, default_value_t = 0)]
    id: u16,
    /// Registered host region, MiB (pinned: it is all committed).
    #[arg(long, default_value_t = 1024)]
    region_mb: u64,
    /// Chunk handed out per allocation RPC, KiB (Sherman: 8 MiB).
    #[arg(long, default_value_t = 8192)]
    chunk_kib: u64,
    /// RDMA device (rxe0, mlx5_0); default: the first.
    #[arg(long)]
    device: Option<String>,
    #[arg(long, default_value_t = 1)]
    port: u8,
    /// GID index: 1 on soft-RoCE over lo; the RoCE v2 IPv4 entry on ConnectX.
    #[arg(long, default_value_t = 1)]
    gid_index: u8,
    /// Device (on-chip) memory to offer, KiB (Sherman §4.3: 256 KiB on
    /// ConnectX-5, for the global lock table). Allocated with `ibv_alloc_dm`
    /// if the NIC has that much; otherwise (rxe: none) the server offers
    /// none, logs why, and clients keep their locks in host memory. 0 = none.
    #[arg(long, default_value_t = 256)]
    device_kib: u64,
    /// RPC receive slots per QP (RPCs a client core may have in flight).
    #[arg(long, default_value_t = 32)]
    rpc_slots: u32,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let a = Args::parse();
    if let Err(e) = run(a) {
        tracing::error!("{e:#}");
        eprintln!("dm-memserver: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(a: Args) -> anyhow::Result<()> {
    if a.region_mb == 0 || a.chunk_kib == 0 {
        anyhow::bail!("--region-mb and --chunk-kib must be positive");
    }
    let cfg = MemServerConfig {
        ms_id: a.id,
        ms: MsConfig {
            region_bytes: a.region_mb << 20,
            chunk_bytes: a.chunk_kib << 10,
            device_bytes: a.device_kib << 10,
            cores: 1,
        },
        rpc_slots: a.rpc_slots,
        rdma: RdmaConfig {
            device: a.device,
            port: a.port,
            gid_index: a.gid_index,
            ..Default::default()
        },
        ..Default::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let mut registry = RpcRegistry::with_builtins();
    // Ziegler et al.'s coarse-grained and hybrid B+trees (dm_tree::nam).
    registry.register(dm_tree::nam::RPC_NAM, dm_tree::nam::ms::handler());
    registry.register(dm_tree::dex::RPC_DEX, dm_tree::dex::ms::handler());
    let mut s = MemServer::bind(cfg, registry, &a.listen)?;
    tracing::info!(listen = %s.local_addr()?, "{}", s.describe());
    // A line scripts can wait for.
    println!("dm-memserver ready on {}", s.local_addr()?);
    let t0 = std::time::Instant::now();
    s.run(&stop)?;
    let (waits, idle_ns) = s.idle_waits();
    let up = t0.elapsed().as_secs_f64();
    // Scripts read this line (issue 32, item 5: wake-ups of an idle server).
    println!(
        "dm-memserver stopped: up {up:.1} s, blocked idle {:.1} s in {waits} waits ({:.1} wake-ups per idle second)",
        idle_ns as f64 / 1e9,
        waits as f64 / (idle_ns as f64 / 1e9).max(1e-9)
    );
    tracing::info!(bytes_used = s.bytes_used(), "memory server stopped");
    Ok(())
}
