//! A new snapshot on `main` (or another branch: [`SnapshotProducer::on_branch`]), produced the
//! way Iceberg Java's snapshot producers make one: an append (`FastAppend`), an overwrite that
//! also removes files (`ReplacePartitions`, `OverwriteFiles`), or a row delta that adds delete
//! files (`RowDelta`: position-delete files in format 2, deletion vectors in format 3), possibly
//! with new data files and removals.
//!
//! The new data files go into a new data manifest, and the new delete files into new delete
//! manifests (one per partition spec), once, under a snapshot id chosen once (the manifests
//! record it). Each commit attempt then builds only what depends on the table as it
//! is at that attempt: the current `main` snapshot's manifests with the [`Removal`] applied
//! (manifests listing a removed file rewritten, the others carried unchanged), the manifest
//! list (the new manifests first), the sequence number, the parent, the summary and, in format
//! 3, the row range (`first-row-id` from the table's `next-row-id`; the manifest list writer
//! assigns each new data manifest its first row id).
//!
//! No operation validates against concurrent commits here: an append only adds files, and a
//! partition overwrite re-applies to the table as it is at each attempt (a file another writer
//! added to a replaced partition meanwhile is replaced too, as Spark's dynamic overwrite does
//! without an isolation level). Row deltas need validation before each attempt (the files read
//! still there, no conflicting deletes since); that belongs to their caller's commit loop.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, MAIN_BRANCH, ManifestFile, ManifestList,
    ManifestListWriter, ManifestWriterBuilder, Operation, Snapshot, SnapshotRef, Summary,
    TableMetadata, TableMetadataBuilder, UNASSIGNED_SEQUENCE_NUMBER,
};
use uuid::Uuid;

use super::avro_out::{BufferWrite, MemoryOutput};
use super::removal::{Removal, RemovedFile, filter_manifests};
use super::replace::TableReplacement;
use super::summary::{AddedFiles, is_deletion_vector, snapshot_summary};
use super::validation::{RowDeltaCheck, validate_rewrite, validate_row_delta};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// What a snapshot changes: the data files it adds (of the table's default partition spec), the
/// delete files it adds and the files it removes.
#[derive(Debug, Clone, Default)]
pub struct SnapshotChange {
    /// New data files.
    pub added: Vec<DataFile>,
    /// New delete files: position-delete files (Parquet) in format 2, deletion vectors (Puffin,
    /// at most one per data file) in format 3, equality-delete files in both.
    pub added_deletes: Vec<DeleteFile>,
    /// Files of the current snapshot that go.
    pub removal: Removal,
    /// For a row delta: what it read, checked against the commits made since before each
    /// attempt ([`validate_row_delta`]).
    pub row_delta_check: Option<RowDeltaCheck>,
    /// For a compaction: operation `replace`, the new data files' data sequence number and
    /// what it read (checked before each attempt by [`validate_rewrite`]).
    pub rewrite: Option<Rewrite>,
}

/// A compaction (`rewrite_data_files`), as Java's `RewriteFiles` with `dataSequenceNumber`: the
/// new data files hold the rows of the files it replaces, with every delete that applied to
/// them at the snapshot read already applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewrite {
    /// The snapshot read and the data files replaced. Before each attempt no replaced file may
    /// have been removed, nor a position delete that may apply to one added, since;
    /// equality deletes added since are no conflict: they still apply to the new files (see
    /// `data_sequence_number`).
    pub read: RowDeltaCheck,
    /// The data sequence number of the snapshot read, given to the new data files. Equality
    /// deletes apply to data files with a smaller data sequence number, so the new files stay
    /// under the equality deletes committed after the snapshot read (their rows were read
    /// without them), and the ones the rewrite applied (at most this number) no longer match
    /// them. With the commit's own, larger number a concurrent equality delete would silently
    /// stop applying to the rewritten rows.
    pub data_sequence_number: i64,
}

