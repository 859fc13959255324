//! How the object stores behind `s3://`, `gs://` and `abfss://` locations are configured.
//!
//! A [`StoreConfig`] is built from **Iceberg's FileIO property names** (the keys a REST
//! catalog's `config` / `LoadTableResult.config` carries and vended credentials use:
//! `s3.access-key-id`, `s3.secret-access-key`, `s3.session-token`, `s3.endpoint`,
//! `s3.path-style-access`, `s3.region` / `client.region`, `adls.account-name`, ...) or from
//! object_store's own key names (`aws_…`, `google_…`, `azure_…`). Whatever it does not set,
//! the builders read from the environment as object_store's `from_env()` does (`AWS_*`,
//! `GOOGLE_*`, `AZURE_*`: static keys, session token, region, endpoint, `AWS_ALLOW_HTTP`, web
//! identity, ECS/EKS container credentials, instance metadata). AWS profile files are not read
//! (object_store has no profile provider).
//!
//! Every store gets bounded timeouts and retries ([`RETRY_TIMEOUT`], [`MAX_RETRIES`]): an
//! unreachable endpoint or a server that drops connections fails a query with an error after
//! at most that long, never hangs it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use object_store::CredentialProvider;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsCredential, AwsCredentialProvider};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, RetryConfig};

use super::renewing_store::RenewableCredentials;
use crate::error::{Error, Result};

/// Requests that fail with a retryable error (5xx, connection reset, timeout) are retried at
/// most this often...
pub const MAX_RETRIES: usize = 3;
/// ...and for at most this long from the first attempt.
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(30);
/// Connecting to the endpoint may take this long.
const CONNECT_TIMEOUT: &str = "5s";
/// One request (headers and body) may take this long.
const REQUEST_TIMEOUT: &str = "30s";

/// The kind of object store a location scheme names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// `s3://`, `s3a://`, `s3n://`.
    S3,
    /// `gs://`.
    Gcs,
    /// `abfs://`, `abfss://`, `wasb://`, `wasbs://`, `az://`.
    Azure,
}

impl StoreKind {
    /// The store kind of a (lowercase) location scheme; `None` for `file` and unknown ones.
    pub fn of_scheme(scheme: &str) -> Option<Self> {
        match scheme {
            "s3" | "s3a" | "s3n" => Some(Self::S3),
            "gs" => Some(Self::Gcs),
            "abfs" | "abfss" | "wasb" | "wasbs" | "az" => Some(Self::Azure),
            _ => None,
        }
    }
}

/// Settings of the object stores of one catalog (or one table's vended credentials).
#[derive(Clone, Default)]
pub struct StoreConfig {
    s3: Vec<(AmazonS3ConfigKey, String)>,
    gcs: Vec<(GoogleConfigKey, String)>,
    azure: Vec<(AzureConfigKey, String)>,
    /// Where S3 credentials come from when they change over time (a REST catalog's vended
    /// credentials, refreshed before they expire); over any keys set above.
    s3_credentials: Option<AwsCredentialProvider>,
    /// The same provider when it can replace keys S3 refused (see
    /// [`super::renewing_store`]).
    renewable_s3: Option<Arc<dyn RenewableCredentials>>,
}

