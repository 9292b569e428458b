//! A node's byte image: [`Node::encode`] writes the header, the fences and
//! either the sorted entries (checksum over `[16, node_bytes)`) or, for an
//! unsorted leaf, the slots of [`crate::two_level`] (header checksum plus a
//! check word per slot); [`Node::decode`] validates an image READ from an MS
//! and rejects a torn one (layout and the argument: the [parent module](super)).

use super::*;
use dm_runtime::checksum::checksum;

impl Node {
    /// Serialises into `node_bytes` bytes with lock word 0 and a fresh
    /// checksum, in a buffer of this thread's pool (`dm_verbs::buf`), which
    /// a WRITE of it gives back: a warm write-back allocates nothing.
    pub fn encode(&self, g: &Geometry) -> Vec<u8> {
        let mut b = dm_verbs::buf::take(g.node_bytes);
        b.resize(g.node_bytes, 0);
        b[OFF_LEVEL] = self.level;
        let mut flags = 0;
        if self.low == Fence::NegInf {
            flags |= FLAG_LOW_INF;
        }
        if self.high == Fence::PosInf {
            flags |= FLAG_HIGH_INF;
        }
        if self.unsorted {
            flags |= FLAG_UNSORTED;
        }
        if self.head {
            flags |= FLAG_HEAD;
        }
        b[OFF_FLAGS] = flags;
        if !self.unsorted {
            b[OFF_COUNT..OFF_COUNT + 2].copy_from_slice(&(self.entries.len() as u16).to_le_bytes());
        }
        b[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&self.version.to_le_bytes());
        b[OFF_SIBLING..OFF_SIBLING + 8].copy_from_slice(&self.sibling.to_u64().to_le_bytes());
        if let Fence::Key(k) = &self.low {
            b[OFF_FENCES..OFF_FENCES + k.len()].copy_from_slice(k);
        }
        if let Fence::Key(k) = &self.high {
            b[OFF_FENCES + g.kp..OFF_FENCES + g.kp + k.len()].copy_from_slice(k);
        }
        if self.unsorted {
            crate::two_level::encode_slots(g, self, &mut b);
            let c = checksum(&b[16..g.entries_off()]);
            b[OFF_CSUM..OFF_CSUM + 8].copy_from_slice(&c.to_le_bytes());
            return b;
        }
        let mut o = g.entries_off();
        for (k, v) in &self.entries {
            b[o..o + k.len()].copy_from_slice(k);
            b[o + g.kp..o + g.kp + 8].copy_from_slice(&v.to_le_bytes());
            o += g.entry_bytes();
        }
        let c = checksum(&b[16..]);
        b[OFF_CSUM..OFF_CSUM + 8].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// [`Node::encode`]'s image without its first 8 bytes, the in-node lock
    /// word: what a whole-node write-back under the lock WRITEs at the
    /// node's address + 8, in the same pooled buffer.
    pub fn encode_after_lock(&self, g: &Geometry) -> Vec<u8> {
        let mut b = self.encode(g);
        b.drain(..8);
        b
    }

    /// Validates and decodes a node image; `None` if the checksum does not
    /// match (torn or being written) or the header is impossible.
    pub fn decode(g: &Geometry, b: &[u8]) -> Option<Node> {
        // The checksum and header checks are the view's (one copy of them).
        let v = super::View::header(g, b)?;
        let flags = v.flags();
        let unsorted = flags & FLAG_UNSORTED != 0;
        let count = u16::from_le_bytes([b[OFF_COUNT], b[OFF_COUNT + 1]]) as usize;
        let key_at = |o: usize| super::NodeKey::from_slice(v.key_at(o));
        let fence = |f| match f {
            super::view::FenceRef::NegInf => Fence::NegInf,
            super::view::FenceRef::Key(k) => Fence::key(k),
            super::view::FenceRef::PosInf => Fence::PosInf,
        };
        let (low, high) = (fence(v.low()), fence(v.high()));
        let version = u32::from_le_bytes(b[OFF_VERSION..OFF_VERSION + 4].try_into().unwrap());
        // Room for one more entry: an insert into the decoded node does not
        // grow it (issue 32).
        let mut entries = Vec::with_capacity(count + 1);
        let mut o = g.entries_off();
        for _ in 0..count {
            let v = u64::from_le_bytes(b[o + g.kp..o + g.kp + 8].try_into().unwrap());
            entries.push((key_at(o), v));
            o += g.entry_bytes();
        }
        let n = Node {
            level: v.level(),
            low,
            high,
            sibling: v.sibling(),
            entries,
            version,
            unsorted,
            head: flags & FLAG_HEAD != 0,
            slots: Vec::new(),
        };
        if unsorted {
            return crate::two_level::decode_slots(g, b, n);
        }
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(g: &Geometry) -> Node {
        let mut n = Node::empty(0, Fence::key(&[1; 8]), Fence::PosInf);
        n.sibling = GlobalAddr::new(1, 4096);
        for i in 0..g.capacity() as u8 {
            n.entries.push((
                NodeKey::from_slice(&[2, i, 0, 0, 0, 0, 0, 0]),
                i as u64 * 10,
            ));
        }
        n
    }

    #[test]
    fn round_trip_and_capacity() {
        let g = Geometry::new(1024, 8);
        assert_eq!(g.capacity(), (1024 - 48) / 16);
        let n = sample(&g);
        let b = n.encode(&g);
        assert_eq!(Node::decode(&g, &b), Some(n));
        let g32 = Geometry::new(1024, 32);
        assert_eq!(g32.capacity(), (1024 - 96) / 40);
    }

    #[test]
    fn any_single_torn_word_is_rejected() {
        let g = Geometry::new(1024, 8);
        let old = sample(&g).encode(&g);
        let mut n2 = sample(&g);
        for e in &mut n2.entries {
            e.1 += 1;
        }
        n2.sibling = GlobalAddr::new(0, 8192);
        let new = n2.encode(&g);
        // Every mix that takes exactly one word from the other version is rejected.
        for w in 1..g.node_bytes / 8 {
            let mut t = old.clone();
            t[w * 8..w * 8 + 8].copy_from_slice(&new[w * 8..w * 8 + 8]);
            if t != old {
                assert_eq!(Node::decode(&g, &t), None, "word {w}");
            }
            let mut t = new.clone();
            t[w * 8..w * 8 + 8].copy_from_slice(&old[w * 8..w * 8 + 8]);
            if t != new {
                assert_eq!(Node::decode(&g, &t), None, "word {w}");
            }
        }
        // The lock word is outside the checksum.
        let mut locked = old.clone();
        locked[0] = 7;
        assert!(Node::decode(&g, &locked).is_some());
    }
}
