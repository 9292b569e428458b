//! The staging MR's buffers: where READ results, atomic old values and
//! WRITE/SEND payloads too large to inline live while their WR is posted.

/// Staging buffers: power-of-two classes from 64 B, carved by a bump pointer,
/// recycled through per-class free lists; reset when nothing is in use.
pub(super) struct Stage {
    base: u64,
    end: u64,
    bump: u64,
    free: Vec<Vec<u64>>,
    in_use: usize,
}

impl Stage {
    pub(super) fn new(base: u64, end: u64) -> Self {
        Stage {
            base,
            end,
            bump: base,
            free: vec![Vec::new(); 48],
            in_use: 0,
        }
    }

    fn class(len: u64) -> usize {
        (len.max(64).next_power_of_two().trailing_zeros() - 6) as usize
    }

    /// True if a buffer of `len` bytes can ever be had.
    pub(super) fn fits(&self, len: u64) -> bool {
        len.max(64).next_power_of_two() <= self.end - self.base
    }

    pub(super) fn alloc(&mut self, len: u64) -> Option<(u64, usize)> {
        let k = Self::class(len);
        let size = 64u64 << k;
        let off = match self.free[k].pop() {
            Some(o) => o,
            None => {
                if self.in_use == 0 {
                    self.bump = self.base;
                    self.free.iter_mut().for_each(Vec::clear);
                }
                let o = self.bump.next_multiple_of(size.min(4096));
                if o + size > self.end {
                    return None;
                }
                self.bump = o + size;
                o
            }
        };
        self.in_use += 1;
        Some((off, k))
    }

    pub(super) fn release(&mut self, (off, k): (u64, usize)) {
        self.free[k].push(off);
        self.in_use -= 1;
    }
}
