//! [`StatementExec`]: the physical plan of a statement Petrel runs itself (Spark's DDL, `CALL`
//! procedures, branch and tag statements). It runs the statement against the session that
//! planned it when executed — and only then, never when the plan is built, prepared or
//! explained — and returns the statement's one batch. The session runs with the task
//! context's runtime (a server attaches each query's memory pool there, not to the session
//! that plans).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::context::SessionState;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, Partitioning};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::future::BoxFuture;

use crate::error::Result;

/// Runs a statement's SQL text in a session and returns its result.
pub type RunStatement = fn(SessionState, String) -> BoxFuture<'static, Result<RecordBatch>>;

/// Runs one statement when executed; see the module docs.
pub struct StatementExec {
    name: &'static str,
    sql: String,
    state: SessionState,
    run: RunStatement,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for StatementExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(self.name)
            .field("sql", &self.sql)
            .finish_non_exhaustive()
    }
}

impl StatementExec {
    /// The node `name` running `sql` in `state` with `run`, whose result has `schema`.
    pub fn new(
        name: &'static str,
        sql: String,
        state: SessionState,
        schema: SchemaRef,
        run: RunStatement,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            name,
            sql,
            state,
            run,
            properties,
        }
    }
}

impl DisplayAs for StatementExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.sql)
    }
}

impl ExecutionPlan for StatementExec {
    fn name(&self) -> &str {
        self.name
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "{} has one partition, not {partition}",
                self.name
            )));
        }
        // What the statement reads and writes counts in the executing query's memory pool.
        let runtime = context.runtime_env();
        let state = if Arc::ptr_eq(self.state.runtime_env(), &runtime) {
            self.state.clone()
        } else {
            SessionStateBuilder::new_from_existing(self.state.clone())
                .with_runtime_env(runtime)
                .build()
        };
        let run = (self.run)(state, self.sql.clone());
        let stream = futures::stream::once(async move { Ok(run.await?) });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            stream,
        )))
    }
}
