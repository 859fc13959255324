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
//!   enough rows, and the scan stops reading at the limit.
//! - Merge-on-read: data files with deletes get position deletes / deletion vectors applied as
//!   Parquet access plans and equality deletes as a per-batch filter (see [`crate::deletes`]);
//!   equality key columns the query does not project are read for filtering and dropped.
//! - Positional scans ([`IcebergTableProvider::positional`]): the same table with two more
//!   columns, each row's data file (as the manifests name it) and its position in that file,
//!   computed by the reader from its access plan. DELETE, UPDATE and MERGE find the rows they
//!   change with them.
//! - INSERT: [`IcebergWriteExec`] under [`IcebergCommitExec`]; an upsert (identifier fields
//!   and `write.upsert.enabled=true`, or [`IcebergTableProvider::upsert`]) also writes
//!   equality deletes on the key (see [`crate::write::upsert`]).

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::datatypes::{DataType, Field};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::common::{DFSchema, Result as DFResult};
use datafusion::datasource::TableType;
use datafusion::datasource::physical_plan::parquet::CachedParquetFileReaderFactory;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr_adapter::PhysicalExprAdapterFactory;
use datafusion::physical_optimizer::pruning::PruningPredicate;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder};
use datafusion::physical_plan::projection::ProjectionExec;
use iceberg::spec::{NameMapping, Transform};

