//! How a REST catalog is configured, and what its `GET /v1/config` adds.
//!
//! [`RestCatalogConfig`] is what the user gives (the server's `[[catalog]] type = "rest"`):
//! the base `uri`, the `warehouse` sent to `/v1/config`, the credentials, the URL `prefix`, and
//! free-form Iceberg properties. [`CatalogProperties`] is the result of config discovery, merged
//! as Iceberg Java's `RESTSessionCatalog` merges it: the server's `defaults`, then the client's
//! properties, then the server's `overrides` (so a server-chosen `prefix` wins).

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;

/// The settings of one REST catalog.
#[derive(Clone, Default)]
pub struct RestCatalogConfig {
    /// Petrel's name for the catalog (in errors and logs).
    pub name: String,
    /// The catalog's base URI (`http://host:8181`, or with a path: `https://host/api/catalog`).
    pub uri: String,
    /// The warehouse to ask `/v1/config` about (a name or a location, as the server defines).
    pub warehouse: Option<String>,
    /// OAuth2 client credentials, `client_id:client_secret` (or only a secret), exchanged at
    /// the token endpoint for bearer tokens, refreshed before they expire.
    pub credential: Option<String>,
    /// A static bearer token (used as is; with `credential` too, the credential wins).
    pub token: Option<String>,
    /// The OAuth2 scope asked for [default: `catalog`].
    pub scope: Option<String>,
    /// The URL prefix (`/v1/{prefix}/namespaces`), when the server's config does not give one.
    pub prefix: Option<String>,
    /// The token endpoint [default: `{uri}/v1/oauth/tokens`]; also the property
    /// `oauth2-server-uri`.
    pub oauth2_server_uri: Option<String>,
    /// Ask for vended storage credentials on table loads
    /// (`X-Iceberg-Access-Delegation: vended-credentials`) [default: true].
    pub vended_credentials: bool,
    /// Longest wait for one HTTP request [default: 60 s].
    pub request_timeout: Option<Duration>,
    /// Further Iceberg client properties (`s3.endpoint`, `header.X-Custom`, ...).
    pub properties: HashMap<String, String>,
}

impl fmt::Debug for RestCatalogConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secret = |s: &Option<String>| s.as_ref().map(|_| "<redacted>");
        f.debug_struct("RestCatalogConfig")
            .field("name", &self.name)
            .field("uri", &self.uri)
            .field("warehouse", &self.warehouse)
            .field("credential", &secret(&self.credential))
            .field("token", &secret(&self.token))
            .field("scope", &self.scope)
            .field("prefix", &self.prefix)
            .field("oauth2_server_uri", &self.oauth2_server_uri)
            .field("vended_credentials", &self.vended_credentials)
            .field("request_timeout", &self.request_timeout)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl RestCatalogConfig {
    /// A configuration for the catalog at `uri` (no credentials, vended credentials asked for).
    pub fn new(name: impl Into<String>, uri: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            uri: uri.into(),
            vended_credentials: true,
            ..Self::default()
        }
    }

    /// The client's own properties, as Iceberg names them (the explicit settings over
    /// [`RestCatalogConfig::properties`]).
    pub(super) fn client_properties(&self) -> HashMap<String, String> {
        let mut props = self.properties.clone();
        let mut set = |key: &str, value: &Option<String>| {
            if let Some(v) = value {
                props.insert(key.to_string(), v.clone());
            }
        };
        set("uri", &Some(self.uri.clone()));
        set("warehouse", &self.warehouse);
        set("prefix", &self.prefix);
        set("scope", &self.scope);
        set("oauth2-server-uri", &self.oauth2_server_uri);
        props
    }
}

/// `GET /v1/config`'s answer.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ConfigResponse {
    #[serde(default)]
    pub(super) defaults: HashMap<String, String>,
    #[serde(default)]
    pub(super) overrides: HashMap<String, String>,
}

/// The catalog's properties after config discovery.
#[derive(Debug, Clone, Default)]
pub(super) struct CatalogProperties {
    pub(super) merged: HashMap<String, String>,
}

impl CatalogProperties {
    /// defaults < client < overrides.
    pub(super) fn merge(client: HashMap<String, String>, server: ConfigResponse) -> Self {
        let mut merged = server.defaults;
        merged.extend(client);
        merged.extend(server.overrides);
        Self { merged }
    }

    /// A property, trimmed, if set and not empty.
    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.merged
            .get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The URL prefix, without surrounding slashes (empty: none).
    pub(super) fn prefix(&self) -> String {
        self.get("prefix")
            .unwrap_or_default()
            .trim_matches('/')
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_overrides_win_over_the_client_and_defaults_lose() {
        let client = HashMap::from([
            ("prefix".to_string(), "mine".to_string()),
            ("a".to_string(), "client".to_string()),
        ]);
        let server = ConfigResponse {
            defaults: HashMap::from([
                ("a".to_string(), "default".to_string()),
                ("b".to_string(), "default".to_string()),
            ]),
            overrides: HashMap::from([("prefix".to_string(), "/theirs/".to_string())]),
        };
        let props = CatalogProperties::merge(client, server);
        assert_eq!(props.prefix(), "theirs");
        assert_eq!(props.get("a"), Some("client"));
        assert_eq!(props.get("b"), Some("default"));
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let mut config = RestCatalogConfig::new("c", "http://x");
        config.credential = Some("id:very-secret".into());
        config.token = Some("tok-secret".into());
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("very-secret") && !shown.contains("tok-secret"),
            "{shown}"
        );
    }
}
