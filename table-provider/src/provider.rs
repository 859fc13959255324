//! [`IcebergTableProvider`]: one Iceberg table (at one snapshot selection) as a DataFusion
//! `TableProvider`.
//!
//! - Projection pushdown: only the projected columns are read from Parquet.
//! - Filter pushdown: every filter prunes manifests and files during planning and reaches the
//!   Parquet scan (row-group statistics, page index, optional row filtering). A filter is
//!   answered `Exact` only when it is fully expressible and touches only columns that are
//!   identity-partitioned in every partition spec of the table: then partition pruning alone
//!   decides it. Everything else is `Inexact` (DataFusion re-applies it).
//! - Limit pushdown: with no filter, planning stops once files without deletes guarantee
//!   enough rows, and the Parquet scan stops reading at the limit.

use std::any::Any;
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DFSchema, Result as DFResult};
use datafusion::datasource::TableType;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use iceberg::spec::{NameMapping, Transform};

use crate::catalog::LoadedTable;
use crate::error::{Error, Result};
use crate::plan::{DeleteKind, Predicate, ScanPlan, ScanPlanner, ScanRequest};
use crate::scan::{FieldIdAdapterFactory, IcebergScanExec};
use crate::spec::{ResolvedSnapshot, SnapshotSelector, iceberg_schema_to_arrow};

/// An Iceberg table at one snapshot selection, for DataFusion.
#[derive(Debug, Clone)]
pub struct IcebergTableProvider {
    table: LoadedTable,
    selector: SnapshotSelector,
    resolved: ResolvedSnapshot,
    arrow_schema: SchemaRef,
    planner: Arc<ScanPlanner>,
    /// Field ids that are identity-partitioned in every spec.
    identity_everywhere: HashSet<i32>,
}

impl IcebergTableProvider {
    /// A provider reading `table` at `selector`. Fails for unknown snapshots or refs.
    pub fn try_new(
        table: LoadedTable,
        selector: SnapshotSelector,
        planner: Arc<ScanPlanner>,
    ) -> Result<Self> {
        let resolved = selector.resolve(&table)?;
        let arrow_schema = Arc::new(iceberg_schema_to_arrow(&resolved.schema)?);
        let specs: Vec<_> = table.metadata().partition_specs_iter().collect();
        let identity_everywhere = resolved
            .schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.id)
            .filter(|id| {
                !specs.is_empty()
                    && specs.iter().all(|spec| {
                        spec.fields()
                            .iter()
                            .any(|pf| pf.source_id == *id && pf.transform == Transform::Identity)
                    })
            })
            .collect();
        Ok(Self {
            table,
            selector,
            resolved,
            arrow_schema,
            planner,
            identity_everywhere,
        })
    }

    /// The table read.
    pub fn table(&self) -> &LoadedTable {
        &self.table
    }

    /// The snapshot id read (`None` for a table without snapshots).
    pub fn snapshot_id(&self) -> Option<i64> {
        self.resolved.snapshot.as_ref().map(|s| s.snapshot_id())
    }

    /// Plans the scan of this provider for `filters` and `limit`.
    pub async fn plan(
        &self,
        filters: &[Expr],
        limit: Option<usize>,
        target_partitions: usize,
    ) -> Result<ScanPlan> {
        let (filter, _) = Predicate::from_filters(filters, &self.resolved.schema);
        let request = ScanRequest {
            selector: self.selector.clone(),
            filter,
            limit: if filters.is_empty() { limit } else { None },
            target_partitions,
        };
        self.planner.plan(&self.table, &request).await
    }

    fn refuse_deletes(&self, plan: &ScanPlan) -> Result<()> {
        let mut kinds = Vec::new();
        let mut files = HashSet::new();
        for delete in plan.tasks().flat_map(|t| &t.deletes) {
            files.insert(delete.path.as_str());
            let kind = match delete.kind {
                DeleteKind::Position => "position deletes",
                DeleteKind::DeletionVector { .. } => "deletion vectors",
                DeleteKind::Equality { .. } => "equality deletes",
            };
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        if files.is_empty() {
            return Ok(());
        }
        Err(Error::Unsupported {
            table: self.table.ident().to_string(),
            message: format!(
                "snapshot {} has {} delete file(s) ({}) that apply to the rows read; \
                 merge-on-read is not supported yet, and reading without them would return deleted rows",
                plan.snapshot_id.unwrap_or_default(),
                files.len(),
                kinds.join(", ")
            ),
        })
    }

    fn name_mapping(&self) -> Option<Arc<NameMapping>> {
        let json = self
            .table
            .metadata()
            .properties()
            .get("schema.name-mapping.default")?;
        match serde_json::from_str::<NameMapping>(json) {
            Ok(mapping) => Some(Arc::new(mapping)),
            Err(e) => {
                log::warn!(
                    "table {}: ignoring unparsable schema.name-mapping.default: {e}",
                    self.table.ident()
                );
                None
            }
        }
    }
}

