//! [`ChangeFeed`]: one `table_changes` call — the table, the range, and the loop that turns
//! each snapshot of it into change rows (and, for a stream, each new snapshot as committed).
//!
//! Per snapshot: `ScanPlanner::plan_changes` gives the rows before and after it of the files it
//! touched; both sides are read by the table provider's own scan (merge-on-read, schema
//! mapping) over those tasks. A side alone (an append, a whole-file delete) streams straight
//! through as `INSERT` / `DELETE`; both sides (deletes of existing files, copy-on-write
//! rewrites, upserts) are read positionally and diffed (`diff`).
//!
//! Batches go to the client through a bounded channel: a slow client makes the loop wait.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::TaskContext;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::{ExecutionPlan, execute_stream};
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{Operation, SnapshotRef};
use tokio::sync::mpsc::Sender;

use super::columns::{ChangeType, change_schema, with_change_columns};
use super::diff::diff_snapshot;
use super::range::{ChangeBound, snapshots_after, snapshots_in_range};
use crate::catalog::{Catalog, LoadedTable};
use crate::error::{Error, Result};
use crate::plan::{Predicate, ScanPlan, ScanPlanner};
use crate::provider::IcebergTableProvider;
use crate::spec::{SnapshotSelector, field_id_of, iceberg_schema_to_arrow};

/// One `table_changes` call (see the module docs).
#[derive(Debug)]
pub struct ChangeFeed {
    catalog: Arc<dyn Catalog>,
    planner: Arc<ScanPlanner>,
    table: LoadedTable,
    start: Option<ChangeBound>,
    end: Option<ChangeBound>,
    stream: bool,
    poll_interval: Duration,
    /// The table's current columns (what every change row carries).
    table_schema: SchemaRef,
    /// The table's columns and the change columns.
    schema: SchemaRef,
    /// Columns of the table's identifier fields (pairing updates).
    identifier_columns: Vec<usize>,
}

impl ChangeFeed {
    /// The changes of `table` from `start` (exclusive) to `end` (inclusive), or after `start`
    /// for as long as the query runs (`stream`).
    pub fn new(
        catalog: Arc<dyn Catalog>,
        planner: Arc<ScanPlanner>,
        table: LoadedTable,
        start: Option<ChangeBound>,
        end: Option<ChangeBound>,
        stream: bool,
        poll_interval: Duration,
    ) -> Result<Self> {
        let schema = table.metadata().current_schema();
        let table_schema = Arc::new(iceberg_schema_to_arrow(schema)?);
        let identifier_columns = schema
            .identifier_field_ids()
            .filter_map(|id| {
                table_schema
                    .fields()
                    .iter()
                    .position(|f| field_id_of(f) == Some(id))
            })
            .collect();
        // Fail at planning for a bad range, not at the first fetch.
        snapshots_in_range(&table, start, end)?;
        Ok(Self {
            catalog,
            planner,
            schema: change_schema(&table_schema),
            table_schema,
            table,
            start,
            end,
            stream,
            poll_interval,
            identifier_columns,
        })
    }

    /// The rows' schema: the table's columns, then `_change_type`, `_change_ordinal`,
    /// `_commit_snapshot_id`.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The table's own columns.
    pub fn table_schema(&self) -> &SchemaRef {
        &self.table_schema
    }

    /// Columns of the identifier fields.
    pub fn identifier_columns(&self) -> &[usize] {
        &self.identifier_columns
    }

    /// Whether the feed keeps running after its range.
    pub fn is_stream(&self) -> bool {
        self.stream
    }

    /// The table as loaded at planning.
    pub fn table(&self) -> &LoadedTable {
        &self.table
    }

    /// Sends the change rows to `tx` until the range (or, for a stream, the client) ends.
    pub(crate) async fn run(
        self: Arc<Self>,
        state: Arc<SessionState>,
        filters: Vec<Expr>,
        context: Arc<TaskContext>,
        tx: Sender<DFResult<RecordBatch>>,
    ) -> DFResult<()> {
        let iceberg_schema = Arc::clone(self.table.metadata().current_schema());
        let (predicate, _) = Predicate::from_filters(&filters, &iceberg_schema);
        let mut run = Run {
            feed: &self,
            state: &state,
            filters: &filters,
            predicate,
            context,
            tx: &tx,
            ordinal: 0,
        };
        for snapshot in snapshots_in_range(&self.table, self.start, self.end)? {
            run.emit(&self.table, &snapshot).await?;
        }
        if !self.stream {
            return Ok(());
        }
        let mut position = self.table.metadata().current_snapshot_id();
        let schema_id = iceberg_schema.schema_id();
        loop {
            tokio::time::sleep(self.poll_interval).await;
            if tx.is_closed() {
                return Ok(());
            }
            let table = self.catalog.load_table(self.table.ident()).await?;
            if table.metadata().current_snapshot_id() == position {
                continue;
            }
            if table.metadata().current_schema_id() != schema_id {
                return Err(Error::InvalidArgument(format!(
                    "table {}: the schema changed after snapshot {}; start a new stream from it",
                    table.ident(),
                    position.map_or_else(|| "none".to_string(), |p| p.to_string())
                ))
                .into());
            }
            for snapshot in snapshots_after(&table, position)? {
                run.emit(&table, &snapshot).await?;
                position = Some(snapshot.snapshot_id());
            }
        }
    }
}

