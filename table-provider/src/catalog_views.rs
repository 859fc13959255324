//! The catalog statements BI tools and SQL consoles send that DataFusion 53 cannot plan, or
//! plans without the answer: `SHOW TABLES IN|FROM <namespace>`, `SHOW SCHEMAS|NAMESPACES|
//! DATABASES [IN|FROM <catalog>]`, Spark's `DESCRIBE TABLE t` and `SHOW CREATE TABLE t` (for an
//! Iceberg table DataFusion answers a NULL definition).
//!
//! The first three become queries of DataFusion's `information_schema` (which lists every
//! catalog of the session), so they are plain read plans; `SHOW CREATE TABLE` of an Iceberg
//! table becomes one row, `createtab_stmt`, with the statement Spark 3.5 + Iceberg 1.10 prints
//! for the same table (see [`spark_create_table`]). `SHOW TABLES`, `SHOW COLUMNS FROM t` and
//! `DESCRIBE t` are DataFusion's own and are left to it.

use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{LogicalPlan, LogicalPlanBuilder, lit};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use iceberg::spec::{
    NestedFieldRef, NullOrder, PrimitiveType, SortDirection, TableMetadata, Transform, Type,
};

use crate::catalog::{IcebergCatalogProvider, Namespace, TableIdent};
use crate::error::{Error, Result};
use crate::sql_tokens::TokenCursor;

/// A catalog statement of the module docs, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CatalogStatement {
    /// `SHOW TABLES IN|FROM name`.
    TablesIn(Vec<String>),
    /// `SHOW SCHEMAS|NAMESPACES|DATABASES [IN|FROM catalog]`.
    Schemas(Option<String>),
    /// `DESCRIBE TABLE name`: DataFusion's `DESCRIBE name`.
    DescribeTable(String),
    /// `SHOW CREATE TABLE name`.
    ShowCreateTable(Vec<String>),
}

fn parse(sql: &str) -> Result<Option<CatalogStatement>> {
    // Cheap test first: every statement passes here.
    let head = sql.trim_start();
    let starts = |w: &str| {
        head.get(..w.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(w))
    };
    if !starts("SHOW") && !starts("DESC") {
        return Ok(None);
    }
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .map_err(|e| Error::InvalidArgument(format!("cannot read statement: {e}")))?;
    let mut p = TokenCursor::new(tokens);
    let statement = if p.keyword("SHOW") {
        if p.keyword("TABLES") {
            if !p.keyword_any(&["IN", "FROM"]) {
                return Ok(None);
            }
            CatalogStatement::TablesIn(p.name()?)
        } else if p.keyword_any(&["SCHEMAS", "NAMESPACES", "DATABASES"]) {
            CatalogStatement::Schemas(if p.keyword_any(&["IN", "FROM"]) {
                Some(p.identifier()?)
            } else {
                None
            })
        } else if p.keywords(&["CREATE", "TABLE"]) {
            CatalogStatement::ShowCreateTable(p.name()?)
        } else {
            return Ok(None);
        }
    } else if p.keyword_any(&["DESCRIBE", "DESC"]) && p.keyword("TABLE") {
        CatalogStatement::DescribeTable(p.rest())
    } else {
        return Ok(None);
    };
    p.eat(&Token::SemiColon);
    if !p.at_end() {
        return Err(p.unexpected("the end of the statement"));
    }
    Ok(Some(statement))
}

/// The plan of `sql` if it is one of the module's statements, planned against `state`'s
/// catalogs; `None` for anything else (and for `SHOW CREATE TABLE` of a table that is not an
/// Iceberg table, which DataFusion answers).
pub async fn catalog_view_plan(state: &SessionState, sql: &str) -> Result<Option<LogicalPlan>> {
    let Some(statement) = parse(sql)? else {
        return Ok(None);
    };
    let options = state.config().options().catalog.clone();
    let (default_catalog, default_schema) = (options.default_catalog, options.default_schema);
    let query = match statement {
        CatalogStatement::TablesIn(parts) => {
            let (catalog, schema) = namespace_of(state, &default_catalog, &parts)?;
            let mut query = format!(
                "SELECT table_catalog, table_schema, table_name, table_type \
                 FROM information_schema.tables WHERE table_catalog = {}",
                quote_literal(&catalog)
            );
            if let Some(schema) = schema {
                query.push_str(&format!(" AND table_schema = {}", quote_literal(&schema)));
            }
            query.push_str(" ORDER BY table_schema, table_name");
            query
        }
        CatalogStatement::Schemas(catalog) => {
            let mut query =
                "SELECT catalog_name, schema_name FROM information_schema.schemata".to_string();
            if let Some(catalog) = catalog {
                if state.catalog_list().catalog(&catalog).is_none() {
                    return Err(Error::NotFound(format!("catalog {catalog} does not exist")));
                }
                query.push_str(&format!(
                    " WHERE catalog_name = {}",
                    quote_literal(&catalog)
                ));
            }
            query.push_str(" ORDER BY catalog_name, schema_name");
            query
        }
        CatalogStatement::DescribeTable(name) => format!("DESCRIBE {name}"),
        CatalogStatement::ShowCreateTable(parts) => {
            let Some((catalog, ident)) = table_of(state, &default_catalog, &default_schema, &parts)
            else {
                return Ok(None);
            };
            let Some(provider) = state.catalog_list().catalog(&catalog) else {
                return Ok(None);
            };
            let Some(iceberg) = provider.as_any().downcast_ref::<IcebergCatalogProvider>() else {
                return Ok(None);
            };
            let table = iceberg.catalog().load_table(&ident).await?;
            let mut name = vec![catalog];
            name.extend(ident.namespace.levels().iter().cloned());
            name.push(ident.name.clone());
            let text = spark_create_table(&name, table.metadata())?;
            let plan = LogicalPlanBuilder::empty(true)
                .project(vec![lit(text).alias("createtab_stmt")])?
                .build()?;
            return Ok(Some(plan));
        }
    };
    Ok(Some(state.create_logical_plan(&query).await?))
}

