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
//! The table is made the way any Petrel table is: created through Petrel's SQL catalog
//! ([`SqlCatalog::create_table`], warehouse = the directory), each commit's rows written by
//! Petrel's own write path (a DataFusion `INSERT` into the catalog's table provider:
//! `IcebergWriteExec` → `IcebergCommitExec`, one snapshot on `main` per commit). A commit
//! stamps its snapshot with the current time and goes to `main`, so the final metadata is then
//! rebuilt with the `iceberg` crate's `TableMetadataBuilder`: the same table (uuid, location,
//! properties) and snapshots (ids, parents, sequence numbers, manifest lists) with fixed commit
//! times (so a `FOR TIMESTAMP AS OF` example gives the same answer on every machine), the
//! fourth moved from `main` to the branch `audit`, and the tag `v1`. It is committed through
//! the catalog's `commit_table`, and the earlier metadata files, which describe a history that
//! is not the table's, are deleted (every manifest and manifest list stays referenced).
//!
//! The catalog database is built as `catalog.db.partial` and renamed to `catalog.db` once the
//! table is complete: the table is created only when the catalog database does not exist yet,
//! and an existing directory is served as it is. Snapshot ids are random; the server logs them
//! when it creates the table.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Date32Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::prelude::SessionContext;
use iceberg::spec::{
    FormatVersion, MAIN_BRANCH, NestedField, PartitionSpec, PrimitiveType, Schema, Snapshot,
    SnapshotReference, SnapshotRetention, SortOrder, TableMetadataBuilder, Type,
};
use petrel_table_provider::IcebergCatalogProvider;
use petrel_table_provider::catalog::{Catalog, Namespace, SqlCatalog, TableIdent};

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
    let warehouse = abs.to_string_lossy().into_owned();
    // New tables (CREATE TABLE) go beside the demo: <dir>/<namespace>/<table>.
    let config = CatalogConfig::Sql {
        name: DEMO_CATALOG.into(),
        path: Some(db.clone()),
        uri: None,
        catalog_name: Some(DEMO_CATALOG.into()),
        warehouse: Some(warehouse.clone()),
        storage: Default::default(),
    };
    if db.exists() {
        return Ok(config);
    }
    // Built under another name, so that a `catalog.db` always holds the whole demo table.
    let partial = dir.join(format!("{CATALOG_FILE}.partial"));
    remove_if_present(&partial)?;
    let table_dir = abs.join(DEMO_NAMESPACE).join(DEMO_TABLE);
    let fresh_table_dir = !table_dir.exists();
    let written = write_demo_table(&partial, &warehouse).await;
    let snapshots = match written {
        Ok(snapshots) => snapshots,
        Err(e) => {
            // Best effort: the error says what went wrong, a retry starts from scratch.
            let _ = std::fs::remove_file(&partial);
            if fresh_table_dir {
                let _ = std::fs::remove_dir_all(&table_dir);
            }
            return Err(format!("creating the demo table in {}: {e}", abs.display()));
        }
    };
    std::fs::rename(&partial, &db)
        .map_err(|e| format!("renaming {} to {}: {e}", partial.display(), db.display()))?;
    tracing::info!(
        directory = %abs.display(),
        table = %format!("{DEMO_CATALOG}.{DEMO_NAMESPACE}.{DEMO_TABLE}"),
        snapshots = ?snapshots,
        tag = DEMO_TAG,
        branch = DEMO_BRANCH,
        "created the embedded default warehouse (demo snapshots oldest first; the tag is on the \
         first, the branch on the last)"
    );
    Ok(config)
}

/// Removes the file at `path` if there is one.
fn remove_if_present(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("removing {}: {e}", path.display())),
    }
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

/// Creates the demo table in a SQL catalog at `db` (warehouse `warehouse`), writes its history
/// through Petrel's `INSERT` path and commits the final metadata; returns the snapshot ids,
/// oldest first. Every handle on the database is closed when it returns.
async fn write_demo_table(db: &Path, warehouse: &str) -> Result<Vec<i64>, String> {
    let catalog = Arc::new(
        SqlCatalog::open_sqlite(db, DEMO_CATALOG)
            .and_then(|c| c.with_warehouse(warehouse))
            .map_err(|e| e.to_string())?,
    );
    let ns = Namespace::from_dotted(DEMO_NAMESPACE);
    let ident = TableIdent::new(ns.clone(), DEMO_TABLE);
    catalog
        .create_namespace(&ns)
        .await
        .map_err(|e| e.to_string())?;
    let location = catalog
        .default_table_location(&ident)
        .await
        .map_err(|e| e.to_string())?;
    let metadata = TableMetadataBuilder::new(
        demo_schema().map_err(|e| e.to_string())?,
        PartitionSpec::unpartition_spec(),
        SortOrder::unsorted_order(),
        location,
        FormatVersion::V2,
        Default::default(),
    )
    .and_then(|b| b.build())
    .map_err(|e| e.to_string())?
    .metadata;
    let created = catalog
        .create_table(&ident, metadata)
        .await
        .map_err(|e| e.to_string())?;

    // Every commit through Petrel's write path, on `main`.
    let ctx = SessionContext::new();
    ctx.register_catalog(
        DEMO_CATALOG,
        Arc::new(IcebergCatalogProvider::new(
            Arc::clone(&catalog) as Arc<dyn Catalog>
        )),
    );
    let table_name = format!("{DEMO_CATALOG}.{DEMO_NAMESPACE}.{DEMO_TABLE}");
    let arrow_schema = created.arrow_schema().map_err(|e| e.to_string())?;
    let mut snapshots = Vec::with_capacity(HISTORY.len());
    for commit in HISTORY {
        let batch = demo_batch(Arc::clone(&arrow_schema), commit.rows.clone())?;
        ctx.read_batch(batch)
            .map_err(|e| e.to_string())?
            .write_table(&table_name, DataFrameWriteOptions::new())
            .await
            .map_err(|e| e.to_string())?;
        let table = catalog
            .load_table(&ident)
            .await
            .map_err(|e| e.to_string())?;
        let snapshot = table
            .metadata()
            .current_snapshot()
            .ok_or("the INSERT left no snapshot")?;
        snapshots.push(snapshot.snapshot_id());
    }
    drop(ctx);

    // The final metadata: the same table and snapshots, at fixed times, on their branches,
    // plus the tag.
    let staged = catalog
        .load_table(&ident)
        .await
        .map_err(|e| e.to_string())?;
    let metadata = dated_history(staged.metadata(), &snapshots).map_err(|e| e.to_string())?;
    let committed = catalog
        .commit_table(&staged, metadata)
        .await
        .map_err(|e| e.to_string())?;

    // The earlier metadata files describe a history that is not the table's: delete them.
    let keep = file_name(committed.metadata_location());
    let metadata_dir = Path::new(warehouse)
        .join(DEMO_NAMESPACE)
        .join(DEMO_TABLE)
        .join("metadata");
    for entry in std::fs::read_dir(&metadata_dir)
        .map_err(|e| format!("{}: {e}", metadata_dir.display()))?
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".metadata.json") && name != keep {
            std::fs::remove_file(entry.path())
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
        }
    }
    Ok(snapshots)
}

