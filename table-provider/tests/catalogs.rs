//! Catalog listing over the fixture corpus (a moved Hadoop-layout warehouse), and through
//! DataFusion's catalog views.

mod common;

use std::sync::Arc;

use common::{corpus_dir, query, session};
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
