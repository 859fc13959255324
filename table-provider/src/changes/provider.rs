//! [`TableChangesProvider`]: a `table_changes(...)` call as a DataFusion table. Filters on the
//! table's columns prune the files read (`Inexact`: DataFusion applies them again); with
//! identifier fields only filters on those columns prune, so that both images of an update
//! are read or neither.

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::datasource::TableType;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use super::exec::TableChangesExec;
use super::feed::ChangeFeed;

/// A `table_changes(...)` call as a table (see the module docs).
#[derive(Debug, Clone)]
pub struct TableChangesProvider {
    feed: Arc<ChangeFeed>,
}

impl TableChangesProvider {
    /// The table of `feed`'s rows.
    pub fn new(feed: Arc<ChangeFeed>) -> Self {
        Self { feed }
    }

    /// Whether `filter` may prune the files read (see the module docs).
    fn prunes(&self, filter: &Expr) -> bool {
        let schema = self.feed.table_schema();
        let allowed: HashSet<&str> = if self.feed.identifier_columns().is_empty() {
            schema.fields().iter().map(|f| f.name().as_str()).collect()
        } else {
            self.feed
                .identifier_columns()
                .iter()
                .map(|c| schema.field(*c).name().as_str())
                .collect()
        };
        let refs = filter.column_refs();
        !refs.is_empty() && refs.iter().all(|c| allowed.contains(c.name.as_str()))
    }
}

#[async_trait]
impl TableProvider for TableChangesProvider {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn schema(&self) -> SchemaRef {
        Arc::clone(self.feed.schema())
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if self.prunes(f) {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let state = state
            .as_any()
            .downcast_ref::<SessionState>()
            .ok_or_else(|| {
                DataFusionError::Internal("table_changes needs a DataFusion SessionState".into())
            })?;
        let filters: Vec<Expr> = filters.iter().filter(|f| self.prunes(f)).cloned().collect();
        Ok(Arc::new(TableChangesExec::try_new(
            Arc::clone(&self.feed),
            Arc::new(state.clone()),
            filters,
            projection.cloned(),
        )?))
    }
}
