//! `INSERT INTO` through DataFusion: tables created through Petrel's catalogs, rows written by
//! Petrel's writers (partitioned fan-out, rolling files, exact metrics) and committed as Iceberg
//! snapshots — then read back by Petrel, by PyIceberg, by Spark 3.5 + Iceberg 1.10 and by DuckDB's
//! iceberg extension (`tests/spark/read_back.py`), compared with the rows the statements inserted:
//! at every snapshot (time travel), with Spark's `manifests`, `partitions` and `entries` against a
//! model of the partition tuples; and Spark appending to a Petrel table, Petrel on top again.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use common::{
    duckdb_rows, pyiceberg_rows, query, read_back, read_back_with, result_rows, rows_json, session,
    single_i64, warehouse_with_db,
};
use datafusion::prelude::SessionContext;
use iceberg::spec::{
    FormatVersion, NestedField, PartitionSpec, PrimitiveType, Schema, SortOrder,
    TableMetadataBuilder, Transform, Type,
};
use petrel_table_provider::catalog::CachingCatalog;
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace, SqlCatalog, TableIdent};
use serde_json::Value;

fn field(id: i32, name: &str, ty: PrimitiveType, required: bool) -> Arc<NestedField> {
    let ty = Type::Primitive(ty);
    Arc::new(if required {
        NestedField::required(id, name, ty)
    } else {
        NestedField::optional(id, name, ty)
    })
}

/// Creates `db.<name>` with `fields`, partitioned by `partitions` (source column, transform;
/// the partition field is named after both: `k_bucket`, `ts_day`, `v_void`, ...).
pub(crate) async fn create(
    catalog: &dyn Catalog,
    name: &str,
    fields: Vec<Arc<NestedField>>,
    partitions: &[(&str, Transform)],
    version: FormatVersion,
    properties: &[(&str, &str)],
) {
    let schema = Schema::builder()
        .with_fields(fields)
        .build()
        .expect("schema");
    let mut spec = PartitionSpec::builder(schema.clone());
    for (column, transform) in partitions {
        let target = match transform {
            Transform::Identity => column.to_string(),
            Transform::Bucket(_) => format!("{column}_bucket"),
            Transform::Truncate(_) => format!("{column}_trunc"),
            Transform::Day => format!("{column}_day"),
            Transform::Month => format!("{column}_month"),
            Transform::Year => format!("{column}_year"),
            Transform::Hour => format!("{column}_hour"),
            Transform::Void => format!("{column}_void"),
            _ => format!("{column}_p"),
        };
        spec = spec
            .add_partition_field(*column, target, *transform)
            .expect("partition field");
    }
    let spec = spec.build().expect("spec");
    let ident = TableIdent::new(Namespace::new(vec!["db".into()]), name);
    let location = catalog
        .default_table_location(&ident)
        .await
        .expect("location");
    let props: HashMap<String, String> = properties
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let metadata = TableMetadataBuilder::new(
        schema,
        spec,
        SortOrder::unsorted_order(),
        location,
        version,
        props,
    )
    .expect("metadata builder")
    .build()
    .expect("metadata")
    .metadata;
    catalog
        .create_table(&ident, metadata)
        .await
        .expect("create table");
}

async fn run(ctx: &SessionContext, sql: &str) -> u64 {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let column = batches[0].column(0);
    column
        .as_any()
        .downcast_ref::<arrow::array::UInt64Array>()
        .unwrap_or_else(|| panic!("{sql}: count column"))
        .value(0)
}

/// The rows of `sql` as sorted JSON texts.
async fn rows(ctx: &SessionContext, sql: &str, types: &[&str]) -> Vec<String> {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let types: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    let mut out: Vec<String> = rows_json(&batches, &types)
        .into_iter()
        .map(|r| Value::Array(r).to_string())
        .collect();
    out.sort();
    out
}

const PARTED: &str = "iceberg.db.parted";

/// One inserted row of the scenario: id, s, ts (ISO, as every reader prints a `timestamp`), n.
type Row = (i64, Option<String>, String, i64);

