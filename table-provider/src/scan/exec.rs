//! [`IcebergScanExec`]: the Petrel execution node over DataFusion's own Parquet scan.
//!
//! ```text
//! IcebergScanExec  (snapshot, planning metrics, merge-on-read, struct narrowing)
//!   └─ DataSourceExec(ParquetSource)  (row-group / page pruning, field-id schema mapping)
//! ```
//!
//! Partitioning is the child's. Planning counts (manifests and files pruned) and delete
//! counts are this node's metrics, so `EXPLAIN ANALYZE` shows them next to the Parquet scan's
//! own (row groups pruned, bytes scanned).
//!
//! When the manifests prove them (`metadata_stats`), the node reports exact statistics (rows,
//! null counts, min/max): DataFusion's `AggregateStatistics` then answers `count(*)`,
//! `count(c)`, `min(c)` and `max(c)` without running the scan.
//!
//! A scan that reads every row of its files, or one with filters on data but no deletes,
//! takes each file's columns from the decoded-column cache when they are there
//! (`column_cache`; a filtered scan without the batches its filters rule out, the filter above
//! it applying to the rest), and reads the file as usual otherwise.
//!
//! With deletes, each partition is read by `merge_stream`: files with positional deletes one
//! by one with their deleted positions skipped or filtered out, then rows matching equality
//! deletes and the helper columns (equality keys the query did not project, the file index)
//! are dropped.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::common::{DataFusionError, Result as DFResult, Statistics};
use datafusion::datasource::physical_plan::{FileScanConfig, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::TryStreamExt;
use futures::stream::BoxStream;

use super::column_cache::CachedScan;
use super::leaf_projection::{LeafProjectingReaderFactory, LeafProjection};
use super::merge_stream::{MergeSpec, partition_stream};
use super::recipe::ScanRecipe;
use crate::plan::PlanMetrics;

/// Reads the planned tasks of one Iceberg table scan.
#[derive(Debug)]
pub struct IcebergScanExec {
    input: Arc<dyn ExecutionPlan>,
    table: String,
    snapshot_id: Option<i64>,
    plan_metrics: PlanMetrics,
    metrics: ExecutionPlanMetricsSet,
    merge: Option<MergeSpec>,
    /// Struct columns narrowed to the fields the query accesses.
    leaves: Option<Arc<LeafProjection>>,
    properties: Arc<PlanProperties>,
    /// Exact statistics of the rows this scan returns, proven from the manifests (see
    /// `metadata_stats`): DataFusion's `AggregateStatistics` answers aggregates from them.
    statistics: Option<Arc<Statistics>>,
    /// What this scan was built from, for rebuilding it in another process.
    recipe: Option<Arc<ScanRecipe>>,
    /// The decoded-column cache, when this scan reads every row of its files.
    columns: Option<CachedScan>,
}

impl IcebergScanExec {
    /// Wraps the Parquet scan `input` of `table` at `snapshot_id`, planned with `plan_metrics`.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        table: String,
        snapshot_id: Option<i64>,
        plan_metrics: PlanMetrics,
    ) -> Self {
        Self::with_metrics(
            input,
            table,
            snapshot_id,
            plan_metrics,
            ExecutionPlanMetricsSet::new(),
            None,
        )
    }

    /// As [`IcebergScanExec::new`], applying merge-on-read deletes whose metrics live in
    /// `metrics` (a fresh set: planning counts are recorded into it here).
    pub fn with_metrics(
        input: Arc<dyn ExecutionPlan>,
        table: String,
        snapshot_id: Option<i64>,
        plan_metrics: PlanMetrics,
        metrics: ExecutionPlanMetricsSet,
        merge: Option<MergeSpec>,
    ) -> Self {
        record_plan_metrics(&metrics, &plan_metrics);
        Self::assemble(input, table, snapshot_id, plan_metrics, metrics, merge)
    }

    /// Builds the node around metrics already recorded (new children, execution).
    fn assemble(
        input: Arc<dyn ExecutionPlan>,
        table: String,
        snapshot_id: Option<i64>,
        plan_metrics: PlanMetrics,
        metrics: ExecutionPlanMetricsSet,
        merge: Option<MergeSpec>,
    ) -> Self {
        let properties = match &merge {
            Some(spec) => Arc::new(PlanProperties::new(
                EquivalenceProperties::new(Arc::clone(&spec.schema)),
                input.properties().output_partitioning().clone(),
                EmissionType::Incremental,
                Boundedness::Bounded,
            )),
            None => Arc::clone(input.properties()),
        };
        Self {
            input,
            table,
            snapshot_id,
            plan_metrics,
            metrics,
            merge,
            leaves: None,
            properties,
            statistics: None,
            recipe: None,
            columns: None,
        }
    }

    /// This scan taking its files' columns from `columns` when it has no deletes (with deletes,
    /// the merge spec carries the cache); the caller vouches that it has no limit and either
    /// reads every row of its files (no filter that is not decided by partition values) or
    /// says so (`CachedScan::filtered`: its filters are applied again above it).
    pub(crate) fn with_column_cache(mut self, columns: CachedScan) -> Self {
        self.columns = Some(columns);
        self
    }

    /// This scan reporting `statistics` (exact, one column statistics per output column;
    /// ignored otherwise) as its own.
    pub fn with_statistics(mut self, statistics: Option<Statistics>) -> Self {
        self.statistics = statistics
            .filter(|s| {
                s.column_statistics.len() == self.properties.eq_properties.schema().fields().len()
            })
            .map(Arc::new);
        self
    }

    /// This scan remembering the `recipe` it was built from.
    pub(crate) fn with_recipe(&self, recipe: ScanRecipe) -> Self {
        let mut scan = self.rebuilt(
            Arc::clone(&self.input),
            self.merge.clone(),
            self.leaves.clone(),
        );
        scan.recipe = Some(Arc::new(recipe));
        scan
    }

    /// What this scan was built from (`None` for scans not built by a table provider's
    /// `scan`, e.g. of change feeds): enough to build it again in another process.
    pub fn recipe(&self) -> Option<&Arc<ScanRecipe>> {
        self.recipe.as_ref()
    }

    /// What planning did.
    pub fn plan_metrics(&self) -> &PlanMetrics {
        &self.plan_metrics
    }

    /// The snapshot read.
    pub fn snapshot_id(&self) -> Option<i64> {
        self.snapshot_id
    }

    /// The table read.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// This scan (same table, snapshot and metrics) over another child.
    fn rebuilt(
        &self,
        input: Arc<dyn ExecutionPlan>,
        merge: Option<MergeSpec>,
        leaves: Option<Arc<LeafProjection>>,
    ) -> Self {
        let mut scan = Self::assemble(
            input,
            self.table.clone(),
            self.snapshot_id,
            self.plan_metrics.clone(),
            self.metrics.clone(),
            merge,
        );
        scan.leaves = leaves;
        scan.statistics = self.statistics.clone();
        scan.recipe = self.recipe.clone();
        scan.columns = self.columns.clone();
        scan
    }

    /// The struct narrowing applied to this scan, if any.
    pub fn leaf_projection(&self) -> Option<&LeafProjection> {
        self.leaves.as_deref()
    }

    /// This scan with its struct columns narrowed to the fields `uses` (expressions over its
    /// output, all of its consumers' uses) and its own pushed filters access; `None` when no
    /// struct column can be narrowed (or it already is).
    pub(crate) fn narrowed_for(&self, uses: &[&Arc<dyn PhysicalExpr>]) -> DFResult<Option<Self>> {
        // Equality-delete keys are top-level columns; keep it simple there.
        if self.leaves.is_some() || self.merge.as_ref().is_some_and(|m| m.merge.has_equality()) {
            return Ok(None);
        }
        let predicate = file_scan_config(&self.input).and_then(|c| c.file_source.filter());
        let mut uses = uses.to_vec();
        uses.extend(predicate.as_ref());
        match LeafProjection::from_uses(&self.schema(), &uses) {
            Some(leaves) => self.narrowed(Arc::new(leaves)),
            None => Ok(None),
        }
    }

    /// This scan with its struct columns narrowed by `leaves` (as another process narrowed
    /// it); `None` when nothing can be narrowed.
    pub fn narrowed_by(&self, leaves: LeafProjection) -> DFResult<Option<Self>> {
        self.narrowed(Arc::new(leaves))
    }

    /// This scan reading struct columns narrowed by `leaves`: its Parquet scans (the child and,
    /// with positional deletes, the unfiltered one) get footers without the other leaves.
    fn narrowed(&self, leaves: Arc<LeafProjection>) -> DFResult<Option<Self>> {
        let Some(input) = narrow_parquet_scan(&self.input, &leaves)? else {
            return Ok(None);
        };
        let merge = match &self.merge {
            None => None,
            Some(spec) => {
                let unfiltered: Arc<dyn ExecutionPlan> =
                    DataSourceExec::from_data_source(spec.unfiltered.as_ref().clone());
                let Some(narrowed) = narrow_parquet_scan(&unfiltered, &leaves)? else {
                    return Ok(None);
                };
                let Some(config) = file_scan_config(&narrowed) else {
                    return Ok(None);
                };
                Some(MergeSpec {
                    unfiltered: Arc::new(config.clone()),
                    // Its scans are not narrowed: every file reads the key columns.
                    keyless: None,
                    ..spec.clone()
                })
            }
        };
        Ok(Some(self.rebuilt(input, merge, Some(leaves))))
    }
}

