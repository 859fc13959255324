//! The cancellation registry: which queries run now and what became of the recent ones, so
//! CancelFlightInfo / CancelQuery answer as the Flight spec asks.
//!
//! A query is named by the random query id sealed in its statement ticket (`tickets`), or, for a
//! DoGet that presents a prepared-statement handle as its ticket, by an id derived from the
//! handle ([`prepared_query_id`]). What a cancel answers:
//!
//! | the query                                  | answer                          |
//! |--------------------------------------------|---------------------------------|
//! | running (one or more DoGets, a poll)        | `CANCELLED`; the streams end with gRPC CANCELLED, DataFusion's tasks are dropped and their memory freed |
//! | issued by GetFlightInfo, not yet fetched    | `CANCELLED`; its DoGet is refused with CANCELLED |
//! | cancelled before                            | `CANCELLED` again (the spec allows repeating it) |
//! | finished (complete, failed, dropped)        | `NOT_CANCELLABLE`               |
//! | unknown to this server (or forgotten)       | gRPC NOT_FOUND (the spec: "send a NOT_FOUND error if the requested query is not known") |
//!
//! A cancel that arrives while a DoGet is still planning finds the query running: the DoGet
//! registers itself ([`Cancellations::start`]) before it plans.
//!
//! Memory: running queries are bounded by admission; the record of recent ids is a hash map
//! (constant-time lookups, never a scan) plus an insertion-ordered queue that expires entries
//! after [`RECENT_TTL`] and caps them at [`RECENT_CAPACITY`], oldest first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::locks::lock;

/// How long the fate of a query id is remembered (a DoGet that arrives after its cancel is
/// refused for this long; after it, a cancel of the id is NOT_FOUND).
pub const RECENT_TTL: Duration = Duration::from_secs(600);
/// Query ids remembered at most (about 100 bytes each).
pub const RECENT_CAPACITY: usize = 100_000;

/// The answer to a cancel of one query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// It was running or waiting for its DoGet, and is cancelled now (or was before).
    Cancelled,
    /// It finished; nothing to cancel.
    NotCancellable,
    /// This server does not know it.
    NotFound,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Its ticket was handed out; no DoGet yet.
    Issued,
    Cancelled,
    Finished,
}

#[derive(Default)]
struct Inner {
    /// Running executions by query id (several DoGets of one ticket may run at once).
    running: HashMap<Bytes, Vec<(u64, CancellationToken)>>,
    next_execution: u64,
    /// What became of recent query ids, with when it was recorded.
    recent: HashMap<Bytes, (Fate, Instant)>,
    /// `recent`'s records in the order they were made (a superseded record is skipped when it
    /// reaches the front).
    order: VecDeque<(Bytes, Instant)>,
}

impl Inner {
    fn record(&mut self, id: &Bytes, fate: Fate) {
        let now = Instant::now();
        self.recent.insert(id.clone(), (fate, now));
        self.order.push_back((id.clone(), now));
        self.expire(now);
    }

    fn expire(&mut self, now: Instant) {
        while let Some((id, at)) = self.order.front() {
            let expired = now.duration_since(*at) >= RECENT_TTL;
            if !expired && self.order.len() <= RECENT_CAPACITY {
                break;
            }
            if self.recent.get(id).is_some_and(|(_, when)| when == at) {
                self.recent.remove(id);
            }
            self.order.pop_front();
        }
    }

    fn fate(&self, id: &Bytes) -> Option<Fate> {
        self.recent
            .get(id)
            .filter(|(_, at)| at.elapsed() < RECENT_TTL)
            .map(|(f, _)| *f)
    }
}

/// Running queries and the fate of recent ones.
#[derive(Default)]
pub struct Cancellations {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Cancellations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = lock(&self.inner);
        f.debug_struct("Cancellations")
            .field("running", &inner.running.len())
            .field("recent", &inner.recent.len())
            .finish()
    }
}

/// A running execution's entry: its token is cancelled by a cancel of its query id; dropping
/// it (the stream ended or was dropped) records the query as finished.
#[derive(Debug)]
pub struct Registration {
    registry: Arc<Cancellations>,
    id: Bytes,
    execution: u64,
    token: CancellationToken,
    /// Whether a cancel before the start is remembered against this id (statement tickets),
    /// or only running executions are cancelled (prepared-statement handles, which run again).
    remembered: bool,
}

impl Registration {
    /// The token a cancel of this query cancels.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// The query id.
    pub fn id(&self) -> &Bytes {
        &self.id
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.id.is_empty() {
            return;
        }
        let mut inner = lock(&self.registry.inner);
        if let Some(list) = inner.running.get_mut(&self.id) {
            list.retain(|(e, _)| *e != self.execution);
            if list.is_empty() {
                inner.running.remove(&self.id);
            }
        }
        let cancelled = self.token.is_cancelled() || inner.fate(&self.id) == Some(Fate::Cancelled);
        if self.remembered && !cancelled && !inner.running.contains_key(&self.id) {
            inner.record(&self.id, Fate::Finished);
        }
    }
}

impl Cancellations {
    /// An empty registry.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Records that a ticket with query id `id` was handed out (GetFlightInfo), so a cancel
    /// before its DoGet is answered (and refuses that DoGet).
    pub fn issued(&self, id: &Bytes) {
        if id.is_empty() {
            return;
        }
        let mut inner = lock(&self.inner);
        if inner.fate(id).is_none() && !inner.running.contains_key(id) {
            inner.record(id, Fate::Issued);
        }
    }

    /// Registers an execution of the statement ticket with query id `id`; `None` when the
    /// query was cancelled already (its DoGet is refused with CANCELLED).
    pub fn start(self: &Arc<Self>, id: &Bytes) -> Option<Registration> {
        self.register(id, true)
    }

