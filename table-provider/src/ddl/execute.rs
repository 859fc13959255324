//! Running DDL statements against the Iceberg catalogs of a DataFusion session.
//!
//! Names resolve as DataFusion resolves them: `t` in the session's default catalog and schema,
//! `s.t` in the default catalog, `c.s.t` (or `c.a.b.t`, nested namespaces) when `c` is one of
//! the session's catalogs. The catalog must be an Iceberg catalog of Petrel's
//! ([`IcebergCatalogProvider`]). `CREATE TABLE … AS query` creates the table (its schema from
//! the columns, else from the query's result) and then runs `INSERT INTO … query` as one
//! append; if the insert fails the new table is dropped again. The query may only be a query
//! (no DDL, DML or `SET` inside it).

use datafusion::dataframe::{DataFrame, DataFrameWriteOptions};
use datafusion::execution::context::SQLOptions;
use datafusion::prelude::SessionContext;

use super::parser::{CreateTable, DdlStatement};
use crate::catalog::{Catalog, IcebergCatalogProvider, Namespace, TableIdent};
use crate::error::{Error, Result};
use crate::spec::arrow_schema_to_iceberg;
use std::sync::Arc;

/// What a DDL statement did: rows inserted by `CREATE TABLE … AS`, else 0.
pub async fn execute_ddl(ctx: &SessionContext, statement: DdlStatement) -> Result<u64> {
    match statement {
        DdlStatement::CreateSchema {
            name,
            if_not_exists,
        } => {
            let (catalog, namespace) = resolve_schema(ctx, &name)?;
            catalog.create_namespace(&namespace, if_not_exists).await?;
            Ok(0)
        }
        DdlStatement::DropSchema { name, if_exists } => {
            let (catalog, namespace) = resolve_schema(ctx, &name)?;
            match catalog.drop_namespace(&namespace).await {
                Err(Error::NotFound(_)) if if_exists => Ok(0),
                other => other.map(|()| 0),
            }
        }
        DdlStatement::DropTable {
            name,
            if_exists,
            purge,
        } => {
            let (catalog, ident) = resolve_table(ctx, &name)?;
            match catalog.drop_table(&ident, purge).await {
                Err(Error::NotFound(_)) if if_exists => Ok(0),
                other => other.map(|()| 0),
            }
        }
        DdlStatement::CreateTable(create) => create_table(ctx, create).await,
    }
}

async fn create_table(ctx: &SessionContext, create: CreateTable) -> Result<u64> {
    let (catalog, ident) = resolve_table(ctx, &create.name)?;
    if create.if_not_exists {
        match catalog.load_table(&ident).await {
            Ok(_) => return Ok(0),
            Err(Error::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let schema = if create.columns.is_empty() {
        let query = create.query.as_deref().unwrap_or_default();
        let frame = plan_query(ctx, query).await?;
        arrow_schema_to_iceberg(frame.schema().as_arrow())?
    } else {
        create.schema()?
    };
    let location = match &create.location {
        Some(location) => location.trim_end_matches('/').to_string(),
        None => catalog.default_table_location(&ident).await?,
    };
    let metadata = create.table_metadata(schema, location)?;
    catalog.create_table(&ident, metadata).await?;
    let Some(query) = &create.query else {
        return Ok(0);
    };
    let target = quoted_name(ctx, &ident, &create.name);
    let inserted = async {
        let batches = plan_query(ctx, query)
            .await?
            .write_table(&target, DataFrameWriteOptions::new())
            .await?;
        let rows = batches
            .first()
            .and_then(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<arrow::array::UInt64Array>()
                    .map(|c| c.value(0))
            })
            .unwrap_or(0);
        Ok::<u64, datafusion::error::DataFusionError>(rows)
    }
    .await;
    match inserted {
        Ok(rows) => Ok(rows),
        Err(e) => {
            // Leave no half-created table behind.
            if let Err(drop) = catalog.drop_table(&ident, true).await {
                tracing::warn!("dropping {ident} after its failed CREATE TABLE AS: {drop}");
            }
            Err(e.into())
        }
    }
}

/// Plans `AS query`, refusing anything but a query with a typed error
/// ([`Error::InvalidArgument`]: DataFusion's own refusal is an untyped planning error).
async fn plan_query(ctx: &SessionContext, query: &str) -> Result<DataFrame> {
    let plan = ctx.state().create_logical_plan(query).await?;
    query_only().verify_plan(&plan).map_err(|e| {
        Error::InvalidArgument(format!(
            "write refused: CREATE TABLE … AS takes a query only ({})",
            e.strip_backtrace()
        ))
    })?;
    Ok(ctx.execute_logical_plan(plan).await?)
}

/// `AS query` must be a query: no DDL, DML or `SET` hides in it.
fn query_only() -> SQLOptions {
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
}

/// The catalog named by the first part when it is one of the session's catalogs.
fn named_catalog(ctx: &SessionContext, parts: &[String]) -> Option<(String, usize)> {
    let first = parts.first()?;
    ctx.catalog(first).map(|_| (first.clone(), 1))
}

fn iceberg_catalog(ctx: &SessionContext, name: &str) -> Result<Arc<dyn Catalog>> {
    let provider = ctx
        .catalog(name)
        .ok_or_else(|| Error::NotFound(format!("catalog {name} does not exist")))?;
    provider
        .as_any()
        .downcast_ref::<IcebergCatalogProvider>()
        .map(|p| Arc::clone(p.catalog()))
        .ok_or_else(|| Error::InvalidArgument(format!("catalog {name} is not an Iceberg catalog")))
}

fn defaults(ctx: &SessionContext) -> (String, String) {
    let options = ctx.state().config().options().catalog.clone();
    (options.default_catalog, options.default_schema)
}

fn resolve_schema(ctx: &SessionContext, parts: &[String]) -> Result<(Arc<dyn Catalog>, Namespace)> {
    let (catalog, skip) = match named_catalog(ctx, parts) {
        Some((name, skip)) if parts.len() > 1 => (name, skip),
        _ => (defaults(ctx).0, 0),
    };
    Ok((
        iceberg_catalog(ctx, &catalog)?,
        Namespace::new(parts[skip..].to_vec()),
    ))
}

fn resolve_table(ctx: &SessionContext, parts: &[String]) -> Result<(Arc<dyn Catalog>, TableIdent)> {
    let (default_catalog, default_schema) = defaults(ctx);
    let Some((table, path)) = parts.split_last() else {
        return Err(Error::InvalidArgument("a table name is needed".into()));
    };
    let (catalog, namespace) = match path {
        [] => (default_catalog, vec![default_schema]),
        [schema] => (default_catalog, vec![schema.clone()]),
        [first, rest @ ..] if ctx.catalog(first).is_some() => (first.clone(), rest.to_vec()),
        levels => (default_catalog, levels.to_vec()),
    };
    Ok((
        iceberg_catalog(ctx, &catalog)?,
        TableIdent::new(Namespace::new(namespace), table.clone()),
    ))
}

/// The table's name for an INSERT, quoted so that DataFusion reads it back exactly.
fn quoted_name(ctx: &SessionContext, ident: &TableIdent, parts: &[String]) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let catalog = match parts {
        [first, _, _, ..] if ctx.catalog(first).is_some() => first.clone(),
        _ => defaults(ctx).0,
    };
    format!(
        "{}.{}.{}",
        quote(&catalog),
        quote(&ident.namespace.dotted()),
        quote(&ident.name)
    )
}
