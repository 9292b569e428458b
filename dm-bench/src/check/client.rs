//! The client workload: random get / insert / update / remove / scan on a
//! small key space (with small nodes, so conflicts, splits and root growth
//! are frequent), each operation logged as an [`Event`] with its call and
//! return times. Every written value is unique (client id and operation
//! number), so a read names the write it saw.

use super::args::Args;
use super::history::{Event, Kind};
use crate::kv::Kv;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::RefCell;
use std::rc::Rc;

/// Key `k` as the index sees it: 8 bytes, big-endian (ordered as `k`).
pub(super) fn key(k: u64) -> Vec<u8> {
    k.to_be_bytes().to_vec()
}

/// One client: `a.ops` random operations on keys drawn from `keys`, each
/// logged with its call and return times on `clock`. Stops at the first
/// error. With `cut_off` (`--faults crash`) each operation is logged at its
/// call, as cut off (return time `u64::MAX`; [`Kind::UpdateMaybe`],
/// [`Kind::RemoveMaybe`]), and completed in place when it returns, so the
/// operation a crash cuts off stays in the history ([`drop_cut_reads`]).
#[allow(clippy::too_many_arguments)]
pub(super) async fn client<T: Kv>(
    t: Rc<T>,
    id: u32,
    seed: u64,
    a: Rc<Args>,
    keys: std::ops::Range<u64>,
    log: Rc<RefCell<Vec<Event>>>,
    clock: fn() -> u64,
    cut_off: bool,
) -> Result<(), String> {
    if keys.is_empty() {
        return Err(format!("client {id}: no keys to draw from ({keys:?})"));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(1_000_003) ^ id as u64);
    for i in 0..a.ops {
        let k = rng.gen_range(keys.clone());
        let value = ((id as u64 + 1) << 32) | (i as u64 + 1);
        let p = rng.gen_range(0..100);
        let n = if p >= 90 { rng.gen_range(1..12u32) } else { 0 };
        // The operation, as the history holds it while it runs (and for
        // good if a crash cuts it off).
        let pending = match p {
            0..30 => Kind::Insert(value),
            30..40 => Kind::UpdateMaybe(value),
            40..55 => Kind::RemoveMaybe,
            55..90 => Kind::Get(None),
            _ => Kind::Scan(n, Vec::new()),
        };
        let call = clock();
        let at = cut_off.then(|| {
            let mut l = log.borrow_mut();
            l.push(Event {
                client: id,
                key: k,
                hi: keys.end,
                kind: pending.clone(),
                call,
                ret: u64::MAX,
            });
            l.len() - 1
        });
        let kind = match pending {
            Kind::Insert(v) => {
                t.insert(&key(k), v).await?;
                Kind::Insert(v)
            }
            Kind::UpdateMaybe(v) => Kind::Update(v, t.update(&key(k), v).await?),
            Kind::RemoveMaybe => Kind::Remove(t.remove(&key(k)).await?),
            Kind::Get(_) => Kind::Get(t.get(&key(k)).await?),
            Kind::Scan(n, _) => {
                let r = t.scan(&key(k), n as usize).await?;
                Kind::Scan(
                    n,
                    r.into_iter()
                        .map(|(kk, v)| (u64::from_be_bytes(kk.try_into().unwrap()), v))
                        .collect(),
                )
            }
            Kind::Update(..) | Kind::Remove(_) => unreachable!("drawn as pending kinds above"),
        };
        let e = Event {
            client: id,
            key: k,
            hi: keys.end,
            kind,
            call,
            ret: clock(),
        };
        match at {
            Some(i) => log.borrow_mut()[i] = e,
            None => log.borrow_mut().push(e),
        }
    }
    Ok(())
}

/// Drops the reads (gets, scans) a crash cut off from `h`: they had no
/// effect and returned nothing. Cut-off writes stay, as maybes.
pub(super) fn drop_cut_reads(h: &mut Vec<Event>) {
    h.retain(|e| e.ret != u64::MAX || !matches!(e.kind, Kind::Get(_) | Kind::Scan(..)));
}
