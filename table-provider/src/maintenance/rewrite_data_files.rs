//! `rewrite_data_files`: Spark's compaction procedure with its bin-pack strategy. Small (or too
//! large, or heavily deleted) data files are read with every delete applied and written again
//! at the target size, in one `replace` snapshot that also removes the delete files no remaining
//! data file needs, so a full rewrite leaves no position, deletion-vector or equality delete.
//!
//! ```text
//! ScanPlanner (the `where` filter: files that may hold matching rows)
//!   ─► live files of the snapshot read (partition, sequence numbers, deletes that may apply)
//!   ─► bin-pack selection per partition of the current spec (Spark's options and defaults)
//!   ─► IcebergScanExec over only those files (position deletes, DVs, equality deletes applied)
//!        └─► IcebergWriteExec (one writer, current spec, rolling at target-file-size-bytes)
//!   ─► commit: Removal::Files(rewritten data files + dangling delete files), the new files at
//!      the data sequence number of the snapshot read, validated before each attempt
//! ```
//!
//! The new files keep the snapshot's data sequence number (Spark's default
//! `use-starting-sequence-number=true`, Java's `RewriteFiles.dataSequenceNumber`): equality
//! deletes committed concurrently still apply to the rewritten rows, and the ones the rewrite
//! applied, whose sequence numbers are at most that number, no longer match them. Before each
//! commit attempt the rewritten files must still be live and have received no new position
//! delete (`commit::validation::validate_rewrite`); otherwise the rewrite fails with
//! [`Error::ConcurrentModification`] and writes nothing. Concurrent appends only cause a retry.
//!
//! Not done: partial progress (one commit for all groups), `max-concurrent-file-group-rewrites`
//! (one writer), `sort` / `zorder` strategies.
//!
//! In format 3 the rows keep their lineage: the files are read by a positional scan and each
//! row's `_row_id` and `_last_updated_sequence_number` written explicitly
//! (`row_level::lineage`), as Spark's rewrite does.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Int32Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::DFSchema;
use datafusion::execution::{SessionState, TaskContext};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use futures::TryStreamExt;
use iceberg::spec::{DataContentType, DataFile, Struct};

use super::live_files::{DataFileIndex, LiveFile, LiveFiles, live_files};
use crate::commit::{FileKey, Removal, Rewrite, RowDeltaCheck, SnapshotChange, commit_snapshot};
use crate::dml::{IcebergWriteExec, read_data_files};
use crate::error::{Error, Result};
use crate::provider::IcebergTableProvider;
use crate::row_level::lineage::{
    LineageExec, SequenceNumbers, SnapshotLineage, tracks_lineage, with_lineage_fields,
};
use crate::write::data_file_writer::WriteSettings;

/// Spark's default `min-input-files`.
const MIN_INPUT_FILES: usize = 5;
/// Spark's default `delete-ratio-threshold`.
const DELETE_RATIO_THRESHOLD: f64 = 0.3;
/// Iceberg's default `write.target-file-size-bytes`.
const DEFAULT_TARGET_FILE_SIZE: u64 = 512 * 1024 * 1024;

/// Options Spark accepts that do not change what Petrel does (one commit, one writer).
const ACCEPTED_OPTIONS: &[&str] = &[
    "partial-progress.enabled",
    "partial-progress.max-commits",
    "partial-progress.max-failed-commits",
    "max-concurrent-file-group-rewrites",
    "max-file-group-size-bytes",
    "rewrite-job-order",
    "remove-dangling-deletes",
];

/// `rewrite_data_files`' options (Spark's names and defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct RewriteDataFilesOptions {
    /// `target-file-size-bytes`: the size new files roll at (default: the table's
    /// `write.target-file-size-bytes`, 512 MiB).
    pub target_file_size_bytes: Option<u64>,
    /// `min-file-size-bytes`: smaller files are rewritten (default 75% of the target).
    pub min_file_size_bytes: Option<u64>,
    /// `max-file-size-bytes`: larger files are rewritten (default 180% of the target).
    pub max_file_size_bytes: Option<u64>,
    /// `min-input-files`: a partition's files are rewritten when it has at least this many
    /// candidates (default 5).
    pub min_input_files: usize,
    /// `rewrite-all`: every file the `where` filter selects, whatever its size.
    pub rewrite_all: bool,
    /// `delete-file-threshold`: files with at least this many delete files are rewritten.
    pub delete_file_threshold: usize,
    /// `delete-ratio-threshold`: files whose file-scoped deletes remove at least this share of
    /// their rows are rewritten (default 0.3).
    pub delete_ratio_threshold: f64,
}

