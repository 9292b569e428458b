//! A region's memory: a zeroed array of `AtomicU64` words, and the READ and
//! WRITE copies over it (one atomic access per word, so racing copies tear at
//! 8-byte granularity, as on real RDMA, and are never undefined behaviour).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering::*};

/// A zero-initialised array of atomic words that touches no page until used.
pub(super) struct Words {
    ptr: NonNull<AtomicU64>,
    len: usize,
}

// SAFETY: `Words` uniquely owns its allocation (nothing else holds `ptr`), which
// comes from the global allocator and has no thread affinity; moving it to
// another thread moves that ownership, and `Drop` frees it from any thread. It
// is in effect a `Box<[AtomicU64]>`, which is `Send`.
unsafe impl Send for Words {}
// SAFETY: `&Words` gives access only through `as_slice`, an `&[AtomicU64]`;
// there is no `&mut` or non-atomic access to the words, and `AtomicU64` is
// `Sync`, so any number of threads may load and store them concurrently (a
// racing copy tears at word granularity, never UB; see the module docs).
unsafe impl Sync for Words {}

impl Words {
    /// `bytes` of zeroed words, or `None` if the allocator refuses them
    /// (or they do not fit the address space).
    pub(super) fn try_zeroed(bytes: u64) -> Option<Self> {
        let len = usize::try_from(bytes.div_ceil(8)).ok()?;
        if len == 0 {
            return Some(Words {
                ptr: NonNull::dangling(),
                len: 0,
            });
        }
        let layout = Layout::array::<AtomicU64>(len).ok()?;
        // SAFETY: the layout has non-zero size. All-zero bytes are a valid
        // `AtomicU64` (value 0), so the memory is initialised as returned.
        let p = unsafe { alloc_zeroed(layout) } as *mut AtomicU64;
        Some(Words {
            ptr: NonNull::new(p)?,
            len,
        })
    }

    pub(super) fn as_slice(&self) -> &[AtomicU64] {
        // SAFETY: ptr/len describe our live, initialised allocation (or a
        // dangling, aligned pointer with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        if self.len > 0 {
            let layout = Layout::array::<AtomicU64>(self.len).unwrap();
            // SAFETY: allocated in `zeroed` with this same layout.
            unsafe { dealloc(self.ptr.as_ptr() as *mut u8, layout) }
        }
    }
}

/// Copies `len` bytes at byte offset `off` out of `w` with one atomic load per
/// word (see the module docs: tearing at 8-byte granularity, never UB).
/// Panics if the range is outside `w`; callers check bounds first.
#[inline]
pub(crate) fn read_words(w: &[AtomicU64], off: u64, len: usize) -> Vec<u8> {
    if off.is_multiple_of(8) && len.is_multiple_of(8) {
        // Whole words (every node and lock read of the indexes): one load and
        // one unaligned 8-byte store per word, no per-word slicing (a byte
        // loop over each word was 8 stores and its loop control: about 50
        // instructions of an 8-byte READ under callgrind, issue 32). The
        // buffer is sized first and filled through its pointer, so the `Vec`
        // itself is never written after it is made (extending it kept it on
        // the stack and the caller's wide copy of it stalled on the narrow
        // stores).
        let mut out: Vec<u8> = crate::buf::take(len);
        let words = &w[(off / 8) as usize..][..len / 8];
        let dst = out.as_mut_ptr();
        for (i, word) in words.iter().enumerate() {
            // SAFETY: `take(len)` has capacity for `len` bytes and `i * 8 + 8
            // <= len`, so the 8 bytes written are inside the allocation.
            unsafe {
                dst.add(i * 8)
                    .cast::<[u8; 8]>()
                    .write_unaligned(word.load(Acquire).to_le_bytes())
            };
        }
        // SAFETY: the loop wrote all `len` bytes (`len / 8` whole words).
        unsafe { out.set_len(len) };
        return out;
    }
    read_words_unaligned(w, off, len)
}

/// [`read_words`] of a range with a partial word at either edge: out of
/// line, so the whole-word path keeps few registers and no spills.
#[inline(never)]
fn read_words_unaligned(w: &[AtomicU64], off: u64, len: usize) -> Vec<u8> {
    let end = off + len as u64;
    let mut out = crate::buf::take(len);
    for i in off / 8..end.div_ceil(8) {
        let b = w[i as usize].load(Acquire).to_le_bytes();
        let lo = off.saturating_sub(i * 8) as usize;
        let hi = (end - i * 8).min(8) as usize;
        out.extend_from_slice(&b[lo..hi]);
    }
    out
}

/// Stores `data` at byte offset `off` of `w` word by word; partial words at
/// unaligned edges are merged with a CAS loop so neighbouring bytes written
/// concurrently survive. Panics if the range is outside `w`.
pub(crate) fn write_words(w: &[AtomicU64], off: u64, data: &[u8]) {
    if off.is_multiple_of(8) && data.len().is_multiple_of(8) {
        // Whole words (every node write-back and lock word of the indexes):
        // one store per word, no per-word slicing or edge arithmetic (the
        // general loop below took about a tenth of a loopback FG+ update's
        // thread CPU for its 1 KB node write-back, issue 32).
        let words = &w[(off / 8) as usize..][..data.len() / 8];
        for (word, src) in words.iter().zip(data.chunks_exact(8)) {
            word.store(u64::from_le_bytes(src.try_into().unwrap()), Release);
        }
        return;
    }
    let end = off + data.len() as u64;
    let mut src = data;
    for i in off / 8..end.div_ceil(8) {
        let lo = off.saturating_sub(i * 8) as usize;
        let hi = (end - i * 8).min(8) as usize;
        let (part, rest) = src.split_at(hi - lo);
        src = rest;
        let word = &w[i as usize];
        if hi - lo == 8 {
            word.store(u64::from_le_bytes(part.try_into().unwrap()), Release);
        } else {
            // Merge into the bytes around us without clobbering them.
            let _ = word.fetch_update(AcqRel, Acquire, |old| {
                let mut b = old.to_le_bytes();
                b[lo..hi].copy_from_slice(part);
                Some(u64::from_le_bytes(b))
            });
        }
    }
}
