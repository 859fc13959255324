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
//! The table has a short history, so time travel can be tried on it:
//!
//! | snapshot | commit time (UTC) | rows | refs |
//! |---|---|---|---|
//! | 1 | 2026-03-01 00:00 | ids 1–4 (4 rows) | tag `v1` |
//! | 2 | 2026-06-01 00:00 | + ids 5–7 (7 rows) | |
//! | 3 | 2026-09-01 00:00 | + ids 8–10 (10 rows) | `main` (current) |
//! | 4 | 2026-10-01 00:00 | + id 11 (11 rows), child of 3 | branch `audit` |
//!
//! ```sql
//! SELECT count(*) FROM seabirds VERSION AS OF 'v1'                                  -- 4
//! SELECT count(*) FROM seabirds VERSION AS OF 'audit'                               -- 11
//! SELECT count(*) FROM seabirds FOR TIMESTAMP AS OF TIMESTAMP '2026-07-01 00:00:00' -- 7
//! ```
//!
//! The data is written through the `iceberg` crate's own append path (Parquet data-file
//! writer, then one `Transaction::fast_append` per commit to an in-memory catalog whose
//! warehouse is the directory). The crate's transactions only append to `main` and stamp each
//! snapshot with the current time, so the final metadata is then rebuilt with the crate's
//! `TableMetadataBuilder`: the same snapshots (ids, parents, sequence numbers, manifest lists)
//! with fixed commit times (so a `FOR TIMESTAMP AS OF` example gives the same answer on every
//! machine), the fourth moved from `main` to the branch `audit`, and the tag `v1`. That
//! metadata file replaces the staging ones and is registered in the SQL catalog. The table is
//! created only when the catalog database does not exist yet; an existing directory is served
//! as it is. Snapshot ids are random; the server logs them when it creates the table.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Date32Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use iceberg::io::LocalFsStorageFactory;
use iceberg::memory::{MEMORY_CATALOG_WAREHOUSE, MemoryCatalogBuilder};
use iceberg::spec::{
    DataFileFormat, FormatVersion, MAIN_BRANCH, NestedField, PartitionSpec, PrimitiveType, Schema,
    Snapshot, SnapshotReference, SnapshotRetention, SortOrder, TableMetadataBuilder, Type,
};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Catalog as _, CatalogBuilder, MetadataLocation, NamespaceIdent, TableCreation};
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
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create data directory {}: {e}", dir.display()))?;
    let abs = dir
        .canonicalize()
        .map_err(|e| format!("data directory {}: {e}", dir.display()))?;
    // New tables (CREATE TABLE) go beside the demo: <dir>/<namespace>/<table>.
    let config = CatalogConfig::Sql {
        name: DEMO_CATALOG.into(),
        path: db.clone(),
        catalog_name: Some(DEMO_CATALOG.into()),
        warehouse: Some(abs.to_string_lossy().into_owned()),
    };
    if db.exists() {
        return Ok(config);
    }
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

/// Demo rows: (species, wingspan cm, weight g, first seen as days since 1970-01-01). A row's
/// `id` is its position + 1.
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
    // Only on the `audit` branch: a sighting under review.
    ("Fea's petrel", 86.0, Some(290), Some(19_100)),
];

/// The tag on the first snapshot.
pub const DEMO_TAG: &str = "v1";
/// The branch holding one commit more than `main`.
pub const DEMO_BRANCH: &str = "audit";

/// One commit of the demo's history.
struct DemoCommit {
    /// The rows of [`ROWS`] it appends.
    rows: std::ops::Range<usize>,
    /// Its commit time, UTC (year, month, day).
    date: (i32, u32, u32),
    /// The branch it is on.
    branch: &'static str,
    /// A tag on it.
    tag: Option<&'static str>,
}

