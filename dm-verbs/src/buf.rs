//! Recycled verb buffers: a per-thread pool of `Vec<u8>` by power-of-two
//! capacity, so that a warm operation's READ results and WRITE payloads
//! reuse memory instead of allocating (issue 32: no heap allocation per
//! warm operation).
//!
//! Who takes and who gives back:
//! - the backends take a READ's (and an RPC reply's) output buffer with
//!   [`take`] and give a WRITE's (and an RPC's) payload back with [`give`]
//!   once executed or copied to the NIC's staging memory;
//! - `dm_runtime::read` hands the READ buffer to the caller inside a
//!   `ReadBuf`, which gives it back when dropped; writers that build their
//!   payload with [`take`] get it back through the backend.
//!
//! A buffer given back on another thread (a core's buffer dropped by a
//! submitter) joins that thread's pool. Each size class keeps at most
//! [`KEEP_BYTES`] of buffers, and at least [`KEEP`] buffers (8-byte words:
//! 32,768; 4 KiB nodes: 64), so a core with a thousand READs in flight
//! recycles them all instead of freeing most (`dm-bench runtime`: 1,000
//! tasks); buffers above [`MAX_CLASS_BYTES`] or with a capacity that is not
//! a power of two are freed, so a pool stays small (at most about 3.5 MiB
//! of buffers of classes up to 4 KiB plus 64 x (8 + 16 + 32 + 64) KiB, under
//! 12 MiB per thread) whatever it is given.

use std::cell::Cell;
use std::ptr;

/// Buffers kept per size class and thread, at least.
pub const KEEP: usize = 64;
/// Bytes of buffers kept per size class and thread, at most (unless
/// [`KEEP`] buffers of the class are more).
pub const KEEP_BYTES: usize = 256 << 10;
/// The largest capacity kept (64 KiB: a node, a leaf, a scan's batch).
pub const MAX_CLASS_BYTES: usize = 64 << 10;
/// The smallest class (8 bytes: a lock word).
const MIN_CLASS: u32 = 3;
const CLASSES: usize = (MAX_CLASS_BYTES.trailing_zeros() - MIN_CLASS + 1) as usize;

/// The capacity of class `c`'s buffers.
#[inline]
fn class_bytes(c: usize) -> usize {
    1 << (c as u32 + MIN_CLASS)
}

/// How many buffers class `c` keeps.
#[inline]
fn keep(c: usize) -> usize {
    (KEEP_BYTES >> (c as u32 + MIN_CLASS)).max(KEEP)
}

/// The free buffers of one size class: an intrusive stack threaded through
/// the buffers themselves. A free buffer's first 8 bytes hold the address
/// of the next one (unaligned: a `Vec<u8>`'s memory has alignment 1);
/// every class's capacity is at least 8 bytes, so the link fits.
///
/// Each free buffer is the allocation of a `Vec<u8>` of capacity
/// [`class_bytes`]`(c)` for its class `c`, owned by the stack until
/// [`take`] rebuilds the `Vec` (length 0) or the thread's exit frees it.
/// `Cell`s, not a `RefCell`: nothing runs between a read of `head` and the
/// write that follows it (no allocation, no callback), so the stack cannot
/// be reentered.
struct Class {
    head: Cell<*mut u8>,
    len: Cell<usize>,
}

struct Pool([Class; CLASSES]);

impl Drop for Pool {
    /// Frees the buffers the thread still holds when it exits.
    fn drop(&mut self) {
        for (c, class) in self.0.iter().enumerate() {
            let mut p = class.head.replace(ptr::null_mut());
            while !p.is_null() {
                // SAFETY: `p` is a free buffer of class `c` (the stack's
                // invariant above): its first 8 bytes are the link, and it
                // was allocated as a `Vec<u8>` of exactly this capacity.
                unsafe {
                    let next = p.cast::<*mut u8>().read_unaligned();
                    drop(Vec::from_raw_parts(p, 0, class_bytes(c)));
                    p = next;
                }
            }
            class.len.set(0);
        }
    }
}

thread_local! {
    static POOL: Pool = const {
        Pool([const {
            Class {
                head: Cell::new(ptr::null_mut()),
                len: Cell::new(0),
            }
        }; CLASSES])
    };
}

/// The size class of a request for `n` bytes (capacity `1 << (class + 3)`).
#[inline]
fn class_of(n: usize) -> Option<usize> {
    let c = n.max(1).next_power_of_two();
    (c <= MAX_CLASS_BYTES).then(|| (c.trailing_zeros().max(MIN_CLASS) - MIN_CLASS) as usize)
}

