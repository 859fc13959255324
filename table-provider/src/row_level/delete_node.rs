//! [`DeleteNode`]: a DELETE or UPDATE of an Iceberg table in a logical plan, and
//! [`DeletePlanner`], which plans it into an [`IcebergDeleteExec`] or an [`IcebergUpdateExec`].

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

use super::delete_exec::IcebergDeleteExec;
use super::update_exec::IcebergUpdateExec;
use crate::dml::count_schema;
use crate::error::Error;
use crate::provider::IcebergTableProvider;

/// Which row-level write a [`DeleteNode`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd)]
pub enum RowLevelOp {
    /// `DELETE`: the input is (file path, position) of each row to delete.
    Delete,
    /// `UPDATE`: the input is each changed row's new values (the table's columns), then its
    /// file path and position.
    Update,
}

/// A row-level write of `table` over its input, rows located by a positional scan of `table`
/// at the snapshot it read (see [`RowLevelOp`]). Output: `count`.
#[derive(Debug, Clone)]
pub struct DeleteNode {
    /// DELETE or UPDATE.
    pub op: RowLevelOp,
    /// The table (the provider the positional scan read: same table and snapshot).
    pub table: Arc<IcebergTableProvider>,
    /// The rows to delete: two columns, file path and position.
    pub input: Arc<LogicalPlan>,
    schema: DFSchemaRef,
}

impl DeleteNode {
    /// A row-level write `op` of `table`'s rows that `input` locates.
    pub fn try_new(
        op: RowLevelOp,
        table: Arc<IcebergTableProvider>,
        input: Arc<LogicalPlan>,
    ) -> DFResult<Self> {
        if !table.reads_current() {
            // The positions would come from another snapshot than the `main` they commit to.
            return Err(crate::error::Error::Unsupported {
                table: table.table().ident().to_string(),
                message: "DELETE and UPDATE of a snapshot, branch or tag are not supported: \
                          run them on the table (its main branch)"
                    .into(),
            }
            .into());
        }
        let schema = DFSchema::try_from(count_schema())?;
        Ok(Self {
            op,
            table,
            input,
            schema: Arc::new(schema),
        })
    }

    fn key(&self) -> (RowLevelOp, String, Option<i64>) {
        (
            self.op,
            self.table.table().ident().to_string(),
            self.table.snapshot_id(),
        )
    }
}

impl PartialEq for DeleteNode {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key() && self.input == other.input
    }
}

impl Eq for DeleteNode {}

impl PartialOrd for DeleteNode {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.key().partial_cmp(&other.key())
    }
}

impl Hash for DeleteNode {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
        self.input.hash(state);
    }
}

impl UserDefinedLogicalNodeCore for DeleteNode {
    fn name(&self) -> &str {
        match self.op {
            RowLevelOp::Delete => "IcebergDelete",
            RowLevelOp::Update => "IcebergUpdate",
        }
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
            "{}: table={} snapshot={}",
            UserDefinedLogicalNodeCore::name(self),
            self.table.table().ident(),
            self.table
                .snapshot_id()
                .map_or_else(|| "none".to_string(), |s| s.to_string())
        )
    }

    fn with_exprs_and_inputs(
        &self,
        exprs: Vec<Expr>,
        mut inputs: Vec<LogicalPlan>,
    ) -> DFResult<Self> {
        if !exprs.is_empty() {
            return Err(DataFusionError::Internal(
                "IcebergDelete has no expressions".into(),
            ));
        }
        let input = inputs
            .pop()
            .ok_or_else(|| DataFusionError::Internal("IcebergDelete needs an input".into()))?;
        Ok(Self {
            input: Arc::new(input),
            ..self.clone()
        })
    }
}

/// Plans a [`DeleteNode`] into an [`IcebergDeleteExec`].
#[derive(Debug, Default)]
pub struct DeletePlanner;

#[async_trait]
impl ExtensionPlanner for DeletePlanner {
    async fn plan_extension(
        &self,
        _planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        _session_state: &SessionState,
    ) -> DFResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(node) = node.as_any().downcast_ref::<DeleteNode>() else {
            return Ok(None);
        };
        let table = node.table.table();
        let Some(catalog) = node.table.catalog() else {
            return Err(Error::Unsupported {
                table: table.ident().to_string(),
                message: "this table is read-only here".into(),
            }
            .into());
        };
        let input = physical_inputs
            .first()
            .ok_or_else(|| DataFusionError::Internal("IcebergDelete needs an input".into()))?;
        Ok(Some(match node.op {
            RowLevelOp::Delete => Arc::new(IcebergDeleteExec::new(
                Arc::clone(input),
                Arc::clone(catalog),
                Arc::clone(&node.table),
            )),
            RowLevelOp::Update => Arc::new(IcebergUpdateExec::new(
                Arc::clone(input),
                Arc::clone(catalog),
                Arc::clone(&node.table),
            )),
        }))
    }
}

/// The node of `plan` if it is a DELETE of an Iceberg table.
pub fn as_delete(plan: &LogicalPlan) -> Option<&DeleteNode> {
    match plan {
        LogicalPlan::Extension(ext) => ext.node.as_any().downcast_ref::<DeleteNode>(),
        _ => None,
    }
}
