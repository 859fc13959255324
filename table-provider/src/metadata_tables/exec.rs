//! [`MetadataScanExec`]: the scan of a metadata table: streams the batches its
//! [`MetadataRows`] produce (projected columns only, sources the pushed filters exclude
//! skipped), cut at the pushed limit.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{EquivalenceProperties, Partitioning};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::StreamExt;

use super::{MetadataRows, MetadataTableKind};

/// Reads one metadata table (one partition, streamed).
pub struct MetadataScanExec {
    table: String,
    kind: MetadataTableKind,
    rows: Arc<dyn MetadataRows>,
    projection: Vec<usize>,
    filters: Vec<Expr>,
    limit: Option<usize>,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for MetadataScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetadataScanExec")
            .field("table", &self.table)
            .field("kind", &self.kind)
            .field("projection", &self.projection)
            .field("filters", &self.filters)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl MetadataScanExec {
    pub(crate) fn try_new(
        table: String,
        kind: MetadataTableKind,
        rows: Arc<dyn MetadataRows>,
        projection: Vec<usize>,
        filters: Vec<Expr>,
        limit: Option<usize>,
    ) -> DFResult<Self> {
        let schema = Arc::new(rows.schema().project(&projection)?);
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Ok(Self {
            table,
            kind,
            rows,
            projection,
            filters,
            limit,
            properties,
        })
    }

    /// Which metadata table this scans.
    pub fn kind(&self) -> MetadataTableKind {
        self.kind
    }
}

impl DisplayAs for MetadataScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MetadataScanExec: {}${}, projection={:?}",
            self.table, self.kind, self.projection
        )?;
        if !self.filters.is_empty() {
            let filters: Vec<String> = self.filters.iter().map(ToString::to_string).collect();
            write!(f, ", pruning_filters=[{}]", filters.join(", "))?;
        }
        if let Some(limit) = self.limit {
            write!(f, ", limit={limit}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for MetadataScanExec {
    fn name(&self) -> &str {
        "MetadataScanExec"
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
        _context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "MetadataScanExec has one partition, not {partition}"
            )));
        }
        let schema: SchemaRef = self.schema();
        let batches = self
            .rows
            .pruned_batches(self.projection.clone(), &self.filters);
        let stream = match self.limit {
            None => batches.map(|b| b.map_err(DataFusionError::from)).boxed(),
            Some(limit) => batches
                .scan(limit, |remaining, b| {
                    if *remaining == 0 {
                        return futures::future::ready(None);
                    }
                    let b = b.map_err(DataFusionError::from).map(|b| {
                        let keep = b.num_rows().min(*remaining);
                        *remaining -= keep;
                        b.slice(0, keep)
                    });
                    futures::future::ready(Some(b))
                })
                .boxed(),
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}
