//! Whether a kept plan still reads what a fresh plan would.
//!
//! A logical plan is tied to the table versions its catalog resolved when it was planned (each
//! Iceberg scan holds the table's metadata file). A plan kept between two calls of one query
//! — CreatePreparedStatement, then the GetFlightInfo that executes the handle (`plan_cache`) —
//! may only be reused when no commit has happened since: [`reads_current_tables`] reloads each
//! table the plan scans (the catalog's freshness path: a version-hint read or one `SELECT`) and
//! compares its current metadata file with the one planned. Anything it cannot verify (time
//! travel, metadata tables, other providers, extension nodes such as Petrel's own statements)
//! answers `false`: plan again.

use datafusion::catalog::default_table_source::source_as_provider;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::LogicalPlan;
use petrel_table_provider::IcebergTableProvider;

/// Whether every table `plan` scans is an Iceberg table read at its current version that is
/// still the catalog's current version. A plan that scans nothing (`SELECT 1`) is current.
pub(crate) async fn reads_current_tables(plan: &LogicalPlan) -> bool {
    let mut tables = Vec::new();
    let mut verifiable = true;
    let walked = plan.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::TableScan(scan) => {
                let provider = source_as_provider(&scan.source).ok().and_then(|p| {
                    p.as_any()
                        .downcast_ref::<IcebergTableProvider>()
                        .filter(|t| t.reads_current())
                        .and_then(|t| {
                            Some((std::sync::Arc::clone(t.catalog()?), t.table().clone()))
                        })
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
    if walked.is_err() || !verifiable {
        return false;
    }
    for (catalog, planned) in tables {
        match catalog.load_table(planned.ident()).await {
            Ok(now) if now.metadata_location() == planned.metadata_location() => {}
            _ => return false,
        }
    }
    true
}
