//! The front end's side of `petrel serve --engine ballista://HOST:PORT`: which queries go to
//! the cluster, and how their results come back.
//!
//! [`ClusterEngine::query_planner`] wraps the server's own query planner. Every statement is
//! planned locally first (that is what says how much it reads); the plan is then sent to the
//! cluster when
//!
//! - it only reads Iceberg tables (no writes, DDL, procedures, `EXPLAIN`, metadata tables,
//!   change feeds, in-memory or `information_schema` tables: those run locally), and
//! - its Iceberg scans select at least [`ClusterEngine::min_planned_bytes`] of data files
//!   (`--cluster-min-bytes`): a small query costs less here than a job on the cluster.
//!
//! A query sent to the cluster is Ballista's `DistributedQueryExec` over the *optimized logical
//! plan* (the scheduler plans it again, splitting scans by `read.split.target-size`), wrapped in
//! a [`ClusterQueryExec`]: its batches stream from the executors that hold the final stage's
//! output to the Flight SQL client as the client reads them, never collected here. When the
//! stream is dropped before its end — the client cancelled (CancelFlightInfo) or went away —
//! the job is cancelled on the scheduler.

use std::any::Any;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arrow::array::RecordBatch;
use async_trait::async_trait;
use ballista_core::execution_plans::DistributedQueryExec;
use ballista_core::extension::SessionConfigExt;
use ballista_core::serde::protobuf::CancelJobParams;
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::datasource::source_as_provider;
use datafusion::execution::context::{QueryPlanner, SessionState};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, RecordBatchStream,
};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::protobuf::LogicalPlanNode;
use futures::Stream;
use petrel_table_provider::io::StoreRegistry;
use petrel_table_provider::{IcebergScanExec, IcebergTableProvider};

use crate::cluster_codec::ClusterLogicalCodec;
use crate::shipped_scan::ExecutorScans;

/// The default of `--cluster-min-bytes`: queries selecting less stay on the front end.
pub const DEFAULT_MIN_PLANNED_BYTES: u64 = 256 * 1024 * 1024;

/// A Ballista cluster queries can be sent to (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterEngine {
    scheduler_url: String,
    min_planned_bytes: u64,
}

impl ClusterEngine {
    /// The cluster whose scheduler is at `engine` (`ballista://HOST:PORT`; the port defaults
    /// to Ballista's 50050), taking queries whose scans select `min_planned_bytes` or more.
    pub fn parse(engine: &str, min_planned_bytes: u64) -> Result<Self, String> {
        let Some(rest) = engine.strip_prefix("ballista://") else {
            return Err(format!(
                "engine `{engine}`: expected ballista://HOST:PORT (a Ballista scheduler)"
            ));
        };
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return Err(format!(
                "engine `{engine}`: expected ballista://HOST:PORT (a Ballista scheduler)"
            ));
        }
        let authority = match authority.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                authority.to_string()
            }
            Some(_) => {
                return Err(format!(
                    "engine `{engine}`: the port must be a number from 1 to 65535"
                ));
            }
            None => format!("{authority}:50050"),
        };
        Ok(Self {
            scheduler_url: format!("http://{authority}"),
            min_planned_bytes,
        })
    }

    /// The scheduler's gRPC URL (`http://HOST:PORT`).
    pub fn scheduler_url(&self) -> &str {
        &self.scheduler_url
    }

    /// Queries whose Iceberg scans select fewer bytes of data files run locally.
    pub fn min_planned_bytes(&self) -> u64 {
        self.min_planned_bytes
    }

    /// A query planner that plans with `local` and sends what qualifies to this cluster.
    pub fn query_planner(
        &self,
        local: Arc<dyn QueryPlanner + Send + Sync>,
    ) -> Arc<dyn QueryPlanner + Send + Sync> {
        Arc::new(ClusterQueryPlanner {
            local,
            engine: self.clone(),
            // Encoding a plan opens nothing: the stores are never used here.
            codec: Arc::new(ClusterLogicalCodec::new(ExecutorScans::new(
                StoreRegistry::default(),
            ))),
        })
    }
}

/// See [`ClusterEngine::query_planner`].
struct ClusterQueryPlanner {
    local: Arc<dyn QueryPlanner + Send + Sync>,
    engine: ClusterEngine,
    codec: Arc<dyn LogicalExtensionCodec>,
}

impl fmt::Debug for ClusterQueryPlanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterQueryPlanner")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl QueryPlanner for ClusterQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &SessionState,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let local = self
            .local
            .create_physical_plan(logical_plan, session_state)
            .await?;
        if !reads_only_iceberg_tables(logical_plan) {
            return Ok(local);
        }
        let Some(bytes) = planned_bytes(&local) else {
            return Ok(local);
        };
        if bytes < self.engine.min_planned_bytes {
            return Ok(local);
        }
        let job = DistributedQueryExec::<LogicalPlanNode>::with_extension(
            self.engine.scheduler_url.clone(),
            session_state.config().ballista_config(),
            logical_plan.clone(),
            Arc::clone(&self.codec),
            session_state.session_id().to_string(),
        );
        tracing::info!(
            scheduler = %self.engine.scheduler_url,
            planned_bytes = bytes,
            "query sent to the Ballista cluster"
        );
        Ok(Arc::new(ClusterQueryExec::new(
            Arc::new(job),
            self.engine.scheduler_url.clone(),
            bytes,
        )))
    }
}

