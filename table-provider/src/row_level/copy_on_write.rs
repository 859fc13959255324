//! Copy-on-write: the data files a row-level write changes, rewritten without the rows it
//! deletes.
//!
//! The files are read again by a positional scan of the same snapshot restricted to them (so
//! their earlier deletes are applied and every row's position is known),
//! [`DropPositionsExec`] drops the deleted positions, and the table's own writers
//! (`IcebergWriteExec`: partitioning by the current spec, rolling files, metrics) write what
//! is left. The commit then removes the old files, with their file-scoped deletes, and adds
//! the new ones. In format 3 the rewritten rows get new row ids (keeping `_row_id` through a
//! rewrite is not done yet).

use std::any::Any;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray, BooleanBufferBuilder, RecordBatch};
use arrow::datatypes::{Int64Type, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, SessionStateBuilder, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::DataFile;
use roaring::RoaringTreemap;

use crate::dml::{IcebergWriteExec, read_data_files};
use crate::error::{Error, Result};
use crate::provider::IcebergTableProvider;
use crate::write::data_file_writer::WriteSettings;

/// Rewrites the data files of `positions` (by location) of `table`'s snapshot without those
/// positions; returns the new data files (none for a file whose every row goes). A failure
/// deletes what was written.
pub(super) async fn rewrite_without(
    table: &IcebergTableProvider,
    context: &Arc<TaskContext>,
    positions: &Arc<BTreeMap<String, RoaringTreemap>>,
) -> Result<Vec<DataFile>> {
    let loaded = table.table();
    let name = loaded.ident().to_string();
    let metadata = loaded.metadata();
    if metadata.current_schema_id() != table.iceberg_schema().schema_id() {
        return Err(Error::Unsupported {
            table: name,
            message: "the table's schema changed since it was loaded; run the statement again"
                .into(),
        });
    }
    let files: HashSet<String> = positions.keys().cloned().collect();
    let state = SessionStateBuilder::new()
        .with_config(context.session_config().clone())
        .with_runtime_env(context.runtime_env())
        .with_default_features()
        .build();
    let scan = table
        .positional()
        .only_files(files)
        .scan(&state, None, &[], None)
        .await?;
    let arrow_schema = table.schema();
    let kept: Arc<dyn ExecutionPlan> = Arc::new(DropPositionsExec::new(
        scan,
        Arc::clone(positions),
        Arc::clone(&arrow_schema),
    ));
    let settings = Arc::new(WriteSettings::new(name.clone(), metadata, arrow_schema)?);
    let partition_type = settings.spec().partition_type(settings.schema())?;
    let write: Arc<dyn ExecutionPlan> = Arc::new(IcebergWriteExec::new(
        kept,
        Arc::clone(&settings),
        loaded.io().clone(),
        partition_type,
        metadata.format_version(),
    ));
    let gathered = CoalescePartitionsExec::new(write);
    let written = async {
        let batches: Vec<RecordBatch> = gathered
            .execute(0, Arc::clone(context))?
            .try_collect()
            .await?;
        read_data_files(loaded, &batches)
    }
    .await;
    match written {
        Ok(files) => Ok(files),
        Err(e) => {
            for location in settings.started_files() {
                let _ = loaded.io().delete(&location).await;
            }
            Err(e.into())
        }
    }
}

/// The rows of a positional scan (the table's columns, then file path and position) that are
/// not in `positions`, without the two position columns.
#[derive(Debug)]
pub(super) struct DropPositionsExec {
    input: Arc<dyn ExecutionPlan>,
    positions: Arc<BTreeMap<String, RoaringTreemap>>,
    properties: Arc<PlanProperties>,
}

impl DropPositionsExec {
    fn new(
        input: Arc<dyn ExecutionPlan>,
        positions: Arc<BTreeMap<String, RoaringTreemap>>,
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

impl DisplayAs for DropPositionsExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DropPositionsExec: files={}", self.positions.len())
    }
}

impl ExecutionPlan for DropPositionsExec {
    fn name(&self) -> &str {
        "DropPositionsExec"
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
        let input = children
            .pop()
            .ok_or_else(|| DataFusionError::Internal("DropPositionsExec needs an input".into()))?;
        Ok(Arc::new(Self::new(
            input,
            Arc::clone(&self.positions),
            self.schema(),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let positions = Arc::clone(&self.positions);
        let schema = self.schema();
        let out_schema = Arc::clone(&schema);
        let stream = input.map(move |batch| {
            let batch = batch?;
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
                let deleted = positions
                    .get(files.value(i))
                    .is_some_and(|set| set.contains(rows.value(i) as u64));
                keep.append(!deleted);
            }
            let kept = arrow::compute::filter_record_batch(
                &batch,
                &BooleanArray::new(keep.finish(), None),
            )?;
            Ok(RecordBatch::try_new(
                Arc::clone(&out_schema),
                kept.columns()[..columns - 2].to_vec(),
            )?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}
