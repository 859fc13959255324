//! [`IcebergCommitExec`]: gathers the written data files and commits them as one snapshot (with
//! the equality-delete files of an upsert: one `overwrite`, as Flink's upsert commits a row delta),
//! or, for a table replacement ([`IcebergCommitExec::replacing`]), as the first snapshot of the
//! replaced table in the same commit as the new schema (see [`crate::commit::replace`]).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch, UInt64Array};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::TryStreamExt;
use iceberg::spec::{DataContentType, DataFile, deserialize_data_file_from_json};

use super::count::count_properties;
use super::write_exec::DATA_FILE_COLUMN;
use crate::catalog::{Catalog, LoadedTable};
use crate::commit::retry::commit_snapshot_to_branch;
use crate::commit::{DeleteFile, Removal, SnapshotChange, TableReplacement, commit_replacement};
use crate::error::Error;
use crate::write::data_file_writer::WriteSettings;

/// What a write does to the rows already in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// `INSERT INTO`: keeps them.
    Append,
    /// `INSERT INTO` a table that upserts: replaces the rows with the keys written (the writer
    /// adds equality-delete files, see [`crate::write::upsert`]).
    Upsert,
    /// `INSERT OVERWRITE`, dynamic as in Spark: replaces the partitions the new rows are in (all
    /// rows of an unpartitioned table, even when nothing is written).
    OverwritePartitions,
}

impl WriteMode {
    /// The files of `table`'s current snapshot that writing `files` removes.
    fn removal(self, table: &LoadedTable, files: &[DataFile]) -> Removal {
        let spec = table.metadata().default_partition_spec();
        match self {
            Self::Append | Self::Upsert => Removal::Nothing,
            Self::OverwritePartitions if spec.is_unpartitioned() => Removal::Everything,
            Self::OverwritePartitions => Removal::Partitions(
                files
                    .iter()
                    .map(|f| (spec.spec_id(), f.partition().clone()))
                    .collect(),
            ),
        }
    }
}

/// Commits the data files its (single-partition) input describes as one snapshot on `main`, or
/// on another branch ([`IcebergCommitExec::with_branch`]: `INSERT INTO t.branch_b`), as an
/// append or an overwrite, and returns the number of rows written as `count`.
#[derive(Debug)]
pub struct IcebergCommitExec {
    input: Arc<dyn ExecutionPlan>,
    catalog: Arc<dyn Catalog>,
    table: LoadedTable,
    mode: WriteMode,
    /// The write below, whose started files a failure deletes.
    write: Arc<WriteSettings>,
    /// The branch committed to.
    branch: String,
    /// For a replacement: the table as loaded before it (`table` is the replacement staged on
    /// it) and what replaces it.
    replacement: Option<(LoadedTable, Arc<TableReplacement>)>,
    properties: Arc<PlanProperties>,
}

impl IcebergCommitExec {
    /// Commits what `input` (one partition) wrote with `write` for `table` through `catalog`.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        catalog: Arc<dyn Catalog>,
        table: LoadedTable,
        mode: WriteMode,
        write: Arc<WriteSettings>,
    ) -> Self {
        let properties = count_properties();
        Self {
            input,
            catalog,
            table,
            mode,
            write,
            branch: iceberg::spec::MAIN_BRANCH.to_string(),
            replacement: None,
            properties,
        }
    }

    /// Commits the files (written for `self`'s table: `replacement` staged on `base`) as the
    /// replacement of `base`, even when there are none (the table is then empty).
    pub fn replacing(mut self, base: LoadedTable, replacement: Arc<TableReplacement>) -> Self {
        self.replacement = Some((base, replacement));
        self
    }

    /// Commits to `branch` instead of `main`.
    pub fn with_branch(mut self, branch: &str) -> Self {
        self.branch = branch.to_string();
        self
    }
}

impl DisplayAs for IcebergCommitExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let operation = match self.mode {
            _ if self.replacement.is_some() => "replace-table",
            WriteMode::Append => "append",
            WriteMode::Upsert => "upsert",
            WriteMode::OverwritePartitions => "overwrite-partitions",
        };
        write!(
            f,
            "IcebergCommitExec: table={} operation={operation}",
            self.table.ident()
        )
    }
}