use crate::catalog::{Catalog, LoadedTable, RefKind};
use crate::commit::TableReplacement;
use crate::deletes::{
    EqualityGroup, EqualityLayout, Extended, FileDeletes, KeyColumns, MergeOnRead,
    cached_equality_positions, equality_keys, extend_equality_positions, group_entries, key_type,
};
use crate::dml::{IcebergCommitExec, IcebergWriteExec, WriteMode};
use crate::error::{Error, Result};
use crate::plan::{
    DeleteFileRef, DeleteKind, ManifestCache, Predicate, ScanPlan, ScanPlanner, ScanRequest,
    SplitSettings, regroup, scan_bytes,
};
use crate::scan::{
    CachedScan, ColumnSource, FILE_PATH_COLUMN, FieldIdAdapterFactory, FilteredScan,
    IcebergScanExec, KeylessRead, MergeSpec, NamedFileReaderFactory, NanFreeColumns,
    NanSafeReaderFactory, POSITION_COLUMN, ScanRecipe, TableRecipe, metadata_statistics,
    partitioned_file,
};
use crate::spec::{ResolvedSnapshot, SnapshotSelector, field_id_of, iceberg_schema_to_arrow};
use crate::write::data_file_writer::WriteSettings;
use crate::write::distribution::DistributionMode;
use crate::write::equality_deletes::EqualityDeleteSettings;
use crate::write::upsert::{UPSERT_PROPERTY, UpsertKeys, upsert_enabled};

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
    /// The catalog the table came from: where writes commit (none: read-only).
    catalog: Option<Arc<dyn Catalog>>,
    /// For a positional scan: the table's schema plus the file path and position columns.
    positional_schema: Option<SchemaRef>,
    /// Only these data files (by location as the manifests name them) are read.
    only_files: Option<Arc<HashSet<String>>>,
    /// Every INSERT is an upsert, whatever `write.upsert.enabled` says.
    upsert: bool,
    /// For a row-level write: the filters its positional scans of the whole table were planned
    /// with, shared by this provider's clones ([`Self::recording_read_filter`]).
    read_filters: Option<Arc<std::sync::Mutex<Vec<Predicate>>>>,
    /// For a replacement ([`Self::replacing`]): the table before it (`table` is the replacement
    /// staged on it) and what replaces it.
    replacement: Option<(LoadedTable, Arc<TableReplacement>)>,
    /// Scans group their tasks by the table's `read.split.*` sizes, not the session's
    /// partition count ([`Self::split_by_size`]).
    split_by_size: bool,
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
            catalog: None,
            positional_schema: None,
            only_files: None,
            upsert: false,
            read_filters: None,
            replacement: None,
            split_by_size: false,
        })
    }

    /// The table replaced by `replacement` (see [`crate::commit::replace`]): a provider over the
    /// replacement staged on this table (its new schema, no rows), whose INSERT commits the
    /// replacement and the rows inserted as one new version of the table (an empty INSERT
    /// leaves it empty). Needs this provider to read the table's current state.
    pub fn replacing(&self, replacement: TableReplacement) -> Result<Self> {
        if !self.reads_current() {
            return Err(Error::InvalidArgument(format!(
                "table {}: only the table itself can be replaced, not a snapshot, branch or tag",
                self.table.ident()
            )));
        }
        let staged = replacement.stage(&self.table)?;
        let mut provider =
            Self::try_new(staged, SnapshotSelector::Current, Arc::clone(&self.planner))?;
        provider.catalog = self.catalog.clone();
        provider.replacement = Some((self.table.clone(), Arc::new(replacement)));
        Ok(provider)
    }

    /// This table (same snapshot) as a positional scan: its columns, then
    /// [`FILE_PATH_COLUMN`] (Utf8, the data file as the manifests name it) and
    /// [`POSITION_COLUMN`] (Int64, the row's position in that file). Every data file is read
    /// under an access plan Petrel builds (row groups and pages pruned by the filters, deleted
    /// runs skipped), so positions are exact; filters on the table's columns prune files, row
    /// groups and pages.
    pub fn positional(&self) -> Self {
        let mut fields: Vec<Arc<Field>> = self.arrow_schema.fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new(
            FILE_PATH_COLUMN,
            DataType::Utf8,
            false,
        )));
        fields.push(Arc::new(Field::new(
            POSITION_COLUMN,
            DataType::Int64,
            false,
        )));
        Self {
            positional_schema: Some(Arc::new(arrow::datatypes::Schema::new(fields))),
            ..self.clone()
        }
    }

    /// This scan reading only the data files `files` (locations as the manifests name them):
    /// a copy-on-write rewrite reads the files it replaces.
    pub fn only_files(&self, files: HashSet<String>) -> Self {
        Self {
            only_files: Some(Arc::new(files)),
            ..self.clone()
        }
    }

    /// This table with every INSERT an upsert (as `write.upsert.enabled=true` makes it; a bulk
    /// ingest's `upsert=true`). The table needs identifier fields, or the INSERT fails.
    pub fn upsert(&self) -> Self {
        Self {
            upsert: true,
            ..self.clone()
        }
    }

    /// This table, recording the filters its positional scans (not those of [`Self::only_files`])
    /// are planned with, in this provider and its clones: a row-level write's conflict filter
    /// (Spark's `conflictDetectionFilter`: the filters pushed to the scan of the target).
    pub fn recording_read_filter(&self) -> Self {
        Self {
            read_filters: Some(Arc::default()),
            ..self.clone()
        }
    }

    /// What the recorded positional scans may have read ([`Self::recording_read_filter`]): the
    /// disjunction of their filters, `None` when nothing was recorded (read as "any row").
    pub fn read_filter(&self) -> Option<Predicate> {
        let recorded = self.read_filters.as_ref()?;
        let filters = recorded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        (!filters.is_empty()).then(|| Predicate::or(filters))
    }

    /// This table with its scans' tasks grouped as Iceberg groups them for Spark
    /// ([`crate::plan::plan_task_groups`] with the table's `read.split.target-size`,
    /// `read.split.open-file-cost` and `read.split.planning-lookback`; a scan smaller than one
    /// target per `target_partitions` slot gets smaller groups, as with
    /// `read.split.adaptive-size.enabled`): one output partition per group, however many
    /// cores the planning process has. What a cluster runs: each partition is a task an
    /// executor runs.
    pub fn split_by_size(&self) -> Self {
        Self {
            split_by_size: true,
            ..self.clone()
        }
    }

    /// How to open this table again elsewhere (a distributed engine's scheduler): `None` for
    /// a provider that is more than a read of the table at a snapshot (a replacement, an
    /// upsert target, a copy-on-write rewrite's file subset, a row-level write's recorded
    /// scans).
    pub fn table_recipe(&self) -> Option<TableRecipe> {
        if !self.reads_plainly() {
            return None;
        }
        Some(TableRecipe::of(
            &self.table,
            &self.selector,
            self.positional_schema.is_some(),
        ))
    }

    /// Whether this provider is a plain read of its table at its snapshot: not a replacement,
    /// an upsert target, a copy-on-write rewrite's file subset or a row-level write's recorded
    /// scans.
    pub fn reads_plainly(&self) -> bool {
        self.only_files.is_none()
            && !self.upsert
            && self.read_filters.is_none()
            && self.replacement.is_none()
    }

    /// Whether an INSERT into this table is an upsert ([`Self::upsert`], or the table's
    /// `write.upsert.enabled`).
    pub fn upserts(&self) -> bool {
        self.upsert || upsert_enabled(self.table.metadata())
    }

    /// The Iceberg schema of the snapshot read.
    pub fn iceberg_schema(&self) -> &iceberg::spec::SchemaRef {
        &self.resolved.schema
    }

    /// The provider, writing through `catalog` (INSERT commits there).
    pub fn with_catalog(mut self, catalog: Arc<dyn Catalog>) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// The manifest cache this table's scans plan with.
    pub fn manifest_cache(&self) -> &ManifestCache {
        self.planner.cache()
    }

    /// The catalog writes commit through (none: the table is read-only here).
    pub fn catalog(&self) -> Option<&Arc<dyn Catalog>> {
        self.catalog.as_ref()
    }

    /// The table read.
    pub fn table(&self) -> &LoadedTable {
        &self.table
    }

    /// Whether this provider reads the table's current state (`main`), not a snapshot id,
    /// timestamp, branch or tag: what row-level writes require (they commit to `main`).
    pub fn reads_current(&self) -> bool {
        matches!(self.selector, SnapshotSelector::Current)
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
        let plan = self.planner.plan(&self.table, &request).await?;
        let m = &plan.metrics;
        tracing::debug!(
            table = %self.table.ident(),
            snapshot_id = ?plan.snapshot_id,
            manifests_total = m.manifests_total,
            manifests_pruned = m.manifests_pruned,
            data_files = m.data_files_seen,
            files_pruned = m.files_pruned_by_partition + m.files_pruned_by_metrics,
            files_selected = m.files_selected,
            delete_files = m.delete_files,
            planning_ms = m.planning_time.as_millis() as u64,
            "scan planned"
        );
        Ok(plan)
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
                tracing::warn!(
                    table = %self.table.ident(),
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
        Arc::clone(
            self.positional_schema
                .as_ref()
                .unwrap_or(&self.arrow_schema),
        )
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                // Filters on a positional scan's own columns stay above the scan.
                let on_positions = self.positional_schema.is_some()
                    && f.column_refs()
                        .iter()
                        .any(|c| c.name == FILE_PATH_COLUMN || c.name == POSITION_COLUMN);
                if on_positions {
                    return TableProviderFilterPushDown::Unsupported;
                }
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

    async fn insert_into(
        &self,
        state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let table = self.table.ident().to_string();
        let refuse = |message: String| -> DFResult<Arc<dyn ExecutionPlan>> {
            Err(Error::Unsupported {
                table: table.clone(),
                message,
            }
            .into())
        };
        let Some(catalog) = &self.catalog else {
            return refuse("this table is read-only here".into());
        };
        // `INSERT INTO t.branch_b` (a branch selector) commits to that branch only.
        let branch = match &self.selector {
            SnapshotSelector::Current => None,
            SnapshotSelector::Ref(name)
                if self
                    .table
                    .refs()
                    .get(name)
                    .is_some_and(|r| r.kind == RefKind::Branch) =>
            {
                Some(name.clone())
            }
            _ => {
                return refuse(
                    "INSERT into a snapshot or tag is not possible: insert into the table or \
                     one of its branches (t.branch_<name>)"
                        .into(),
                );
            }
        };
        let mode = match insert_op {
            InsertOp::Append => WriteMode::Append,
            InsertOp::Overwrite => WriteMode::OverwritePartitions,
            InsertOp::Replace => {
                return refuse(
                    "REPLACE INTO is not supported: use INSERT OVERWRITE (replaces the \
                     partitions written) or MERGE INTO"
                        .into(),
                );
            }
        };
        let metadata = self.table.metadata();
        let upsert = self.upserts() && self.replacement.is_none();
        if self.replacement.is_some() && mode != WriteMode::Append {
            return refuse("a table replacement only inserts (INSERT INTO)".into());
        }
        let mode = match mode {
            WriteMode::Append if upsert => WriteMode::Upsert,
            WriteMode::OverwritePartitions if upsert => {
                return refuse(format!(
                    "INSERT OVERWRITE is not supported on a table that upserts ({UPSERT_PROPERTY}=true)"
                ));
            }
            mode => mode,
        };
        if metadata.current_schema_id() != self.resolved.schema.schema_id() {
            return refuse(
                "the table's schema changed since it was loaded; run the statement again".into(),
            );
        }
        let settings = Arc::new(WriteSettings::new(
            table.clone(),
            metadata,
            Arc::clone(&self.arrow_schema),
        )?);
        let partition_type = settings
            .spec()
            .partition_type(settings.schema())
            .map_err(Error::from)?;
        let mut write = IcebergWriteExec::new(
            input,
            Arc::clone(&settings),
            self.table.io().clone(),
            partition_type,
            metadata.format_version(),
        );
        if mode == WriteMode::Upsert {
            let keys = UpsertKeys::for_table(&table, metadata, &self.arrow_schema)?;
            let deletes = EqualityDeleteSettings::new(&table, metadata, keys)?;
            write = write.with_upsert(Arc::new(deletes));
        } else {
            // `write.distribution-mode` (hash by default for a partitioned table): one writer
            // task per table partition.
            let distribution =
                DistributionMode::of_write(&table, metadata.properties(), settings.spec())?;
            write = write.distributed(
                distribution,
                metadata.properties(),
                state.config().target_partitions(),
            )?;
        }
        let write: Arc<dyn ExecutionPlan> = Arc::new(write);
        let gathered: Arc<dyn ExecutionPlan> = Arc::new(CoalescePartitionsExec::new(write));
        let commit = IcebergCommitExec::new(
            gathered,
            Arc::clone(catalog),
            self.table.clone(),
            mode,
            settings,
        );
        let commit = match &self.replacement {
            Some((base, replacement)) => commit.replacing(base.clone(), Arc::clone(replacement)),
            None => commit,
        };
        Ok(Arc::new(match &branch {
            Some(branch) => commit.with_branch(branch),
            None => commit,
        }))
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        // Filters answered by identity partition values: decided `Exact` on the filter
        // DataFusion offered; if the one it passes here (simplified since) does not convert
        // completely, partition pruning does not answer it, and nothing above applies it.
        let unanswered = self.unanswered_identity_filters(filters);
        if !unanswered.is_empty() {
            return self
                .scan_filtering(state, projection, filters, &unanswered, limit)
                .await;
        }
        self.scan_with_recipe(state, projection, filters, limit)
            .await
    }
}

impl IcebergTableProvider {
    /// [`TableProvider::scan`] with its filters answered by pruning and the scan itself: plans
    /// the files and builds the scan with the recipe a cluster ships it by.
    async fn scan_with_recipe(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let target_partitions = state.config().target_partitions();
        let positional = self.positional_schema.is_some();
        // A positional scan reads every row of the files it plans: no limit.
        let limit = if positional { None } else { limit };
        let mut plan = self.plan(filters, limit, target_partitions).await?;
        if let Some(recorded) = &self.read_filters
            && positional
            && self.only_files.is_none()
        {
            let (filter, _) = Predicate::from_filters(filters, &self.resolved.schema);
            recorded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(filter);
        }
        if let Some(only) = &self.only_files {
            for tasks in &mut plan.partitions {
                tasks.retain(|task| only.contains(&task.file.path));
            }
            plan.partitions.retain(|tasks| !tasks.is_empty());
        }
        if self.split_by_size {
            let bytes = scan_bytes(plan.partitions.iter().flatten());
            let settings = SplitSettings::from_properties(self.table.metadata().properties())
                .adjusted_for(bytes, target_partitions);
            plan = regroup(plan, &settings);
        }
        let scan = self
            .scan_planned(state, &plan, projection, filters, limit, true)
            .await?;
        // The recipe takes the plan itself (its tasks are not copied).
        let recipe = ScanRecipe::new(
            TableRecipe::of(&self.table, &self.selector, positional),
            plan,
            projection,
            filters,
            limit,
        );
        Ok(with_recipe(scan, recipe))
    }
}

/// `scan` (an [`IcebergScanExec`]) remembering the recipe it was built from.
fn with_recipe(scan: Arc<dyn ExecutionPlan>, recipe: ScanRecipe) -> Arc<dyn ExecutionPlan> {
    match scan.as_any().downcast_ref::<IcebergScanExec>() {
        Some(exec) => Arc::new(exec.with_recipe(recipe)),
        None => scan,
    }
}

impl IcebergTableProvider {
    /// Of `filters`, those over identity partition columns only that do not convert
    /// completely into a pruning predicate (see [`TableProvider::scan`]).
    fn unanswered_identity_filters(&self, filters: &[Expr]) -> Vec<Expr> {
        filters
            .iter()
            .filter(|f| {
                let columns = f.column_refs();
                !columns.is_empty()
                    && columns.iter().all(|c| {
                        self.resolved
                            .schema
                            .field_by_name(&c.name)
                            .is_some_and(|field| self.identity_everywhere.contains(&field.id))
                    })
                    && !Predicate::from_filters(std::slice::from_ref(*f), &self.resolved.schema)
                        .1
                        .first()
                        .copied()
                        .unwrap_or(false)
            })
            .cloned()
            .collect()
    }

    /// The scan with `unanswered` applied above it: the projection widened by their columns,
    /// a filter, the limit after the filter, and the requested columns again.
    async fn scan_filtering(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        unanswered: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let full = self.schema();
        let requested: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..full.fields().len()).collect(),
        };
        let mut widened = requested.clone();
        for column in unanswered.iter().flat_map(|f| f.column_refs()) {
            let index = full.index_of(&column.name)?;
            if !widened.contains(&index) {
                widened.push(index);
            }
        }
        let scan = self
            .scan_with_recipe(state, Some(&widened), filters, None)
            .await?;
        let schema = DFSchema::try_from(scan.schema().as_ref().clone())?;
        let predicate = conjunction(unanswered.iter().cloned())
            .map(|p| state.create_physical_expr(p, &schema))
            .transpose()?;
        let Some(predicate) = predicate else {
            return Ok(scan);
        };
        // (A limit given to a scan is a hint: DataFusion's own limit stays above it.)
        let filter = FilterExec::try_new(predicate, scan)?;
        let filtered: Arc<dyn ExecutionPlan> = match ExecutionPlan::with_fetch(&filter, limit) {
            Some(limited) => limited,
            None => Arc::new(filter),
        };
        if widened.len() == requested.len() {
            return Ok(filtered);
        }
        let columns: Vec<(Arc<dyn PhysicalExpr>, String)> = requested
            .iter()
            .enumerate()
            .map(|(i, index)| {
                let name = full.field(*index).name().clone();
                (
                    Arc::new(Column::new(&name, i)) as Arc<dyn PhysicalExpr>,
                    name,
                )
            })
            .collect();
        Ok(Arc::new(ProjectionExec::try_new(columns, filtered)?))
    }

    /// This table as the decoded-column cache tells tables apart: its UUID and name mapping.
    fn column_source(&self) -> Arc<ColumnSource> {
        let metadata = self.table.metadata();
        Arc::new(ColumnSource::new(
            metadata.uuid().to_string(),
            metadata
                .properties()
                .get("schema.name-mapping.default")
                .map(String::as_str),
        ))
    }

    /// The scan of `plan` (tasks planned elsewhere, e.g. by `ScanPlanner::plan_changes`) with
    /// this provider's merge-on-read, schema mapping and (when [`Self::positional`]) position
    /// columns: what [`TableProvider::scan`] runs after planning.
    /// Unlike a planned scan it claims no statistics: `plan` need not be a snapshot's whole scan.
    pub async fn scan_plan(
        &self,
        state: &dyn Session,
        plan: ScanPlan,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.scan_planned(state, &plan, projection, filters, limit, false)
            .await
    }

    /// The scan of `plan`; `statistics`: with the exact statistics the manifests prove.
    async fn scan_planned(
        &self,
        state: &dyn Session,
        plan: &ScanPlan,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
        statistics: bool,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let positional = self.positional_schema.is_some();
        let table_name = self.table.ident().to_string();
        let full_schema = self.schema();
        let requested: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..full_schema.fields().len()).collect(),
        };
        let projected_schema = Arc::new(full_schema.project(&requested)?);
        let whole_files = self.reads_whole_files(filters, limit)?;
        let statistics = if statistics {
            self.exact_statistics(plan, whole_files, &requested).await?
        } else {
            None
        };
        // The table columns to read; a positional scan's own two columns come after them.
        let table_columns = self.arrow_schema.fields().len();
        let projection: Vec<usize> = requested
            .iter()
            .copied()
            .filter(|i| *i < table_columns)
            .collect();
        if plan.partitions.is_empty() {
            let empty: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(projected_schema));
            return Ok(Arc::new(
                IcebergScanExec::new(empty, table_name, plan.snapshot_id, plan.metrics.clone())
                    .with_statistics(statistics),
            ));
        }

        let mut deletes = MergeLayout::new(plan, &self.arrow_schema, &projection, positional);
        // Equality deletes an earlier scan turned into positions (all of them, or none): the
        // scan reads neither their key columns nor probes their sets.
        // Each group's cache identity and present key columns (its entry in the data files'
        // positions keys), resolved once for the lookup here and the scan's own.
        let entries = equality_keys(self.table.io(), &deletes.groups)
            .ok()
            .map(|keys| group_entries(keys, &deletes.key_columns));
        let lookup = entries
            .as_deref()
            .filter(|_| !positional && !deletes.groups.is_empty());
        let mut cached_equality = lookup.and_then(|entries| {
            cached_equality_positions(
                self.planner.delete_cache(),
                self.table.io(),
                &table_name,
                &deletes.files,
                entries,
            )
        });
        // Positions recorded before the last commits added groups: extended by those groups.
        let mut extended = Extended::default();
        if cached_equality.is_none()
            && whole_files
            && !positional
            && let Some(entries) = lookup
        {
            let layout = EqualityLayout {
                files: &deletes.files,
                groups: &deletes.groups,
                entries,
                key_columns: &deletes.key_columns,
            };
            let runtime = state.runtime_env();
            extended = extend_equality_positions(
                self.planner.delete_cache(),
                self.table.io(),
                &table_name,
                layout,
                runtime.cache_manager.get_file_metadata_cache(),
                self.planner.column_cache().enabled().then(|| KeyColumns {
                    cache: self.planner.column_cache().clone(),
                    source: self.column_source(),
                }),
                &runtime.memory_pool,
            )
            .await?;
            cached_equality = extended.positions.take();
        }
        let equality_files: usize = deletes.groups.iter().map(|g| g.files.len()).sum();
        if cached_equality.is_some() {
            deletes = deletes.without_equality(projection.len());
        }
        let io = self.table.io();
        let mut store_url = None;
        let mut scan_store = None;
        let mut by_object_path = HashMap::new();
        let mut nan_free = NanFreeColumns::default();
        let mut groups = Vec::with_capacity(plan.partitions.len());
        for tasks in &plan.partitions {
            let mut files = Vec::with_capacity(tasks.len());
            for task in tasks {
                let (store, url, path) = io.resolve(&task.file.path)?;
                if store_url.is_none() {
                    scan_store = Some(store);
                    store_url = Some(url);
                }
                let object_path = path.to_string();
                nan_free.insert(object_path.clone(), task.file.nan_free_field_ids.clone());
                let mut file = partitioned_file(path, task.file.file_size);
                if !task.whole_file {
                    file = file.with_range(task.start as i64, (task.start + task.length) as i64);
                }
                let index = deletes.file_index.get(task.file.path.as_str()).copied();
                if let Some(index) = index {
                    by_object_path.insert(object_path, index);
                }
                if deletes.file_column.is_some() {
                    // Files without deletes carry an index no file has.
                    let value = index.map_or(u32::MAX, |i| i as u32);
                    file.partition_values = vec![ScalarValue::UInt32(Some(value))];
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

        let table_schema = match deletes.file_column {
            Some(_) => TableSchema::new(
                Arc::clone(&self.arrow_schema),
                vec![Arc::new(Field::new(
                    FILE_INDEX_COLUMN,
                    DataType::UInt32,
                    false,
                ))],
            ),
            None => TableSchema::new(Arc::clone(&self.arrow_schema), vec![]),
        };
        let runtime = state.runtime_env();
        // DataFusion looks the store up by its URL when the scan opens files: an object
        // store's bucket is registered here (DataFusion's own local store always is). The
        // readers get this table's own store, not the registry's entry for the URL: two tables
        // of one bucket may have different (vended) credentials, and another scan may register
        // in between. Local files too are read through Petrel's store (`io::local_store`: its
        // ranged reads do not zero their buffers first, and its requests are counted).
        let local =
            store_url == datafusion::execution::object_store::ObjectStoreUrl::local_filesystem();
        let reader_store = match scan_store {
            Some(store) => {
                if !local {
                    runtime.register_object_store(store_url.as_ref(), Arc::clone(&store));
                }
                store
            }
            None => runtime.object_store(&store_url)?,
        };
        let readers = CachedParquetFileReaderFactory::new(
            reader_store,
            runtime.cache_manager.get_file_metadata_cache(),
        );
        let nan_free = Arc::new(nan_free);
        let readers = NanSafeReaderFactory::new(
            Arc::new(NamedFileReaderFactory::new(Arc::new(readers), &store_url)),
            Arc::clone(&nan_free),
        );
        let mut source = ParquetSource::new(table_schema)
            .with_table_parquet_options(state.table_options().parquet.clone())
            .with_parquet_file_reader_factory(Arc::new(readers));
        // Files with positional deletes are read without the predicate (their row groups are
        // pruned by the merge stream); both sources share one metrics set.
        let unfiltered_source = source.clone();
        let mut predicate = None;
        if let Some(expr) = conjunction(filters.to_vec()) {
            let df_schema = DFSchema::try_from(Arc::clone(&self.arrow_schema))?;
            let expr = state.create_physical_expr(expr, &df_schema)?;
            // Late materialisation: the predicate's columns are decoded first and the other
            // columns only at the rows it keeps (a point query on a sorted key decodes one
            // page of the key and a handful of rows of the rest, not the page index's whole
            // row selection of every projected column). The filter above still applies.
            source = source
                .with_predicate(Arc::clone(&expr))
                .with_pushdown_filters(true)
                .with_reorder_filters(true);
            predicate = Some(expr);
        }
        let adapter: Arc<dyn PhysicalExprAdapterFactory> = Arc::new(FieldIdAdapterFactory::new(
            Arc::clone(&self.resolved.schema),
            self.name_mapping(),
        ));
        // With deletes the Parquet scan must not apply the limit itself: its limit pruning
        // would replace the access plans that skip deleted rows. The limit above still stops
        // reading.
        let scan_limit = if deletes.is_empty() { limit } else { None };
        let config_of = |source: ParquetSource, groups: Vec<FileGroup>| {
            FileScanConfigBuilder::new(store_url.clone(), Arc::new(source))
                .with_file_groups(groups)
                .with_projection_indices(Some(deletes.inner_projection.clone()))
                .map(|b| {
                    b.with_limit(scan_limit)
                        .with_expr_adapter(Some(Arc::clone(&adapter)))
                        .build()
                })
        };
        // Files without equality deletes skip the key columns the others need.
        let keyless_configs = match deletes.keyless(projection.len()) {
            Some((indices, key_slots)) if !positional => {
                let keyless_config = |source: ParquetSource| {
                    FileScanConfigBuilder::new(store_url.clone(), Arc::new(source))
                        .with_projection_indices(Some(indices.clone()))
                        .map(|b| {
                            b.with_limit(scan_limit)
                                .with_expr_adapter(Some(Arc::clone(&adapter)))
                                .build()
                        })
                };
                Some((
                    keyless_config(source.clone())?,
                    keyless_config(unfiltered_source.clone())?,
                    key_slots,
                ))
            }
            _ => None,
        };
        let config = config_of(source, groups)?;
        let unfiltered = Arc::new(config_of(unfiltered_source, vec![])?);
        let keyless = match keyless_configs {
            Some((filtered, unfiltered, key_slots)) => Some(KeylessRead::new(
                Arc::new(filtered),
                Arc::new(unfiltered),
                key_slots,
                config.projected_schema()?.as_ref(),
            )),
            None => None,
        };
        let input: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);
        let metrics = ExecutionPlanMetricsSet::new();
        // Where each requested column is in the merge stream's inner batches: the table
        // columns first (in `projection` order), then equality keys and the file index, then
        // (positional scans) the file path and the position.
        let inner_columns = deletes.inner_projection.len();
        let output: Vec<usize> = requested
            .iter()
            .map(|i| match i.checked_sub(table_columns) {
                None => projection.iter().position(|p| p == i).unwrap_or(0),
                Some(extra) => inner_columns + extra,
            })
            .collect();
        // The decoded-column cache serves scans that read every row of their files, and
        // scans with filters on data but without deletes or a limit.
        let cacheable = whole_files || (limit.is_none() && deletes.is_empty());
        let column_cache = (cacheable && !positional && self.planner.column_cache().enabled())
            .then(|| {
                let counter = |name| MetricBuilder::new(&metrics).global_counter(name);
                let filtered = (!whole_files).then(|| FilteredScan {
                    pruning: predicate
                        .as_ref()
                        .and_then(|p| {
                            PruningPredicate::try_new(Arc::clone(p), Arc::clone(&self.arrow_schema))
                                .ok()
                        })
                        .filter(|p| !p.always_true())
                        .map(Arc::new),
                    unfiltered: Arc::clone(&unfiltered),
                    footers: runtime.cache_manager.get_file_metadata_cache(),
                    pruned: counter("column_cache_batches_pruned"),
                });
                CachedScan {
                    hit: counter("column_cache_files_hit"),
                    masked: counter("column_cache_files_masked"),
                    read: counter("column_cache_files_read"),
                    cache: self.planner.column_cache().clone(),
                    source: self.column_source(),
                    filtered,
                }
            });
        let merge = (!deletes.is_empty() || positional).then(|| {
            let merge = MergeOnRead::new(
                table_name.clone(),
                io.clone(),
                deletes.files,
                deletes.groups,
                by_object_path,
                deletes.file_column,
                deletes.key_columns,
                self.planner.delete_cache().clone(),
                &metrics,
            );
            let merge = if positional {
                merge.for_positional_scan()
            } else {
                merge
            };
            let merge = match (cached_equality, entries) {
                (Some(cached), _) => merge.with_cached_equality(cached, equality_files, &extended),
                (None, Some(entries)) => merge.with_group_entries(entries),
                (None, None) => merge,
            };
            MergeSpec {
                merge: Arc::new(merge),
                output,
                schema: Arc::clone(&projected_schema),
                unfiltered,
                predicate,
                file_schema: Arc::clone(&self.arrow_schema),
                adapter,
                nan_free,
                positional,
                // Merge scans use the cache only when they read whole files.
                columns: column_cache.clone().filter(|c| c.filtered.is_none()),
                keyless,
            }
        });
        let mut scan = IcebergScanExec::with_metrics(
            input,
            table_name,
            plan.snapshot_id,
            plan.metrics.clone(),
            metrics,
            merge,
        )
        .with_statistics(statistics);
        if let Some(columns) = column_cache {
            scan = scan.with_column_cache(columns);
        }
        Ok(Arc::new(scan))
    }
}

