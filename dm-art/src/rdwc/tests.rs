//! The table's unit tests: delegation batches, write coverage, the
//! write queue without combining, recycled cells and queues.

use super::*;
use futures::FutureExt;

fn follow<T: Clone>(j: Join<'_, T>) -> Waiter<'_, T> {
    match j {
        Join::Follow(w) => w,
        _ => panic!("expected to follow"),
    }
}

fn lead<T: Clone>(j: Join<'_, T>) -> Lead<'_> {
    match j {
        Join::Lead(l) => l,
        _ => panic!("expected to lead"),
    }
}

/// A settled follower's cell and a group's queue are kept, and the
/// next round's follower gets that very cell (no allocation once warm).
#[test]
fn followers_cells_and_queues_are_used_again() {
    let t = Rdwc::new(4, true, true);
    let mut seen = None;
    for round in 0..3 {
        let l = lead(t.join_read(b"k"));
        let f = follow(t.join_read(b"k"));
        let cell = Arc::as_ptr(&f.cell);
        if round > 0 {
            assert_eq!(Some(cell), seen, "round {round} took a new cell");
        }
        seen = Some(cell);
        l.start_read();
        l.finish_read(&Ok(Some(7)));
        assert!(matches!(f.wait().now_or_never(), Some(Ok(Ok(Some(7))))));
        let sp = t.spare.lock().unwrap();
        assert_eq!((sp.read_cells.len(), sp.read_queues.len()), (1, 1));
    }
    // Writes: the covered follower's cell comes back too.
    let l = lead(t.join_write(b"w", 1));
    let f = follow(t.join_write(b"w", 2));
    assert_eq!(l.consume(true), Some(2));
    l.finish_write(&Ok(true));
    assert!(matches!(f.wait().now_or_never(), Some(Ok(Ok(true)))));
    let sp = t.spare.lock().unwrap();
    assert_eq!((sp.write_cells.len(), sp.write_queues.len()), (1, 1));
}

#[test]
fn reads_go_to_the_batch_queued_before_the_start_and_leads_pass_on() {
    let t = Rdwc::new(1, true, true);
    let l = lead(t.join_read(b"k"));
    let early = follow(t.join_read(b"k"));
    assert!(
        matches!(t.join_read(b"other"), Join::Alone),
        "hash conflict"
    );
    l.start_read();
    let late = follow(t.join_read(b"k"));
    let late2 = follow(t.join_read(b"k"));
    l.finish_read(&Ok(Some(7)));
    assert_eq!(early.wait().now_or_never().unwrap().unwrap(), Ok(Some(7)));
    // `late` arrived after the search started: it leads the next round
    // instead of taking a possibly older answer.
    let l2 = late.wait().now_or_never().unwrap().unwrap_err();
    // ... and leaving unfinished passes the lead to `late2`.
    drop(l2);
    let l3 = late2.wait().now_or_never().unwrap().unwrap_err();
    l3.start_read();
    l3.finish_read(&Ok(None));
    assert!(
        matches!(t.join_read(b"other"), Join::Lead(_)),
        "group ended"
    );
    assert_eq!(t.stats().delegated_reads, 1);
    assert_eq!(t.stats().conflicts, 1);
}

#[test]
fn writes_are_acknowledged_only_if_the_leaders_write_covered_them() {
    let t = Rdwc::new(4, true, true);
    let l = lead(t.join_write(b"k", 1));
    let a = follow(t.join_write(b"k", 2));
    let b = follow(t.join_write(b"k", 3));
    assert_eq!(l.consume(true), Some(3), "the latest value is written");
    let c = follow(t.join_write(b"k", 4));
    let d = follow(t.join_write(b"k", 5));
    l.finish_write(&Ok(true));
    assert_eq!(a.wait().now_or_never().unwrap().unwrap(), Ok(true));
    assert_eq!(b.wait().now_or_never().unwrap().unwrap(), Ok(true));
    // `c` put its value in after the consume: not acknowledged, it leads.
    let lc = c.wait().now_or_never().unwrap().unwrap_err();
    assert_eq!(lc.consume(true), Some(5));
    lc.finish_write(&Ok(true));
    assert_eq!(d.wait().now_or_never().unwrap().unwrap(), Ok(true));
    assert_eq!(t.stats().combined_writes, 3);
    // A dropped follower leaves the queue; the group then ends.
    let l = lead(t.join_write(b"k", 1));
    drop(follow(t.join_write(b"k", 2)));
    l.finish_write(&Ok(false));
    assert!(matches!(t.join_write(b"k", 1), Join::Lead(_)));
    // Switched off: everyone runs alone.
    let off = Rdwc::new(4, false, false);
    assert!(matches!(off.join_read(b"k"), Join::Alone));
    assert!(matches!(off.join_write(b"k", 1), Join::Alone));
}

#[test]
fn without_combining_same_key_writers_queue_and_each_writes_its_own() {
    let t = Rdwc::new(4, false, false).queue_writers(true);
    assert!(matches!(t.join_read(b"k"), Join::Alone));
    let l = lead(t.join_write(b"k", 1));
    let a = follow(t.join_write(b"k", 2));
    let b = follow(t.join_write(b"k", 3));
    assert_eq!(l.consume(true), None, "the leader writes its own value");
    l.finish_write(&Ok(true));
    // Nobody was covered: `a` runs its own write next, then `b`.
    let la = a.wait().now_or_never().unwrap().unwrap_err();
    assert!(b.cell.try_get().is_none(), "b still waits");
    assert_eq!(la.consume(true), None);
    la.finish_write(&Ok(true));
    let lb = b.wait().now_or_never().unwrap().unwrap_err();
    lb.finish_write(&Ok(false));
    assert!(
        matches!(t.join_write(b"k", 9), Join::Lead(_)),
        "group ended"
    );
    let s = t.stats();
    assert_eq!((s.combined_writes, s.queued_writes), (0, 2));
}

/// On a wall-clock fabric a lone leader needs no delegation window: a
/// same-key reader of its core that joins before the core rings its
/// doorbell (so before the leader's READ can execute) joins its batch,
/// and one that joins after a doorbell queues for the next round.
#[test]
fn readers_join_a_marked_batch_until_the_core_rings() {
    use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
    use dm_verbs::{Fabric, GlobalAddr};
    let f = LoopbackFabric::new(LoopbackConfig::default());
    let mut ex = dm_runtime::Executor::new(
        f.open_queues(0, 0),
        f.num_ms(),
        dm_runtime::ExecConfig::default(),
    );
    ex.block_on(async {
        let t = Rdwc::new(4, true, true);
        let l = lead(t.join_read(b"k"));
        assert!(!l.needs_window(), "a marked leader yields for nothing");
        l.start_read();
        let early = follow(t.join_read(b"k"));
        // Any verb of this core: the round that posts it rings.
        let at = GlobalAddr::new(0, dm_verbs::ms::SUPERBLOCK_BYTES);
        dm_runtime::read(at, 8).await.unwrap();
        let late = follow(t.join_read(b"k"));
        l.finish_read(&Ok(Some(7)));
        assert_eq!(early.wait().now_or_never().unwrap().unwrap(), Ok(Some(7)));
        let l2 = late.wait().now_or_never().unwrap().unwrap_err();
        // A promoted leader holds no mark until it starts.
        assert!(!l2.needs_window(), "wall clock: the start takes the mark");
        l2.start_read();
        let same_round = follow(t.join_read(b"k"));
        l2.finish_read(&Ok(None));
        assert_eq!(same_round.wait().now_or_never().unwrap().unwrap(), Ok(None));
        assert_eq!(t.stats().delegated_reads, 2);
    });
}
