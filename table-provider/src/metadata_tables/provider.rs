//! [`MetadataTableProvider`]: one metadata table of one Iceberg table (at one snapshot
//! selection) as a read-only DataFusion `TableProvider`.
//!
//! - Projection: only the projected columns are built (`readable_metrics`, the widest, only
//!   when asked for).
//! - Limit: the scan stops reading manifests once it has produced the limit.
//! - Filters stay above the scan (DataFusion applies them to the streamed batches); those of
//!   the files and entries tables on `content`, `spec_id`, `partition.<f>` and `status` also
//!   skip the manifests that cannot match (`Inexact`, see `pushdown`).
//! - Writes (`INSERT`, `DELETE`, `UPDATE`) are refused naming the table.

use std::any::Any;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::Result as DFResult;
use datafusion::datasource::TableType;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use super::exec::MetadataScanExec;
use super::files::FilesRows;
use super::history::HistoryRows;
use super::manifests::ManifestsRows;
use super::partitions::PartitionsRows;
use super::position_deletes::PositionDeletesRows;
use super::{MetadataRows, MetadataTableKind, metadata_table_name};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};
use crate::plan::ScanPlanner;
use crate::spec::SnapshotSelector;

/// A metadata table; see the module docs.
#[derive(Debug)]
pub struct MetadataTableProvider {
    name: String,
    kind: MetadataTableKind,
    rows: Arc<dyn MetadataRows>,
}

impl MetadataTableProvider {
    /// Metadata table `kind` of `table` at `selector` (only the snapshot-scoped tables take a
    /// selector other than [`SnapshotSelector::Current`]), reading manifests through
    /// `planner`'s cache.
    pub fn try_new(
        table: LoadedTable,
        kind: MetadataTableKind,
        selector: SnapshotSelector,
        planner: &ScanPlanner,
    ) -> Result<Self> {
        let name = metadata_table_name(&table.ident().to_string(), kind);
        if selector != SnapshotSelector::Current && !kind.reads_one_snapshot() {
            return Err(Error::InvalidArgument(format!(
                "metadata table {name} describes the whole table and cannot be read at a \
                 snapshot ({selector}); time travel applies to manifests, files, data_files, \
                 delete_files, entries, partitions and position_deletes"
            )));
        }
        let snapshot = selector.resolve(&table)?.snapshot;
        let cache = planner.cache().clone();
        let rows: Arc<dyn MetadataRows> = match kind {
            MetadataTableKind::Snapshots
            | MetadataTableKind::History
            | MetadataTableKind::Refs
            | MetadataTableKind::MetadataLogEntries => Arc::new(HistoryRows::new(kind, table)),
            MetadataTableKind::Manifests | MetadataTableKind::AllManifests => {
                Arc::new(ManifestsRows::new(kind, table, snapshot, cache))
            }
            MetadataTableKind::Partitions => Arc::new(PartitionsRows::new(table, snapshot, cache)?),
            MetadataTableKind::PositionDeletes => {
                Arc::new(PositionDeletesRows::new(table, snapshot, cache)?)
            }
            _ => Arc::new(FilesRows::new(kind, table, snapshot, cache)?),
        };
        Ok(Self { name, kind, rows })
    }

    /// Which metadata table this is.
    pub fn kind(&self) -> MetadataTableKind {
        self.kind
    }

    fn refuse<T>(&self, what: &str) -> DFResult<T> {
        Err(Error::InvalidArgument(format!(
            "metadata table {} is read-only: {what} is not allowed",
            self.name
        ))
        .into())
    }
}

#[async_trait]
impl TableProvider for MetadataTableProvider {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn schema(&self) -> SchemaRef {
        self.rows.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if self.rows.prunes(f) {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let projection = match projection {
            Some(p) => p.clone(),
            None => (0..self.rows.schema().fields().len()).collect(),
        };
        Ok(Arc::new(MetadataScanExec::try_new(
            self.name.clone(),
            self.kind,
            Arc::clone(&self.rows),
            projection,
            filters
                .iter()
                .filter(|f| self.rows.prunes(f))
                .cloned()
                .collect(),
            limit,
        )?))
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        _input: Arc<dyn ExecutionPlan>,
        _insert_op: InsertOp,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.refuse("INSERT")
    }

    async fn delete_from(
        &self,
        _state: &dyn Session,
        _filters: Vec<Expr>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.refuse("DELETE")
    }

    async fn update(
        &self,
        _state: &dyn Session,
        _assignments: Vec<(String, Expr)>,
        _filters: Vec<Expr>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.refuse("UPDATE")
    }
}
