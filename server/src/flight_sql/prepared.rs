//! Prepared statements with stateless handles.
//!
//! The handle is a `PreparedStatementHandle` (SQL text, session defaults, bound parameters)
//! sealed for the user who created it (`tickets::Tickets`: HMAC-signed with the server's ticket
//! secret), so closing is a no-op and any server sharing the secret can use it, while a handle
//! that was altered, forged or created by another user is refused before anything is planned. Binding (DoPut) returns a new
//! handle with the parameter rows inside (`DoPutPreparedStatementResult`); with several rows
//! the statement runs once per row and the results are concatenated.
//!
//! Clients older than the `DoPutPreparedStatementResult` handle update (Flight SQL 14 and
//! earlier: JDBC drivers bundled with some BI tools) keep using the original handle after
//! binding. For them [`BoundParameters`] remembers, for a few minutes, the parameters last
//! bound to each handle; a handle that carries its own parameters never consults it.
//!
//! The JDBC driver sends every statement through here and decides "query or update" from the
//! dataset schema: queries always have columns, and a write (`INSERT INTO` an Iceberg table)
//! answers with an EMPTY dataset schema. Statements the policy refuses fail at creation.
//!
//! A write runs when it is submitted, once, with every bound parameter row as one statement
//! (one commit: `QueryExecutor::plan_write`): DoPut(CommandPreparedStatementUpdate) returns the
//! row count; GetFlightInfo(CommandPreparedStatementQuery) runs it and hands back a ticket
//! carrying the count (see `statement`). Parameters of an update come from the DoPut stream
//! itself (ADBC), else from the handle (arrow-rs binds first, then updates), else from the
//! parameters last bound to the handle.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::ipc::writer::IpcWriteOptions;
use arrow_flight::error::FlightError;
use arrow_flight::sql::server::PeekableFlightDataStream;
use arrow_flight::sql::{
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult,
    CommandPreparedStatementQuery, CommandPreparedStatementUpdate, DoPutPreparedStatementResult,
};
use arrow_flight::{FlightDescriptor, FlightInfo, IpcMessage, SchemaAsIpc};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use tonic::Status;

use crate::cancellation::prepared_query_id;
use crate::error::to_status;
use crate::executor::{QueryExecutor, is_write, parameter_schema};
use crate::flight_sql::statement::{
    DoGetStream, Logged, execute_registered, flight_info, write_info,
};
use crate::proto::petrel::{PreparedStatementHandle, SessionDefaults};
use crate::tickets::{FORMAT_VERSION, Tickets, batches_to_ipc, ipc_to_batches, statement_ticket};
use crate::untrusted_ipc::UntrustedFlightData;

/// Parameters last bound to each (parameter-less) handle, for clients that ignore the updated
/// handle returned by DoPut. Bounded in entries, in age and in the bytes they hold together
/// ([`BOUND_MAX_BYTES`]: the oldest are forgotten first).
#[derive(Debug, Default)]
pub struct BoundParameters {
    entries: std::sync::Mutex<std::collections::HashMap<Bytes, (Bytes, std::time::Instant)>>,
}

const BOUND_TTL: std::time::Duration = std::time::Duration::from_secs(600);
const BOUND_MAX_ENTRIES: usize = 10_000;
/// Bytes of remembered parameters (handles and values) at most.
pub const BOUND_MAX_BYTES: usize = 64 << 20;

impl BoundParameters {
    fn remember(&self, handle: &Bytes, parameters: Bytes) {
        let size = handle.len() + parameters.len();
        if size > BOUND_MAX_BYTES {
            return;
        }
        let mut e = crate::locks::lock(&self.entries);
        e.retain(|_, (_, at)| at.elapsed() < BOUND_TTL);
        e.remove(handle);
        let mut held: usize = e.iter().map(|(h, (p, _))| h.len() + p.len()).sum();
        if held + size > BOUND_MAX_BYTES || e.len() >= BOUND_MAX_ENTRIES {
            // Forget the oldest until the new entry fits.
            let mut by_age: Vec<(std::time::Instant, Bytes)> =
                e.iter().map(|(h, (_, at))| (*at, h.clone())).collect();
            by_age.sort_by_key(|(at, _)| *at);
            for (_, oldest) in by_age {
                if held + size <= BOUND_MAX_BYTES && e.len() < BOUND_MAX_ENTRIES {
                    break;
                }
                if let Some((p, _)) = e.remove(&oldest) {
                    held -= oldest.len() + p.len();
                }
            }
        }
        e.insert(handle.clone(), (parameters, std::time::Instant::now()));
    }