/// A delete file to add, with the partition spec it was written for: the spec of the data files
/// whose rows it deletes, which need not be the table's default spec (the `iceberg` crate's
/// `DataFile` keeps its spec id to itself).
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteFile {
    /// The partition spec of `file`'s partition tuple.
    pub spec_id: i32,
    /// The delete file (content `PositionDeletes` or `EqualityDeletes`).
    pub file: DataFile,
}

impl SnapshotChange {
    /// Adds `files`, removes nothing.
    pub fn append(files: Vec<DataFile>) -> Self {
        Self {
            added: files,
            ..Self::default()
        }
    }

    /// The operation recorded in the snapshot summary, as Java's producers record it: `delete`
    /// when delete files are added without data files (a merge-on-read DELETE, the delete files
    /// it replaces removed), `overwrite` when data files are added with deletes (UPDATE, MERGE)
    /// or files are removed (INSERT OVERWRITE, copy-on-write), `replace` for a compaction,
    /// `append` otherwise.
    pub fn operation(&self) -> Operation {
        if self.rewrite.is_some() {
            Operation::Replace
        } else if !self.added_deletes.is_empty() {
            if self.added.is_empty() {
                Operation::Delete
            } else {
                Operation::Overwrite
            }
        } else if self.removal.is_nothing() {
            Operation::Append
        } else {
            Operation::Overwrite
        }
    }
}

/// The manifests of a new snapshot, written once, and what each attempt needs to commit them.
#[derive(Debug)]
pub struct SnapshotProducer {
    snapshot_id: i64,
    commit_id: Uuid,
    manifests: Vec<ManifestFile>,
    added: AddedFiles,
    removal: Removal,
    row_delta_check: Option<RowDeltaCheck>,
    rewrite_check: Option<RowDeltaCheck>,
    operation: Operation,
    /// The branch the snapshot is committed to (its parent is the branch's head).
    branch: String,
    /// For a table replacement: what it makes current, and the schema the files were written
    /// for ([`Self::replacing`]).
    replacement: Option<Staged>,
}

/// A replacement and the schema and spec its files were written for.
#[derive(Debug)]
struct Staged {
    replacement: Arc<TableReplacement>,
    schema: iceberg::spec::SchemaRef,
    spec_id: i32,
}

/// One attempt's result: the table metadata to swap in, and the files it wrote (the manifest
/// list and rewritten manifests, to delete if the swap loses a race).
#[derive(Debug)]
pub struct SnapshotAttempt {
    /// The new table metadata.
    pub metadata: TableMetadata,
    /// The files this attempt wrote.
    pub written: Vec<String>,
}

impl SnapshotProducer {
    /// Writes the manifest of `change`'s new files for a new snapshot of `base`.
    pub async fn new(base: &LoadedTable, change: SnapshotChange) -> Result<Self> {
        let operation = change.operation();
        let SnapshotChange {
            added: files,
            added_deletes: deletes,
            removal,
            row_delta_check,
            rewrite,
        } = change;
        let data_sequence_number = rewrite
            .as_ref()
            .map_or(UNASSIGNED_SEQUENCE_NUMBER, |r| r.data_sequence_number);
        let metadata = base.metadata();
        let table = base.ident().to_string();
        let unsupported = |message: String| Error::Unsupported {
            table: table.clone(),
            message,
        };
        let version = metadata.format_version();
        if version == FormatVersion::V1 {
            return Err(unsupported(
                "writing to format-version 1 tables is not supported (upgrade to 2)".into(),
            ));
        }
        check_added_files(metadata, &files, &deletes).map_err(unsupported)?;
        let snapshot_id = new_snapshot_id(metadata);
        let commit_id = Uuid::new_v4();
        let added = AddedFiles::of(&files, metadata.default_partition_spec_id(), &deletes);
        let mut manifests = Vec::new();
        if !files.is_empty() {
            let location = format!("{}/metadata/{commit_id}-m0.avro", metadata.location());
            let output = MemoryOutput::new(location.clone());
            let builder = ManifestWriterBuilder::new(
                output.output_file(),
                Some(snapshot_id),
                Arc::clone(metadata.current_schema()),
                metadata.default_partition_spec().as_ref().clone(),
            );
            let mut writer = match version {
                FormatVersion::V3 => builder.build_v3_data(),
                _ => builder.build_v2_data(),
            };
            for file in files {
                writer.add_file(file, data_sequence_number)?;
            }
            let manifest = writer.write_manifest_file().await?;
            base.io().create(&location, output.bytes().await?).await?;
            manifests.push(manifest);
        }
        let mut by_spec: BTreeMap<i32, Vec<DataFile>> = BTreeMap::new();
        for delete in deletes {
            by_spec.entry(delete.spec_id).or_default().push(delete.file);
        }
        for (spec_id, files) in by_spec {
            let result = write_delete_manifest(base, snapshot_id, commit_id, spec_id, files).await;
            match result {
                Ok(manifest) => manifests.push(manifest),
                Err(e) => {
                    for manifest in &manifests {
                        let _ = base.io().delete(&manifest.manifest_path).await;
                    }
                    return Err(e);
                }
            }
        }
        Ok(Self {
            snapshot_id,
            commit_id,
            manifests,
            added,
            removal,
            row_delta_check,
            rewrite_check: rewrite.map(|r| r.read),
            operation,
            branch: MAIN_BRANCH.to_string(),
            replacement: None,
        })
    }

