//! Vended S3 credentials through a real REST catalog: `rustberg` (built with its
//! `aws-credentials` feature by `scripts/install-rustberg.sh`) vends short-lived keys by STS
//! AssumeRole against moto, whose IAM authentication is on, so a request signed with any other
//! key is refused with 403.
//!
//! Petrel's own store settings for the catalog name the right endpoint but a key moto does not
//! know: every byte Petrel reads or writes goes through the keys rustberg vended for the table
//! (one store per table), and the same catalog with vending off fails, naming the table and the
//! bucket. With a short max age, a table kept loaded fetches new keys by reloading the table.
//!
//! Keys that really expire: moto (5.2.5) never checks the expiry of STS session keys, so
//! [`vended_keys_that_expire_are_replaced_and_queries_go_on`] and
//! [`keys_refused_again_after_a_refresh_give_one_error`] run moto with a patch that refuses
//! them after it, as AWS does (`common::moto`, `Moto::start_with_auth_and_expiry`).

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::moto::Moto;
use common::rustberg::{API_KEY, Rustberg};
use common::{query, run_ddl, session, sorted_rows};
use petrel_table_provider::io::{CountedStore, StoreConfig, StoreRegistry, object_store_requests};
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
    key_stores(moto, "AKIAPETRELWRONGKEY00", "not-a-secret-moto-knows")
}

/// Store settings for moto's endpoint with the key pair `key`, `secret`.
fn key_stores(moto: &Moto, key: &str, secret: &str) -> StoreRegistry {
    let settings: HashMap<String, String> = [
        ("s3.endpoint", moto.endpoint.as_str()),
        ("s3.access-key-id", key),
        ("s3.secret-access-key", secret),
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

/// Keys vended now for table `db.{table}` to a client other than Petrel (a `loadTable` with
/// vended credentials): `(key id, secret, session token)`.
fn vend_to_another_client(moto: &Moto, server: &Rustberg, table: &str) -> (String, String, String) {
    let out = moto.python(
        r#"
import json, sys, urllib.request
_, uri, token, table = sys.argv[1:5]
request = urllib.request.Request(f"{uri}/v1/namespaces/db/tables/{table}", headers={
    "Authorization": f"Bearer {token}", "X-Iceberg-Access-Delegation": "vended-credentials"})
answer = json.load(urllib.request.urlopen(request))
config = dict(answer.get("config") or {})
for credential in answer.get("storage-credentials") or []:
    config.update(credential["config"])
print(config["s3.access-key-id"], config["s3.secret-access-key"], config["s3.session-token"])
"#,
        &[&server.uri, API_KEY, table],
    );
    let mut words = out.split_whitespace().map(str::to_string);
    let mut next = || words.next().expect("a vended key, secret and token");
    (next(), next(), next())
}

/// Reads `key` of the bucket with `keys`: `ok`, or the S3 error code moto answered.
fn read_with(moto: &Moto, keys: &(String, String, String), key: &str) -> String {
    moto.python(
        r#"
import sys, boto3, botocore
endpoint, key_id, secret, token, bucket, key = sys.argv[1:7]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id=key_id, aws_secret_access_key=secret,
                  aws_session_token=token)
try:
    s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    print("ok")
except botocore.exceptions.ClientError as e:
    print(e.response["Error"]["Code"])
"#,
        &[&keys.0, &keys.1, &keys.2, BUCKET, key],
    )
    .trim()
    .to_string()
}

/// Vended keys that expire while Petrel uses them. Rustberg vends STS session keys lasting 6 s
/// (it passes any duration to STS; AWS's shortest is 900 s) and says nothing about when they
/// expire (no `s3.session-token-expires-at-ms`), and moto refuses them after that with
/// `ExpiredToken` (moto 5.2.5 itself never checks an STS key's expiry: this moto runs with the
/// patch of `Moto::start_with_auth_and_expiry`, which does, as AWS does). Petrel keeps them for
/// the default max age (10 minutes), far past their expiry, so only the refusal tells it: a
/// query planned with keys that then expire runs to the end, a table kept loaded reads on
/// (one refused GET, one fetch of new keys, the GET sent again), and a later INSERT and SELECT
/// work, while the keys another client was vended at the same time are refused: the expiry is
/// enforced, and it is Petrel's refresh on refusal that carries on (its refresh counters
/// moved).
///
/// The expiry-driven path (a vended `s3.session-token-expires-at-ms`) is covered by
/// `vended.rs`'s unit tests; the max-age path by
/// [`only_the_vended_keys_reach_the_bucket_and_they_are_refreshed`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vended_keys_that_expire_are_replaced_and_queries_go_on() {
    const LIFETIME: Duration = Duration::from_secs(6);
    let moto = Moto::start_with_auth_and_expiry(BUCKET);
    let Some(server) = Rustberg::start_vending_for(
        &moto,
        &format!("s3://{BUCKET}/wh"),
        LIFETIME.as_secs() as u32,
    ) else {
        return;
    };
    // The default max age: keys are used until S3 refuses them.
    let rest = RestCatalog::connect(config(&server, true, None), wrong_key_stores(&moto))
        .await
        .expect("connect");
    let catalog: Arc<dyn Catalog> = Arc::new(rest.clone());
    let db = Namespace::new(vec!["db".into()]);
    catalog.create_namespace(&db, false).await.expect("db");
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    run_ddl(&ctx, "CREATE TABLE iceberg.db.t (id BIGINT, name STRING)").await;
    query(&ctx, "INSERT INTO iceberg.db.t VALUES (1, 'a'), (2, 'b')")
        .await
        .expect("insert with the vended keys");
    let ident = TableIdent::new(db.clone(), "t");

    // A table kept loaded by another catalog (default max age too).
    let keeping = RestCatalog::connect(config(&server, true, None), wrong_key_stores(&moto))
        .await
        .expect("connect");
    let kept = keeping.load_table(&ident).await.expect("load");
    let metadata = kept.metadata_location().to_string();
    kept.io().read(&metadata).await.expect("fresh keys read");
    assert_eq!(keeping.vended_credential_refreshes(&ident), 0);

    // A query planned now (its table loaded with keys vended now), run after they expire.
    let frame = ctx
        .sql("SELECT id, name FROM iceberg.db.t")
        .await
        .expect("plan");
    let refreshes = rest.vended_credential_refreshes(&ident);
    // Another client's keys, vended after Petrel's.
    let other = vend_to_another_client(&moto, &server, "t");
    let key = metadata
        .strip_prefix(&format!("s3://{BUCKET}/"))
        .expect("in the bucket");
    assert_eq!(
        read_with(&moto, &other, key),
        "ok",
        "the other client's keys"
    );
    let vended = Instant::now();
    tokio::time::sleep(LIFETIME + Duration::from_millis(1_500)).await;
    assert!(vended.elapsed() > LIFETIME);

    assert_eq!(
        read_with(&moto, &other, key),
        "ExpiredToken",
        "the other client's keys, expired"
    );
    let requests = object_store_requests(CountedStore::Remote);
    let bytes = kept
        .io()
        .read(&metadata)
        .await
        .expect("keys kept past their expiry are replaced when refused");
    assert!(!bytes.is_empty());
    assert_eq!(
        keeping.vended_credential_refreshes(&ident),
        1,
        "one fetch of new keys"
    );
    // The refused GET and the GET with the new keys (other tests may add to the counter).
    assert!(
        object_store_requests(CountedStore::Remote)
            .since(&requests)
            .get
            >= 2
    );

    let batches = frame
        .collect()
        .await
        .expect("the planned query, after expiry");
    let mut rows: Vec<String> = common::rows_json(&batches, &[])
        .into_iter()
        .map(|r| serde_json::Value::Array(r).to_string())
        .collect();
    rows.sort();
    assert_eq!(rows, ["[1,\"a\"]", "[2,\"b\"]"]);
    assert!(
        rest.vended_credential_refreshes(&ident) > refreshes,
        "Petrel fetched new keys"
    );
    query(&ctx, "INSERT INTO iceberg.db.t VALUES (3, 'c')")
        .await
        .expect("insert after expiry");
    assert_eq!(
        sorted_rows(&ctx, "SELECT id, name FROM iceberg.db.t").await,
        ["[1,\"a\"]", "[2,\"b\"]", "[3,\"c\"]"]
    );
}

