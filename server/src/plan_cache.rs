//! Statements planned in GetFlightInfo, kept briefly for the DoGet that follows.
//!
//! A Flight SQL query is two calls: GetFlightInfo plans the statement (to answer its schema and
//! fail early), DoGet runs the ticket. Tickets stay self-contained — any server can run one by
//! planning it again — but the server that just planned a statement keeps the plan under the
//! ticket's random query id for a short while, so the usual DoGet skips parsing, catalog
//! lookups and logical planning, and reads the table version the announced schema came from.
//! An entry is used once (a second DoGet of the same ticket plans again), must match the
//! ticket's SQL and session exactly, and expires after [`PLAN_TTL`]; at most
//! [`PLAN_CAPACITY`] are kept, weighing [`PLAN_CACHE_BYTES`] together at most (each plan
//! weighed by an estimate of its memory: its ticket, its plan nodes and expressions — a
//! `VALUES` list of a million literals weighs what it holds — and its schema).
//!
//! Only GetFlightInfo keeps plans (of a statement, and of a prepared statement without bound
//! parameters, which ADBC drivers use for every query): GetSchema describes a statement without
//! keeping anything, and PollFlightInfo runs its plan itself.
//!
//! CreatePreparedStatement keeps its plan too, for the GetFlightInfo of the same handle (ADBC
//! prepares and executes every query that way), under a query id made from the handle's random
//! nonce (`prepared_plan_ticket`). That plan is used once, only within
//! [`PREPARED_PLAN_MAX_AGE`], only without bound parameters, and only when every table it scans
//! is still at the version planned (`plan_freshness`): a commit in between is seen.
//!
//! Tickets are signed and bound to their user (`tickets`), so only the client a ticket was
//! issued to can present its query id here. Even so, a lookup whose ticket differs from the
//! kept one in anything (SQL, session, parameters) leaves the entry alone: a ticket that merely
//! reuses a query id can neither take nor evict another statement's plan.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::engine::Planned;
use crate::locks::lock;
use crate::proto::petrel::{PreparedStatementHandle, StatementTicket};

/// How long a plan waits for its DoGet.
pub(crate) const PLAN_TTL: Duration = Duration::from_secs(30);
/// How long a CreatePreparedStatement's plan waits for the handle's GetFlightInfo.
pub(crate) const PREPARED_PLAN_MAX_AGE: Duration = Duration::from_secs(2);
/// Plans kept at most (the oldest go first).
pub(crate) const PLAN_CAPACITY: usize = 256;
/// Estimated bytes of all kept plans at most (the oldest go first).
pub(crate) const PLAN_CACHE_BYTES: usize = 64 << 20;

/// The key under which a CreatePreparedStatement's plan waits for the handle's GetFlightInfo:
/// the handle's SQL and session, and a query id made from its random nonce (statement tickets'
/// query ids are 16 random bytes, so they never collide with it). `None` for a handle with
/// bound parameters (those are bound and planned per row).
pub(crate) fn prepared_plan_ticket(handle: &PreparedStatementHandle) -> Option<StatementTicket> {
    if !handle.parameters.is_empty() || handle.nonce.is_empty() {
        return None;
    }
    let mut query_id = b"prepared:".to_vec();
    query_id.extend_from_slice(&handle.nonce);
    Some(StatementTicket {
        version: handle.version,
        sql: handle.sql.clone(),
        session: handle.session.clone(),
        parameters: Default::default(),
        query_id: query_id.into(),
    })
}

/// An estimate of the memory a planned statement holds.
fn weight(ticket: &StatementTicket, planned: &Planned) -> usize {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    let (mut nodes, mut exprs) = (0usize, 0usize);
    // (The closure never fails; an error would only leave the counts lower.)
    let _ = planned.frame.logical_plan().apply(|node| {
        nodes += 1;
        exprs += node.expressions().len();
        Ok(TreeNodeRecursion::Continue)
    });
    prost::Message::encoded_len(ticket)
        + nodes * 1024
        + exprs * 256
        + planned.schema.fields().len() * 256
}

struct Entry {
    ticket: StatementTicket,
    planned: Planned,
    at: Instant,
    bytes: usize,
}

#[derive(Default)]
struct Entries {
    list: VecDeque<Entry>,
    bytes: usize,
}

impl Entries {
    fn pop_front(&mut self) {
        if let Some(e) = self.list.pop_front() {
            self.bytes -= e.bytes;
        }
    }
}

/// The recently planned statements, by ticket.
#[derive(Default)]
pub(crate) struct PlanCache {
    entries: Mutex<Entries>,
}

impl std::fmt::Debug for PlanCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanCache")
            .field("entries", &lock(&self.entries).list.len())
            .finish()
    }
}