    /// Commits the snapshot as the first of `replacement` (see [`super::replace`]): each
    /// attempt applies the replacement to the table as loaded and adds the snapshot, without
    /// parent, in the same metadata. `staged` is the replacement staged on the table this
    /// producer was made for (the schema and spec the files were written for).
    pub fn replacing(mut self, replacement: Arc<TableReplacement>, staged: &LoadedTable) -> Self {
        self.replacement = Some(Staged {
            replacement,
            schema: Arc::clone(staged.metadata().current_schema()),
            spec_id: staged.metadata().default_partition_spec_id(),
        });
        self
    }

    /// Commits to `branch` instead of `main`: the parent is the branch's head, and only the
    /// branch moves (a new branch starts at the new snapshot, with no parent).
    pub fn on_branch(mut self, branch: &str) -> Self {
        self.branch = branch.to_string();
        self
    }

    /// The snapshot id this producer commits.
    pub fn snapshot_id(&self) -> i64 {
        self.snapshot_id
    }

    /// The manifests written for the new data and delete files (deleted if the commit is
    /// abandoned).
    pub fn manifest_paths(&self) -> impl Iterator<Item = &str> {
        self.manifests.iter().map(|m| m.manifest_path.as_str())
    }

    /// Builds the new metadata for committing on top of `base` (the table as loaded for this
    /// attempt, number `attempt`).
    pub async fn attempt(&self, base: &LoadedTable, attempt: u32) -> Result<SnapshotAttempt> {
        let staged = match &self.replacement {
            Some(staged) => Some(self.restage(base, staged)?),
            None => None,
        };
        let target = staged.as_ref().unwrap_or(base);
        let metadata = target.metadata();
        if metadata.snapshot_by_id(self.snapshot_id).is_some() {
            return Err(Error::InvalidArgument(format!(
                "table {}: snapshot {} is already committed",
                base.ident(),
                self.snapshot_id
            )));
        }
        if let Some(check) = &self.row_delta_check {
            validate_row_delta(base, check).await?;
        }
        if let Some(check) = &self.rewrite_check {
            validate_rewrite(base, check).await?;
        }
        let parent = metadata.snapshot_for_ref(&self.branch);
        let mut carried = Vec::new();
        if let Some(parent) = parent {
            let bytes = base.io().read(parent.manifest_list()).await?;
            let list = ManifestList::parse_with_version(&bytes, metadata.format_version())
                .map_err(|e| {
                    Error::corrupt(
                        base.ident().to_string(),
                        "manifest list",
                        parent.manifest_list(),
                        e,
                    )
                })?;
            carried = list.entries().to_vec();
        }
        let filtered = filter_manifests(base, carried, &self.removal, self.snapshot_id).await?;
        match self
            .finish(
                base,
                target,
                parent,
                filtered.manifests,
                &filtered.removed,
                attempt,
            )
            .await
        {
            Ok((metadata, list)) => {
                let mut written = filtered.written;
                written.push(list);
                Ok(SnapshotAttempt { metadata, written })
            }
            Err(e) => {
                for location in &filtered.written {
                    let _ = base.io().delete(location).await;
                }
                Err(e)
            }
        }
    }

