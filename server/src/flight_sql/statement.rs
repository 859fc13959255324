//! Statement queries: `CommandStatementQuery` is planned in GetFlightInfo (so the client gets
//! the result schema and errors early) and executed in DoGet from a self-contained ticket (the
//! plan itself is kept briefly for that DoGet: `plan_cache`).
//! Batches stream as DataFusion produces them; tonic's HTTP/2 flow control is the
//! backpressure, and nothing is collected.
//!
//! A write (`INSERT INTO`) on this path runs once, in GetFlightInfo, and its FlightInfo's
//! ticket carries the row count (`tickets::write_result_ticket`): DoGet answers a one-row
//! `count` result however often it is called, and never runs the write again. GetSchema
//! (`SchemaOnly`) plans a write without running it.
//!
//! Every ticket handed out here is sealed for the calling user (`tickets::Tickets`).

use std::sync::Arc;

use arrow::array::{RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::{FlightDescriptor, FlightEndpoint, FlightInfo, Ticket};
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use tonic::Status;

use crate::error::to_status;
use crate::executor::{QueryExecutor, is_write, parameter_schema};
use crate::proto::petrel::{SessionDefaults, StatementTicket};
use crate::telemetry::query_failed;
use crate::tickets::{Tickets, statement_ticket};

/// Marks a GetFlightInfo made on behalf of GetSchema: describe, never run a write.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SchemaOnly;

/// The result schema of a write: one non-null `count` (UInt64) column, DataFusion's.
pub(crate) fn write_count_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "count",
        DataType::UInt64,
        false,
    )]))
}

/// The one-row result of a write.
pub(crate) fn write_count_batch(count: u64) -> Result<RecordBatch, Status> {
    RecordBatch::try_new(
        write_count_schema(),
        vec![Arc::new(UInt64Array::from(vec![count]))],
    )
    .map_err(|e| to_status(&e))
}

/// The FlightInfo of a write: its ticket is the result itself when the write ran (`count`),
/// or a statement ticket when only the schema was asked for (such a ticket is refused by
/// DoGet rather than run).
pub(crate) fn write_info(
    tickets: Tickets<'_>,
    query_id: Bytes,
    count: Option<u64>,
    statement: &StatementTicket,
    descriptor: FlightDescriptor,
) -> Result<FlightInfo, Status> {
    let ticket = match count {
        Some(n) => tickets.write_result(query_id, n),
        None => tickets.statement(statement),
    };
    let info = flight_info(&write_count_schema(), ticket, descriptor)?;
    Ok(match count {
        Some(_) => info.with_total_records(1),
        None => info,
    })
}

/// The DoGet stream type of the service.
pub(crate) type DoGetStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<arrow_flight::FlightData, Status>> + Send>>;

/// A FlightInfo with one location-less endpoint (clients reuse their connection).
pub(crate) fn flight_info(
    schema: &Schema,
    ticket: Ticket,
    descriptor: FlightDescriptor,
) -> Result<FlightInfo, Status> {
    Ok(FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| to_status(&e))?
        .with_endpoint(FlightEndpoint::new().with_ticket(ticket))
        .with_descriptor(descriptor)
        .with_total_records(-1)
        .with_total_bytes(-1))
}

/// Plans `sql` and returns its FlightInfo (and the ticket inside it). A failure is logged
/// with the query id the ticket would have had. A write runs here, once (unless
/// `schema_only`), and is logged by the engine.
pub(crate) async fn plan_statement(
    engine: &dyn QueryExecutor,
    tickets: Tickets<'_>,
    sql: &str,
    session: SessionDefaults,
    user: &str,
    descriptor: FlightDescriptor,
    schema_only: bool,
) -> Result<(FlightInfo, StatementTicket), Status> {
    let ticket = statement_ticket(sql, session.clone(), Default::default());
    let result = async {
        let slot = engine.admission().admit(rpc_name(schema_only)).await?;
        let planned = engine.plan(sql, &session, None).await?;
        // (A write planned here runs under a slot of its own.)
        drop(slot);
        if is_write(&planned.frame) {
            if !parameter_schema(&planned.frame)?.fields().is_empty() {
                return Err(Status::invalid_argument(
                    "the statement has parameters ($1 or ?): use a prepared statement and bind \
                     values",
                ));
            }
            let count = if schema_only {
                None
            } else {
                // The engine logs the write's outcome itself.
                let n = engine
                    .run_write(planned.frame, &ticket.query_id, user, sql)
                    .await
                    .map_err(Logged::mark)?;
                Some(n)
            };
            return write_info(tickets, ticket.query_id.clone(), count, &ticket, descriptor);
        }
        if !parameter_schema(&planned.frame)?.fields().is_empty() {
            return Err(Status::invalid_argument(
                "the statement has parameters ($1 or ?): use a prepared statement and bind values",
            ));
        }
        let info = flight_info(&planned.schema, tickets.statement(&ticket), descriptor)?;
        if !schema_only {
            // GetSchema hands out no ticket: nothing to keep, nothing to cancel.
            engine.cancellations().issued(&ticket.query_id);
            engine.keep_plan(&ticket, planned);
        }
        Ok(info)
    }
    .await;
    match result {
        Ok(info) => Ok((info, ticket)),
        Err(status) => {
            if !Logged::was(&status) {
                query_failed(Some(&ticket.query_id), user, sql, &status);
            }
            Err(Logged::strip(status))
        }
    }
}