impl PlanCache {
    /// Keeps `planned` for the DoGet of `ticket` (tickets without parameters only).
    pub(crate) fn insert(&self, ticket: &StatementTicket, planned: Planned) {
        if ticket.query_id.is_empty() || !ticket.parameters.is_empty() {
            return;
        }
        let now = Instant::now();
        let bytes = weight(ticket, &planned);
        if bytes > PLAN_CACHE_BYTES {
            return;
        }
        let mut entries = lock(&self.entries);
        while entries
            .list
            .front()
            .is_some_and(|e| now.duration_since(e.at) >= PLAN_TTL)
        {
            entries.pop_front();
        }
        while entries.list.len() >= PLAN_CAPACITY
            || (!entries.list.is_empty() && entries.bytes + bytes > PLAN_CACHE_BYTES)
        {
            entries.pop_front();
        }
        entries.bytes += bytes;
        entries.list.push_back(Entry {
            ticket: ticket.clone(),
            planned,
            at: now,
            bytes,
        });
    }

    /// The plan kept for exactly `ticket`, removed; `None` when there is none (or it expired).
    /// An entry with the same query id but another ticket stays.
    pub(crate) fn take(&self, ticket: &StatementTicket) -> Option<Planned> {
        self.take_younger_than(ticket, PLAN_TTL)
    }

    /// [`Self::take`], for a plan kept less than `max_age` ago (`None` for an older one, which
    /// is removed all the same).
    pub(crate) fn take_younger_than(
        &self,
        ticket: &StatementTicket,
        max_age: Duration,
    ) -> Option<Planned> {
        if ticket.query_id.is_empty() {
            return None;
        }
        let mut entries = lock(&self.entries);
        let at = entries.list.iter().position(|e| e.ticket == *ticket)?;
        let entry = entries.list.remove(at)?;
        entries.bytes -= entry.bytes;
        (entry.at.elapsed() < max_age.min(PLAN_TTL)).then_some(entry.planned)
    }

    /// Plans kept now (expired ones included until the next insert drops them).
    pub(crate) fn len(&self) -> usize {
        lock(&self.entries).list.len()
    }

    /// Estimated bytes of the plans kept now.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        lock(&self.entries).bytes
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use datafusion::prelude::SessionContext;

    use super::*;

    async fn planned(sql: &str) -> Planned {
        let frame = SessionContext::new().sql(sql).await.unwrap();
        let schema = Arc::new(frame.schema().as_arrow().clone());
        Planned::new(frame, schema)
    }

    fn ticket(id: &'static [u8], sql: &str) -> StatementTicket {
        StatementTicket {
            sql: sql.to_string(),
            query_id: Bytes::from_static(id),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_plan_serves_its_own_ticket_once() {
        let cache = PlanCache::default();
        let t = ticket(b"q1", "SELECT 1");
        cache.insert(&t, planned("SELECT 1").await);
        assert_eq!(cache.len(), 1);
        assert!(cache.take(&t).is_some());
        assert!(cache.take(&t).is_none(), "used once");
    }

    #[tokio::test]
    async fn a_ticket_with_other_sql_or_parameters_is_planned_again() {
        let cache = PlanCache::default();
        cache.insert(&ticket(b"q2", "SELECT 1"), planned("SELECT 1").await);
        // Same query id, different SQL (a forged or corrupted ticket): not served, and the
        // genuine ticket's plan is not evicted either.
        assert!(cache.take(&ticket(b"q2", "SELECT 2")).is_none());
        assert_eq!(cache.len(), 1);
        assert!(cache.take(&ticket(b"q2", "SELECT 1")).is_some());
        assert_eq!(cache.len(), 0);
        let mut with_params = ticket(b"q3", "SELECT $1");
        with_params.parameters = Bytes::from_static(b"rows");
        cache.insert(&with_params, planned("SELECT 1").await);
        assert_eq!(cache.len(), 0, "tickets with parameters are not kept");
    }

    #[tokio::test]
    async fn capacity_is_bounded() {
        let cache = PlanCache::default();
        let plan = planned("SELECT 1").await;
        for i in 0..PLAN_CAPACITY + 10 {
            let mut t = ticket(b"", "SELECT 1");
            t.query_id = Bytes::from(i.to_string());
            cache.insert(
                &t,
                Planned::new(plan.frame.clone(), Arc::clone(&plan.schema)),
            );
        }
        assert_eq!(cache.len(), PLAN_CAPACITY);
    }

    #[tokio::test]
    async fn kept_plans_are_bounded_by_their_weight() {
        let cache = PlanCache::default();
        // A VALUES list of 40,000 literals weighs about 10 MB by the estimate: six fit.
        let values = (0..40_000)
            .map(|i| format!("({i})"))
            .collect::<Vec<_>>()
            .join(",");
        let sql = format!("SELECT * FROM (VALUES {values}) AS t(x)");
        let plan = planned(&sql).await;
        let one = weight(&ticket(b"w", &sql), &plan);
        assert!(one > 10_000_000, "{one}");
        for i in 0..20 {
            let mut t = ticket(b"", &sql);
            t.query_id = Bytes::from(i.to_string());
            cache.insert(
                &t,
                Planned::new(plan.frame.clone(), Arc::clone(&plan.schema)),
            );
        }
        assert_eq!(cache.len(), PLAN_CACHE_BYTES / one);
        assert!(cache.bytes() <= PLAN_CACHE_BYTES);
    }
}
