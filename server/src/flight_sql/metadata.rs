//! Metadata commands: GetCatalogs, GetDbSchemas, GetTables (with `include_schema`),
//! GetTableTypes, GetPrimaryKeys (Iceberg identifier fields), and the foreign-key family
//! (GetExportedKeys / GetImportedKeys / GetCrossReference: well-formed and empty, Iceberg has
//! no foreign keys).
//!
//! Iceberg catalogs are listed through Petrel's async `Catalog` trait (never DataFusion's sync
//! catalog API, which would block on IO and cannot report a failure). A catalog that cannot be
//! listed fails the call with the catalog's error (UNAVAILABLE when its storage or database is
//! down): it never looks like an empty catalog.
//!
//! A table whose metadata cannot be loaded when GetTables asks for schemas is still listed, so
//! one broken table neither blanks a BI tool's navigator nor silently disappears from it: its
//! `table_schema` is an empty schema whose metadata holds the error under
//! [`TABLE_ERROR_METADATA_KEY`] (`<gRPC code>: <message>`, the message as a client would get it
//! from a query: the table's name, the file relative to the table, no warehouse paths), and the
//! server logs a warning naming the table. This holds whether the metadata is garbage or its
//! storage fails (an unreadable or looping file): the catalogs' listings do not fail on one
//! table's metadata (the filesystem catalog, which must read a directory's metadata to know it
//! is a table, lists one it cannot read as a table), so the failure surfaces only when the
//! table is loaded, per table.
//!
//! The calls that read the catalogs (GetDbSchemas, GetTables, GetPrimaryKeys) run under a work
//! slot (`admission`); GetTables with `include_schema` loads up to
//! [`METADATA_LOAD_CONCURRENCY`] tables' metadata at once within it, so a catalog of a
//! thousand tables is neither read one table after another nor a thousand loads at once.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use arrow::array::{ArrayRef, Int32Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow_flight::sql::metadata::{GetCatalogsBuilder, GetTablesBuilder};
use arrow_flight::sql::{CommandGetDbSchemas, CommandGetTables};
use futures::StreamExt;
use petrel_table_provider::catalog::{Namespace, TableIdent};
use petrel_table_provider::metadata_tables::{
    METADATA_TABLE_TYPE, MetadataTableKind, MetadataTableProvider, metadata_table_name,
    split_metadata_table,
};
use tonic::Status;

use crate::admission::METADATA_LOAD_CONCURRENCY;
use crate::engine::CatalogSource;
use crate::error::{Error, to_status};
use crate::executor::QueryExecutor;
use crate::flight_sql::xdbc::{precision_scale, sql_type_name};

/// The key of the `table_schema` metadata entry that holds why a table's schema could not be
/// loaded (GetTables with `include_schema`; module docs).
pub const TABLE_ERROR_METADATA_KEY: &str = "petrel:table_error";

/// Table types Petrel reports. Metadata tables (`t$snapshots`, …) are listed only when
/// GetTables asks for their type by name.
pub(crate) const TABLE_TYPES: &[&str] = &["TABLE", "VIEW", METADATA_TABLE_TYPE];

/// One table found by a listing.
#[derive(Debug, Clone)]
pub(crate) struct TableEntry {
    pub(crate) catalog: String,
    pub(crate) schema: String,
    pub(crate) table: String,
}

impl TableEntry {
    /// `catalog.schema.table`.
    pub(crate) fn display(&self) -> String {
        format!("{}.{}.{}", self.catalog, self.schema, self.table)
    }
}