    /// The replacement staged on `base` for an attempt, which must give the schema and spec the
    /// files were written for.
    fn restage(&self, base: &LoadedTable, staged: &Staged) -> Result<LoadedTable> {
        let table = staged.replacement.stage(base)?;
        let metadata = table.metadata();
        let schema = metadata.current_schema();
        if schema.schema_id() != staged.schema.schema_id()
            || schema.as_struct() != staged.schema.as_struct()
            || !schema
                .identifier_field_ids()
                .eq(staged.schema.identifier_field_ids())
            || metadata.default_partition_spec_id() != staged.spec_id
        {
            return Err(Error::ConcurrentModification {
                table: base.ident().to_string(),
                message: "the table's schema or partition specs changed while it was being \
                          replaced; nothing was committed, run the replace again"
                    .into(),
            });
        }
        Ok(table)
    }

    /// Writes the manifest list over `carried` and builds the new metadata on `base`:
    /// `target` is `base`, or for a replacement the replacement staged on it.
    async fn finish(
        &self,
        base: &LoadedTable,
        target: &LoadedTable,
        parent: Option<&SnapshotRef>,
        carried: Vec<ManifestFile>,
        removed: &[RemovedFile],
        attempt: u32,
    ) -> Result<(TableMetadata, String)> {
        let metadata = target.metadata();
        let parent_id = parent.map(|p| p.snapshot_id());
        let sequence_number = metadata.next_sequence_number();

        let manifest_list = format!(
            "{}/metadata/snap-{}-{attempt}-{}.avro",
            metadata.location(),
            self.snapshot_id,
            self.commit_id
        );
        let buffer = BufferWrite::default();
        let v3 = metadata.format_version() == FormatVersion::V3;
        let first_row_id = metadata.next_row_id();
        let mut writer = if v3 {
            ManifestListWriter::v3(
                Box::new(buffer.clone()),
                self.snapshot_id,
                parent_id,
                sequence_number,
                Some(first_row_id),
            )
        } else {
            ManifestListWriter::v2(
                Box::new(buffer.clone()),
                self.snapshot_id,
                parent_id,
                sequence_number,
            )
        };
        writer.add_manifests(self.manifests.iter().cloned().chain(carried))?;
        let next_row_id = writer.next_row_id();
        writer.close().await?;
        base.io().create(&manifest_list, buffer.bytes()).await?;

        let summary = Summary {
            operation: self.operation.clone(),
            additional_properties: snapshot_summary(
                &self.added,
                removed,
                parent.map(|p| p.as_ref()),
            ),
        };
        let timestamp_ms = now_ms().max(metadata.last_updated_ms());
        let builder = Snapshot::builder()
            .with_snapshot_id(self.snapshot_id)
            .with_parent_snapshot_id(parent_id)
            .with_sequence_number(sequence_number)
            .with_timestamp_ms(timestamp_ms)
            .with_manifest_list(manifest_list.clone())
            .with_summary(summary)
            .with_schema_id(metadata.current_schema_id());
        let snapshot = if v3 {
            let added_rows = next_row_id.unwrap_or(first_row_id) - first_row_id;
            builder.with_row_range(first_row_id, added_rows).build()
        } else {
            builder.build()
        };
        let mut builder = TableMetadataBuilder::new_from_metadata(
            base.metadata().as_ref().clone(),
            Some(base.metadata_location().to_string()),
        );
        if let Some(staged) = &self.replacement {
            builder = staged.replacement.apply(base, builder)?;
        }
        let metadata = builder
            .set_branch_snapshot(snapshot, &self.branch)?
            .build()?
            .metadata;
        Ok((metadata, manifest_list))
    }
}