    /// Registers an execution of a prepared-statement handle (id from
    /// [`prepared_query_id`]): a cancel stops the executions running then, and later
    /// executions of the handle run normally.
    pub fn start_prepared(self: &Arc<Self>, id: &Bytes) -> Registration {
        // (Never `None`: `remembered` false skips the cancelled check.)
        match self.register(id, false) {
            Some(r) => r,
            None => Registration {
                registry: Arc::clone(self),
                id: Bytes::new(),
                execution: 0,
                token: CancellationToken::new(),
                remembered: false,
            },
        }
    }

    fn register(self: &Arc<Self>, id: &Bytes, remembered: bool) -> Option<Registration> {
        let token = CancellationToken::new();
        let mut inner = lock(&self.inner);
        if remembered && !id.is_empty() && inner.fate(id) == Some(Fate::Cancelled) {
            return None;
        }
        inner.next_execution += 1;
        let execution = inner.next_execution;
        if !id.is_empty() {
            inner
                .running
                .entry(id.clone())
                .or_default()
                .push((execution, token.clone()));
        }
        Some(Registration {
            registry: Arc::clone(self),
            id: id.clone(),
            execution,
            token,
            remembered,
        })
    }

    /// Cancels the statement ticket's query `id` (see the module docs for the answers).
    pub fn cancel(&self, id: &Bytes) -> CancelOutcome {
        if id.is_empty() {
            return CancelOutcome::NotFound;
        }
        let mut inner = lock(&self.inner);
        if let Some(list) = inner.running.remove(id) {
            for (_, token) in list {
                token.cancel();
            }
            inner.record(id, Fate::Cancelled);
            return CancelOutcome::Cancelled;
        }
        match inner.fate(id) {
            Some(Fate::Issued) | Some(Fate::Cancelled) => {
                inner.record(id, Fate::Cancelled);
                CancelOutcome::Cancelled
            }
            Some(Fate::Finished) => CancelOutcome::NotCancellable,
            None => CancelOutcome::NotFound,
        }
    }

    /// Cancels the running executions of a prepared-statement handle (id from
    /// [`prepared_query_id`]); nothing running is NOT_CANCELLABLE (the handle is valid, so it
    /// is known; it has simply nothing in progress).
    pub fn cancel_prepared(&self, id: &Bytes) -> CancelOutcome {
        let mut inner = lock(&self.inner);
        match inner.running.remove(id) {
            Some(list) => {
                for (_, token) in list {
                    token.cancel();
                }
                CancelOutcome::Cancelled
            }
            None => CancelOutcome::NotCancellable,
        }
    }

    /// Whether query `id` was cancelled (a DoGet of it is refused).
    pub fn was_cancelled(&self, id: &Bytes) -> bool {
        !id.is_empty() && lock(&self.inner).fate(id) == Some(Fate::Cancelled)
    }

    /// Query ids remembered now (running ones not counted).
    pub fn remembered(&self) -> usize {
        lock(&self.inner).recent.len()
    }
}

/// The query id of a DoGet whose ticket is a prepared-statement handle: derived from the
/// (sealed, user-bound) handle, so a CancelFlightInfo naming the same handle finds it.
pub fn prepared_query_id(handle: &[u8]) -> Bytes {
    let mut hash = Sha256::new();
    hash.update(b"petrel prepared-statement query id\0");
    hash.update(handle);
    Bytes::copy_from_slice(&hash.finalize()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn answers_follow_the_spec() {
        let r = Cancellations::new();
        assert_eq!(r.cancel(&id("unknown")), CancelOutcome::NotFound);

        // Running: cancelled, its token fires, and a later DoGet is refused.
        let run = r.start(&id("a")).unwrap();
        assert_eq!(r.cancel(&id("a")), CancelOutcome::Cancelled);
        assert!(run.token().is_cancelled());
        drop(run);
        assert!(r.start(&id("a")).is_none());
        assert_eq!(r.cancel(&id("a")), CancelOutcome::Cancelled, "again");

        // Finished: not cancellable, and it may run again.
        drop(r.start(&id("b")).unwrap());
        assert_eq!(r.cancel(&id("b")), CancelOutcome::NotCancellable);
        assert!(r.start(&id("b")).is_some());

        // Issued, not fetched: cancelled, the DoGet is refused.
        r.issued(&id("c"));
        assert_eq!(r.cancel(&id("c")), CancelOutcome::Cancelled);
        assert!(r.start(&id("c")).is_none());
    }

    #[test]
    fn prepared_executions_are_cancelled_while_running_only() {
        let r = Cancellations::new();
        let p = prepared_query_id(b"handle");
        assert_eq!(r.cancel_prepared(&p), CancelOutcome::NotCancellable);
        let one = r.start_prepared(&p);
        let two = r.start_prepared(&p);
        assert_eq!(r.cancel_prepared(&p), CancelOutcome::Cancelled);
        assert!(one.token().is_cancelled() && two.token().is_cancelled());
        drop((one, two));
        let three = r.start_prepared(&p);
        assert!(!three.token().is_cancelled(), "the handle runs again");
        assert_ne!(p, prepared_query_id(b"other handle"));
    }

    #[test]
    fn the_record_is_bounded() {
        let r = Cancellations::new();
        for i in 0..RECENT_CAPACITY + 50 {
            r.issued(&Bytes::from(i.to_string()));
        }
        assert_eq!(r.remembered(), RECENT_CAPACITY);
        // The oldest were forgotten: NOT_FOUND, the newest are known.
        assert_eq!(r.cancel(&Bytes::from("0")), CancelOutcome::NotFound);
        let last = Bytes::from((RECENT_CAPACITY + 49).to_string());
        assert_eq!(r.cancel(&last), CancelOutcome::Cancelled);
    }
}
