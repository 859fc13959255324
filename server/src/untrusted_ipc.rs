//! Arrow IPC from clients, decoded without trusting it.
//!
//! arrow-ipc 58 validates most of a message, but a record batch whose buffers point past the
//! message body makes it panic (`Buffer::slice_with_length`: "the offset of the new Buffer
//! cannot exceed the existing length"), found by `server/tests/it/fuzz_front_end.rs`. A panic in
//! a request handler would cost the client its connection instead of an answer, and could
//! poison shared state. So every decode of client bytes runs under `catch_unwind`, and a panic
//! becomes an error naming what was malformed; a stream stops at the first such error.
//!
//! - [`read_ipc_stream`]: an IPC stream held in memory (bound parameters inside tickets and
//!   handles), decoded without allocating what its messages merely declare.
//! - [`UntrustedFlightData`]: the record batches of a DoPut's FlightData stream (parameter
//!   binds, bulk ingest), with the schema the stream declared.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use arrow::array::RecordBatch;
use arrow::buffer::Buffer;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::ipc::reader::StreamDecoder;
use arrow_flight::FlightData;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::error::FlightError;
use futures::Stream;

use crate::engine_panics::panic_message;

/// Every record batch of the IPC stream `bytes`. Arrow's push decoder is used rather than its
/// reader: the reader allocates whatever length a message declares before reading it (four
/// random bytes can ask for 2 GiB), the decoder grows with the bytes actually there.
pub fn read_ipc_stream(bytes: &[u8]) -> Result<Vec<RecordBatch>, ArrowError> {
    catch_unwind(|| {
        let mut decoder = StreamDecoder::new();
        let mut buffer = Buffer::from(bytes);
        let mut batches = Vec::new();
        while !buffer.is_empty() {
            if let Some(batch) = decoder.decode(&mut buffer)? {
                batches.push(batch);
            }
        }
        decoder.finish()?;
        Ok(batches)
    })
    .unwrap_or_else(|payload| {
        Err(ArrowError::IpcError(format!(
            "malformed Arrow IPC: {}",
            panic_message(payload.as_ref())
        )))
    })
}

/// The record batches of a client's FlightData stream; see the module docs.
pub struct UntrustedFlightData {
    inner: FlightRecordBatchStream,
    failed: bool,
}

impl std::fmt::Debug for UntrustedFlightData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UntrustedFlightData")
            .field("schema", &self.inner.schema())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl UntrustedFlightData {
    /// Decodes `data` (FlightData messages with IPC headers).
    pub fn new(data: impl Stream<Item = Result<FlightData, FlightError>> + Send + 'static) -> Self {
        Self {
            inner: FlightRecordBatchStream::new_from_flight_data(data),
            failed: false,
        }
    }

    /// The schema the stream declared, once its schema message has been read.
    pub fn schema(&self) -> Option<&SchemaRef> {
        self.inner.schema()
    }
}

impl Stream for UntrustedFlightData {
    type Item = Result<RecordBatch, FlightError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        let this = &mut *self;
        let inner = &mut this.inner;
        match catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll_next(cx))) {
            Ok(poll) => poll,
            Err(payload) => {
                this.failed = true;
                Poll::Ready(Some(Err(FlightError::DecodeError(format!(
                    "malformed Arrow IPC: {}",
                    panic_message(payload.as_ref())
                )))))
            }
        }
    }
}