/// A store that refuses the new keys too: rustberg vends keys that have expired when moto
/// gets them (a session of 0 s), so each fetch brings keys S3 refuses. A read fails after one
/// fetch of new keys with one error naming the table, the bucket and S3's code (no loop, no
/// hang), and a query fails the same way in bounded time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_refused_again_after_a_refresh_give_one_error() {
    let moto = Moto::start_with_auth_and_expiry(BUCKET);
    let Some(server) = Rustberg::start_vending_for(&moto, &format!("s3://{BUCKET}/wh"), 0) else {
        return;
    };
    // Rows written with moto's own key pair (no vending).
    let writer = RestCatalog::connect(
        config(&server, false, None),
        key_stores(&moto, &moto.access_key, &moto.secret_key),
    )
    .await
    .expect("connect");
    let db = Namespace::new(vec!["db".into()]);
    writer.create_namespace(&db, false).await.expect("db");
    let ctx = session(vec![("iceberg", Arc::new(writer) as Arc<dyn Catalog>)]);
    run_ddl(&ctx, "CREATE TABLE iceberg.db.t (id BIGINT, name STRING)").await;
    query(&ctx, "INSERT INTO iceberg.db.t VALUES (1, 'a'), (2, 'b')")
        .await
        .expect("insert with moto's own key pair");

    let rest = RestCatalog::connect(config(&server, true, None), wrong_key_stores(&moto))
        .await
        .expect("connect");
    let ident = TableIdent::new(db.clone(), "t");
    let table = rest.load_table(&ident).await.expect("load");
    let err = tokio::time::timeout(
        Duration::from_secs(60),
        table.io().read(table.metadata_location()),
    )
    .await
    .expect("no hang")
    .expect_err("every key vended is refused")
    .to_string();
    assert!(
        err.contains("table db.t of REST catalog iceberg"),
        "names the table: {err}"
    );
    assert!(
        err.contains(&format!("s3://{BUCKET} at {}", moto.endpoint)),
        "names the store: {err}"
    );
    assert!(
        err.contains("refused (ExpiredToken), and so were the new ones"),
        "{err}"
    );
    assert_eq!(
        rest.vended_credential_refreshes(&ident),
        1,
        "one fetch of new keys, not a loop"
    );

    let ctx = session(vec![(
        "iceberg",
        Arc::new(rest.clone()) as Arc<dyn Catalog>,
    )]);
    let err = tokio::time::timeout(
        Duration::from_secs(60),
        query(&ctx, "SELECT id, name FROM iceberg.db.t"),
    )
    .await
    .expect("no hang")
    .expect_err("every key vended is refused")
    .to_string();
    assert!(err.contains("db.t"), "names the table: {err}");
    assert!(
        err.contains(&format!("s3://{BUCKET}")),
        "names the bucket: {err}"
    );
    assert!(err.contains("ExpiredToken"), "{err}");
    let refreshes = rest.vended_credential_refreshes(&ident);
    assert!(
        (2..=4).contains(&refreshes),
        "a fetch per refused request at most: {refreshes}"
    );
}
