//! The report's `locks` line and JSON: where the node locks live (in each
//! node, or Sherman's global lock table in MS device or host memory,
//! Sherman §3.2.1) and what they did — Dolphin's Spear leaf locks (Dolphin
//! §III-C), SMART's techniques with its read delegation and write combining
//! (SMART §4.1, §4.2.1, §5.3.1), the B+trees' taken-over locks.

use super::Bench;
use dm_tree::TreeConfig;
use dm_verbs::Caps;
use serde_json::json;

/// The report's lock line and JSON for the run's index, with the locks
/// taken over from dead holders (`locks_recovered`, `recovery_ns`: 0 and
/// null unless the CSs joined a membership, issue 33).
pub(super) fn locks(b: &Bench) -> (String, serde_json::Value) {
    let (line, mut v) = lock_kinds(b);
    let (text, n, ns) = crate::report::recoveries(&b.cl.inst.lock_counters().recovery_ns());
    v["locks_recovered"] = n;
    v["recovery_ns"] = ns;
    (format!("{line}; {text}"), v)
}

/// The lock line and JSON of the run's index kind.
fn lock_kinds(b: &Bench) -> (String, serde_json::Value) {
    let (plan, tcfg, caps) = (&b.plan, b.cl.tcfg, b.cl.caps);
    if b.c.dolphin && b.a.lease_ms.is_some() {
        // Lease mode (dm_art::DolphinTree::with_member): node locks.
        let d = dm_art::dolphin::totals().since(plan.dolphin0);
        let l = b.cl.inst.lock_counters().snapshot();
        (
            format!(
                "Dolphin leaf locks in lease mode (a node lock naming its holder, not Spear's shares): {} taken, {} failed lock CASes, {} backtracks through special nodes, {} torn images READ again",
                l.acquisitions, l.cas_failures, d.backtracks, d.rejected_images
            ),
            json!({"global_lock_table": false, "dolphin_lease": {"acquisitions": l.acquisitions,
                "cas_failures": l.cas_failures, "backtracks": d.backtracks,
                "rejected_images": d.rejected_images}}),
        )
    } else if b.c.dolphin {
        let d = dm_art::dolphin::totals().since(plan.dolphin0);
        (
            format!(
                "Spear leaf locks (FAA only, Dolphin \u{a7}III-C): {} lock waits, {} same-key update CASes lost and rerun, {} backtracks through special nodes, {} torn images READ again",
                d.lock_waits, d.lost_update_cas, d.backtracks, d.rejected_images
            ),
            json!({"global_lock_table": false, "spear": {"lock_waits": d.lock_waits,
                "lost_update_cas": d.lost_update_cas, "backtracks": d.backtracks,
                "rejected_images": d.rejected_images}}),
        )
    } else if b.c.smart {
        smart_locks(b)
    } else {
        let (line, mut v) = lock_placement(&tcfg, caps);
        let n = dm_runtime::lock::lock_takeovers();
        v["takeovers"] = json!(n);
        (format!("{line}; {n} taken over (own-tag ledger)"), v)
    }
}

/// SMART's line and JSON: its techniques, read delegation and write
/// combining, and HOCL's lock table for the rungs that take locks.
fn smart_locks(b: &Bench) -> (String, serde_json::Value) {
    let (a, tcfg, caps) = (&b.a, b.cl.tcfg, b.cl.caps);
    let inst = &b.cl.inst;
    let rdwcs: Vec<_> = inst
        .local_cs()
        .filter_map(|cs| inst.rdwc(cs).cloned())
        .collect();
    let (art_techniques, write_queue) =
        (b.c.art_techniques, inst.config().queues_same_key_writers());
    let off = |t: &str| a.smart_off.iter().any(|x| x == t);
    let mut r = dm_art::RdwcStats::default();
    for t in &rdwcs {
        let s = t.stats();
        r.delegated_reads += s.delegated_reads;
        r.combined_writes += s.combined_writes;
        r.queued_writes += s.queued_writes;
        r.conflicts += s.conflicts;
    }
    let on = |t: &str| if off(t) { "off" } else { "on" };
    let t = art_techniques;
    let mut line = format!(
        "{}, {} (SMART \u{a7}4.1, \u{a7}5.3.1); read delegation {} ({} reads delegated), write combining {} ({} writes combined{}), {} hash conflicts",
        if t.lock_free_internal {
            "lock-free internal nodes (CAS on slots)"
        } else {
            "ROWEX internal nodes (node locks around each CAS)"
        },
        match (t.in_place_leaf, t.rear_lock) {
            (false, _) => "RCU leaves (new leaf + slot CAS per write)",
            (true, false) => "in-place leaves under a lock-table lock",
            (true, true) => "in-place leaves under a lock word at the rear of each leaf",
        },
        on("rd"),
        r.delegated_reads,
        on("wc"),
        r.combined_writes,
        if write_queue {
            let what = if t.rear_lock { "E-HOCL" } else { "HOCL's local lock" };
            format!("; same-key writers queue per CS ({what}): {} queued", r.queued_writes)
        } else {
            String::new()
        },
        r.conflicts
    );
    let mut v = json!({"global_lock_table": t.needs_locks(), "index": a.index,
        "techniques": {"lock_free_internal": t.lock_free_internal,
            "in_place_leaf": t.in_place_leaf, "rear_lock": t.rear_lock},
        "rdwc": {
            "read_delegation": !off("rd"), "write_combining": !off("wc"),
            "entries": a.rdwc_entries, "delegated_reads": r.delegated_reads,
            "combined_writes": r.combined_writes, "conflicts": r.conflicts,
            "write_queue": write_queue || !off("wc"),
            "queued_writes": r.queued_writes}});
    if t.needs_locks() {
        let hocl = TreeConfig {
            techniques: dm_tree::Techniques {
                locks: dm_art::baseline::HOCL,
                two_level: false,
            },
            ..tcfg
        };
        let (l, p) = lock_placement(&hocl, caps);
        line = format!("{line}; HOCL: {l}");
        v["lock_table"] = p;
    }
    (line, v)
}

/// Where the node locks live, for the report: a line and its JSON.
fn lock_placement(t: &TreeConfig, caps: Caps) -> (String, serde_json::Value) {
    let fabric = format!(
        "fabric: {} bytes of device memory per MS, masked CAS {}",
        caps.device_memory_bytes,
        if caps.masked_cas { "offered" } else { "absent" }
    );
    if !t.techniques.locks.onchip_lock {
        let line = format!("in each node, 64-bit CAS ({fabric})");
        return (line, json!({"global_lock_table": false}));
    }
    let lt = t.lock_table;
    let line = format!(
        "global lock table: {} {} slots per MS in {} memory ({fabric})",
        lt.slots,
        if lt.lanes16 {
            "16-bit masked-CAS"
        } else {
            "64-bit CAS"
        },
        if lt.device { "device" } else { "host" }
    );
    let v = json!({
        "global_lock_table": true,
        "memory": if lt.device { "device" } else { "host" },
        "slot_bits": if lt.lanes16 { 16 } else { 64 },
        "slots_per_ms": lt.slots,
        "fabric_device_memory_bytes": caps.device_memory_bytes,
        "fabric_masked_cas": caps.masked_cas,
    });
    (line, v)
}
