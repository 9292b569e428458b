//! The compute-server side of the TCP handshake with a `dm-memserver`
//! ([`super::wire`]): a [`Hello`] out, a [`Welcome`] back. A QP's caller
//! keeps the connection open for the QP's lifetime; a probe drops it.

use super::wire::{self, Hello, Welcome};
use super::RdmaError;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Opens a TCP connection to `addr` and exchanges `hello` for a welcome.
pub(super) fn handshake(
    addr: SocketAddr,
    hello: &Hello,
    timeout: Duration,
) -> Result<(TcpStream, Welcome), RdmaError> {
    let err = |what: &str, e: std::io::Error| {
        RdmaError(format!(
            "memory server {addr} (MS {}): {what}: {e}",
            hello.ms_id
        ))
    };
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| err("connect", e))?;
    s.set_nodelay(true).map_err(|e| err("nodelay", e))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| err("timeout", e))?;
    s.write_all(&hello.encode()).map_err(|e| err("send", e))?;
    let mut b = [0u8; wire::WELCOME_BYTES];
    s.read_exact(&mut b).map_err(|e| err("handshake", e))?;
    let w = Welcome::decode(&b).map_err(|e| RdmaError(format!("memory server {addr}: {e}")))?;
    if w.ms_id != hello.ms_id {
        return Err(RdmaError(format!(
            "memory server {addr} is MS {}, but it is listed as MS {}",
            w.ms_id, hello.ms_id
        )));
    }
    Ok((s, w))
}

pub(super) fn random_psn() -> u32 {
    rand::random::<u32>() & 0xff_ffff
}