impl Default for RewriteDataFilesOptions {
    fn default() -> Self {
        Self {
            target_file_size_bytes: None,
            min_file_size_bytes: None,
            max_file_size_bytes: None,
            min_input_files: MIN_INPUT_FILES,
            rewrite_all: false,
            delete_file_threshold: i32::MAX as usize,
            delete_ratio_threshold: DELETE_RATIO_THRESHOLD,
        }
    }
}

impl RewriteDataFilesOptions {
    /// The options of a `map(...)` argument; unknown names and invalid values are refused, as
    /// Spark refuses them.
    pub fn parse(options: &BTreeMap<String, String>) -> Result<Self> {
        let mut out = Self::default();
        let invalid = |key: &str, value: &str, what: &str| {
            Error::InvalidArgument(format!(
                "rewrite_data_files: option {key} = {value:?}: {what}"
            ))
        };
        for (key, value) in options {
            let text = value.trim();
            let bytes = || {
                text.parse::<u64>()
                    .map_err(|_| invalid(key, value, "expected a number of bytes"))
            };
            match key.as_str() {
                "target-file-size-bytes" => out.target_file_size_bytes = Some(bytes()?.max(1)),
                "min-file-size-bytes" => out.min_file_size_bytes = Some(bytes()?),
                "max-file-size-bytes" => out.max_file_size_bytes = Some(bytes()?),
                "min-input-files" => {
                    out.min_input_files = text
                        .parse::<usize>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| invalid(key, value, "expected a positive count"))?;
                }
                "delete-file-threshold" => {
                    out.delete_file_threshold = text
                        .parse::<usize>()
                        .map_err(|_| invalid(key, value, "expected a count"))?;
                }
                "delete-ratio-threshold" => {
                    out.delete_ratio_threshold = text
                        .parse::<f64>()
                        .ok()
                        .filter(|r| (0.0..=1.0).contains(r))
                        .ok_or_else(|| invalid(key, value, "expected a ratio in [0, 1]"))?;
                }
                "rewrite-all" => out.rewrite_all = parse_bool(key, value)?,
                "use-starting-sequence-number" => {
                    if !parse_bool(key, value)? {
                        return Err(invalid(
                            key,
                            value,
                            "only true is supported (the new files keep the sequence number of \
                             the snapshot read, which keeps equality deletes correct)",
                        ));
                    }
                }
                other if ACCEPTED_OPTIONS.contains(&other) => {}
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "rewrite_data_files: unknown option {other}"
                    )));
                }
            }
        }
        Ok(out)
    }
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::InvalidArgument(format!(
            "rewrite_data_files: option {key} = {value:?}: expected true or false"
        ))),
    }
}

/// What `rewrite_data_files` did: Spark's result row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RewriteDataFilesResult {
    /// Data files rewritten (removed).
    pub rewritten_data_files_count: usize,
    /// Data files written.
    pub added_data_files_count: usize,
    /// Bytes of the data files rewritten.
    pub rewritten_bytes_count: u64,
    /// Data files whose group failed (always 0: one commit for all groups).
    pub failed_data_files_count: usize,
    /// Delete files removed because no remaining data file needs them.
    pub removed_delete_files_count: usize,
    /// The snapshot committed, if any.
    pub snapshot_id: Option<i64>,
}

impl RewriteDataFilesResult {
    /// Spark's output schema.
    pub fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("rewritten_data_files_count", DataType::Int32, false),
            Field::new("added_data_files_count", DataType::Int32, false),
            Field::new("rewritten_bytes_count", DataType::Int64, false),
            Field::new("failed_data_files_count", DataType::Int32, false),
            Field::new("removed_delete_files_count", DataType::Int32, false),
        ]))
    }

    /// The result as Spark's one-row output.
    pub fn to_batch(&self) -> Result<RecordBatch> {
        let int = |n: usize| Arc::new(Int32Array::from(vec![n as i32]));
        Ok(RecordBatch::try_new(
            Self::schema(),
            vec![
                int(self.rewritten_data_files_count),
                int(self.added_data_files_count),
                Arc::new(Int64Array::from(vec![self.rewritten_bytes_count as i64])),
                int(self.failed_data_files_count),
                int(self.removed_delete_files_count),
            ],
        )?)
    }
}

