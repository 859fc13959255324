//! `table_changes(...)`, the SQL table function: its arguments, and the table they name.
//!
//! ```sql
//! table_changes('<catalog>.<namespace>.<table>', <start> [, <end> [, <stream> [, <poll ms>]]])
//! ```
//!
//! - `<start>` / `<end>`: a snapshot id (an integer), a timestamp (`TIMESTAMP '…'` or a string
//!   such as `'2026-06-01 00:00:00'`, UTC without a zone) or `NULL` (start: the table's first
//!   snapshot; end: the current one). Start exclusive, end inclusive.
//! - `<stream>`: `true` keeps the query open after the range, emitting each new snapshot's
//!   changes as it is committed (the end must be `NULL`). DataFusion 53 drops named table
//!   function arguments silently (this function never sees them), so
//!   [`crate::rewrite_time_travel`] refuses a `table_changes` call with named arguments
//!   (`stream => true`) before DataFusion parses it: write `table_changes('t', <start>, NULL,
//!   true)`.
//! - `<poll ms>`: how often a stream looks for new snapshots (default: the function's, 1 s).
//!
//! A two-part name (`ns.t`) is looked up in the function's default catalog.

use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::catalog::{CatalogProviderList, TableFunctionImpl, TableProvider};
use datafusion::common::{Result as DFResult, ScalarValue};
use datafusion::logical_expr::Expr;

use super::feed::ChangeFeed;
use super::provider::TableChangesProvider;
use super::range::ChangeBound;
use crate::catalog::{IcebergCatalogProvider, Namespace, TableIdent, wait};
use crate::error::Error;

/// The default time between a stream's looks for new snapshots.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The `table_changes` table function over the Iceberg catalogs of a catalog list.
#[derive(Debug)]
pub struct TableChangesFunction {
    catalogs: Arc<dyn CatalogProviderList>,
    default_catalog: Option<String>,
    poll_interval: Duration,
}

impl TableChangesFunction {
    /// Over the Iceberg catalogs of `catalogs` (a session's catalog list).
    pub fn new(catalogs: Arc<dyn CatalogProviderList>) -> Self {
        Self {
            catalogs,
            default_catalog: None,
            poll_interval: DEFAULT_POLL_INTERVAL,
        }
    }

    /// Two-part names are looked up in `catalog`.
    pub fn with_default_catalog(mut self, catalog: impl Into<String>) -> Self {
        self.default_catalog = Some(catalog.into());
        self
    }

    /// Streams poll for new snapshots every `interval` unless the query says otherwise.
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }
}

fn usage(message: impl std::fmt::Display) -> datafusion::error::DataFusionError {
    Error::InvalidArgument(format!(
        "table_changes: {message} (usage: table_changes('<catalog>.<namespace>.<table>', \
         <start snapshot id | timestamp | NULL> [, <end …> [, <stream true|false> [, <poll \
         interval ms>]]]))"
    ))
    .into()
}

