//! Opening a name or creating it ([`open_or_create`]): the catalog's
//! [`lookup`], [`claim_as`] and [`publish`] in the order a service's
//! start-up needs them.

use super::{abandon, claim_as, lookup, publish, CatalogError, Entry};
use crate::lock::Member;
use std::future::Future;

/// [`open_or_create`] by member `me` ([`claim_as`]).
pub async fn open_or_create_as<F, Fut, E>(
    name: &str,
    kind: u64,
    root_bytes: u32,
    tag: u64,
    me: Option<&Member>,
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
    match claim_as(name, kind, root_bytes, tag, me).await {
        Ok(c) => {
            if let Err(e) = create(c.entry.clone()).await {
                // The next creator of the name claims it again; if the
                // CAS fails the name stays busy, as before abandoning.
                let _ = abandon(c).await;
                return Err(e);
            }
            Ok((publish(c).await?, true))
        }
        Err(CatalogError::AlreadyExists(e)) => Ok((check_kind(e, kind)?, false)),
        Err(e) => Err(e.into()),
    }
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

/// Opens `name`, or creates it: [`lookup`]; if absent, [`claim`](super::claim) it, run
/// `create(entry)` (the index's create, writing its root words into the
/// entry's root area) and [`publish`] it. A creator that lost the race
/// gets the winner's entry. The bool is true when this call created it.
/// Errors: the name exists with another kind ([`CatalogError::KindMismatch`]),
/// the errors of [`claim`](super::claim), and `create`'s (the claim is then
/// [`abandon`]ed: the next creator of the name claims it again).
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
    open_or_create_as(name, kind, root_bytes, tag, None, create).await
}
