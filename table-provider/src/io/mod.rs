//! Object storage access: one IO stack (object_store) for metadata, manifests and data.
//!
//! [`TableIo`] reads a table's files by their *logical* path (as the metadata wrote it),
//! mapping it to the physical location through the table's [`LocationMap`]. Plans keep
//! logical paths; only this module knows where bytes really are.

mod location;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::execution::object_store::ObjectStoreUrl;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

pub use location::{LocationMap, ObjectLocation, child_path, normalize_location, object_location};

use crate::error::{Error, Result};

/// Finds the object store serving a URL. Today: local files; S3/GCS/Azure plug in here.
#[derive(Clone)]
pub struct StoreRegistry {
    local: Arc<dyn ObjectStore>,
}

impl fmt::Debug for StoreRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreRegistry").finish_non_exhaustive()
    }
}

impl Default for StoreRegistry {
    fn default() -> Self {
        Self {
            local: Arc::new(LocalFileSystem::new()),
        }
    }
}

impl StoreRegistry {
    /// The store, its DataFusion URL and the object path of a location (see
    /// [`object_location`]: the path keeps every character of the location).
    pub fn resolve(&self, location: &str) -> Result<(Arc<dyn ObjectStore>, ObjectStoreUrl, Path)> {
        let ObjectLocation { scheme, path, .. } = object_location(location)?;
        match scheme.as_str() {
            "file" => Ok((
                Arc::clone(&self.local),
                ObjectStoreUrl::local_filesystem(),
                path,
            )),
            other => Err(Error::InvalidArgument(format!(
                "no object store is configured for scheme {other:?} (location {location})"
            ))),
        }
    }
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
        Ok(store.get(&path).await?.bytes().await?)
    }

    /// Writes a whole new file (replacing nothing: a file of that name must not exist).
    pub async fn create(&self, logical: &str, bytes: Bytes) -> Result<()> {
        let (store, _, path) = self.resolve(logical)?;
        let opts = object_store::PutOptions::from(object_store::PutMode::Create);
        store.put_opts(&path, bytes.into(), opts).await?;
        Ok(())
    }

    /// Deletes a file (a missing file is not an error).
    pub async fn delete(&self, logical: &str) -> Result<()> {
        let (store, _, path) = self.resolve(logical)?;
        match store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads a byte range of a file.
    pub async fn read_range(&self, logical: &str, range: Range<u64>) -> Result<Bytes> {
        let (store, _, path) = self.resolve(logical)?;
        Ok(store.get_range(&path, range).await?)
    }
}
