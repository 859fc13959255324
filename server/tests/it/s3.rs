//! `petrel serve --warehouse s3://bucket/prefix` with nothing but the standard `AWS_*`
//! environment (issue #12): a real S3 server (moto, `common::moto`) holds a filesystem-layout
//! warehouse; the binary creates a table there, writes to it and answers queries over Flight
//! SQL, and the files are in the bucket (listed with boto3, not through Petrel).

use crate::common;

use arrow::array::{Array, Int64Array, StringArray};
use common::moto::Moto;
use common::{Petrel, query};
use petrel_table_provider::io::StoreRegistry;
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_an_s3_warehouse_from_the_aws_environment() {
    let moto = Moto::start();
    moto.create_bucket("petrel-wh");
    // The namespace, made by another client of the bucket.
    let stores = StoreRegistry::with_properties(&moto.properties()).expect("config");
    FileSystemCatalog::with_stores("s3://petrel-wh/prefix", stores)
        .expect("catalog")
        .create_namespace(&Namespace::new(vec!["db".into()]), false)
        .await
        .expect("namespace");

    let dir = tempfile::TempDir::new().expect("tempdir");
    let petrel =
        Petrel::start_with_env(dir, &["--warehouse", "s3://petrel-wh/prefix"], &moto.env());
    let mut client = petrel.client().await;
    for sql in [
        "CREATE TABLE iceberg.db.t (id BIGINT, name STRING)",
        "INSERT INTO iceberg.db.t VALUES (1, 'one'), (2, 'two'), (3, 'three')",
        "DELETE FROM iceberg.db.t WHERE id = 2",
    ] {
        query(&mut client, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", petrel.log()));
    }
    let batches = query(&mut client, "SELECT id, name FROM iceberg.db.t ORDER BY id")
        .await
        .expect("select");
    let mut rows = Vec::new();
    for b in &batches {
        let ids = b
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("ids");
        let names = b
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("names");
        for i in 0..b.num_rows() {
            rows.push((ids.value(i), names.value(i).to_string()));
        }
    }
    assert_eq!(rows, [(1, "one".to_string()), (3, "three".to_string())]);

    // The table's files are objects in the bucket, under the warehouse prefix.
    let listed = moto.python(
        "import sys, boto3\n\
         s3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1')\n\
         for o in s3.list_objects_v2(Bucket='petrel-wh', Prefix='prefix/db/t/')['Contents']:\n\
         \x20   print(o['Key'])",
        &[],
    );
    let keys: Vec<&str> = listed.lines().collect();
    assert!(
        keys.contains(&"prefix/db/t/metadata/v3.metadata.json"),
        "{keys:?}"
    );
    assert!(
        keys.iter()
            .any(|k| k.starts_with("prefix/db/t/data/") && k.ends_with(".parquet")),
        "{keys:?}"
    );
    let listed_schemas = query(&mut client, "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'iceberg' AND table_schema = 'db'")
        .await
        .expect("information_schema");
    let names = listed_schemas[0]
        .column(0)
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("names");
    assert_eq!(names.len(), 1);
    assert_eq!(names.value(0), "t");
}