/// SQL LIKE with `%` and `_` (and `\` escaping the next character), in O(pattern × text)
/// time and constant stack: a `%` remembers where it matched last, and a mismatch after it
/// retries from one character further (runs of `%` are one). Patterns come from clients
/// (GetDbSchemas, GetTables): a recursive matcher overflowed the stack on a pattern of 200,000
/// `%`, and backtracked exponentially on 60 `%` before an `x`.
pub(crate) fn like(pattern: &str, text: &str) -> bool {
    enum Token {
        Any,
        One,
        Char(char),
    }
    let mut tokens = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        let token = match c {
            '%' => Token::Any,
            '_' => Token::One,
            '\\' => Token::Char(chars.next().unwrap_or('\\')),
            c => Token::Char(c),
        };
        if !(matches!(token, Token::Any) && matches!(tokens.last(), Some(Token::Any))) {
            tokens.push(token);
        }
    }
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    // After the last `%` seen: the pattern position past it, and the text position it is
    // to match from next.
    let mut retry: Option<(usize, usize)> = None;
    while t < text.len() {
        match tokens.get(p) {
            Some(Token::Any) => {
                retry = Some((p + 1, t));
                p += 1;
            }
            Some(Token::One) => {
                p += 1;
                t += 1;
            }
            Some(Token::Char(c)) if *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match retry {
                Some((after, from)) => {
                    retry = Some((after, from + 1));
                    p = after;
                    t = from + 1;
                }
                None => return false,
            },
        }
    }
    tokens[p..].iter().all(|token| matches!(token, Token::Any))
}

fn matches(pattern: &Option<String>, text: &str) -> bool {
    pattern.as_ref().is_none_or(|p| like(p, text))
}

fn catalogs_matching<'a>(
    engine: &'a dyn QueryExecutor,
    catalog: &Option<String>,
) -> impl Iterator<Item = &'a (String, CatalogSource)> {
    let filter = catalog.clone();
    engine
        .catalogs()
        .iter()
        .filter(move |(name, _)| filter.as_ref().is_none_or(|c| c == name))
}

/// Schema (namespace) names of catalog `name`.
async fn schema_names(name: &str, source: &CatalogSource) -> Result<Vec<String>, Status> {
    match source {
        CatalogSource::Iceberg(c) => Ok(c
            .list_namespaces()
            .await
            .map_err(|e| Error::from(e).context(format!("listing the schemas of catalog {name}")))?
            .iter()
            .map(Namespace::dotted)
            .collect()),
        CatalogSource::DataFusion(p) => Ok(p.schema_names()),
    }
}

/// Table names of one schema of catalog `name`.
async fn table_names(
    name: &str,
    source: &CatalogSource,
    schema: &str,
) -> Result<Vec<String>, Status> {
    match source {
        CatalogSource::Iceberg(c) => Ok(c
            .list_tables(&Namespace::from_dotted(schema))
            .await
            .map_err(|e| Error::from(e).context(format!("listing the tables of {name}.{schema}")))?
            .into_iter()
            .map(|t| t.name)
            .collect()),
        CatalogSource::DataFusion(p) => Ok(p
            .schema(schema)
            .map(|s| s.table_names())
            .unwrap_or_default()),
    }
}

/// A table's Arrow schema (with field ids and real nullability for Iceberg tables); errors name
/// the table.
async fn table_schema(source: &CatalogSource, entry: &TableEntry) -> Result<SchemaRef, Error> {
    let (schema, table) = (&entry.schema, &entry.table);
    let result = match source {
        CatalogSource::Iceberg(c) => {
            let metadata_table = split_metadata_table(table);
            let base = metadata_table.map_or(table.as_str(), |(t, _)| t);
            let ident = TableIdent::new(Namespace::from_dotted(schema), base);
            match (c.load_table(&ident).await, metadata_table) {
                (Ok(loaded), None) => loaded.arrow_schema().map_err(Error::from),
                (Ok(loaded), Some((_, kind))) => MetadataTableProvider::try_new(
                    loaded,
                    kind,
                    petrel_table_provider::SnapshotSelector::Current,
                    &petrel_table_provider::ScanPlanner::default(),
                )
                .map(|p| datafusion::catalog::TableProvider::schema(&p))
                .map_err(Error::from),
                (Err(e), _) => Err(Error::from(e)),
            }
        }
        CatalogSource::DataFusion(p) => match p.schema(schema) {
            None => Err(Error::NotFound(format!("schema {schema} not found"))),
            Some(s) => match s.table(table).await {
                Ok(Some(t)) => Ok(t.schema()),
                Ok(None) => Err(Error::NotFound("table not found".into())),
                Err(e) => Err(Error::from(e)),
            },
        },
    };
    result.map_err(|e| e.in_table(entry.display()))
}

