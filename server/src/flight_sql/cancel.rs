//! CancelFlightInfo / CancelQuery: which queries a FlightInfo names, and the answer the Flight
//! spec asks for (the registry's rules are in `cancellation`).
//!
//! A FlightInfo names its queries by its endpoints' tickets:
//!
//! - a statement ticket (`TicketStatementQuery`, from GetFlightInfo of a statement or a prepared
//!   statement, or a complete poll): its query id;
//! - a `CommandPreparedStatementQuery` (clients that DoGet the handle itself): the running
//!   executions of that handle;
//! - a write-result ticket (the write already ran) or a metadata command: nothing cancellable.
//!
//! A FlightInfo without endpoints (a poll still running) names its query by its descriptor,
//! the poll's retry descriptor. Only tickets, handles and descriptors sealed for the caller
//! are accepted, so nobody cancels another user's query.
//!
//! The answer: `CANCELLED` if any named query was running or waiting for its DoGet (or was
//! cancelled before), else `NOT_CANCELLABLE` if any named query is known and finished, else
//! the gRPC error NOT_FOUND (the spec: "send a NOT_FOUND error if the requested query is not
//! known").

use arrow_flight::sql::{Any, CommandPreparedStatementQuery, TicketStatementQuery};
use arrow_flight::{CancelStatus, FlightInfo};
use prost::Message;
use tonic::Status;

use crate::cancellation::{CancelOutcome, prepared_query_id};
use crate::executor::QueryExecutor;
use crate::flight_sql::poll::open_retry_descriptor;
use crate::tickets::Tickets;

/// Cancels every query `info` names; the status for CancelFlightInfo / CancelQuery.
pub(crate) fn cancel_info(
    engine: &dyn QueryExecutor,
    tickets: Tickets<'_>,
    info: &FlightInfo,
) -> Result<CancelStatus, Status> {
    let registry = engine.cancellations();
    let mut outcomes = Vec::new();
    for ep in &info.endpoint {
        let Some(ticket) = &ep.ticket else { continue };
        let msg = Any::decode(ticket.ticket.clone())
            .map_err(|e| Status::invalid_argument(format!("malformed ticket: {e}")))?;
        if let Ok(Some(t)) = msg.unpack::<TicketStatementQuery>() {
            let st = tickets.open_statement(&t.statement_handle)?;
            outcomes.push(registry.cancel(&st.query_id));
        } else if let Ok(Some(cmd)) = msg.unpack::<CommandPreparedStatementQuery>() {
            tickets.open_handle(&cmd.prepared_statement_handle)?;
            let id = prepared_query_id(&cmd.prepared_statement_handle);
            outcomes.push(registry.cancel_prepared(&id));
        } else {
            // A write that already ran, or a metadata command (answered at once).
            outcomes.push(CancelOutcome::NotCancellable);
        }
    }
    if info.endpoint.is_empty()
        && let Some(descriptor) = &info.flight_descriptor
        && let Some(ticket) = open_retry_descriptor(tickets, descriptor)
    {
        outcomes.push(registry.cancel(&ticket?.query_id));
    }
    if outcomes.contains(&CancelOutcome::Cancelled) {
        Ok(CancelStatus::Cancelled)
    } else if outcomes.contains(&CancelOutcome::NotCancellable) {
        Ok(CancelStatus::NotCancellable)
    } else {
        Err(Status::not_found(
            "no query of this FlightInfo is known to this server: it finished more than 10 \
             minutes ago, was issued by another server, or the FlightInfo names none",
        ))
    }
}
