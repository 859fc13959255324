//! [`TableChangesExec`]: the execution node of a `table_changes(...)` call. One partition; its
//! stream is fed by [`ChangeFeed::run`] through a bounded channel (two batches), so a client
//! that reads slowly holds the feed back, and dropping the stream (a cancel, a disconnect)
//! stops it. A stream (`stream = true`) is unbounded.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::context::SessionState;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::{
    RecordBatchReceiverStreamBuilder, RecordBatchStreamAdapter,
};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::StreamExt;

use super::feed::ChangeFeed;

/// Batches in flight between the feed and the client.
const CHANNEL_BATCHES: usize = 2;

/// Runs a [`ChangeFeed`] (see the module docs).
pub struct TableChangesExec {
    feed: Arc<ChangeFeed>,
    state: Arc<SessionState>,
    filters: Vec<Expr>,
    projection: Option<Vec<usize>>,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for TableChangesExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableChangesExec")
            .field("table", &self.feed.table().ident().to_string())
            .field("filters", &self.filters)
            .field("projection", &self.projection)
            .finish_non_exhaustive()
    }
}

impl TableChangesExec {
    /// The rows of `feed` (columns `projection`), planning scans in `state`, pruned by
    /// `filters`.
    pub fn try_new(
        feed: Arc<ChangeFeed>,
        state: Arc<SessionState>,
        filters: Vec<Expr>,
        projection: Option<Vec<usize>>,
    ) -> DFResult<Self> {
        let schema = match &projection {
            Some(p) => Arc::new(feed.schema().project(p)?),
            None => Arc::clone(feed.schema()),
        };
        let boundedness = if feed.is_stream() {
            Boundedness::Unbounded {
                requires_infinite_memory: false,
            }
        } else {
            Boundedness::Bounded
        };
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            boundedness,
        ));
        Ok(Self {
            feed,
            state,
            filters,
            projection,
            properties,
        })
    }
}

impl DisplayAs for TableChangesExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TableChangesExec: table={}{}",
            self.feed.table().ident(),
            if self.feed.is_stream() {
                ", stream"
            } else {
                ""
            }
        )
    }
}

impl ExecutionPlan for TableChangesExec {
    fn name(&self) -> &str {
        "TableChangesExec"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            Err(DataFusionError::Internal(
                "TableChangesExec has no children".into(),
            ))
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "TableChangesExec has one partition, not {partition}"
            )));
        }
        let mut builder =
            RecordBatchReceiverStreamBuilder::new(Arc::clone(self.feed.schema()), CHANNEL_BATCHES);
        let tx = builder.tx();
        let feed = Arc::clone(&self.feed);
        let state = Arc::clone(&self.state);
        let filters = self.filters.clone();
        builder.spawn(async move { feed.run(state, filters, context, tx).await });
        let stream = builder.build();
        let schema = self.schema();
        let projection = self.projection.clone();
        let stream = stream.map(move |batch| match &projection {
            Some(p) => Ok(batch?.project(p)?),
            None => batch,
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}
