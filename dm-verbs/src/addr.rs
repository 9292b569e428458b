//! `GlobalAddr`: where a byte lives in disaggregated memory (Sherman §4.2).
//!
//! Layout of the 64-bit word (bit 63 is the most significant):
//!
//! | bits    | field      | meaning                                                   |
//! |---------|------------|-----------------------------------------------------------|
//! | 63..48  | `ms`       | memory-server id, `0..num_ms`; `0xFFFF` only in [`GlobalAddr::NULL`] |
//! | 47      | `device`   | 1 = the MS's device (on-chip) memory, 0 = its host region |
//! | 46..0   | offset     | byte offset inside that memory                            |
//!
//! [`GlobalAddr::offset`] returns bits 47..0, i.e. the device bit is part of the
//! 48-bit offset as the paper describes it; [`GlobalAddr::local_offset`] strips it.
//! Indexes that need tag bits (SMART slots, DEX swizzle bit) pack their own word
//! and convert at the boundary.

use std::fmt;

/// A 64-bit address of a byte on some memory server. See the module docs for the layout.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GlobalAddr(pub u64);

/// Bit 47 of the offset: the address is in the MS's device memory.
pub const DEVICE_BIT: u64 = 1 << 47;
/// Mask of the 48-bit offset field.
pub const OFFSET_MASK: u64 = (1 << 48) - 1;

impl GlobalAddr {
    /// The null address (`u64::MAX`); no memory server has id `0xFFFF`.
    pub const NULL: GlobalAddr = GlobalAddr(u64::MAX);

    /// Host-memory address `offset` on memory server `ms`. `offset` must be below 2^47.
    pub const fn new(ms: u16, offset: u64) -> Self {
        debug_assert!(offset < DEVICE_BIT);
        GlobalAddr(((ms as u64) << 48) | (offset & (DEVICE_BIT - 1)))
    }

    /// Device-memory (on-chip) address `offset` on memory server `ms`.
    pub const fn device(ms: u16, offset: u64) -> Self {
        GlobalAddr(((ms as u64) << 48) | DEVICE_BIT | (offset & (DEVICE_BIT - 1)))
    }

    /// True for [`GlobalAddr::NULL`].
    pub const fn is_null(self) -> bool {
        self.0 == u64::MAX
    }

    /// Memory-server id (bits 63..48).
    pub const fn ms(self) -> u16 {
        (self.0 >> 48) as u16
    }

    /// The 48-bit offset including the device bit.
    pub const fn offset(self) -> u64 {
        self.0 & OFFSET_MASK
    }

    /// Offset inside the memory the address names (device bit stripped).
    pub const fn local_offset(self) -> u64 {
        self.0 & (DEVICE_BIT - 1)
    }

    /// True if the address is in device (on-chip) memory.
    pub const fn is_device(self) -> bool {
        self.0 & DEVICE_BIT != 0
    }

    /// The address `bytes` further on, same MS and memory.
    pub const fn add(self, bytes: u64) -> Self {
        GlobalAddr(self.0 + bytes)
    }

    /// The raw 64-bit word, e.g. to store the address in remote memory.
    pub const fn to_u64(self) -> u64 {
        self.0
    }

    /// Inverse of [`GlobalAddr::to_u64`].
    pub const fn from_u64(raw: u64) -> Self {
        GlobalAddr(raw)
    }
}

impl fmt::Debug for GlobalAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_null() {
            return write!(f, "GlobalAddr(NULL)");
        }
        let mem = if self.is_device() { "dev" } else { "host" };
        write!(
            f,
            "GlobalAddr(ms{}:{}:{:#x})",
            self.ms(),
            mem,
            self.local_offset()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let a = GlobalAddr::new(3, 0x1234_5678);
        assert_eq!(a.ms(), 3);
        assert_eq!(a.local_offset(), 0x1234_5678);
        assert!(!a.is_device());
        let d = GlobalAddr::device(7, 64);
        assert_eq!(d.ms(), 7);
        assert!(d.is_device());
        assert_eq!(d.local_offset(), 64);
        assert_eq!(d.offset(), DEVICE_BIT | 64);
        assert!(GlobalAddr::NULL.is_null());
        assert!(!a.is_null());
        assert_eq!(GlobalAddr::from_u64(a.to_u64()), a);
        assert_eq!(a.add(8).local_offset(), 0x1234_5680);
    }
}