#[async_trait]
impl TableProvider for IcebergTableProvider {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.arrow_schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn get_table_definition(&self) -> Option<&str> {
        None
    }

    fn get_logical_plan(&self) -> Option<Cow<'_, datafusion::logical_expr::LogicalPlan>> {
        None
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                let (pred, complete) =
                    Predicate::from_filters(std::slice::from_ref(*f), &self.resolved.schema);
                let mut keys = Vec::new();
                pred.keys(&mut keys);
                let exact = complete.first().copied().unwrap_or(false)
                    && !keys.is_empty()
                    && keys.iter().all(|k| self.identity_everywhere.contains(k));
                if exact {
                    TableProviderFilterPushDown::Exact
                } else {
                    TableProviderFilterPushDown::Inexact
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let target_partitions = state.config().target_partitions();
        let plan = self.plan(filters, limit, target_partitions).await?;
        self.refuse_deletes(&plan)?;
        let table_name = self.table.ident().to_string();
        let projected_schema = match projection {
            Some(p) => Arc::new(self.arrow_schema.project(p)?),
            None => Arc::clone(&self.arrow_schema),
        };
        if plan.partitions.is_empty() {
            let empty: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(projected_schema));
            return Ok(Arc::new(IcebergScanExec::new(
                empty,
                table_name,
                plan.snapshot_id,
                plan.metrics,
            )));
        }

        let io = self.table.io();
        let mut store_url = None;
        let mut groups = Vec::with_capacity(plan.partitions.len());
        for tasks in &plan.partitions {
            let mut files = Vec::with_capacity(tasks.len());
            for task in tasks {
                let (_, url, path) = io.resolve(&task.file.path)?;
                store_url.get_or_insert(url);
                let mut file = PartitionedFile::new(path.to_string(), task.file.file_size);
                if !task.whole_file {
                    file = file.with_range(task.start as i64, (task.start + task.length) as i64);
                }
                files.push(file);
            }
            groups.push(FileGroup::new(files));
        }
        let Some(store_url) = store_url else {
            return Err(
                Error::InvalidArgument(format!("table {table_name}: no files to scan")).into(),
            );
        };

        let mut source = ParquetSource::new(Arc::clone(&self.arrow_schema))
            .with_table_parquet_options(state.table_options().parquet.clone());
        if let Some(expr) = conjunction(filters.to_vec()) {
            let df_schema = DFSchema::try_from(Arc::clone(&self.arrow_schema))?;
            let predicate = state.create_physical_expr(expr, &df_schema)?;
            source = source.with_predicate(predicate);
        }
        let adapter =
            FieldIdAdapterFactory::new(Arc::clone(&self.resolved.schema), self.name_mapping());
        let config = FileScanConfigBuilder::new(store_url, Arc::new(source))
            .with_file_groups(groups)
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .with_expr_adapter(Some(Arc::new(adapter)))
            .build();
        let input: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);
        Ok(Arc::new(IcebergScanExec::new(
            input,
            table_name,
            plan.snapshot_id,
            plan.metrics,
        )))
    }
}
