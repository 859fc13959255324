//! Self-contained tickets and prepared-statement handles (messages of `proto/petrel.proto`).
//!
//! A DoGet ticket is Flight SQL's `TicketStatementQuery` whose `statement_handle` is a
//! [`StatementTicket`]: the SQL, the session defaults and the bound parameters. Any Petrel
//! process can execute it; nothing is kept between GetFlightInfo and DoGet.

use std::io::Cursor;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use arrow_flight::Ticket;
use arrow_flight::sql::{ProstMessageExt, TicketStatementQuery};
use bytes::Bytes;
use prost::Message;
use tonic::Status;

use crate::proto::petrel::{PreparedStatementHandle, SessionDefaults, StatementTicket};

/// Current format version of tickets and handles.
pub const FORMAT_VERSION: u32 = 1;

/// A new ticket for `sql` with a fresh random query id.
pub fn statement_ticket(sql: &str, session: SessionDefaults, parameters: Bytes) -> StatementTicket {
    StatementTicket {
        version: FORMAT_VERSION,
        sql: sql.to_string(),
        session: Some(session),
        parameters,
        query_id: Bytes::from(crate::auth::random_bytes(16)),
    }
}

/// The Flight ticket carrying `t`.
pub fn to_flight_ticket(t: &StatementTicket) -> Ticket {
    let inner = TicketStatementQuery {
        statement_handle: t.encode_to_vec().into(),
    };
    Ticket {
        ticket: inner.as_any().encode_to_vec().into(),
    }
}

/// Decodes a `TicketStatementQuery.statement_handle`.
pub fn decode_statement(handle: &[u8]) -> Result<StatementTicket, Status> {
    let t = StatementTicket::decode(handle).map_err(|e| {
        Status::invalid_argument(format!("malformed ticket (not issued by Petrel?): {e}"))
    })?;
    if t.version != FORMAT_VERSION || t.sql.is_empty() {
        return Err(Status::invalid_argument(
            "malformed ticket (not issued by this Petrel version): call GetFlightInfo again",
        ));
    }
    Ok(t)
}

/// Encodes a prepared-statement handle.
pub fn encode_handle(h: &PreparedStatementHandle) -> Bytes {
    h.encode_to_vec().into()
}

/// Decodes a prepared-statement handle.
pub fn decode_handle(bytes: &[u8]) -> Result<PreparedStatementHandle, Status> {
    let h = PreparedStatementHandle::decode(bytes).map_err(|e| {
        Status::invalid_argument(format!("malformed prepared statement handle: {e}"))
    })?;
    if h.version != FORMAT_VERSION || h.sql.is_empty() {
        return Err(Status::invalid_argument(
            "malformed prepared statement handle: create the prepared statement again",
        ));
    }
    Ok(h)
}

/// Serialises parameter rows as an Arrow IPC stream.
pub fn batches_to_ipc(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Bytes, Status> {
    let mut buf = Vec::new();
    {
        let mut w = StreamWriter::try_new(&mut buf, schema)
            .map_err(|e| Status::invalid_argument(format!("parameters: {e}")))?;
        for b in batches {
            w.write(b)
                .map_err(|e| Status::invalid_argument(format!("parameters: {e}")))?;
        }
        w.finish()
            .map_err(|e| Status::invalid_argument(format!("parameters: {e}")))?;
    }
    Ok(buf.into())
}

/// Reads parameter rows back from an Arrow IPC stream (empty bytes: no parameters).
pub fn ipc_to_batches(bytes: &[u8]) -> Result<Vec<RecordBatch>, Status> {
    if bytes.is_empty() {
        return Ok(vec![]);
    }
    let reader = StreamReader::try_new(Cursor::new(bytes), None)
        .map_err(|e| Status::invalid_argument(format!("malformed bound parameters: {e}")))?;
    reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Status::invalid_argument(format!("malformed bound parameters: {e}")))
}
