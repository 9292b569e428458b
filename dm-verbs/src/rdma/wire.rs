//! Byte formats of the `rdma` backend, all little-endian: the TCP handshake
//! that exchanges QP endpoints and region keys, and the RPC messages carried by
//! SEND/RECV. Pure code, unit-tested without a NIC.
//!
//! ## Handshake (one TCP connection per QP, open for the QP's lifetime)
//! Client -> memory server, [`HELLO_BYTES`] bytes:
//!
//! | off | bytes | field |
//! |-----|-------|-------|
//! | 0   | 8     | magic `b"DMRDMA01"` |
//! | 8   | 2     | MS id the client expects (its position in `--ms`) |
//! | 10  | 1     | 1 = create a QP, 0 = only report the region (probe) |
//! | 11  | 4     | QP number |
//! | 15  | 4     | first PSN of the client's send queue (24 bits) |
//! | 19  | 2     | LID (0 on RoCE) |
//! | 21  | 16    | GID |
//!
//! Memory server -> client, [`WELCOME_BYTES`] bytes: magic, status (1 byte: 0 ok,
//! else the rest is a UTF-8 reason padded with zeros), MS id (2), the server
//! QP's number (4), PSN (4), LID (2), GID (16), region virtual address (8),
//! rkey (4), region bytes (8), chunk bytes (8), device-memory bytes (8), RPC
//! receive slots per QP (4), RPC message bytes (4), device-memory rkey (4:
//! its MR is zero-based, so a device address's remote address is its
//! offset; 0 without device memory).
//!
//! ## RPC messages (one SEND each, at most `msg_bytes`)
//! Request: `tag` (8, the client's `wr_id`), handler id (2), payload.
//! Reply: `tag` (8), status (1: 0 ok, 1 error), then the reply payload or an
//! encoded [`VerbError`] ([`encode_error`]).

use crate::{Capability, GlobalAddr, VerbError};

pub const MAGIC: &[u8; 8] = b"DMRDMA02";
pub const HELLO_BYTES: usize = 37;
pub const WELCOME_BYTES: usize = 128;
/// Bytes before an RPC request's payload.
pub const REQ_HEADER: usize = 10;
/// Bytes before an RPC reply's body.
pub const REPLY_HEADER: usize = 9;

/// What a client sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    pub ms_id: u16,
    pub create_qp: bool,
    pub qpn: u32,
    pub psn: u32,
    pub lid: u16,
    pub gid: [u8; 16],
}

/// What a memory server answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Welcome {
    pub ms_id: u16,
    pub qpn: u32,
    pub psn: u32,
    pub lid: u16,
    pub gid: [u8; 16],
    pub region_addr: u64,
    pub rkey: u32,
    pub region_bytes: u64,
    pub chunk_bytes: u64,
    pub device_bytes: u64,
    pub rpc_slots: u32,
    pub msg_bytes: u32,
    pub dm_rkey: u32,
}

struct R<'a>(&'a [u8]);
impl R<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (a, b) = self.0.split_at(N);
        self.0 = b;
        a.try_into().unwrap()
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_BYTES] {
        let mut v = Vec::with_capacity(HELLO_BYTES);
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&self.ms_id.to_le_bytes());
        v.push(self.create_qp as u8);
        v.extend_from_slice(&self.qpn.to_le_bytes());
        v.extend_from_slice(&self.psn.to_le_bytes());
        v.extend_from_slice(&self.lid.to_le_bytes());
        v.extend_from_slice(&self.gid);
        v.try_into().unwrap()
    }

    pub fn decode(b: &[u8; HELLO_BYTES]) -> Result<Hello, String> {
        if &b[..8] != MAGIC {
            return Err("not a dm rdma client (bad magic)".into());
        }
        let mut r = R(&b[8..]);
        Ok(Hello {
            ms_id: r.u16(),
            create_qp: r.u8() != 0,
            qpn: r.u32(),
            psn: r.u32(),
            lid: r.u16(),
            gid: r.take(),
        })
    }
}

