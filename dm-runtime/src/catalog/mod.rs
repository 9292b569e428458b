//! The catalog of named roots: indexes that share a fabric find each other
//! by name, from any process, instead of agreeing on fixed superblock
//! offsets (issue 31: "The catalog owns the superblock; nothing else writes
//! fixed offsets"). Its words are on MS 0, in the superblock ranges that
//! [`dm_verbs::ms::superblock`] gives it, reached with this crate's
//! one-sided verbs, so every function here is awaited inside a task.
//!
//! ## Where it lives
//!
//! | superblock offset | bytes | MS | what |
//! |---|---|---|---|
//! | 64 (`CATALOG_BUMP`) | 8 | 0 | bytes of the root-area range handed out so far (FAA) |
//! | 128 (`CATALOG_ENTRIES`) + 64 x slot | 64 | 0 | entry `slot`, 0..14 |
//! | 1024..2560 (`ROOT_AREAS`) | 1,536 | every | root areas, handed out in address order |
//!
//! A root area is at the same offset on every MS, so an index may keep
//! per-MS words in it (a host lock table's address, NAM headers).
//!
//! ## Entry (64 bytes, little-endian)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | state word: bits 0..8 state (0 empty, 1 claimed, 2 ready, 3 abandoned), bits 32..64 FNV-1a hash of the name |
//! | 8 | 32 | name: 1..=32 bytes of UTF-8 without NUL, zero padded |
//! | 40 | 8 | kind descriptor (the caller's: index family, key width, ...; checked on open) |
//! | 48 | 4 | root-area superblock offset (u32) |
//! | 52 | 4 | root-area bytes (u32, a multiple of 8) |
//! | 56 | 8 | creator tag (the caller's, e.g. `(cs << 16 | core) + 1`) |
//!
//! ## Protocol
//!
//! A state word only moves forward, empty -> claimed -> ready (a claim
//! may pass to another claimer: `takeover`; a creator whose create failed
//! marks its claim abandoned, and the next creator of the same name claims
//! it again: [`abandon`]); nothing clears it (removing a name is future
//! work). Creating `name` with hash `h`:
//!
//! 1. **Root area**: one FAA of the wanted bytes (rounded up to 8) on the
//!    bump word. If that overruns the range the bytes are given back (FAA
//!    of the negated amount) and the claim fails with
//!    [`CatalogError::NoRoom`]; no slot was taken.
//! 2. **Slot**: slots are probed linearly from `h % 14`, so two creators of
//!    one name walk the same sequence. At each slot, CAS `0 -> h << 32 |
//!    CLAIMED`. On failure the old word says who holds it: another hash ->
//!    next slot (a member's claim word also names it in bits 8..24:
//!    `takeover`); the same hash, abandoned -> READ the entry: the same
//!    name -> CAS the abandoned word to this claim (as if the slot were
//!    empty), else next slot; the same hash -> re-READ the word (yielding between tries,
//!    at most [`BUSY_RETRIES`] times, else [`CatalogError::Busy`]) until it
//!    is READY, then READ the entry and compare names: the same ->
//!    [`CatalogError::AlreadyExists`], else next slot. 14 slots held by
//!    others -> [`CatalogError::Full`]. On these failures the root area is
//!    given back if nobody allocated after it (a CAS of the bump back),
//!    else its bytes stay unused.
//! 3. **Entry**: one WRITE of bytes 8..64 (name, kind, root area, tag),
//!    then a WRITE of zeros over the root area on every MS; the caller gets
//!    a [`Claim`], runs its index's create (which writes the index's root
//!    words into the area) and [`publish`]es it: one WRITE of the state
//!    word `h << 32 | READY`, posted after everything before it completed.
//!
//! **Why it is sound under torn READs.** Only 8-byte aligned words are read
//! atomically; an entry is acted on only after its state word read READY,
//! and then READ again: that READ is issued after the READY WRITE landed,
//! which was posted after the name, root area and the index's root words
//! had landed, so it sees all of them (they never change afterwards).
//! Because no word moves back to empty, the slot a name ends up in is the
//! first of its probe sequence that was empty when a creator reached it,
//! and every later creator of the name passes through that slot and sees
//! the name there; and a lookup may stop at the first empty slot.
//!
//! **Why the root area comes first** (the brief of issue 31 took the slot
//! first and cleared it again on `NoRoom`): a slot that goes back to empty
//! breaks the argument above. A creator of `a` that probed past a slot
//! while a creator of `b` held it, then a second creator of `a` that found
//! it emptied, would both create `a`. Allocating first costs the area's
//! bytes on a lost race when another allocation came after it.
//!
//! **A creator whose create fails** calls [`abandon`]: one CAS of its
//! claim word to the abandoned word of the same hash. The entry's name
//! was written before the create began, so a creator that READs the
//! abandoned word and then the entry sees the name, and only a creator of
//! that name claims the slot again (one CAS; it writes its own entry body
//! and zeroes a root area of its own, the abandoned one's bytes stay
//! unused). The slot never returns to empty, so the argument above holds.
//!
//! **A creator that dies** (or drops its [`Claim`])
//! between claim and publish leaves the slot claimed: its name, and any
//! name whose hash collides with it, is [`CatalogError::Busy`] for
//! creators that are not members. A creator that is a member of the
//! membership table (issue 33, [`crate::lock::member`]; the `_as`
//! functions) names itself in its claim, and takes over a claim whose
//! named creator is dead (`takeover`): the slot passes from one claim
//! to another, never back to empty, so the argument above holds.