/// Catalog names.
pub(crate) fn catalogs(engine: &dyn QueryExecutor) -> Result<RecordBatch, Status> {
    let mut b = GetCatalogsBuilder::new();
    for (name, _) in engine.catalogs() {
        b.append(name);
    }
    b.build().map_err(|e| to_status(&e))
}

/// Schema names, filtered.
pub(crate) async fn db_schemas(
    engine: &dyn QueryExecutor,
    cmd: CommandGetDbSchemas,
) -> Result<RecordBatch, Status> {
    let catalog = cmd.catalog.clone();
    let pattern = cmd.db_schema_filter_pattern.clone();
    let mut b = cmd.into_builder();
    for (name, source) in catalogs_matching(engine, &catalog) {
        for s in schema_names(name, source).await? {
            if matches(&pattern, &s) {
                b.append(name, s);
            }
        }
    }
    b.build().map_err(|e| to_status(&e))
}

/// Lists tables matching the filters.
pub(crate) async fn list_tables(
    engine: &dyn QueryExecutor,
    catalog: &Option<String>,
    schema_pattern: &Option<String>,
    table_pattern: &Option<String>,
) -> Result<Vec<(TableEntry, CatalogSource)>, Status> {
    let mut out = Vec::new();
    for (name, source) in catalogs_matching(engine, catalog) {
        for s in schema_names(name, source).await? {
            if !matches(schema_pattern, &s) {
                continue;
            }
            for t in table_names(name, source, &s).await? {
                if matches(table_pattern, &t) {
                    out.push((
                        TableEntry {
                            catalog: name.clone(),
                            schema: s.clone(),
                            table: t,
                        },
                        source.clone(),
                    ));
                }
            }
        }
    }
    Ok(out)
}

/// GetTables, with each table's schema when asked (`include_schema`).
pub(crate) async fn tables(
    engine: &dyn QueryExecutor,
    cmd: CommandGetTables,
) -> Result<RecordBatch, Status> {
    let include_schema = cmd.include_schema;
    let wants_tables = cmd.table_types.is_empty()
        || cmd
            .table_types
            .iter()
            .any(|t| t.eq_ignore_ascii_case("TABLE"));
    let found = list_tables(
        engine,
        &cmd.catalog,
        &cmd.db_schema_filter_pattern,
        &cmd.table_name_filter_pattern,
    )
    .await?;
    let wants_metadata = cmd
        .table_types
        .iter()
        .any(|t| t.eq_ignore_ascii_case(METADATA_TABLE_TYPE));
    let metadata_tables = if wants_metadata {
        metadata_tables_of(engine, &cmd).await?
    } else {
        Vec::new()
    };
    let mut b: GetTablesBuilder = cmd.into_builder();
    let found = if wants_tables { found } else { Vec::new() };
    let found: Vec<(TableEntry, CatalogSource, bool)> = found
        .into_iter()
        .map(|(e, s)| (e, s, false))
        .chain(metadata_tables.into_iter().map(|(e, s)| (e, s, true)))
        .collect();
    let empty = Schema::empty();
    let read_only = engine.options().read_only;
    // Schemas are loaded concurrently (bounded), in listing order.
    let mut loaded = futures::stream::iter(found)
        .map(|(entry, source, is_metadata)| async move {
            let schema = if include_schema {
                Some(table_schema(&source, &entry).await)
            } else {
                None
            };
            (entry, schema, is_metadata)
        })
        .buffered(METADATA_LOAD_CONCURRENCY);
    while let Some((entry, schema, is_metadata)) = loaded.next().await {
        let table_type = if is_metadata {
            METADATA_TABLE_TYPE
        } else {
            "TABLE"
        };
        if let Some(schema) = schema {
            let schema = match schema {
                Ok(schema) => annotate_schema(&schema, &entry, read_only),
                Err(e) => {
                    let status = Status::from(e);
                    tracing::warn!(
                        table = %entry.display(),
                        code = ?status.code(),
                        error = %status.message(),
                        "GetTables: a table's schema cannot be loaded; listed with its error"
                    );
                    failed_table_schema(&status)
                }
            };
            b.append(
                &entry.catalog,
                &entry.schema,
                &entry.table,
                table_type,
                &schema,
            )
            .map_err(|e| to_status(&e))?;
        } else {
            b.append(
                &entry.catalog,
                &entry.schema,
                &entry.table,
                table_type,
                &empty,
            )
            .map_err(|e| to_status(&e))?;
        }
    }
    b.build().map_err(|e| to_status(&e))
}