/// Compacts `table` (a provider at the table's current snapshot, with its catalog): the data
/// files that may hold rows matching `filter` (a SQL predicate over the table's columns; all
/// files without one) are chosen by Spark's bin-pack rules, rewritten with their deletes
/// applied, and committed as one `replace` snapshot. Nothing to rewrite commits nothing.
pub async fn rewrite_data_files(
    state: &SessionState,
    table: &IcebergTableProvider,
    filter: Option<&str>,
    options: &RewriteDataFilesOptions,
) -> Result<RewriteDataFilesResult> {
    let loaded = table.table();
    let name = loaded.ident().to_string();
    let metadata = loaded.metadata();
    let catalog = table.catalog().ok_or_else(|| Error::Unsupported {
        table: name.clone(),
        message: "the table is read-only here".into(),
    })?;
    let Some(snapshot_id) = table.snapshot_id() else {
        return Ok(RewriteDataFilesResult::default());
    };
    if metadata.current_snapshot_id() != Some(snapshot_id)
        || metadata.current_schema_id() != table.iceberg_schema().schema_id()
    {
        return Err(Error::Unsupported {
            table: name,
            message: "rewrite_data_files rewrites the table's current snapshot and schema".into(),
        });
    }
    let sequence_number = metadata
        .snapshot_by_id(snapshot_id)
        .map(|s| s.sequence_number())
        .ok_or_else(|| Error::NotFound(format!("table {name}: snapshot {snapshot_id}")))?;

    // The files the filter may select, as the scan planner prunes them.
    let filters = match filter {
        Some(sql) => vec![parse_filter(state, table, sql)?],
        None => Vec::new(),
    };
    let plan = table.plan(&filters, None, 1).await?;
    let selected: HashSet<&str> = plan.tasks().map(|t| t.file.path.as_str()).collect();

    let live = live_files(loaded, table.manifest_cache(), snapshot_id).await?;
    let target = options.target_file_size_bytes.unwrap_or_else(|| {
        metadata
            .properties()
            .get("write.target-file-size-bytes")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(DEFAULT_TARGET_FILE_SIZE)
    });
    let chosen = choose(
        &live,
        &selected,
        options,
        target,
        metadata.default_partition_spec_id(),
    );
    if chosen.is_empty() {
        return Ok(RewriteDataFilesResult::default());
    }
    let rewritten: HashSet<String> = chosen.iter().map(|f| f.file.file_path().into()).collect();
    let remaining = DataFileIndex::new(&live, |f| !rewritten.contains(f.file.file_path()));
    let dangling: Vec<&LiveFile> = live
        .deletes
        .iter()
        .filter(|d| !remaining.any_applies(d))
        .collect();

    // Format 3: the rows keep their lineage, written explicitly (`row_level::lineage`).
    let arrow_schema = if tracks_lineage(metadata) {
        with_lineage_fields(&table.schema())
    } else {
        table.schema()
    };
    let settings = Arc::new(
        WriteSettings::new(name.clone(), metadata, arrow_schema)?.with_target_file_size(target),
    );
    let added = write_rows(state, table, &settings, rewritten.clone()).await?;
    let result = RewriteDataFilesResult {
        rewritten_data_files_count: chosen.len(),
        added_data_files_count: added.len(),
        rewritten_bytes_count: chosen.iter().map(|f| f.file.file_size_in_bytes()).sum(),
        failed_data_files_count: 0,
        removed_delete_files_count: dangling.len(),
        snapshot_id: None,
    };
    let mut removed: HashSet<FileKey> = chosen.iter().map(|f| FileKey::of(&f.file)).collect();
    removed.extend(dangling.iter().map(|d| FileKey::of(&d.file)));
    let change = SnapshotChange {
        added,
        removal: Removal::Files(removed),
        rewrite: Some(Rewrite {
            read: RowDeltaCheck {
                from_snapshot_id: snapshot_id,
                data_files: rewritten,
                conflict_filter: None,
            },
            data_sequence_number: sequence_number,
        }),
        ..SnapshotChange::default()
    };
    match commit_snapshot(catalog.as_ref(), loaded.clone(), change).await {
        Ok(outcome) => Ok(RewriteDataFilesResult {
            snapshot_id: Some(outcome.snapshot_id),
            ..result
        }),
        Err(e) => {
            if !matches!(e, Error::CommitStateUnknown { .. }) {
                settings.tracker().abandon(loaded.io()).await;
            }
            Err(e)
        }
    }
}

/// `sql`, a predicate over `table`'s columns, as a DataFusion expression.
pub(super) fn parse_filter(
    state: &SessionState,
    table: &IcebergTableProvider,
    sql: &str,
) -> Result<datafusion::logical_expr::Expr> {
    let name = table.table().ident().to_string();
    let schema = DFSchema::try_from(table.schema().as_ref().clone())?;
    let expr = state.create_logical_expr(sql, &schema).map_err(|e| {
        Error::InvalidArgument(format!(
            "table {name}: rewrite_data_files where {sql:?}: {e}"
        ))
    })?;
    if let Some(unknown) = expr
        .column_refs()
        .into_iter()
        .find(|c| schema.field_with_unqualified_name(&c.name).is_err())
    {
        return Err(Error::InvalidArgument(format!(
            "table {name}: rewrite_data_files where {sql:?}: no column {}",
            unknown.name
        )));
    }
    Ok(expr)
}

