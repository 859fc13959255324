//! [`ShippedScanExec`]: an Iceberg scan received from another process, rebuilt from its recipe
//! on first execution with this process's own object stores and caches ([`ExecutorScans`]).
//!
//! Decoding happens where no IO should (a scheduler splitting stages decodes plans too), so the
//! node knows only what the recipe says — output schema and partition count — until it runs.
//! The first `execute` re-reads the table's metadata file (once per process: the metadata
//! cache) and builds the scan with [`IcebergTableProvider::scan_plan`] over the recipe's tasks;
//! every partition of the node shares that scan. Its metrics are the rebuilt scan's.
//!
//! [`IcebergTableProvider::scan_plan`]: petrel_table_provider::IcebergTableProvider::scan_plan

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::{DataFusionError, Result as DFResult, Statistics};
use datafusion::execution::{SendableRecordBatchStream, SessionStateBuilder, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use petrel_table_provider::catalog::MetadataCache;
use petrel_table_provider::io::StoreRegistry;
use petrel_table_provider::scan::{ScanRecipe, TableRecipe};
use petrel_table_provider::{IcebergScanExec, IcebergTableProvider, LeafProjection, ScanPlanner};
use tokio::sync::OnceCell;

/// What a process that runs shipped scans reads them with: its object stores (from its own
/// store configuration: credentials never travel in plans), and its caches of parsed metadata
/// files, manifests and delete files, shared by every scan it runs.
#[derive(Debug, Clone)]
pub struct ExecutorScans {
    stores: StoreRegistry,
    metadata: MetadataCache,
    planner: Arc<ScanPlanner>,
}

impl ExecutorScans {
    /// Scans reading through `stores`, with fresh caches.
    pub fn new(stores: StoreRegistry) -> Self {
        Self::with_planner(stores, Arc::new(ScanPlanner::default()))
    }

    /// Scans reading through `stores`, sharing `planner`'s manifest and delete-file caches.
    pub fn with_planner(stores: StoreRegistry, planner: Arc<ScanPlanner>) -> Self {
        Self {
            stores,
            metadata: MetadataCache::default(),
            planner,
        }
    }

    /// The table `recipe` describes, opened through this process's stores and caches.
    pub async fn open(&self, recipe: &TableRecipe) -> DFResult<IcebergTableProvider> {
        Ok(recipe
            .open(&self.stores, &self.metadata, Arc::clone(&self.planner))
            .await?)
    }

    /// The scan `recipe` describes, built in this process for `context`.
    async fn build(
        &self,
        recipe: &ScanRecipe,
        context: &TaskContext,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let provider = recipe
            .open(&self.stores, &self.metadata, Arc::clone(&self.planner))
            .await?;
        let state = SessionStateBuilder::new()
            .with_config(context.session_config().clone())
            .with_runtime_env(context.runtime_env())
            .with_scalar_functions(context.scalar_functions().values().cloned().collect())
            .with_aggregate_functions(context.aggregate_functions().values().cloned().collect())
            .with_window_functions(context.window_functions().values().cloned().collect())
            .build();
        provider
            .scan_plan(
                &state,
                recipe.scan_plan(&provider),
                recipe.projection.as_ref(),
                &recipe.filters,
                recipe.limit,
            )
            .await
    }
}

/// An Iceberg scan decoded from a shipped plan (see the module docs).
#[derive(Debug)]
pub struct ShippedScanExec {
    recipe: Arc<ScanRecipe>,
    /// Struct columns narrowed to these fields (as the sender's scan was).
    leaves: Option<LeafProjection>,
    scans: ExecutorScans,
    properties: Arc<PlanProperties>,
    built: Arc<OnceCell<Arc<dyn ExecutionPlan>>>,
}

impl ShippedScanExec {
    /// The scan of `recipe` (narrowed by `leaves`), producing `schema` in `partitions`
    /// partitions, to be built with `scans`.
    pub fn new(
        recipe: Arc<ScanRecipe>,
        leaves: Option<LeafProjection>,
        schema: SchemaRef,
        partitions: usize,
        scans: ExecutorScans,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Self {
            recipe,
            leaves,
            scans,
            properties,
            built: Arc::new(OnceCell::new()),
        }
    }

    /// What the scan is built from.
    pub fn recipe(&self) -> &Arc<ScanRecipe> {
        &self.recipe
    }

    /// The struct narrowing the scan applies.
    pub fn leaf_projection(&self) -> Option<&LeafProjection> {
        self.leaves.as_ref()
    }

    /// The scan built in this process (once), checked against the schema it was shipped with.
    async fn scan(&self, context: &TaskContext) -> DFResult<Arc<dyn ExecutionPlan>> {
        let built = self
            .built
            .get_or_try_init(|| async {
                let scan = self.scans.build(&self.recipe, context).await?;
                let scan = match (
                    &self.leaves,
                    scan.as_any().downcast_ref::<IcebergScanExec>(),
                ) {
                    (Some(leaves), Some(exec)) => match exec.narrowed_by(leaves.clone())? {
                        Some(narrowed) => Arc::new(narrowed) as Arc<dyn ExecutionPlan>,
                        None => scan,
                    },
                    _ => scan,
                };
                let expected = self.schema();
                if scan.schema().fields() != expected.fields() {
                    return Err(DataFusionError::Execution(format!(
                        "table {}: the scan rebuilt from metadata file {} produces columns {:?}, \
                         the plan expects {:?}",
                        self.recipe.ident(),
                        self.recipe.table.metadata_location,
                        field_names(&scan.schema()),
                        field_names(&expected),
                    )));
                }
                let partitions = scan.properties().output_partitioning().partition_count();
                let expected = self.properties.output_partitioning().partition_count();
                if partitions != expected {
                    return Err(DataFusionError::Execution(format!(
                        "table {}: the scan rebuilt from metadata file {} has {partitions} \
                         partitions, the plan expects {expected}",
                        self.recipe.ident(),
                        self.recipe.table.metadata_location,
                    )));
                }
                Ok::<_, DataFusionError>(scan)
            })
            .await?;
        Ok(Arc::clone(built))
    }
}

fn field_names(schema: &SchemaRef) -> Vec<&str> {
    schema.fields().iter().map(|f| f.name().as_str()).collect()
}

impl DisplayAs for ShippedScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tasks: usize = self.recipe.partitions.iter().map(Vec::len).sum();
        write!(
            f,
            "ShippedScanExec: table={}, snapshot={}, tasks={tasks}, metadata={}",
            self.recipe.ident(),
            self.recipe
                .snapshot_id
                .map_or_else(|| "none".to_string(), |s| s.to_string()),
            self.recipe.table.metadata_location,
        )
    }
}

impl ExecutionPlan for ShippedScanExec {
    fn name(&self) -> &str {
        "ShippedScanExec"
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
                "ShippedScanExec has no children".into(),
            ))
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let node = Self {
            recipe: Arc::clone(&self.recipe),
            leaves: self.leaves.clone(),
            scans: self.scans.clone(),
            properties: Arc::clone(&self.properties),
            built: Arc::clone(&self.built),
        };
        let stream = futures::stream::once(async move {
            let scan = node.scan(&context).await?;
            scan.execute(partition, context)
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            stream.boxed(),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.built.get().and_then(|scan| scan.metrics())
    }

    fn partition_statistics(&self, _partition: Option<usize>) -> DFResult<Statistics> {
        Ok(Statistics::new_unknown(&self.schema()))
    }
}