    fn recall(&self, handle: &Bytes) -> Option<Bytes> {
        let e = crate::locks::lock(&self.entries);
        e.get(handle)
            .filter(|(_, at)| at.elapsed() < BOUND_TTL)
            .map(|(p, _)| p.clone())
    }
}

/// Bound parameters travel inside handles and tickets; keep them well under gRPC's message
/// limits.
const MAX_PARAMETER_BYTES: usize = 8 * 1024 * 1024;

fn schema_bytes(schema: &Schema) -> Result<Bytes, Status> {
    let msg: IpcMessage = SchemaAsIpc::new(schema, &IpcWriteOptions::default())
        .try_into()
        .map_err(|e: arrow::error::ArrowError| to_status(&e))?;
    Ok(msg.0)
}

/// CreatePreparedStatement: plans the SQL and returns the handle and both schemas.
pub(crate) async fn create(
    engine: &dyn QueryExecutor,
    tickets: Tickets<'_>,
    req: ActionCreatePreparedStatementRequest,
    session: SessionDefaults,
) -> Result<ActionCreatePreparedStatementResult, Status> {
    if req.transaction_id.is_some() {
        return Err(Status::invalid_argument(
            "transactions are not supported (each statement commits on its own)",
        ));
    }
    let slot = engine.admission().admit("CreatePreparedStatement").await?;
    // (A query run before may come back as its kept optimized plan: `statement_cache`.)
    let planned = engine.plan(&req.query, &session, None).await?;
    drop(slot);
    let dataset = if is_write(&planned.frame) {
        Schema::empty()
    } else {
        planned.schema.as_ref().clone()
    };
    let params = parameter_schema(&planned.frame)?;
    let handle = PreparedStatementHandle {
        version: FORMAT_VERSION,
        sql: req.query,
        session: Some(session),
        parameters: Bytes::new(),
        nonce: Bytes::from(crate::auth::random_bytes(8)),
    };
    let result = ActionCreatePreparedStatementResult {
        prepared_statement_handle: tickets.handle(&handle),
        dataset_schema: schema_bytes(&dataset)?,
        parameter_schema: schema_bytes(&params)?,
    };
    if !is_write(&planned.frame) && params.fields().is_empty() {
        // The handle's GetFlightInfo (ADBC sends it next) may run this plan instead of
        // planning again, if no table changed in between (`plan_cache`).
        engine.keep_prepared_plan(&handle, planned);
    }
    Ok(result)
}

/// DoPut(CommandPreparedStatementQuery): binds parameter rows, returns the new handle.
pub(crate) async fn bind(
    engine: &dyn QueryExecutor,
    tickets: Tickets<'_>,
    bound: &BoundParameters,
    cmd: CommandPreparedStatementQuery,
    stream: PeekableFlightDataStream,
) -> Result<DoPutPreparedStatementResult, Status> {
    let mut handle = tickets.open_handle(&cmd.prepared_statement_handle)?;
    let original_had_parameters = !handle.parameters.is_empty();
    let received = read_parameters(stream).await?;
    let session = handle.session.clone().unwrap_or_default();
    // (Taken after the upload: a slow client does not hold a slot while it sends.)
    let _slot = engine.admission().admit("parameter bind (DoPut)").await?;
    let frame = engine.plan_sql(&handle.sql, &session).await?;
    let expected = parameter_schema(&frame)?.fields().len();
    if let Some((schema, batches)) = received {
        if schema.fields().len() != expected {
            return Err(Status::invalid_argument(format!(
                "the statement has {expected} parameter(s) but {} were bound",
                schema.fields().len()
            )));
        }
        handle.parameters = if batches.is_empty() {
            Bytes::new()
        } else {
            batches_to_ipc(&schema, &batches)?
        };
    }
    // Check the first row binds (types) now rather than at execution.
    if let Some(first) = first_row(&handle.parameters)? {
        engine.plan(&handle.sql, &session, Some(first)).await?;
    }
    if !original_had_parameters {
        bound.remember(&cmd.prepared_statement_handle, handle.parameters.clone());
    }
    Ok(DoPutPreparedStatementResult {
        prepared_statement_handle: Some(tickets.handle(&handle)),
    })
}