/// The metadata tables (`t$snapshots`, …) of the Iceberg tables GetTables' catalog and schema
/// filters select, filtered by its table-name pattern.
async fn metadata_tables_of(
    engine: &dyn QueryExecutor,
    cmd: &CommandGetTables,
) -> Result<Vec<(TableEntry, CatalogSource)>, Status> {
    let tables = list_tables(engine, &cmd.catalog, &cmd.db_schema_filter_pattern, &None).await?;
    let mut out = Vec::new();
    for (entry, source) in tables {
        if !matches!(source, CatalogSource::Iceberg(_)) {
            continue;
        }
        for kind in MetadataTableKind::ALL {
            let name = metadata_table_name(&entry.table, kind);
            if matches(&cmd.table_name_filter_pattern, &name) {
                out.push((
                    TableEntry {
                        table: name,
                        ..entry.clone()
                    },
                    source.clone(),
                ));
            }
        }
    }
    Ok(out)
}

/// The `table_schema` of a table whose schema cannot be loaded: no fields, the error in its
/// metadata (module docs).
fn failed_table_schema(status: &Status) -> Schema {
    let error = format!("{:?}: {}", status.code(), status.message());
    Schema::empty().with_metadata(HashMap::from([(
        TABLE_ERROR_METADATA_KEY.to_string(),
        error,
    )]))
}

/// Adds Flight SQL column metadata (`ARROW:FLIGHT:SQL:*`) to a table's fields. Columns are
/// writable (INSERT) unless the server is read-only.
pub(crate) fn annotate_schema(schema: &Schema, entry: &TableEntry, read_only: bool) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            let mut md: HashMap<String, String> = f.metadata().clone();
            let dt = f.data_type();
            let (precision, scale) = precision_scale(dt);
            let put = |md: &mut HashMap<String, String>, k: &str, v: String| {
                md.insert(format!("ARROW:FLIGHT:SQL:{k}"), v);
            };
            put(&mut md, "CATALOG_NAME", entry.catalog.clone());
            put(&mut md, "SCHEMA_NAME", entry.schema.clone());
            put(&mut md, "TABLE_NAME", entry.table.clone());
            put(&mut md, "TYPE_NAME", sql_type_name(dt));
            if let Some(p) = precision {
                put(&mut md, "PRECISION", p.to_string());
            }
            if let Some(s) = scale {
                put(&mut md, "SCALE", s.to_string());
            }
            put(&mut md, "IS_AUTO_INCREMENT", "0".into());
            put(
                &mut md,
                "IS_CASE_SENSITIVE",
                if matches!(
                    dt,
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                ) {
                    "1".into()
                } else {
                    "0".into()
                },
            );
            put(
                &mut md,
                "IS_READ_ONLY",
                if read_only { "1" } else { "0" }.into(),
            );
            put(&mut md, "IS_SEARCHABLE", "1".into());
            if let Some(doc) = f
                .metadata()
                .get("PARQUET:field_doc")
                .or(f.metadata().get("doc"))
            {
                put(&mut md, "REMARKS", doc.clone());
            }
            f.as_ref().clone().with_metadata(md)
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// Schema of GetPrimaryKeys results.
pub(crate) static PRIMARY_KEYS_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("catalog_name", DataType::Utf8, true),
        Field::new("db_schema_name", DataType::Utf8, true),
        Field::new("table_name", DataType::Utf8, false),
        Field::new("column_name", DataType::Utf8, false),
        Field::new("key_name", DataType::Utf8, true),
        Field::new("key_sequence", DataType::Int32, false),
    ]))
});

