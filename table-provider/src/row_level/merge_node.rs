//! [`MergeNode`]: a `MERGE INTO` of an Iceberg table in a logical plan, and [`MergePlanner`],
//! which plans it into an [`IcebergMergeExec`].

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::{DFSchema, DFSchemaRef, DataFusionError, Result as DFResult};
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{
    Expr, LogicalPlan, UserDefinedLogicalNode, UserDefinedLogicalNodeCore,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{ExtensionPlanner, PhysicalPlanner};

use super::merge_exec::IcebergMergeExec;
use crate::dml::count_schema;
use crate::error::Error;
use crate::provider::IcebergTableProvider;

/// A MERGE into `table` of the rows its input computes: (action, the table's columns, data
/// file, position) for each row of the target ⋈ source join a clause acts on (see
/// `merge_plan`). Output: `count`.
#[derive(Debug, Clone)]
pub struct MergeNode {
    /// The target (the provider the positional scan read: same table and snapshot).
    pub table: Arc<IcebergTableProvider>,
    /// The rows to apply.
    pub input: Arc<LogicalPlan>,
    /// Whether a target row matched by several source rows fails the statement (Spark: unless
    /// the only WHEN MATCHED clause is an unconditional DELETE).
    pub check_cardinality: bool,
    schema: DFSchemaRef,
}

impl MergeNode {
    /// A MERGE into `table` of `input`'s rows.
    pub fn try_new(
        table: Arc<IcebergTableProvider>,
        input: Arc<LogicalPlan>,
        check_cardinality: bool,
    ) -> DFResult<Self> {
        Ok(Self {
            table,
            input,
            check_cardinality,
            schema: Arc::new(DFSchema::try_from(count_schema())?),
        })
    }

    fn key(&self) -> (String, Option<i64>, bool) {
        (
            self.table.table().ident().to_string(),
            self.table.snapshot_id(),
            self.check_cardinality,
        )
    }
}

impl PartialEq for MergeNode {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key() && self.input == other.input
    }
}

impl Eq for MergeNode {}

impl PartialOrd for MergeNode {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.key().partial_cmp(&other.key())
    }
}

impl Hash for MergeNode {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
        self.input.hash(state);
    }
}

impl UserDefinedLogicalNodeCore for MergeNode {
    fn name(&self) -> &str {
        "IcebergMerge"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![self.input.as_ref()]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![]
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "IcebergMerge: table={} snapshot={} cardinality_check={}",
            self.table.table().ident(),
            self.table
                .snapshot_id()
                .map_or_else(|| "none".to_string(), |s| s.to_string()),
            self.check_cardinality
        )
    }

    fn with_exprs_and_inputs(
        &self,
        exprs: Vec<Expr>,
        mut inputs: Vec<LogicalPlan>,
    ) -> DFResult<Self> {
        if !exprs.is_empty() {
            return Err(DataFusionError::Internal(
                "IcebergMerge has no expressions".into(),
            ));
        }
        let input = inputs
            .pop()
            .ok_or_else(|| DataFusionError::Internal("IcebergMerge needs an input".into()))?;
        Ok(Self {
            input: Arc::new(input),
            ..self.clone()
        })
    }
}

/// Plans a [`MergeNode`] into an [`IcebergMergeExec`].
#[derive(Debug, Default)]
pub struct MergePlanner;

#[async_trait]
impl ExtensionPlanner for MergePlanner {
    async fn plan_extension(
        &self,
        _planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        _session_state: &SessionState,
    ) -> DFResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(node) = node.as_any().downcast_ref::<MergeNode>() else {
            return Ok(None);
        };
        let Some(catalog) = node.table.catalog() else {
            return Err(Error::Unsupported {
                table: node.table.table().ident().to_string(),
                message: "this table is read-only here".into(),
            }
            .into());
        };
        let input = physical_inputs
            .first()
            .ok_or_else(|| DataFusionError::Internal("IcebergMerge needs an input".into()))?;
        Ok(Some(Arc::new(IcebergMergeExec::new(
            Arc::clone(input),
            Arc::clone(catalog),
            Arc::clone(&node.table),
            node.check_cardinality,
        ))))
    }
}

/// The node of `plan` if it is a MERGE into an Iceberg table.
pub fn as_merge(plan: &LogicalPlan) -> Option<&MergeNode> {
    match plan {
        LogicalPlan::Extension(ext) => ext.node.as_any().downcast_ref::<MergeNode>(),
        _ => None,
    }
}