impl fmt::Debug for StoreConfig {
    /// Keys only: values may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreConfig")
            .field("s3", &self.s3.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("gcs", &self.gcs.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field(
                "azure",
                &self.azure.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("s3_credentials", &self.s3_credentials.is_some())
            .field("renewable_s3", &self.renewable_s3.is_some())
            .finish()
    }
}

/// What a property key means.
enum Setting {
    S3(AmazonS3ConfigKey, String),
    Gcs(GoogleConfigKey, String),
    Azure(AzureConfigKey, String),
    /// A FileIO property Petrel knows and has nothing to do for (`s3.remote-signing-enabled`
    /// off, `client.factory`, ...), or a key of no store.
    Ignored,
}

impl StoreConfig {
    /// Nothing set: every store reads its settings from the environment only.
    pub fn from_env() -> Self {
        Self::default()
    }

    /// The storage settings among a REST catalog's or a table's FileIO properties. Keys that
    /// configure no store (`warehouse`, `prefix`, `token`, ...) are ignored; a storage key with
    /// a value that cannot be used (`s3.path-style-access = maybe`) is an error naming it.
    pub fn from_iceberg_properties(properties: &HashMap<String, String>) -> Result<Self> {
        Self::from_pairs(properties.iter(), false)
    }

    /// Settings given by a user (a catalog's `[catalog.storage]` table in the server's TOML):
    /// like [`Self::from_iceberg_properties`], but a key no store knows is an error (a typo
    /// must not silently fall back to the environment).
    pub fn from_settings<'a>(
        settings: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Result<Self> {
        Self::from_pairs(settings, true)
    }

    fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a String, &'a String)>,
        strict: bool,
    ) -> Result<Self> {
        let mut pairs: Vec<(&String, &String)> = pairs.into_iter().collect();
        // Deterministic order: later keys of one meaning (s3.region, client.region) win
        // alphabetically, whatever the map's order.
        pairs.sort();
        let mut config = Self::default();
        for (key, value) in pairs {
            match setting(key, value, strict)? {
                Setting::S3(k, v) => config.s3.push((k, v)),
                Setting::Gcs(k, v) => config.gcs.push((k, v)),
                Setting::Azure(k, v) => config.azure.push((k, v)),
                Setting::Ignored => {}
            }
        }
        Ok(config)
    }

    /// These settings with `other`'s on top (a table's vended credentials over its catalog's
    /// settings).
    pub fn merged_with(&self, other: &StoreConfig) -> StoreConfig {
        let mut merged = self.clone();
        merged.s3.extend(other.s3.iter().cloned());
        merged.gcs.extend(other.gcs.iter().cloned());
        merged.azure.extend(other.azure.iter().cloned());
        if let Some(provider) = &other.s3_credentials {
            merged.s3_credentials = Some(Arc::clone(provider));
            merged.renewable_s3 = other.renewable_s3.clone();
        }
        merged
    }

    /// These settings with S3 credentials from `provider` (asked before each request is
    /// signed), whatever keys the settings hold.
    pub fn with_s3_credentials(mut self, provider: AwsCredentialProvider) -> Self {
        self.s3_credentials = Some(provider);
        self.renewable_s3 = None;
        self
    }

    /// [`Self::with_s3_credentials`] with a provider that replaces keys S3 refuses: a request
    /// refused because its keys expired or are invalid is sent once more with new ones.
    pub fn with_renewable_s3_credentials<P>(mut self, provider: Arc<P>) -> Self
    where
        P: CredentialProvider<Credential = AwsCredential> + RenewableCredentials + 'static,
    {
        self.s3_credentials = Some(Arc::clone(&provider) as AwsCredentialProvider);
        self.renewable_s3 = Some(provider as Arc<dyn RenewableCredentials>);
        self
    }

    /// The S3 credentials that are replaced when refused, if any.
    pub(super) fn renewable_s3(&self) -> Option<&Arc<dyn RenewableCredentials>> {
        self.renewable_s3.as_ref()
    }

    /// The S3 endpoint these settings name (`s3.endpoint`), if any.
    pub fn s3_endpoint(&self) -> Option<&str> {
        self.s3
            .iter()
            .rev()
            .find(|(k, _)| matches!(k, AmazonS3ConfigKey::Endpoint))
            .map(|(_, v)| v.as_str())
    }

    /// Builds the store of `kind` for the bucket (container) `authority` of a location with
    /// scheme `scheme`: environment first, then these settings, then Petrel's timeouts and
    /// retries.
    pub fn build(
        &self,
        kind: StoreKind,
        scheme: &str,
        authority: &str,
    ) -> Result<Arc<dyn ObjectStore>> {
        let describe = || format!("{scheme}://{authority}");
        let failed = |e: object_store::Error| {
            Error::InvalidArgument(format!(
                "cannot configure the object store for {}: {e}",
                describe()
            ))
        };
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: MAX_RETRIES,
            retry_timeout: RETRY_TIMEOUT,
        };
        let store: Arc<dyn ObjectStore> = match kind {
            StoreKind::S3 => {
                let mut builder = AmazonS3Builder::from_env()
                    .with_bucket_name(authority)
                    .with_config(
                        AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                        CONNECT_TIMEOUT,
                    )
                    .with_config(
                        AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                        REQUEST_TIMEOUT,
                    );
                for (key, value) in &self.s3 {
                    builder = builder.with_config(*key, value);
                }
                // An endpoint named as `http://...` (AWS_ENDPOINT_URL, s3.endpoint: a local
                // S3 server) is plain HTTP without AWS_ALLOW_HTTP / s3.allow-http too.
                if builder
                    .get_config_value(&AmazonS3ConfigKey::Endpoint)
                    .is_some_and(|e| e.starts_with("http://"))
                {
                    builder = builder.with_allow_http(true);
                }
                if let Some(provider) = &self.s3_credentials {
                    builder = builder.with_credentials(Arc::clone(provider));
                }
                Arc::new(builder.with_retry(retry).build().map_err(failed)?)
            }
            StoreKind::Gcs => {
                let mut builder = GoogleCloudStorageBuilder::from_env()
                    .with_bucket_name(authority)
                    .with_config(
                        GoogleConfigKey::Client(ClientConfigKey::ConnectTimeout),
                        CONNECT_TIMEOUT,
                    )
                    .with_config(
                        GoogleConfigKey::Client(ClientConfigKey::Timeout),
                        REQUEST_TIMEOUT,
                    );
                for (key, value) in &self.gcs {
                    builder = builder.with_config(*key, value);
                }
                Arc::new(builder.with_retry(retry).build().map_err(failed)?)
            }
            StoreKind::Azure => {
                // `container@account.dfs.core.windows.net` (Hadoop's abfss/wasbs form; wasbs
                // names the blob endpoint of the same account) or a bare container (fsspec).
                let url = match authority.split_once('@') {
                    Some((container, host)) => {
                        let host = host.replacen(".blob.", ".dfs.", 1);
                        format!("abfss://{container}@{host}")
                    }
                    None => format!("abfs://{authority}"),
                };
                let mut builder = MicrosoftAzureBuilder::from_env()
                    .with_url(url)
                    .with_config(
                        AzureConfigKey::Client(ClientConfigKey::ConnectTimeout),
                        CONNECT_TIMEOUT,
                    )
                    .with_config(
                        AzureConfigKey::Client(ClientConfigKey::Timeout),
                        REQUEST_TIMEOUT,
                    );
                for (key, value) in &self.azure {
                    builder = builder.with_config(*key, value);
                }
                Arc::new(builder.with_retry(retry).build().map_err(failed)?)
            }
        };
        Ok(store)
    }
}