impl IcebergScanExec {
    /// Partition `partition` through the decoded-column cache, when this scan uses it.
    fn cached_stream(
        &self,
        partition: usize,
        context: &Arc<TaskContext>,
    ) -> Option<BoxStream<'static, DFResult<RecordBatch>>> {
        let columns = self.columns.as_ref()?;
        if self.leaves.is_some() {
            return None;
        }
        let config = file_scan_config(&self.input)?;
        if config.limit.is_some() {
            return None;
        }
        columns.partition_stream(config, partition, Arc::clone(context))
    }
}

/// The file scan configuration of a DataSourceExec.
fn file_scan_config(plan: &Arc<dyn ExecutionPlan>) -> Option<&FileScanConfig> {
    plan.as_any()
        .downcast_ref::<DataSourceExec>()?
        .data_source()
        .as_any()
        .downcast_ref::<FileScanConfig>()
}

/// The Parquet scan `plan` with footers narrowed by `leaves` (`None`: not a Parquet scan).
fn narrow_parquet_scan(
    plan: &Arc<dyn ExecutionPlan>,
    leaves: &Arc<LeafProjection>,
) -> DFResult<Option<Arc<dyn ExecutionPlan>>> {
    let Some(config) = file_scan_config(plan) else {
        return Ok(None);
    };
    let Some(source) = config.file_source.as_any().downcast_ref::<ParquetSource>() else {
        return Ok(None);
    };
    let Some(readers) = source.parquet_file_reader_factory() else {
        return Ok(None);
    };
    let source = source.clone().with_parquet_file_reader_factory(Arc::new(
        LeafProjectingReaderFactory::new(Arc::clone(readers), Arc::clone(leaves)),
    ));
    let mut config = config.clone();
    config.file_source = Arc::new(source);
    Ok(Some(DataSourceExec::from_data_source(config)))
}

