//! `CALL system.rewrite_table_path(table, source_prefix, target_prefix, start_version,
//! end_version, staging_location, create_file_list)`: Spark's relocation procedure (Iceberg's
//! `RewriteTablePathSparkAction` / `RewriteTablePathUtil`). It prepares a copy of a table at
//! another location: every file that names a path is rewritten into the staging location with
//! `source_prefix` replaced by `target_prefix`, and a file list (`source,target` per line, as
//! Spark writes it, at `<staging>file-list`) says what to copy where: the staged files and the
//! files that need no rewrite (data files, equality delete files, statistics files). Nothing of
//! the table changes; the copy is registered at its new location by whoever copies it
//! (`register_table` with `<target_prefix>/metadata/<latest_version>`).
//!
//! What is rewritten (staged at `<staging>` + the path relative to `source_prefix`):
//! - every metadata version from after `start_version` (default: all of the metadata log) to
//!   `end_version` (default: the current one): `location`, each snapshot's `manifest-list`
//!   (and a v1 snapshot's `manifests`), the `metadata-log`, `statistics` /
//!   `partition-statistics` paths and the `write.data.path`, `write.metadata.path`,
//!   `write.object-storage.path`, `write.folder-storage.path` properties; everything else is kept
//!   as written.
//! - the manifest list of every snapshot those versions hold (minus `start_version`'s), with
//!   each manifest's new path and length; snapshot id, parent, sequence number and first row id
//!   from the snapshot, every other field of each manifest as it was.
//! - every manifest those lists name (data and delete manifests): each entry's `file_path` and,
//!   for deletion vectors, `referenced_data_file`; position delete files' bounds of the
//!   `file_path` column re-prefixed and their new `file_size_in_bytes`; entry status, snapshot
//!   id and sequence numbers kept (Java's `appendEntryWithFile`).
//! - every live position delete file: Parquet files re-written with each `file_path` value
//!   re-prefixed (same Arrow schema and field ids, same compression and key-value metadata);
//!   Puffin deletion vectors with each blob's `referenced-data-file` property re-prefixed in the
//!   footer, the blobs left byte for byte where they were (so each entry's `content_offset` and
//!   `content_size_in_bytes` stay right). One delete file named by several manifests is
//!   rewritten once.
//!
//! As in Spark, only files of live entries are copied (a file only a `DELETED` entry names may
//! be gone), except those added by a snapshot `start_version` holds (copied before), and a path
//! outside `source_prefix` is an error naming it. Unlike Iceberg 1.10.2, every position delete
//! file of a manifest is staged (apache/iceberg#12772), once (#14814), with its new size recorded
//! (#15470), and deletion vectors relocate (#14351). As in Spark, the snapshots of every version
//! rewritten are rewritten; a manifest list that is gone is skipped for a snapshot only older
//! versions hold. A table its catalog found moved (read from another folder than its `location`
//! says, as the fixture corpus is) is relocated from the paths its metadata spells.
//!
//! Output (Spark's): `latest_version` (the end version's file name), `file_list_location`,
//! `rewritten_manifest_file_paths_count`, `rewritten_delete_file_paths_count`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, FormatVersion, ManifestContentType, ManifestFile,
    ManifestList, ManifestListWriter, ManifestStatus, ManifestWriterBuilder,
};
use object_store::ObjectStoreExt;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;
use serde_json::Value;
use uuid::Uuid;

use super::args::{Param, ParamType, ProcedureArgs};
use super::context::ProcedureContext;
use super::{Procedure, ProcedureFuture};
use crate::catalog::LoadedTable;
use crate::commit::avro_out::{BufferWrite, MemoryOutput};
use crate::commit::removal::edit_data_file;
use crate::error::{Error, Result};
use crate::io::normalize_location;

/// Field id of the `file_path` column of position delete files.
const DELETE_FILE_PATH_FIELD_ID: i32 = 2147483546;
/// Name of the file list in the staging location (Spark's `RESULT_LOCATION`).
const FILE_LIST: &str = "file-list";
/// Table properties holding paths (Java's `RewriteTablePathUtil.updateProperties`).
const PATH_PROPERTIES: [&str; 4] = [
    "write.object-storage.path",
    "write.folder-storage.path",
    "write.data.path",
    "write.metadata.path",
];
/// Puffin's magic bytes.
const PUFFIN_MAGIC: [u8; 4] = *b"PFA1";

