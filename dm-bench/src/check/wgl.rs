//! Linearizability of one key's history against a register holding
//! `Option<value>` ([`check_key`]): Wing & Gong's depth-first search over
//! the minimal pending operations, with Lowe's memoisation of the
//! configurations already explored ("Testing for linearizability", 2017;
//! the algorithm of Porcupine), plus pruning that never loses a
//! linearization.
//!
//! The history is a doubly linked list of call and return entries in time
//! order (a call before a return at equal times: equal times are
//! concurrent). A call that comes before every remaining return belongs to a
//! minimal operation: everything that returned before it was called is
//! linearized already. The search linearizes a minimal operation the
//! register allows, lifts its entries out of the list and goes on from the
//! new configuration; when no minimal operation leads anywhere, it undoes
//! the last step and tries that configuration's next candidate. A
//! configuration is the set of linearized operations (a bitset) and the
//! register's value; the memo holds every configuration reached, so each is
//! explored once (one reached again has failed: it is not on the current
//! path, whose sets are smaller). The pruning:
//! - a minimal read-only operation that succeeds (a get that reads the
//!   value, a failed update or remove of an absent key: they never change
//!   the value) is linearized at once, with no alternative tried at that
//!   point: moving it to the front of any linearization of the rest keeps
//!   that one valid (its predecessors in real time are all linearized, and
//!   it changes nothing wherever it stands); so if that step's
//!   configuration was explored already, this one fails too. (A write that
//!   happens to rewrite the current value is not read-only: placed later,
//!   it may change another.)
//! - a value no get left will read is as good as any other such value (the
//!   other operations look only at whether the key is present), so all of
//!   them are one value in the memo ([`Search::canon`]);
//! - of minimal writes with the same effect (inserts of such values, of
//!   one value, successful removes...) only the one that returns first is
//!   tried ([`Search::candidates`]);
//! - a write that replaces a value some get left still reads, when no write
//!   of that value is left, is a dead end (the get can never succeed).
//!
//! The memo stores a configuration compactly: the bitset's words from the
//! first with a 0 bit (all before are full) to the last with a 1 bit, which
//! is about the number of operations concurrent with the earliest pending
//! one, not the key's whole history. Its size is bounded ([`Budget`]):
//! past the state or byte limit the search gives up ([`Outcome::GaveUp`]),
//! which is never a pass. Each step walks at most the minimal pending
//! operations, so time is bounded by the states too (about the states
//! times the clients).

use super::history::Kind;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// How far one key's search may go before it gives up.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    /// Configurations memoised (`--check-budget`).
    pub states: u64,
    /// Estimated bytes of the memo (a guard for histories whose operations
    /// overlap so much that each configuration is long).
    pub bytes: u64,
}

/// Bytes of the memo at most, whatever `--check-budget` says: 1 GiB.
pub(super) const MEMO_BYTES: u64 = 1 << 30;

/// The verdict on one key.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    Linearizable,
    NotLinearizable,
    /// The budget ran out after this many states, with the memo this large (bytes).
    GaveUp {
        states: u64,
        bytes: u64,
    },
}

/// One operation: what it did and saw, its call and return times.
#[derive(Clone, Copy, Debug)]
pub(super) struct Op<'a> {
    pub kind: &'a Kind,
    pub call: u64,
    pub ret: u64,
}

/// The register's sequential specification: whether `op` may return what it
/// did when applied to `s`, and the value after it.
fn apply(op: &Kind, s: Option<u64>) -> (bool, Option<u64>) {
    match op {
        Kind::Get(r) => (*r == s, s),
        Kind::Insert(v) => (true, Some(*v)),
        Kind::Update(v, ok) => match s {
            Some(_) if *ok => (true, Some(*v)),
            None if !*ok => (true, None),
            _ => (false, s),
        },
        Kind::Remove(ok) => (*ok == s.is_some(), None),
        Kind::Scan(..) => (true, s),
        // Never reach the search: `linearizable::check_key_maybe` replaces
        // them with each outcome they could have had.
        Kind::UpdateMaybe(v) => (true, s.map(|_| *v)),
        Kind::RemoveMaybe => (true, None),
    }
}

