//! What a row-level write needs to know about the data files it changes, from the snapshot it
//! read: each file's partition (the delete files written for it go in the same partition), and
//! the file-scoped deletes it already has (a new deletion vector must absorb them: at most one
//! per data file).

use std::collections::{HashMap, HashSet};

use iceberg::spec::{DataContentType, DataFile, DataFileFormat, ManifestContentType, Struct};

use crate::catalog::LoadedTable;
use crate::error::{Error, Result};
use crate::io::normalize_location;
use crate::plan::ManifestCache;

/// A data file a row-level write changes.
#[derive(Debug, Clone)]
pub(super) struct TargetFile {
    /// Its partition spec.
    pub spec_id: i32,
    /// Its partition tuple.
    pub partition: Struct,
}

/// A live delete file that applies to exactly one target data file.
#[derive(Debug, Clone)]
pub(super) struct FileScopedDelete {
    /// The delete file.
    pub file: DataFile,
    /// Whether it is a deletion vector (else a position-delete file naming only this file).
    pub deletion_vector: bool,
}

/// The target data files of a row-level write and their file-scoped deletes.
#[derive(Debug, Default)]
pub(super) struct Targets {
    /// By location as the manifests name it.
    pub files: HashMap<String, TargetFile>,
    /// By the data file's location.
    pub deletes: HashMap<String, Vec<FileScopedDelete>>,
}

/// Reads the manifests of `table`'s snapshot `snapshot_id` for the data files `paths`, through
/// `cache` (the scan that found the rows has just parsed them).
pub(super) async fn load_targets(
    table: &LoadedTable,
    cache: &ManifestCache,
    snapshot_id: i64,
    paths: &HashSet<String>,
) -> Result<Targets> {
    let name = table.ident().to_string();
    let metadata = table.metadata();
    let snapshot = metadata
        .snapshot_by_id(snapshot_id)
        .ok_or_else(|| Error::NotFound(format!("table {name}: snapshot {snapshot_id}")))?;
    let list = cache
        .manifest_list(
            table.io(),
            &name,
            snapshot.manifest_list(),
            metadata.format_version(),
        )
        .await?;
    let wanted: HashSet<String> = paths.iter().map(|p| normalize_location(p)).collect();
    let mut targets = Targets::default();
    for manifest_file in list.entries() {
        if !manifest_file.has_added_files() && !manifest_file.has_existing_files() {
            continue;
        }
        let manifest = cache
            .manifest(table.io(), &name, &manifest_file.manifest_path)
            .await?;
        let spec_id = manifest.metadata().partition_spec().spec_id();
        let deletes = matches!(manifest.metadata().content(), ManifestContentType::Deletes);
        for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
            let file = entry.data_file();
            if !deletes {
                if wanted.contains(&normalize_location(file.file_path())) {
                    targets.files.insert(
                        file.file_path().to_string(),
                        TargetFile {
                            spec_id,
                            partition: file.partition().clone(),
                        },
                    );
                }
                continue;
            }
            if file.content_type() != DataContentType::PositionDeletes {
                continue;
            }
            let Some(referenced) = file.referenced_data_file() else {
                continue;
            };
            if wanted.contains(&normalize_location(&referenced)) {
                targets
                    .deletes
                    .entry(normalize_location(&referenced))
                    .or_default()
                    .push(FileScopedDelete {
                        deletion_vector: file.file_format() == DataFileFormat::Puffin,
                        file: file.clone(),
                    });
            }
        }
    }
    if let Some(missing) = paths
        .iter()
        .find(|p| !targets.files.contains_key(p.as_str()))
    {
        return Err(Error::InvalidArgument(format!(
            "table {name}: data file {missing} is not in snapshot {snapshot_id}"
        )));
    }
    Ok(targets)
}