/// The procedure.
pub const PROCEDURE: Procedure = Procedure {
    name: "rewrite_table_path",
    params: &[
        Param::required("table", ParamType::String),
        Param::required("source_prefix", ParamType::String),
        Param::required("target_prefix", ParamType::String),
        Param::optional("start_version", ParamType::String),
        Param::optional("end_version", ParamType::String),
        Param::optional("staging_location", ParamType::String),
        Param::optional("create_file_list", ParamType::Boolean),
    ],
    output: output_schema,
    run,
};

/// Spark's output columns.
pub fn output_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("latest_version", DataType::Utf8, true),
        Field::new("file_list_location", DataType::Utf8, true),
        Field::new("rewritten_manifest_file_paths_count", DataType::Int32, true),
        Field::new("rewritten_delete_file_paths_count", DataType::Int32, true),
    ]))
}

fn run(ctx: &ProcedureContext, args: ProcedureArgs) -> ProcedureFuture<'_> {
    Box::pin(async move {
        let table = ctx.load_table(&args, "table").await?;
        let source = args.string("source_prefix")?;
        let target = args.string("target_prefix")?;
        if source.is_empty() || target.is_empty() {
            return Err(Error::InvalidArgument(
                "procedure rewrite_table_path: source_prefix and target_prefix must not be empty"
                    .into(),
            ));
        }
        if source == target {
            return Err(Error::InvalidArgument(format!(
                "procedure rewrite_table_path: source_prefix and target_prefix are both {source:?}"
            )));
        }
        let staging = match args.string_opt("staging_location")? {
            Some(s) => with_separator(&s),
            None => format!(
                "{}/metadata/copy-table-staging-{}/",
                table.metadata().location().trim_end_matches('/'),
                Uuid::new_v4()
            ),
        };
        let create_file_list = args.bool_opt("create_file_list")?.unwrap_or(true);
        let request = Relocation {
            table: &table,
            name: table.ident().to_string(),
            source,
            target,
            staging,
        };
        let outcome = request
            .run(
                args.string_opt("start_version")?.as_deref(),
                args.string_opt("end_version")?.as_deref(),
                create_file_list,
            )
            .await?;
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        Ok(RecordBatch::try_new(
            output_schema(),
            vec![
                Arc::new(StringArray::from(vec![outcome.latest_version])) as ArrayRef,
                Arc::new(StringArray::from(vec![outcome.file_list_location])),
                Arc::new(Int32Array::from(vec![count(outcome.manifests)])),
                Arc::new(Int32Array::from(vec![count(outcome.delete_files)])),
            ],
        )?)
    })
}

/// What a relocation produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelocationOutcome {
    /// The file name of the end version (`v5.metadata.json`).
    pub latest_version: String,
    /// Where the file list is (`None` with `create_file_list => false`).
    pub file_list_location: Option<String>,
    /// How many manifests were rewritten.
    pub manifests: usize,
    /// How many position delete files (Parquet or deletion vectors) were rewritten.
    pub delete_files: usize,
    /// Every `(source, target)` to copy, in the order the file list has them.
    pub copy_plan: Vec<(String, String)>,
}

/// One relocation: the table, its prefixes and the staging location (ending in `/`).
struct Relocation<'a> {
    table: &'a LoadedTable,
    name: String,
    source: String,
    target: String,
    staging: String,
}

/// The state of one run: what was written and what to copy.
#[derive(Default)]
struct Progress {
    /// Manifests rewritten: source path → (new path, new length).
    manifests: HashMap<String, (String, i64)>,
    /// Position delete files rewritten: source path → new size.
    delete_files: HashMap<String, u64>,
    copy_plan: Vec<(String, String)>,
    planned: HashSet<(String, String)>,
}

impl Progress {
    fn copy(&mut self, from: String, to: String) {
        if self.planned.insert((from.clone(), to.clone())) {
            self.copy_plan.push((from, to));
        }
    }
}

/// A snapshot to rewrite, as a metadata file spells it.
struct SnapshotInfo {
    id: i64,
    parent: Option<i64>,
    sequence_number: i64,
    first_row_id: Option<u64>,
    manifest_list: String,
}