/// Records planning counts as metrics of the scan node.
fn record_plan_metrics(metrics: &ExecutionPlanMetricsSet, plan_metrics: &PlanMetrics) {
    let counter = |name: &'static str, value: usize| {
        MetricBuilder::new(metrics).global_counter(name).add(value);
    };
    counter("manifests_total", plan_metrics.manifests_total);
    counter("manifests_pruned", plan_metrics.manifests_pruned);
    counter("manifests_read", plan_metrics.manifests_read);
    counter("data_files_seen", plan_metrics.data_files_seen);
    counter(
        "files_pruned_by_partition",
        plan_metrics.files_pruned_by_partition,
    );
    counter(
        "files_pruned_by_metrics",
        plan_metrics.files_pruned_by_metrics,
    );
    counter("files_scanned", plan_metrics.files_selected);
    counter("bytes_planned", plan_metrics.bytes_selected as usize);
    counter("delete_files", plan_metrics.delete_files);
    counter(
        "equality_deletes_pruned",
        plan_metrics.equality_deletes_pruned,
    );
    MetricBuilder::new(metrics)
        .subset_time("planning_time", 0)
        .add_duration(plan_metrics.planning_time);
}

impl DisplayAs for IcebergScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.plan_metrics;
        write!(
            f,
            "IcebergScanExec: table={}, snapshot={}, manifests={}/{} (pruned {}), files={} (pruned {} by partition, {} by metrics), delete_files={}",
            self.table,
            self.snapshot_id
                .map_or_else(|| "none".to_string(), |s| s.to_string()),
            m.manifests_read,
            m.manifests_total,
            m.manifests_pruned,
            m.files_selected,
            m.files_pruned_by_partition,
            m.files_pruned_by_metrics,
            m.delete_files,
        )
    }
}

