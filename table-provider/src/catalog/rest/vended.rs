//! A REST catalog table's vended S3 credentials, refreshed before they expire.
//!
//! A `loadTable` answer asked for with `X-Iceberg-Access-Delegation: vended-credentials`
//! carries short-lived keys (`s3.access-key-id`, `s3.secret-access-key`, `s3.session-token`)
//! in its `config` or `storage-credentials`. [`VendedS3Credentials`] hands them to the
//! table's S3 store (an object_store credential provider, asked before each request is
//! signed) and fetches new ones by loading the table again when they are about to expire:
//! at `s3.session-token-expires-at-ms` minus a margin when the catalog says when, else after
//! [`DEFAULT_MAX_AGE`] (catalogs that vend STS credentials without an expiry, such as
//! rustberg, vend at least 15 minutes: STS's shortest session). A table load that brings
//! new keys hands them over too, so a table read often never needs a refresh of its own.
//!
//! Keys can expire sooner than that (a catalog vending keys shorter-lived than the max age
//! without saying so, keys revoked): the provider is also [`RenewableCredentials`], so the
//! table's S3 store (`io::renewing_store`) reports a request refused for its keys (S3
//! `ExpiredToken`, `InvalidAccessKeyId`, `InvalidToken`, `TokenRefreshRequired`); the keys it
//! was signed with are then due at once, fetched again by one table load shared by the
//! requests waiting for them, and the refused request is sent once more with the new keys. A
//! second refusal is the request's error, naming the table and the store.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use object_store::CredentialProvider;
use object_store::aws::AwsCredential;

use crate::error::{Error, Result};
use crate::io::RenewableCredentials;

/// The property keys of a vended S3 credential (Iceberg's S3FileIO names).
pub(super) const ACCESS_KEY_ID: &str = "s3.access-key-id";
pub(super) const SECRET_ACCESS_KEY: &str = "s3.secret-access-key";
pub(super) const SESSION_TOKEN: &str = "s3.session-token";
pub(super) const EXPIRES_AT_MS: &str = "s3.session-token-expires-at-ms";
/// The keys above: a table's storage properties without them say where its files are, not
/// who may read them.
pub(super) const CREDENTIAL_KEYS: [&str; 4] = [
    ACCESS_KEY_ID,
    SECRET_ACCESS_KEY,
    SESSION_TOKEN,
    EXPIRES_AT_MS,
];

/// How long credentials without an expiry are used before they are fetched again.
pub(super) const DEFAULT_MAX_AGE: Duration = Duration::from_secs(10 * 60);
/// The catalog property that overrides [`DEFAULT_MAX_AGE`] (milliseconds).
pub(super) const MAX_AGE_PROPERTY: &str = "petrel.vended-credentials-max-age-ms";
/// Credentials with an expiry are replaced this long before it (at most half their life).
const EXPIRY_MARGIN: Duration = Duration::from_secs(5 * 60);

/// Fetches a table's current storage properties (a table load with vended credentials).
pub(super) type Refresh = Arc<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<HashMap<String, String>>> + Send>> + Send + Sync,
>;

/// One set of vended keys and when to replace it.
#[derive(Clone)]
pub(super) struct Vended {
    credential: Arc<AwsCredential>,
    /// When the keys should be replaced.
    refresh_at: Instant,
}

impl Vended {
    /// The vended S3 keys among a table's storage properties (`None` when it has none), to be
    /// replaced after `max_age` unless the properties say when they expire.
    pub(super) fn from_properties(
        table: &str,
        properties: &HashMap<String, String>,
        max_age: Duration,
    ) -> Result<Option<Self>> {
        let (Some(key_id), Some(secret_key)) = (
            properties.get(ACCESS_KEY_ID),
            properties.get(SECRET_ACCESS_KEY),
        ) else {
            return Ok(None);
        };
        let now = Instant::now();
        let refresh_at = match properties.get(EXPIRES_AT_MS) {
            Some(ms) => {
                let ms: u64 = ms.trim().parse().map_err(|_| {
                    Error::InvalidArgument(format!(
                        "table {table}: the catalog vended {EXPIRES_AT_MS} = {ms:?}, not a \
                         number of milliseconds"
                    ))
                })?;
                let expires = UNIX_EPOCH + Duration::from_millis(ms);
                let left = expires
                    .duration_since(SystemTime::now())
                    .unwrap_or(Duration::ZERO);
                now + left.saturating_sub(EXPIRY_MARGIN.min(left / 2))
            }
            None => now + max_age,
        };
        Ok(Some(Self {
            credential: Arc::new(AwsCredential {
                key_id: key_id.clone(),
                secret_key: secret_key.clone(),
                token: properties.get(SESSION_TOKEN).cloned(),
            }),
            refresh_at,
        }))
    }
}

