//! Catalog listing over the fixture corpus (a moved Hadoop-layout warehouse), and through
//! DataFusion's catalog views.

use crate::common;

use std::sync::Arc;

use common::{copy_dir, corpus_dir, query, session, single_i64};
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace, TableIdent};

fn corpus_catalog() -> FileSystemCatalog {
    FileSystemCatalog::new(corpus_dir().join("warehouse").to_str().expect("utf8")).expect("catalog")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_catalog_lists_namespaces_and_tables() {
    let catalog = corpus_catalog();
    assert_eq!(
        catalog.list_namespaces().await.expect("namespaces"),
        vec![Namespace::from_dotted("db")]
    );
    let db = Namespace::from_dotted("db");
    let tables: Vec<String> = catalog
        .list_tables(&db)
        .await
        .expect("tables")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        tables,
        [
            "eq_sidequery",
            "eq_sidequery_part",
            "pyiceberg_cow",
            "v2_eq_java",
            "v2_evolved",
            "v2_mor",
            "v3_dv",
            "v3_eq_dv"
        ]
    );
    assert!(catalog.namespace_exists(&db).await.expect("exists"));
    assert!(
        !catalog
            .namespace_exists(&Namespace::from_dotted("db.v2_mor"))
            .await
            .expect("table is no namespace")
    );
    assert!(
        !catalog
            .namespace_exists(&Namespace::from_dotted("nope"))
            .await
            .expect("missing")
    );
    let err = catalog
        .load_table(&TableIdent::new(db.clone(), "nope"))
        .await
        .expect_err("missing table");
    assert!(err.is_not_found(), "{err}");
    // Moved table: the metadata says the origin, the catalog found it here.
    let table = catalog
        .load_table(&TableIdent::new(db, "v2_mor"))
        .await
        .expect("load");
    assert!(
        table
            .metadata()
            .location()
            .starts_with("/petrel-fixtures-origin/")
    );
    assert!(!table.io().locations().is_identity());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn information_schema_and_show_tables_see_the_catalog() {
    let ctx = session(vec![("iceberg", Arc::new(corpus_catalog()))]);
    let rows = query(
        &ctx,
        "SELECT table_schema, table_name FROM information_schema.tables \
         WHERE table_catalog = 'iceberg' AND table_schema = 'db' ORDER BY table_name",
    )
    .await
    .expect("information_schema");
    let n: usize = rows.iter().map(|b| b.num_rows()).sum();
    assert_eq!(n, 8);
    let cols = query(
        &ctx,
        "SELECT column_name, data_type FROM information_schema.columns \
         WHERE table_catalog = 'iceberg' AND table_name = 'v2_evolved' ORDER BY ordinal_position",
    )
    .await
    .expect("columns");
    let text = arrow::util::pretty::pretty_format_batches(&cols)
        .expect("fmt")
        .to_string();
    for expected in [
        "id",
        "label",
        "price",
        "ts",
        "note",
        "Int64",
        "Float64",
        "Timestamp(µs, \"UTC\")",
    ] {
        assert!(text.contains(expected), "{expected} missing from\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_catalog_finds_the_metadata_file_by_hint_name_and_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    let metadata = warehouse.join("db/pyiceberg_cow/metadata");
    copy_dir(
        &corpus_dir().join("warehouse/db/pyiceberg_cow"),
        &warehouse.join("db/pyiceberg_cow"),
    );
    let ident = TableIdent::new(Namespace::from_dotted("db"), "pyiceberg_cow".to_string());
    let current = || async {
        let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog");
        let table = catalog.load_table(&ident).await.expect("load");
        let location = table.metadata_location().to_string();
        location.rsplit('/').next().expect("name").to_string()
    };
    let hint = |file: &str, text: &str| {
        for name in ["version-hint.text", "version-hint.txt"] {
            let _ = std::fs::remove_file(metadata.join(name));
        }
        std::fs::write(metadata.join(file), text).expect("hint");
    };
    assert_eq!(current().await, "v7.metadata.json");
    // A stale hint: readers walk forward to the highest consecutive version (Java's refresh).
    hint("version-hint.text", "5\n");
    assert_eq!(current().await, "v7.metadata.json");
    hint("version-hint.txt", "6");
    assert_eq!(current().await, "v7.metadata.json");
    // Gzip-compressed metadata named by a numeric hint.
    let v7 = std::fs::read(metadata.join("v7.metadata.json")).expect("v7");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &v7).expect("gzip");
    std::fs::write(
        metadata.join("v7.gz.metadata.json"),
        gz.finish().expect("gzip"),
    )
    .expect("write");
    std::fs::remove_file(metadata.join("v7.metadata.json")).expect("rm v7");
    hint("version-hint.text", "7");
    assert_eq!(current().await, "v7.gz.metadata.json");
    // A hint holding a file name.
    let named = "00008-0a1b2c3d-1111-4222-8333-944455556666.metadata.json";
    std::fs::write(metadata.join(named), &v7).expect("write");
    hint("version-hint.text", named);
    assert_eq!(current().await, named);
    // A hint naming no file, and no hint at all: the highest version (8 here).
    hint("version-hint.text", "42");
    assert_eq!(current().await, named);
    std::fs::remove_file(metadata.join("version-hint.text")).expect("rm hint");
    assert_eq!(current().await, named);
    // The renamed copy of v7 reads v7's rows (2,910, as in the corpus's expected results).
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog");
    let ctx = session(vec![("iceberg", Arc::new(catalog))]);
    let rows = query(&ctx, "SELECT count(*) FROM iceberg.db.pyiceberg_cow")
        .await
        .expect("count");
    assert_eq!(single_i64(&rows), 2910);
}
