//! The timeline of a traced operation: the recorder's WRs and doorbells
//! merged with the runtime's events into [`Line`]s (virtual ns from the
//! operation's start), their text rendering and the one-line summary. The
//! command that produces a [`Traced`] is in the parent module; the SVG
//! drawing of the same lines in [`super::svg`].

use super::Traced;
use dm_verbs::sim::WrTrace;
use dm_verbs::VerbKind;
use std::collections::HashMap;

/// A column of the diagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Actor {
    /// A CS core (simulator core index).
    Core(usize),
    /// A CS's NIC.
    CsNic(u16),
    /// A memory server (its NIC and memory).
    Ms(u16),
}

/// What happened, for the text and the arrows.
#[derive(Clone, Debug)]
pub enum What {
    /// A doorbell: post list `db` of the recorder (round trip `rt`).
    Doorbell {
        db: usize,
        rt: usize,
    },
    /// A WR at one of its stages (posted, sent, received, executed,
    /// replied, in the CQ); the arrows come from the recorder's WRs.
    Wr,
    /// The core's CQ poll handed this WR's (index into the recorder's
    /// WRs) result to its task.
    Polled(Option<usize>),
    /// A runtime event (task switch, lock wait, lock granted).
    Runtime,
    OpStart,
    OpEnd,
}

/// One line of the timeline.
#[derive(Clone, Debug)]
pub struct Line {
    /// Virtual ns relative to the operation's start.
    pub ns: i64,
    pub actor: Actor,
    pub what: What,
    pub text: String,
}

fn kind_name(w: &WrTrace) -> &'static str {
    match (w.kind, w.masked) {
        (VerbKind::Read, _) => "READ",
        (VerbKind::Write, _) => "WRITE",
        (VerbKind::Cas, false) => "CAS",
        (VerbKind::Cas, true) => "MASKED-CAS",
        (VerbKind::Faa, _) => "FAA",
        (VerbKind::Rpc, _) => "RPC",
    }
}

/// `READ ms1:0x1a2b00 1024 B`: kind, address (`dev:` for device memory),
/// payload bytes.
pub fn wr_label(w: &WrTrace) -> String {
    let at = match w.addr {
        Some(a) if a.is_device() => format!("ms{}:dev:{:#x}", a.ms(), a.local_offset()),
        Some(a) => format!("ms{}:{:#x}", a.ms(), a.local_offset()),
        None => format!("ms{} handler {}", w.ms, w.rpc_handler.unwrap_or(0)),
    };
    let bytes = match w.kind {
        VerbKind::Read => w.bytes_in,
        VerbKind::Rpc => w.bytes_out,
        VerbKind::Write => w.bytes_out,
        _ => 8,
    };
    format!("{} {at} {bytes} B", kind_name(w))
}

/// What came back, for the MS's reply line.
fn reply_label(w: &WrTrace) -> String {
    if !w.ok {
        return "error".into();
    }
    match (w.kind, w.atomic_old, w.cas_expect) {
        (VerbKind::Cas, Some(old), Some((e, m))) => format!(
            "old {old:#x}: {}",
            if old & m == e & m {
                "swapped"
            } else {
                "failed"
            }
        ),
        (VerbKind::Faa, Some(old), _) => format!("old {old:#x}"),
        (VerbKind::Read, _, _) => format!("{} B of data", w.bytes_in),
        (VerbKind::Rpc, _, _) => format!("reply {} B", w.bytes_in),
        _ => "ack".into(),
    }
}

/// The timeline's lines as they are made: `(ns, order, line)`, sorted at
/// the end by time and, at equal times, by stage (`order`), then by making.
struct Merge<'a> {
    t: &'a Traced,
    v: Vec<(i64, u8, Line)>,
}

impl Merge<'_> {
    fn push(&mut self, ns: u64, order: u8, actor: Actor, what: What, text: String) {
        let rel = |ns: u64| ns as i64 - self.t.t0 as i64;
        self.v.push((
            rel(ns),
            order,
            Line {
                ns: rel(ns),
                actor,
                what,
                text,
            },
        ))
    }
}

