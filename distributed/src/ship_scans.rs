//! [`ShipScans`]: the scheduler's last physical optimizer rule. It replaces each
//! [`IcebergScanExec`] by a [`ShippedScanExec`] of the same recipe before the plan is cut into
//! stages and sent to executors: the stage plans then carry the scan's recipe alone, not the
//! Parquet `DataSourceExec` the scheduler built inside it (whose decoding on an executor would
//! look its object store up in the executor's `RuntimeEnv`, and which the executor would throw
//! away anyway: it builds its own scan from the recipe).
//!
//! It runs after every other rule: statistics-based rewrites (a `count(*)` the manifests
//! answer) have seen the Iceberg scan's exact statistics by then.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use petrel_table_provider::IcebergScanExec;

use crate::shipped_scan::{ExecutorScans, ShippedScanExec};

/// See the module docs.
#[derive(Debug)]
pub struct ShipScans {
    scans: ExecutorScans,
}

impl ShipScans {
    /// The rule; the scans it makes would read through `scans` if this process ran them.
    pub fn new(scans: ExecutorScans) -> Self {
        Self { scans }
    }
}

impl PhysicalOptimizerRule for ShipScans {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(scan) = node.as_any().downcast_ref::<IcebergScanExec>() else {
                return Ok(Transformed::no(node));
            };
            // A scan without a recipe cannot be shipped; the codec says so when encoding.
            let Some(recipe) = scan.recipe() else {
                return Ok(Transformed::no(node));
            };
            let partitions = node.properties().output_partitioning().partition_count();
            // The executors rebuild the recipe's task groups, one partition each (no group:
            // one empty partition).
            if partitions != recipe.partitions.len().max(1) {
                return Err(DataFusionError::Plan(format!(
                    "table {}: the scan has {partitions} partitions but its recipe {} task \
                     groups (a rule split its files after planning); it cannot be shipped",
                    recipe.ident(),
                    recipe.partitions.len()
                )));
            }
            let shipped = ShippedScanExec::new(
                Arc::clone(recipe),
                scan.leaf_projection().cloned(),
                node.schema(),
                partitions,
                self.scans.clone(),
            );
            Ok(Transformed::yes(Arc::new(shipped) as Arc<dyn ExecutionPlan>))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "petrel_ship_scans"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