impl IcebergTableProvider {
    /// Whether a scan with `filters` and `limit` reads every row of the files it plans: no
    /// limit, and every filter decided exactly by partition values (true of every row of a
    /// planned file).
    fn reads_whole_files(&self, filters: &[Expr], limit: Option<usize>) -> DFResult<bool> {
        if limit.is_some() {
            return Ok(false);
        }
        let filters: Vec<&Expr> = filters.iter().collect();
        Ok(self
            .supports_filters_pushdown(&filters)?
            .iter()
            .all(|f| *f == TableProviderFilterPushDown::Exact))
    }

    /// The exact statistics of the rows a scan of `plan` returns (columns `requested`), from
    /// the manifests: only for a scan of `whole_files` (`reads_whole_files`), not positional or
    /// restricted to some files.
    async fn exact_statistics(
        &self,
        plan: &ScanPlan,
        whole_files: bool,
        requested: &[usize],
    ) -> DFResult<Option<datafusion::common::Statistics>> {
        if !whole_files
            || plan.metrics.stopped_by_limit
            || self.only_files.is_some()
            || self.positional_schema.is_some()
        {
            return Ok(None);
        }
        let stats = metadata_statistics(
            &self.table,
            self.planner.cache(),
            plan,
            &self.arrow_schema,
            requested,
        )
        .await?;
        Ok(stats.map(|s| s.project(Some(&requested))))
    }
}