mod claim;
mod open;
mod takeover;

pub use claim::{abandon, claim, claim_as, publish};
pub use open::{open_or_create, open_or_create_as};

use crate::verbs::read;
use dm_verbs::ms::superblock;
use dm_verbs::{GlobalAddr, VerbError};
use std::fmt;

/// Number of catalog entries.
pub const SLOTS: u8 = superblock::CATALOG_SLOTS as u8;
/// Longest name, in bytes.
pub const MAX_NAME: usize = 32;
/// Re-READs of a slot claimed under the same hash before a creator gives
/// up with [`CatalogError::Busy`] (one READ and one yield each: about 2 s
/// of virtual time on the sim's network model, similar on RDMA; the
/// creator's index create runs meanwhile).
pub const BUSY_RETRIES: u32 = 1_000_000;

const CLAIMED: u64 = 1;
const READY: u64 = 2;
const ABANDONED: u64 = 3;

/// A named root: where an index's root words live and what index it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Catalog slot, 0..[`SLOTS`].
    pub slot: u8,
    pub name: String,
    /// The creator's kind descriptor ([`open_or_create`] checks it).
    pub kind: u64,
    /// Superblock offset of the root area (the same on every MS).
    pub root_off: u64,
    /// Bytes of the root area (the requested size rounded up to 8).
    pub root_bytes: u32,
    /// The creator's tag.
    pub tag: u64,
}