/// Writes the delete manifest of `files` (delete files of partition spec `spec_id`) for snapshot
/// `snapshot_id`.
async fn write_delete_manifest(
    base: &LoadedTable,
    snapshot_id: i64,
    commit_id: Uuid,
    spec_id: i32,
    files: Vec<DataFile>,
) -> Result<ManifestFile> {
    let metadata = base.metadata();
    let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "table {}: delete files of unknown partition spec {spec_id}",
            base.ident()
        ))
    })?;
    let location = format!(
        "{}/metadata/{commit_id}-m-deletes-{spec_id}.avro",
        metadata.location()
    );
    let output = MemoryOutput::new(location.clone());
    let builder = ManifestWriterBuilder::new(
        output.output_file(),
        Some(snapshot_id),
        Arc::clone(metadata.current_schema()),
        spec.as_ref().clone(),
    );
    let mut writer = match metadata.format_version() {
        FormatVersion::V3 => builder.build_v3_deletes(),
        _ => builder.build_v2_deletes(),
    };
    for file in files {
        writer.add_file(file, UNASSIGNED_SEQUENCE_NUMBER)?;
    }
    let manifest = writer.write_manifest_file().await?;
    base.io().create(&location, output.bytes().await?).await?;
    Ok(manifest)
}

/// Checks the files a snapshot adds against the table's format version, as Java's
/// `MergingSnapshotProducer` does: data files are data, delete files are deletes; position
/// deletes are Parquet files in format 2 and deletion vectors (Puffin, naming their data file and
/// blob) in format 3, with at most one new deletion vector per data file.
fn check_added_files(
    metadata: &TableMetadata,
    files: &[DataFile],
    deletes: &[DeleteFile],
) -> std::result::Result<(), String> {
    if let Some(file) = files
        .iter()
        .find(|f| f.content_type() != DataContentType::Data)
    {
        return Err(format!("{} is not a data file", file.file_path()));
    }
    let v3 = metadata.format_version() == FormatVersion::V3;
    let mut deletion_vectors = HashSet::new();
    for DeleteFile { spec_id, file } in deletes {
        let path = file.file_path();
        if metadata.partition_spec_by_id(*spec_id).is_none() {
            return Err(format!(
                "delete file {path}: unknown partition spec {spec_id}"
            ));
        }
        match file.content_type() {
            DataContentType::Data => return Err(format!("{path} is not a delete file")),
            DataContentType::EqualityDeletes => {}
            DataContentType::PositionDeletes => {
                let dv = is_deletion_vector(file);
                if !v3 && dv {
                    return Err(format!(
                        "deletion vector {path}: deletion vectors need format version 3"
                    ));
                }
                if v3 && !dv {
                    return Err(format!(
                        "position delete file {path}: format version 3 tables take deletion \
                         vectors for position deletes"
                    ));
                }
                if dv {
                    let (Some(data_file), Some(_), Some(_)) = (
                        file.referenced_data_file(),
                        file.content_offset(),
                        file.content_size_in_bytes(),
                    ) else {
                        return Err(format!(
                            "deletion vector in {path}: referenced_data_file, content_offset and \
                             content_size_in_bytes are required"
                        ));
                    };
                    if !deletion_vectors.insert(data_file.clone()) {
                        return Err(format!(
                            "two new deletion vectors for data file {data_file}"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// A new snapshot id as Java makes them (a random positive long), not used by the table yet.
fn new_snapshot_id(metadata: &TableMetadata) -> i64 {
    loop {
        let (hi, lo) = Uuid::new_v4().as_u64_pair();
        let id = ((hi ^ lo) & (i64::MAX as u64)) as i64;
        if id != 0 && metadata.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
