//! CPU hints for the indexes' CS-side searches, which forbid `unsafe`
//! themselves, and the one reduction of a hash to a table slot their hot
//! paths share ([`table_index`]).

/// `hash % n` (`n` > 0), by a mask where `n` is a power of two: the same
/// slot without a 64-bit division, tens of cycles on x86-64 (issue 32).
/// For the tables an operation indexes on its warm path: the GLT slot of
/// a node (`lock::NodeLocks`), dm-art's read-delegation entry of a key.
#[inline(always)]
pub fn table_index(hash: u64, n: u64) -> u64 {
    match n.is_power_of_two() {
        true => hash & (n - 1),
        false => hash % n,
    }
}

/// Asks the CPU to fetch the cache line holding `p` into L1 (x86-64
/// `prefetcht0`; nothing elsewhere). Nothing is read into the program and
/// a prefetch never faults, so `p` may be any address, even dangling or
/// past the end of an array (`_mm_prefetch`'s contract). For a search
/// whose next read is known a step early, so its miss overlaps the step
/// (DEX's cached nodes, issue 32).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` reads no memory into the program and never
    // faults; SSE is part of the x86-64 baseline.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
