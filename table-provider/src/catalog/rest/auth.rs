//! Bearer tokens for a REST catalog: a static token, or OAuth2 client credentials exchanged at
//! the token endpoint (`POST {uri}/v1/oauth/tokens`, `grant_type=client_credentials`) and
//! exchanged again before they expire.
//!
//! A token with an `expires_in` is refreshed once less than a tenth of its life (at most a
//! minute) remains; a request the server answers 401 drops the cached token so that the next
//! request fetches a new one (see `client.rs`). Concurrent requests share one exchange.

use std::fmt;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::Mutex;

use crate::error::{Error, Result};

/// The token endpoint's answer (RFC 6749 §5.1; errors per §5.2).
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct TokenError {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// A token and when to replace it.
#[derive(Clone)]
struct CachedToken {
    token: String,
    refresh_at: Option<Instant>,
}

/// Where a catalog's bearer tokens come from.
pub(super) struct TokenSource {
    kind: Kind,
    cached: Mutex<Option<CachedToken>>,
}

enum Kind {
    None,
    Static(String),
    ClientCredentials {
        endpoint: String,
        client_id: Option<String>,
        client_secret: String,
        scope: String,
    },
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::None => "none",
            Kind::Static(_) => "static token",
            Kind::ClientCredentials { .. } => "oauth2 client credentials",
        };
        f.debug_struct("TokenSource")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

/// When a token that lives `expires_in` should be replaced: with a tenth of its life left, at
/// most a minute before it expires.
fn refresh_after(expires_in: Duration) -> Duration {
    let margin = (expires_in / 10).min(Duration::from_secs(60));
    expires_in.saturating_sub(margin)
}

impl TokenSource {
    /// From the catalog's settings: `credential` (`id:secret` or `secret`) wins over `token`.
    pub(super) fn new(
        credential: Option<&str>,
        token: Option<&str>,
        endpoint: String,
        scope: String,
    ) -> Self {
        let kind = match (credential, token) {
            (Some(credential), _) => {
                let (client_id, client_secret) = match credential.split_once(':') {
                    Some((id, secret)) => (Some(id.to_string()), secret.to_string()),
                    None => (None, credential.to_string()),
                };
                Kind::ClientCredentials {
                    endpoint,
                    client_id,
                    client_secret,
                    scope,
                }
            }
            (None, Some(token)) => Kind::Static(token.to_string()),
            (None, None) => Kind::None,
        };
        Self {
            kind,
            cached: Mutex::new(None),
        }
    }

    /// Whether a 401 may be cured by fetching a new token.
    pub(super) fn can_refresh(&self) -> bool {
        matches!(self.kind, Kind::ClientCredentials { .. })
    }

    /// Forgets the cached token (the server refused it).
    pub(super) async fn invalidate(&self) {
        *self.cached.lock().await = None;
    }

    /// The bearer token to send now, if any (fetching or refreshing it as needed).
    pub(super) async fn bearer(
        &self,
        http: &reqwest::Client,
        catalog: &str,
    ) -> Result<Option<String>> {
        let (endpoint, client_id, client_secret, scope) = match &self.kind {
            Kind::None => return Ok(None),
            Kind::Static(token) => return Ok(Some(token.clone())),
            Kind::ClientCredentials {
                endpoint,
                client_id,
                client_secret,
                scope,
            } => (endpoint, client_id, client_secret, scope),
        };
        let mut cached = self.cached.lock().await;
        if let Some(token) = cached.as_ref()
            && token.refresh_at.is_none_or(|at| Instant::now() < at)
        {
            return Ok(Some(token.token.clone()));
        }
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_secret", client_secret.as_str()),
            ("scope", scope.as_str()),
        ];
        if let Some(id) = client_id {
            form.push(("client_id", id.as_str()));
        }
        let fail = |message: String| Error::CatalogService {
            catalog: catalog.to_string(),
            status: None,
            message: format!("OAuth2 token request to {endpoint}: {message}"),
        };
        let requested = Instant::now();
        let response = http
            .post(endpoint)
            .form(&form)
            .send()
            .await
            .map_err(|e| fail(super::client::describe_transport_error(&e)))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| fail(super::client::describe_transport_error(&e)))?;
        if !status.is_success() {
            let detail = match serde_json::from_slice::<TokenError>(&body) {
                Ok(e) => match e.error_description {
                    Some(d) => format!("{}: {d}", e.error),
                    None => e.error,
                },
                Err(_) => String::from_utf8_lossy(&body).chars().take(200).collect(),
            };
            return Err(Error::CatalogService {
                catalog: catalog.to_string(),
                status: Some(status.as_u16()),
                message: format!("OAuth2 token request to {endpoint} refused ({status}): {detail}"),
            });
        }
        let token: TokenResponse = serde_json::from_slice(&body)
            .map_err(|e| fail(format!("unreadable token response: {e}")))?;
        let refresh_at = token
            .expires_in
            .map(|secs| requested + refresh_after(Duration::from_secs(secs)));
        *cached = Some(CachedToken {
            token: token.access_token.clone(),
            refresh_at,
        });
        Ok(Some(token.access_token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_replaced_before_they_expire() {
        assert_eq!(
            refresh_after(Duration::from_secs(3600)),
            Duration::from_secs(3540)
        );
        assert_eq!(
            refresh_after(Duration::from_secs(100)),
            Duration::from_secs(90)
        );
        assert_eq!(refresh_after(Duration::ZERO), Duration::ZERO);
    }
}