/// Parameter batches sent on a DoPut stream (their schema and the non-empty batches), or
/// `None` when the stream carried no schema at all.
async fn read_parameters(
    stream: PeekableFlightDataStream,
) -> Result<Option<(SchemaRef, Vec<RecordBatch>)>, Status> {
    // A message with no IPC header carries only the descriptor (arrow-rs's execute_update
    // sends exactly one such message): no parameters.
    let data = stream
        .try_filter(|fd| futures::future::ready(!fd.data_header.is_empty()))
        .map_err(FlightError::from);
    let mut decoded = UntrustedFlightData::new(data);
    let mut batches = Vec::new();
    let mut size = 0usize;
    while let Some(batch) = decoded.next().await {
        let batch = batch.map_err(|e| {
            Status::invalid_argument(format!("cannot decode bound parameters: {e}"))
        })?;
        size += batch.get_array_memory_size();
        if size > MAX_PARAMETER_BYTES {
            // A resource limit, like `max_parameter_rows`: RESOURCE_EXHAUSTED, and the rest
            // of the stream is not read.
            return Err(Status::resource_exhausted(format!(
                "bound parameters exceed {} MiB; bind fewer rows per execution",
                MAX_PARAMETER_BYTES >> 20
            )));
        }
        if batch.num_rows() > 0 {
            batches.push(batch);
        }
    }
    Ok(decoded.schema().map(|s| (Arc::clone(s), batches)))
}

fn first_row(ipc: &[u8]) -> Result<Option<Vec<datafusion::scalar::ScalarValue>>, Status> {
    for batch in ipc_to_batches(ipc)? {
        if batch.num_rows() > 0 {
            return batch
                .columns()
                .iter()
                .map(|c| datafusion::scalar::ScalarValue::try_from_array(c, 0))
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
                .map_err(crate::error::df_status);
        }
    }
    Ok(None)
}

/// GetFlightInfo(CommandPreparedStatementQuery): the schema after binding and a ticket.
pub(crate) async fn flight_info_for(
    engine: &dyn QueryExecutor,
    tickets: Tickets<'_>,
    bound: &BoundParameters,
    cmd: CommandPreparedStatementQuery,
    descriptor: FlightDescriptor,
    user: &str,
    schema_only: bool,
) -> Result<FlightInfo, Status> {
    let mut handle = tickets.open_handle(&cmd.prepared_statement_handle)?;
    if handle.parameters.is_empty()
        && let Some(p) = bound.recall(&cmd.prepared_statement_handle)
    {
        handle.parameters = p;
    }
    let session = handle.session.clone().unwrap_or_default();
    let first = first_row(&handle.parameters)?;
    let slot = engine
        .admission()
        .admit(super::statement::rpc_name(schema_only))
        .await?;
    // Without parameters the statement is planned once: that plan answers the parameter
    // check, the schema, and (kept below) the DoGet.
    let keep = first.is_none();
    let kept = match first {
        None if !schema_only => engine.take_prepared_plan(&handle).await,
        _ => None,
    };
    let planned = match first {
        // CreatePreparedStatement's plan, no table changed since (its parameters were counted
        // there: none).
        None if kept.is_some() => kept.ok_or_else(|| Status::internal("kept plan vanished"))?,
        // Planned again (a handle executed more than once, as ADBC does for a cursor that
        // runs the same text again), or its query's kept plan (`statement_cache`).
        None => {
            let planned = engine.plan(&handle.sql, &session, None).await?;
            let n = parameter_schema(&planned.frame)?.fields().len();
            if n > 0 {
                return Err(Status::invalid_argument(format!(
                    "the statement has {n} parameter(s) but no values were bound (DoPut)"
                )));
            }
            planned
        }
        first => engine.plan(&handle.sql, &session, first).await?,
    };
    let ticket = statement_ticket(&handle.sql, session.clone(), handle.parameters.clone());
    if is_write(&planned.frame) {
        // Runs now, once, with every bound row; the ticket carries the count.
        let count = if schema_only {
            None
        } else {
            let frame = engine
                .plan_write(&handle.sql, &session, &handle.parameters)
                .await?;
            // (The write runs under a slot of its own.)
            drop(slot);
            Some(
                engine
                    .run_write(frame, &ticket.query_id, user, &handle.sql)
                    .await
                    .map_err(Logged::mark)?,
            )
        };
        return write_info(tickets, ticket.query_id.clone(), count, &ticket, descriptor);
    }
    let info = flight_info(&planned.schema, tickets.statement(&ticket), descriptor)?;
    if !schema_only {
        // The ticket's query id is what CancelFlightInfo names.
        engine.cancellations().issued(&ticket.query_id);
        // Its DoGet runs this plan instead of planning again (`plan_cache`; a ticket with
        // parameter rows binds and plans each row when it runs).
        if keep {
            engine.keep_plan(&ticket, planned);
        }
    }
    Ok(info)
}