/// The JSON array text of a model row: `[id, s, ts, n]`, or `[id, s, n]` without `ts`.
fn row_text((id, s, ts, n): &Row, with_ts: bool) -> String {
    if with_ts {
        serde_json::json!([id, s, ts, n]).to_string()
    } else {
        serde_json::json!([id, s, n]).to_string()
    }
}

/// The sorted texts of model rows.
fn texts(rows: &[Row], with_ts: bool) -> Vec<String> {
    let mut out: Vec<String> = rows.iter().map(|r| row_text(r, with_ts)).collect();
    out.sort();
    out
}

/// The statements of the scenario, run through `ctx`; returns the expected rows, in the order
/// inserted, and how many of them each statement had added once it committed.
async fn insert_scenario(ctx: &SessionContext) -> (Vec<Row>, Vec<usize>) {
    let mut model = Vec::new();
    let mut after = Vec::new();
    let specials = ["a/b=c d%", "日本", "x+y", "plain", "q?x#1"];
    let mut values = Vec::new();
    for i in 0..40i64 {
        let s = (i % 6 != 5).then(|| specials[(i % 6) as usize % specials.len()].to_string());
        let ts = format!("2024-0{}-1{} 0{}:00:00", 1 + i % 3, i % 10, i % 10);
        values.push(format!(
            "({i}, {}, TIMESTAMP '{ts}', {})",
            s.as_ref().map_or("NULL".into(), |s| format!("'{s}'")),
            i * 7
        ));
        model.push((i, s, ts.replace(' ', "T"), i * 7));
    }
    let n = run(
        ctx,
        &format!("INSERT INTO {PARTED} VALUES {}", values.join(", ")),
    )
    .await;
    assert_eq!(n, 40);
    after.push(model.len());
    // From the same table: every row again with new ids.
    let n = run(
        ctx,
        &format!("INSERT INTO {PARTED} SELECT id + 1000, s, ts, n FROM {PARTED}"),
    )
    .await;
    assert_eq!(n, 40);
    let copies: Vec<_> = model
        .iter()
        .map(|(i, s, ts, n)| (i + 1000, s.clone(), ts.clone(), *n))
        .collect();
    model.extend(copies);
    after.push(model.len());
    // Many rows: files roll at the table's small target size.
    let n = run(
        ctx,
        &format!(
            "INSERT INTO {PARTED} SELECT value + 5000, 'plain', TIMESTAMP '2024-02-02 02:00:00', value \
             FROM generate_series(1, 20000)"
        ),
    )
    .await;
    assert_eq!(n, 20000);
    model.extend((1..=20000).map(|v| {
        (
            v + 5000,
            Some("plain".to_string()),
            "2024-02-02T02:00:00".to_string(),
            v,
        )
    }));
    after.push(model.len());
    (model, after)
}

fn parted_fields() -> Vec<Arc<NestedField>> {
    vec![
        field(1, "id", PrimitiveType::Long, true),
        field(2, "s", PrimitiveType::String, false),
        field(3, "ts", PrimitiveType::Timestamp, false),
        field(4, "n", PrimitiveType::Long, false),
    ]
}

/// Petrel's rows of the scenario's table, checked against the model; returns them as
/// `[id, s, ts, n]` texts.
async fn check_scenario(ctx: &SessionContext, model: &[Row]) -> Vec<String> {
    let count = single_i64(
        &query(ctx, &format!("SELECT count(*) FROM {PARTED}"))
            .await
            .expect("count"),
    );
    assert_eq!(count as usize, model.len());
    let got = rows(
        ctx,
        &format!("SELECT id, s, ts, n FROM {PARTED}"),
        &["bigint", "string", "timestamp_ntz", "bigint"],
    )
    .await;
    assert_eq!(
        got,
        texts(model, true),
        "Petrel reads back what it inserted"
    );
    // Partition pruning works on what Petrel wrote.
    let sql = format!("SELECT count(*) FROM {PARTED} WHERE s = 'a/b=c d%'");
    let expected = model
        .iter()
        .filter(|(_, s, _, _)| s.as_deref() == Some("a/b=c d%"))
        .count();
    assert_eq!(
        single_i64(&query(ctx, &sql).await.expect("q")) as usize,
        expected
    );
    got
}

