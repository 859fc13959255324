//! The table's writers over a plan of rows: what UPDATE (the new versions of the rows),
//! MERGE (updated and inserted rows) and copy-on-write (the rows a rewritten file keeps) add
//! to a table.
//!
//! The rows (the table's columns, in the table's current schema, then in format 3 `_row_id` and
//! `_last_updated_sequence_number`, written with their reserved field ids) go through
//! `IcebergWriteExec` (one writer per input partition: partitioning by the current spec,
//! rolling files, metrics), and the data files it wrote are returned for the statement's one commit. A failed or dropped
//! write deletes every file it started.
//!
//! The rows are hash-distributed on the partition key first (one writer task per table
//! partition) when the statement's `write.{delete,update,merge}.distribution-mode` is `hash`
//! (or `range`), the default for a partitioned table as in Spark: this plan is executed as it
//! is built, outside the physical optimizer, so the repartition is put here.

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::common::Result as DFResult;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning};
use futures::TryStreamExt;
use iceberg::spec::DataFile;

use super::lineage::{tracks_lineage, with_lineage_fields};
use crate::dml::{IcebergWriteExec, read_data_files};
use crate::error::{Error, Result};
use crate::provider::IcebergTableProvider;
use crate::write::data_file_writer::WriteSettings;
use crate::write::distribution::DistributionMode;

/// Writes the rows `rows` produces (the columns of `table.schema()`) as new data files of the
/// table `table` read, distributed by the table property `distribution` (the statement's
/// `write.*.distribution-mode`); returns them (none when there are no rows). Fails, before
/// writing, if the table's schema changed since it was loaded.
pub(super) async fn write_rows(
    table: &IcebergTableProvider,
    context: &Arc<TaskContext>,
    rows: Arc<dyn ExecutionPlan>,
    distribution: &str,
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
    // Format 3: the rows come with their lineage columns (`lineage::LineageExec`).
    let arrow_schema = if tracks_lineage(metadata) {
        with_lineage_fields(&table.schema())
    } else {
        table.schema()
    };
    let mode = DistributionMode::of_property(
        &name,
        metadata.properties(),
        metadata.default_partition_spec(),
        distribution,
    )?;
    let settings = Arc::new(WriteSettings::new(name, metadata, arrow_schema)?);
    let partition_type = settings.spec().partition_type(settings.schema())?;
    let tasks = rows.output_partitioning().partition_count();
    let writer_task = mode.writer_task(&settings, metadata.properties(), tasks)?;
    let rows: Arc<dyn ExecutionPlan> = match writer_task {
        Some(writer_task) if tasks >= 2 => Arc::new(RepartitionExec::try_new(
            rows,
            Partitioning::Hash(vec![writer_task], tasks),
        )?),
        _ => rows,
    };
    let write: Arc<dyn ExecutionPlan> = Arc::new(IcebergWriteExec::new(
        rows,
        Arc::clone(&settings),
        loaded.io().clone(),
        partition_type,
        metadata.format_version(),
    ));
    let gathered = CoalescePartitionsExec::new(write);
    let mut abandon_on_drop = settings.tracker().abandon_on_drop(loaded.io());
    let written: DFResult<Vec<DataFile>> = async {
        let batches: Vec<RecordBatch> = gathered
            .execute(0, Arc::clone(context))?
            .try_collect()
            .await?;
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
