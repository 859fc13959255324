//! Removing files from a table in a new snapshot: which files go, and the manifests rewritten
//! to say so.
//!
//! Iceberg removes a file by rewriting the manifest that lists it: the file's entry becomes
//! `DELETED` (status 2, stamped with the new snapshot's id, its sequence numbers kept), every
//! other live entry of that manifest becomes `EXISTING` with its sequence numbers and snapshot
//! id kept, and entries deleted by earlier snapshots are dropped. Manifests that list none of
//! the removed files are carried over unchanged. This is what Java's `ManifestFilterManager`
//! does for `ReplacePartitions`, `OverwriteFiles` and `RowDelta`.
//!
//! In format 3, data files whose `first_row_id` a reader would inherit from their manifest get
//! it written explicitly, since the rewritten manifest starts a new row-id range: row ids never
//! change.

use std::collections::HashSet;
use std::sync::Arc;

use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, Manifest, ManifestContentType, ManifestEntry,
    ManifestFile, ManifestStatus, ManifestWriterBuilder, Schema, Struct, StructType,
    deserialize_data_file_from_json, serialize_data_file_to_json,
};
use uuid::Uuid;

use super::avro_out::MemoryOutput;
use super::summary::{content_size, is_deletion_vector};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// Which live files of the current snapshot a new snapshot removes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Removal {
    /// None (an append).
    #[default]
    Nothing,
    /// Every data and delete file (`INSERT OVERWRITE` of an unpartitioned table).
    Everything,
    /// The data and delete files of these partitions, each named by its spec id and partition
    /// tuple (a dynamic `INSERT OVERWRITE`: the partitions the new files are in).
    Partitions(HashSet<(i32, Struct)>),
    /// These data or delete files (a row-level operation: the deletion vectors and
    /// position-delete files it replaces with merged ones, the data files copy-on-write
    /// rewrites). A deletion vector is named with its blob's offset: the other vectors of its
    /// Puffin file stay.
    Files(HashSet<FileKey>),
}

/// A live file of a table as a removal names it: its location exactly as the manifests record
/// it and, for a deletion vector (one blob of a Puffin file that may hold the vectors of other
/// data files), its blob's `content_offset`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileKey {
    /// The file's location.
    pub path: String,
    /// The blob's offset for a deletion vector; `None` for any other file.
    pub content_offset: Option<i64>,
}

impl FileKey {
    /// The key of `file` (with its blob offset if it is a deletion vector).
    pub fn of(file: &DataFile) -> Self {
        Self {
            path: file.file_path().to_string(),
            content_offset: if is_deletion_vector(file) {
                file.content_offset()
            } else {
                None
            },
        }
    }

    /// The key of a data file or position-delete file at `path`.
    pub fn path(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            content_offset: None,
        }
    }
}

impl Removal {
    /// Whether `file` (of partition spec `spec_id`) goes.
    pub fn removes(&self, spec_id: i32, file: &DataFile) -> bool {
        match self {
            Self::Nothing => false,
            Self::Everything => true,
            Self::Partitions(set) => set.contains(&(spec_id, file.partition().clone())),
            Self::Files(set) => set.contains(&FileKey::of(file)),
        }
    }

    /// Whether no file can go.
    pub fn is_nothing(&self) -> bool {
        match self {
            Self::Nothing => true,
            Self::Everything => false,
            Self::Partitions(set) => set.is_empty(),
            Self::Files(set) => set.is_empty(),
        }
    }
}

/// A file a snapshot removed, for the summary.
#[derive(Debug, Clone)]
pub struct RemovedFile {
    /// What kind of file.
    pub content: DataContentType,
    /// Its rows (data files) or deletes (delete files).
    pub record_count: u64,
    /// Its size as summaries count it (a deletion vector's blob size, see
    /// [`super::summary::content_size`]).
    pub file_size_in_bytes: u64,
    /// Whether it is a deletion vector (a position delete in a Puffin file).
    pub deletion_vector: bool,
    /// Its spec id and partition.
    pub partition: (i32, Struct),
}

/// The current snapshot's manifests after a removal.
#[derive(Debug, Default)]
pub struct FilteredManifests {
    /// The manifests the new snapshot lists (carried or rewritten), in the old order.
    pub manifests: Vec<ManifestFile>,
    /// Manifests written for this attempt (to delete if it fails).
    pub written: Vec<String>,
    /// The files removed.
    pub removed: Vec<RemovedFile>,
}

