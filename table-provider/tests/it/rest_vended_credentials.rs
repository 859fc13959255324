//! Vended S3 credentials through a real REST catalog: `rustberg` (built with its
//! `aws-credentials` feature by `scripts/install-rustberg.sh`) vends short-lived keys by STS
//! AssumeRole against moto, whose IAM authentication is on, so a request signed with any other
//! key is refused with 403.
//!
//! Petrel's own store settings for the catalog name the right endpoint but a key moto does not
//! know: every byte Petrel reads or writes goes through the keys rustberg vended for the table
//! (one store per table), and the same catalog with vending off fails, naming the table and the
//! bucket. With a short max age, a table kept loaded fetches new keys by reloading the table.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::moto::Moto;
use common::rustberg::{API_KEY, Rustberg};
use common::{query, run_ddl, session, sorted_rows};
use petrel_table_provider::io::{StoreConfig, StoreRegistry};
use petrel_table_provider::{Catalog, Namespace, RestCatalog, RestCatalogConfig, TableIdent};

const BUCKET: &str = "vended";

/// Moto with authentication on, and rustberg vending credentials for `s3://vended/wh`.
fn servers() -> Option<(Moto, Rustberg)> {
    let moto = Moto::start_with_auth(BUCKET);
    let server = Rustberg::start_vending(&moto, &format!("s3://{BUCKET}/wh"))?;
    Some((moto, server))
}

/// Petrel's store settings for the catalog: moto's endpoint, a key moto does not know.
fn wrong_key_stores(moto: &Moto) -> StoreRegistry {
    let settings: HashMap<String, String> = [
        ("s3.endpoint", moto.endpoint.as_str()),
        ("s3.access-key-id", "AKIAPETRELWRONGKEY00"),
        ("s3.secret-access-key", "not-a-secret-moto-knows"),
        ("s3.path-style-access", "true"),
        ("client.region", "us-east-1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    StoreRegistry::new(StoreConfig::from_settings(&settings).expect("settings"))
}

fn config(server: &Rustberg, vended: bool, max_age_ms: Option<u64>) -> RestCatalogConfig {
    let mut config = RestCatalogConfig::new("iceberg", &server.uri);
    config.token = Some(API_KEY.to_string());
    config.vended_credentials = vended;
    if let Some(ms) = max_age_ms {
        config.properties.insert(
            "petrel.vended-credentials-max-age-ms".into(),
            ms.to_string(),
        );
    }
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_vended_keys_reach_the_bucket_and_they_are_refreshed() {
    let Some((moto, server)) = servers() else {
        return;
    };
    let rest = RestCatalog::connect(config(&server, true, Some(1_500)), wrong_key_stores(&moto))
        .await
        .expect("connect");
    let catalog: Arc<dyn Catalog> = Arc::new(rest.clone());
    let db = Namespace::new(vec!["db".into()]);
    catalog.create_namespace(&db, false).await.expect("db");
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    run_ddl(&ctx, "CREATE TABLE iceberg.db.t (id BIGINT, name STRING)").await;
    query(
        &ctx,
        "INSERT INTO iceberg.db.t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    )
    .await
    .expect("insert with the vended keys");
    query(&ctx, "INSERT INTO iceberg.db.t VALUES (4, 'd')")
        .await
        .expect("second insert");
    assert_eq!(
        sorted_rows(&ctx, "SELECT id, name FROM iceberg.db.t").await,
        ["[1,\"a\"]", "[2,\"b\"]", "[3,\"c\"]", "[4,\"d\"]"]
    );
    // The data files Petrel wrote are in the bucket, under the table's location.
    let listed = moto.python(
        r#"
import sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
keys = [o["Key"] for o in s3.list_objects_v2(Bucket=sys.argv[2], Prefix="wh/db/t/data/")["Contents"]]
print(sum(k.endswith(".parquet") for k in keys))
"#,
        &[BUCKET],
    );
    assert_eq!(listed.trim(), "2", "one data file per INSERT");

    // A table kept loaded past the keys' max age (no expiry vended: rustberg sends none)
    // fetches new keys by reloading the table, and keeps reading.
    let ident = TableIdent::new(db.clone(), "t");
    let table = catalog.load_table(&ident).await.expect("load");
    let before = rest.vended_credential_refreshes(&ident);
    table
        .io()
        .read(table.metadata_location())
        .await
        .expect("read with the vended keys");
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    table
        .io()
        .read(table.metadata_location())
        .await
        .expect("read after the keys' max age");
    assert_eq!(rest.vended_credential_refreshes(&ident), before + 1);

    // Without vending, the catalog's own (wrong) key is refused: an error naming the table
    // and the bucket.
    let plain = RestCatalog::connect(config(&server, false, None), wrong_key_stores(&moto))
        .await
        .expect("connect");
    let ctx = session(vec![("iceberg", Arc::new(plain) as Arc<dyn Catalog>)]);
    let err = query(&ctx, "SELECT id FROM iceberg.db.t")
        .await
        .expect_err("the catalog's own key is wrong")
        .to_string();
    assert!(err.contains("db.t"), "names the table: {err}");
    assert!(
        err.contains(&format!("s3://{BUCKET}")),
        "names the bucket: {err}"
    );
}
