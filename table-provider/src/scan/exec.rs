//! [`IcebergScanExec`]: the Petrel execution node over DataFusion's own Parquet scan.
//!
//! ```text
//! IcebergScanExec  (snapshot, planning metrics; merge-on-read deletes join here)
//!   └─ DataSourceExec(ParquetSource)  (row-group / page pruning, field-id schema mapping)
//! ```
//!
//! Partitioning and ordering are the child's. Planning counts (manifests and files pruned)
//! are recorded as this node's metrics, so `EXPLAIN ANALYZE` shows them next to the Parquet
//! scan's own (row groups pruned, bytes scanned).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use datafusion::common::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use crate::plan::PlanMetrics;

/// Reads the planned tasks of one Iceberg table scan.
#[derive(Debug)]
pub struct IcebergScanExec {
    input: Arc<dyn ExecutionPlan>,
    table: String,
    snapshot_id: Option<i64>,
    plan_metrics: PlanMetrics,
    metrics: ExecutionPlanMetricsSet,
}

impl IcebergScanExec {
    /// Wraps the Parquet scan `input` of `table` at `snapshot_id`, planned with `plan_metrics`.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        table: String,
        snapshot_id: Option<i64>,
        plan_metrics: PlanMetrics,
    ) -> Self {
        let metrics = ExecutionPlanMetricsSet::new();
        let counter = |name: &'static str, value: usize| {
            MetricBuilder::new(&metrics).global_counter(name).add(value);
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
        MetricBuilder::new(&metrics)
            .subset_time("planning_time", 0)
            .add_duration(plan_metrics.planning_time);
        Self {
            input,
            table,
            snapshot_id,
            plan_metrics,
            metrics,
        }
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
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
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
        Ok(Arc::new(IcebergScanExec {
            input,
            table: self.table.clone(),
            snapshot_id: self.snapshot_id,
            plan_metrics: self.plan_metrics.clone(),
            metrics: self.metrics.clone(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        self.input.execute(partition, context)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
