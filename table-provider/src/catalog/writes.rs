//! What both catalogs' writes share: exclusive creation of metadata files, the loaded table of
//! a file just written, and deleting a table's files.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::TableMetadata;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use super::metadata_file::{MetadataCache, ParsedMetadata, parse_table_metadata};
use super::{LoadedTable, TableIdent};
use crate::error::{Error, Result};
pub(super) use crate::io::put_new;
use crate::io::{LocationMap, TableIo, normalize_location, object_location};

/// Iceberg's `write.metadata.path`: where metadata files go instead of `<location>/metadata`.
const WRITE_METADATA_PATH: &str = "write.metadata.path";

/// The (logical) directory of a table's metadata files: `write.metadata.path` when set, else
/// `<location>/metadata` (Java's and PyIceberg's location providers).
pub(super) fn metadata_dir_location(metadata: &TableMetadata) -> String {
    match metadata.properties().get(WRITE_METADATA_PATH) {
        Some(dir) if !dir.trim().is_empty() => dir.trim_end_matches('/').to_string(),
        _ => format!("{}/metadata", metadata.location().trim_end_matches('/')),
    }
}

/// The file name (last segment) of a location, as written.
pub(super) fn file_name_of(location: &str) -> Result<String> {
    object_location(location)?
        .path
        .filename()
        .map(str::to_string)
        .ok_or_else(|| Error::InvalidArgument(format!("location {location:?} names no file")))
}

/// Deletes a file this process wrote for a commit that did not happen (best effort: a file
/// left behind is an orphan nobody references).
pub(super) async fn delete_quietly(store: &Arc<dyn ObjectStore>, path: &Path) {
    match store.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => tracing::warn!("cannot delete {path} of a failed commit: {e}"),
    }
}

/// The table as committed: `bytes` (the metadata file just written at `metadata_location`)
/// parsed as any reader will parse it, and remembered by the catalog's metadata cache.
pub(super) fn loaded_table(
    ident: &TableIdent,
    metadata_location: String,
    bytes: &[u8],
    io: TableIo,
    cache: &MetadataCache,
) -> Result<LoadedTable> {
    let table = ident.to_string();
    let (metadata, refs) = parse_table_metadata(&table, &metadata_location, bytes)?;
    let parsed = ParsedMetadata {
        metadata: Arc::new(metadata),
        refs: Arc::new(refs),
    };
    cache.insert(&metadata_location, parsed.clone());
    Ok(LoadedTable::new(
        ident.clone(),
        metadata_location,
        parsed.metadata,
        parsed.refs,
        io,
    ))
}

/// Deletes every object under `prefix` (a directory: matched segment by segment); returns how
/// many were deleted.
pub(super) async fn delete_tree(store: &Arc<dyn ObjectStore>, prefix: &Path) -> Result<usize> {
    let files: Vec<Path> = match store
        .list(Some(prefix))
        .map_ok(|meta| meta.location)
        .try_collect()
        .await
    {
        Ok(files) => files,
        Err(object_store::Error::NotFound { .. }) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let count = files.len();
    futures::stream::iter(files)
        .map(|path| async move {
            match store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(Error::from(e)),
            }
        })
        .buffer_unordered(8)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(count)
}

/// A warehouse given as a local directory (absolute or relative to the working directory) or
/// a URL, as a normalised location.
pub(super) fn warehouse_location(warehouse: &str) -> Result<String> {
    let absolute = if warehouse.starts_with('/') || warehouse.contains(':') {
        warehouse.to_string()
    } else {
        let cwd = std::env::current_dir().map_err(|e| {
            Error::InvalidArgument(format!("warehouse {warehouse}: no working directory: {e}"))
        })?;
        cwd.join(warehouse).to_string_lossy().into_owned()
    };
    Ok(normalize_location(&absolute))
}

/// The location map of a table whose current metadata file is at `metadata_location`: a table
/// whose files moved with its metadata (`<root>/metadata/<file>`, while the metadata's
/// `location` names somewhere else) is read under `<root>`; any other table as written.
pub(super) fn moved_table_locations(
    metadata_location: &str,
    metadata: &TableMetadata,
) -> LocationMap {
    let normalized = normalize_location(metadata_location);
    match normalized.rsplit_once('/') {
        Some((dir, _)) if dir.ends_with("/metadata") => {
            let root = &dir[..dir.len() - "/metadata".len()];
            LocationMap::moved(metadata.location(), root)
        }
        _ => LocationMap::identity(),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use object_store::local::LocalFileSystem;

    use super::*;

    #[tokio::test]
    async fn an_existing_object_is_ours_only_when_it_holds_our_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new());
        let path = Path::from_absolute_path(dir.path().join("v2.metadata.json")).unwrap();
        put_new(&store, &path, Bytes::from_static(b"ours"))
            .await
            .unwrap();
        // A retried create of the same bytes (the first attempt went through): success.
        put_new(&store, &path, Bytes::from_static(b"ours"))
            .await
            .unwrap();
        // Another writer's bytes: the race is lost.
        let lost = put_new(&store, &path, Bytes::from_static(b"theirs")).await;
        assert!(
            matches!(lost, Err(object_store::Error::AlreadyExists { .. })),
            "{lost:?}"
        );
        let kept = store.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(kept.as_ref(), b"ours");
    }
}
