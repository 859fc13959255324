//! Admission: one pool of work slots (`max_concurrent_queries`) shared by every RPC that does
//! real work, so no kind of call can be used to get around the limit.
//!
//! Who takes a slot, and for how long:
//!
//! - a query (DoGet of a statement ticket or a prepared statement): from before planning until
//!   its stream ends or is dropped; a polled query (PollFlightInfo) until its result is ready;
//!   a live `table_changes(…, true)` stream is such a query and keeps its slot for as long as
//!   it is open, waiting for commits included (`max_concurrent_queries` must leave room for the
//!   streams a deployment keeps open; the test `a_polled_stream_runs_until_cancelled_and_holds_its_slot`);
//! - a write (GetFlightInfo / DoPut of an INSERT, DDL, DELETE, UPDATE, bulk ingest): while it
//!   runs;
//! - planning RPCs — GetFlightInfo, GetSchema and PollFlightInfo of a statement or prepared
//!   statement, CreatePreparedStatement, DoPut parameter binds: while the statement is planned
//!   (the slot is given back before a write planned there runs, which takes its own);
//! - metadata DoGets that read the catalogs — GetDbSchemas, GetTables, GetPrimaryKeys: while
//!   they run (GetTables with `include_schema` loads at most [`METADATA_LOAD_CONCURRENCY`]
//!   tables at once inside its one slot).
//!
//! GetCatalogs, GetTableTypes, GetSqlInfo, GetXdbcTypeInfo, session options, cancels and the
//! handshake answer from memory and take no slot, so a saturated server still answers them
//! (and can still be told to cancel).
//!
//! A call that finds every slot taken waits in line for up to `queue_timeout_secs`; if no slot
//! frees in that time it fails with RESOURCE_EXHAUSTED ("server busy: …"), naming the call and
//! the limit. The client may retry.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

use crate::error::Error;

/// Tables whose schemas one GetTables (`include_schema`) loads at once.
pub const METADATA_LOAD_CONCURRENCY: usize = 8;

/// The work slots.
#[derive(Debug, Clone)]
pub struct Admission {
    permits: Arc<Semaphore>,
    slots: usize,
    queue_timeout: Duration,
}

/// A slot held; given back when dropped.
#[derive(Debug)]
pub struct Admitted {
    _permit: OwnedSemaphorePermit,
}

impl Admission {
    /// `slots` slots (at least one); a call waits up to `queue_timeout` for one.
    pub fn new(slots: usize, queue_timeout: Duration) -> Self {
        let slots = slots.max(1);
        Self {
            permits: Arc::new(Semaphore::new(slots)),
            slots,
            queue_timeout,
        }
    }

    /// Takes a slot for `what` (a name for the error: "query", "GetFlightInfo", …), waiting
    /// in line up to the queue timeout; RESOURCE_EXHAUSTED when none frees in time.
    pub async fn admit(&self, what: &str) -> Result<Admitted, Status> {
        let permits = Arc::clone(&self.permits);
        match tokio::time::timeout(self.queue_timeout, permits.acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Admitted { _permit: permit }),
            _ => Err(Error::Busy(format!(
                "server busy: all {} work slots (max_concurrent_queries) are taken by running \
                 queries and planning calls and none freed within {}s, so this {what} was not \
                 started; retry later",
                self.slots,
                self.queue_timeout.as_secs_f64()
            ))
            .into()),
        }
    }

    /// Slots free now.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// Slots in all.
    pub fn slots(&self) -> usize {
        self.slots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_saturated_pool_answers_resource_exhausted_after_the_queue_timeout() {
        let a = Admission::new(1, Duration::from_millis(50));
        let held = a.admit("query").await.unwrap();
        assert_eq!(a.available(), 0);
        let e = a.admit("GetFlightInfo").await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert!(e.message().contains("GetFlightInfo"), "{e}");
        drop(held);
        assert!(a.admit("GetFlightInfo").await.is_ok());
    }
}
