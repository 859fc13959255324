//! [`IcebergMergeExec`]: runs a MERGE — writes its updated and inserted rows, deletes the old
//! versions of the target rows it updates or deletes, and commits it all as one snapshot.
//!
//! ```text
//! IcebergMergeExec          (one partition: commit, `count`)
//!   └─ write_rows: IcebergWriteExec (N partitions)
//!        └─ MergeRowsExec   (actions applied, positions recorded, cardinality checked)
//!             └─ LineageExec (format 3: each row's `_row_id`, from its file and position)
//!                  └─ the plan's rows (action, new values, file, position)
//! ```
//!
//! The changed positions become deletes as for DELETE and UPDATE (`delete_positions`), in the
//! table's `write.merge.mode` (merge-on-read: position deletes / deletion vectors;
//! copy-on-write: the files rewritten), with the new rows in the same snapshot and the
//! row-delta checks before each attempt. A MERGE that only inserts commits an `append`
//! (as Spark does); one that changes nothing commits nothing.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::{RecordBatch, UInt64Array};
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use super::delete_exec::{commit_or_clean_up, delete_positions, row_level_mode};
use super::lineage::{
    LineageExec, SequenceNumbers, SnapshotLineage, tracks_lineage, with_lineage_fields,
};
use super::merge_rows::{MergeRowsExec, MergeTally};
use super::write_rows::write_rows;
use crate::catalog::Catalog;
use crate::commit::SnapshotChange;
use crate::dml::count_properties;
use crate::provider::IcebergTableProvider;
use crate::write::distribution::MERGE_DISTRIBUTION_MODE;

/// The table property naming MERGE's mode.
const MERGE_MODE: &str = "write.merge.mode";

/// Runs a MERGE over its input's rows (see the module docs); returns `count`, the rows
/// updated, deleted and inserted.
#[derive(Debug)]
pub struct IcebergMergeExec {
    input: Arc<dyn ExecutionPlan>,
    catalog: Arc<dyn Catalog>,
    provider: Arc<IcebergTableProvider>,
    check_cardinality: bool,
    properties: Arc<PlanProperties>,
}

impl IcebergMergeExec {
    /// A MERGE into the table `provider` read, of the rows `input` produces (action, the
    /// table's columns, file path, position); `check_cardinality`: fail when a target row is
    /// matched by several source rows.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        catalog: Arc<dyn Catalog>,
        provider: Arc<IcebergTableProvider>,
        check_cardinality: bool,
    ) -> Self {
        Self {
            input,
            catalog,
            provider,
            check_cardinality,
            properties: count_properties(),
        }
    }
}

impl DisplayAs for IcebergMergeExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IcebergMergeExec: table={} snapshot={} mode={}",
            self.provider.table().ident(),
            self.provider
                .snapshot_id()
                .map_or_else(|| "none".to_string(), |s| s.to_string()),
            row_level_mode(self.provider.table(), MERGE_MODE)
        )
    }
}

impl ExecutionPlan for IcebergMergeExec {
    fn name(&self) -> &str {
        "IcebergMergeExec"
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

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let input = children
            .pop()
            .ok_or_else(|| DataFusionError::Internal("IcebergMergeExec needs an input".into()))?;
        Ok(Arc::new(Self::new(
            input,
            Arc::clone(&self.catalog),
            Arc::clone(&self.provider),
            self.check_cardinality,
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "IcebergMergeExec has one partition, not {partition}"
            )));
        }
        let provider = Arc::clone(&self.provider);
        let catalog = Arc::clone(&self.catalog);
        let tally: Arc<Mutex<MergeTally>> = Arc::default();
        let input = Arc::clone(&self.input);
        let check_cardinality = self.check_cardinality;
        let schema = self.schema();
        let out_schema = Arc::clone(&schema);
        let stream = futures::stream::once(async move {
            // Format 3: updated rows keep their `_row_id`, inserted rows get new ones.
            let (input, row_schema) = if tracks_lineage(provider.table().metadata()) {
                let lineage = SnapshotLineage::load(&provider).await?;
                let with_lineage: Arc<dyn ExecutionPlan> = Arc::new(LineageExec::new(
                    input,
                    lineage,
                    SequenceNumbers::Reset,
                    false,
                ));
                (with_lineage, with_lineage_fields(&provider.schema()))
            } else {
                (input, provider.schema())
            };
            let rows: Arc<dyn ExecutionPlan> = Arc::new(MergeRowsExec::new(
                input,
                Arc::clone(&tally),
                check_cardinality,
                provider.table().ident().to_string(),
                row_schema,
            ));
            let new_rows = write_rows(&provider, &context, rows, MERGE_DISTRIBUTION_MODE).await?;
            let tally = std::mem::take(&mut *tally.lock().unwrap_or_else(PoisonError::into_inner));
            let count = tally.updated + tally.deleted + tally.inserted;
            if !tally.changed.is_empty() {
                delete_positions(
                    catalog.as_ref(),
                    &provider,
                    &context,
                    tally.changed,
                    MERGE_MODE,
                    new_rows,
                )
                .await?;
            } else if !new_rows.is_empty() {
                // Only inserts: an append, as Spark commits an insert-only MERGE.
                let written: Vec<String> =
                    new_rows.iter().map(|f| f.file_path().to_string()).collect();
                commit_or_clean_up(
                    catalog.as_ref(),
                    provider.table(),
                    SnapshotChange::append(new_rows),
                    &written,
                )
                .await?;
            }
            Ok(RecordBatch::try_new(
                out_schema,
                vec![Arc::new(UInt64Array::from(vec![count]))],
            )?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}
