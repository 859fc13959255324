//! [`PositionColumnsExec`]: the rows of a positional scan (the table's columns, then each row's
//! data file and position) without those two columns, after using them: copy-on-write drops
//! the rows at deleted positions, UPDATE records the positions of the rows it rewrites.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::{AsArray, BooleanArray, BooleanBufferBuilder, RecordBatch};
use arrow::datatypes::{Int64Type, SchemaRef};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::StreamExt;
use roaring::RoaringTreemap;

use super::delete_exec::collect_positions;

/// Positions by data file (locations as the manifests name them).
pub(super) type Positions = BTreeMap<String, RoaringTreemap>;

/// What [`PositionColumnsExec`] does with the positions.
#[derive(Debug, Clone)]
pub(super) enum PositionUse {
    /// Drop the rows at these positions (copy-on-write keeps the others).
    Drop(Arc<Positions>),
    /// Record every row's position here (UPDATE: the old versions to delete).
    Record(Arc<Mutex<Positions>>),
}

/// The rows of a positional scan without their file path and position columns (see the module
/// docs).
#[derive(Debug)]
pub(super) struct PositionColumnsExec {
    input: Arc<dyn ExecutionPlan>,
    positions: PositionUse,
    properties: Arc<PlanProperties>,
}

impl PositionColumnsExec {
    /// Over `input`, whose columns are `schema`'s, then file path and position.
    pub(super) fn new(
        input: Arc<dyn ExecutionPlan>,
        positions: PositionUse,
        schema: SchemaRef,
    ) -> Self {
        let partitions = input.properties().output_partitioning().partition_count();
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Self {
            input,
            positions,
            properties,
        }
    }
}

impl DisplayAs for PositionColumnsExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.positions {
            PositionUse::Drop(positions) => {
                write!(
                    f,
                    "PositionColumnsExec: drop positions in {} files",
                    positions.len()
                )
            }
            PositionUse::Record(_) => write!(f, "PositionColumnsExec: record positions"),
        }
    }
}

impl ExecutionPlan for PositionColumnsExec {
    fn name(&self) -> &str {
        "PositionColumnsExec"
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

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let input = children.pop().ok_or_else(|| {
            DataFusionError::Internal("PositionColumnsExec needs an input".into())
        })?;
        Ok(Arc::new(Self::new(
            input,
            self.positions.clone(),
            self.schema(),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let positions = self.positions.clone();
        let schema = self.schema();
        let out_schema = Arc::clone(&schema);
        let stream = input.map(move |batch| {
            let batch = batch?;
            let batch = match &positions {
                PositionUse::Drop(deleted) => without_positions(&batch, deleted)?,
                PositionUse::Record(seen) => {
                    collect_positions(
                        &batch,
                        &mut seen.lock().unwrap_or_else(PoisonError::into_inner),
                    )?;
                    batch
                }
            };
            let columns = batch.num_columns().saturating_sub(2);
            Ok(RecordBatch::try_new(
                Arc::clone(&out_schema),
                batch.columns()[..columns].to_vec(),
            )?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// `batch` without the rows at `deleted` positions (by its last two columns).
fn without_positions(batch: &RecordBatch, deleted: &Positions) -> DFResult<RecordBatch> {
    let columns = batch.num_columns();
    if columns < 2 {
        return Err(DataFusionError::Internal(
            "a positional scan has file and position columns".into(),
        ));
    }
    let files = batch.column(columns - 2).as_string::<i32>();
    let rows = batch.column(columns - 1).as_primitive::<Int64Type>();
    let mut keep = BooleanBufferBuilder::new(batch.num_rows());
    for i in 0..batch.num_rows() {
        let gone = deleted
            .get(files.value(i))
            .is_some_and(|set| set.contains(rows.value(i) as u64));
        keep.append(!gone);
    }
    Ok(arrow::compute::filter_record_batch(
        batch,
        &BooleanArray::new(keep.finish(), None),
    )?)
}
