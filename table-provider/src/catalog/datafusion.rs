//! DataFusion's view of a Petrel catalog: `<catalog>.<namespace>.<table>`.
//!
//! Table names may carry a time-travel suffix written by [`crate::rewrite_time_travel`]
//! (`name@@version=…`, `name@@ref=…`, `name@@timestamp=…`); the schema provider resolves it
//! to a provider reading that snapshot. DataFusion's listing calls are synchronous; they wait
//! for the asynchronous catalog without blocking the runtime's other work.
//!
//! A name ending in `$<metadata table>` (`t$files`, Trino's form; Spark's `t.files` is
//! rewritten to it) resolves to that [`MetadataTableProvider`] of table `t`.
//!
//! Errors are never turned into absence:
//!
//! - [`SchemaProvider::table`] answers `Ok(None)` only for a table the catalog says does not
//!   exist (DataFusion asks for every name a statement mentions, table functions included, and
//!   needs `None` for those). Any other failure to load the table (storage outage, catalog
//!   database down, corrupt metadata) is returned as it is, inside a DataFusion `Context`
//!   naming the table.
//! - [`CatalogProvider::schema`] asks the catalog nothing: DataFusion calls it for every table a
//!   statement names, and the table load that follows answers for the namespace too (a missing
//!   namespace holds no table: `Ok(None)`, the same "table not found"; a failing catalog: its
//!   real error). A query thus costs one catalog call per table, not a namespace listing first.
//!   Callers that need to know whether a namespace exists ask
//!   [`IcebergCatalogProvider::has_namespace`] (`SHOW TABLES IN`) or the async [`Catalog`].
//! - DataFusion's listing calls (`schema_names`, `table_names`) cannot fail: on an error they log
//!   it and return an empty list. Callers that must tell "empty" from "failed" (the server's
//!   GetDbSchemas / GetTables) list through the async [`Catalog`] instead.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::error::{DataFusionError, Result as DFResult};

use super::{Catalog, Namespace, TableIdent};
use crate::error::Error;
use crate::metadata_tables::{MetadataTableProvider, split_metadata_table};
use crate::plan::ScanPlanner;
use crate::provider::IcebergTableProvider;
use crate::time_travel::split_time_travel;

/// A Petrel [`Catalog`] as a DataFusion catalog.
#[derive(Debug, Clone)]
pub struct IcebergCatalogProvider {
    catalog: Arc<dyn Catalog>,
    planner: Arc<ScanPlanner>,
}

impl IcebergCatalogProvider {
    /// Exposes `catalog`, planning scans with a fresh manifest cache.
    pub fn new(catalog: Arc<dyn Catalog>) -> Self {
        Self::with_planner(catalog, Arc::new(ScanPlanner::default()))
    }

    /// Exposes `catalog`, planning with `planner` (share one planner, and so one manifest
    /// cache, across catalogs and sessions).
    pub fn with_planner(catalog: Arc<dyn Catalog>, planner: Arc<ScanPlanner>) -> Self {
        Self { catalog, planner }
    }

    /// The wrapped catalog.
    pub fn catalog(&self) -> &Arc<dyn Catalog> {
        &self.catalog
    }

    /// The planner of this catalog's scans (and its caches).
    pub fn planner(&self) -> &Arc<ScanPlanner> {
        &self.planner
    }

    /// Whether the namespace `name` (dotted) exists: `false` only when the catalog says it does
    /// not; when it cannot tell (its IO failed), `true`, so that the listing that follows reports
    /// the catalog's real error instead of "no such namespace".
    pub fn has_namespace(&self, name: &str) -> bool {
        let namespace = Namespace::from_dotted(name);
        match wait(self.catalog.namespace_exists(&namespace)) {
            Some(Ok(exists)) => exists,
            Some(Err(e)) => {
                tracing::warn!("checking namespace {namespace} failed: {e}");
                true
            }
            None => {
                tracing::warn!("checking namespace {namespace} failed: no runtime");
                true
            }
        }
    }
}

/// Runs a catalog future from DataFusion's synchronous listing calls (`None` if no runtime
/// could run it).
pub(crate) fn wait<F>(future: F) -> Option<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            Some(tokio::task::block_in_place(|| handle.block_on(future)))
        }
        _ => std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .ok()
                        .map(|rt| rt.block_on(future))
                })
                .join()
                .ok()
                .flatten()
        }),
    }
}

impl CatalogProvider for IcebergCatalogProvider {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn schema_names(&self) -> Vec<String> {
        match wait(self.catalog.list_namespaces()) {
            Some(Ok(namespaces)) => namespaces.iter().map(Namespace::dotted).collect(),
            Some(Err(e)) => {
                tracing::warn!("listing namespaces failed: {e}");
                Vec::new()
            }
            None => {
                tracing::warn!("listing namespaces failed: no runtime to run the catalog call");
                Vec::new()
            }
        }
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        // No catalog call: the table load answers for the namespace (module docs).
        Some(Arc::new(IcebergSchemaProvider {
            catalog: Arc::clone(&self.catalog),
            namespace: Namespace::from_dotted(name),
            planner: Arc::clone(&self.planner),
        }))
    }
}

/// One namespace of a Petrel catalog as a DataFusion schema.
#[derive(Debug)]
pub struct IcebergSchemaProvider {
    catalog: Arc<dyn Catalog>,
    namespace: Namespace,
    planner: Arc<ScanPlanner>,
}

#[async_trait]
impl SchemaProvider for IcebergSchemaProvider {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn table_names(&self) -> Vec<String> {
        match wait(self.catalog.list_tables(&self.namespace)) {
            Some(Ok(tables)) => tables.into_iter().map(|t| t.name).collect(),
            Some(Err(e)) => {
                tracing::warn!(
                    namespace = %self.namespace,
                    "listing tables of {} failed: {e}",
                    self.namespace
                );
                Vec::new()
            }
            None => {
                tracing::warn!(
                    namespace = %self.namespace,
                    "listing tables of {} failed: no runtime",
                    self.namespace
                );
                Vec::new()
            }
        }
    }

    async fn table(&self, name: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        let (name, selector) = split_time_travel(name).map_err(DataFusionError::from)?;
        let metadata_table = split_metadata_table(&name).map(|(t, kind)| (t.to_string(), kind));
        let name = metadata_table
            .as_ref()
            .map_or(name.clone(), |(t, _)| t.clone());
        let ident = TableIdent::new(self.namespace.clone(), name);
        let table = match self.catalog.load_table(&ident).await {
            Ok(table) => table,
            Err(Error::NotFound(_)) => return Ok(None),
            Err(e) => {
                return Err(DataFusionError::Context(
                    format!("table {ident}"),
                    Box::new(e.into()),
                ));
            }
        };
        if let Some((_, kind)) = metadata_table {
            let provider = MetadataTableProvider::try_new(table, kind, selector, &self.planner)?;
            return Ok(Some(Arc::new(provider)));
        }
        let provider = IcebergTableProvider::try_new(table, selector, Arc::clone(&self.planner))?
            .with_catalog(Arc::clone(&self.catalog));
        Ok(Some(Arc::new(provider)))
    }

    fn table_exist(&self, name: &str) -> bool {
        let Ok((name, _)) = split_time_travel(name) else {
            return false;
        };
        let name = split_metadata_table(&name).map_or(name.clone(), |(t, _)| t.to_string());
        let ident = TableIdent::new(self.namespace.clone(), name);
        matches!(wait(self.catalog.load_table(&ident)), Some(Ok(_)))
    }
}
