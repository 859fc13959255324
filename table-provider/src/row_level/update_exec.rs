//! [`IcebergUpdateExec`]: writes the new versions of the rows an UPDATE changes and deletes
//! the old ones, in one snapshot.
//!
//! The input (new values, then each row's file path and position) streams through
//! `PositionColumnsExec`, which records the positions and passes the new rows on to the table's
//! writers (`write_rows`, in parallel; in format 3 with each row's `_row_id` and a null
//! `_last_updated_sequence_number`, `lineage`); the positions then become deletes as for DELETE,
//! in the table's `write.update.mode` (merge-on-read: delete files; copy-on-write: the old files
//! rewritten without those rows), committed with the new data files as one `overwrite`.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::{RecordBatch, UInt64Array};
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use roaring::RoaringTreemap;

use super::delete_exec::{delete_positions, row_level_mode};
use super::lineage::{
    LineageExec, SequenceNumbers, SnapshotLineage, tracks_lineage, with_lineage_fields,
};
use super::position_columns::{PositionColumnsExec, PositionUse, Positions};
use super::write_rows::write_rows;
use crate::catalog::Catalog;
use crate::dml::count_properties;
use crate::provider::IcebergTableProvider;
use crate::write::distribution::UPDATE_DISTRIBUTION_MODE;

/// The table property naming UPDATE's mode.
const UPDATE_MODE: &str = "write.update.mode";

/// Updates the rows its input locates; returns `count`, the rows updated.
#[derive(Debug)]
pub struct IcebergUpdateExec {
    input: Arc<dyn ExecutionPlan>,
    catalog: Arc<dyn Catalog>,
    provider: Arc<IcebergTableProvider>,
    properties: Arc<PlanProperties>,
}

impl IcebergUpdateExec {
    /// An UPDATE whose new rows (with file path and position) `input` produces.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        catalog: Arc<dyn Catalog>,
        provider: Arc<IcebergTableProvider>,
    ) -> Self {
        let properties = count_properties();
        Self {
            input,
            catalog,
            provider,
            properties,
        }
    }
}

impl DisplayAs for IcebergUpdateExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IcebergUpdateExec: table={} snapshot={} mode={}",
            self.provider.table().ident(),
            self.provider
                .snapshot_id()
                .map_or_else(|| "none".to_string(), |s| s.to_string()),
            row_level_mode(self.provider.table(), UPDATE_MODE)
        )
    }
}

impl ExecutionPlan for IcebergUpdateExec {
    fn name(&self) -> &str {
        "IcebergUpdateExec"
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
            .ok_or_else(|| DataFusionError::Internal("IcebergUpdateExec needs an input".into()))?;
        Ok(Arc::new(Self::new(
            input,
            Arc::clone(&self.catalog),
            Arc::clone(&self.provider),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "IcebergUpdateExec has one partition, not {partition}"
            )));
        }
        let provider = Arc::clone(&self.provider);
        let catalog = Arc::clone(&self.catalog);
        let positions: Arc<Mutex<Positions>> = Arc::default();
        let input = Arc::clone(&self.input);
        let schema = self.schema();
        let out_schema = Arc::clone(&schema);
        let stream = futures::stream::once(async move {
            // Format 3: the new versions keep the rows' `_row_id`.
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
            let tap: Arc<dyn ExecutionPlan> = Arc::new(PositionColumnsExec::new(
                input,
                PositionUse::Record(Arc::clone(&positions)),
                row_schema,
            ));
            let new_rows = write_rows(&provider, &context, tap, UPDATE_DISTRIBUTION_MODE).await?;
            let positions =
                std::mem::take(&mut *positions.lock().unwrap_or_else(PoisonError::into_inner));
            let updated: u64 = positions.values().map(RoaringTreemap::len).sum();
            if updated > 0 {
                delete_positions(
                    catalog.as_ref(),
                    &provider,
                    &context,
                    positions,
                    UPDATE_MODE,
                    new_rows,
                )
                .await?;
            }
            Ok(RecordBatch::try_new(
                out_schema,
                vec![Arc::new(UInt64Array::from(vec![updated]))],
            )?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}
