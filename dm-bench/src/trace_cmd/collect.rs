//! A minimal `tracing` subscriber that keeps dm-runtime's trace-level
//! events (`completion`, `switch`, `lock wait`, `lock granted`; see
//! dm-runtime's crate docs) with the executor id and virtual ns of the core
//! that emitted them ([`dm_runtime::current_core_clock`]). Installed only
//! around the traced operation (`tracing::subscriber::with_default`), so the
//! rest of a run pays one disabled-callsite check per event.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One runtime event.
#[derive(Clone, Debug)]
pub struct RtEvent {
    /// Executor id of the core.
    pub exec: u32,
    /// The core's clock, virtual ns.
    pub ns: u64,
    /// The event's message (`switch`, `completion`, ...).
    pub name: String,
    /// Its other fields, as text.
    pub fields: HashMap<String, String>,
}

/// The events collected so far (shared with the subscriber).
#[derive(Clone, Default)]
pub struct Events(Arc<Mutex<Vec<RtEvent>>>);

impl Events {
    pub fn take(&self) -> Vec<RtEvent> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// The subscriber.
pub struct Collector {
    events: Events,
}

impl Collector {
    pub fn new() -> (Events, Self) {
        let e = Events::default();
        (e.clone(), Collector { events: e })
    }
}

struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, f: &Field, v: &dyn Debug) {
        self.0.insert(f.name().to_string(), format!("{v:?}"));
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.0.insert(f.name().to_string(), v.to_string());
    }
}

impl Subscriber for Collector {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.target().starts_with("dm_runtime")
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, e: &Event<'_>) {
        let Some((exec, ns)) = dm_runtime::current_core_clock() else {
            return;
        };
        let mut f = Fields(HashMap::new());
        e.record(&mut f);
        let name = f.0.remove("message").unwrap_or_default();
        self.events.0.lock().unwrap().push(RtEvent {
            exec,
            ns,
            name,
            fields: f.0,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
