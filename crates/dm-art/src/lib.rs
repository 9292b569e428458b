//! # dm-art: the radix-tree family on disaggregated memory
//!
//! Status: the remote layout of SMART is here; the trees land with their
//! issues. What lives (and will live) here:
//!
//! - [`layout`]: 8-byte slots (partial key, leaf bit, node type or leaf size,
//!   48-bit address) changed by one CAS; adaptive internal nodes with reverse
//!   pointers and compressed prefixes; leaves with checksum and a rear lock
//!   word taken by plain CAS (SMART §4.1.1), byte by byte in its docs.
//! - [`keys`]: keys as radix paths: fixed-length (8-byte integers) or
//!   variable-length with a length byte, order-preserving.
//! - `smart`: hybrid concurrency control, read delegation and write combining,
//!   the reverse-check ART cache (SMART §4.1.2-§4.3), each technique a switch.
//! - `art`: the DM-ported ART baseline with ROWEX-style synchronisation (SMART §5.1.3).
//! - `dolphin`: ART internal nodes over B+tree-style leaves, FAA-based leaf lock
//!   (Dolphin §III).
//!
//! Every tree implements the workspace's one async index API over any
//! [`dm_verbs::Fabric`].

pub mod keys;
pub mod layout;

/// Width of one SMART slot in bytes (SMART §4.1.1: a slot is changed by one 8-byte CAS).
pub const SLOT_BYTES: usize = 8;