/// The planning RPC, as named in a "server busy" error.
pub(crate) fn rpc_name(schema_only: bool) -> &'static str {
    if schema_only {
        "GetSchema"
    } else {
        "GetFlightInfo"
    }
}

/// Marks a status the engine already logged (a failed write), so it is not logged twice.
pub(crate) struct Logged;

impl Logged {
    const MARK: &'static str = "petrel-logged";

    pub(crate) fn mark(mut status: Status) -> Status {
        status
            .metadata_mut()
            .insert(Self::MARK, tonic::metadata::MetadataValue::from_static("1"));
        status
    }

    pub(crate) fn was(status: &Status) -> bool {
        status.metadata().contains_key(Self::MARK)
    }

    pub(crate) fn strip(mut status: Status) -> Status {
        status.metadata_mut().remove(Self::MARK);
        status
    }
}

/// Runs a statement ticket for `user` and encodes its batches as Flight data; refused with
/// CANCELLED when its query was cancelled (`cancellation`).
pub(crate) async fn execute_ticket(
    engine: &dyn QueryExecutor,
    ticket: StatementTicket,
    user: &str,
) -> Result<DoGetStream, Status> {
    let Some(registration) = engine.cancellations().start(&ticket.query_id) else {
        let status: Status = crate::error::Error::Cancelled(
            "query was cancelled (CancelFlightInfo / CancelQuery)".into(),
        )
        .into();
        query_failed(Some(&ticket.query_id), user, &ticket.sql, &status);
        return Err(status);
    };
    execute_registered(engine, ticket, user, registration).await
}

/// Runs `ticket` under its cancellation `registration` and encodes its batches as Flight data.
/// A failure before the first batch is logged here, one while streaming by the engine's query
/// stream.
pub(crate) async fn execute_registered(
    engine: &dyn QueryExecutor,
    ticket: StatementTicket,
    user: &str,
    registration: crate::cancellation::Registration,
) -> Result<DoGetStream, Status> {
    let (id, sql) = (ticket.query_id.clone(), ticket.sql.clone());
    match engine.execute(ticket, user, registration).await {
        Ok((schema, stream)) => Ok(encode(schema, stream)),
        Err(status) => {
            query_failed(Some(&id), user, &sql, &status);
            Err(status)
        }
    }
}

/// Encodes a batch stream with its schema (sent first, even when there are no batches),
/// counting the rows and Flight bytes sent.
pub(crate) fn encode(
    schema: SchemaRef,
    stream: BoxStream<'static, Result<RecordBatch, Status>>,
) -> DoGetStream {
    // Counted as sent (`petrel_streamed_rows_total`, `petrel_streamed_bytes_total`).
    let metrics = crate::metrics::global();
    let counted = stream.inspect_ok(|batch| metrics.streamed(batch.num_rows() as u64, 0));
    let flight = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(counted.map_err(|s| FlightError::Tonic(Box::new(s))))
        .map_err(Status::from)
        .inspect_ok(|data| {
            metrics.streamed(0, (data.data_header.len() + data.data_body.len()) as u64)
        });
    Box::pin(flight)
}

/// One batch as a DoGet stream (metadata results).
pub(crate) fn one_batch(batch: RecordBatch) -> DoGetStream {
    let schema = batch.schema();
    encode(
        schema,
        futures::stream::once(async move { Ok(batch) }).boxed(),
    )
}