/// The keys in use, and which keys they are (one more each time they are replaced).
struct Current {
    vended: Vended,
    generation: u64,
}

/// The credential provider of one table's S3 store.
pub(super) struct VendedS3Credentials {
    table: String,
    catalog: String,
    current: Mutex<Current>,
    /// Held while fetching, so that concurrent requests wait for one refresh.
    refreshing: tokio::sync::Mutex<()>,
    refresh: Refresh,
    max_age: Duration,
    refreshes: std::sync::atomic::AtomicU64,
}

impl fmt::Debug for VendedS3Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VendedS3Credentials")
            .field("table", &self.table)
            .field("catalog", &self.catalog)
            .finish_non_exhaustive()
    }
}

impl VendedS3Credentials {
    pub(super) fn new(
        catalog: &str,
        table: &str,
        vended: Vended,
        max_age: Duration,
        refresh: Refresh,
    ) -> Self {
        Self {
            table: table.to_string(),
            catalog: catalog.to_string(),
            current: Mutex::new(Current {
                vended,
                generation: 0,
            }),
            refreshing: tokio::sync::Mutex::new(()),
            refresh,
            max_age,
            refreshes: Default::default(),
        }
    }

    /// Takes keys vended by a newer table load.
    pub(super) fn offer(&self, vended: Vended) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.vended = vended;
        current.generation += 1;
    }

    /// How often the keys were fetched again: about to expire, or refused by the store.
    pub(super) fn refreshes(&self) -> u64 {
        self.refreshes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The current keys when they need no refresh yet.
    fn fresh(&self) -> Option<Arc<AwsCredential>> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        (Instant::now() < current.vended.refresh_at).then(|| Arc::clone(&current.vended.credential))
    }

    async fn refreshed(&self) -> Result<Arc<AwsCredential>> {
        let _one_at_a_time = self.refreshing.lock().await;
        // Another request may have refreshed while this one waited.
        if let Some(credential) = self.fresh() {
            return Ok(credential);
        }
        let properties = (self.refresh)().await?;
        let vended =
            Vended::from_properties(&self.table, &properties, self.max_age)?.ok_or_else(|| {
                Error::CatalogService {
                    catalog: self.catalog.clone(),
                    status: None,
                    message: format!(
                        "table {}: its vended S3 credentials expire and reloading the table vended \
                     none",
                        self.table
                    ),
                }
            })?;
        let credential = Arc::clone(&vended.credential);
        self.offer(vended);
        self.refreshes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(credential)
    }
}

impl RenewableCredentials for VendedS3Credentials {
    fn generation(&self) -> u64 {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .generation
    }

    fn refused(&self, generation: u64) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        // Keys replaced since the request was signed are not the ones refused.
        if current.generation == generation {
            current.vended.refresh_at = Instant::now();
        }
    }

    fn holder(&self) -> String {
        format!("table {} of REST catalog {}", self.table, self.catalog)
    }
}

#[async_trait]
impl CredentialProvider for VendedS3Credentials {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        if let Some(credential) = self.fresh() {
            return Ok(credential);
        }
        self.refreshed()
            .await
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: format!(
                    "REST catalog {}: refreshing the vended credentials of table {}: {e}",
                    self.catalog, self.table
                )
                .into(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, String)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    fn provider(vended: Vended, answers: Vec<HashMap<String, String>>) -> VendedS3Credentials {
        let answers = Arc::new(Mutex::new(answers));
        let refresh: Refresh = Arc::new(move || {
            let answers = Arc::clone(&answers);
            Box::pin(async move { Ok(answers.lock().unwrap().remove(0)) })
        });
        VendedS3Credentials::new("c", "ns.t", vended, Duration::from_secs(60), refresh)
    }

