//! Claiming a name (module docs, "Protocol"): the root area, the slot of
//! the name's probe sequence, and then publishing the entry or abandoning
//! the claim.

use super::takeover;
use super::{
    check_name, encode_body, hash, place, probe, read_entry, read_word, state_word, word_hash,
    word_state, CatalogError, Claim, Entry, ABANDONED, BUSY_RETRIES, READY,
};
use crate::lock::Member;
use crate::sync::yield_now;
use crate::verbs::{cas, faa, write};
use dm_verbs::GlobalAddr;

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
    /// Its claimer was dead, or abandoned it, and this creator took the
    /// claim over (`takeover`, [`abandon`]).
    Taken,
}

/// Who holds slot `slot`, whose state word read `w` (non-zero), for a
/// claim of `name` (hash `h`): waits while a same-hash claim is unpublished.
async fn holder(
    slot: u8,
    name: &str,
    h: u32,
    mut w: u64,
    mine: u64,
    me: Option<&Member>,
) -> Result<Held, CatalogError> {
    let mut watch = takeover::Watch::new();
    for _ in 0..BUSY_RETRIES {
        if w == 0 {
            return Ok(Held::Empty);
        }
        if word_hash(w) != h {
            return Ok(Held::Other);
        }
        if word_state(w) == ABANDONED {
            // Issued after the word read abandoned: sees the name its
            // creator wrote before its create began.
            if read_entry(slot).await?.name != name {
                return Ok(Held::Other);
            }
            let old = cas(place::entry(slot), w, mine).await?;
            if old == w {
                return Ok(Held::Taken);
            }
            w = old;
            continue;
        }
        if word_state(w) == READY {
            let e = read_entry(slot).await?;
            return Ok(if e.name == name {
                Held::Mine(e)
            } else {
                Held::Other
            });
        }
        if let Some(m) = me {
            match watch.take_if_dead(m, slot, w, mine).await? {
                Ok(()) => return Ok(Held::Taken),
                Err(now) if now != w => {
                    w = now;
                    continue;
                }
                Err(_) => {}
            }
        }
        yield_now().await;
        w = read_word(place::entry(slot)).await?;
    }
    Err(CatalogError::Busy(name.to_string()))
}

/// Claims the first slot of `h`'s probe sequence `name` can have, with
/// the state word `mine` (a claim of hash `h`, naming `me` if a member).
async fn take_slot(name: &str, h: u32, mine: u64, me: Option<&Member>) -> Result<u8, CatalogError> {
    for slot in probe(h) {
        loop {
            let w = cas(place::entry(slot), 0, mine).await?;
            if w == 0 {
                return Ok(slot);
            }
            match holder(slot, name, h, w, mine, me).await? {
                Held::Other => break,
                Held::Mine(e) => return Err(CatalogError::AlreadyExists(e)),
                Held::Empty => continue,
                Held::Taken => return Ok(slot),
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
    claim_as(name, kind, root_bytes, tag, None).await
}

/// [`claim`] by member `me` (`None`: as [`claim`]): the claim's state
/// word names `me` (16 bits, as a GLT lane names its holder), a claim of
/// the same hash whose named creator is dead past the lease is taken over
/// with one CAS instead of waited for (`takeover`), and [`publish`] CASes
/// from the claim word (a creator presumed dead publishes nothing:
/// [`CatalogError::ClaimLost`]). Errors: as [`claim`], and the READs of
/// membership records.
pub async fn claim_as(
    name: &str,
    kind: u64,
    root_bytes: u32,
    tag: u64,
    me: Option<&Member>,
) -> Result<Claim, CatalogError> {
    let h = check_name(name)?;
    let word = takeover::claim_word(h, me);
    let (root_off, want) = alloc_area(root_bytes).await?;
    let slot = match take_slot(name, h, word, me).await {
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
    Ok(Claim { entry, word })
}

/// Publishes a claimed entry (its index is created): from now on
/// [`lookup`](super::lookup) finds it and other creators of the name get it.
/// A member's claim is published by a CAS from its own claim word, so a
/// creator whose claim was taken over (presumed dead) publishes nothing:
/// [`CatalogError::ClaimLost`].
pub async fn publish(claim: Claim) -> Result<Entry, CatalogError> {
    let e = claim.entry;
    let w = state_word(hash(&e.name), READY);
    if takeover::names_a_member(claim.word) {
        if cas(place::entry(e.slot), claim.word, w).await? != claim.word {
            return Err(CatalogError::ClaimLost(e.name));
        }
        return Ok(e);
    }
    write(place::entry(e.slot), w.to_le_bytes().to_vec()).await?;
    Ok(e)
}

/// Gives up `claim` after its index's create failed: one CAS of its
/// claim word to the abandoned word of its name's hash, so the next
/// creator of the name claims the slot again instead of finding it busy
/// (module docs). Nothing happens if the claim was taken over meanwhile
/// (presumed dead: `takeover`). Errors: the CAS's verb error (the slot
/// then stays claimed).
pub async fn abandon(claim: Claim) -> Result<(), CatalogError> {
    let w = state_word(word_hash(claim.word), ABANDONED);
    cas(place::entry(claim.entry.slot), claim.word, w).await?;
    Ok(())
}