/// Why a catalog operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CatalogError {
    /// The name is empty, longer than [`MAX_NAME`] bytes or contains NUL.
    BadName(String),
    /// All [`SLOTS`] entries hold other names.
    Full,
    /// The root-area range has `left` bytes, the claim wanted `want`.
    NoRoom { want: u64, left: u64 },
    /// The name (or one with the same hash) stayed claimed but unpublished
    /// through [`BUSY_RETRIES`] READs: its creator is slow or died.
    Busy(String),
    /// The name exists with another kind descriptor.
    KindMismatch { name: String, want: u64, found: u64 },
    /// The name exists (the claim lost to, or came after, its creator).
    AlreadyExists(Entry),
    /// Another member took this creator's claim over before it published
    /// (it presumed the creator dead: stalled past the lease,
    /// [`crate::lock::member`]); nothing was published by this creator.
    ClaimLost(String),
    /// A verb failed.
    Verb(VerbError),
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatalogError::BadName(n) => write!(
                f,
                "bad catalog name {n:?}: want 1 to {MAX_NAME} bytes of UTF-8 without NUL"
            ),
            CatalogError::Full => write!(f, "the catalog's {SLOTS} entries are taken"),
            CatalogError::NoRoom { want, left } => write!(
                f,
                "no room for a {want}-byte root area: {left} bytes of the superblock's root areas left"
            ),
            CatalogError::Busy(n) => write!(
                f,
                "catalog name {n:?} stays claimed but unpublished (its creator is slow or died)"
            ),
            CatalogError::KindMismatch { name, want, found } => write!(
                f,
                "catalog name {name:?} is an index of kind {found:#x}, not {want:#x}"
            ),
            CatalogError::AlreadyExists(e) => {
                write!(f, "catalog name {:?} exists (slot {})", e.name, e.slot)
            }
            CatalogError::ClaimLost(n) => write!(
                f,
                "the claim of catalog name {n:?} was taken over by another member (this creator \
                 stalled past the lease and was presumed dead); nothing was published"
            ),
            CatalogError::Verb(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CatalogError {}

impl From<VerbError> for CatalogError {
    fn from(e: VerbError) -> Self {
        CatalogError::Verb(e)
    }
}

/// A claimed, not yet published entry: run the index's create in its root
/// area, then [`publish`] it. Dropping it leaves the name
/// [`CatalogError::Busy`] for creators that are not members, and to
/// members until the lease shows this claimer dead (module docs).
#[must_use = "an unpublished claim leaves its name busy for good"]
#[derive(Debug)]
pub struct Claim {
    pub entry: Entry,
    /// The state word this claim CASed into its slot.
    word: u64,
}

/// Every superblock address the catalog touches (the one place that
/// computes them, from [`dm_verbs::ms::superblock`]).
mod place {
    use super::superblock as sb;
    use dm_verbs::GlobalAddr;

    /// Bytes of the root-area range.
    pub const ROOM: u64 = sb::ROOT_AREAS_END - sb::ROOT_AREAS;

    pub fn bump() -> GlobalAddr {
        GlobalAddr::new(0, sb::CATALOG_BUMP)
    }

    /// Entry `slot` (its state word first).
    pub fn entry(slot: u8) -> GlobalAddr {
        GlobalAddr::new(
            0,
            sb::CATALOG_ENTRIES + slot as u64 * sb::CATALOG_ENTRY_BYTES,
        )
    }

    /// Entry `slot`'s bytes after the state word.
    pub fn entry_body(slot: u8) -> GlobalAddr {
        entry(slot).add(8)
    }

    /// All entries, and their length.
    pub fn table() -> (GlobalAddr, u32) {
        (
            entry(0),
            (sb::CATALOG_SLOTS * sb::CATALOG_ENTRY_BYTES) as u32,
        )
    }

    /// Superblock offset of the root area `rel` bytes into the range.
    pub fn area_off(rel: u64) -> u64 {
        sb::ROOT_AREAS + rel
    }

    /// Bytes into the range of the root area at superblock offset `off`.
    pub fn area_rel(off: u64) -> u64 {
        off - sb::ROOT_AREAS
    }
}

/// FNV-1a, 32 bits.
fn hash(name: &str) -> u32 {
    name.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

fn state_word(h: u32, state: u64) -> u64 {
    (h as u64) << 32 | state
}

fn word_hash(w: u64) -> u32 {
    (w >> 32) as u32
}

fn word_state(w: u64) -> u64 {
    w & 0xff
}

fn check_name(name: &str) -> Result<u32, CatalogError> {
    if name.is_empty() || name.len() > MAX_NAME || name.contains('\0') {
        // At most the first 64 characters of a long name, and its length.
        let shown = match name.char_indices().nth(64) {
            Some((end, _)) => format!("{}... ({} bytes)", &name[..end], name.len()),
            None => name.to_string(),
        };
        return Err(CatalogError::BadName(shown));
    }
    Ok(hash(name))
}

/// The slots of `h`'s probe sequence, in order.
fn probe(h: u32) -> impl Iterator<Item = u8> {
    let start = (h % SLOTS as u32) as u8;
    (0..SLOTS).map(move |i| (start + i) % SLOTS)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Bytes 8..64 of `e`'s entry.
fn encode_body(e: &Entry) -> Vec<u8> {
    let mut b = vec![0u8; 56];
    b[..e.name.len()].copy_from_slice(e.name.as_bytes());
    b[32..40].copy_from_slice(&e.kind.to_le_bytes());
    b[40..44].copy_from_slice(&(e.root_off as u32).to_le_bytes());
    b[44..48].copy_from_slice(&e.root_bytes.to_le_bytes());
    b[48..56].copy_from_slice(&e.tag.to_le_bytes());
    b
}

/// The entry in the 64 bytes `b` of slot `slot`.
fn decode(slot: u8, b: &[u8]) -> Entry {
    let name = &b[8..40];
    let len = name.iter().position(|&c| c == 0).unwrap_or(name.len());
    Entry {
        slot,
        name: String::from_utf8_lossy(&name[..len]).into_owned(),
        kind: u64_at(b, 40),
        root_off: u32_at(b, 48) as u64,
        root_bytes: u32_at(b, 52),
        tag: u64_at(b, 56),
    }
}

async fn read_word(a: GlobalAddr) -> Result<u64, CatalogError> {
    Ok(u64_at(&read(a, 8).await?, 0))
}

/// Entry `slot`, READ whole (call it after its state word read READY).
async fn read_entry(slot: u8) -> Result<Entry, CatalogError> {
    Ok(decode(slot, &read(place::entry(slot), 64).await?))
}

/// The published entry called `name`, if any.
pub async fn lookup(name: &str) -> Result<Option<Entry>, CatalogError> {
    let h = check_name(name)?;
    let (t, len) = place::table();
    let table = read(t, len).await?;
    for slot in probe(h) {
        let w = u64_at(&table, slot as usize * 64);
        if w == 0 {
            // Nothing goes back to empty: the name is in no later slot.
            break;
        }
        if w == state_word(h, READY) {
            let e = read_entry(slot).await?;
            if e.name == name {
                return Ok(Some(e));
            }
        }
    }
    Ok(None)
}

/// Every published entry, by slot.
pub async fn list() -> Result<Vec<Entry>, CatalogError> {
    let (t, len) = place::table();
    let first = read(t, len).await?;
    let ready: Vec<u8> = (0..SLOTS)
        .filter(|&s| word_state(u64_at(&first, s as usize * 64)) == READY)
        .collect();
    if ready.is_empty() {
        return Ok(Vec::new());
    }
    // Issued after those state words read READY: sees their entries whole.
    let again = read(t, len).await?;
    Ok(ready
        .into_iter()
        .map(|s| decode(s, &again[s as usize * 64..(s as usize + 1) * 64]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_round_trips() {
        let e = Entry {
            slot: 3,
            name: "sessions".into(),
            kind: 0x0102_0000_0008_0400,
            root_off: 1040,
            root_bytes: 64,
            tag: 0x1_0002,
        };
        let mut b = state_word(hash(&e.name), READY).to_le_bytes().to_vec();
        b.extend(encode_body(&e));
        assert_eq!(b.len(), 64);
        assert_eq!(decode(3, &b), e);
    }

    #[test]
    fn names_and_probes() {
        assert!(check_name("").is_err());
        assert!(check_name(&"x".repeat(33)).is_err());
        assert!(check_name("a\0b").is_err());
        assert!(check_name(&"é".repeat(16)).is_ok());
        let p: Vec<u8> = probe(hash("users")).collect();
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(sorted, (0..SLOTS).collect::<Vec<_>>());
        assert_eq!(p[0] as u32, hash("users") % SLOTS as u32);
    }
}