/// DoPut(CommandPreparedStatementUpdate): runs the write once with all its parameter rows
/// (see the module documentation for where they come from) and returns the rows written.
pub(crate) async fn update(
    engine: &dyn QueryExecutor,
    tickets: Tickets<'_>,
    bound: &BoundParameters,
    cmd: CommandPreparedStatementUpdate,
    stream: PeekableFlightDataStream,
    user: &str,
) -> Result<i64, Status> {
    let mut handle = tickets.open_handle(&cmd.prepared_statement_handle)?;
    if let Some((schema, batches)) = read_parameters(stream).await?
        && !batches.is_empty()
    {
        handle.parameters = batches_to_ipc(&schema, &batches)?;
    }
    if handle.parameters.is_empty()
        && let Some(p) = bound.recall(&cmd.prepared_statement_handle)
    {
        handle.parameters = p;
    }
    let session = handle.session.clone().unwrap_or_default();
    let query_id = Bytes::from(crate::auth::random_bytes(16));
    let slot = engine
        .admission()
        .admit("prepared update (DoPut)")
        .await
        .inspect_err(|s| crate::telemetry::query_failed(Some(&query_id), user, &handle.sql, s))?;
    let frame = engine
        .plan_write(&handle.sql, &session, &handle.parameters)
        .await
        .inspect_err(|s| crate::telemetry::query_failed(Some(&query_id), user, &handle.sql, s))?;
    drop(slot);
    let n = engine
        .run_write(frame, &query_id, user, &handle.sql)
        .await?;
    i64::try_from(n).map_err(|_| Status::internal("row count exceeds i64"))
}

/// DoGet with a `CommandPreparedStatementQuery` as the ticket (some clients send that). The
/// query id is derived from the handle (`cancellation::prepared_query_id`), so a
/// CancelFlightInfo whose endpoint names the same handle stops it; the handle runs normally
/// again afterwards.
pub(crate) async fn execute(
    engine: &dyn QueryExecutor,
    tickets: Tickets<'_>,
    cmd: CommandPreparedStatementQuery,
    user: &str,
) -> Result<DoGetStream, Status> {
    let handle = tickets.open_handle(&cmd.prepared_statement_handle)?;
    let mut ticket = statement_ticket(
        &handle.sql,
        handle.session.clone().unwrap_or_default(),
        handle.parameters.clone(),
    );
    ticket.query_id = prepared_query_id(&cmd.prepared_statement_handle);
    let registration = engine.cancellations().start_prepared(&ticket.query_id);
    execute_registered(engine, ticket, user, registration).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_parameters_are_bounded_by_bytes() {
        let bound = BoundParameters::default();
        let big = Bytes::from(vec![0u8; 8 << 20]);
        for i in 0..20u8 {
            bound.remember(&Bytes::from(vec![i; 16]), big.clone());
        }
        let held: usize = crate::locks::lock(&bound.entries)
            .iter()
            .map(|(h, (p, _))| h.len() + p.len())
            .sum();
        assert!(held <= BOUND_MAX_BYTES, "{held}");
        // The newest is kept, the oldest forgotten.
        assert!(bound.recall(&Bytes::from(vec![19u8; 16])).is_some());
        assert!(bound.recall(&Bytes::from(vec![0u8; 16])).is_none());
    }
}
