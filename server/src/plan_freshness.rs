//! Whether a kept plan still reads what a fresh plan would.
//!
//! A logical plan is tied to the table versions its catalog resolved when it was planned (each
//! Iceberg scan holds the table's metadata file). A plan kept between two calls of one query
//! — CreatePreparedStatement, then the GetFlightInfo that executes the handle (`plan_cache`) —
//! or from one run of a query text to the next (`statement_cache`) may only be reused when no
//! commit has happened since: [`still_current`] reloads each table the plan scans (the
//! catalog's freshness path: a version-hint read or one `SELECT`) and compares its current
//! metadata file with the one planned. Anything [`tables_read`] cannot verify (time travel,
//! metadata tables, other providers, extension nodes such as Petrel's own statements, writes,
//! DDL) makes the plan unverifiable: plan again.

use std::sync::Arc;

use datafusion::catalog::default_table_source::source_as_provider;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::LogicalPlan;
use petrel_table_provider::IcebergTableProvider;
use petrel_table_provider::catalog::{Catalog, LoadedTable};

/// A table a plan scans: its catalog and the version the plan reads.
pub(crate) type TableRead = (Arc<dyn Catalog>, LoadedTable);

/// The tables `plan` scans (once per scan), when every one is a plain read of an Iceberg
/// table at its current version and the plan holds no writes, DDL or extension nodes; `None`
/// otherwise (a row-level write's target, a file subset or a replacement is more than a read). A
/// plan that scans nothing (`SELECT 1`) reads no tables: `Some(vec![])`.
pub(crate) fn tables_read(plan: &LogicalPlan) -> Option<Vec<TableRead>> {
    let mut tables = Vec::new();
    let mut verifiable = true;
    let walked = plan.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::TableScan(scan) => {
                let provider = source_as_provider(&scan.source).ok().and_then(|p| {
                    p.as_any()
                        .downcast_ref::<IcebergTableProvider>()
                        .filter(|t| t.reads_current() && t.reads_plainly())
                        .and_then(|t| Some((Arc::clone(t.catalog()?), t.table().clone())))
                });
                match provider {
                    Some(table) => tables.push(table),
                    None => verifiable = false,
                }
            }
            LogicalPlan::Extension(_) | LogicalPlan::Dml(_) | LogicalPlan::Ddl(_) => {
                verifiable = false;
            }
            _ => {}
        }
        Ok(if verifiable {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    (walked.is_ok() && verifiable).then_some(tables)
}

/// Whether every table in `tables` is still at the version read: its catalog's current
/// metadata file is the one planned (a failed load answers `false`).
pub(crate) async fn still_current(tables: &[TableRead]) -> bool {
    for (catalog, planned) in tables {
        match catalog.load_table(planned.ident()).await {
            Ok(now) if now.metadata_location() == planned.metadata_location() => {}
            _ => return false,
        }
    }
    true
}

/// Whether every table `plan` scans is an Iceberg table read at its current version that is
/// still the catalog's current version. A plan that scans nothing (`SELECT 1`) is current.
pub(crate) async fn reads_current_tables(plan: &LogicalPlan) -> bool {
    match tables_read(plan) {
        Some(tables) => still_current(&tables).await,
        None => false,
    }
}
