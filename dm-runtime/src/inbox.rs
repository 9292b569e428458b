//! Cross-core wakes: each executor's [`Inbox`] (a mutex-guarded queue of
//! task keys, drained once per scheduling round), the process-wide registry
//! of inboxes by executor id, and the thread-local list of executors woken
//! from this thread, which the sim driver turns into simulator
//! notifications. Off the same-core fast path.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Cross-core wake queue of one executor.
#[derive(Default)]
pub(crate) struct Inbox {
    pub(crate) flag: AtomicBool,
    pub(crate) keys: Mutex<Vec<u32>>,
}

/// Executors by id, for cross-core wakes. Ids are never reused.
fn registry() -> &'static Mutex<Vec<Option<Arc<Inbox>>>> {
    static R: OnceLock<Mutex<Vec<Option<Arc<Inbox>>>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Vec::new()))
}

pub(crate) fn register_executor() -> (u32, Arc<Inbox>) {
    let inbox = Arc::new(Inbox::default());
    let mut r = registry().lock().unwrap();
    r.push(Some(inbox.clone()));
    ((r.len() - 1) as u32, inbox)
}

pub(crate) fn unregister_executor(id: u32) {
    if let Some(s) = registry().lock().unwrap().get_mut(id as usize) {
        *s = None;
    }
}

thread_local! {
    /// Executor ids woken from this thread through their inbox (the sim driver
    /// drains it to schedule those simulated cores).
    pub(crate) static REMOTE_WOKEN: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Queues task `key` in the inbox of executor `exec` (if it still exists).
pub(crate) fn remote_wake(exec: u32, key: u32) {
    let inbox = registry()
        .lock()
        .unwrap()
        .get(exec as usize)
        .and_then(|s| s.clone());
    if let Some(inbox) = inbox {
        inbox.keys.lock().unwrap().push(key);
        inbox.flag.store(true, Ordering::Release);
        REMOTE_WOKEN.with(|w| w.borrow_mut().push(exec));
    }
}
