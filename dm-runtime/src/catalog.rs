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
//! | 0 | 8 | state word: bits 0..8 state (0 empty, 1 claimed, 2 ready), bits 32..64 FNV-1a hash of the name |
//! | 8 | 32 | name: 1..=32 bytes of UTF-8 without NUL, zero padded |
//! | 40 | 8 | kind descriptor (the caller's: index family, key width, ...; checked on open) |
//! | 48 | 4 | root-area superblock offset (u32) |
//! | 52 | 4 | root-area bytes (u32, a multiple of 8) |
//! | 56 | 8 | creator tag (the caller's, e.g. `(cs << 16 | core) + 1`) |
//!
//! ## Protocol
//!
//! A state word only moves forward, empty -> claimed -> ready; nothing
//! clears it (removing a name, and recovering one whose creator died, are
//! future work: issue 33). Creating `name` with hash `h`:
//!
//! 1. **Root area**: one FAA of the wanted bytes (rounded up to 8) on the
//!    bump word. If that overruns the range the bytes are given back (FAA
//!    of the negated amount) and the claim fails with
//!    [`CatalogError::NoRoom`]; no slot was taken.
//! 2. **Slot**: slots are probed linearly from `h % 14`, so two creators of
//!    one name walk the same sequence. At each slot, CAS `0 -> h << 32 |
//!    CLAIMED`. On failure the old word says who holds it: another hash ->
//!    next slot; the same hash -> re-READ the word (yielding between tries,
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
//! **A creator that dies** (or drops its [`Claim`], or whose create fails)
//! between claim and publish leaves the slot claimed: its name, and any
//! name whose hash collides with it, is [`CatalogError::Busy`] from then
//! on. Recovery is future work (issue 33).

