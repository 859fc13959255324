//! Panics of the query engine, answered as errors.
//!
//! DataFusion 53 panics on some statements instead of failing them: `date_trunc('week',
//! TIMESTAMP '1677-09-21 00:12:44')` unwraps a `None`, `overlay(… from -9223372036854775808 …)`
//! slices out of bounds, `DATE '1970-01-01' + INTERVAL '2147483647 days'` reaches an
//! `unreachable!` while planning. Tokio keeps the server up, but the client lost its call
//! (CANCELLED, with no reason). Planning, optimizing and each poll of a result stream run under
//! `catch_unwind` here, so such a statement fails with INTERNAL naming the panic, and the panic
//! is logged.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use arrow::array::RecordBatch;
use futures::FutureExt;
use futures::stream::{BoxStream, Stream, StreamExt};
use tonic::Status;

/// The message of a caught panic's payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
        .unwrap_or_else(|| "no message".to_string())
}

/// The error a panic while `stage` (planning, optimizing, running) becomes.
fn panicked(stage: &str, payload: &(dyn std::any::Any + Send)) -> Status {
    let message = panic_message(payload);
    tracing::error!(stage, panic = %message, "the query engine panicked");
    Status::internal(format!(
        "the query engine failed while {stage} this statement (it panicked: {message})"
    ))
}

/// `f`, with a panic answered as INTERNAL.
pub fn guarded<T>(stage: &str, f: impl FnOnce() -> Result<T, Status>) -> Result<T, Status> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| Err(panicked(stage, &*payload)))
}

/// `future`, with a panic answered as INTERNAL.
pub async fn guarded_async<T>(
    stage: &str,
    future: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    AssertUnwindSafe(future)
        .catch_unwind()
        .await
        .unwrap_or_else(|payload| Err(panicked(stage, &*payload)))
}

/// A result stream whose panic while polling ends it with INTERNAL.
pub struct GuardedStream {
    inner: Option<BoxStream<'static, Result<RecordBatch, Status>>>,
}

impl std::fmt::Debug for GuardedStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedStream")
            .field("ended", &self.inner.is_none())
            .finish()
    }
}

impl GuardedStream {
    pub fn new(inner: BoxStream<'static, Result<RecordBatch, Status>>) -> Self {
        Self { inner: Some(inner) }
    }
}

impl Stream for GuardedStream {
    type Item = Result<RecordBatch, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match catch_unwind(AssertUnwindSafe(|| inner.poll_next_unpin(cx))) {
            Ok(next) => next,
            Err(payload) => {
                // The stream's state is unknown after a panic: it is dropped, not polled again.
                self.inner = None;
                Poll::Ready(Some(Err(panicked("running", &*payload))))
            }
        }
    }
}
