//! Self-contained tickets and prepared-statement handles (messages of `proto/petrel.proto`).
//!
//! A DoGet ticket is Flight SQL's `TicketStatementQuery` whose `statement_handle` is a
//! [`StatementTicket`]: the SQL, the session defaults and the bound parameters. Any Petrel
//! process can execute it; nothing is kept between GetFlightInfo and DoGet.
//!
//! A write that arrives on the query path (ADBC's `cursor.execute("INSERT ...")` sends
//! GetFlightInfo, then DoGet) runs once, in GetFlightInfo; its ticket is a
//! [`WriteResultTicket`] carrying the row count, so every DoGet of it (a client that fetches
//! twice, a retry) answers the same one-row `count` result and nothing runs again. It is a
//! ticket type of its own (an `Any` with [`WRITE_RESULT_TYPE_URL`]), never a statement
//! ticket, so it cannot be mistaken for something to execute.

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

/// `Any.type_url` of a [`WriteResultTicket`].
pub const WRITE_RESULT_TYPE_URL: &str = "type.googleapis.com/petrel.v1.WriteResultTicket";

/// The result of a write that already ran (see the module documentation). Defined here with
/// prost's derive rather than in `proto/petrel.proto`; its wire form is that of
/// `message WriteResultTicket { uint32 version = 1; bytes query_id = 2; uint64 count = 3; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteResultTicket {
    /// [`FORMAT_VERSION`].
    #[prost(uint32, tag = "1")]
    pub version: u32,
    /// The query id the write ran (and was logged) under.
    #[prost(bytes = "bytes", tag = "2")]
    pub query_id: Bytes,
    /// Rows written.
    #[prost(uint64, tag = "3")]
    pub count: u64,
}

/// The Flight ticket for a finished write.
pub fn write_result_ticket(query_id: Bytes, count: u64) -> Ticket {
    let body = WriteResultTicket {
        version: FORMAT_VERSION,
        query_id,
        count,
    };
    let any = arrow_flight::sql::Any {
        type_url: WRITE_RESULT_TYPE_URL.to_string(),
        value: body.encode_to_vec().into(),
    };
    Ticket {
        ticket: any.encode_to_vec().into(),
    }
}

/// Decodes the body of a write-result ticket (the `Any`'s value).
pub fn decode_write_result(value: &[u8]) -> Result<WriteResultTicket, Status> {
    let t = WriteResultTicket::decode(value)
        .map_err(|e| Status::invalid_argument(format!("malformed write-result ticket: {e}")))?;
    if t.version != FORMAT_VERSION {
        return Err(Status::invalid_argument(
            "write-result ticket from another Petrel version",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_result_tickets_round_trip_and_are_not_statements() {
        let t = write_result_ticket(Bytes::from_static(b"id"), 7);
        let any = arrow_flight::sql::Any::decode(t.ticket).unwrap();
        assert_eq!(any.type_url, WRITE_RESULT_TYPE_URL);
        assert!(any.unpack::<TicketStatementQuery>().unwrap().is_none());
        let body = decode_write_result(&any.value).unwrap();
        assert_eq!((body.count, &body.query_id[..]), (7, &b"id"[..]));
    }
}