impl Relocation<'_> {
    async fn run(
        &self,
        start_version: Option<&str>,
        end_version: Option<&str>,
        create_file_list: bool,
    ) -> Result<RelocationOutcome> {
        let current = self.logical_metadata_location();
        let current_json = self.read_json(&current).await?;
        let log = metadata_log(&current_json);
        let end = match end_version {
            None => current.clone(),
            Some(name) => self.version(&current, &log, name, "end_version")?,
        };
        let start = start_version
            .map(|name| self.version(&current, &log, name, "start_version"))
            .transpose()?;
        let end_json = if end == current {
            current_json
        } else {
            self.read_json(&end).await?
        };

        // The versions to rewrite: the end version and its log back to (not including) start.
        let mut versions = vec![(end.clone(), end_json.clone())];
        for file in metadata_log(&end_json).into_iter().rev() {
            if Some(&file) == start.as_ref() {
                break;
            }
            let json = self.read_json(&file).await?;
            versions.push((file, json));
        }

        let mut progress = Progress::default();
        let mut snapshots: Vec<SnapshotInfo> = Vec::new();
        let mut seen = HashSet::new();
        let end_snapshots: HashSet<i64> = snapshot_infos(&end_json)
            .map(|s| s.into_iter().map(|s| s.id).collect())
            .unwrap_or_default();
        for (path, json) in &versions {
            for snapshot in snapshot_infos(json).map_err(|e| self.corrupt(path, e))? {
                if seen.insert(snapshot.id) {
                    snapshots.push(snapshot);
                }
            }
            let (rewritten, statistics) = self.rewrite_metadata(json)?;
            let staged = self.staging_path(path)?;
            let text = serde_json::to_vec(&rewritten)
                .map_err(|e| self.write_failed(&staged, e.to_string()))?;
            self.put(&staged, Bytes::from(text)).await?;
            progress.copy(staged, self.new_path(path)?);
            for file in statistics {
                let to = self.new_path(&file)?;
                progress.copy(file, to);
            }
        }
        // The start version's snapshots were copied before: their files are not listed again.
        let mut copied_before = HashSet::new();
        if let Some(start) = &start {
            let start_json = self.read_json(start).await?;
            copied_before = snapshot_infos(&start_json)
                .map_err(|e| self.corrupt(start, e))?
                .into_iter()
                .map(|s| s.id)
                .collect();
            snapshots.retain(|s| !copied_before.contains(&s.id));
        }
        let version = format_version(&end_json);

        for snapshot in &snapshots {
            let list = &snapshot.manifest_list;
            let bytes = match self.table.io().read(list).await {
                Ok(bytes) => bytes,
                // A snapshot only older versions hold may have been expired with its files.
                Err(e) if e.is_not_found() && !end_snapshots.contains(&snapshot.id) => continue,
                Err(e) => return Err(self.corrupt(list, e)),
            };
            let manifests = ManifestList::parse_with_version(&bytes, version)
                .map_err(|e| self.corrupt(list, e))?;
            let mut rewritten = Vec::new();
            for manifest in manifests.entries() {
                let (path, length) = self
                    .rewrite_manifest(manifest, version, &copied_before, &mut progress)
                    .await?;
                let mut manifest = manifest.clone();
                manifest.manifest_path = path;
                manifest.manifest_length = length;
                rewritten.push(manifest);
            }
            let buffer = BufferWrite::default();
            let mut writer = match version {
                FormatVersion::V1 => {
                    ManifestListWriter::v1(Box::new(buffer.clone()), snapshot.id, snapshot.parent)
                }
                FormatVersion::V2 => ManifestListWriter::v2(
                    Box::new(buffer.clone()),
                    snapshot.id,
                    snapshot.parent,
                    snapshot.sequence_number,
                ),
                FormatVersion::V3 => ManifestListWriter::v3(
                    Box::new(buffer.clone()),
                    snapshot.id,
                    snapshot.parent,
                    snapshot.sequence_number,
                    snapshot.first_row_id,
                ),
            };
            writer
                .add_manifests(rewritten.into_iter())
                .map_err(|e| self.write_failed(list, e.to_string()))?;
            writer
                .close()
                .await
                .map_err(|e| self.write_failed(list, e.to_string()))?;
            let staged = self.staging_path(list)?;
            self.put(&staged, buffer.bytes()).await?;
            progress.copy(staged, self.new_path(list)?);
        }

        let file_list_location = if create_file_list {
            let location = format!("{}{FILE_LIST}", self.staging);
            let mut text = String::new();
            for (from, to) in &progress.copy_plan {
                text.push_str(from);
                text.push(',');
                text.push_str(to);
                text.push('\n');
            }
            self.put(&location, Bytes::from(text)).await?;
            Some(location)
        } else {
            None
        };
        Ok(RelocationOutcome {
            latest_version: file_name(&end).to_string(),
            file_list_location,
            manifests: progress.manifests.len(),
            delete_files: progress.delete_files.len(),
            copy_plan: progress.copy_plan,
        })
    }

    /// The current metadata file as the table's metadata spells paths: a table the catalog
    /// found moved (its files under another folder than its `location` says) is read from
    /// where it is, but its paths are relocated from where it says it is.
    fn logical_metadata_location(&self) -> String {
        let physical = self.table.metadata_location();
        if let Some((recorded, actual)) = self.table.io().locations().rewrite()
            && let Some(rest) = normalize_location(physical).strip_prefix(actual)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            let location = self.table.metadata().location();
            if normalize_location(location) == recorded {
                return format!("{}{rest}", location.trim_end_matches('/'));
            }
        }
        physical.to_string()
    }

    /// The metadata file of the version named `name` (a file name such as `v3.metadata.json`).
    fn version(&self, current: &str, log: &[String], name: &str, param: &str) -> Result<String> {
        std::iter::once(current)
            .chain(log.iter().map(String::as_str))
            .find(|f| file_name(f) == name)
            .map(str::to_string)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "procedure rewrite_table_path: {param} {name:?} is not a metadata version of \
                     table {} (its metadata log has no such file)",
                    self.name
                ))
            })
    }

    async fn read_json(&self, path: &str) -> Result<Value> {
        let bytes = self
            .table
            .io()
            .read(path)
            .await
            .map_err(|e| Error::corrupt(&self.name, "metadata file", path, e))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| Error::corrupt(&self.name, "metadata file", path, e))
    }

    /// `json` (a metadata file) with its paths rewritten, and the statistics files it names.
    fn rewrite_metadata(&self, json: &Value) -> Result<(Value, Vec<String>)> {
        let mut out = json.clone();
        let mut statistics = Vec::new();
        if let Some(location) = out.get_mut("location") {
            self.rewrite_string(location)?;
        }
        if let Some(properties) = out.get_mut("properties").and_then(Value::as_object_mut) {
            for key in PATH_PROPERTIES {
                if let Some(value) = properties.get_mut(key) {
                    self.rewrite_string(value)?;
                }
            }
        }
        if let Some(snapshots) = out.get_mut("snapshots").and_then(Value::as_array_mut) {
            for snapshot in snapshots {
                if let Some(list) = snapshot.get_mut("manifest-list") {
                    self.rewrite_string(list)?;
                }
                if let Some(manifests) = snapshot.get_mut("manifests").and_then(Value::as_array_mut)
                {
                    for manifest in manifests {
                        self.rewrite_string(manifest)?;
                    }
                }
            }
        }
        if let Some(log) = out.get_mut("metadata-log").and_then(Value::as_array_mut) {
            for entry in log {
                if let Some(file) = entry.get_mut("metadata-file") {
                    self.rewrite_string(file)?;
                }
            }
        }
        for key in ["statistics", "partition-statistics"] {
            if let Some(files) = out.get_mut(key).and_then(Value::as_array_mut) {
                for file in files {
                    if let Some(path) = file.get_mut("statistics-path") {
                        if let Some(p) = path.as_str() {
                            statistics.push(p.to_string());
                        }
                        self.rewrite_string(path)?;
                    }
                }
            }
        }
        Ok((out, statistics))
    }

    fn rewrite_string(&self, value: &mut Value) -> Result<()> {
        if let Some(text) = value.as_str() {
            *value = Value::String(self.new_path(text)?);
        }
        Ok(())
    }

    /// The manifest's new path and length, rewriting it (and the position delete files it
    /// names) the first time it is seen.
    async fn rewrite_manifest(
        &self,
        manifest_file: &ManifestFile,
        version: FormatVersion,
        copied_before: &HashSet<i64>,
        progress: &mut Progress,
    ) -> Result<(String, i64)> {
        let path = &manifest_file.manifest_path;
        if let Some(done) = progress.manifests.get(path) {
            return Ok(done.clone());
        }
        let bytes = self
            .table
            .io()
            .read(path)
            .await
            .map_err(|e| self.corrupt(path, e))?;
        let manifest = crate::spec::parse_manifest(&bytes).map_err(|e| self.corrupt(path, e))?;
        let metadata = manifest.metadata();
        let schema = Arc::clone(metadata.schema());
        let spec = metadata.partition_spec().clone();
        let partition_type = spec
            .partition_type(&schema)
            .map_err(|e| self.corrupt(path, e))?;
        let new_path = self.new_path(path)?;
        let output = MemoryOutput::new(new_path.clone());
        let builder = ManifestWriterBuilder::new(
            output.output_file(),
            Some(manifest_file.added_snapshot_id),
            Arc::clone(&schema),
            spec.clone(),
        );
        let deletes = matches!(metadata.content(), ManifestContentType::Deletes);
        let mut writer = match (version, deletes) {
            (FormatVersion::V1, _) => builder.build_v1(),
            (FormatVersion::V2, false) => builder.build_v2_data(),
            (FormatVersion::V2, true) => builder.build_v2_deletes(),
            (FormatVersion::V3, false) => builder.build_v3_data(),
            (FormatVersion::V3, true) => builder.build_v3_deletes(),
        };
        for entry in manifest.entries() {
            let file = entry.data_file();
            let live = entry.status() != ManifestStatus::Deleted;
            let added_by = entry.snapshot_id.unwrap_or(manifest_file.added_snapshot_id);
            let copied = live && !copied_before.contains(&added_by);
            let old_path = file.file_path().to_string();
            let mut edit = FileEdit {
                file_path: self.new_path(&old_path)?,
                ..FileEdit::default()
            };
            match file.content_type() {
                DataContentType::Data | DataContentType::EqualityDeletes => {
                    if copied {
                        progress.copy(old_path.clone(), edit.file_path.clone());
                    }
                }
                DataContentType::PositionDeletes => {
                    if let Some(referenced) = file.referenced_data_file() {
                        edit.referenced_data_file = Some(self.new_path(&referenced)?);
                    }
                    edit.bounds = true;
                    let size = match progress.delete_files.get(&old_path) {
                        Some(size) => Some(*size),
                        None if live => {
                            let size = self.rewrite_delete_file(file).await?;
                            progress.delete_files.insert(old_path.clone(), size);
                            Some(size)
                        }
                        None => None,
                    };
                    edit.file_size_in_bytes = size;
                    if copied {
                        progress.copy(self.staging_path(&old_path)?, edit.file_path.clone());
                    }
                }
            }
            let new_file = self.edit_file(file, &edit, &spec, &partition_type, &schema, path)?;
            let sequence_number = entry
                .sequence_number
                .unwrap_or(manifest_file.sequence_number);
            let result = match entry.status() {
                ManifestStatus::Added => {
                    writer.add_file(new_file, entry.sequence_number.unwrap_or(-1))
                }
                ManifestStatus::Existing => writer.add_existing_file(
                    new_file,
                    added_by,
                    sequence_number,
                    entry.file_sequence_number.or(Some(sequence_number)),
                ),
                ManifestStatus::Deleted => writer.add_delete_file(
                    new_file,
                    sequence_number,
                    entry.file_sequence_number.or(Some(sequence_number)),
                ),
            };
            result.map_err(|e| self.write_failed(&new_path, e.to_string()))?;
        }
        writer
            .write_manifest_file()
            .await
            .map_err(|e| self.write_failed(&new_path, e.to_string()))?;
        let bytes = output.bytes().await?;
        let length = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        let staged = self.staging_path(path)?;
        self.put(&staged, bytes).await?;
        progress.copy(staged, new_path.clone());
        progress
            .manifests
            .insert(path.clone(), (new_path.clone(), length));
        Ok((new_path, length))
    }

    /// `file` with the edit applied (through the crate's JSON form of a data file, which
    /// carries every field).
    fn edit_file(
        &self,
        file: &DataFile,
        edit: &FileEdit,
        spec: &iceberg::spec::PartitionSpec,
        partition_type: &iceberg::spec::StructType,
        schema: &iceberg::spec::Schema,
        manifest: &str,
    ) -> Result<DataFile> {
        let bad = |e: &dyn std::fmt::Display| self.corrupt(manifest, e);
        edit_data_file(
            file.clone(),
            spec.spec_id(),
            partition_type,
            schema,
            |json| {
                json.insert("file_path".into(), Value::String(edit.file_path.clone()));
                if let Some(referenced) = &edit.referenced_data_file {
                    json.insert(
                        "referenced_data_file".into(),
                        Value::String(referenced.clone()),
                    );
                }
                if let Some(size) = edit.file_size_in_bytes {
                    json.insert("file_size_in_bytes".into(), Value::from(size));
                }
                if !edit.bounds {
                    return Ok(());
                }
                for key in ["lower_bounds", "upper_bounds"] {
                    let Some(entries) = json.get_mut(key).and_then(Value::as_array_mut) else {
                        continue;
                    };
                    for entry in entries {
                        if entry["key"].as_i64() != Some(i64::from(DELETE_FILE_PATH_FIELD_ID)) {
                            continue;
                        }
                        let bytes: Vec<u8> =
                            serde_json::from_value(entry["value"].clone()).map_err(|e| bad(&e))?;
                        let old = String::from_utf8(bytes).map_err(|e| bad(&e))?;
                        entry["value"] = Value::from(self.new_bound(&old).into_bytes());
                    }
                }
                Ok(())
            },
        )
        .map_err(|e| match e {
            Error::InvalidArgument(message) => bad(&message),
            other => other,
        })
    }

    /// A `file_path` bound re-prefixed: bounds may be truncated, so one that does not reach past
    /// the source prefix is kept as it is only when it does not start with it either.
    fn new_bound(&self, bound: &str) -> String {
        match bound.strip_prefix(self.source.as_str()) {
            Some(rest) => join(&self.target, rest),
            None => bound.to_string(),
        }
    }

    /// Rewrites a position delete file into the staging location; its new size.
    async fn rewrite_delete_file(&self, file: &DataFile) -> Result<u64> {
        let path = file.file_path();
        let bytes = self
            .table
            .io()
            .read(path)
            .await
            .map_err(|e| Error::corrupt(&self.name, "delete file", path, e))?;
        let rewritten = match file.file_format() {
            DataFileFormat::Parquet => self.rewrite_parquet_deletes(path, bytes)?,
            DataFileFormat::Puffin => self.rewrite_puffin(path, &bytes)?,
            other => {
                return Err(Error::Unsupported {
                    table: self.name.clone(),
                    message: format!(
                        "rewrite_table_path: position delete file {path} is {other:?}; only \
                         Parquet position deletes and Puffin deletion vectors are rewritten"
                    ),
                });
            }
        };
        let size = rewritten.len() as u64;
        self.put(&self.staging_path(path)?, rewritten).await?;
        Ok(size)
    }

    /// A Parquet position delete file with every `file_path` value re-prefixed.
    fn rewrite_parquet_deletes(&self, path: &str, bytes: Bytes) -> Result<Bytes> {
        let bad = |e: &dyn std::fmt::Display| Error::corrupt(&self.name, "delete file", path, e);
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| bad(&e))?;
        let file_metadata = builder.metadata().file_metadata().clone();
        let compression = builder
            .metadata()
            .row_groups()
            .first()
            .and_then(|g| g.columns().first())
            .map(|c| c.compression());
        let schema = Arc::clone(builder.schema());
        let column = schema
            .fields()
            .iter()
            .position(|f| {
                f.metadata()
                    .get(parquet::arrow::PARQUET_FIELD_ID_META_KEY)
                    .is_some_and(|id| id == &DELETE_FILE_PATH_FIELD_ID.to_string())
            })
            .or_else(|| schema.index_of("file_path").ok())
            .ok_or_else(|| bad(&"no file_path column"))?;
        let reader = builder.build().map_err(|e| bad(&e))?;
        let mut props = WriterProperties::builder();
        if let Some(compression) = compression {
            props = props.set_compression(compression);
        }
        let kv: Vec<_> = file_metadata
            .key_value_metadata()
            .into_iter()
            .flatten()
            .filter(|kv| kv.key != "ARROW:schema")
            .cloned()
            .collect();
        if !kv.is_empty() {
            props = props.set_key_value_metadata(Some(kv));
        }
        let options = parquet::arrow::arrow_writer::ArrowWriterOptions::new()
            .with_properties(props.build())
            .with_skip_arrow_metadata(true);
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new_with_options(&mut out, Arc::clone(&schema), options)
            .map_err(|e| self.write_failed(path, e.to_string()))?;
        for batch in reader {
            let batch = batch.map_err(|e| bad(&e))?;
            let paths =
                arrow::compute::cast(batch.column(column), &DataType::Utf8).map_err(|e| bad(&e))?;
            let paths = paths
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| bad(&"file_path is not a string column"))?;
            let mut new_paths = Vec::with_capacity(paths.len());
            for value in paths.iter() {
                new_paths.push(value.map(|p| self.new_path(p)).transpose()?);
            }
            let new_column = arrow::compute::cast(
                &(Arc::new(StringArray::from(new_paths)) as ArrayRef),
                schema.field(column).data_type(),
            )
            .map_err(|e| bad(&e))?;
            let mut columns = batch.columns().to_vec();
            columns[column] = new_column;
            let batch = RecordBatch::try_new(Arc::clone(&schema), columns).map_err(|e| bad(&e))?;
            writer
                .write(&batch)
                .map_err(|e| self.write_failed(path, e.to_string()))?;
        }
        writer
            .close()
            .map_err(|e| self.write_failed(path, e.to_string()))?;
        Ok(Bytes::from(out))
    }

    /// A Puffin file with each blob's `referenced-data-file` re-prefixed in its footer, the
    /// blobs kept byte for byte at their offsets.
    fn rewrite_puffin(&self, path: &str, bytes: &[u8]) -> Result<Bytes> {
        let bad = |e: &dyn std::fmt::Display| Error::corrupt(&self.name, "delete file", path, e);
        let (footer_start, payload, flags) = puffin_footer(bytes).map_err(|e| bad(&e))?;
        let mut footer: Value = serde_json::from_slice(payload).map_err(|e| bad(&e))?;
        if let Some(blobs) = footer.get_mut("blobs").and_then(Value::as_array_mut) {
            for blob in blobs {
                if let Some(referenced) = blob
                    .get_mut("properties")
                    .and_then(|p| p.get_mut("referenced-data-file"))
                {
                    self.rewrite_string(referenced)?;
                }
            }
        }
        let payload = serde_json::to_vec(&footer).map_err(|e| bad(&e))?;
        let size = u32::try_from(payload.len()).map_err(|e| bad(&e))?;
        let mut out = Vec::with_capacity(footer_start + payload.len() + 16);
        out.extend_from_slice(&bytes[..footer_start]);
        out.extend_from_slice(&PUFFIN_MAGIC);
        out.extend_from_slice(&payload);
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&flags);
        out.extend_from_slice(&PUFFIN_MAGIC);
        Ok(Bytes::from(out))
    }

    /// `path` under the target prefix.
    fn new_path(&self, path: &str) -> Result<String> {
        Ok(join(&self.target, self.relative(path)?))
    }

    /// Where `path`'s rewritten copy is staged.
    fn staging_path(&self, path: &str) -> Result<String> {
        Ok(join(&self.staging, self.relative(path)?))
    }

    /// `path` relative to the source prefix (an error naming it when it is outside).
    fn relative<'p>(&self, path: &'p str) -> Result<&'p str> {
        let prefix = self.source.trim_end_matches('/');
        match path.strip_prefix(prefix) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => Ok(rest),
            _ => Err(Error::InvalidArgument(format!(
                "procedure rewrite_table_path: table {}: path {path} does not start with the \
                 source prefix {}",
                self.name, self.source
            ))),
        }
    }

    async fn put(&self, location: &str, bytes: Bytes) -> Result<()> {
        let (store, _, path) = self.table.io().resolve(location)?;
        store
            .put(&path, object_store::PutPayload::from(bytes))
            .await
            .map_err(|e| self.write_failed(location, e.to_string()))?;
        Ok(())
    }

    fn corrupt(&self, path: &str, e: impl std::fmt::Display) -> Error {
        Error::corrupt(&self.name, "file", path, e)
    }

    fn write_failed(&self, path: &str, message: String) -> Error {
        Error::WriteFailed {
            table: self.name.clone(),
            path: path.to_string(),
            message,
        }
    }
}

