//! The HTTP side of a REST catalog: URLs (`{uri}/v1/{prefix}/...`, namespace levels joined by
//! the unit separator 0x1F), bearer tokens, extra headers (`header.*` properties), timeouts,
//! and the Iceberg REST error model (`{"error": {"message", "type", "code"}}`).
//!
//! Transport failures are told apart by whether the server may have acted on the request
//! ([`Transport::maybe_processed`]): a commit that never reached the server failed; one whose
//! answer was lost (timeout, connection reset) has an unknown outcome.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::auth::TokenSource;
use crate::error::{Error, Result};

/// The unit separator that joins namespace levels in paths and query parameters.
pub(super) const NAMESPACE_SEPARATOR: &str = "\u{1f}";

/// Default wait for one request.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A reply with its status and body.
#[derive(Debug)]
pub(super) struct Reply {
    pub(super) status: StatusCode,
    pub(super) body: bytes::Bytes,
}

/// A request that got no reply.
#[derive(Debug)]
pub(super) struct Transport {
    pub(super) message: String,
    /// False only when the request certainly never reached the server (no connection).
    pub(super) maybe_processed: bool,
}

/// `{"error": {...}}` of the REST spec.
#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorModel,
}

#[derive(Deserialize)]
struct ErrorModel {
    #[serde(default)]
    message: String,
    #[serde(default, rename = "type")]
    kind: String,
}

