//! [`ClusterTable`]: an Iceberg table in a logical plan a cluster's scheduler received
//! ([`crate::ClusterLogicalCodec`]). Decoding happens before planning and without IO, so the
//! table knows only its recipe and schema; when the scheduler plans the scan it opens the table
//! from the recipe's metadata file through the scheduler's stores and caches
//! ([`ExecutorScans`]) — the snapshot the front end resolved, not the catalog's current one —
//! and plans it as Petrel does locally, with tasks grouped by the table's `read.split.*`
//! sizes ([`IcebergTableProvider::split_by_size`]): one task per group on the executors.
//!
//! [`IcebergTableProvider::split_by_size`]: petrel_table_provider::IcebergTableProvider::split_by_size

use std::any::Any;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::datasource::TableType;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use petrel_table_provider::scan::TableRecipe;

use crate::shipped_scan::ExecutorScans;

/// An Iceberg table as a scheduler sees it (see the module docs).
#[derive(Debug)]
pub struct ClusterTable {
    recipe: TableRecipe,
    schema: SchemaRef,
    scans: ExecutorScans,
}

impl ClusterTable {
    /// The table `recipe` describes, with the `schema` the plan was made with, opened through
    /// `scans` when planned.
    pub fn new(recipe: TableRecipe, schema: SchemaRef, scans: ExecutorScans) -> Self {
        Self {
            recipe,
            schema,
            scans,
        }
    }

    /// What the table is opened from.
    pub fn recipe(&self) -> &TableRecipe {
        &self.recipe
    }
}

#[async_trait]
impl TableProvider for ClusterTable {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// The filters the front end pushed are in the plan's scans already; any other filter is
    /// applied above the scan too (inexact), whatever the table could prove.
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let table = self.scans.open(&self.recipe).await?.split_by_size();
        if table.schema().fields() != self.schema.fields() {
            return Err(DataFusionError::Plan(format!(
                "table {}: metadata file {} has columns {:?}, the shipped plan expects {:?}",
                self.recipe.ident(),
                self.recipe.metadata_location,
                names(&table.schema()),
                names(&self.schema),
            )));
        }
        table.scan(state, projection, filters, limit).await
    }
}

fn names(schema: &SchemaRef) -> Vec<&str> {
    schema.fields().iter().map(|f| f.name().as_str()).collect()
}