/// Applies `removal` to `current` (the manifests of the snapshot the new one replaces), writing
/// rewritten manifests under the table's metadata directory for snapshot `snapshot_id`.
pub async fn filter_manifests(
    base: &LoadedTable,
    current: Vec<ManifestFile>,
    removal: &Removal,
    snapshot_id: i64,
) -> Result<FilteredManifests> {
    let mut out = FilteredManifests::default();
    if removal.is_nothing() {
        out.manifests = current;
        return Ok(out);
    }
    let table = base.ident().to_string();
    let version = base.metadata().format_version();
    let mut removed_keys = Vec::new();
    for manifest_file in current {
        let may_hold = manifest_file.has_added_files() || manifest_file.has_existing_files();
        if !may_hold || !partition_may_match(&manifest_file, removal) {
            out.manifests.push(manifest_file);
            continue;
        }
        let path = manifest_file.manifest_path.clone();
        let bytes = base
            .io()
            .read(&path)
            .await
            .map_err(|e| Error::corrupt(&table, "manifest", &path, e))?;
        let manifest = crate::spec::parse_manifest(&bytes)
            .map_err(|e| Error::corrupt(&table, "manifest", &path, e))?;
        let spec_id = manifest.metadata().partition_spec().spec_id();
        let entries = live_entries(&manifest, &manifest_file, version)?;
        if !entries
            .iter()
            .any(|e| removal.removes(spec_id, &e.data_file))
        {
            out.manifests.push(manifest_file);
            continue;
        }
        let location = format!(
            "{}/metadata/{}-m-filtered.avro",
            base.metadata().location(),
            Uuid::new_v4()
        );
        let output = MemoryOutput::new(location.clone());
        let builder = ManifestWriterBuilder::new(
            output.output_file(),
            Some(snapshot_id),
            Arc::clone(manifest.metadata().schema()),
            manifest.metadata().partition_spec().clone(),
        );
        let deletes = matches!(manifest.metadata().content(), ManifestContentType::Deletes);
        let mut writer = match (version, deletes) {
            (FormatVersion::V3, false) => builder.build_v3_data(),
            (FormatVersion::V3, true) => builder.build_v3_deletes(),
            (_, false) => builder.build_v2_data(),
            (_, true) => builder.build_v2_deletes(),
        };
        for entry in entries {
            let sequence_number = entry
                .sequence_number
                .unwrap_or(manifest_file.sequence_number);
            let file_sequence_number = entry.file_sequence_number;
            if removal.removes(spec_id, &entry.data_file) {
                removed_keys.push(FileKey::of(&entry.data_file));
                out.removed.push(RemovedFile {
                    content: entry.data_file.content_type(),
                    record_count: entry.data_file.record_count(),
                    file_size_in_bytes: content_size(&entry.data_file),
                    deletion_vector: is_deletion_vector(&entry.data_file),
                    partition: (spec_id, entry.data_file.partition().clone()),
                });
                writer.add_delete_file(entry.data_file, sequence_number, file_sequence_number)?;
            } else {
                let added_by = entry.snapshot_id.unwrap_or(manifest_file.added_snapshot_id);
                writer.add_existing_file(
                    entry.data_file,
                    added_by,
                    sequence_number,
                    file_sequence_number,
                )?;
            }
        }
        let rewritten = writer.write_manifest_file().await?;
        base.io().create(&location, output.bytes().await?).await?;
        out.written.push(location);
        out.manifests.push(rewritten);
    }
    if let Removal::Files(keys) = removal {
        let found: HashSet<FileKey> = removed_keys.into_iter().collect();
        let missing: Vec<&FileKey> = keys.iter().filter(|k| !found.contains(*k)).collect();
        if let Some(first) = missing.first() {
            // A file to remove is gone already: a concurrent commit removed or replaced it
            // (Java's "Missing required files to delete").
            for location in &out.written {
                let _ = base.io().delete(location).await;
            }
            return Err(Error::ConcurrentModification {
                table,
                message: format!(
                    "{} of the {} files to remove are no longer in the table, {} among them \
                     (a concurrent commit removed them); run the statement again",
                    missing.len(),
                    keys.len(),
                    first.path
                ),
            });
        }
    }
    Ok(out)
}

