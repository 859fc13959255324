//! The Iceberg metrics of a query's scans, read from its physical plans.
//!
//! Every `IcebergScanExec` carries what planning did (`PlanMetrics`: snapshot, manifests and
//! data files total / pruned / selected, delete files matched) and counts what reading did
//! (delete files applied by kind, rows deleted), next to the Parquet scans below it (row groups
//! pruned). [`ScanCollector`] keeps the physical plans a query executes; when the query ends
//! [`ScanCollector::finish`] walks them once and returns one [`ScanStats`] per table and
//! snapshot, which feed the metrics (`metrics::Metrics::scanned`) and the slow-query log.
//!
//! A statement run once per bound parameter row executes one plan per row, one after the
//! other: each plan is folded into the totals when the next one arrives, so only one is held.

use std::sync::{Arc, Mutex};

use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::MetricValue;
use petrel_table_provider::{IcebergScanExec, PlanMetrics};

use crate::locks::lock;

/// What the scans of one table at one snapshot did, summed over the query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// The table (`catalog.namespace.table` as the provider names it).
    pub table: String,
    /// The snapshot read (None: the table had none).
    pub snapshot_id: Option<i64>,
    /// Scans summed here.
    pub count: u64,
    /// Planning counts, summed.
    pub plan: PlanMetrics,
    /// Position delete files applied.
    pub delete_files_position: u64,
    /// Deletion vectors applied.
    pub delete_files_dv: u64,
    /// Equality delete files applied.
    pub delete_files_equality: u64,
    /// Delete files taken from the delete cache.
    pub delete_files_cached: u64,
    /// Rows removed by deletes.
    pub rows_deleted: u64,
    /// Parquet row groups skipped by statistics or bloom filters.
    pub row_groups_pruned: u64,
}

impl ScanStats {
    /// Delete files applied, all kinds.
    pub fn delete_files_applied(&self) -> u64 {
        self.delete_files_position + self.delete_files_dv + self.delete_files_equality
    }

    /// Data files pruned at planning (by partition and by metrics).
    pub fn data_files_pruned(&self) -> usize {
        self.plan.files_pruned_by_partition + self.plan.files_pruned_by_metrics
    }

    fn add(&mut self, other: &ScanStats) {
        let (p, o) = (&mut self.plan, &other.plan);
        p.manifests_total += o.manifests_total;
        p.manifests_pruned += o.manifests_pruned;
        p.manifests_read += o.manifests_read;
        p.data_files_seen += o.data_files_seen;
        p.files_pruned_by_partition += o.files_pruned_by_partition;
        p.files_pruned_by_metrics += o.files_pruned_by_metrics;
        p.files_selected += o.files_selected;
        p.bytes_selected += o.bytes_selected;
        p.delete_files += o.delete_files;
        p.stopped_by_limit |= o.stopped_by_limit;
        p.planning_time += o.planning_time;
        self.count += other.count;
        self.delete_files_position += other.delete_files_position;
        self.delete_files_dv += other.delete_files_dv;
        self.delete_files_equality += other.delete_files_equality;
        self.delete_files_cached += other.delete_files_cached;
        self.rows_deleted += other.rows_deleted;
        self.row_groups_pruned += other.row_groups_pruned;
    }

    /// One line for the slow-query log.
    pub fn summary(&self) -> String {
        let p = &self.plan;
        format!(
            "{} snapshot={} manifests={} (pruned {}) data_files={} (pruned {}: {} by partition, \
             {} by metrics; scanned {}) delete_files={} (applied {}) row_groups_pruned={}",
            self.table,
            self.snapshot_id
                .map_or_else(|| "none".to_string(), |s| s.to_string()),
            p.manifests_total,
            p.manifests_pruned,
            p.data_files_seen,
            self.data_files_pruned(),
            p.files_pruned_by_partition,
            p.files_pruned_by_metrics,
            p.files_selected,
            p.delete_files,
            self.delete_files_applied(),
            self.row_groups_pruned,
        )
    }
}

/// The plans a query executes (module docs); cheap to clone, shared by the query's parts.
#[derive(Debug, Clone, Default)]
pub struct ScanCollector {
    inner: Arc<Mutex<Collected>>,
}

#[derive(Debug, Default)]
struct Collected {
    current: Option<Arc<dyn ExecutionPlan>>,
    totals: Vec<ScanStats>,
}

impl ScanCollector {
    /// Records a plan about to execute (folding the previous one, which has finished).
    pub fn add(&self, plan: Arc<dyn ExecutionPlan>) {
        let mut c = lock(&self.inner);
        if let Some(previous) = c.current.replace(plan) {
            fold(&mut c.totals, &previous);
        }
    }

    /// The query's scans, one entry per table and snapshot (empty when nothing executed or
    /// nothing read an Iceberg table).
    pub fn finish(&self) -> Vec<ScanStats> {
        let mut c = lock(&self.inner);
        if let Some(last) = c.current.take() {
            fold(&mut c.totals, &last);
        }
        std::mem::take(&mut c.totals)
    }
}

/// Adds the scans of `plan` to `totals`.
fn fold(totals: &mut Vec<ScanStats>, plan: &Arc<dyn ExecutionPlan>) {
    for scan in scans_of(plan) {
        match totals
            .iter_mut()
            .find(|t| t.table == scan.table && t.snapshot_id == scan.snapshot_id)
        {
            Some(t) => t.add(&scan),
            None => totals.push(scan),
        }
    }
}

/// The Iceberg scans in `plan`, each with what it counted.
pub fn scans_of(plan: &Arc<dyn ExecutionPlan>) -> Vec<ScanStats> {
    let mut out = Vec::new();
    walk(plan, &mut out);
    out
}

fn walk(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<ScanStats>) {
    if let Some(scan) = plan.as_any().downcast_ref::<IcebergScanExec>() {
        let count = |name: &str| {
            scan.metrics()
                .and_then(|m| m.sum_by_name(name))
                .map_or(0, |v| v.as_usize() as u64)
        };
        let mut pruned = 0;
        row_groups_pruned(plan, &mut pruned);
        out.push(ScanStats {
            table: scan.table().to_string(),
            snapshot_id: scan.snapshot_id(),
            count: 1,
            plan: scan.plan_metrics().clone(),
            delete_files_position: count("delete_files_position"),
            delete_files_dv: count("delete_files_dv"),
            delete_files_equality: count("delete_files_equality"),
            delete_files_cached: count("delete_files_cached"),
            rows_deleted: count("rows_deleted_by_position") + count("rows_deleted_by_equality"),
            row_groups_pruned: pruned,
        });
        return;
    }
    for child in plan.children() {
        walk(child, out);
    }
}

/// Row groups pruned by the Parquet scans under (and including) `plan`.
fn row_groups_pruned(plan: &Arc<dyn ExecutionPlan>, total: &mut u64) {
    if let Some(metrics) = plan.metrics() {
        for m in metrics.iter() {
            if let MetricValue::PruningMetrics {
                name,
                pruning_metrics,
            } = m.value()
                && (name == "row_groups_pruned_statistics"
                    || name == "row_groups_pruned_bloom_filter")
            {
                *total += pruning_metrics.pruned() as u64;
            }
        }
    }
    for child in plan.children() {
        row_groups_pruned(child, total);
    }
}
