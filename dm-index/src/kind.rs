//! Which index: [`IndexKind`], one name per index and rung, and each one's
//! key-width rule ([`KeyRule`]) stated in one place.

use crate::error::Error;

/// Every index and rung the workspace builds, by the name the papers and
/// `dm-bench --index` use.
///
/// | kind | name | family, paper |
/// |---|---|---|
/// | [`Fg`](Self::Fg) | `fg` | FG+ B+tree (Ziegler et al. SIGMOD'19 fine-grained, with Sherman §5's FG+ fixes) |
/// | [`ShermanCombine`](Self::ShermanCombine) | `sherman-combine` | + command combination (Sherman §4.4) |
/// | [`ShermanOnchip`](Self::ShermanOnchip) | `sherman-onchip` | + on-chip global lock table (Sherman §4.3) |
/// | [`ShermanHier`](Self::ShermanHier) | `sherman-hier` | + hierarchical lock (HOCL, Sherman §4.3) |
/// | [`Sherman`](Self::Sherman) | `sherman` | + two-level versions (Sherman §4.5) |
/// | [`NamCoarse`](Self::NamCoarse) | `nam-coarse` | Ziegler et al. §3.1: coarse-grained, MS-side RPC |
/// | [`NamHybrid`](Self::NamHybrid) | `nam-hybrid` | Ziegler et al. §3.3: one-sided inner nodes, RPC leaves |
/// | [`Dex`](Self::Dex) | `dex` | DEX (VLDB'24): partitioned CS caches, offloading |
/// | [`Art`](Self::Art) | `art` | DM-ported ART (SMART §5.1.3: ROWEX, RCU leaves, HOCL) |
/// | [`LockFreeArt`](Self::LockFreeArt) | `lockfree-art` | + lock-free internal nodes (SMART §4.6.4) |
/// | [`SmartInPlace`](Self::SmartInPlace) | `smart-inplace` | + in-place leaves under a lock-table lock |
/// | [`Smart`](Self::Smart) | `smart` | SMART (OSDI'23): rear-embedded lock, read delegation, write combining |
/// | [`Dolphin`](Self::Dolphin) | `dolphin` | Dolphin: FAA Spear lock, 7-byte-prefix leaves |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexKind {
    Fg,
    ShermanCombine,
    ShermanOnchip,
    ShermanHier,
    Sherman,
    NamCoarse,
    NamHybrid,
    Dex,
    Art,
    LockFreeArt,
    SmartInPlace,
    Smart,
    Dolphin,
}

/// The family an [`IndexKind`] belongs to (which crate and handle type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `dm_tree::FgTree`: FG+, the Sherman rungs, the NAM designs.
    BTree,
    /// `dm_tree::DexTree`.
    Dex,
    /// `dm_art::SmartTree`: SMART and its ladder down to ART.
    Radix,
    /// `dm_art::DolphinTree`.
    Dolphin,
}

/// Which key lengths an index takes. Every index here takes fixed-width
/// keys: each key has exactly the configured length, which must lie in
/// `min..=max` (compare them as big-endian bytes: `u64::to_be_bytes` keeps
/// integer order).
///
/// | family | key bytes |
/// |---|---|
/// | B+trees (FG+, Sherman, NAM) and DEX | 1..=32 (`dm_tree::TreeConfig::key_bytes`) |
/// | radix (ART .. SMART) | 1..=255 (`dm_art::KeyCodec::fixed`) |
/// | Dolphin | exactly 8 (its leaves hold 7-byte prefixes plus a 1-byte suffix) |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRule {
    pub min: usize,
    pub max: usize,
}

impl KeyRule {
    /// The rule of an open index: keys of exactly `width` bytes.
    pub fn exact(width: usize) -> KeyRule {
        KeyRule {
            min: width,
            max: width,
        }
    }

    /// Whether a key of `len` bytes is within `min..=max`.
    fn admits(&self, len: usize) -> bool {
        (self.min..=self.max).contains(&len)
    }

    /// `Err(KeyLength)` if `key` is shorter than `min` or longer than
    /// `max` bytes: the check every operation of [`crate::Index`] and
    /// [`crate::Client::core_of`] makes first.
    pub fn check_key(&self, key: &[u8]) -> Result<(), Error> {
        if !self.admits(key.len()) {
            return Err(Error::KeyLength {
                got: key.len(),
                want: *self,
            });
        }
        Ok(())
    }

    /// `Err(BadConfig)` if `key_bytes` is outside the rule.
    pub fn check_width(&self, kind: IndexKind, key_bytes: usize) -> Result<(), Error> {
        if !self.admits(key_bytes) {
            return Err(Error::BadConfig(format!(
                "{} takes keys of {}..={} bytes, not {key_bytes}",
                kind.name(),
                self.min,
                self.max
            )));
        }
        Ok(())
    }
}