    fn keys(id: &str) -> Vec<(&'static str, String)> {
        vec![
            (ACCESS_KEY_ID, id.to_string()),
            (SECRET_ACCESS_KEY, "secret".to_string()),
            (SESSION_TOKEN, "token".to_string()),
        ]
    }

    fn ms_from_now(offset: i64) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        (now + offset).to_string()
    }

    #[tokio::test]
    async fn keys_are_used_until_they_are_about_to_expire_then_fetched_again() {
        let mut first = keys("first");
        first.push((EXPIRES_AT_MS, ms_from_now(3_600_000)));
        let vended = Vended::from_properties("ns.t", &props(&first), DEFAULT_MAX_AGE)
            .unwrap()
            .unwrap();
        let p = provider(vended, vec![props(&keys("second"))]);
        assert_eq!(p.get_credential().await.unwrap().key_id, "first");
        assert_eq!(
            p.get_credential().await.unwrap().token.as_deref(),
            Some("token")
        );
        assert_eq!(p.refreshes(), 0);

        // Expiring in 1 s: due after half of that (the margin is at most half the time left).
        let mut expiring = keys("expiring");
        expiring.push((EXPIRES_AT_MS, ms_from_now(1_000)));
        let vended = Vended::from_properties("ns.t", &props(&expiring), DEFAULT_MAX_AGE)
            .unwrap()
            .unwrap();
        p.offer(vended);
        assert_eq!(p.get_credential().await.unwrap().key_id, "expiring");
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(p.get_credential().await.unwrap().key_id, "second");
        assert_eq!(p.refreshes(), 1);
        // The refreshed keys (no expiry) last the max age.
        assert_eq!(p.get_credential().await.unwrap().key_id, "second");
        assert_eq!(p.refreshes(), 1);
    }

    #[test]
    fn an_expiry_already_past_means_refresh_at_once_and_a_bad_one_is_named() {
        let mut past = keys("k");
        past.push((EXPIRES_AT_MS, ms_from_now(-10_000)));
        let vended = Vended::from_properties("ns.t", &props(&past), DEFAULT_MAX_AGE)
            .unwrap()
            .unwrap();
        assert!(vended.refresh_at <= Instant::now());
        let mut bad = keys("k");
        bad.push((EXPIRES_AT_MS, "soon".to_string()));
        let err = Vended::from_properties("ns.t", &props(&bad), DEFAULT_MAX_AGE)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(EXPIRES_AT_MS) && err.contains("ns.t"), "{err}");
        assert!(
            Vended::from_properties("ns.t", &HashMap::new(), DEFAULT_MAX_AGE)
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn refused_keys_are_fetched_again_once_and_older_refusals_are_ignored() {
        let vended = Vended::from_properties("ns.t", &props(&keys("first")), DEFAULT_MAX_AGE)
            .unwrap()
            .unwrap();
        let p = provider(vended, vec![props(&keys("second")), props(&keys("third"))]);
        let refused = p.generation();
        assert_eq!(p.get_credential().await.unwrap().key_id, "first");
        p.refused(refused);
        // Two requests refused with the same keys: one fetch.
        p.refused(refused);
        assert_eq!(p.get_credential().await.unwrap().key_id, "second");
        assert_eq!(p.refreshes(), 1);
        // A refusal of keys replaced since changes nothing.
        p.refused(refused);
        assert_eq!(p.get_credential().await.unwrap().key_id, "second");
        assert_eq!(p.refreshes(), 1);
        assert_ne!(p.generation(), refused);
        assert_eq!(p.holder(), "table ns.t of REST catalog c");
    }

    #[tokio::test]
    async fn a_reload_without_keys_is_an_error_naming_the_table_and_catalog() {
        let mut vended = Vended::from_properties("ns.t", &props(&keys("k")), DEFAULT_MAX_AGE)
            .unwrap()
            .unwrap();
        vended.refresh_at = Instant::now();
        let p = provider(vended, vec![HashMap::new()]);
        let err = p.get_credential().await.unwrap_err().to_string();
        assert!(
            err.contains("REST catalog c") && err.contains("ns.t"),
            "{err}"
        );
    }
}