/// A reqwest error in words (the cause chain, which reqwest's Display leaves out).
pub(super) fn describe_transport_error(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "cannot connect".to_string()
    } else {
        e.to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The HTTP client of one REST catalog.
#[derive(Debug)]
pub(super) struct RestClient {
    catalog: String,
    root: Url,
    prefix: Vec<String>,
    http: reqwest::Client,
    headers: HeaderMap,
    tokens: TokenSource,
}

impl RestClient {
    /// A client for `uri`; `prefix` is set after config discovery.
    pub(super) fn new(
        catalog: &str,
        uri: &str,
        timeout: Option<Duration>,
        headers: &[(String, String)],
        tokens: TokenSource,
    ) -> Result<Self> {
        let invalid = |why: String| {
            Error::InvalidArgument(format!("REST catalog {catalog}: uri {uri:?}: {why}"))
        };
        let root = Url::parse(uri.trim()).map_err(|e| invalid(e.to_string()))?;
        if !matches!(root.scheme(), "http" | "https") || root.cannot_be_a_base() {
            return Err(invalid("expected an http:// or https:// URL".into()));
        }
        let mut header_map = HeaderMap::new();
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| {
                Error::InvalidArgument(format!("REST catalog {catalog}: header {name:?}: {e}"))
            })?;
            let value = HeaderValue::from_str(value).map_err(|e| {
                Error::InvalidArgument(format!("REST catalog {catalog}: header {name}: {e}"))
            })?;
            header_map.insert(name, value);
        }
        let http = reqwest::Client::builder()
            .timeout(timeout.unwrap_or(DEFAULT_TIMEOUT))
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| invalid(format!("cannot build an HTTP client: {e}")))?;
        Ok(Self {
            catalog: catalog.to_string(),
            root,
            prefix: Vec::new(),
            http,
            headers: header_map,
            tokens,
        })
    }

    /// Sets the URL prefix (`a/b` → `/v1/a/b/...`).
    pub(super) fn set_prefix(&mut self, prefix: &str) {
        self.prefix = prefix
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
    }

    /// `{uri}/v1/<segments>` (no prefix: `/v1/config`, `/v1/oauth/tokens`).
    pub(super) fn root_url(&self, segments: &[&str]) -> Url {
        let mut url = self.root.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().push("v1").extend(segments);
        }
        url
    }

    /// `{uri}/v1/{prefix}/<segments>`; each segment is percent-encoded as one path segment.
    pub(super) fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.root.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty()
                .push("v1")
                .extend(&self.prefix)
                .extend(segments);
        }
        url
    }

    /// Sends one request (a 401 with refreshable credentials is retried once with a new
    /// token: the server acted on nothing).
    pub(super) async fn send(
        &self,
        method: Method,
        url: Url,
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
        extra_headers: &[(&'static str, &'static str)],
    ) -> Result<std::result::Result<Reply, Transport>> {
        let mut refreshed = false;
        loop {
            let mut request = self
                .http
                .request(method.clone(), url.clone())
                .headers(self.headers.clone())
                .header("X-Client-Version", "petrel")
                .query(query);
            for (name, value) in extra_headers {
                request = request.header(*name, *value);
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            if let Some(token) = self.tokens.bearer(&self.http, &self.catalog).await? {
                request = request.bearer_auth(token);
            }
            let response = match request.send().await {
                Ok(r) => r,
                Err(e) => {
                    return Ok(Err(Transport {
                        message: format!(
                            "{method} {}: {}",
                            redact(&url),
                            describe_transport_error(&e)
                        ),
                        maybe_processed: !(e.is_connect() || e.is_builder()),
                    }));
                }
            };
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED && self.tokens.can_refresh() && !refreshed {
                self.tokens.invalidate().await;
                refreshed = true;
                continue;
            }
            return Ok(match response.bytes().await {
                Ok(body) => Ok(Reply { status, body }),
                Err(e) => Err(Transport {
                    message: format!(
                        "{method} {}: reading the answer: {}",
                        redact(&url),
                        describe_transport_error(&e)
                    ),
                    maybe_processed: true,
                }),
            });
        }
    }

    /// Sends a request whose failure is an ordinary error (everything but commits), returning
    /// a success's body; errors are mapped by [`RestClient::error`].
    pub(super) async fn call(
        &self,
        method: Method,
        url: Url,
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
        extra_headers: &[(&'static str, &'static str)],
        what: &str,
    ) -> Result<Reply> {
        match self.send(method, url, query, body, extra_headers).await? {
            Ok(reply) if reply.status.is_success() => Ok(reply),
            Ok(reply) => Err(self.error(&reply, what)),
            Err(t) => Err(Error::CatalogService {
                catalog: self.catalog.clone(),
                status: None,
                message: format!("{what}: {}", t.message),
            }),
        }
    }

    /// A JSON body as `T`.
    pub(super) fn decode<T: DeserializeOwned>(&self, reply: &Reply, what: &str) -> Result<T> {
        serde_json::from_slice(&reply.body).map_err(|e| Error::CatalogService {
            catalog: self.catalog.clone(),
            status: Some(reply.status.as_u16()),
            message: format!("{what}: unreadable answer: {e}"),
        })
    }

    /// The server's words for a failed request (its error model, else the body's start).
    pub(super) fn detail(reply: &Reply) -> String {
        match serde_json::from_slice::<ErrorEnvelope>(&reply.body) {
            Ok(ErrorEnvelope { error }) if !error.kind.is_empty() => {
                format!("{}: {}", error.kind, error.message)
            }
            Ok(ErrorEnvelope { error }) => error.message,
            Err(_) => String::from_utf8_lossy(&reply.body)
                .chars()
                .take(300)
                .collect(),
        }
    }

    /// The error for a failed reply: 404 NotFound, 409 AlreadyExists (callers that mean
    /// something else by 409 check first), anything else a catalog-service error with the
    /// status (401 names the credentials).
    pub(super) fn error(&self, reply: &Reply, what: &str) -> Error {
        let detail = Self::detail(reply);
        match reply.status {
            StatusCode::NOT_FOUND => {
                Error::NotFound(format!("{what} in REST catalog {}: {detail}", self.catalog))
            }
            StatusCode::CONFLICT => {
                Error::AlreadyExists(format!("{what} in REST catalog {}: {detail}", self.catalog))
            }
            StatusCode::UNAUTHORIZED => Error::CatalogService {
                catalog: self.catalog.clone(),
                status: Some(401),
                message: format!(
                    "{what}: not authenticated (check the catalog's credential or token): {detail}"
                ),
            },
            status => Error::CatalogService {
                catalog: self.catalog.clone(),
                status: Some(status.as_u16()),
                message: format!("{what}: {status}: {detail}"),
            },
        }
    }
}

/// A URL for messages: no query string (it may carry a warehouse name, never secrets, but keep
/// messages short).
fn redact(url: &Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(uri: &str) -> RestClient {
        RestClient::new(
            "c",
            uri,
            None,
            &[],
            TokenSource::new(None, None, String::new(), "catalog".into()),
        )
        .unwrap()
    }

    #[test]
    fn urls_encode_each_segment_and_join_levels_with_the_unit_separator() {
        let mut c = client("http://127.0.0.1:8181/api/catalog/");
        c.set_prefix("/wh/1/");
        let ns = ["a", "b c/d"].join(NAMESPACE_SEPARATOR);
        assert_eq!(
            c.url(&["namespaces", &ns, "tables", "t%"]).as_str(),
            "http://127.0.0.1:8181/api/catalog/v1/wh/1/namespaces/a%1Fb%20c%2Fd/tables/t%25"
        );
        assert_eq!(
            c.root_url(&["config"]).as_str(),
            "http://127.0.0.1:8181/api/catalog/v1/config"
        );
    }

    #[test]
    fn a_uri_that_is_not_http_is_refused() {
        let err = RestClient::new(
            "c",
            "file:///tmp",
            None,
            &[],
            TokenSource::new(None, None, String::new(), "catalog".into()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("http"), "{err}");
    }
}
