//! Object storage access: one IO stack (object_store) for metadata, manifests and data.
//!
//! [`TableIo`] reads a table's files by their *logical* path (as the metadata wrote it),
//! mapping it to the physical location through the table's [`LocationMap`]. Plans keep
//! logical paths; only this module knows where bytes really are.
//!
//! Each store is wrapped: its requests are counted (`request_counts`), and an S3 store signed
//! with renewable credentials (a REST catalog's vended keys) sends a request refused for
//! expired or invalid keys once more with new ones (`renewing_store`). Local files answer
//! existence checks and small whole-file reads in place, not on the blocking pool
//! (`local_store`).

mod local_store;
mod location;
mod renewing_store;
mod request_counts;
mod store_config;

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use datafusion::execution::object_store::ObjectStoreUrl;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

pub use location::{LocationMap, ObjectLocation, child_path, normalize_location, object_location};
pub use renewing_store::{REFUSED_CREDENTIALS, RenewableCredentials, refused_credentials};
pub use request_counts::{CountedStore, RequestCounts, object_store_requests};
pub use store_config::{MAX_RETRIES, RETRY_TIMEOUT, StoreConfig, StoreKind};

use crate::error::{Error, Result};
use local_store::InlineLocalStore;
use renewing_store::RenewingStore;
use request_counts::CountingStore;

/// How often [`TableIo::create`] tries a create that failed in transit.
pub const CREATE_ATTEMPTS: u32 = 3;

/// An object-store failure on the object at `location`, naming it: the store's own message
/// for a dropped connection or a cut response body ("request or response body error") names
/// neither the bucket nor the path. Only the message changes: the kind (not found, already
/// exists, a store failure) still decides what callers and clients make of it.
pub(crate) fn store_failure(location: &str, e: object_store::Error) -> Error {
    Error::ObjectStore(match e {
        object_store::Error::Generic { store, source } => object_store::Error::Generic {
            store,
            source: format!("{location}: {source}").into(),
        },
        other => other,
    })
}

/// Writes `bytes` at `path` only if nothing is there (an atomic exclusive create: the local
/// store hard-links a staged file; object stores use a conditional put).
///
/// An object store retries a request that got a 5xx answer, and the first attempt may have
/// been carried out: the retry then finds "already exists" although the object is ours. Taking
/// that for a lost race would make the commit loop apply the same change a second time on top
/// of itself (an append twice). So on "already exists" the object is read back: the very same
/// bytes (metadata files, manifests and manifest lists hold fresh ids and timestamps, so no
/// other writer makes them) mean this create succeeded. The catalogs write metadata files with
/// it, [`TableIo::create`] everything else a commit writes.
pub async fn put_new(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
    bytes: Bytes,
) -> object_store::Result<()> {
    let options = object_store::PutOptions {
        mode: object_store::PutMode::Create,
        ..object_store::PutOptions::default()
    };
    match store
        .put_opts(path, object_store::PutPayload::from(bytes.clone()), options)
        .await
    {
        Ok(_) => Ok(()),
        Err(exists @ object_store::Error::AlreadyExists { .. }) => match store.get(path).await {
            Ok(existing) => match existing.bytes().await {
                Ok(existing) if existing == bytes => Ok(()),
                _ => Err(exists),
            },
            Err(_) => Err(exists),
        },
        Err(e) => Err(e),
    }
}

/// Finds the object store serving a location: local files, and S3 (`s3://`, `s3a://`,
/// `s3n://`), GCS (`gs://`) and Azure (`abfss://`, `wasbs://`) buckets configured by one
/// [`StoreConfig`]. One store per bucket is built on first use and kept (its connection pool
/// with it); clones of a registry share them.
#[derive(Clone)]
pub struct StoreRegistry {
    local: Arc<dyn ObjectStore>,
    config: Arc<StoreConfig>,
    buckets: Arc<Mutex<BucketStores>>,
}

/// The stores built so far, by store kind and bucket.
type BucketStores = HashMap<(StoreKind, String), Arc<dyn ObjectStore>>;

impl fmt::Debug for StoreRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreRegistry")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Default for StoreRegistry {
    /// Local files, and object stores configured by the environment alone.
    fn default() -> Self {
        Self::new(StoreConfig::from_env())
    }
}

impl StoreRegistry {
    /// Stores configured by `config` (over the environment).
    pub fn new(config: StoreConfig) -> Self {
        Self {
            local: CountingStore::wrap(Arc::new(InlineLocalStore::new()), CountedStore::Local),
            config: Arc::new(config),
            buckets: Arc::default(),
        }
    }