/// Whether `op` never changes the value, whatever it is: a get, or an
/// update or remove that found no key (they succeed only on an absent key).
fn read_only(op: &Kind) -> bool {
    matches!(
        op,
        Kind::Get(_) | Kind::Update(_, false) | Kind::Remove(false)
    )
}

/// How many of `v`'s gets (or writes) are left in `counts`.
fn left(counts: &HashMap<u64, u32>, v: u64) -> u32 {
    counts.get(&v).copied().unwrap_or(0)
}

/// The value `op` writes, if it writes one.
fn written(op: &Kind) -> Option<u64> {
    match op {
        Kind::Insert(v) | Kind::Update(v, true) => Some(*v),
        _ => None,
    }
}

/// The call and return entries in time order, linked both ways; entry `2i`
/// is operation `i`'s call, `2i + 1` its return, `HEAD` the list's head.
struct Entries {
    next: Vec<usize>,
    prev: Vec<usize>,
}

impl Entries {
    fn head(&self) -> usize {
        self.next.len() - 1
    }

    fn new(ops: &[Op]) -> Self {
        let mut order: Vec<usize> = (0..2 * ops.len()).collect();
        let time = |e: usize| {
            let o = &ops[e / 2];
            (if e.is_multiple_of(2) { o.call } else { o.ret }, e % 2, e)
        };
        order.sort_by_key(|&e| time(e));
        let head = 2 * ops.len();
        let (mut next, mut prev) = (vec![usize::MAX; head + 1], vec![usize::MAX; head + 1]);
        let mut last = head;
        for e in order {
            next[last] = e;
            prev[e] = last;
            last = e;
        }
        next[last] = usize::MAX;
        Entries { next, prev }
    }

    /// Takes operation `i`'s call and return out of the list.
    fn lift(&mut self, i: usize) {
        for e in [2 * i, 2 * i + 1] {
            let (p, n) = (self.prev[e], self.next[e]);
            self.next[p] = n;
            if n != usize::MAX {
                self.prev[n] = p;
            }
        }
    }

    /// Puts operation `i`'s entries back (the reverse of [`Self::lift`]).
    fn unlift(&mut self, i: usize) {
        for e in [2 * i + 1, 2 * i] {
            let (p, n) = (self.prev[e], self.next[e]);
            self.next[p] = e;
            if n != usize::MAX {
                self.prev[n] = e;
            }
        }
    }
}

/// A configuration as the memo keeps it: the bitset from its first word with
/// a 0 bit (that word's index first) to its last with a 1 bit, and the value.
type MemoKey = (Box<[u64]>, Option<u64>);

fn memo_key(bits: &[u64], value: Option<u64>) -> MemoKey {
    let lo = bits
        .iter()
        .position(|&w| w != u64::MAX)
        .unwrap_or(bits.len());
    let hi = bits
        .iter()
        .rposition(|&w| w != 0)
        .map_or(lo, |h| (h + 1).max(lo));
    let mut k = Vec::with_capacity(1 + hi - lo);
    k.push(lo as u64);
    k.extend_from_slice(&bits[lo..hi]);
    (k.into_boxed_slice(), value)
}

/// Estimated bytes one memo entry takes: its table slot (with the table's
/// spare capacity) and its boxed words.
fn entry_bytes(k: &MemoKey) -> u64 {
    64 + 8 * k.0.len() as u64
}

/// A step of the search: the operation linearized, the value before it, and
/// its place in its configuration's [`Search::candidates`] (`None`: forced,
/// no alternative to try in its place).
struct Step {
    op: usize,
    before: Option<u64>,
    at: Option<usize>,
}