/// What changes in one content file's manifest entry.
#[derive(Default)]
struct FileEdit {
    file_path: String,
    referenced_data_file: Option<String>,
    file_size_in_bytes: Option<u64>,
    /// Whether the `file_path` column's bounds are re-prefixed (position deletes).
    bounds: bool,
}

/// `prefix` and `rest` joined by exactly one `/` (`rest` empty: `prefix` as it is).
fn join(prefix: &str, rest: &str) -> String {
    if rest.is_empty() {
        return prefix.to_string();
    }
    format!(
        "{}/{}",
        prefix.trim_end_matches('/'),
        rest.trim_start_matches('/')
    )
}

fn with_separator(location: &str) -> String {
    if location.ends_with('/') {
        location.to_string()
    } else {
        format!("{location}/")
    }
}

/// The last segment of a path.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The metadata-log files of a metadata file, oldest first.
fn metadata_log(json: &Value) -> Vec<String> {
    json.get("metadata-log")
        .and_then(Value::as_array)
        .map(|log| {
            log.iter()
                .filter_map(|e| e.get("metadata-file").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn format_version(json: &Value) -> FormatVersion {
    match json.get("format-version").and_then(Value::as_i64) {
        Some(1) => FormatVersion::V1,
        Some(3) => FormatVersion::V3,
        _ => FormatVersion::V2,
    }
}

/// The snapshots a metadata file lists (those with a manifest list).
fn snapshot_infos(json: &Value) -> std::result::Result<Vec<SnapshotInfo>, String> {
    let mut out = Vec::new();
    for s in json
        .get("snapshots")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let id = s
            .get("snapshot-id")
            .and_then(Value::as_i64)
            .ok_or("a snapshot without snapshot-id")?;
        let Some(list) = s.get("manifest-list").and_then(Value::as_str) else {
            if s.get("manifests").is_some() {
                return Err(format!(
                    "snapshot {id} lists its manifests without a manifest list (format 1), \
                     which rewrite_table_path does not rewrite"
                ));
            }
            continue;
        };
        out.push(SnapshotInfo {
            id,
            parent: s.get("parent-snapshot-id").and_then(Value::as_i64),
            sequence_number: s
                .get("sequence-number")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            first_row_id: s.get("first-row-id").and_then(Value::as_u64),
            manifest_list: list.to_string(),
        });
    }
    Ok(out)
}

/// A Puffin file's footer: where it starts (its leading magic), its payload and flags.
fn puffin_footer(bytes: &[u8]) -> std::result::Result<(usize, &[u8], [u8; 4]), String> {
    let n = bytes.len();
    if n < 4 + 4 + 12 || bytes[n - 4..] != PUFFIN_MAGIC || bytes[..4] != PUFFIN_MAGIC {
        return Err("not a Puffin file (magic missing)".into());
    }
    let size =
        u32::from_le_bytes([bytes[n - 12], bytes[n - 11], bytes[n - 10], bytes[n - 9]]) as usize;
    let flags = [bytes[n - 8], bytes[n - 7], bytes[n - 6], bytes[n - 5]];
    if flags[0] & 1 != 0 {
        return Err("the Puffin footer is compressed, which is not supported here".into());
    }
    let start = n
        .checked_sub(12 + size + 4)
        .filter(|s| *s >= 4)
        .ok_or("the Puffin footer size is larger than the file")?;
    if bytes[start..start + 4] != PUFFIN_MAGIC {
        return Err("the Puffin footer does not start with its magic".into());
    }
    Ok((start, &bytes[start + 4..start + 4 + size], flags))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_with_one_separator() {
        assert_eq!(join("s3://b/t", "/data/x"), "s3://b/t/data/x");
        assert_eq!(join("s3://b/t/", "data/x"), "s3://b/t/data/x");
        assert_eq!(join("s3://b/t", ""), "s3://b/t");
        assert_eq!(
            file_name("/a/metadata/v3.metadata.json"),
            "v3.metadata.json"
        );
    }

    #[test]
    fn puffin_footer_is_found_and_rebuilt() {
        let payload = br#"{"blobs":[]}"#;
        let mut file = PUFFIN_MAGIC.to_vec();
        file.extend_from_slice(b"blob");
        file.extend_from_slice(&PUFFIN_MAGIC);
        file.extend_from_slice(payload);
        file.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        file.extend_from_slice(&[0; 4]);
        file.extend_from_slice(&PUFFIN_MAGIC);
        let (start, found, flags) = puffin_footer(&file).expect("footer");
        assert_eq!(start, 8);
        assert_eq!(found, payload);
        assert_eq!(flags, [0; 4]);
        assert!(puffin_footer(b"nope").is_err());
    }
}
