//! `rewrite_position_delete_files`: Spark's procedure that compacts position-delete files
//! (format 2). Afterwards each live data file has at most one position-delete file, naming only
//! it (`referenced_data_file`), and deletes of data files no longer live are gone.
//!
//! The delete files rewritten are those that may name several data files (partition-scoped),
//! those whose data file is no longer live, and those of a data file that has more than one.
//! Their positions are read, kept for the live data files they apply to, merged per data file
//! and written as one file-scoped position-delete file each, in the data file's spec and
//! partition; one `replace` snapshot removes the old files and adds the new ones. The new files
//! get the commit's sequence number, which is larger than the old ones': position deletes apply
//! to data files whose data sequence number is at most theirs, so they still apply to the same
//! data files. A concurrent commit that removed one of the old files makes the commit fail with
//! [`Error::ConcurrentModification`]; new deletes added meanwhile simply apply as well.
//!
//! With a `where` filter (a SQL predicate over the table's columns) only the delete files that
//! apply to a data file the filter may select are rewritten (the planner's partition and metrics
//! pruning), and deletes of data files no longer live stay.
//!
//! Format 3 keeps position deletes as deletion vectors, already one per data file: nothing to
//! do, all counts zero.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Int32Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::execution::SessionState;
use iceberg::spec::{DataContentType, FormatVersion};

use super::live_files::{DataFileIndex, LiveFile, live_files};
use super::rewrite_data_files::parse_filter;
use crate::commit::{
    DeleteFile, FileKey, Removal, Rewrite, RowDeltaCheck, SnapshotChange, commit_snapshot,
};
use crate::deletes::read_position_delete_file;
use crate::error::{Error, Result};
use crate::io::normalize_location;
use crate::provider::IcebergTableProvider;
use crate::write::position_deletes::write_position_deletes;

/// Spark's options of the procedure; Petrel rewrites whatever needs rewriting, so they are
/// accepted and change nothing.
const ACCEPTED_OPTIONS: &[&str] = &[
    "rewrite-all",
    "min-input-files",
    "target-file-size-bytes",
    "min-file-size-bytes",
    "max-file-size-bytes",
    "max-file-group-size-bytes",
    "partial-progress.enabled",
    "partial-progress.max-commits",
    "max-concurrent-file-group-rewrites",
    "rewrite-job-order",
];

/// What `rewrite_position_delete_files` did: Spark's result row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RewritePositionDeletesResult {
    /// Position-delete files removed.
    pub rewritten_delete_files_count: usize,
    /// Position-delete files written.
    pub added_delete_files_count: usize,
    /// Bytes of the files removed.
    pub rewritten_bytes_count: u64,
    /// Bytes of the files written.
    pub added_bytes_count: u64,
    /// The snapshot committed, if any.
    pub snapshot_id: Option<i64>,
}

impl RewritePositionDeletesResult {
    /// Spark's output schema.
    pub fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("rewritten_delete_files_count", DataType::Int32, false),
            Field::new("added_delete_files_count", DataType::Int32, false),
            Field::new("rewritten_bytes_count", DataType::Int64, false),
            Field::new("added_bytes_count", DataType::Int64, false),
        ]))
    }

    /// The result as Spark's one-row output.
    pub fn to_batch(&self) -> Result<RecordBatch> {
        let int = |n: usize| Arc::new(Int32Array::from(vec![n as i32]));
        let long = |n: u64| Arc::new(Int64Array::from(vec![n as i64]));
        Ok(RecordBatch::try_new(
            Self::schema(),
            vec![
                int(self.rewritten_delete_files_count),
                int(self.added_delete_files_count),
                long(self.rewritten_bytes_count),
                long(self.added_bytes_count),
            ],
        )?)
    }
}

/// Checks the procedure's `options` (Spark's names).
pub fn check_position_delete_options(options: &BTreeMap<String, String>) -> Result<()> {
    match options
        .keys()
        .find(|k| !ACCEPTED_OPTIONS.contains(&k.as_str()))
    {
        Some(unknown) => Err(Error::InvalidArgument(format!(
            "rewrite_position_delete_files: unknown option {unknown}"
        ))),
        None => Ok(()),
    }
}