/// The search's state (see the module docs).
struct Search<'a> {
    ops: &'a [Op<'a>],
    list: Entries,
    bits: Vec<u64>,
    /// The register's value, canonical ([`Self::canon`]).
    value: Option<u64>,
    /// Per value, the gets of it not linearized yet.
    reads: HashMap<u64, u32>,
    /// Per value read by a get, the writes of it not linearized yet.
    writes: HashMap<u64, u32>,
    /// A value no get returns: what every value no get will read becomes.
    anon: u64,
    stack: Vec<Step>,
    memo: HashSet<MemoKey>,
    bytes: u64,
}

impl<'a> Search<'a> {
    fn new(ops: &'a [Op<'a>]) -> Self {
        let mut reads: HashMap<u64, u32> = HashMap::new();
        for o in ops {
            if let Kind::Get(Some(v)) = o.kind {
                *reads.entry(*v).or_default() += 1;
            }
        }
        let mut writes: HashMap<u64, u32> = HashMap::new();
        for o in ops {
            if let Some(v) = written(o.kind).filter(|v| reads.contains_key(v)) {
                *writes.entry(v).or_default() += 1;
            }
        }
        let anon = (0..=u64::MAX)
            .rev()
            .find(|v| !reads.contains_key(v))
            .expect("fewer gets than values");
        Search {
            ops,
            list: Entries::new(ops),
            bits: vec![0; ops.len().div_ceil(64)],
            value: None,
            reads,
            writes,
            anon,
            stack: Vec::new(),
            memo: HashSet::new(),
            bytes: 0,
        }
    }

    /// A value that no get left will read is as good as any other such
    /// value (the register's other operations look only at presence): they
    /// all become `anon`, so configurations that differ only there meet in
    /// the memo, and an insert of such a value over one is a no-op.
    fn canon(&self, v: Option<u64>) -> Option<u64> {
        match v {
            Some(x) if left(&self.reads, x) == 0 => Some(self.anon),
            v => v,
        }
    }

    /// Counts `op` as linearized in `reads` and `writes`, or (`undo`) not
    /// any more.
    fn count(&mut self, op: usize, undo: bool) {
        let n = match self.ops[op].kind {
            Kind::Get(Some(v)) => self.reads.get_mut(v),
            k => written(k).and_then(|v| self.writes.get_mut(&v)),
        };
        if let Some(n) = n {
            *n = if undo { *n + 1 } else { *n - 1 };
        }
    }

    /// Whether changing the value to `after` loses a value that gets not
    /// linearized yet still read, with no write of it left to bring it back.
    fn loses_a_read(&self, after: Option<u64>) -> bool {
        match self.value {
            Some(x) if after != self.value => {
                left(&self.reads, x) > 0 && left(&self.writes, x) == 0
            }
            _ => false,
        }
    }

    /// Linearizes `op` (applied to the value, giving `after`) if its
    /// configuration is new: `Some(true)` if it was, `Some(false)` if that
    /// configuration was explored or is a dead end, `None` if the budget
    /// ran out.
    fn try_step(
        &mut self,
        op: usize,
        after: Option<u64>,
        at: Option<usize>,
        b: Budget,
    ) -> Option<bool> {
        if self.loses_a_read(after) {
            return Some(false);
        }
        self.bits[op / 64] |= 1 << (op % 64);
        self.count(op, false);
        let after = self.canon(after);
        let k = memo_key(&self.bits, after);
        if self.memo.contains(&k) {
            self.bits[op / 64] &= !(1 << (op % 64));
            self.count(op, true);
            return Some(false);
        }
        self.bytes += entry_bytes(&k);
        self.memo.insert(k);
        if self.memo.len() as u64 > b.states || self.bytes > b.bytes {
            return None;
        }
        self.stack.push(Step {
            op,
            before: self.value,
            at,
        });
        self.value = after;
        self.list.lift(op);
        Some(true)
    }

    /// Undoes steps up to and including the last unforced one: that step's
    /// place among its configuration's candidates, or `None` if no step is
    /// left.
    fn backtrack(&mut self) -> Option<usize> {
        while let Some(s) = self.stack.pop() {
            self.value = s.before;
            self.bits[s.op / 64] &= !(1 << (s.op % 64));
            self.count(s.op, true);
            self.list.unlift(s.op);
            if s.at.is_some() {
                return s.at;
            }
        }
        None
    }

    /// The minimal pending operations: their calls come before every
    /// remaining return.
    fn minimal(&self) -> impl Iterator<Item = usize> + '_ {
        let mut e = self.list.next[self.list.head()];
        std::iter::from_fn(move || {
            (e != usize::MAX && e.is_multiple_of(2)).then(|| {
                let op = e / 2;
                e = self.list.next[e];
                op
            })
        })
    }

    /// A minimal read-only operation that succeeds.
    fn forced(&self) -> Option<usize> {
        self.minimal().find(|&op| {
            let k = self.ops[op].kind;
            read_only(k) && apply(k, self.value).0
        })
    }

    /// The writes to try linearizing next, in call order: the minimal ones,
    /// and of those with the same effect (inserts or successful updates of
    /// values no get is left to read, or of one value; successful removes)
    /// only the one that returns first. Keeping the other pending loses
    /// nothing: in any linearization of the rest that places the one that
    /// returns first, the other fits in its place. (Read-only operations
    /// are left out: [`Self::forced`] takes one that succeeds; the others
    /// fail.) The same configuration gives the same list.
    fn candidates(&self) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        let mut class: HashMap<(u8, Option<u64>), usize> = HashMap::new();
        for op in self.minimal() {
            let c = match *self.ops[op].kind {
                Kind::Insert(v) => (0, self.canon(Some(v))),
                Kind::Update(v, true) => (1, self.canon(Some(v))),
                Kind::Remove(true) => (2, None),
                _ => continue,
            };
            match class.get(&c) {
                Some(&i) if self.ops[op].ret < self.ops[out[i]].ret => out[i] = op,
                Some(_) => {}
                None => {
                    class.insert(c, out.len());
                    out.push(op);
                }
            }
        }
        out
    }
}