use crate::sync::yield_now;
use crate::verbs::{cas, faa, read, write};
use dm_verbs::ms::superblock;
use dm_verbs::{GlobalAddr, VerbError};
use std::fmt;
use std::future::Future;

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
/// [`CatalogError::Busy`] for good (module docs; issue 33).
#[must_use = "an unpublished claim leaves its name busy for good"]
#[derive(Debug)]
pub struct Claim {
    pub entry: Entry,
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
        return Err(CatalogError::BadName(name.to_string()));
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

/// Takes bytes for a root area: its superblock offset and the bytes taken.
async fn alloc_area(root_bytes: u32) -> Result<(u64, u64), CatalogError> {
    let want = (root_bytes as u64).next_multiple_of(8);
    let old = faa(place::bump(), want).await?;
    if old.saturating_add(want) > place::ROOM {
        faa(place::bump(), want.wrapping_neg()).await?;
        return Err(CatalogError::NoRoom {
            want,
            left: place::ROOM.saturating_sub(old),
        });
    }
    Ok((place::area_off(old), want))
}

/// Gives the root area at `off` back if nothing was allocated after it
/// (else its bytes stay unused). Best effort: the caller is failing anyway.
async fn give_back(off: u64, want: u64) {
    let rel = place::area_rel(off);
    let _ = cas(place::bump(), rel + want, rel).await;
}

/// What a claim found in a slot it could not take.
enum Held {
    /// Another name holds it.
    Other,
    /// `name` is published there.
    Mine(Entry),
    /// The word read empty (not a state the protocol produces; taken as a
    /// slot to CAS again).
    Empty,
}

/// Who holds slot `slot`, whose state word read `w` (non-zero), for a
/// claim of `name` (hash `h`): waits while a same-hash claim is unpublished.
async fn holder(slot: u8, name: &str, h: u32, mut w: u64) -> Result<Held, CatalogError> {
    for _ in 0..BUSY_RETRIES {
        if w == 0 {
            return Ok(Held::Empty);
        }
        if word_hash(w) != h {
            return Ok(Held::Other);
        }
        if word_state(w) == READY {
            let e = read_entry(slot).await?;
            return Ok(if e.name == name {
                Held::Mine(e)
            } else {
                Held::Other
            });
        }
        yield_now().await;
        w = read_word(place::entry(slot)).await?;
    }
    Err(CatalogError::Busy(name.to_string()))
}

/// Claims the first slot of `h`'s probe sequence `name` can have.
async fn take_slot(name: &str, h: u32) -> Result<u8, CatalogError> {
    let mine = state_word(h, CLAIMED);
    for slot in probe(h) {
        loop {
            let w = cas(place::entry(slot), 0, mine).await?;
            if w == 0 {
                return Ok(slot);
            }
            match holder(slot, name, h, w).await? {
                Held::Other => break,
                Held::Mine(e) => return Err(CatalogError::AlreadyExists(e)),
                Held::Empty => continue,
            }
        }
    }
    Err(CatalogError::Full)
}

/// Claims `name` for an index of kind `kind` with a root area of
/// `root_bytes` (rounded up to 8), zeroed on every MS; `tag` names the
/// creator. Errors: [`CatalogError::BadName`], [`CatalogError::NoRoom`],
/// [`CatalogError::AlreadyExists`] (with the published entry),
/// [`CatalogError::Busy`], [`CatalogError::Full`], [`CatalogError::Verb`].
pub async fn claim(
    name: &str,
    kind: u64,
    root_bytes: u32,
    tag: u64,
) -> Result<Claim, CatalogError> {
    let h = check_name(name)?;
    let (root_off, want) = alloc_area(root_bytes).await?;
    let slot = match take_slot(name, h).await {
        Ok(s) => s,
        Err(e) => {
            give_back(root_off, want).await;
            return Err(e);
        }
    };
    let entry = Entry {
        slot,
        name: name.to_string(),
        kind,
        root_off,
        root_bytes: want as u32,
        tag,
    };
    write(place::entry_body(slot), encode_body(&entry)).await?;
    if want > 0 {
        let zeros = (0..crate::num_ms())
            .map(|ms| write(GlobalAddr::new(ms, root_off), vec![0; want as usize]));
        futures::future::try_join_all(zeros).await?;
    }
    Ok(Claim { entry })
}

/// Publishes a claimed entry (its index is created): from now on
/// [`lookup`] finds it and other creators of the name get it.
pub async fn publish(claim: Claim) -> Result<Entry, CatalogError> {
    let e = claim.entry;
    let w = state_word(hash(&e.name), READY);
    write(place::entry(e.slot), w.to_le_bytes().to_vec()).await?;
    Ok(e)
}

fn check_kind(e: Entry, kind: u64) -> Result<Entry, CatalogError> {
    if e.kind != kind {
        return Err(CatalogError::KindMismatch {
            name: e.name,
            want: kind,
            found: e.kind,
        });
    }
    Ok(e)
}

/// Opens `name`, or creates it: [`lookup`]; if absent, [`claim`] it, run
/// `create(entry)` (the index's create, writing its root words into the
/// entry's root area) and [`publish`] it. A creator that lost the race
/// gets the winner's entry. The bool is true when this call created it.
/// Errors: the name exists with another kind ([`CatalogError::KindMismatch`]),
/// the errors of [`claim`], and `create`'s (the name then stays busy:
/// module docs).
pub async fn open_or_create<F, Fut, E>(
    name: &str,
    kind: u64,
    root_bytes: u32,
    tag: u64,
    create: F,
) -> Result<(Entry, bool), E>
where
    F: FnOnce(Entry) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: From<CatalogError>,
{
    if let Some(e) = lookup(name).await? {
        return Ok((check_kind(e, kind)?, false));
    }
    match claim(name, kind, root_bytes, tag).await {
        Ok(c) => {
            create(c.entry.clone()).await?;
            Ok((publish(c).await?, true))
        }
        Err(CatalogError::AlreadyExists(e)) => Ok((check_kind(e, kind)?, false)),
        Err(e) => Err(e.into()),
    }
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
