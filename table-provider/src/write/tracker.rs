//! [`WriteTracker`]: what one write statement has started, so that a failed or abandoned
//! statement leaves no file behind.
//!
//! A statement's writer tasks run concurrently. When one fails, or the client goes away, the
//! others may be in the middle of finishing a file: an object store's upload (for the local
//! filesystem, a rename run on the blocking pool) completes even if the task awaiting it is
//! dropped. Deleting the started files at that moment would race with those uploads, and a file
//! could appear after the clean-up. So each writer task holds the tracker's "running" lock
//! while it writes and checks the stop flag between batches, and [`WriteTracker::abandon`]
//! stops the writers, waits until none is running, and only then deletes what they started.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Notify, OwnedRwLockReadGuard, RwLock};

use crate::io::TableIo;

/// The files one write started and the writer tasks still running.
#[derive(Debug, Default)]
pub struct WriteTracker {
    started: Mutex<Vec<String>>,
    stopped: AtomicBool,
    /// Wakes the writer tasks waiting for input when the write is stopped.
    stop_notify: Notify,
    /// Held shared by every running writer task, exclusively by [`Self::abandon`].
    running: Arc<RwLock<()>>,
}

/// Held by a writer task while it may still create files.
#[derive(Debug)]
pub struct RunningWriter {
    _guard: OwnedRwLockReadGuard<()>,
}

impl WriteTracker {
    /// Records that a file is about to be written at `location`.
    pub fn record_started(&self, location: String) {
        self.started
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(location);
    }

    /// Every file this write has started (finished or not).
    pub fn started_files(&self) -> Vec<String> {
        self.started
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the write has been stopped: writer tasks must start no more files.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Stops the writer tasks at their next batch, or while they wait for one (without
    /// waiting for them).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.stop_notify.notify_waiters();
    }

    /// Resolves once the write is stopped. A writer task waits for its next input batch and
    /// for this together: its input may never come (a repartition whose producers are gone),
    /// and [`Self::abandon`] cannot delete the started files while the task runs.
    pub async fn stopped(&self) {
        loop {
            // Registered before the flag is read: a stop in between still wakes it.
            let notified = self.stop_notify.notified();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }

    /// Registers a writer task; it counts as running until the returned value is dropped. A
    /// task registered after [`Self::abandon`] began waits for it and then finds the write
    /// stopped.
    pub async fn enter(&self) -> RunningWriter {
        RunningWriter {
            _guard: Arc::clone(&self.running).read_owned().await,
        }
    }

    /// Stops the write, waits until no writer task is running (so no upload can still
    /// complete), and deletes every file the write started. Files already gone are fine.
    pub async fn abandon(&self, io: &TableIo) {
        self.stop();
        let _quiet = self.running.write().await;
        for location in self.started_files() {
            // Best effort: the file may never have been created, and a leftover file is not
            // referenced by any snapshot (orphan-file removal finds it).
            let _ = io.delete(&location).await;
        }
    }

    /// A guard that abandons the write in the background if dropped while armed (the
    /// statement's future was dropped, for instance because the client went away).
    pub fn abandon_on_drop(self: &Arc<Self>, io: &TableIo) -> AbandonOnDrop {
        AbandonOnDrop {
            tracker: Some((Arc::clone(self), io.clone())),
        }
    }
}

/// Abandons a write when dropped, unless disarmed first; see [`WriteTracker::abandon_on_drop`].
#[derive(Debug)]
pub struct AbandonOnDrop {
    tracker: Option<(Arc<WriteTracker>, TableIo)>,
}

impl AbandonOnDrop {
    /// Keeps the write's files: from here on the statement decides (a commit has begun, whose
    /// outcome alone says whether they are live).
    pub fn disarm(&mut self) {
        self.tracker = None;
    }
}

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        let Some((tracker, io)) = self.tracker.take() else {
            return;
        };
        tracker.stop();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { tracker.abandon(&io).await });
        }
    }
}