/// Checks one key's operations (see the module docs); `progress` names the
/// key in the lines printed to stderr while a long search runs.
pub(super) fn check_key(ops: &[Op], b: Budget, progress: &str) -> Outcome {
    let mut s = Search::new(ops);
    let head = s.list.head();
    let (start, mut told) = (Instant::now(), Instant::now());
    // Back in a configuration after a failed step: its candidates from here.
    let mut resume: Option<usize> = None;
    loop {
        if s.list.next[head] == usize::MAX {
            // Every entry lifted: all operations linearized.
            return Outcome::Linearizable;
        }
        let mut next = match resume.take() {
            Some(i) => Some(i),
            None => match s.forced() {
                Some(op) => match s.try_step(op, s.value, None, b) {
                    Some(true) => continue,
                    // The forced step's configuration fails, so this one does.
                    Some(false) => None,
                    None => return gave_up(&s),
                },
                None => Some(0),
            },
        };
        if let Some(from) = next.take() {
            for (i, &op) in s.candidates().iter().enumerate().skip(from) {
                let (ok, after) = apply(ops[op].kind, s.value);
                if !ok {
                    continue;
                }
                match s.try_step(op, after, Some(i), b) {
                    Some(true) => {
                        next = Some(i);
                        break;
                    }
                    Some(false) => {}
                    None => return gave_up(&s),
                }
            }
        }
        if next.is_some() {
            if s.memo.len().is_multiple_of(1 << 16) && told.elapsed().as_secs() >= 5 {
                told = Instant::now();
                eprintln!(
                    "dm-bench check: {progress}: {} states explored in {:.0} s",
                    s.memo.len(),
                    start.elapsed().as_secs_f64()
                );
            }
            continue;
        }
        // No step from this configuration leads anywhere.
        match s.backtrack() {
            Some(i) => resume = Some(i + 1),
            None => return Outcome::NotLinearizable,
        }
    }
}

fn gave_up(s: &Search) -> Outcome {
    Outcome::GaveUp {
        states: s.memo.len() as u64,
        bytes: s.bytes,
    }
}

#[cfg(test)]
#[path = "wgl_tests.rs"]
mod tests;