impl IndexKind {
    /// Every kind, in the order of the table above.
    pub const ALL: [IndexKind; 13] = [
        IndexKind::Fg,
        IndexKind::ShermanCombine,
        IndexKind::ShermanOnchip,
        IndexKind::ShermanHier,
        IndexKind::Sherman,
        IndexKind::NamCoarse,
        IndexKind::NamHybrid,
        IndexKind::Dex,
        IndexKind::Art,
        IndexKind::LockFreeArt,
        IndexKind::SmartInPlace,
        IndexKind::Smart,
        IndexKind::Dolphin,
    ];

    /// The kind called `name` (`fg+` is also accepted for `fg`); an unknown
    /// name is [`Error::BadConfig`] listing every name.
    pub fn named(name: &str) -> Result<IndexKind, Error> {
        if name == "fg+" {
            return Ok(IndexKind::Fg);
        }
        Self::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
                Error::BadConfig(format!(
                    "unknown index {name:?}: one of {}",
                    names.join(", ")
                ))
            })
    }

    /// The kind's name (table above).
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Fg => "fg",
            IndexKind::ShermanCombine => "sherman-combine",
            IndexKind::ShermanOnchip => "sherman-onchip",
            IndexKind::ShermanHier => "sherman-hier",
            IndexKind::Sherman => "sherman",
            IndexKind::NamCoarse => "nam-coarse",
            IndexKind::NamHybrid => "nam-hybrid",
            IndexKind::Dex => "dex",
            IndexKind::Art => "art",
            IndexKind::LockFreeArt => "lockfree-art",
            IndexKind::SmartInPlace => "smart-inplace",
            IndexKind::Smart => "smart",
            IndexKind::Dolphin => "dolphin",
        }
    }

    /// Its family.
    pub fn family(self) -> Family {
        match self {
            IndexKind::Dex => Family::Dex,
            IndexKind::Art
            | IndexKind::LockFreeArt
            | IndexKind::SmartInPlace
            | IndexKind::Smart => Family::Radix,
            IndexKind::Dolphin => Family::Dolphin,
            _ => Family::BTree,
        }
    }

    /// Its key-width rule.
    pub fn key_rule(self) -> KeyRule {
        match self.family() {
            Family::BTree | Family::Dex => KeyRule { min: 1, max: 32 },
            Family::Radix => KeyRule { min: 1, max: 255 },
            Family::Dolphin => KeyRule { min: 8, max: 8 },
        }
    }

    /// Sherman's techniques of a B+tree kind (FG+ for the NAM designs and
    /// DEX, which lock leaves as FG+ does).
    pub fn tree_techniques(self) -> dm_tree::Techniques {
        match self {
            IndexKind::ShermanCombine => dm_tree::Techniques::SHERMAN_COMBINE,
            IndexKind::ShermanOnchip => dm_tree::Techniques::SHERMAN_ONCHIP,
            IndexKind::ShermanHier => dm_tree::Techniques::SHERMAN_HIER,
            IndexKind::Sherman => dm_tree::Techniques::SHERMAN,
            _ => dm_tree::Techniques::FG_PLUS,
        }
    }

    /// Ziegler et al.'s design of a B+tree kind (fine-grained otherwise).
    pub fn design(self) -> dm_tree::Design {
        match self {
            IndexKind::NamCoarse => dm_tree::Design::Coarse,
            IndexKind::NamHybrid => dm_tree::Design::Hybrid,
            _ => dm_tree::Design::Fine,
        }
    }

    /// SMART's techniques of a radix kind (SMART's own otherwise).
    pub fn radix_techniques(self) -> dm_art::Techniques {
        match self {
            IndexKind::Art => dm_art::Techniques::ART,
            IndexKind::LockFreeArt => dm_art::Techniques::LOCK_FREE_INTERNAL,
            IndexKind::SmartInPlace => dm_art::Techniques::IN_PLACE_LEAF,
            _ => dm_art::Techniques::SMART,
        }
    }

    /// A stable code (its position in [`IndexKind::ALL`]), kept in the
    /// catalog entry's kind descriptor.
    pub fn code(self) -> u8 {
        Self::ALL.iter().position(|&k| k == self).unwrap_or(0) as u8
    }

    /// The kind with [`IndexKind::code`] `c`.
    pub fn from_code(c: u8) -> Option<IndexKind> {
        Self::ALL.get(c as usize).copied()
    }
}

impl std::fmt::Display for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for IndexKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        IndexKind::named(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_agree_with_the_crates() {
        for k in IndexKind::ALL {
            assert_eq!(IndexKind::named(k.name()).unwrap(), k);
            assert_eq!(IndexKind::from_code(k.code()), Some(k));
        }
        for n in dm_tree::Techniques::NAMES {
            let k = IndexKind::named(n).unwrap();
            assert_eq!(Some(k.tree_techniques()), dm_tree::Techniques::named(n));
        }
        for (n, d) in dm_tree::Design::NAMES.iter().copied() {
            if n != "fg" {
                assert_eq!(IndexKind::named(n).unwrap().design(), d);
            }
        }
        assert!(IndexKind::named("btree").is_err());
    }
}
