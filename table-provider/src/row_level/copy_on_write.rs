//! Copy-on-write: the data files a row-level write changes, rewritten without the rows it
//! deletes.
//!
//! The files are read again by a positional scan of the same snapshot restricted to them (so
//! their earlier deletes are applied and every row's position is known),
//! `PositionColumnsExec` drops the deleted positions, and the table's own writers
//! (`write_rows`: partitioning by the current spec, rolling files, metrics) write what is
//! left. The commit then removes the old files, with their file-scoped deletes, and adds
//! the new ones. In format 3 the rewritten rows keep their `_row_id` and
//! `_last_updated_sequence_number`, written explicitly (`lineage`), as Spark's rewrites do.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::execution::{SessionStateBuilder, TaskContext};
use datafusion::physical_plan::ExecutionPlan;
use iceberg::spec::DataFile;

use super::lineage::{
    LineageExec, SequenceNumbers, SnapshotLineage, tracks_lineage, with_lineage_fields,
};
use super::position_columns::{PositionColumnsExec, PositionUse, Positions};
use super::write_rows::write_rows;
use crate::error::Result;
use crate::provider::IcebergTableProvider;
use crate::write::distribution::DELETE_DISTRIBUTION_MODE;

/// Rewrites the data files of `positions` (by location) of `table`'s snapshot without those
/// positions; returns the new data files (none for a file whose every row goes). A failure
/// deletes what was written.
pub(super) async fn rewrite_without(
    table: &IcebergTableProvider,
    context: &Arc<TaskContext>,
    positions: &Arc<Positions>,
) -> Result<Vec<DataFile>> {
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
    // Format 3: the rows copied keep their `_row_id` and `_last_updated_sequence_number`.
    let (scan, row_schema) = if tracks_lineage(table.table().metadata()) {
        let lineage = SnapshotLineage::load(table).await?;
        let with_lineage: Arc<dyn ExecutionPlan> = Arc::new(LineageExec::new(
            scan,
            lineage,
            SequenceNumbers::Keep,
            false,
        ));
        (with_lineage, with_lineage_fields(&table.schema()))
    } else {
        (scan, table.schema())
    };
    let kept: Arc<dyn ExecutionPlan> = Arc::new(PositionColumnsExec::new(
        scan,
        PositionUse::Drop(Arc::clone(positions)),
        row_schema,
    ));
    write_rows(table, context, kept, DELETE_DISTRIBUTION_MODE).await
}