impl Welcome {
    pub fn encode(&self) -> [u8; WELCOME_BYTES] {
        let mut v = Vec::with_capacity(WELCOME_BYTES);
        v.extend_from_slice(MAGIC);
        v.push(0);
        v.extend_from_slice(&self.ms_id.to_le_bytes());
        v.extend_from_slice(&self.qpn.to_le_bytes());
        v.extend_from_slice(&self.psn.to_le_bytes());
        v.extend_from_slice(&self.lid.to_le_bytes());
        v.extend_from_slice(&self.gid);
        v.extend_from_slice(&self.region_addr.to_le_bytes());
        v.extend_from_slice(&self.rkey.to_le_bytes());
        for x in [self.region_bytes, self.chunk_bytes, self.device_bytes] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&self.rpc_slots.to_le_bytes());
        v.extend_from_slice(&self.msg_bytes.to_le_bytes());
        v.extend_from_slice(&self.dm_rkey.to_le_bytes());
        v.resize(WELCOME_BYTES, 0);
        v.try_into().unwrap()
    }

    /// A refusal carrying `reason` (truncated to fit).
    pub fn refuse(reason: &str) -> [u8; WELCOME_BYTES] {
        let mut v = Vec::with_capacity(WELCOME_BYTES);
        v.extend_from_slice(MAGIC);
        v.push(1);
        let r = reason.as_bytes();
        v.extend_from_slice(&r[..r.len().min(WELCOME_BYTES - 9)]);
        v.resize(WELCOME_BYTES, 0);
        v.try_into().unwrap()
    }

    /// The welcome, or the server's refusal reason / a format error.
    pub fn decode(b: &[u8; WELCOME_BYTES]) -> Result<Welcome, String> {
        if &b[..8] != MAGIC {
            return Err("not a dm memory server (bad magic)".into());
        }
        if b[8] != 0 {
            let s = &b[9..];
            let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
            return Err(format!(
                "memory server refused: {}",
                String::from_utf8_lossy(&s[..end])
            ));
        }
        let mut r = R(&b[9..]);
        Ok(Welcome {
            ms_id: r.u16(),
            qpn: r.u32(),
            psn: r.u32(),
            lid: r.u16(),
            gid: r.take(),
            region_addr: r.u64(),
            rkey: r.u32(),
            region_bytes: r.u64(),
            chunk_bytes: r.u64(),
            device_bytes: r.u64(),
            rpc_slots: r.u32(),
            msg_bytes: r.u32(),
            dm_rkey: r.u32(),
        })
    }
}

/// Encodes a [`VerbError`] for an RPC reply.
pub fn encode_error(e: &VerbError) -> Vec<u8> {
    let mut v = Vec::new();
    match e {
        VerbError::QpError { ms } => {
            v.push(1);
            v.extend_from_slice(&ms.to_le_bytes());
        }
        VerbError::OutOfBounds { addr, len } => {
            v.push(2);
            v.extend_from_slice(&addr.to_u64().to_le_bytes());
            v.extend_from_slice(&len.to_le_bytes());
        }
        VerbError::Misaligned { addr } => {
            v.push(3);
            v.extend_from_slice(&addr.to_u64().to_le_bytes());
        }
        VerbError::Unsupported(c) => {
            v.push(4);
            v.push(match c {
                Capability::MaskedCas => 0,
                Capability::DeviceMemory => 1,
            });
        }
        VerbError::MsOutOfMemory { ms } => {
            v.push(5);
            v.extend_from_slice(&ms.to_le_bytes());
        }
        VerbError::UnknownRpc { ms, handler } => {
            v.push(6);
            v.extend_from_slice(&ms.to_le_bytes());
            v.extend_from_slice(&handler.to_le_bytes());
        }
        VerbError::RpcFailed {
            ms,
            handler,
            reason,
        } => {
            v.push(7);
            v.extend_from_slice(&ms.to_le_bytes());
            v.extend_from_slice(&handler.to_le_bytes());
            v.extend_from_slice(reason.as_bytes());
        }
    }
    v
}

/// Decodes [`encode_error`]'s output; garbage becomes `RpcFailed` naming `ms`/`handler`.
pub fn decode_error(b: &[u8], ms: u16, handler: u16) -> VerbError {
    let bad = || VerbError::RpcFailed {
        ms,
        handler,
        reason: "malformed error reply".into(),
    };
    let Some((&code, rest)) = b.split_first() else {
        return bad();
    };
    let need = match code {
        1 | 5 => 2,
        2 => 16,
        3 => 8,
        4 => 1,
        6 | 7 => 4,
        _ => return bad(),
    };
    if rest.len() < need {
        return bad();
    }
    let mut r = R(rest);
    match code {
        1 => VerbError::QpError { ms: r.u16() },
        2 => VerbError::OutOfBounds {
            addr: GlobalAddr(r.u64()),
            len: r.u64(),
        },
        3 => VerbError::Misaligned {
            addr: GlobalAddr(r.u64()),
        },
        4 => VerbError::Unsupported(if r.u8() == 0 {
            Capability::MaskedCas
        } else {
            Capability::DeviceMemory
        }),
        5 => VerbError::MsOutOfMemory { ms: r.u16() },
        6 => VerbError::UnknownRpc {
            ms: r.u16(),
            handler: r.u16(),
        },
        _ => VerbError::RpcFailed {
            ms: r.u16(),
            handler: r.u16(),
            reason: String::from_utf8_lossy(r.0).into_owned(),
        },
    }
}