/// Name of the helper column carrying a row's data file index (equality deletes).
const FILE_INDEX_COLUMN: &str = "__petrel_data_file";

/// How a scan with deletes is laid out: the data files with deletes, their equality groups,
/// and the extra columns the Parquet scan must produce.
struct MergeLayout {
    files: Vec<FileDeletes>,
    file_index: HashMap<String, usize>,
    groups: Vec<EqualityGroup>,
    /// Table-schema column indexes the Parquet scan produces (the query's first, then
    /// equality keys it did not ask for, then the file index column).
    inner_projection: Vec<usize>,
    file_column: Option<usize>,
    key_columns: Vec<Vec<(Option<usize>, DataType)>>,
}

impl MergeLayout {
    /// The layout of `plan` reading `projection`; with `every_file` (a positional scan) every
    /// data file is listed, deletes or not.
    fn new(
        plan: &ScanPlan,
        schema: &arrow::datatypes::Schema,
        projection: &[usize],
        every_file: bool,
    ) -> Self {
        let mut files: Vec<FileDeletes> = Vec::new();
        let mut file_index: HashMap<String, usize> = HashMap::new();
        let mut groups: Vec<EqualityGroup> = Vec::new();
        // A table upserted by many commits has an equality group per commit, each applying
        // to every older data file: thousands of (data file, group) pairs. So groups are found
        // by hashing what the plan holds (field ids and sorted delete paths, borrowed), and a
        // group's files are cloned once, when it is first seen.
        let mut group_index: hashbrown::HashMap<(&[i32], Vec<&str>), usize> =
            hashbrown::HashMap::new();
        // (field ids, sequence number) → delete files, in first-seen order.
        type Committed<'p> = ((&'p [i32], i64), Vec<&'p DeleteFileRef>);
        let mut by_key: Vec<Committed> = Vec::new();
        let mut key_index: hashbrown::HashMap<(&[i32], i64), usize> = hashbrown::HashMap::new();
        for task in plan.tasks().filter(|t| every_file || !t.deletes.is_empty()) {
            if file_index.contains_key(&task.file.path) {
                continue;
            }
            let mut positional = Vec::new();
            by_key.clear();
            key_index.clear();
            for d in &task.deletes {
                match &d.kind {
                    DeleteKind::Equality { field_ids } => {
                        let key = (field_ids.as_slice(), d.sequence_number);
                        match key_index.get(&key) {
                            Some(&i) => by_key[i].1.push(d),
                            None => {
                                key_index.insert(key, by_key.len());
                                by_key.push((key, vec![d]));
                            }
                        }
                    }
                    _ => positional.push(DeleteFileRef::clone(d)),
                }
            }
            let mut equality_groups = Vec::with_capacity(by_key.len());
            for ((field_ids, _), mut list) in by_key.drain(..) {
                list.sort_by(|a, b| a.path.cmp(&b.path));
                let identity = (field_ids, list.iter().map(|d| d.path.as_str()).collect());
                let index = *group_index.entry(identity).or_insert_with(|| {
                    groups.push(EqualityGroup {
                        field_ids: field_ids.to_vec(),
                        files: list.iter().map(|d| (*d).clone()).collect(),
                    });
                    groups.len() - 1
                });
                equality_groups.push(index);
            }
            file_index.insert(task.file.path.clone(), files.len());
            files.push(FileDeletes {
                path: task.file.path.clone(),
                file_size: task.file.file_size,
                positional,
                equality_groups,
            });
        }
        let mut inner_projection = projection.to_vec();
        let mut key_columns = Vec::with_capacity(groups.len());
        for group in &groups {
            let mut keys = Vec::with_capacity(group.field_ids.len());
            for id in &group.field_ids {
                let column = schema
                    .fields()
                    .iter()
                    .position(|f| field_id_of(f) == Some(*id));
                let key = match column {
                    Some(c) => {
                        let at = match inner_projection.iter().position(|p| *p == c) {
                            Some(at) => at,
                            None => {
                                inner_projection.push(c);
                                inner_projection.len() - 1
                            }
                        };
                        (Some(at), key_type(schema.field(c).data_type()))
                    }
                    // Not in this snapshot's schema: the files hold no value, i.e. null.
                    None => (None, DataType::Null),
                };
                keys.push(key);
            }
            key_columns.push(keys);
        }
        let file_column = (!groups.is_empty()).then(|| {
            inner_projection.push(schema.fields().len());
            inner_projection.len() - 1
        });
        Self {
            files,
            file_index,
            groups,
            inner_projection,
            file_column,
            key_columns,
        }
    }

    fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The inner projection without the key columns the layout added (the first `projected`
    /// columns are the query's), and where those columns are in it; `None` when none was
    /// added. Files without equality deletes are read with it.
    fn keyless(&self, projected: usize) -> Option<(Vec<usize>, Vec<usize>)> {
        let file_column = self.file_column?;
        if file_column <= projected {
            return None;
        }
        let mut indices = self.inner_projection[..projected].to_vec();
        indices.push(self.inner_projection[file_column]);
        Some((indices, (projected..file_column).collect()))
    }

    /// This layout with its equality deletes applied as positions instead (the files keep
    /// their place; their equality groups, the key columns and the file index go): the
    /// inner projection is the query's `projected` columns again.
    fn without_equality(mut self, projected: usize) -> Self {
        for file in &mut self.files {
            file.equality_groups.clear();
        }
        self.groups.clear();
        self.key_columns.clear();
        self.inner_projection.truncate(projected);
        self.file_column = None;
        self
    }
}
