//! [`ScanRecipe`]: what an [`IcebergScanExec`](super::IcebergScanExec) was built from, so that
//! another process (a distributed engine's executor) can build the same scan again.
//!
//! The recipe is plain data: where the table's metadata file is, which snapshot selection was
//! read, the planned tasks (data file byte ranges with their delete files), and the query's
//! projection, filters and limit. It holds no object-store settings and no credentials: the
//! process that rebuilds the scan opens the files through its own `StoreRegistry`.
//! [`ScanRecipe::open`] re-reads the metadata file (through a [`MetadataCache`]) and returns a
//! provider whose [`IcebergTableProvider::scan_plan`] builds the scan of exactly these tasks:
//! no planning happens twice, and merge-on-read, schema mapping by field id and struct leaf
//! projection run as they do locally. [`TableRecipe`] is the table half of it (metadata file,
//! snapshot selection), what a logical plan ships for a table a scheduler plans itself.

use std::sync::Arc;

use datafusion::logical_expr::Expr;

use crate::catalog::{LoadedTable, MetadataCache, Namespace, TableIdent};
use crate::error::Result;
use crate::io::{LocationMap, StoreRegistry, TableIo};
use crate::plan::{PlanMetrics, ScanPlan, ScanPlanner, ScanTask};
use crate::provider::IcebergTableProvider;
use crate::spec::SnapshotSelector;

/// How one Iceberg scan was built (see the module docs).
#[derive(Debug, Clone)]
pub struct ScanRecipe {
    /// The table read: its metadata file and snapshot selection.
    pub table: TableRecipe,
    /// The snapshot planned (`None`: the table has no snapshot).
    pub snapshot_id: Option<i64>,
    /// The planned tasks, one list per output partition.
    pub partitions: Vec<Vec<ScanTask>>,
    /// What planning did (shown by the rebuilt scan's metrics).
    pub plan_metrics: PlanMetrics,
    /// The table columns requested (`None`: all).
    pub projection: Option<Vec<usize>>,
    /// The filters pushed into the scan (DataFusion's logical expressions over the table).
    pub filters: Vec<Expr>,
    /// The limit pushed into the scan.
    pub limit: Option<usize>,
}

impl ScanRecipe {
    /// The recipe of a scan of `plan` of `table`.
    pub(crate) fn new(
        table: TableRecipe,
        plan: ScanPlan,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Self {
        Self {
            table,
            snapshot_id: plan.snapshot_id,
            partitions: plan.partitions,
            plan_metrics: plan.metrics,
            projection: projection.cloned(),
            filters: filters.to_vec(),
            limit,
        }
    }

    /// The table's name.
    pub fn ident(&self) -> TableIdent {
        self.table.ident()
    }

    /// The planned scan this recipe describes (tasks, snapshot and metrics), for
    /// [`IcebergTableProvider::scan_plan`] of the provider [`Self::open`] returns.
    pub fn scan_plan(&self, provider: &IcebergTableProvider) -> ScanPlan {
        ScanPlan {
            snapshot_id: self.snapshot_id,
            schema: Arc::clone(provider.iceberg_schema()),
            partitions: self.partitions.clone(),
            metrics: self.plan_metrics.clone(),
        }
    }

    /// The table provider this recipe's scan was built by: the metadata file read through
    /// `stores` (parsed once per `metadata` cache), at the same snapshot selection, with
    /// `planner`'s caches (delete files, manifests) for merge-on-read.
    pub async fn open(
        &self,
        stores: &StoreRegistry,
        metadata: &MetadataCache,
        planner: Arc<ScanPlanner>,
    ) -> Result<IcebergTableProvider> {
        self.table.open(stores, metadata, planner).await
    }
}

/// How a table provider for reading was opened ([`IcebergTableProvider::table_recipe`]): the
/// metadata file, the snapshot selection and whether the scan is positional. Another process
/// (a distributed engine's scheduler) opens the same table at the same snapshot from it with
/// [`Self::open`], through its own stores: no catalog, no credentials travel with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRecipe {
    /// The table's namespace levels.
    pub namespace: Vec<String>,
    /// The table's name.
    pub name: String,
    /// The metadata file the table was loaded from.
    pub metadata_location: String,
    /// Where the table's files are when it was moved: (recorded prefix, actual prefix).
    pub moved: Option<(String, String)>,
    /// The snapshot selection read.
    pub selector: SnapshotSelector,
    /// A positional scan (file path and position columns appended).
    pub positional: bool,
}

impl TableRecipe {
    /// The recipe of `table` read at `selector` (`positional`: with the file path and position
    /// columns).
    pub(crate) fn of(table: &LoadedTable, selector: &SnapshotSelector, positional: bool) -> Self {
        Self {
            namespace: table.ident().namespace.levels().to_vec(),
            name: table.ident().name.clone(),
            metadata_location: table.metadata_location().to_string(),
            moved: table
                .io()
                .locations()
                .rewrite()
                .map(|(from, to)| (from.to_string(), to.to_string())),
            selector: selector.clone(),
            positional,
        }
    }

    /// The table's name.
    pub fn ident(&self) -> TableIdent {
        TableIdent::new(Namespace::new(self.namespace.clone()), self.name.clone())
    }

    /// The table provider this recipe describes: the metadata file read through `stores`
    /// (parsed once per `metadata` cache), at the same snapshot selection, with `planner`'s
    /// caches (delete files, manifests) for merge-on-read.
    pub async fn open(
        &self,
        stores: &StoreRegistry,
        metadata: &MetadataCache,
        planner: Arc<ScanPlanner>,
    ) -> Result<IcebergTableProvider> {
        let locations = match &self.moved {
            Some((from, to)) => LocationMap::moved(from, to),
            None => LocationMap::identity(),
        };
        let io = TableIo::new(stores.clone(), locations);
        let ident = self.ident();
        let parsed = metadata
            .read(&io, &ident.to_string(), &self.metadata_location)
            .await?;
        let table = LoadedTable::new(
            ident,
            self.metadata_location.clone(),
            parsed.metadata,
            parsed.refs,
            io,
        );
        let provider = IcebergTableProvider::try_new(table, self.selector.clone(), planner)?;
        Ok(if self.positional {
            provider.positional()
        } else {
            provider
        })
    }
}