/// Schema of GetExportedKeys / GetImportedKeys / GetCrossReference results.
pub(crate) static FOREIGN_KEYS_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("pk_catalog_name", DataType::Utf8, true),
        Field::new("pk_db_schema_name", DataType::Utf8, true),
        Field::new("pk_table_name", DataType::Utf8, false),
        Field::new("pk_column_name", DataType::Utf8, false),
        Field::new("fk_catalog_name", DataType::Utf8, true),
        Field::new("fk_db_schema_name", DataType::Utf8, true),
        Field::new("fk_table_name", DataType::Utf8, false),
        Field::new("fk_column_name", DataType::Utf8, false),
        Field::new("key_sequence", DataType::Int32, false),
        Field::new("fk_key_name", DataType::Utf8, true),
        Field::new("pk_key_name", DataType::Utf8, true),
        Field::new("update_rule", DataType::UInt8, false),
        Field::new("delete_rule", DataType::UInt8, false),
    ]))
});

/// GetPrimaryKeys: an Iceberg table's identifier fields, in schema order.
pub(crate) async fn primary_keys(
    engine: &dyn QueryExecutor,
    catalog: Option<String>,
    schema: Option<String>,
    table: String,
    default_catalog: &str,
    default_schema: &str,
) -> Result<RecordBatch, Status> {
    let catalog = catalog.unwrap_or_else(|| default_catalog.to_string());
    let schema = schema.unwrap_or_else(|| default_schema.to_string());
    let source = engine
        .catalogs()
        .iter()
        .find(|(n, _)| *n == catalog)
        .map(|(_, s)| s.clone())
        .ok_or_else(|| Error::NotFound(format!("catalog {catalog:?} not found")))?;
    let mut names: Vec<String> = Vec::new();
    if let CatalogSource::Iceberg(c) = &source {
        let ident = TableIdent::new(Namespace::from_dotted(&schema), table.clone());
        let loaded = c
            .load_table(&ident)
            .await
            .map_err(|e| Error::from(e).in_table(format!("{catalog}.{ident}")))?;
        let iceberg_schema = loaded.metadata().current_schema();
        for id in iceberg_schema.identifier_field_ids() {
            if let Some(name) = iceberg_schema.name_by_field_id(id) {
                names.push(name.to_string());
            }
        }
    }
    let mut cat = StringBuilder::new();
    let mut sch = StringBuilder::new();
    let mut tab = StringBuilder::new();
    let mut col = StringBuilder::new();
    let mut key = StringBuilder::new();
    let mut seq = Int32Builder::new();
    for (i, n) in names.iter().enumerate() {
        cat.append_value(&catalog);
        sch.append_value(&schema);
        tab.append_value(&table);
        col.append_value(n);
        key.append_null();
        seq.append_value(i as i32 + 1);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(cat.finish()),
        Arc::new(sch.finish()),
        Arc::new(tab.finish()),
        Arc::new(col.finish()),
        Arc::new(key.finish()),
        Arc::new(seq.finish()),
    ];
    RecordBatch::try_new(Arc::clone(&PRIMARY_KEYS_SCHEMA), columns).map_err(|e| to_status(&e))
}

/// An empty foreign-key result.
pub(crate) fn no_foreign_keys() -> RecordBatch {
    RecordBatch::new_empty(Arc::clone(&FOREIGN_KEYS_SCHEMA))
}

#[cfg(test)]
mod tests {
    use super::like;

    #[test]
    fn like_patterns() {
        assert!(like("%", "anything"));
        assert!(like("v2\\_%", "v2_mor"));
        assert!(!like("v2\\_%", "v2xmor"));
        assert!(like("py_ceberg%", "pyiceberg_cow"));
        assert!(!like("db", "dbx"));
        assert!(like("a%b%c", "axxbyyc"));
        assert!(!like("a%b%c", "axxbyy"));
        assert!(like("%ab", "aab"));
        assert!(like("_%_", "ab"));
        assert!(!like("_%_", "a"));
        assert!(like("100\\%", "100%"));
        assert!(!like("100\\%", "1000"));
        assert!(like("a\\", "a\\"));
        assert!(like("", ""));
        assert!(!like("", "a"));
        // Client patterns that once overflowed the stack or backtracked for minutes.
        let many = "%".repeat(200_000);
        assert!(like(&many, "pyiceberg_cow"));
        let sixty = format!("{}x", "%".repeat(60));
        assert!(!like(&sixty, "seabirds"));
        assert!(like(&sixty, "seabirdsx"));
    }
}
