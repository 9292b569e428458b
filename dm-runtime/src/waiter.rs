//! Whom a completion wakes: the [`Waiter`] an in-flight slot holds (a task
//! of this core by key, or any other waker) and the key that marks an
//! abandoned slot.

use std::task::Waker;

/// Whom a completion wakes. 16 bytes: `Task`'s key sits beside the
/// niche of the waker's vtable pointer, which a third variant would not
/// (24 bytes, and an in-flight slot of 72 instead of one 64-byte line).
pub(crate) enum Waiter {
    /// A task of this core, by key: the common case, woken without a waker
    /// clone, drop or vtable call. Key [`ABANDONED_KEY`] is
    /// [`Waiter::ABANDONED`].
    Task(u32),
    /// Any other waker (a combinator's, or another executor's).
    Waker(Waker),
}

/// The task key no task has (slab keys stay below it): the future was
/// dropped, and the completion just frees the slot.
pub(crate) const ABANDONED_KEY: u32 = u32::MAX;

impl Waiter {
    /// The future was dropped; the completion just frees the slot.
    pub(crate) const ABANDONED: Waiter = Waiter::Task(ABANDONED_KEY);

    pub(crate) fn is_abandoned(&self) -> bool {
        matches!(self, Waiter::Task(ABANDONED_KEY))
    }
}