/// A boolean property: `true`/`false` in any case.
fn boolean(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::InvalidArgument(format!(
            "storage setting {key} = {value:?}: expected true or false"
        ))),
    }
}

/// The meaning of one property.
fn setting(key: &str, value: &str, strict: bool) -> Result<Setting> {
    let v = value.to_string();
    let s3 = |k| Ok(Setting::S3(k, v.clone()));
    match key {
        // Iceberg's S3FileIO / PyIceberg names.
        "s3.access-key-id" => s3(AmazonS3ConfigKey::AccessKeyId),
        "s3.secret-access-key" => s3(AmazonS3ConfigKey::SecretAccessKey),
        "s3.session-token" => s3(AmazonS3ConfigKey::Token),
        "s3.region" | "client.region" => s3(AmazonS3ConfigKey::Region),
        "s3.endpoint" => s3(AmazonS3ConfigKey::Endpoint),
        "s3.path-style-access" => Ok(Setting::S3(
            AmazonS3ConfigKey::VirtualHostedStyleRequest,
            (!boolean(key, value)?).to_string(),
        )),
        // Petrel's: plain HTTP to the endpoint (a local S3 server). An `http://` endpoint
        // allows it by itself.
        "s3.allow-http" => Ok(Setting::S3(
            AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp),
            boolean(key, value)?.to_string(),
        )),
        "adls.account-name" => Ok(Setting::Azure(AzureConfigKey::AccountName, v)),
        "adls.account-key" => Ok(Setting::Azure(AzureConfigKey::AccessKey, v)),
        "adls.sas-token" => Ok(Setting::Azure(AzureConfigKey::SasKey, v)),
        "gcs.service-account-file" => Ok(Setting::Gcs(GoogleConfigKey::ServiceAccount, v)),
        "gcs.service-account-key" => Ok(Setting::Gcs(GoogleConfigKey::ServiceAccountKey, v)),
        _ => {
            // object_store's own names.
            let parsed = if key.starts_with("aws_") {
                key.parse().map(|k| Setting::S3(k, v.clone())).ok()
            } else if key.starts_with("google_") {
                key.parse().map(|k| Setting::Gcs(k, v.clone())).ok()
            } else if key.starts_with("azure_") {
                key.parse().map(|k| Setting::Azure(k, v.clone())).ok()
            } else {
                None
            };
            match parsed {
                Some(setting) => Ok(setting),
                None if strict => Err(Error::InvalidArgument(format!(
                    "unknown storage setting {key:?} (Iceberg FileIO names such as \
                     s3.endpoint, s3.access-key-id, s3.path-style-access, client.region, or \
                     object_store's aws_*/google_*/azure_* names)"
                ))),
                None => Ok(Setting::Ignored),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn iceberg_names_map_to_s3_settings() {
        let config = StoreConfig::from_iceberg_properties(&props(&[
            ("s3.access-key-id", "AK"),
            ("s3.secret-access-key", "SK"),
            ("s3.session-token", "TOK"),
            ("s3.endpoint", "http://127.0.0.1:9000"),
            ("s3.path-style-access", "true"),
            ("client.region", "eu-west-1"),
            ("warehouse", "s3://b/wh"),
            ("token", "not a storage key"),
        ]))
        .unwrap();
        let s3: HashMap<String, String> = config
            .s3
            .iter()
            .map(|(k, v)| (k.as_ref().to_string(), v.clone()))
            .collect();
        assert_eq!(s3["aws_access_key_id"], "AK");
        assert_eq!(s3["aws_secret_access_key"], "SK");
        assert_eq!(s3["aws_session_token"], "TOK");
        assert_eq!(s3["aws_endpoint"], "http://127.0.0.1:9000");
        assert_eq!(s3["aws_virtual_hosted_style_request"], "false");
        assert_eq!(s3["aws_region"], "eu-west-1");
        assert_eq!(s3.len(), 6);
        assert_eq!(config.s3_endpoint(), Some("http://127.0.0.1:9000"));
        // Secrets never print.
        assert!(!format!("{config:?}").contains("SK"));
    }

    #[test]
    fn bad_values_and_unknown_user_keys_are_refused_by_name() {
        let err =
            StoreConfig::from_iceberg_properties(&props(&[("s3.path-style-access", "maybe")]))
                .unwrap_err()
                .to_string();
        assert!(err.contains("s3.path-style-access"), "{err}");
        let typo = props(&[("s3.endpiont", "x")]);
        let err = StoreConfig::from_settings(&typo).unwrap_err().to_string();
        assert!(err.contains("s3.endpiont"), "{err}");
        // From a REST catalog the same key is just not a storage setting.
        assert!(StoreConfig::from_iceberg_properties(&typo).is_ok());
        // object_store's own names pass through.
        assert!(StoreConfig::from_settings(&props(&[("aws_skip_signature", "true")])).is_ok());
    }

    #[test]
    fn schemes_name_store_kinds() {
        for scheme in ["s3", "s3a", "s3n"] {
            assert_eq!(StoreKind::of_scheme(scheme), Some(StoreKind::S3));
        }
        assert_eq!(StoreKind::of_scheme("gs"), Some(StoreKind::Gcs));
        for scheme in ["abfss", "wasbs", "abfs", "wasb"] {
            assert_eq!(StoreKind::of_scheme(scheme), Some(StoreKind::Azure));
        }
        assert_eq!(StoreKind::of_scheme("file"), None);
        assert_eq!(StoreKind::of_scheme("hdfs"), None);
    }

    #[test]
    fn stores_build_from_settings_alone() {
        let config = StoreConfig::from_iceberg_properties(&props(&[
            ("s3.endpoint", "http://127.0.0.1:1"),
            ("s3.access-key-id", "a"),
            ("s3.secret-access-key", "b"),
            ("client.region", "us-east-1"),
        ]))
        .unwrap();
        let store = config.build(StoreKind::S3, "s3a", "bucket").unwrap();
        assert!(store.to_string().contains("bucket"), "{store}");
    }
}