/// Whether `plan` is a read of Iceberg tables only, each openable elsewhere from its metadata
/// file (see the module docs); at least one.
pub fn reads_only_iceberg_tables(plan: &LogicalPlan) -> bool {
    let mut shippable = true;
    let mut tables = 0;
    let visited = plan.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::TableScan(scan) => {
                let iceberg = source_as_provider(&scan.source).ok().and_then(|provider| {
                    provider
                        .as_any()
                        .downcast_ref::<IcebergTableProvider>()
                        .and_then(IcebergTableProvider::table_recipe)
                });
                match iceberg {
                    Some(recipe) if !recipe.positional => tables += 1,
                    _ => shippable = false,
                }
            }
            LogicalPlan::Dml(_)
            | LogicalPlan::Ddl(_)
            | LogicalPlan::Copy(_)
            | LogicalPlan::Extension(_)
            | LogicalPlan::Statement(_)
            | LogicalPlan::Explain(_)
            | LogicalPlan::Analyze(_)
            | LogicalPlan::DescribeTable(_)
            | LogicalPlan::RecursiveQuery(_) => shippable = false,
            _ => {}
        }
        Ok(if shippable {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    visited.is_ok() && shippable && tables > 0
}

/// The bytes of data files the Iceberg scans of `plan` selected (`None`: no Iceberg scan, e.g.
/// a `count(*)` the manifests answered).
pub fn planned_bytes(plan: &Arc<dyn ExecutionPlan>) -> Option<u64> {
    let own = plan
        .as_any()
        .downcast_ref::<IcebergScanExec>()
        .map(|scan| scan.recipe().map_or(0, |r| r.plan_metrics.bytes_selected));
    plan.children()
        .into_iter()
        .filter_map(planned_bytes)
        .fold(own, |sum, bytes| Some(sum.unwrap_or(0) + bytes))
}

/// A query running on the cluster (see the module docs).
#[derive(Debug)]
pub struct ClusterQueryExec {
    job: Arc<DistributedQueryExec<LogicalPlanNode>>,
    scheduler_url: String,
    planned_bytes: u64,
}

impl ClusterQueryExec {
    fn new(
        job: Arc<DistributedQueryExec<LogicalPlanNode>>,
        scheduler_url: String,
        planned_bytes: u64,
    ) -> Self {
        Self {
            job,
            scheduler_url,
            planned_bytes,
        }
    }

    /// The scheduler the query runs on.
    pub fn scheduler_url(&self) -> &str {
        &self.scheduler_url
    }
}

impl DisplayAs for ClusterQueryExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ClusterQueryExec: scheduler={}, planned_bytes={}",
            self.scheduler_url, self.planned_bytes
        )
    }
}

impl ExecutionPlan for ClusterQueryExec {
    fn name(&self) -> &str {
        "ClusterQueryExec"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.job.properties()
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
                "ClusterQueryExec has no children".into(),
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
                "ClusterQueryExec has one partition, not {partition}"
            )));
        }
        let inner = self.job.execute(0, context)?;
        Ok(Box::pin(ClusterStream {
            inner,
            job: Arc::clone(&self.job),
            scheduler_url: self.scheduler_url.clone(),
            finished: false,
        }))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.job.metrics()
    }
}

/// The batches of a cluster job; cancels the job when dropped before its end.
struct ClusterStream {
    inner: SendableRecordBatchStream,
    job: Arc<DistributedQueryExec<LogicalPlanNode>>,
    scheduler_url: String,
    finished: bool,
}

impl Stream for ClusterStream {
    type Item = DFResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        match polled {
            Poll::Ready(None) => {
                self.finished = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                // A failed job is over on the scheduler too: nothing to cancel.
                self.finished = true;
                let context = format!("the Ballista cluster at {}", self.scheduler_url);
                Poll::Ready(Some(Err(e.context(context))))
            }
            other => other,
        }
    }
}

impl RecordBatchStream for ClusterStream {
    fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.inner.schema()
    }
}

impl Drop for ClusterStream {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let Some(job_id) = self.job.job_id() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let url = self.scheduler_url.clone();
        runtime.spawn(async move {
            let cancelled = async {
                let mut client = SchedulerGrpcClient::connect(url.clone()).await?;
                client
                    .cancel_job(CancelJobParams {
                        job_id: job_id.clone(),
                    })
                    .await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            };
            match cancelled.await {
                Ok(()) => tracing::info!(job_id, scheduler = %url, "cluster job cancelled"),
                Err(e) => {
                    tracing::warn!(job_id, scheduler = %url, error = %e, "cannot cancel a cluster job")
                }
            }
        });
    }
}