/// The catalog and (unless the name is a catalog's alone) schema `SHOW TABLES IN parts` lists:
/// `ns` (a schema of the default catalog, else a catalog), `catalog.ns[.more]`, or a dotted
/// nested namespace of the default catalog.
fn namespace_of(
    state: &SessionState,
    default_catalog: &str,
    parts: &[String],
) -> Result<(String, Option<String>)> {
    let catalogs = state.catalog_list();
    // (An Iceberg catalog's `schema()` asks the catalog nothing: ask it here.)
    let has_schema = |catalog: &str, schema: &str| {
        catalogs.catalog(catalog).is_some_and(|c| {
            match c.as_any().downcast_ref::<IcebergCatalogProvider>() {
                Some(iceberg) => iceberg.has_namespace(schema),
                None => c.schema(schema).is_some(),
            }
        })
    };
    let (catalog, schema) = match parts {
        [only] if !has_schema(default_catalog, only) && catalogs.catalog(only).is_some() => {
            return Ok((only.clone(), None));
        }
        [first, rest @ ..] if !rest.is_empty() && catalogs.catalog(first).is_some() => {
            (first.clone(), rest.join("."))
        }
        levels => (default_catalog.to_string(), levels.join(".")),
    };
    if !has_schema(&catalog, &schema) {
        return Err(Error::NotFound(format!(
            "namespace {schema} does not exist in catalog {catalog}"
        )));
    }
    Ok((catalog, Some(schema)))
}

/// The catalog and Iceberg identifier of a table name as SQL resolves it (as the DDL does).
fn table_of(
    state: &SessionState,
    default_catalog: &str,
    default_schema: &str,
    parts: &[String],
) -> Option<(String, TableIdent)> {
    let (table, path) = parts.split_last()?;
    let (catalog, namespace) = match path {
        [] => (
            default_catalog.to_string(),
            vec![default_schema.to_string()],
        ),
        [schema] => (default_catalog.to_string(), vec![schema.clone()]),
        [first, rest @ ..] if state.catalog_list().catalog(first).is_some() => {
            (first.clone(), rest.to_vec())
        }
        levels => (default_catalog.to_string(), levels.to_vec()),
    };
    // A dotted schema name (as information_schema lists nested namespaces) is its levels.
    let namespace = namespace
        .iter()
        .flat_map(|level| level.split('.').map(str::to_string))
        .collect();
    Some((
        catalog,
        TableIdent::new(Namespace::new(namespace), table.clone()),
    ))
}

fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// What Spark 3.5's `SHOW CREATE TABLE` prints for the Iceberg table `name` (catalog,
/// namespace levels, table) with `metadata` (Iceberg 1.10's `SparkTable`):
///
/// ```text
/// CREATE TABLE iceberg.db.t (
///   id BIGINT NOT NULL COMMENT 'doc',
///   ts TIMESTAMP)
/// USING iceberg
/// PARTITIONED BY (days(ts))
/// CLUSTERED BY (id)
/// INTO 4 BUCKETS
/// COMMENT 'table comment'
/// LOCATION '...'
/// TBLPROPERTIES (
///   'current-snapshot-id' = '...',
///   'format' = 'iceberg/parquet',
///   'format-version' = '2')
/// ```
///
/// As Spark does: nested types drop their fields' nullability; a bucket transform is shown as
/// `CLUSTERED BY … INTO n BUCKETS` (the last one when there are several) and left out of
/// `PARTITIONED BY`; `void` transforms are not shown; properties are sorted by key, with
/// Iceberg's reserved ones (`format`, `current-snapshot-id`, `format-version`, `sort-order`,
/// `identifier-fields`) computed from the metadata, and `comment` shown as `COMMENT`.
pub fn spark_create_table(name: &[String], metadata: &TableMetadata) -> Result<String> {
    let schema = metadata.current_schema();
    let mut out = format!(
        "CREATE TABLE {} (\n",
        name.iter()
            .map(|p| quote_if_needed(p))
            .collect::<Vec<_>>()
            .join(".")
    );
    let columns = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| {
            let mut column = format!(
                "  {} {}",
                quote_if_needed(&f.name),
                spark_type(&f.field_type)?
            );
            if f.required {
                column.push_str(" NOT NULL");
            }
            column.push_str(&comment(f));
            Ok(column)
        })
        .collect::<Result<Vec<_>>>()?;
    out.push_str(&columns.join(",\n"));
    out.push_str(")\nUSING iceberg\n");

    let column_name = |id: i32| {
        schema
            .name_by_field_id(id)
            .map(|n| n.split('.').map(quote_if_needed).collect::<Vec<_>>().join("."))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "table metadata: sort or partition source field {id} is not in the current schema"
                ))
            })
    };
    let mut transforms = Vec::new();
    let mut bucket = None;
    for field in metadata.default_partition_spec().fields() {
        let column = column_name(field.source_id)?;
        match field.transform {
            Transform::Identity => transforms.push(column),
            Transform::Bucket(n) => bucket = Some((column, n)),
            Transform::Truncate(w) => transforms.push(format!("truncate({w}, {column})")),
            Transform::Year => transforms.push(format!("years({column})")),
            Transform::Month => transforms.push(format!("months({column})")),
            Transform::Day => transforms.push(format!("days({column})")),
            Transform::Hour => transforms.push(format!("hours({column})")),
            Transform::Void | Transform::Unknown => {}
        }
    }
    if !transforms.is_empty() {
        out.push_str(&format!("PARTITIONED BY ({})\n", transforms.join(", ")));
    }
    if let Some((column, n)) = bucket {
        out.push_str(&format!("CLUSTERED BY ({column})\nINTO {n} BUCKETS\n"));
    }
    let properties = metadata.properties();
    if let Some(comment) = properties.get("comment") {
        out.push_str(&format!("COMMENT '{}'\n", escape(comment)));
    }
    out.push_str(&format!("LOCATION '{}'\n", escape(metadata.location())));

    let mut shown: Vec<(String, String)> = properties
        .iter()
        .filter(|(k, _)| !SPARK_HIDDEN_PROPERTIES.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let format = properties
        .get("write.format.default")
        .cloned()
        .unwrap_or_else(|| "parquet".into());
    shown.push(("format".into(), format!("iceberg/{format}")));
    shown.push((
        "current-snapshot-id".into(),
        metadata
            .current_snapshot_id()
            .map(|id| id.to_string())
            .unwrap_or_else(|| "none".into()),
    ));
    shown.push((
        "format-version".into(),
        (metadata.format_version() as u8).to_string(),
    ));
    let order = metadata.default_sort_order();
    if !order.is_unsorted() {
        let fields = order
            .fields
            .iter()
            .map(|f| {
                let column = column_name(f.source_id)?;
                let term = match f.transform {
                    Transform::Identity => column,
                    Transform::Bucket(n) => format!("bucket({n}, {column})"),
                    Transform::Truncate(w) => format!("truncate({column}, {w})"),
                    Transform::Year => format!("years({column})"),
                    Transform::Month => format!("months({column})"),
                    Transform::Day => format!("days({column})"),
                    Transform::Hour => format!("hours({column})"),
                    Transform::Void | Transform::Unknown => format!("void({column})"),
                };
                let direction = match f.direction {
                    SortDirection::Ascending => "ASC",
                    SortDirection::Descending => "DESC",
                };
                let nulls = match f.null_order {
                    NullOrder::First => "NULLS FIRST",
                    NullOrder::Last => "NULLS LAST",
                };
                Ok(format!("{term} {direction} {nulls}"))
            })
            .collect::<Result<Vec<_>>>()?;
        shown.push(("sort-order".into(), fields.join(", ")));
    }
    let identifiers: Vec<String> = schema
        .identifier_field_ids()
        .filter_map(|id| schema.name_by_field_id(id).map(str::to_string))
        .collect();
    if !identifiers.is_empty() {
        shown.push((
            "identifier-fields".into(),
            format!("[{}]", identifiers.join(",")),
        ));
    }
    shown.sort();
    let properties = shown
        .iter()
        .map(|(k, v)| format!("  '{}' = '{}'", escape(k), escape(v)))
        .collect::<Vec<_>>();
    out.push_str(&format!("TBLPROPERTIES (\n{})\n", properties.join(",\n")));
    Ok(out)
}