/// The demo's history, oldest first (each commit's parent is the one before it).
const HISTORY: &[DemoCommit] = &[
    DemoCommit {
        rows: 0..4,
        date: (2026, 3, 1),
        branch: MAIN_BRANCH,
        tag: Some(DEMO_TAG),
    },
    DemoCommit {
        rows: 4..7,
        date: (2026, 6, 1),
        branch: MAIN_BRANCH,
        tag: None,
    },
    DemoCommit {
        rows: 7..10,
        date: (2026, 9, 1),
        branch: MAIN_BRANCH,
        tag: None,
    },
    DemoCommit {
        rows: 10..11,
        date: (2026, 10, 1),
        branch: DEMO_BRANCH,
        tag: None,
    },
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
    let mut table = catalog
        .create_table(
            &ns,
            TableCreation::builder()
                .name(DEMO_TABLE.to_string())
                .location(format!("{root}/{DEMO_NAMESPACE}/{DEMO_TABLE}"))
                .schema(schema.clone())
                .build(),
        )
        .await?;

    // Stage every commit on `main` (the only branch the crate's transactions write to).
    let mut staged = Vec::with_capacity(HISTORY.len());
    for (i, commit) in HISTORY.iter().enumerate() {
        table = append(&catalog, &table, commit.rows.clone(), i).await?;
        let snapshot = table.metadata().current_snapshot().ok_or_else(|| {
            iceberg::Error::new(iceberg::ErrorKind::Unexpected, "append left no snapshot")
        })?;
        staged.push(Arc::clone(snapshot));
    }

    // The final metadata: the same snapshots at fixed times, on their branches, plus the tag.
    let staging = table.metadata();
    let mut builder = TableMetadataBuilder::new(
        schema,
        PartitionSpec::unpartition_spec(),
        SortOrder::unsorted_order(),
        staging.location().to_string(),
        FormatVersion::V2,
        staging.properties().clone(),
    )?;
    for (commit, snapshot) in HISTORY.iter().zip(&staged) {
        let (y, m, d) = commit.date;
        let at = chrono::NaiveDate::from_ymd_opt(y, m, d)
            .and_then(|day| day.and_hms_opt(0, 0, 0))
            .map(|t| t.and_utc().timestamp_millis())
            .ok_or_else(|| iceberg::Error::new(iceberg::ErrorKind::Unexpected, "bad date"))?;
        let dated = Snapshot::builder()
            .with_snapshot_id(snapshot.snapshot_id())
            .with_parent_snapshot_id(snapshot.parent_snapshot_id())
            .with_sequence_number(snapshot.sequence_number())
            .with_timestamp_ms(at)
            .with_manifest_list(snapshot.manifest_list())
            .with_summary(snapshot.summary().clone())
            .schema_id_opt(snapshot.schema_id())
            .build();
        builder = builder.set_branch_snapshot(dated, commit.branch)?;
        // (Tagged in commit order: setting a ref stamps the metadata with the snapshot's time.)
        if let Some(tag) = commit.tag {
            let tag_ref = SnapshotReference::new(
                snapshot.snapshot_id(),
                SnapshotRetention::Tag {
                    max_ref_age_ms: None,
                },
            );
            builder = builder.set_ref(tag, tag_ref)?;
        }
        // One build per commit: a build keeps only the last of the snapshots it made current
        // in turn in `main`'s snapshot log, which `FOR TIMESTAMP AS OF` reads.
        builder = builder.build()?.metadata.into_builder(None);
    }
    let metadata = builder.build()?.metadata;
    let location =
        MetadataLocation::from_str(table.metadata_location_result()?)?.with_next_version();
    metadata.write_to(table.file_io(), &location).await?;
    let location = location.to_string();

    // The staging metadata files describe a history that is not the table's: remove them.
    let metadata_dir = warehouse
        .join(DEMO_NAMESPACE)
        .join(DEMO_TABLE)
        .join("metadata");
    let keep = location.rsplit('/').next().unwrap_or_default().to_string();
    for entry in std::fs::read_dir(&metadata_dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".metadata.json") && name != keep {
            std::fs::remove_file(entry.path())?;
        }
    }
    tracing::info!(
        snapshots = ?staged.iter().map(|s| s.snapshot_id()).collect::<Vec<_>>(),
        tag = DEMO_TAG,
        branch = DEMO_BRANCH,
        "demo table history: snapshots oldest first; the tag is on the first, the branch on the last"
    );
    Ok(location)
}

/// Appends `rows` of [`ROWS`] to `table` in one `fast_append` commit (the `n`th: data files
/// are named `demo-<n>-…`).
async fn append(
    catalog: &impl iceberg::Catalog,
    table: &Table,
    rows: std::ops::Range<usize>,
    n: usize,
) -> iceberg::Result<Table> {
    let arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(
        table.metadata().current_schema(),
    )?);
    let slice = &ROWS[rows.clone()];
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(
            (rows.start as i64 + 1)..=(rows.end as i64),
        )),
        Arc::new(StringArray::from_iter_values(slice.iter().map(|r| r.0))),
        Arc::new(Float64Array::from_iter_values(slice.iter().map(|r| r.1))),
        Arc::new(Int32Array::from(
            slice.iter().map(|r| r.2).collect::<Vec<_>>(),
        )),
        Arc::new(Date32Array::from(
            slice.iter().map(|r| r.3).collect::<Vec<_>>(),
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
        DefaultFileNameGenerator::new(format!("demo-{n}"), None, DataFileFormat::Parquet),
    );
    let mut writer = DataFileWriterBuilder::new(rolling).build(None).await?;
    writer.write(batch).await?;
    let files = writer.close().await?;

    let tx = Transaction::new(table);
    let tx = tx.fast_append().add_data_files(files).apply(tx)?;
    tx.commit(catalog).await
}