/// The last segment of a location.
fn file_name(location: &str) -> &str {
    location.rsplit('/').next().unwrap_or(location)
}

/// `staged`'s table (uuid, location, schema, spec, properties) with the snapshots `ids` (of
/// [`HISTORY`], in order) at their fixed commit times, each on its branch, and the tag.
fn dated_history(
    staged: &iceberg::spec::TableMetadata,
    ids: &[i64],
) -> iceberg::Result<iceberg::spec::TableMetadata> {
    let unexpected = |message: &str| iceberg::Error::new(iceberg::ErrorKind::Unexpected, message);
    let mut builder = TableMetadataBuilder::new(
        staged.current_schema().as_ref().clone(),
        staged
            .default_partition_spec()
            .as_ref()
            .clone()
            .into_unbound(),
        staged.default_sort_order().as_ref().clone(),
        staged.location().to_string(),
        staged.format_version(),
        staged.properties().clone(),
    )?
    .assign_uuid(staged.uuid());
    for (commit, id) in HISTORY.iter().zip(ids) {
        let snapshot = staged
            .snapshot_by_id(*id)
            .ok_or_else(|| unexpected("a demo snapshot is missing"))?;
        let (y, m, d) = commit.date;
        let at = chrono::NaiveDate::from_ymd_opt(y, m, d)
            .and_then(|day| day.and_hms_opt(0, 0, 0))
            .map(|t| t.and_utc().timestamp_millis())
            .ok_or_else(|| unexpected("bad date"))?;
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
    Ok(builder.build()?.metadata)
}

/// The rows `rows` of [`ROWS`] as a batch of the table's Arrow schema.
fn demo_batch(
    schema: arrow::datatypes::SchemaRef,
    rows: std::ops::Range<usize>,
) -> Result<RecordBatch, String> {
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
    RecordBatch::try_new(schema, columns).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the demo table is referenced by its one metadata file: no staging
    /// metadata, no unreferenced manifest or manifest list, no partial catalog.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn demo_table_leaves_no_staging_files() {
        let dir = tempfile::tempdir().unwrap();
        ensure_embedded(dir.path()).await.unwrap();
        let names = |sub: &str| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(dir.path().join(sub))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        assert_eq!(names(""), vec![CATALOG_FILE.to_string(), "demo".into()]);
        let files = names("demo/seabirds/metadata");
        let json: Vec<_> = files
            .iter()
            .filter(|f| f.ends_with(".metadata.json"))
            .collect();
        assert_eq!(json.len(), 1, "{files:?}");
        let metadata: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.path().join("demo/seabirds/metadata").join(json[0])).unwrap(),
        )
        .unwrap();
        let snapshots = metadata["snapshots"].as_array().unwrap();
        assert_eq!(snapshots.len(), HISTORY.len());
        let mut lists: Vec<String> = snapshots
            .iter()
            .map(|s| file_name(s["manifest-list"].as_str().unwrap()).to_string())
            .collect();
        lists.sort();
        let listed: Vec<String> = files
            .iter()
            .filter(|f| f.starts_with("snap-"))
            .cloned()
            .collect();
        assert_eq!(listed, lists);
        // The manifests are exactly those the manifest lists name.
        let mut manifests = std::collections::BTreeSet::new();
        for list in &lists {
            let bytes =
                std::fs::read(dir.path().join("demo/seabirds/metadata").join(list)).unwrap();
            let list =
                iceberg::spec::ManifestList::parse_with_version(&bytes, FormatVersion::V2).unwrap();
            for m in list.entries() {
                manifests.insert(file_name(&m.manifest_path).to_string());
            }
        }
        let others: std::collections::BTreeSet<String> = files
            .iter()
            .filter(|f| !f.starts_with("snap-") && !f.ends_with(".metadata.json"))
            .cloned()
            .collect();
        assert_eq!(others, manifests);
        assert_eq!(manifests.len(), HISTORY.len());
        assert_eq!(names("demo/seabirds/data").len(), HISTORY.len());
        // An existing directory is served as it is.
        ensure_embedded(dir.path()).await.unwrap();
        assert_eq!(names("demo/seabirds/metadata"), files);
    }
}