impl ExecutionPlan for IcebergScanExec {
    fn name(&self) -> &str {
        "IcebergScanExec"
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

    /// The child is the Parquet scan itself: never put a repartition between them (the
    /// scan's own file groups are the partitions, and deletes are applied to the scan).
    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    /// Without deletes the node is its child (same properties, so a sort may be pushed below
    /// it). With deletes its properties are its own (columns added and dropped), so an
    /// ordering of the child is not claimed as its own: a sort stays above it.
    fn maintains_input_order(&self) -> Vec<bool> {
        vec![self.merge.is_none()]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let Some(input) = children.pop() else {
            return Err(datafusion::error::DataFusionError::Internal(
                "IcebergScanExec needs one child".into(),
            ));
        };
        Ok(Arc::new(self.rebuilt(
            input,
            self.merge.clone(),
            self.leaves.clone(),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let table = self.table.clone();
        let with_table = move |e: DataFusionError| match e {
            // Already says which table (e.g. a delete file error) or is not about data.
            e @ (DataFusionError::External(_)
            | DataFusionError::ResourcesExhausted(_)
            | DataFusionError::Context(_, _)) => e,
            e => DataFusionError::Context(format!("reading table {table}"), Box::new(e)),
        };
        let Some(spec) = &self.merge else {
            if let Some(stream) = self.cached_stream(partition, &context) {
                let schema = self.input.schema();
                return Ok(Box::pin(RecordBatchStreamAdapter::new(
                    schema,
                    stream.map_err(with_table),
                )));
            }
            let stream = self.input.execute(partition, context)?;
            let schema = stream.schema();
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                schema,
                stream.map_err(with_table),
            )));
        };
        let stream = partition_stream(spec, &self.input, &self.table, partition, context)?
            .map_err(with_table);
        let schema = Arc::clone(&spec.schema);
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    /// The whole scan's statistics are exact when the manifests proved them; otherwise (and
    /// per partition) unknown.
    fn partition_statistics(&self, partition: Option<usize>) -> DFResult<Statistics> {
        match (&self.statistics, partition) {
            (Some(stats), None) => Ok(stats.as_ref().clone()),
            _ => Ok(Statistics::new_unknown(&self.schema())),
        }
    }

    /// Does not move the projection, but narrows the struct columns it only accesses fields
    /// of (see `leaf_projection`), and stays below it.
    fn try_swapping_with_projection(
        &self,
        projection: &ProjectionExec,
    ) -> DFResult<Option<Arc<dyn ExecutionPlan>>> {
        let uses: Vec<&Arc<dyn PhysicalExpr>> = projection.expr().iter().map(|p| &p.expr).collect();
        let Some(scan) = self.narrowed_for(&uses)? else {
            return Ok(None);
        };
        let exprs = projection.expr().to_vec();
        Ok(Some(Arc::new(ProjectionExec::try_new(
            exprs,
            Arc::new(scan),
        )?)))
    }
}
