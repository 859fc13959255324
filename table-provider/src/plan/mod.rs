//! Scan planning, the Iceberg read flow: metadata → snapshot → manifest list → manifests →
//! data files, pruned by partition summaries, partition values and column metrics, matched
//! with their delete files, split and bin-packed into tasks.
//!
//! ```text
//! ScanRequest ─► ScanPlanner::plan
//!                  ├─ SnapshotSelector::resolve        (snapshot + schema)
//!                  ├─ ManifestCache::manifest_list      (cached, parsed once)
//!                  ├─ PartitionFilter::matches_summaries (skip manifests)
//!                  ├─ ManifestCache::manifest ×N        (concurrent, cached)
//!                  ├─ PartitionFilter::matches_partition (skip files by partition tuple)
//!                  ├─ evaluator::might_match            (skip files by column metrics)
//!                  ├─ DeleteFileIndex::deletes_for      (attach delete files)
//!                  └─ bin_pack                          (→ ScanPlan.partitions)
//! ```

mod bin_pack;
mod changes;
mod evaluator;
mod manifest_cache;
mod partition;
mod planner;
mod predicate;
mod task;
mod task_groups;

pub use changes::ChangePlan;
pub use manifest_cache::{DEFAULT_MANIFEST_CACHE_BYTES, ManifestCache};
pub(crate) use partition::PartitionFilter;
pub use planner::{
    DEFAULT_SPLIT_SIZE, PlanMetrics, ScanPlan, ScanPlanner, ScanRequest, data_file_might_match,
};
pub(crate) use predicate::to_iceberg_literal;
pub use predicate::{CmpOp, Predicate};
pub use task::{DataFileRef, DeleteFileRef, DeleteKind, ScanTask};
pub use task_groups::{
    DEFAULT_OPEN_FILE_COST, DEFAULT_PLANNING_LOOKBACK, SplitSettings, plan_task_groups, regroup,
    scan_bytes, task_weight,
};