/// A request message.
pub fn encode_request(tag: u64, handler: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(REQ_HEADER + payload.len());
    v.extend_from_slice(&tag.to_le_bytes());
    v.extend_from_slice(&handler.to_le_bytes());
    v.extend_from_slice(payload);
    v
}

/// `(tag, handler, payload)` of a request, or `None` if it is too short.
pub fn decode_request(b: &[u8]) -> Option<(u64, u16, &[u8])> {
    if b.len() < REQ_HEADER {
        return None;
    }
    let mut r = R(b);
    Some((r.u64(), r.u16(), &b[REQ_HEADER..]))
}

/// A reply message for `result`.
pub fn encode_reply(tag: u64, result: &Result<Vec<u8>, VerbError>) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&tag.to_le_bytes());
    match result {
        Ok(p) => {
            v.push(0);
            v.extend_from_slice(p);
        }
        Err(e) => {
            v.push(1);
            v.extend_from_slice(&encode_error(e));
        }
    }
    v
}

/// `(tag, status, body)` of a reply, or `None` if it is too short.
pub fn decode_reply(b: &[u8]) -> Option<(u64, u8, &[u8])> {
    if b.len() < REPLY_HEADER {
        return None;
    }
    let mut r = R(b);
    Some((r.u64(), r.u8(), &b[REPLY_HEADER..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_round_trips() {
        let h = Hello {
            ms_id: 3,
            create_qp: true,
            qpn: 0x1234,
            psn: 0xabcdef,
            lid: 7,
            gid: [9; 16],
        };
        assert_eq!(Hello::decode(&h.encode()), Ok(h));
        let w = Welcome {
            ms_id: 3,
            qpn: 17,
            psn: 99,
            lid: 0,
            gid: [1; 16],
            region_addr: 0x7f00_0000_1000,
            rkey: 0xdead,
            region_bytes: 1 << 30,
            chunk_bytes: 8 << 20,
            device_bytes: 256 << 10,
            rpc_slots: 32,
            msg_bytes: 4096,
            dm_rkey: 0xbeef,
        };
        assert_eq!(Welcome::decode(&w.encode()), Ok(w));
        let r = Welcome::decode(&Welcome::refuse("I am MS 1"));
        assert_eq!(r, Err("memory server refused: I am MS 1".into()));
        let mut junk = [0u8; HELLO_BYTES];
        junk[..8].copy_from_slice(b"GET / HT");
        assert!(Hello::decode(&junk).is_err());
        assert!(Welcome::decode(&[0; WELCOME_BYTES]).is_err());
    }

    #[test]
    fn errors_and_messages_round_trip() {
        let a = GlobalAddr::new(1, 4096);
        for e in [
            VerbError::QpError { ms: 2 },
            VerbError::OutOfBounds { addr: a, len: 9 },
            VerbError::Misaligned { addr: a },
            VerbError::Unsupported(Capability::MaskedCas),
            VerbError::Unsupported(Capability::DeviceMemory),
            VerbError::MsOutOfMemory { ms: 1 },
            VerbError::UnknownRpc { ms: 1, handler: 9 },
            VerbError::RpcFailed {
                ms: 1,
                handler: 9,
                reason: "no".into(),
            },
        ] {
            assert_eq!(decode_error(&encode_error(&e), 0, 0), e);
            let m = encode_reply(77, &Err(e.clone()));
            let (tag, st, body) = decode_reply(&m).unwrap();
            assert_eq!((tag, st, decode_error(body, 0, 0)), (77, 1, e));
        }
        assert!(matches!(
            decode_error(&[2, 1], 4, 5),
            VerbError::RpcFailed {
                ms: 4,
                handler: 5,
                ..
            }
        ));
        let m = encode_request(5, 3, b"abc");
        assert_eq!(decode_request(&m), Some((5, 3, &b"abc"[..])));
        assert_eq!(decode_request(&m[..9]), None);
        let m = encode_reply(6, &Ok(vec![1, 2]));
        assert_eq!(decode_reply(&m), Some((6, 0, &[1u8, 2][..])));
    }
}