/// The state of one run: where rows go and the next ordinal.
struct Run<'a> {
    feed: &'a ChangeFeed,
    state: &'a SessionState,
    filters: &'a [Expr],
    predicate: Predicate,
    context: Arc<TaskContext>,
    tx: &'a Sender<DFResult<RecordBatch>>,
    ordinal: i32,
}

impl Run<'_> {
    /// Sends the changes of `snapshot` (of `table` as loaded).
    async fn emit(&mut self, table: &LoadedTable, snapshot: &SnapshotRef) -> DFResult<()> {
        if snapshot.summary().operation == Operation::Replace {
            return Ok(());
        }
        let ordinal = self.ordinal;
        self.ordinal += 1;
        let feed = self.feed;
        let schema = Arc::clone(table.metadata().current_schema());
        let target_partitions = self.state.config().target_partitions();
        let plan = feed
            .planner
            .plan_changes(table, snapshot, &schema, &self.predicate, target_partitions)
            .await?;
        tracing::debug!(
            table = %table.ident(),
            snapshot_id = plan.snapshot_id,
            manifests_read = plan.manifests_read,
            files_before = plan.before.metrics.files_selected,
            files_after = plan.after.metrics.files_selected,
            "changes planned"
        );
        if plan.is_empty() {
            return Ok(());
        }
        let provider = IcebergTableProvider::try_new(
            table.clone(),
            SnapshotSelector::Current,
            Arc::clone(&feed.planner),
        )?;
        let id = snapshot.snapshot_id();
        if plan.before.partitions.is_empty() || plan.after.partitions.is_empty() {
            let (side, change) = if plan.before.partitions.is_empty() {
                (plan.after, ChangeType::Insert)
            } else {
                (plan.before, ChangeType::Delete)
            };
            let exec = self.scan(&provider, side).await?;
            let mut stream = execute_stream(exec, Arc::clone(&self.context))?;
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                if batch.num_rows() == 0 {
                    continue;
                }
                let types = vec![change; batch.num_rows()];
                let batch = with_change_columns(
                    &feed.schema,
                    batch.columns().to_vec(),
                    &types,
                    ordinal,
                    id,
                )?;
                if self.tx.send(Ok(batch)).await.is_err() {
                    return Ok(());
                }
            }
            return Ok(());
        }
        let positional = provider.positional();
        let before = self.scan(&positional, plan.before).await?;
        let after = self.scan(&positional, plan.after).await?;
        let before: Vec<RecordBatch> = execute_stream(before, Arc::clone(&self.context))?
            .try_collect()
            .await?;
        let after: Vec<RecordBatch> = execute_stream(after, Arc::clone(&self.context))?
            .try_collect()
            .await?;
        let rows = match (before.is_empty(), after.is_empty()) {
            (false, false) => diff_snapshot(
                &feed.table_schema,
                &feed.schema,
                &before,
                &after,
                &plan.shared_files,
                &feed.identifier_columns,
                (ordinal, id),
            )?,
            _ => {
                let (batches, change) = if before.is_empty() {
                    (after, ChangeType::Insert)
                } else {
                    (before, ChangeType::Delete)
                };
                let columns = feed.table_schema.fields().len();
                for batch in batches {
                    let types = vec![change; batch.num_rows()];
                    let batch = with_change_columns(
                        &feed.schema,
                        batch.columns()[..columns].to_vec(),
                        &types,
                        ordinal,
                        id,
                    )?;
                    if self.tx.send(Ok(batch)).await.is_err() {
                        return Ok(());
                    }
                }
                None
            }
        };
        if let Some(rows) = rows {
            // A closed channel: the client is gone, nothing more to do.
            let _ = self.tx.send(Ok(rows)).await;
        }
        Ok(())
    }

    async fn scan(
        &self,
        provider: &IcebergTableProvider,
        plan: ScanPlan,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        provider
            .scan_plan(self.state, plan, None, self.filters, None)
            .await
            .map_err(|e| DataFusionError::Context("table_changes".into(), Box::new(e)))
    }
}