/// The merged timeline of `t`, in time order.
pub fn timeline(t: &Traced) -> Vec<Line> {
    let mut m = Merge { t, v: Vec::new() };
    m.push(
        t.t0,
        0,
        Actor::Core(t.core),
        What::OpStart,
        format!("{} key #{} ({}) starts", t.op, t.key_number, hex(&t.key)),
    );
    doorbells(&mut m);
    wr_stages(&mut m);
    runtime_events(&mut m);
    m.push(
        t.t1,
        9,
        Actor::Core(t.core),
        What::OpEnd,
        format!("{} returns: {}", t.op, t.outcome),
    );
    let mut v = m.v;
    v.sort_by_key(|(ns, o, _)| (*ns, *o));
    v.into_iter().map(|(_, _, l)| l).collect()
}

/// Each doorbell, after the WRs of its post list (on the posting core).
fn doorbells(m: &mut Merge<'_>) {
    let t = m.t;
    // Round trips: doorbells of one core in one scheduling round (same ns) share one.
    let mut rt_of = Vec::with_capacity(t.sim.doorbells.len());
    let mut last: HashMap<usize, (u64, usize)> = HashMap::new();
    let mut n = 0;
    for d in &t.sim.doorbells {
        let e = last.entry(d.core).or_insert((u64::MAX, 0));
        if e.0 != d.ns {
            n += 1;
            *e = (d.ns, n);
        }
        rt_of.push(e.1);
    }
    for (di, d) in t.sim.doorbells.iter().enumerate() {
        for &i in &d.wrs {
            let w = &t.sim.wrs[i];
            m.push(
                w.posted_ns,
                1,
                Actor::Core(w.core),
                What::Wr,
                format!("post {} wr_id={:#x}", wr_label(w), w.wr_id),
            );
        }
        m.push(
            d.ns,
            2,
            Actor::Core(d.core),
            What::Doorbell {
                db: di,
                rt: rt_of[di],
            },
            format!(
                "doorbell: post list of {} WR{} to MS{} (round trip {})",
                d.wrs.len(),
                if d.wrs.len() == 1 { "" } else { "s" },
                d.ms,
                rt_of[di]
            ),
        );
    }
}

/// The stages of each WR: sent by the CS NIC, received, executed and
/// replied to by the MS, its completion in the CS's CQ.
fn wr_stages(m: &mut Merge<'_>) {
    let t = m.t;
    for w in &t.sim.wrs {
        let cs = t.cores.get(w.core).map_or(w.cs, |c| c.cs);
        let l = wr_label(w);
        m.push(
            w.nic_tx_ns,
            3,
            Actor::CsNic(cs),
            What::Wr,
            format!("sends {l}"),
        );
        m.push(
            w.ms_arrive_ns,
            4,
            Actor::Ms(w.ms),
            What::Wr,
            format!("NIC receives {} wr_id={:#x}", kind_name(w), w.wr_id),
        );
        let wait = w.exec_ns - w.ms_arrive_ns;
        m.push(
            w.exec_ns,
            5,
            Actor::Ms(w.ms),
            What::Wr,
            format!(
                "executes {l}{}",
                if wait > 0 {
                    format!(
                        " (waited {wait} ns: NIC message rate, atomic unit, QP order or MS core)"
                    )
                } else {
                    String::new()
                }
            ),
        );
        m.push(
            w.ms_done_ns,
            6,
            Actor::Ms(w.ms),
            What::Wr,
            format!(
                "replies to {} wr_id={:#x}: {}",
                kind_name(w),
                w.wr_id,
                reply_label(w)
            ),
        );
        m.push(
            w.cq_ns,
            7,
            Actor::CsNic(cs),
            What::Wr,
            format!(
                "completion of {} wr_id={:#x} in the CQ",
                kind_name(w),
                w.wr_id
            ),
        );
    }
}