impl ExecutionPlan for IcebergCommitExec {
    fn name(&self) -> &str {
        "IcebergCommitExec"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn required_input_distribution(&self) -> Vec<datafusion::physical_plan::Distribution> {
        vec![datafusion::physical_plan::Distribution::SinglePartition]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let input = children
            .pop()
            .ok_or_else(|| DataFusionError::Internal("IcebergCommitExec needs an input".into()))?;
        let mut exec = Self::new(
            input,
            Arc::clone(&self.catalog),
            self.table.clone(),
            self.mode,
            Arc::clone(&self.write),
        )
        .with_branch(&self.branch);
        exec.replacement = self.replacement.clone();
        Ok(Arc::new(exec))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "IcebergCommitExec has one partition, not {partition}"
            )));
        }
        let input = self.input.execute(0, context)?;
        let catalog = Arc::clone(&self.catalog);
        let table = self.table.clone();
        let mode = self.mode;
        let write = Arc::clone(&self.write);
        let branch = self.branch.clone();
        let replacement = self.replacement.clone();
        let schema = self.schema();
        let out_schema = Arc::clone(&schema);
        let stream = futures::stream::once(async move {
            let tracker = Arc::clone(write.tracker());
            let mut abandon_on_drop = tracker.abandon_on_drop(table.io());
            let result: DFResult<u64> = async {
                let batches: Vec<RecordBatch> = input.try_collect().await?;
                let (files, deletes): (Vec<DataFile>, Vec<DataFile>) =
                    read_data_files(&table, &batches)?
                        .into_iter()
                        .partition(|f| f.content_type() == DataContentType::Data);
                let rows: u64 = files.iter().map(DataFile::record_count).sum();
                let spec_id = table.metadata().default_partition_spec_id();
                let added_deletes: Vec<DeleteFile> = deletes
                    .into_iter()
                    .map(|file| DeleteFile { spec_id, file })
                    .collect();
                let removal = mode.removal(&table, &files);
                let nothing_to_remove =
                    removal.is_nothing() || table.metadata().current_snapshot().is_none();
                abandon_on_drop.disarm();
                if let Some((base, replacement)) = replacement {
                    if !added_deletes.is_empty() {
                        return Err(DataFusionError::Internal(
                            "a table replacement wrote delete files".into(),
                        ));
                    }
                    commit_replacement(catalog.as_ref(), base, &table, replacement, files).await?;
                } else if !(files.is_empty() && nothing_to_remove) {
                    let change = SnapshotChange {
                        added: files,
                        added_deletes,
                        removal,
                        ..SnapshotChange::default()
                    };
                    commit_snapshot_to_branch(catalog.as_ref(), table.clone(), change, &branch)
                        .await?;
                }
                Ok(rows)
            }
            .await;
            match result {
                Ok(rows) => Ok(RecordBatch::try_new(
                    out_schema,
                    vec![Arc::new(UInt64Array::from(vec![rows]))],
                )?),
                Err(error) => {
                    // An unknown commit outcome may have made the files live: keep them.
                    abandon_on_drop.disarm();
                    if !is_commit_state_unknown(&error) {
                        tracker.abandon(table.io()).await;
                    }
                    Err(error)
                }
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// Whether `error` is (or wraps) a commit whose outcome is unknown.
fn is_commit_state_unknown(error: &DataFusionError) -> bool {
    match error {
        DataFusionError::External(e) => {
            matches!(
                e.downcast_ref::<Error>(),
                Some(Error::CommitStateUnknown { .. })
            )
        }
        DataFusionError::Context(_, inner) => is_commit_state_unknown(inner),
        _ => false,
    }
}

/// The data files the write node described.
pub(crate) fn read_data_files(
    table: &LoadedTable,
    batches: &[RecordBatch],
) -> DFResult<Vec<DataFile>> {
    let metadata = table.metadata();
    let spec = metadata.default_partition_spec();
    let schema = metadata.current_schema();
    let partition_type = spec.partition_type(schema).map_err(Error::from)?;
    let mut files = Vec::new();
    for batch in batches {
        let column = batch
            .column_by_name(DATA_FILE_COLUMN)
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| DataFusionError::Internal("write output has no data files".into()))?;
        for i in 0..column.len() {
            files.push(
                deserialize_data_file_from_json(
                    column.value(i),
                    spec.spec_id(),
                    &partition_type,
                    schema,
                )
                .map_err(Error::from)?,
            );
        }
    }
    Ok(files)
}