impl TableFunctionImpl for TableChangesFunction {
    fn call(&self, args: &[Expr]) -> DFResult<Arc<dyn TableProvider>> {
        if !(2..=5).contains(&args.len()) {
            return Err(usage(format!("{} arguments given", args.len())));
        }
        let name = match constant(&args[0])? {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => s,
            other => {
                return Err(usage(format!(
                    "the table name must be a string, not {other}"
                )));
            }
        };
        let start = bound(&args[1], "start")?;
        let end = match args.get(2) {
            Some(e) => bound(e, "end")?,
            None => None,
        };
        let stream = match args.get(3).map(constant).transpose()? {
            None | Some(ScalarValue::Boolean(None)) => false,
            Some(ScalarValue::Boolean(Some(b))) => b,
            Some(other) => return Err(usage(format!("stream must be true or false, not {other}"))),
        };
        let poll_interval = match args.get(4).map(constant).transpose()? {
            None => self.poll_interval,
            Some(v) => match v.cast_to(&DataType::Int64) {
                Ok(ScalarValue::Int64(Some(ms))) if ms > 0 => Duration::from_millis(ms as u64),
                _ => {
                    return Err(usage(format!(
                        "the poll interval must be a positive number of milliseconds, not {v}"
                    )));
                }
            },
        };
        if stream && end.is_some() {
            return Err(usage("a stream has no end: pass NULL as the end"));
        }
        let parts: Vec<String> = name
            .split('.')
            .map(|p| p.trim().trim_matches('"').to_string())
            .collect();
        let (catalog_name, namespace, table) = match parts.as_slice() {
            [ns, t] => match &self.default_catalog {
                Some(c) => (c.clone(), vec![ns.clone()], t.clone()),
                None => return Err(usage(format!("name the catalog too: '<catalog>.{name}'"))),
            },
            [c, levels @ .., t] if !levels.is_empty() => (c.clone(), levels.to_vec(), t.clone()),
            _ => return Err(usage(format!("{name:?} is not a table name"))),
        };
        let provider = self
            .catalogs
            .catalog(&catalog_name)
            .ok_or_else(|| usage(format!("no catalog {catalog_name:?}")))?;
        let Some(iceberg) = provider.as_any().downcast_ref::<IcebergCatalogProvider>() else {
            return Err(usage(format!("{catalog_name:?} is not an Iceberg catalog")));
        };
        let ident = TableIdent::new(Namespace::new(namespace), table);
        let catalog = Arc::clone(iceberg.catalog());
        let loaded = wait(catalog.load_table(&ident))
            .ok_or_else(|| usage("no runtime to load the table"))??;
        let feed = ChangeFeed::new(
            catalog,
            Arc::clone(iceberg.planner()),
            loaded,
            start,
            end,
            stream,
            poll_interval,
        )?;
        Ok(Arc::new(TableChangesProvider::new(Arc::new(feed))))
    }
}

/// The value of a constant argument (a literal, possibly cast: `TIMESTAMP '…'`, `-1`).
fn constant(expr: &Expr) -> DFResult<ScalarValue> {
    match expr {
        Expr::Literal(value, _) => Ok(value.clone()),
        Expr::Cast(cast) => Ok(constant(&cast.expr)?.cast_to(&cast.data_type)?),
        Expr::TryCast(cast) => Ok(constant(&cast.expr)?.cast_to(&cast.data_type)?),
        Expr::Negative(inner) => Ok(constant(inner)?.arithmetic_negate()?),
        other => Err(usage(format!("arguments must be constants, not {other}"))),
    }
}

/// A range bound: a snapshot id, a timestamp, or NULL.
fn bound(expr: &Expr, what: &str) -> DFResult<Option<ChangeBound>> {
    let value = constant(expr)?;
    if value.is_null() {
        return Ok(None);
    }
    if value.data_type().is_integer() {
        return match value.cast_to(&DataType::Int64)? {
            ScalarValue::Int64(Some(id)) => Ok(Some(ChangeBound::SnapshotId(id))),
            _ => Err(usage(format!("the {what} {value} is not a snapshot id"))),
        };
    }
    if let ScalarValue::Utf8(Some(s))
    | ScalarValue::LargeUtf8(Some(s))
    | ScalarValue::Utf8View(Some(s)) = &value
        && let Ok(id) = s.trim().parse::<i64>()
    {
        return Ok(Some(ChangeBound::SnapshotId(id)));
    }
    let ms = value
        .cast_to(&DataType::Timestamp(TimeUnit::Millisecond, None))
        .ok()
        .and_then(|v| match v {
            ScalarValue::TimestampMillisecond(Some(ms), _) => Some(ms),
            _ => None,
        })
        .ok_or_else(|| {
            usage(format!(
                "the {what} {value} is neither a snapshot id nor a timestamp"
            ))
        })?;
    Ok(Some(ChangeBound::TimestampMs(ms)))
}