    /// Stores configured by Iceberg FileIO properties (a REST catalog's `config`, a table's
    /// vended credentials): see [`StoreConfig::from_iceberg_properties`].
    pub fn with_properties(properties: &HashMap<String, String>) -> Result<Self> {
        Ok(Self::new(StoreConfig::from_iceberg_properties(properties)?))
    }

    /// The settings the stores are built with.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// The store, its DataFusion URL and the object path of a location (see
    /// [`object_location`]: the path keeps every character of the location).
    ///
    /// The URL is `scheme://bucket` with the scheme's canonical spelling (`s3a://b` and
    /// `s3://b` are one store); DataFusion's scans find the store under it once
    /// [`Self::register_with`] has run.
    pub fn resolve(&self, location: &str) -> Result<(Arc<dyn ObjectStore>, ObjectStoreUrl, Path)> {
        let ObjectLocation {
            scheme,
            authority,
            path,
        } = object_location(location)?;
        if scheme == "file" {
            return Ok((
                Arc::clone(&self.local),
                ObjectStoreUrl::local_filesystem(),
                path,
            ));
        }
        let Some(kind) = StoreKind::of_scheme(&scheme) else {
            return Err(Error::InvalidArgument(format!(
                "no object store serves scheme {scheme:?} (location {location}); \
                 supported: file, s3, s3a, s3n, gs, abfs, abfss, wasb, wasbs"
            )));
        };
        let url = store_url(kind, &authority, location)?;
        let store = self.bucket_store(kind, &scheme, &authority)?;
        Ok((store, url, path))
    }

    /// The cached store of one bucket, built on first use.
    fn bucket_store(
        &self,
        kind: StoreKind,
        scheme: &str,
        authority: &str,
    ) -> Result<Arc<dyn ObjectStore>> {
        let key = (kind, authority.to_string());
        // A panic while the map was held cannot leave it half-updated: take it as it is.
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(store) = buckets.get(&key) {
            return Ok(Arc::clone(store));
        }
        let store = CountingStore::wrap(
            self.config.build(kind, scheme, authority)?,
            CountedStore::Remote,
        );
        // Outside the counting: a request sent once more counts twice.
        let store = match (kind, self.config.renewable_s3()) {
            (StoreKind::S3, Some(credentials)) => RenewingStore::wrap(
                store,
                Arc::clone(credentials),
                self.store_name(scheme, authority),
            ),
            _ => store,
        };
        buckets.insert(key, Arc::clone(&store));
        Ok(store)
    }

    /// Registers the store of `location` with a DataFusion runtime, so that scans planned
    /// with its URL find it.
    pub fn register_with(
        &self,
        runtime: &datafusion::execution::runtime_env::RuntimeEnv,
        location: &str,
    ) -> Result<ObjectStoreUrl> {
        let (store, url, _) = self.resolve(location)?;
        if url != ObjectStoreUrl::local_filesystem() {
            runtime.register_object_store(url.as_ref(), store);
        }
        Ok(url)
    }

    /// Where a location's store is, for error messages: `s3://bucket` and the endpoint when
    /// one is configured.
    pub fn describe(&self, location: &str) -> String {
        let Ok(ObjectLocation {
            scheme, authority, ..
        }) = object_location(location)
        else {
            return location.to_string();
        };
        self.store_name(&scheme, &authority)
    }

    /// `scheme://authority`, and the endpoint of an S3 store when one is configured.
    fn store_name(&self, scheme: &str, authority: &str) -> String {
        match (StoreKind::of_scheme(scheme), self.endpoint()) {
            (Some(StoreKind::S3), Some(endpoint)) => {
                format!("{scheme}://{authority} at {endpoint}")
            }
            _ => format!("{scheme}://{authority}"),
        }
    }

    /// The S3 endpoint: the configured one, else `AWS_ENDPOINT_URL` / `AWS_ENDPOINT`.
    fn endpoint(&self) -> Option<String> {
        self.config
            .s3_endpoint()
            .map(str::to_string)
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT").ok())
    }
}

