//! Copy-on-write: the data files a row-level write changes, rewritten without the rows it
//! deletes.
//!
//! The files are read again by a positional scan of the same snapshot restricted to them (so
//! their earlier deletes are applied and every row's position is known),
//! `PositionColumnsExec` drops the deleted positions, and the table's own writers
//! (`IcebergWriteExec`: partitioning by the current spec, rolling files, metrics) write what
//! is left. The commit then removes the old files, with their file-scoped deletes, and adds
//! the new ones. In format 3 the rewritten rows get new row ids (keeping `_row_id` through a
//! rewrite is not done yet).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::execution::{SessionStateBuilder, TaskContext};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use futures::TryStreamExt;
use iceberg::spec::DataFile;

use super::position_columns::{PositionColumnsExec, PositionUse, Positions};
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
    positions: &Arc<Positions>,
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
    let kept: Arc<dyn ExecutionPlan> = Arc::new(PositionColumnsExec::new(
        scan,
        PositionUse::Drop(Arc::clone(positions)),
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
    let mut abandon_on_drop = settings.tracker().abandon_on_drop(loaded.io());
    let written = async {
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
