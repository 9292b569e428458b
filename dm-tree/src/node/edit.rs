//! Node images changed in place, without a decode (issue 32): a sorted
//! node's value set, and an entry inserted into a sorted leaf with room.
//! Each gives the bytes [`Node::encode`] would give for the decoded node
//! so changed (tests in `view.rs`), and is written back under the node's
//! lock as a whole-node write-back is.

use super::*;
use dm_runtime::checksum::checksum;

/// Sets the value at byte offset `value_off` of the sorted node image `b`
/// (located by [`View::locate`]), bumps its version and recomputes its
/// checksum: the image [`Node::encode`] would give for the decoded node
/// with that value and version + 1 (encode writes every byte the image
/// holds from the node's fields), without decoding it.
pub(crate) fn set_sorted_value(b: &mut [u8], value_off: usize, value: u64) {
    bump_version(b);
    set_sorted_value_same_version(b, value_off, value);
}

/// Raises a node image's version (offset 20) by one, as a whole-node
/// write-back does.
fn bump_version(b: &mut [u8]) {
    let v = u32::from_le_bytes(b[OFF_VERSION..OFF_VERSION + 4].try_into().unwrap());
    b[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&v.wrapping_add(1).to_le_bytes());
}

/// Recomputes a sorted node image's checksum (over `[16, node_bytes)`)
/// after a change in place.
fn reseal(b: &mut [u8]) {
    let c = checksum(&b[16..]);
    b[OFF_CSUM..OFF_CSUM + 8].copy_from_slice(&c.to_le_bytes());
}

/// Inserts `key -> value` (a key of the tree's width, absent from the
/// node, as [`View::locate`] found) into the sorted leaf image `b`: the
/// entries after its place move one entry right, the count and version
/// go up by one and the checksum is recomputed. That is the image
/// [`Node::encode`] gives for the decoded leaf with the entry inserted and
/// version + 1 (encode writes zeros after the last entry, and every image
/// a sorted leaf holds came from it), without decoding it (issue 32: the
/// decode was an allocation of an FG+ insert). `false`, the image
/// untouched, for a full leaf, an internal or head node, or an unsorted
/// leaf: the caller decodes those.
pub(crate) fn insert_sorted_in_place(g: &Geometry, b: &mut [u8], key: &[u8], value: u64) -> bool {
    let count = u16::from_le_bytes([b[OFF_COUNT], b[OFF_COUNT + 1]]) as usize;
    let plain_leaf = b[OFF_LEVEL] == 0 && b[OFF_FLAGS] & (FLAG_UNSORTED | FLAG_HEAD) == 0;
    if !plain_leaf || count >= g.capacity() || key.len() != g.key_bytes {
        return false;
    }
    let (eo, eb) = (g.entries_off(), g.entry_bytes());
    let o = eo + View::validated(g, b).sorted_place(key) * eb;
    b.copy_within(o..eo + count * eb, o + eb);
    b[o..o + g.kp].fill(0);
    b[o..o + key.len()].copy_from_slice(key);
    b[o + g.kp..o + g.kp + 8].copy_from_slice(&value.to_le_bytes());
    b[OFF_COUNT..OFF_COUNT + 2].copy_from_slice(&(count as u16 + 1).to_le_bytes());
    bump_version(b);
    reseal(b);
    true
}

/// [`set_sorted_value`] without the version bump: the image
/// [`Node::encode`] gives for the decoded node with that value (the NAM
/// designs' MS-side nodes, which only their MS's serialised handlers
/// touch, keep their version, [`crate::nam::ms`]).
pub(crate) fn set_sorted_value_same_version(b: &mut [u8], value_off: usize, value: u64) {
    b[value_off..value_off + 8].copy_from_slice(&value.to_le_bytes());
    reseal(b);
}