/// Rewrites the position-delete files of `table` (a provider at its current snapshot, with its
/// catalog) that apply to the data files `filter` may select (all without one), as described in
/// the module docs.
pub async fn rewrite_position_delete_files(
    state: &SessionState,
    table: &IcebergTableProvider,
    filter: Option<&str>,
) -> Result<RewritePositionDeletesResult> {
    let loaded = table.table();
    let name = loaded.ident().to_string();
    let metadata = loaded.metadata();
    let catalog = table.catalog().ok_or_else(|| Error::Unsupported {
        table: name.clone(),
        message: "the table is read-only here".into(),
    })?;
    let Some(snapshot_id) = table.snapshot_id() else {
        return Ok(RewritePositionDeletesResult::default());
    };
    if metadata.format_version() != FormatVersion::V2 {
        return Ok(RewritePositionDeletesResult::default());
    }
    if metadata.current_snapshot_id() != Some(snapshot_id) {
        return Err(Error::Unsupported {
            table: name,
            message: "rewrite_position_delete_files rewrites the table's current snapshot".into(),
        });
    }
    let selected: Option<HashSet<String>> = match filter {
        Some(sql) => {
            let plan = table
                .plan(&[parse_filter(state, table, sql)?], None, 1)
                .await?;
            Some(plan.tasks().map(|t| t.file.path.clone()).collect())
        }
        None => None,
    };
    let live = live_files(loaded, table.manifest_cache(), snapshot_id).await?;
    let index = DataFileIndex::new(&live, |_| true);
    let position_deletes: Vec<&LiveFile> = live
        .deletes
        .iter()
        .filter(|d| d.file.content_type() == DataContentType::PositionDeletes)
        .collect();

    // Which delete files apply to which data file, and so which must be rewritten.
    let mut per_data_file: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut targets: Vec<Vec<&LiveFile>> = Vec::with_capacity(position_deletes.len());
    for (i, delete) in position_deletes.iter().enumerate() {
        let applying = index.applying_to(delete);
        for data in &applying {
            per_data_file
                .entry(data.file.file_path())
                .or_default()
                .push(i);
        }
        targets.push(applying);
    }
    let mut rewrite: Vec<bool> = position_deletes
        .iter()
        .zip(&targets)
        .map(|(delete, applying)| delete.referenced_data_file().is_none() || applying.is_empty())
        .collect();
    for deletes in per_data_file.values().filter(|d| d.len() > 1) {
        for &i in deletes {
            rewrite[i] = true;
        }
    }
    if let Some(selected) = &selected {
        for (i, applying) in targets.iter().enumerate() {
            rewrite[i] &= applying
                .iter()
                .any(|d| selected.contains(d.file.file_path()));
        }
    }
    if !rewrite.iter().any(|r| *r) {
        return Ok(RewritePositionDeletesResult::default());
    }

    // The positions of the rewritten files, per live data file they apply to.
    let mut merged: BTreeMap<String, (&LiveFile, Vec<u64>)> = BTreeMap::new();
    let mut removed = HashSet::new();
    let mut rewritten_bytes = 0;
    for (i, delete) in position_deletes.iter().enumerate() {
        if !rewrite[i] {
            continue;
        }
        removed.insert(FileKey::of(&delete.file));
        rewritten_bytes += delete.file.file_size_in_bytes();
        if targets[i].is_empty() {
            continue;
        }
        let (by_file, _) = read_position_delete_file(
            loaded.io(),
            &name,
            delete.file.file_path(),
            delete.file.file_size_in_bytes(),
        )
        .await?;
        for data in &targets[i] {
            let path = data.file.file_path();
            if let Some(positions) = by_file.get(&normalize_location(path)) {
                merged
                    .entry(path.to_string())
                    .or_insert_with(|| (*data, Vec::new()))
                    .1
                    .extend(positions.iter().copied());
            }
        }
    }

    let mut added: Vec<DeleteFile> = Vec::with_capacity(merged.len());
    for (path, (data, mut positions)) in merged {
        positions.sort_unstable();
        positions.dedup();
        let written = write_position_deletes(
            loaded,
            data.spec_id,
            data.file.partition(),
            &[(path.as_str(), &positions)],
        )
        .await;
        match written {
            Ok(file) => added.push(DeleteFile {
                spec_id: data.spec_id,
                file,
            }),
            Err(e) => {
                delete_all(table, &added).await;
                return Err(e);
            }
        }
    }
    let result = RewritePositionDeletesResult {
        rewritten_delete_files_count: removed.len(),
        added_delete_files_count: added.len(),
        rewritten_bytes_count: rewritten_bytes,
        added_bytes_count: added.iter().map(|d| d.file.file_size_in_bytes()).sum(),
        snapshot_id: None,
    };
    let change = SnapshotChange {
        added_deletes: added.clone(),
        removal: Removal::Files(removed),
        rewrite: Some(Rewrite {
            read: RowDeltaCheck {
                from_snapshot_id: snapshot_id,
                data_files: HashSet::new(),
                conflict_filter: None,
            },
            data_sequence_number: metadata
                .current_snapshot()
                .map_or(0, |s| s.sequence_number()),
        }),
        ..SnapshotChange::default()
    };
    match commit_snapshot(catalog.as_ref(), loaded.clone(), change).await {
        Ok(outcome) => Ok(RewritePositionDeletesResult {
            snapshot_id: Some(outcome.snapshot_id),
            ..result
        }),
        Err(e) => {
            if !matches!(e, Error::CommitStateUnknown { .. }) {
                delete_all(table, &added).await;
            }
            Err(e)
        }
    }
}

async fn delete_all(table: &IcebergTableProvider, files: &[DeleteFile]) {
    for file in files {
        let _ = table.table().io().delete(file.file.file_path()).await;
    }
}