/// Whether the manifest's partition summaries allow a file of `removal` (a cheap skip before
/// reading it). Only exact identity matches are decided here; anything else reads the manifest.
fn partition_may_match(manifest: &ManifestFile, removal: &Removal) -> bool {
    match removal {
        Removal::Nothing => false,
        Removal::Everything => true,
        Removal::Partitions(set) => set
            .iter()
            .any(|(spec_id, _)| *spec_id == manifest.partition_spec_id),
        Removal::Files(set) => !set.is_empty(),
    }
}

/// The manifest's live entries (added or existing) with what readers inherit written out:
/// snapshot id, sequence numbers and, in format 3, data files' first row ids.
fn live_entries(
    manifest: &Manifest,
    manifest_file: &ManifestFile,
    version: FormatVersion,
) -> Result<Vec<ManifestEntry>> {
    let spec = manifest.metadata().partition_spec();
    let schema = manifest.metadata().schema();
    let partition_type = spec.partition_type(schema)?;
    let mut next_row_id = manifest_file.first_row_id;
    let mut out = Vec::new();
    for entry in manifest.entries() {
        if entry.status() == ManifestStatus::Deleted {
            continue;
        }
        let mut entry = entry.as_ref().clone();
        let inherit = entry.status == ManifestStatus::Added;
        if entry.snapshot_id.is_none() {
            entry.snapshot_id = Some(manifest_file.added_snapshot_id);
        }
        if entry.sequence_number.is_none() && inherit {
            entry.sequence_number = Some(manifest_file.sequence_number);
        }
        if entry.file_sequence_number.is_none() && inherit {
            entry.file_sequence_number = Some(manifest_file.sequence_number);
        }
        if version == FormatVersion::V3
            && entry.data_file.content_type() == DataContentType::Data
            && entry.data_file.first_row_id().is_none()
            && let Some(first) = next_row_id
        {
            let file = entry.data_file.clone();
            entry.data_file =
                with_first_row_id(file, first as i64, spec.spec_id(), &partition_type, schema)?;
            next_row_id = Some(first + entry.data_file.record_count());
        }
        out.push(entry);
    }
    Ok(out)
}

/// `file` (of spec `spec_id`, written with `schema`) with its `first_row_id` set: the crate
/// offers no setter, but its JSON form of a data file carries the field.
fn with_first_row_id(
    file: DataFile,
    first_row_id: i64,
    spec_id: i32,
    partition_type: &StructType,
    schema: &Schema,
) -> Result<DataFile> {
    edit_data_file(file, spec_id, partition_type, schema, |json| {
        json.insert("first_row_id".into(), serde_json::Value::from(first_row_id));
        Ok(())
    })
}

/// `file` (of spec `spec_id`, written with `schema`) with `edit` applied to the fields of the
/// crate's JSON form of a data file (which carries every field; the crate has no setters).
///
/// The crate reads a partition tuple's values in the order its JSON object lists them, and
/// `serde_json`'s objects sort their keys: so the tuple is written back in the spec's order
/// (else a spec `(ts_day, id_bucket)` would come back as `(id_bucket, ts_day)`).
pub(crate) fn edit_data_file(
    file: DataFile,
    spec_id: i32,
    partition_type: &StructType,
    schema: &Schema,
    edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>) -> Result<()>,
) -> Result<DataFile> {
    let path = file.file_path().to_string();
    let bad = |e: &dyn std::fmt::Display| Error::InvalidArgument(format!("data file {path}: {e}"));
    let text = serialize_data_file_to_json(file, partition_type, FormatVersion::V3)?;
    let mut json: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).map_err(|e| bad(&e))?;
    edit(&mut json)?;
    let partition = json.remove("partition").unwrap_or(serde_json::Value::Null);
    let mut tuple = String::from("{");
    for (i, field) in partition_type.fields().iter().enumerate() {
        if i > 0 {
            tuple.push(',');
        }
        let value = partition
            .get(&field.name)
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        tuple.push_str(&serde_json::Value::String(field.name.clone()).to_string());
        tuple.push(':');
        tuple.push_str(&value.to_string());
    }
    tuple.push('}');
    let rest = serde_json::Value::Object(json).to_string();
    let text = match rest.strip_prefix('{') {
        Some("}") => format!("{{\"partition\":{tuple}}}"),
        Some(fields) => format!("{{\"partition\":{tuple},{fields}"),
        None => return Err(bad(&"its JSON form is not an object")),
    };
    Ok(deserialize_data_file_from_json(
        &text,
        spec_id,
        partition_type,
        schema,
    )?)
}
