//! The metrics endpoint: a small HTTP/1.1 server (hyper, as tonic builds it) answering
//! `GET /metrics` with [`super::render`] in Prometheus' text format, and `GET /` with a pointer
//! to it. Anything else is 404 (other paths) or 405 (other methods).
//!
//! It listens on its own address (`metrics_addr`), separate from the Flight port: it carries no
//! authentication, so bind it where only the scraper reaches it (loopback, or a private
//! network). A slow client cannot hold it: headers must arrive within 10 s, and each connection
//! is served on its own task.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use super::{Sources, render};

/// The content type of the text exposition format.
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Binds `addr` (before the Flight port is announced, so a bad address fails the start).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen for metrics on {addr}: {e}"))
}

/// Serves scrapes on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, sources: Sources) {
    let sources = Arc::new(sources);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "metrics endpoint: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let sources = Arc::clone(&sources);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let sources = Arc::clone(&sources);
                async move { Ok::<_, Infallible>(answer(&request, &sources)) }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(error = %e, "metrics endpoint: connection ended with an error");
            }
        });
    }
}

fn answer(request: &Request<Incoming>, sources: &Sources) -> Response<Full<Bytes>> {
    let (status, body, content_type) = match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => (StatusCode::OK, render(sources), CONTENT_TYPE_TEXT),
        (&Method::GET, "/") => (
            StatusCode::OK,
            "petrel: metrics at /metrics\n".to_string(),
            "text/plain; charset=utf-8",
        ),
        (_, "/metrics" | "/") => (
            StatusCode::METHOD_NOT_ALLOWED,
            "use GET\n".to_string(),
            "text/plain; charset=utf-8",
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "not found: metrics are at /metrics\n".to_string(),
            "text/plain; charset=utf-8",
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
