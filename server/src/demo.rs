//! The embedded default: what `petrel` serves when no catalog is configured.
//!
//! A directory (`./petrel-warehouse` unless `--data-dir` says otherwise) holding a SQLite SQL
//! catalog (`catalog.db`, PyIceberg/JdbcCatalog layout) with one demo table,
//! `petrel.demo.seabirds`, so the very first query has something to read:
//!
//! ```sql
//! SELECT species, wingspan_cm FROM seabirds ORDER BY wingspan_cm DESC
//! ```
//!
//! The table is written through the `iceberg` crate's own append path (Parquet data-file
//! writer, then `Transaction::fast_append` committed to an in-memory catalog whose warehouse is
//! the directory) and then registered in the SQL catalog. It is created only when the
//! catalog database does not exist yet; an existing directory is served as it is.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Date32Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use iceberg::io::LocalFsStorageFactory;
use iceberg::memory::{MEMORY_CATALOG_WAREHOUSE, MemoryCatalogBuilder};
use iceberg::spec::{DataFileFormat, NestedField, PrimitiveType, Schema, Type};
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Catalog as _, CatalogBuilder, NamespaceIdent, TableCreation};
use parquet::file::properties::WriterProperties;
use petrel_table_provider::catalog::{Namespace, SqlCatalog, TableIdent};

use crate::config::CatalogConfig;

/// Name of the embedded catalog in SQL.
pub const DEMO_CATALOG: &str = "petrel";
/// Namespace of the demo table (the default schema of the embedded setup).
pub const DEMO_NAMESPACE: &str = "demo";
/// The demo table.
pub const DEMO_TABLE: &str = "seabirds";
/// The SQLite catalog file inside the data directory.
pub const CATALOG_FILE: &str = "catalog.db";

/// Creates the embedded warehouse under `dir` if it is missing and returns its catalog
/// configuration.
pub async fn ensure_embedded(dir: &Path) -> Result<CatalogConfig, String> {
    let db = dir.join(CATALOG_FILE);
    let config = CatalogConfig::Sql {
        name: DEMO_CATALOG.into(),
        path: db.clone(),
        catalog_name: Some(DEMO_CATALOG.into()),
    };
    if db.exists() {
        return Ok(config);
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create data directory {}: {e}", dir.display()))?;
    let abs = dir
        .canonicalize()
        .map_err(|e| format!("data directory {}: {e}", dir.display()))?;
    let metadata_location = write_demo_table(&abs)
        .await
        .map_err(|e| format!("creating the demo table in {}: {e}", abs.display()))?;
    let catalog = SqlCatalog::open_sqlite(&db, DEMO_CATALOG).map_err(|e| e.to_string())?;
    let ns = Namespace::from_dotted(DEMO_NAMESPACE);
    catalog
        .create_namespace(&ns)
        .await
        .map_err(|e| e.to_string())?;
    catalog
        .register_table(&TableIdent::new(ns, DEMO_TABLE), &metadata_location)
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(
        directory = %abs.display(),
        table = %format!("{DEMO_CATALOG}.{DEMO_NAMESPACE}.{DEMO_TABLE}"),
        "created the embedded default warehouse"
    );
    Ok(config)
}

/// The demo table's Iceberg schema (`id` is its identifier field, i.e. primary key).
pub fn demo_schema() -> iceberg::Result<Schema> {
    Schema::builder()
        .with_schema_id(0)
        .with_identifier_field_ids(vec![1])
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::required(2, "species", Type::Primitive(PrimitiveType::String)).into(),
            NestedField::optional(3, "wingspan_cm", Type::Primitive(PrimitiveType::Double)).into(),
            NestedField::optional(4, "weight_g", Type::Primitive(PrimitiveType::Int)).into(),
            NestedField::optional(5, "first_seen", Type::Primitive(PrimitiveType::Date)).into(),
        ])
        .build()
}

/// Demo rows: (species, wingspan cm, weight g, first seen as days since 1970-01-01).
const ROWS: &[(&str, f64, Option<i32>, Option<i32>)] = &[
    ("Wandering albatross", 311.0, Some(8500), Some(19_000)),
    ("Storm petrel", 38.0, Some(28), Some(19_010)),
    ("Northern fulmar", 107.0, Some(700), Some(19_020)),
    ("Atlantic puffin", 55.0, Some(460), Some(19_030)),
    ("Manx shearwater", 82.0, Some(420), None),
    ("Great frigatebird", 230.0, Some(1400), Some(19_050)),
    ("Arctic tern", 80.0, Some(110), Some(19_060)),
    ("Northern gannet", 180.0, Some(3000), Some(19_070)),
    ("Leach's storm petrel", 45.0, None, Some(19_080)),
    ("Southern giant petrel", 200.0, Some(5000), Some(19_090)),
];

/// Writes the demo table under `<warehouse>/demo/seabirds` and returns its metadata file.
async fn write_demo_table(warehouse: &Path) -> iceberg::Result<String> {
    let root = format!("file://{}", warehouse.display());
    // The memory catalog defaults to in-memory storage: write to the local filesystem.
    let catalog = MemoryCatalogBuilder::default()
        .with_storage_factory(Arc::new(LocalFsStorageFactory))
        .load(
            "petrel-demo",
            HashMap::from([(MEMORY_CATALOG_WAREHOUSE.to_string(), root.clone())]),
        )
        .await?;
    let ns = NamespaceIdent::new(DEMO_NAMESPACE.to_string());
    catalog.create_namespace(&ns, HashMap::new()).await?;
    let schema = demo_schema()?;
    let table = catalog
        .create_table(
            &ns,
            TableCreation::builder()
                .name(DEMO_TABLE.to_string())
                .location(format!("{root}/{DEMO_NAMESPACE}/{DEMO_TABLE}"))
                .schema(schema.clone())
                .build(),
        )
        .await?;

    let arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(
        table.metadata().current_schema(),
    )?);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(1..=ROWS.len() as i64)),
        Arc::new(StringArray::from_iter_values(ROWS.iter().map(|r| r.0))),
        Arc::new(Float64Array::from_iter_values(ROWS.iter().map(|r| r.1))),
        Arc::new(Int32Array::from(
            ROWS.iter().map(|r| r.2).collect::<Vec<_>>(),
        )),
        Arc::new(Date32Array::from(
            ROWS.iter().map(|r| r.3).collect::<Vec<_>>(),
        )),
    ];
    let batch = RecordBatch::try_new(arrow_schema, columns)?;

    let parquet = ParquetWriterBuilder::new(
        WriterProperties::default(),
        Arc::clone(table.metadata().current_schema()),
    );
    let rolling = RollingFileWriterBuilder::new_with_default_file_size(
        parquet,
        table.file_io().clone(),
        DefaultLocationGenerator::new(table.metadata())?,
        DefaultFileNameGenerator::new("demo".into(), None, DataFileFormat::Parquet),
    );
    let mut writer = DataFileWriterBuilder::new(rolling).build(None).await?;
    writer.write(batch).await?;
    let files = writer.close().await?;

    let tx = Transaction::new(&table);
    let tx = tx.fast_append().add_data_files(files).apply(tx)?;
    let table = tx.commit(&catalog).await?;
    table
        .metadata_location()
        .map(str::to_string)
        .ok_or_else(|| iceberg::Error::new(iceberg::ErrorKind::Unexpected, "no metadata location"))
}
