//! Statement queries: `CommandStatementQuery` is planned in GetFlightInfo (so the client gets
//! the result schema and errors early) and executed in DoGet from a self-contained ticket (the
//! plan itself is kept briefly for that DoGet: `plan_cache`).
//! Batches stream as DataFusion produces them; tonic's HTTP/2 flow control is the
//! backpressure, and nothing is collected.

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::{FlightDescriptor, FlightEndpoint, FlightInfo, Ticket};
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use tonic::Status;

use crate::engine::QueryEngine;
use crate::error::to_status;
use crate::proto::petrel::{SessionDefaults, StatementTicket};
use crate::telemetry::query_failed;
use crate::tickets::{statement_ticket, to_flight_ticket};

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
/// with the query id the ticket would have had.
pub(crate) async fn plan_statement(
    engine: &QueryEngine,
    sql: &str,
    session: SessionDefaults,
    user: &str,
    descriptor: FlightDescriptor,
) -> Result<(FlightInfo, StatementTicket), Status> {
    let ticket = statement_ticket(sql, session.clone(), Default::default());
    let result = async {
        let planned = engine.plan(sql, &session, None).await?;
        if !QueryEngine::parameter_schema(&planned.frame)?
            .fields()
            .is_empty()
        {
            return Err(Status::invalid_argument(
                "the statement has parameters ($1 or ?): use a prepared statement and bind values",
            ));
        }
        let info = flight_info(&planned.schema, to_flight_ticket(&ticket), descriptor)?;
        engine.keep_plan(&ticket, planned);
        Ok(info)
    }
    .await;
    match result {
        Ok(info) => Ok((info, ticket)),
        Err(status) => {
            query_failed(Some(&ticket.query_id), user, sql, &status);
            Err(status)
        }
    }
}

/// Runs a ticket for `user` and encodes its batches as Flight data. A failure before the
/// first batch is logged here, one while streaming by the engine's query stream.
pub(crate) async fn execute_ticket(
    engine: &QueryEngine,
    ticket: StatementTicket,
    user: &str,
) -> Result<DoGetStream, Status> {
    let (id, sql) = (ticket.query_id.clone(), ticket.sql.clone());
    match engine.execute(ticket, user).await {
        Ok((schema, stream)) => Ok(encode(schema, stream)),
        Err(status) => {
            query_failed(Some(&id), user, &sql, &status);
            Err(status)
        }
    }
}

/// Encodes a batch stream with its schema (sent first, even when there are no batches).
pub(crate) fn encode(
    schema: SchemaRef,
    stream: BoxStream<'static, Result<RecordBatch, Status>>,
) -> DoGetStream {
    let flight = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(stream.map_err(|s| FlightError::Tonic(Box::new(s))))
        .map_err(Status::from);
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
