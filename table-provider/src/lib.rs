//! # petrel-table-provider: Apache Iceberg tables for DataFusion
//!
//! Iceberg ⇄ DataFusion, with no network code. The read flow:
//!
//! ```text
//! SQL ─► rewrite_time_travel ─► DataFusion plans ─► IcebergCatalogProvider / IcebergSchemaProvider
//!                                                      │ Catalog::load_table (filesystem | SQL)
//!                                                      ▼
//!                                                IcebergTableProvider::scan(projection, filters, limit)
//!                                                      │ ScanPlanner::plan
//!                                                      │   snapshot → manifest list → manifests
//!                                                      │   (partition summaries, partition values,
//!                                                      │    column metrics, delete matching)
//!                                                      ▼
//!                                                IcebergScanExec (merge-on-read: access plans,
//!                                                  │              equality-delete filter)
//!                                                  └─ DataSourceExec(ParquetSource) + FieldIdAdapterFactory
//! ```
//!
//! Modules, one concept each:
//!
//! - [`catalog`]: the [`Catalog`] trait, filesystem (Hadoop layout) and SQL (SQLite) catalogs,
//!   and their DataFusion adapters.
//! - [`io`]: object_store access by logical path; moved-table path mapping.
//! - [`spec`]: snapshot selection, Iceberg → Arrow types, Iceberg values.
//! - [`plan`]: the scan planner and its serialisable [`ScanTask`]s.
//! - [`scan`]: [`IcebergScanExec`], field-id schema mapping, file readers that name the file.
//! - [`deletes`]: merge-on-read: delete files matched to data files at planning; position
//!   deletes and deletion vectors as Parquet access plans, equality deletes as key sets.
//! - [`provider`]: the `TableProvider`.
//! - [`time_travel`]: `FOR VERSION AS OF` / `FOR TIMESTAMP AS OF` in SQL.
//! - [`signed_zero`]: `-0.0 = 0.0` in comparisons with constants, as in Spark and PostgreSQL.
//! - [`ddl`]: Spark's `CREATE TABLE … PARTITIONED BY … TBLPROPERTIES` and friends, parsed and
//!   turned into Iceberg metadata.
//! - [`procedures`]: Spark's `CALL … system.<procedure>(…)` (snapshot management, expiry,
//!   orphan files) and `ALTER TABLE … CREATE / DROP BRANCH | TAG`.
//! - [`dml`]: `INSERT` as DataFusion plans: parallel writer partitions under one commit.
//! - [`commit`]: Petrel's snapshot producer (appends), writing through its own IO.
//! - [`write`]: what writers compute per data file: column metrics, partition paths.
//! - [`maintenance`]: Spark's maintenance procedures as functions (`rewrite_data_files`,
//!   `rewrite_position_delete_files`).
//! - [`changes`]: `table_changes(...)`: change feeds between snapshots and live streams of new
//!   commits, as Spark's changelog view.
//! - [`metadata_tables`]: Spark's metadata tables (`t.snapshots`, `"t$files"`, …), read-only.
//! - [`error`]: one error type with table / snapshot / file context.
//! - [`cache_stats`]: hit / miss counts and sizes of the manifest and delete-file caches.
//! - [`checked_sum`]: `sum` of integers and decimals that fails on overflow (DataFusion's
//!   wraps around), `DISTINCT` too.
//! - [`checked_avg`]: `avg` of decimals that fails on overflow (DataFusion's wraps around).
//! - [`checked_arithmetic`]: integer and decimal `+`, `-`, `*` that fail on overflow
//!   (DataFusion's wrap around).
//! - [`output_limits`]: bounds on what one function call or literal may make (`repeat`,
//!   `lpad`, `range`, `||`, …), checked before Arrow allocates it.

pub mod cache_stats;
pub mod catalog;
pub mod catalog_views;
pub mod changes;
pub mod checked_arithmetic;
pub mod checked_avg;
pub mod checked_sum;
pub mod commit;
pub mod ddl;
pub mod deletes;
pub mod dml;
pub mod error;
mod expr_rewrites;
pub mod float_min_max;
pub mod io;
pub mod maintenance;
pub mod metadata_tables;
pub mod nested_values;
pub mod output_limits;
pub mod plan;
pub mod procedures;
pub mod provider;
pub mod query_planner;
pub mod row_level;
pub mod scalar_subquery;
pub mod scan;
pub mod signed_zero;
pub mod spec;
mod sql_tokens;
pub mod statement_exec;
pub mod statements;
pub mod time_travel;
mod udaf_delegation;
pub mod write;

pub use catalog::{
    Catalog, FileSystemCatalog, IcebergCatalogProvider, LoadedTable, Namespace, RestCatalog,
    RestCatalogConfig, SqlCatalog, TableIdent,
};
pub use deletes::{DEFAULT_DELETE_CACHE_BYTES, DeleteCache};
pub use error::{Error, Result};
pub use float_min_max::FloatTotalOrder;

/// Registers the functions Petrel's plans use in `registry`: the aggregates of
/// [`petrel_functions`], the growing functions bounded to `output_limit` bytes per call
/// ([`output_limits::bounded_scalar_functions`], `bounded_aggregate_functions`) over the
/// built-ins, and the checked arithmetic operators
/// ([`checked_arithmetic::checked_arithmetic_functions`]). Every process that
/// plans or runs Petrel's plans (the server, a Ballista scheduler and its executors) registers
/// them.
pub fn register_functions(
    registry: &mut dyn datafusion::execution::FunctionRegistry,
    output_limit: usize,
) -> datafusion::common::Result<()> {
    for f in petrel_functions() {
        registry.register_udaf(std::sync::Arc::new(f))?;
    }
    for f in output_limits::bounded_scalar_functions(output_limit) {
        registry.register_udf(std::sync::Arc::new(f))?;
    }
    for f in checked_arithmetic::checked_arithmetic_functions() {
        registry.register_udf(std::sync::Arc::new(f))?;
    }
    for f in output_limits::bounded_aggregate_functions(output_limit) {
        registry.register_udaf(std::sync::Arc::new(f))?;
    }
    Ok(())
}

/// The aggregate functions [`register_functions`] registers: `min` / `max` over the built-ins
/// ([`FloatTotalOrder`]), `sum` over the built-in ([`checked_sum::CheckedSum`]: integer and
/// decimal totals fail on overflow instead of wrapping), `avg` over the built-in
/// ([`checked_avg::CheckedAvg`]: the same for decimal averages) and `petrel_single_value`
/// ([`scalar_subquery::single_value`]).
pub fn petrel_functions() -> Vec<datafusion::logical_expr::AggregateUDF> {
    vec![
        FloatTotalOrder::min(),
        FloatTotalOrder::max(),
        checked_sum::CheckedSum::sum(),
        checked_avg::CheckedAvg::avg(),
        scalar_subquery::single_value(),
    ]
}
pub use metadata_tables::{MetadataTableKind, MetadataTableProvider};
pub use nested_values::NestedValuesTypes;
pub use plan::{ManifestCache, PlanMetrics, ScanPlan, ScanPlanner, ScanRequest, ScanTask};
pub use provider::IcebergTableProvider;
pub use query_planner::PetrelQueryPlanner;
pub use row_level::RowLevelDml;
pub use scalar_subquery::SingleRowSubqueries;
pub use scan::{ColumnCache, IcebergScanExec, LeafProjection, NarrowStructColumns};
pub use signed_zero::SignedZeroEquality;
pub use spec::SnapshotSelector;
pub use time_travel::rewrite_time_travel;
