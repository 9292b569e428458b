//! [`RdmaConfig`]: device selection, QP depths and RC timers (both the
//! compute-server and the memory-server side), and the memory-server list.

use super::ffi::RcTimers;
use super::RdmaError;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// Device selection and QP parameters (both sides).
#[derive(Clone, Debug)]
pub struct RdmaConfig {
    /// Device name (`rxe0`, `mlx5_0`); `None` = the first device.
    pub device: Option<String>,
    /// Port number (1-based).
    pub port: u8,
    /// GID table index: 1 on soft-RoCE over `lo` (`::ffff:127.0.0.1`, RoCE v2);
    /// on ConnectX RoCE pick the RoCE v2 IPv4 entry (`show_gids`).
    pub gid_index: u8,
    /// Send-queue depth per QP (WRs outstanding at once).
    pub max_send_wr: u32,
    /// `max_rd_atomic`/`max_dest_rd_atomic`: READ/atomic WRs in flight per QP
    /// (capped by the device).
    pub rd_atomic: u8,
    /// Inline WRITE threshold asked of the QP, bytes.
    pub max_inline: u32,
    /// Per-core staging MR for READ/atomic results and large WRITEs, bytes.
    pub staging_bytes: u64,
    pub timers: RcTimers,
    /// TCP connect and handshake timeout.
    pub connect_timeout: Duration,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            device: None,
            port: 1,
            gid_index: 1,
            max_send_wr: 512,
            rd_atomic: 16,
            max_inline: 128,
            staging_bytes: 32 << 20,
            // 4.096 us * 2^18 = 1.07 s per try, 7 retries: a peer that stops
            // answering errors in ~8.6 s (a dead memory server is noticed
            // sooner, by its TCP connection). Shorter timers retransmit
            // spuriously when a completion is merely late: 2^14 (67 ms) gave
            // ~20 retransmissions per two-client ycsb run on soft-RoCE in the
            // test guest (`rdma statistic`: completer_retry_err), and a guest
            // stalled past 7 of them fails the QP mid-run.
            timers: RcTimers {
                timeout: 18,
                retry_cnt: 7,
                rnr_retry: 7,
                min_rnr_timer: 12,
            },
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// Parses `HOST:PORT[,HOST:PORT..]` (MS id = position). Errors name the bad entry.
pub fn parse_ms_list(s: &str) -> Result<Vec<SocketAddr>, RdmaError> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let p = part.trim();
        let a = p
            .to_socket_addrs()
            .map_err(|e| RdmaError(format!("memory server address {p:?}: {e}")))?
            .next()
            .ok_or_else(|| RdmaError(format!("memory server address {p:?} resolves to nothing")))?;
        out.push(a);
    }
    if out.is_empty() || out.len() > u16::MAX as usize {
        return Err(RdmaError(format!("bad memory server list {s:?}")));
    }
    Ok(out)
}
