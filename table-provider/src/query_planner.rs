//! [`PetrelQueryPlanner`]: DataFusion's physical planner with Petrel's extension planners —
//! DDL statements (`ddl::DdlPlanner`), row-level writes (`row_level::DeletePlanner`) and
//! maintenance statements (`procedures::MaintenancePlanner`).
//! Register it with `SessionStateBuilder::with_query_planner`, together with the
//! `row_level::RowLevelDml` analyzer rule.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::Result as DFResult;
use datafusion::execution::context::{QueryPlanner, SessionState};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};

use crate::ddl::DdlPlanner;
use crate::procedures::MaintenancePlanner;
use crate::row_level::{DeletePlanner, MergePlanner};

/// The query planner of a Petrel session.
#[derive(Debug, Default)]
pub struct PetrelQueryPlanner;

#[async_trait]
impl QueryPlanner for PetrelQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &SessionState,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        DefaultPhysicalPlanner::with_extension_planners(vec![
            Arc::new(DdlPlanner),
            Arc::new(DeletePlanner),
            Arc::new(MergePlanner),
            Arc::new(MaintenancePlanner),
        ])
        .create_physical_plan(logical_plan, session_state)
        .await
    }
}
