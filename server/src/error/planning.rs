//! A planning failure caused by a name that does not resolve: NOT_FOUND, told by types.
//!
//! DataFusion reports a table that no catalog has as a planning error ("table … not found"),
//! the same kind as any other mistake in a statement (INVALID_ARGUMENT). To answer NOT_FOUND
//! without reading that text, [`planning_error`] resolves the statement's table references
//! again through DataFusion's catalog API (`resolve_table_references`, `schema_for_ref`,
//! `SchemaProvider::table`): if one names no table (and is not a table function), the failure
//! is [`Error::NotFound`] naming it. This runs only after planning failed.

use datafusion::error::DataFusionError;
use datafusion::execution::context::SessionState;
use tonic::Status;

use super::{Error, df_status};

/// The status for `e`, a failure to plan `sql` in `state`.
pub(crate) async fn planning_error(state: &SessionState, sql: &str, e: DataFusionError) -> Status {
    if !matches!(e.find_root(), DataFusionError::Plan(_)) {
        return df_status(e);
    }
    match missing_table(state, sql).await {
        Some(missing) => Error::NotFound(format!("table {missing} not found")).into(),
        None => df_status(e),
    }
}

/// The first table reference of `sql` that resolves to no table, as written.
async fn missing_table(state: &SessionState, sql: &str) -> Option<String> {
    let dialect = state.config().options().sql_parser.dialect;
    let statement = state.sql_to_statement(sql, &dialect).ok()?;
    for reference in state.resolve_table_references(&statement).ok()? {
        if reference.schema().is_none() && state.table_functions().contains_key(reference.table()) {
            continue;
        }
        let found = match state.schema_for_ref(reference.clone()) {
            Ok(schema) => schema.table(reference.table()).await.ok()?.is_some(),
            Err(_) => false,
        };
        if !found {
            return Some(reference.to_string());
        }
    }
    None
}
