//! Range scan: from the leaf covering `from`, along sibling pointers, each leaf
//! a validated image. Keys come out strictly increasing; a key present for the
//! whole scan is returned (a concurrent split only moves keys to the right
//! sibling, which the scan reaches through the image it read), and every key
//! returned was present in a validated leaf image.

use crate::node::Fence;
use crate::tree::{FgTree, TreeError};

impl FgTree {
    /// Up to `count` entries with key >= `from`, in key order.
    pub async fn scan(&self, from: &[u8], count: usize) -> Result<Vec<(Vec<u8>, u64)>, TreeError> {
        self.check_key(from)?;
        let mut out: Vec<(Vec<u8>, u64)> = Vec::new();
        if count == 0 {
            return Ok(out);
        }
        let (_, mut n) = self.find_leaf(from).await?;
        loop {
            for (k, v) in &n.entries {
                let after_last = out.last().is_none_or(|(l, _)| k > l);
                if k.as_slice() >= from && after_last {
                    out.push((k.clone(), *v));
                    if out.len() == count {
                        return Ok(out);
                    }
                }
            }
            if n.high == Fence::PosInf || n.sibling.is_null() {
                return Ok(out);
            }
            n = self.read_node(n.sibling).await?;
        }
    }
}