/// Table properties Spark does not list in `TBLPROPERTIES`: Iceberg's reserved ones (shown
/// computed from the metadata instead) and Spark's own (`comment` is shown as `COMMENT`).
const SPARK_HIDDEN_PROPERTIES: &[&str] = &[
    "provider",
    "format",
    "current-snapshot-id",
    "location",
    "format-version",
    "sort-order",
    "identifier-fields",
    "comment",
    "owner",
    "external",
    "is_managed_location",
];

/// Spark's SQL name of an Iceberg type (Iceberg 1.10's `TypeToSparkType`, then Spark's
/// `DataType.sql`).
fn spark_type(ty: &Type) -> Result<String> {
    Ok(match ty {
        Type::Primitive(p) => match p {
            PrimitiveType::Boolean => "BOOLEAN".into(),
            PrimitiveType::Int => "INT".into(),
            PrimitiveType::Long => "BIGINT".into(),
            PrimitiveType::Float => "FLOAT".into(),
            PrimitiveType::Double => "DOUBLE".into(),
            PrimitiveType::Decimal { precision, scale } => format!("DECIMAL({precision},{scale})"),
            PrimitiveType::Date => "DATE".into(),
            // Spark has no time type; Iceberg's Spark integration reads it as microseconds.
            PrimitiveType::Time => "BIGINT".into(),
            PrimitiveType::Timestamp | PrimitiveType::TimestampNs => "TIMESTAMP_NTZ".into(),
            PrimitiveType::Timestamptz | PrimitiveType::TimestamptzNs => "TIMESTAMP".into(),
            PrimitiveType::String | PrimitiveType::Uuid => "STRING".into(),
            PrimitiveType::Fixed(_) | PrimitiveType::Binary => "BINARY".into(),
        },
        Type::Struct(s) => format!(
            "STRUCT<{}>",
            s.fields()
                .iter()
                .map(|f| Ok(format!(
                    "{}: {}{}",
                    quote_if_needed(&f.name),
                    spark_type(&f.field_type)?,
                    comment(f)
                )))
                .collect::<Result<Vec<_>>>()?
                .join(", ")
        ),
        Type::List(l) => format!("ARRAY<{}>", spark_type(&l.element_field.field_type)?),
        Type::Map(m) => format!(
            "MAP<{}, {}>",
            spark_type(&m.key_field.field_type)?,
            spark_type(&m.value_field.field_type)?
        ),
    })
}

fn comment(field: &NestedFieldRef) -> String {
    field
        .doc
        .as_ref()
        .map(|d| format!(" COMMENT '{}'", escape(d)))
        .unwrap_or_default()
}

/// Spark's `escapeSingleQuotedString`.
fn escape(s: &str) -> String {
    s.replace('\'', "\\'")
}

/// Spark's `quoteIfNeeded`: back-quoted unless made of letters, digits and `_` (and not all
/// digits).
fn quote_if_needed(part: &str) -> String {
    let plain = !part.is_empty()
        && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !part.chars().all(|c| c.is_ascii_digit());
    if plain {
        part.to_string()
    } else {
        format!("`{}`", part.replace('`', "``"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_statements_it_plans_and_leaves_the_rest() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse("show tables in iceberg.db;").unwrap(),
            Some(CatalogStatement::TablesIn(names(&["iceberg", "db"])))
        );
        assert_eq!(
            parse("SHOW TABLES FROM \"My\"").unwrap(),
            Some(CatalogStatement::TablesIn(names(&["My"])))
        );
        assert_eq!(
            parse("SHOW NAMESPACES IN iceberg").unwrap(),
            Some(CatalogStatement::Schemas(Some("iceberg".into())))
        );
        assert_eq!(
            parse("SHOW CREATE TABLE db.t").unwrap(),
            Some(CatalogStatement::ShowCreateTable(names(&["db", "t"])))
        );
        assert_eq!(
            parse("DESCRIBE TABLE db.t").unwrap(),
            Some(CatalogStatement::DescribeTable("db.t".into()))
        );
        for other in [
            "SHOW TABLES",
            "SHOW COLUMNS FROM t",
            "DESCRIBE t",
            "SELECT 1",
            "SHOW ALL",
        ] {
            assert_eq!(parse(other).unwrap(), None, "{other}");
        }
        let e = parse("SHOW TABLES IN db extra").unwrap_err();
        assert!(e.to_string().contains("end of the statement"), "{e}");
    }

    #[test]
    fn quotes_like_spark() {
        assert_eq!(quote_if_needed("a_1"), "a_1");
        assert_eq!(quote_if_needed("a b"), "`a b`");
        assert_eq!(quote_if_needed("12"), "`12`");
        assert_eq!(quote_if_needed("x`y"), "`x``y`");
        assert_eq!(escape("v a'l"), "v a\\'l");
    }
}
