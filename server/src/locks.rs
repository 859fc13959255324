//! Locking the server's small shared tables (sessions, prepared handles, running queries).
//!
//! A panic while one request held a lock must not turn every later request into a panic too:
//! the tables hold plain data that stays consistent between statements, so a poisoned lock is
//! taken over rather than propagated.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, recovering it if an earlier holder panicked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