/// MurmurHash3 (x86, 32 bits, seed 0), the hash of Iceberg's bucket transform.
fn murmur3_32(data: &[u8]) -> u32 {
    let (c1, c2) = (0xcc9e_2d51_u32, 0x1b87_3593_u32);
    let mut h = 0u32;
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for chunk in chunks {
        let k = u32::from_le_bytes(chunk.try_into().expect("4 bytes"));
        h ^= k.wrapping_mul(c1).rotate_left(15).wrapping_mul(c2);
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    if !tail.is_empty() {
        let k = tail
            .iter()
            .enumerate()
            .fold(0u32, |k, (i, b)| k ^ (u32::from(*b) << (8 * i)));
        h ^= k.wrapping_mul(c1).rotate_left(15).wrapping_mul(c2);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Iceberg's `bucket[n]` of a long (the spec: murmur3 of the 8 little-endian bytes).
fn bucket_long(v: i64, n: i32) -> i32 {
    (murmur3_32(&v.to_le_bytes()) as i32 & i32::MAX) % n
}

/// The partition tuple of a scenario row under `(s, bucket[4](id), day(ts), truncate[100](n))`,
/// as Spark's metadata tables print it.
fn partition_of((id, s, ts, n): &Row) -> Value {
    serde_json::json!({
        "s": s,
        "id_bucket": bucket_long(*id, 4),
        "ts_day": &ts[..10],
        "n_trunc": n - n.rem_euclid(100),
    })
}

/// The partition summaries a manifest of `rows` must carry (Spark's `manifests` table prints the
/// bounds as the transforms' human strings).
fn partition_summaries(rows: &[Row]) -> Value {
    let tuples: Vec<Value> = rows.iter().map(partition_of).collect();
    let summary = |key: &str, numeric: bool| {
        let values: Vec<&Value> = tuples.iter().map(|t| &t[key]).collect();
        let present: Vec<&Value> = values.iter().copied().filter(|v| !v.is_null()).collect();
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let (lower, upper) = if numeric {
            let nums: Vec<i64> = present.iter().map(|v| v.as_i64().expect("int")).collect();
            (
                nums.iter().min().map(|v| v.to_string()),
                nums.iter().max().map(|v| v.to_string()),
            )
        } else {
            let strs: Vec<String> = present.iter().map(|v| text(v)).collect();
            (strs.iter().min().cloned(), strs.iter().max().cloned())
        };
        serde_json::json!({
            "contains_null": present.len() < values.len(),
            "contains_nan": false,
            "lower_bound": lower,
            "upper_bound": upper,
        })
    };
    serde_json::json!([
        summary("s", false),
        summary("id_bucket", true),
        summary("ts_day", false),
        summary("n_trunc", true)
    ])
}

#[test]
fn bucket_model_matches_the_spec() {
    // The Iceberg spec's reference values (Appendix B): hash(34L) = 2017239379.
    assert_eq!(murmur3_32(&34i64.to_le_bytes()), 2_017_239_379);
    assert_eq!(murmur3_32("iceberg".as_bytes()), 1_210_000_089);
}

/// The ids of a table's snapshots in commit order, as Petrel's catalog has them.
async fn snapshot_ids(catalog: &dyn Catalog, name: &str) -> Vec<i64> {
    let table = catalog
        .load_table(&TableIdent::new(Namespace::new(vec!["db".into()]), name))
        .await
        .expect("load");
    let mut snapshots: Vec<(i64, i64)> = table
        .metadata()
        .snapshots()
        .map(|s| (s.sequence_number(), s.snapshot_id()))
        .collect();
    snapshots.sort();
    snapshots.into_iter().map(|(_, id)| id).collect()
}

/// Spark's and DuckDB's rows of `seen` (a table `read_back` read) at each of `snapshots`, in
/// order, equal `model`'s first `after[k]` rows; columns `[id, s, ts, n]`.
fn assert_versions(what: &str, seen: &Value, snapshots: &[i64], model: &[Row], after: &[usize]) {
    let versions = seen["versions"].as_array().expect("versions");
    let ids: Vec<i64> = versions
        .iter()
        .map(|v| v["snapshot_id"].as_i64().expect("id"))
        .collect();
    assert_eq!(
        ids, snapshots,
        "{what}: Spark lists the snapshots Petrel made"
    );
    for (k, v) in versions.iter().enumerate() {
        let want = texts(&model[..after[k]], true);
        let columns = ["id", "s", "ts", "n"];
        assert_eq!(
            result_rows(&v["spark"], &columns),
            want,
            "{what}: Spark VERSION AS OF {}",
            ids[k]
        );
        assert!(v["duckdb_error"].is_null(), "{what}: {}", v["duckdb_error"]);
        assert_eq!(
            result_rows(&v["duckdb"], &columns),
            want,
            "{what}: DuckDB snapshot_from_id => {}",
            ids[k]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserts_commit_snapshots_that_petrel_pyiceberg_and_spark_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    create(
        catalog.as_ref(),
        "parted",
        parted_fields(),
        &[
            ("s", Transform::Identity),
            ("id", Transform::Bucket(4)),
            ("ts", Transform::Day),
            ("n", Transform::Truncate(100)),
        ],
        FormatVersion::V2,
        &[("write.target-file-size-bytes", "8192")],
    )
    .await;
    create(
        catalog.as_ref(),
        "lineage",
        parted_fields(),
        &[("s", Transform::Identity), ("ts", Transform::Month)],
        FormatVersion::V3,
        &[],
    )
    .await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let (model, after) = insert_scenario(&ctx).await;
    let petrel_rows = check_scenario(&ctx, &model).await;
    // Format 3: two appends into a table with row lineage.
    for _ in 0..2 {
        let n = run(
            &ctx,
            &format!("INSERT INTO iceberg.db.lineage SELECT * FROM {PARTED} WHERE id < 1000"),
        )
        .await;
        assert_eq!(n, 40);
    }
    let lineage_model: Vec<Row> = model[..40].iter().chain(&model[..40]).cloned().collect();
    let parted_snapshots = snapshot_ids(catalog.as_ref(), "parted").await;
    let lineage_snapshots = snapshot_ids(catalog.as_ref(), "lineage").await;

    let seen = read_back(&warehouse, &["parted", "lineage"]);
    let lineage = &seen["lineage"];
    assert_eq!(lineage["metric_mismatches"], serde_json::json!([]));
    assert_eq!(
        lineage["row_lineage"],
        serde_json::json!({"rows": 80, "row_ids": 80, "distinct": 80, "min": 0, "max": 79}),
        "Spark reads a distinct _row_id for every row"
    );
    let columns = ["id", "s", "ts", "n"];
    assert_eq!(
        result_rows(&lineage["spark"], &columns),
        texts(&lineage_model, true),
        "Spark reads the format-3 table's rows"
    );
    assert_eq!(
        duckdb_rows(lineage, &columns),
        texts(&lineage_model, true),
        "DuckDB reads the format-3 table's rows"
    );
    assert_versions(
        "lineage",
        lineage,
        &lineage_snapshots,
        &lineage_model,
        &[40, 80],
    );
    let parted = &seen["parted"];
    assert_eq!(
        parted["metric_mismatches"],
        serde_json::json!([]),
        "Spark finds every file's bounds and null counts true of its rows"
    );
    assert_eq!(parted["spark"]["count"].as_u64(), Some(model.len() as u64));
    assert_eq!(
        parted["pyiceberg"].as_array().map(Vec::len),
        Some(model.len())
    );
    assert_eq!(
        parted["snapshots"].as_array().map(Vec::len),
        Some(3),
        "one snapshot per INSERT"
    );
    for s in parted["snapshots"].as_array().expect("snapshots") {
        assert_eq!(s["operation"], "append");
    }
    let files = parted["files"].as_array().expect("files");
    assert!(
        files.len() > 20,
        "rolled and fanned out: {} files",
        files.len()
    );
    // Row for row, Spark, DuckDB and PyIceberg read what Petrel reads (and what was inserted).
    assert_eq!(
        result_rows(&parted["spark"], &columns),
        petrel_rows,
        "Spark reads Petrel's rows"
    );
    assert_eq!(
        duckdb_rows(parted, &columns),
        petrel_rows,
        "DuckDB reads Petrel's rows"
    );
    let pyiceberg = pyiceberg_rows(parted, &columns);
    assert_eq!(pyiceberg, petrel_rows, "PyIceberg reads Petrel's rows");
    // Spark sees the partition values Petrel wrote, special characters included.
    let special = files
        .iter()
        .filter(|f| f["partition"]["s"] == "a/b=c d%")
        .count();
    assert!(special > 0, "a partition with s = 'a/b=c d%': {files:?}");
    assert!(
        files.iter().any(|f| f["file_path"]
            .as_str()
            .is_some_and(|p| p.contains("/s=a%2Fb%3Dc+d%25/"))),
        "its directory is encoded as Iceberg Java encodes it"
    );

    // Time travel: each snapshot Petrel made holds the rows inserted up to its statement.
    assert_versions("parted", parted, &parted_snapshots, &model, &after);

    // Spark's `manifests`: one manifest per append (earlier ones carried over, not rewritten),
    // counting the files its entries add, with the partition summaries of its statement's rows.
    let manifests = parted["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 3, "{manifests:?}");
    let entries = parted["entries"].as_array().expect("entries");
    let mut start = 0;
    for (k, id) in parted_snapshots.iter().enumerate() {
        let statement = &model[start..after[k]];
        start = after[k];
        let manifest = manifests
            .iter()
            .find(|m| m["added_snapshot_id"].as_i64() == Some(*id))
            .unwrap_or_else(|| panic!("no manifest added by snapshot {id}: {manifests:?}"));
        assert_eq!(manifest["content"], 0, "a data manifest");
        let added = entries
            .iter()
            .find(|e| e["snapshot_id"].as_i64() == Some(*id) && e["status"] == 1)
            .and_then(|e| e["count"].as_u64())
            .expect("entries added by the snapshot");
        assert_eq!(
            manifest["added_data_files_count"].as_u64(),
            Some(added),
            "snapshot {id}: the manifest list counts the manifest's entries"
        );
        let partitions: BTreeSet<String> = statement
            .iter()
            .map(|r| partition_of(r).to_string())
            .collect();
        assert!(
            added as usize >= partitions.len(),
            "snapshot {id}: {added} files for {} partitions",
            partitions.len()
        );
        assert_eq!(manifest["existing_data_files_count"], 0, "snapshot {id}");
        assert_eq!(manifest["deleted_data_files_count"], 0, "snapshot {id}");
        assert_eq!(
            manifest["partition_summaries"],
            partition_summaries(statement),
            "snapshot {id}: partition summaries"
        );
    }
    assert_eq!(
        entries
            .iter()
            .map(|e| e["count"].as_u64().expect("count"))
            .sum::<u64>(),
        files.len() as u64,
        "every entry is a live data file: {entries:?}"
    );

    // Spark's `partitions`: every partition tuple of the model with its row count; as many
    // files as Spark's `files` lists there, at least one per statement that wrote to it.
    let mut expected: BTreeMap<String, (u64, BTreeSet<usize>)> = BTreeMap::new();
    let mut k = 0;
    for (i, row) in model.iter().enumerate() {
        while i >= after[k] {
            k += 1;
        }
        let entry = expected.entry(partition_of(row).to_string()).or_default();
        entry.0 += 1;
        entry.1.insert(k);
    }
    let partitions = parted["partitions"].as_array().expect("partitions");
    let listed: BTreeSet<String> = partitions
        .iter()
        .map(|p| p["partition"].to_string())
        .collect();
    assert_eq!(
        listed,
        expected.keys().cloned().collect::<BTreeSet<_>>(),
        "Spark's partitions are the model's"
    );
    for p in partitions {
        let key = p["partition"].to_string();
        let (records, statements) = &expected[&key];
        assert_eq!(p["record_count"].as_u64(), Some(*records), "{key}");
        let file_count = p["file_count"].as_u64().expect("file_count");
        let in_files = files
            .iter()
            .filter(|f| f["partition"] == p["partition"])
            .count() as u64;
        assert_eq!(file_count, in_files, "{key}: partitions and files agree");
        assert!(
            file_count >= statements.len() as u64,
            "{key}: {file_count} files, written by {} statements",
            statements.len()
        );
    }
}

/// Petrel creates and fills a partitioned table, Spark appends to it (`INSERT INTO … VALUES`),
/// Petrel reads both writers' rows and appends again, and Spark, DuckDB and PyIceberg read all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_appends_to_a_petrel_table_and_petrel_appends_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    create(
        catalog.as_ref(),
        "mixed",
        vec![
            field(1, "id", PrimitiveType::Long, true),
            field(2, "s", PrimitiveType::String, false),
            field(3, "ts", PrimitiveType::Timestamp, false),
            field(4, "n", PrimitiveType::Long, false),
        ],
        &[("s", Transform::Identity), ("id", Transform::Bucket(4))],
        FormatVersion::V2,
        &[],
    )
    .await;
    let table = "iceberg.db.mixed";
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let values = |rows: &[Row]| -> String {
        rows.iter()
            .map(|(id, s, ts, n)| {
                let s = s.as_ref().map_or("NULL".into(), |s| format!("'{s}'"));
                format!("({id}, {s}, TIMESTAMP '{}', {n})", ts.replace('T', " "))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let row = |id: i64, s: Option<&str>, n: i64| -> Row {
        (
            id,
            s.map(str::to_string),
            format!("2024-05-{:02}T{:02}:30:00", 1 + id % 28, id % 24),
            n,
        )
    };
    let petrel_first: Vec<Row> = (0..30)
        .map(|i| {
            row(
                i,
                [Some("petrel"), Some("a/b=c d%"), None][i as usize % 3],
                i * 3,
            )
        })
        .collect();
    assert_eq!(
        run(
            &ctx,
            &format!("INSERT INTO {table} VALUES {}", values(&petrel_first))
        )
        .await,
        30
    );
    // Spark's rows: into partitions Petrel already has and into a new one.
    let by_spark: Vec<Row> = (100..110)
        .map(|i| {
            row(
                i,
                [Some("spark"), Some("petrel"), None, Some("a/b=c d%")][i as usize % 4],
                -i,
            )
        })
        .collect();
    let spark_insert = format!("INSERT INTO {table} VALUES {}", values(&by_spark));
    let seen = read_back_with(&warehouse, &["mixed"], &[&spark_insert], false);
    let mut model: Vec<Row> = petrel_first.iter().chain(&by_spark).cloned().collect();
    let columns = ["id", "s", "ts", "n"];
    assert_eq!(
        result_rows(&seen["mixed"]["spark"], &columns),
        texts(&model, true),
        "Spark reads its rows and Petrel's"
    );

    // Petrel reads both writers' rows, and prunes by the partitions Spark wrote.
    let types = ["bigint", "string", "timestamp_ntz", "bigint"];
    let sql = format!("SELECT id, s, ts, n FROM {table}");
    assert_eq!(
        rows(&ctx, &sql, &types).await,
        texts(&model, true),
        "Petrel reads Spark's rows and its own"
    );
    let spark_only = format!("SELECT count(*) FROM {table} WHERE s = 'spark'");
    assert_eq!(
        single_i64(&query(&ctx, &spark_only).await.expect("count")),
        by_spark
            .iter()
            .filter(|r| r.1.as_deref() == Some("spark"))
            .count() as i64
    );
    // Petrel appends on top of Spark's snapshot.
    let petrel_again: Vec<Row> = (200..220)
        .map(|i| row(i, [Some("spark"), Some("later"), None][i as usize % 3], i))
        .collect();
    assert_eq!(
        run(
            &ctx,
            &format!("INSERT INTO {table} VALUES {}", values(&petrel_again))
        )
        .await,
        20
    );
    model.extend(petrel_again.iter().cloned());
    assert_eq!(rows(&ctx, &sql, &types).await, texts(&model, true));
    let snapshots = snapshot_ids(catalog.as_ref(), "mixed").await;
    assert_eq!(snapshots.len(), 3, "Petrel, Spark, Petrel");

    let seen = read_back(&warehouse, &["mixed"]);
    let mixed = &seen["mixed"];
    assert_eq!(mixed["metric_mismatches"], serde_json::json!([]));
    assert_eq!(result_rows(&mixed["spark"], &columns), texts(&model, true));
    assert_eq!(duckdb_rows(mixed, &columns), texts(&model, true));
    let pyiceberg = pyiceberg_rows(mixed, &columns);
    assert_eq!(pyiceberg, texts(&model, true), "PyIceberg reads all");
    let parents: Vec<(Value, Value)> = mixed["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| (s["snapshot_id"].clone(), s["parent_id"].clone()))
        .collect();
    assert_eq!(
        parents,
        [
            (snapshots[0].into(), Value::Null),
            (snapshots[1].into(), snapshots[0].into()),
            (snapshots[2].into(), snapshots[1].into()),
        ],
        "one line of history: Petrel's, Spark's on it, Petrel's on Spark's"
    );
    assert_versions("mixed", mixed, &snapshots, &model, &[30, 40, 60]);
}

/// 8 writers × 25 single-row INSERTs into one table at once: 200 rows, 200 snapshots, every
/// statement acknowledged — on both catalogs, and on the filesystem one behind a table cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_inserts_all_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let fs: Arc<dyn Catalog> =
        Arc::new(FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"));
    let sql: Arc<dyn Catalog> = Arc::new(
        SqlCatalog::open_sqlite(dir.path().join("catalog.db"), "petrel")
            .and_then(|c| c.with_warehouse(warehouse.join("sql").to_str().expect("utf8")))
            .expect("sql catalog"),
    );
    // The filesystem catalog again, behind a table cache (`table_cache_ms`) that every writer
    // shares, as a server's sessions do: stale bases conflict, and the retries still land.
    let cached_dir = warehouse.join("cached");
    std::fs::create_dir_all(&cached_dir).expect("mkdir");
    let cached: Arc<dyn Catalog> = Arc::new(CachingCatalog::new(
        Arc::new(FileSystemCatalog::new(cached_dir.to_str().expect("utf8")).expect("catalog")),
        std::time::Duration::from_secs(3600),
    ));
    for catalog in [fs, sql, cached] {
        catalog
            .create_namespace(&Namespace::new(vec!["db".into()]), true)
            .await
            .expect("namespace");
        create(
            catalog.as_ref(),
            "busy",
            vec![
                field(1, "writer", PrimitiveType::Int, true),
                field(2, "i", PrimitiveType::Int, true),
            ],
            &[],
            FormatVersion::V2,
            &[
                ("commit.retry.num-retries", "100"),
                ("commit.retry.min-wait-ms", "5"),
                ("commit.retry.max-wait-ms", "200"),
            ],
        )
        .await;
        let mut tasks = Vec::new();
        for writer in 0..8 {
            let catalog = Arc::clone(&catalog);
            tasks.push(tokio::spawn(async move {
                let ctx = session(vec![("iceberg", catalog)]);
                for i in 0..25 {
                    let n = run(
                        &ctx,
                        &format!("INSERT INTO iceberg.db.busy VALUES ({writer}, {i})"),
                    )
                    .await;
                    assert_eq!(n, 1);
                }
            }));
        }
        for task in tasks {
            task.await.expect("writer");
        }
        let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
        let count = single_i64(
            &query(
                &ctx,
                "SELECT count(DISTINCT (writer, i)) FROM iceberg.db.busy",
            )
            .await
            .expect("count"),
        );
        assert_eq!(count, 200);
        let table = catalog
            .load_table(&TableIdent::new(Namespace::new(vec!["db".into()]), "busy"))
            .await
            .expect("load");
        assert_eq!(table.metadata().snapshots().count(), 200, "{catalog:?}");
    }
}

/// Every file under `dir` but metadata, recursively (data files, and any staging leftovers).
fn data_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(data_files(&path));
            } else if !path.to_string_lossy().contains("/metadata/") {
                out.push(path);
            }
        }
    }
    out
}

/// Bad rows fail the statement with an error naming the problem, commit nothing and leave no
/// data file behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inserts_fail_clearly_and_leave_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    create(
        catalog.as_ref(),
        "strict",
        vec![
            field(1, "id", PrimitiveType::Long, true),
            field(
                2,
                "amount",
                PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                false,
            ),
            field(3, "s", PrimitiveType::String, false),
        ],
        &[("s", Transform::Identity)],
        FormatVersion::V2,
        &[("write.target-file-size-bytes", "4096")],
    )
    .await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let table = "iceberg.db.strict";
    assert_eq!(
        run(&ctx, &format!("INSERT INTO {table} VALUES (1, 1.50, 'a')")).await,
        1
    );
    let files_before = data_files(&warehouse);
    let ident = TableIdent::new(Namespace::new(vec!["db".into()]), "strict");
    let version = |t: &petrel_table_provider::LoadedTable| t.metadata_location().to_string();
    let before = version(&catalog.load_table(&ident).await.expect("load"));

    for (sql, expected) in [
        (
            format!("INSERT INTO {table} VALUES (2, 1.00, 'b'), (NULL, 2.00, 'c')"),
            "non-nullable",
        ),
        (
            format!("INSERT INTO {table} VALUES ('x', 1.00, 'b')"),
            "Cannot cast",
        ),
        (
            format!("INSERT INTO {table} VALUES (3, 123456789012.34, 'b')"),
            "too large to store in a Decimal128 of precision 10",
        ),
        (
            format!("INSERT INTO {table} (id, nope) VALUES (4, 1)"),
            "nope",
        ),
        (format!("INSERT INTO {table} VALUES (5)"), "expected 3"),
        // Fails at row 30,000, after files of earlier rows were written and closed.
        (
            format!(
                "INSERT INTO {table} SELECT CAST(CASE WHEN value = 30000 THEN 'x' \
                 ELSE CAST(value AS VARCHAR) END AS BIGINT), 1.00, 'g' || (value % 3) \
                 FROM generate_series(1, 40000)"
            ),
            "Cannot cast string 'x'",
        ),
    ] {
        let err = query(&ctx, &sql).await.expect_err(&sql).to_string();
        assert!(err.contains(expected), "{sql}: {err}");
        assert_eq!(
            data_files(&warehouse),
            files_before,
            "{sql} left files behind"
        );
        let now = catalog.load_table(&ident).await.expect("load");
        assert_eq!(version(&now), before, "{sql} committed");
    }
    let count = single_i64(
        &query(&ctx, &format!("SELECT count(*) FROM {table}"))
            .await
            .expect("count"),
    );
    assert_eq!(count, 1);
    // A column list may leave nullable columns out.
    assert_eq!(
        run(&ctx, &format!("INSERT INTO {table} (id) VALUES (6)")).await,
        1
    );
    let got = rows(
        &ctx,
        &format!("SELECT id, amount, s FROM {table}"),
        &["bigint", "decimal(10,2)", "string"],
    )
    .await;
    assert_eq!(got, [r#"[1,"1.50","a"]"#, r#"[6,null,null]"#]);
}
