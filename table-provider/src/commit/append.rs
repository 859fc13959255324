//! An append snapshot, produced the way Iceberg Java's `MergeAppend`/`FastAppend` produce one.
//!
//! The new data files go into new manifests once, under a snapshot id chosen once (the
//! manifests record it). Each commit attempt then builds only what depends on the table as it
//! is at that attempt: the manifest list (the new manifests first, then every manifest of the
//! current `main` snapshot, unchanged), the sequence number, the parent, the summary totals and,
//! in format 3, the row range (`first-row-id` from the table's `next-row-id`; the manifest list
//! writer assigns each new manifest its first row id). An append needs no validation against
//! concurrent commits: it only adds files.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use iceberg::spec::{
    DataFile, FormatVersion, MAIN_BRANCH, ManifestFile, ManifestList, ManifestListWriter,
    ManifestWriterBuilder, Operation, Snapshot, Summary, TableMetadata, TableMetadataBuilder,
    UNASSIGNED_SEQUENCE_NUMBER,
};
use uuid::Uuid;

use super::avro_out::{BufferWrite, MemoryOutput};
use super::summary::{AddedFiles, append_summary};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// The manifests of an append, written once, and what each attempt needs to commit them.
#[derive(Debug)]
pub struct AppendProducer {
    snapshot_id: i64,
    commit_id: Uuid,
    manifests: Vec<ManifestFile>,
    added: AddedFiles,
}

/// One attempt's result: the table metadata to swap in, and the manifest list it wrote (to
/// delete if the swap loses a race).
#[derive(Debug)]
pub struct AppendAttempt {
    /// The new table metadata.
    pub metadata: TableMetadata,
    /// The manifest list this attempt wrote.
    pub manifest_list: String,
}

impl AppendProducer {
    /// Writes the manifest of `files` (data files of `base`'s default partition spec) for a new
    /// snapshot of `base`.
    pub async fn new(base: &LoadedTable, files: Vec<DataFile>) -> Result<Self> {
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
        let snapshot_id = new_snapshot_id(metadata);
        let commit_id = Uuid::new_v4();
        let added = AddedFiles::of(&files);
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
                writer.add_file(file, UNASSIGNED_SEQUENCE_NUMBER)?;
            }
            let manifest = writer.write_manifest_file().await?;
            base.io().create(&location, output.bytes().await?).await?;
            manifests.push(manifest);
        }
        Ok(Self {
            snapshot_id,
            commit_id,
            manifests,
            added,
        })
    }

    /// The snapshot id this append commits.
    pub fn snapshot_id(&self) -> i64 {
        self.snapshot_id
    }

    /// The manifests written for the new files (deleted if the append is abandoned).
    pub fn manifest_paths(&self) -> impl Iterator<Item = &str> {
        self.manifests.iter().map(|m| m.manifest_path.as_str())
    }

    /// Builds the new metadata for committing on top of `base` (the table as loaded for this
    /// attempt, number `attempt`).
    pub async fn attempt(&self, base: &LoadedTable, attempt: u32) -> Result<AppendAttempt> {
        let metadata = base.metadata();
        if metadata.snapshot_by_id(self.snapshot_id).is_some() {
            return Err(Error::InvalidArgument(format!(
                "table {}: snapshot {} is already committed",
                base.ident(),
                self.snapshot_id
            )));
        }
        let parent = metadata.snapshot_for_ref(MAIN_BRANCH);
        let parent_id = parent.map(|p| p.snapshot_id());
        let sequence_number = metadata.next_sequence_number();
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
            operation: Operation::Append,
            additional_properties: append_summary(&self.added, parent.map(|p| p.as_ref())),
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
        let metadata = TableMetadataBuilder::new_from_metadata(
            metadata.as_ref().clone(),
            Some(base.metadata_location().to_string()),
        )
        .set_branch_snapshot(snapshot, MAIN_BRANCH)?
        .build()?
        .metadata;
        Ok(AppendAttempt {
            metadata,
            manifest_list,
        })
    }
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