/// The runtime's events on the cores: CQ polls (with the WR they
/// completed), task switches, local lock-table waits and grants.
fn runtime_events(m: &mut Merge<'_>) {
    let t = m.t;
    let by_wr_id: HashMap<(usize, u64), usize> = t
        .sim
        .wrs
        .iter()
        .enumerate()
        .map(|(i, w)| ((w.core, w.wr_id), i))
        .collect();
    for e in &t.rt {
        let Some(&core) = t.exec_core.get(&e.exec) else {
            continue;
        };
        let field = |k: &str| e.fields.get(k).cloned().unwrap_or_default();
        let (what, text) = match e.name.as_str() {
            "completion" => {
                let id: u64 = field("wr_id").parse().unwrap_or(0);
                let wr = by_wr_id.get(&(core, id)).copied();
                let kind = wr.map_or("?", |i| kind_name(&t.sim.wrs[i]));
                (
                    What::Polled(wr),
                    format!("CQ poll: {kind} wr_id={id:#x} done, task woken"),
                )
            }
            "switch" if field("ready") == "true" => {
                (What::Runtime, format!("task {} finishes", field("task")))
            }
            "switch" => (
                What::Runtime,
                format!("task {} parks (switch)", field("task")),
            ),
            "lock wait" => (
                What::Runtime,
                format!("local lock table: waits for lock {}", field("key")),
            ),
            "lock granted" => (
                What::Runtime,
                format!(
                    "local lock table: lock {} granted{}",
                    field("key"),
                    if field("handed_over") == "true" {
                        " with the remote lock handed over"
                    } else {
                        ""
                    }
                ),
            ),
            _ => continue,
        };
        m.push(e.ns, 8, Actor::Core(core), what, text);
    }
}

fn hex(b: &[u8]) -> String {
    let mut s = String::from("0x");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// The column's name.
pub fn actor_name(t: &Traced, a: Actor) -> String {
    match a {
        Actor::Core(i) => match t.cores.get(i) {
            Some(c) => format!("CS{} core{}", c.cs, c.thread),
            None => format!("core {i}"),
        },
        Actor::CsNic(cs) => format!("CS{cs} NIC"),
        Actor::Ms(m) => format!("MS{m}"),
    }
}

/// The summary: round trips, verbs by kind, bytes, latency.
pub fn summary(t: &Traced) -> String {
    let s = &t.stats;
    let mut kinds = Vec::new();
    for (n, k) in [
        (s.read, "READ"),
        (s.write, "WRITE"),
        (s.cas, "CAS"),
        (s.faa, "FAA"),
        (s.rpc, "RPC"),
    ] {
        if n > 0 {
            kinds.push(format!("{n} {k}"));
        }
    }
    format!(
        "{} round trips, {} doorbells, {} verbs ({}), {} B read, {} B written, latency {} ns (virtual)",
        s.rtts,
        s.doorbells,
        s.read + s.write + s.cas + s.faa + s.rpc,
        if kinds.is_empty() {
            "none".into()
        } else {
            kinds.join(", ")
        },
        s.bytes_read,
        s.bytes_written,
        t.t1 - t.t0
    )
}

pub(super) fn render_text(t: &Traced, lines: &[Line]) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "dm-bench trace: index {}, {} of key #{} ({}) on sim, after loading and warming up; times in virtual ns from the op's start\n",
        t.index,
        t.op,
        t.key_number,
        hex(&t.key)
    ));
    let w = lines
        .iter()
        .map(|l| actor_name(t, l.actor).len())
        .max()
        .unwrap_or(8);
    for l in lines {
        o.push_str(&format!(
            "{:>9} ns  {:<w$}  {}\n",
            l.ns,
            actor_name(t, l.actor),
            l.text
        ));
    }
    o.push_str(&format!("summary      {}\n", summary(t)));
    if t.sim.wrs.iter().any(|w| w.core != t.core) {
        o.push_str("note         other cores posted WRs meanwhile (shown above)\n");
    }
    o
}