/// An empty buffer with room for at least `n` bytes: a recycled one of
/// this thread if there is one, else a new one with a power-of-two
/// capacity (so it can be recycled when given back).
#[inline]
pub fn take(n: usize) -> Vec<u8> {
    let Some(c) = class_of(n) else {
        return Vec::with_capacity(n);
    };
    let cap = class_bytes(c);
    let got = POOL
        .try_with(|p| {
            let class = &p.0[c];
            let head = class.head.get();
            if head.is_null() {
                return None;
            }
            // SAFETY: `head` is a free buffer of class `c` (see `Class`):
            // its first 8 bytes are the link to the next one, and it is a
            // `Vec<u8>` allocation of capacity `cap`, which the stack
            // hands over here.
            unsafe {
                class.head.set(head.cast::<*mut u8>().read_unaligned());
                class.len.set(class.len.get() - 1);
                Some(Vec::from_raw_parts(head, 0, cap))
            }
        })
        .ok()
        .flatten();
    got.unwrap_or_else(|| Vec::with_capacity(cap))
}

/// An 8-byte WRITE payload holding `w` little-endian (a slot, a value, a
/// lock or key word), from the pool: `w.to_le_bytes().to_vec()` without
/// an allocation when the pool has one.
pub fn le64(w: u64) -> Vec<u8> {
    let mut v = take(8);
    v.extend_from_slice(&w.to_le_bytes());
    v
}

/// Gives `v` back to this thread's pool (its contents dropped), or frees
/// it if its capacity is not a class's or the class is full.
#[inline]
pub fn give(v: Vec<u8>) {
    let cap = v.capacity();
    if !cap.is_power_of_two() || cap < 1 << MIN_CLASS {
        return;
    }
    let Some(c) = class_of(cap) else { return };
    // `v` is not moved into the closure to be dropped there when the class
    // is full: `give` then no longer inlines (22 instructions more per verb
    // switch under callgrind).
    let mut v = std::mem::ManuallyDrop::new(v);
    let p = v.as_mut_ptr();
    let kept = POOL.try_with(|pool| {
        let class = &pool.0[c];
        let len = class.len.get();
        if len >= keep(c) {
            return false;
        }
        // SAFETY: `p` is the allocation of a `Vec<u8>` of capacity `cap`
        // (at least 8 bytes), which this stack now owns: the link is
        // written into its first 8 bytes, unaligned.
        unsafe { p.cast::<*mut u8>().write_unaligned(class.head.get()) };
        class.head.set(p);
        class.len.set(len + 1);
        true
    });
    if kept != Ok(true) {
        // Full class, or the thread is exiting: free it.
        // SAFETY: `v` was not handed to the stack, so it still owns `p`.
        unsafe { std::mem::ManuallyDrop::drop(&mut v) };
    }
}

/// Buffers this thread's pool holds now (tests, statistics).
pub fn pooled() -> usize {
    POOL.try_with(|p| p.0.iter().map(|c| c.len.get()).sum())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_by_class_and_the_pool_is_bounded() {
        let a = take(100);
        assert!(a.capacity() >= 100 && a.capacity().is_power_of_two());
        let p = a.as_ptr();
        give(a);
        let b = take(128);
        assert_eq!(b.as_ptr(), p, "the same class reuses the buffer");
        assert!(b.is_empty());
        give(b);
        // Odd capacities and huge buffers are freed, not kept.
        let before = pooled();
        give(Vec::with_capacity(100));
        give(Vec::with_capacity(MAX_CLASS_BYTES * 2));
        assert_eq!(pooled(), before);
        for _ in 0..KEEP * 2 {
            give(Vec::with_capacity(4096));
        }
        assert!(pooled() <= before + KEEP);
        let before = pooled();
        for _ in 0..KEEP_BYTES {
            give(Vec::with_capacity(8));
        }
        assert!(pooled() <= before + KEEP_BYTES / 8);
        assert!(take(MAX_CLASS_BYTES + 1).capacity() > MAX_CLASS_BYTES);
        assert!(take(0).capacity() >= 8);
    }

    #[test]
    fn a_given_buffer_comes_back_empty_and_an_exiting_thread_frees_its_pool() {
        std::thread::spawn(|| {
            let mut v = take(8);
            v.extend_from_slice(&7u64.to_le_bytes());
            let p = v.as_ptr();
            give(v);
            // The link written into the free buffer is not its contents.
            let w = take(5);
            assert_eq!((w.as_ptr(), w.len(), w.capacity()), (p, 0, 8));
            give(w);
            for n in [8, 9, 100, 4096, MAX_CLASS_BYTES] {
                for _ in 0..3 {
                    give(take(n));
                }
            }
            assert!(pooled() >= 5);
            // The pool's destructor frees them at the thread's exit
            // (miri or a leak checker would see a lost buffer).
        })
        .join()
        .unwrap();
    }
}