/// Spark's bin-pack selection (`BinPackRewriteFilePlanner`): among the `selected` data files,
/// those outside the size range or with too many deletes, grouped by partition of the current
/// spec `spec_id` (files of other specs in one group), each group kept when it has enough files
/// or content, too much content, or a file with too many deletes; everything with `rewrite-all`.
fn choose<'a>(
    live: &'a LiveFiles,
    selected: &HashSet<&str>,
    options: &RewriteDataFilesOptions,
    target: u64,
    spec_id: i32,
) -> Vec<&'a LiveFile> {
    let min_size = options
        .min_file_size_bytes
        .unwrap_or((target as f64 * 0.75) as u64);
    let max_size = options
        .max_file_size_bytes
        .unwrap_or((target as f64 * 1.8) as u64);
    let all = DataFileIndex::new(live, |_| true);
    let mut delete_counts: HashMap<&str, (usize, u64)> = HashMap::new();
    for delete in &live.deletes {
        let file_scoped = delete.file.content_type() == DataContentType::PositionDeletes
            && delete.referenced_data_file().is_some();
        for data in all.applying_to(delete) {
            let counts = delete_counts.entry(data.file.file_path()).or_default();
            counts.0 += 1;
            if file_scoped {
                counts.1 += delete.file.record_count();
            }
        }
    }
    let too_many_deletes = |file: &LiveFile| {
        let (count, deleted) = delete_counts
            .get(file.file.file_path())
            .copied()
            .unwrap_or_default();
        let rows = file.file.record_count();
        let ratio = if count == 0 || rows == 0 {
            0.0
        } else {
            deleted.min(rows) as f64 / rows as f64
        };
        count >= options.delete_file_threshold
            || (count > 0 && ratio >= options.delete_ratio_threshold)
    };
    let mut groups: HashMap<Struct, Vec<&LiveFile>> = HashMap::new();
    for file in live
        .data
        .iter()
        .filter(|f| selected.contains(f.file.file_path()))
    {
        let size = file.file.file_size_in_bytes();
        let candidate =
            options.rewrite_all || size < min_size || size > max_size || too_many_deletes(file);
        if candidate {
            let partition = if file.spec_id == spec_id {
                file.file.partition().clone()
            } else {
                Struct::empty()
            };
            groups.entry(partition).or_default().push(file);
        }
    }
    groups
        .into_values()
        .filter(|group| {
            let size: u64 = group.iter().map(|f| f.file.file_size_in_bytes()).sum();
            options.rewrite_all
                || (group.len() > 1 && group.len() >= options.min_input_files)
                || (group.len() > 1 && size > target)
                || size > max_size
                || group.iter().any(|f| too_many_deletes(f))
        })
        .flatten()
        .collect()
}

/// Reads the rows of the data files `files` of `table` with their deletes applied and writes
/// them with `settings` (one writer: partitions of the current spec, rolling files); a failure
/// deletes what was written.
async fn write_rows(
    state: &SessionState,
    table: &IcebergTableProvider,
    settings: &Arc<WriteSettings>,
    files: HashSet<String>,
) -> Result<Vec<DataFile>> {
    let loaded = table.table();
    let metadata = loaded.metadata();
    let context = Arc::new(TaskContext::from(state));
    let scan = if tracks_lineage(metadata) {
        // A positional scan: each row's lineage follows from its file and position.
        let lineage = SnapshotLineage::load(table).await?;
        let scan = table
            .positional()
            .only_files(files)
            .scan(state, None, &[], None)
            .await?;
        Arc::new(LineageExec::new(scan, lineage, SequenceNumbers::Keep, true))
    } else {
        table.only_files(files).scan(state, None, &[], None).await?
    };
    let one: Arc<dyn ExecutionPlan> = Arc::new(CoalescePartitionsExec::new(scan));
    let partition_type = settings.spec().partition_type(settings.schema())?;
    let write: Arc<dyn ExecutionPlan> = Arc::new(IcebergWriteExec::new(
        one,
        Arc::clone(settings),
        loaded.io().clone(),
        partition_type,
        metadata.format_version(),
    ));
    let mut abandon_on_drop = settings.tracker().abandon_on_drop(loaded.io());
    let written = async {
        let batches: Vec<RecordBatch> = write.execute(0, context)?.try_collect().await?;
        read_data_files(loaded, &batches)
    }
    .await;
    abandon_on_drop.disarm();
    match written {
        Ok(files) => Ok(files),
        Err(e) => {
            settings.tracker().abandon(loaded.io()).await;
            Err(e.into())
        }
    }
}
