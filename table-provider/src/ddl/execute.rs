//! Running DDL statements against the Iceberg catalogs of a DataFusion session.
//!
//! Names resolve as DataFusion resolves them: `t` in the session's default catalog and schema,
//! `s.t` in the default catalog, `c.s.t` (or `c.a.b.t`, nested namespaces) when `c` is one of
//! the session's catalogs. The catalog must be an Iceberg catalog of Petrel's
//! ([`IcebergCatalogProvider`]). `CREATE TABLE … AS query` creates the table (its schema from
//! the columns, else from the query's result) and then runs `INSERT INTO … query` as one
//! append; if the insert fails the new table is dropped again. The query may only be a query
//! (no DDL, DML or `SET` inside it).
//!
//! `CREATE OR REPLACE TABLE` and `REPLACE TABLE` replace a table that exists as Iceberg's
//! `REPLACE TABLE` does (see [`crate::commit::replace`]): the statement's schema, partition spec
//! and properties (set over the table's) become current in one commit that keeps the table's
//! uuid, location and snapshots. With `AS query` the query's rows are the first snapshot of that
//! commit (inserted through the replaced table's provider: the same writers and commit loop as
//! `INSERT`); without, the table is left with no current snapshot, as in Spark. A failure
//! commits nothing. `LOCATION` may only name the table's own location. A missing table is
//! created by `CREATE OR REPLACE` and is an error for `REPLACE TABLE`.

use datafusion::dataframe::{DataFrame, DataFrameWriteOptions};
use datafusion::execution::context::SQLOptions;
use datafusion::prelude::SessionContext;

use super::parser::{CreateTable, DdlStatement, ReplaceMode};
use crate::IcebergTableProvider;
use crate::catalog::{Catalog, IcebergCatalogProvider, LoadedTable, Namespace, TableIdent};
use crate::commit::{TableReplacement, commit_replacement_without_rows};
use crate::error::{Error, Result};
use crate::spec::arrow_schema_to_iceberg;
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::LogicalPlanBuilder;
use datafusion::logical_expr::dml::InsertOp;
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
    if create.replace != ReplaceMode::No {
        match catalog.load_table(&ident).await {
            Ok(table) => return replace_table(ctx, catalog, table, create).await,
            Err(Error::NotFound(_)) if create.replace == ReplaceMode::OrCreate => {}
            Err(Error::NotFound(_)) => {
                return Err(Error::NotFound(format!(
                    "REPLACE TABLE: table {ident} does not exist (CREATE OR REPLACE TABLE \
                     creates it)"
                )));
            }
            Err(e) => return Err(e),
        }
    }
    if create.if_not_exists {
        match catalog.load_table(&ident).await {
            Ok(_) => return Ok(0),
            Err(Error::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let schema = statement_schema(ctx, &create).await?;
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

/// The table's schema: the columns', else the query's.
async fn statement_schema(
    ctx: &SessionContext,
    create: &CreateTable,
) -> Result<iceberg::spec::Schema> {
    if create.columns.is_empty() {
        let query = create.query.as_deref().unwrap_or_default();
        let frame = plan_query(ctx, query).await?;
        Ok(arrow_schema_to_iceberg(frame.schema().as_arrow())?)
    } else {
        create.schema()
    }
}

/// `CREATE OR REPLACE TABLE` / `REPLACE TABLE` of `base`, which exists (module docs).
async fn replace_table(
    ctx: &SessionContext,
    catalog: Arc<dyn Catalog>,
    base: LoadedTable,
    create: CreateTable,
) -> Result<u64> {
    let ident = base.ident().clone();
    if let Some(location) = &create.location
        && location.trim_end_matches('/') != base.metadata().location().trim_end_matches('/')
    {
        return Err(Error::InvalidArgument(format!(
            "REPLACE TABLE {ident}: LOCATION {location} is not the table's location {}; a \
             replaced table stays where it is",
            base.metadata().location()
        )));
    }
    let schema = statement_schema(ctx, &create).await?;
    let spec = create.partition_spec(&schema)?.into_unbound();
    let mut properties: std::collections::HashMap<String, String> =
        create.properties.iter().cloned().collect();
    if let Some(comment) = &create.comment {
        properties.insert("comment".to_string(), comment.clone());
    }
    let replacement = TableReplacement {
        schema,
        spec,
        properties,
    };
    let Some(query) = &create.query else {
        commit_replacement_without_rows(catalog.as_ref(), base, &replacement).await?;
        return Ok(0);
    };
    let target = quoted_name(ctx, &ident, &create.name);
    let provider = ctx.table_provider(target.as_str()).await?;
    let Some(iceberg) = provider.as_any().downcast_ref::<IcebergTableProvider>() else {
        return Err(Error::InvalidArgument(format!(
            "REPLACE TABLE {ident}: not an Iceberg table"
        )));
    };
    let replaced = Arc::new(iceberg.replacing(replacement)?);
    let frame = plan_query(ctx, query).await?;
    let (state, plan) = frame.into_parts();
    let insert = LogicalPlanBuilder::insert_into(
        plan,
        target.as_str(),
        provider_as_source(replaced),
        InsertOp::Append,
    )?
    .build()?;
    let batches = DataFrame::new(state, insert).collect().await?;
    Ok(batches
        .first()
        .and_then(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<arrow::array::UInt64Array>()
                .map(|c| c.value(0))
        })
        .unwrap_or(0))
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