/// The DataFusion URL of a bucket: `scheme://host` with the canonical scheme of its kind.
/// Azure's `container@account.dfs.core.windows.net` becomes the host
/// `container.account.dfs.core.windows.net` (a URL's user part is not part of DataFusion's
/// registry key).
fn store_url(kind: StoreKind, authority: &str, location: &str) -> Result<ObjectStoreUrl> {
    let url = match kind {
        StoreKind::S3 => format!("s3://{authority}"),
        StoreKind::Gcs => format!("gs://{authority}"),
        StoreKind::Azure => format!("abfss://{}", authority.replacen('@', ".", 1)),
    };
    ObjectStoreUrl::parse(&url).map_err(|e| {
        Error::InvalidArgument(format!(
            "location {location}: bucket {authority:?} is not a valid host name: {e}"
        ))
    })
}

/// Reads one table's files by logical path.
#[derive(Debug, Clone)]
pub struct TableIo {
    stores: StoreRegistry,
    locations: LocationMap,
}

impl TableIo {
    /// IO for a table whose files are mapped through `locations`.
    pub fn new(stores: StoreRegistry, locations: LocationMap) -> Self {
        Self { stores, locations }
    }

    /// The location map of this table.
    pub fn locations(&self) -> &LocationMap {
        &self.locations
    }

    /// The store registry behind this table.
    pub fn stores(&self) -> &StoreRegistry {
        &self.stores
    }

    /// Store, store URL and physical object path of a logical path.
    pub fn resolve(&self, logical: &str) -> Result<(Arc<dyn ObjectStore>, ObjectStoreUrl, Path)> {
        self.stores.resolve(&self.locations.resolve(logical))
    }

    /// Reads a whole file.
    pub async fn read(&self, logical: &str) -> Result<Bytes> {
        let (store, _, path) = self.resolve(logical)?;
        let failed = |e| store_failure(logical, e);
        store
            .get(&path)
            .await
            .map_err(failed)?
            .bytes()
            .await
            .map_err(failed)
    }

    /// Writes a whole new file (replacing nothing: a file of that name must not exist).
    ///
    /// The files written this way (manifests, manifest lists, deletion vectors) have fresh,
    /// unique names, so a create whose outcome was lost may be repeated. object_store does not
    /// retry a conditional put once it was sent (a timeout, a cut answer), and when it does
    /// (a dropped connection) the repeat may find the first attempt's object. So a create that
    /// failed in transit is tried again (at most [`CREATE_ATTEMPTS`] in all, while within
    /// [`RETRY_TIMEOUT`]), each attempt a [`put_new`] ("already exists" with exactly these
    /// bytes there is this create's own success).
    pub async fn create(&self, logical: &str, bytes: Bytes) -> Result<()> {
        let (store, _, path) = self.resolve(logical)?;
        let started = std::time::Instant::now();
        let mut attempt = 1;
        loop {
            match put_new(&store, &path, bytes.clone()).await {
                Ok(()) => return Ok(()),
                Err(e @ object_store::Error::Generic { .. })
                    if attempt < CREATE_ATTEMPTS && started.elapsed() < RETRY_TIMEOUT =>
                {
                    tracing::warn!("creating {path}: {e}; trying again");
                    tokio::time::sleep(std::time::Duration::from_millis(100 << attempt)).await;
                    attempt += 1;
                }
                Err(e) => return Err(store_failure(logical, e)),
            }
        }
    }

    /// Deletes a file (a missing file is not an error).
    pub async fn delete(&self, logical: &str) -> Result<()> {
        let (store, _, path) = self.resolve(logical)?;
        match store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_failure(logical, e)),
        }
    }

    /// Reads a byte range of a file.
    pub async fn read_range(&self, logical: &str, range: Range<u64>) -> Result<Bytes> {
        let (store, _, path) = self.resolve(logical)?;
        store
            .get_range(&path, range)
            .await
            .map_err(|e| store_failure(logical, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_failures_name_the_object_and_keep_their_kind() {
        let location = "s3://faults/warehouse/db/c/metadata/version-hint.text";
        let cut = object_store::Error::Generic {
            store: "S3",
            source: "HTTP error: request or response body error".into(),
        };
        let named = store_failure(location, cut);
        assert!(matches!(
            &named,
            Error::ObjectStore(object_store::Error::Generic { store: "S3", .. })
        ));
        assert_eq!(
            named.to_string(),
            format!(
                "object store: Generic S3 error: {location}: HTTP error: request or response body error"
            )
        );
        let missing = object_store::Error::NotFound {
            path: "warehouse/x".into(),
            source: "gone".into(),
        };
        assert!(matches!(
            store_failure(location, missing),
            Error::ObjectStore(object_store::Error::NotFound { .. })
        ));
    }
}
