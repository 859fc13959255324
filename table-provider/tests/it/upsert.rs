//! Upserts (identifier fields + `write.upsert.enabled=true`): every INSERT replaces the rows with
//! the keys it writes, through equality-delete files on the key committed with the new data
//! files, as Flink's delta writer does. Changelogs of random operations (1,000,000 over 100,000
//! keys on one table, smaller ones on the others; partitioned by a bucket of the key or by a key
//! column, unpartitioned; format 2 and 3; filesystem and SQL catalogs) end equal to a model
//! (key → last row) in Petrel, then in Spark 3.5 + Iceberg 1.10 and DuckDB 1.5.5 (PyIceberg
//! 0.12 does not read equality deletes); Spark's `files` shows the equality-delete files with the
//! key's field ids and only key columns. Within one statement a repeated key keeps its last row;
//! its rows count against the memory pool. After upserts, a scan extends the equality-deleted
//! positions recorded before them by the new groups only (key columns read, or kept in the
//! decoded-column cache), and records again when files are four or more commits behind.
//! Refused: a partition column outside the key, upserts without identifier fields, INSERT
//! OVERWRITE; a failed upsert leaves no file and no snapshot.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use common::{duckdb_rows, query, result_rows, rows_json, run_ddl, session, spark_script};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use petrel_table_provider::{
    Catalog, ColumnCache, FileSystemCatalog, Namespace, ScanPlanner, SqlCatalog, TableIdent,
};
use serde_json::{Value, json};

/// Deterministic pseudo-random numbers (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

const REGIONS: [&str; 3] = ["eu", "us", "ap"];

/// One operation of a changelog: the row `(id, region, name, v)`.
type Row = (i64, String, Option<String>, i64);

/// A table under test and its model.
struct Case {
    /// `catalog.db.name` in the session.
    table: String,
    /// Whether the key is `(id, region)` (else `id`, with region a function of id).
    composite: bool,
    keys: u64,
    model: HashMap<(i64, String), Row>,
    next_op: i64,
}

impl Case {
    fn new(table: &str, composite: bool, keys: u64) -> Self {
        Self {
            table: table.to_string(),
            composite,
            keys,
            model: HashMap::new(),
            next_op: 0,
        }
    }

    /// `n` operations of the changelog, applied to the model.
    fn batch(&mut self, rng: &mut Rng, n: usize) -> RecordBatch {
        let mut rows = Vec::with_capacity(n);
        for _ in 0..n {
            let id = (rng.next() % self.keys) as i64;
            let region = if self.composite {
                REGIONS[(rng.next() % 3) as usize]
            } else {
                REGIONS[(id % 3) as usize]
            };
            let op = self.next_op;
            self.next_op += 1;
            let name = (op % 7 != 0).then(|| format!("n{op}"));
            let row: Row = (id, region.to_string(), name, op);
            self.model.insert((id, region.to_string()), row.clone());
            rows.push(row);
        }
        to_batch(&rows)
    }

    fn model_rows(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .model
            .values()
            .map(|(id, region, name, v)| json!([id, region, name, v]).to_string())
            .collect();
        out.sort();
        out
    }
}

fn to_batch(rows: &[Row]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("v", DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.1))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.2.as_deref()))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
        ],
    )
    .expect("batch")
}

/// A session whose single-stream inputs stay one ordered stream (no round-robin spreading):
/// "the last row of a key" is then the last in the source's order.
async fn ordered_session(catalogs: Vec<(&str, Arc<dyn Catalog>)>) -> SessionContext {
    ordered(session(catalogs)).await
}

/// `ctx` with its single-stream inputs kept one ordered stream ([`ordered_session`]).
async fn ordered(ctx: SessionContext) -> SessionContext {
    ctx.sql("SET datafusion.optimizer.enable_round_robin_repartition = false")
        .await
        .expect("set")
        .collect()
        .await
        .expect("set");
    ctx
}

/// `INSERT INTO table SELECT * FROM <batch>`; returns the count.
async fn insert_batch(ctx: &SessionContext, table: &str, batch: RecordBatch) -> u64 {
    ctx.register_batch("src", batch).expect("register");
    let sql = format!("INSERT INTO {table} SELECT id, region, name, v FROM src");
    let result = query(ctx, &sql).await;
    ctx.deregister_table("src").expect("deregister");
    let batches = result.unwrap_or_else(|e| panic!("{sql}: {e}"));
    batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::UInt64Array>()
        .expect("count")
        .value(0)
}

async fn petrel_rows(ctx: &SessionContext, table: &str) -> Vec<String> {
    let sql = format!("SELECT id, region, name, v FROM {table}");
    let batches = query(ctx, &sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out: Vec<String> = rows_json(&batches, &[])
        .into_iter()
        .map(|r| Value::Array(r).to_string())
        .collect();
    out.sort();
    out
}

fn ident(name: &str) -> TableIdent {
    TableIdent::new(Namespace::new(vec!["db".into()]), name)
}

fn create_sql(table: &str, key: &str, partitioned_by: &str, version: u8, upsert: bool) -> String {
    let partitioning = if partitioned_by.is_empty() {
        String::new()
    } else {
        format!(" PARTITIONED BY ({partitioned_by})")
    };
    let upsert = if upsert {
        ", 'write.upsert.enabled'='true'"
    } else {
        ""
    };
    format!(
        "CREATE TABLE {table} (id BIGINT NOT NULL, region STRING NOT NULL, name STRING, \
         v BIGINT NOT NULL, PRIMARY KEY ({key})) USING iceberg{partitioning} \
         TBLPROPERTIES ('format-version'='{version}'{upsert})"
    )
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changelogs_end_equal_to_the_model_in_petrel_spark_and_duckdb() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let fs: Arc<dyn Catalog> = Arc::new(
        FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("filesystem catalog"),
    );
    let sql: Arc<dyn Catalog> = Arc::new(
        SqlCatalog::open_sqlite(dir.path().join("catalog.db"), "petrel")
            .and_then(|c| c.with_warehouse(dir.path().join("sqlwh").to_str().expect("utf8")))
            .expect("sql catalog"),
    );
    let ctx = ordered_session(vec![
        ("iceberg", Arc::clone(&fs)),
        ("lake", Arc::clone(&sql)),
    ])
    .await;
    run_ddl(&ctx, "CREATE SCHEMA iceberg.db").await;
    run_ddl(&ctx, "CREATE SCHEMA lake.db").await;
    // (case, CREATE TABLE, statements, operations per statement)
    let mut cases = vec![
        (
            Case::new("iceberg.db.big", false, 100_000),
            create_sql("iceberg.db.big", "id", "bucket(8, id)", 2, true),
            10,
            100_000,
        ),
        (
            Case::new("iceberg.db.flat_v3", false, 1_000),
            create_sql("iceberg.db.flat_v3", "id", "", 3, true),
            4,
            2_000,
        ),
        (
            Case::new("lake.db.region_v3", true, 600),
            create_sql("lake.db.region_v3", "id, region", "region", 3, true),
            4,
            2_000,
        ),
        (
            Case::new("lake.db.flat_v2", true, 600),
            create_sql("lake.db.flat_v2", "region, id", "", 2, true),
            4,
            2_000,
        ),
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for (case, create, statements, ops) in &mut cases {
        run_ddl(&ctx, create).await;
        let started = Instant::now();
        for _ in 0..*statements {
            let batch = case.batch(&mut rng, *ops);
            let mut distinct: Vec<(i64, String)> = Vec::new();
            let ids = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("id");
            let regions = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .expect("r");
            for i in 0..batch.num_rows() {
                distinct.push((ids.value(i), regions.value(i).to_string()));
            }
            distinct.sort();
            distinct.dedup();
            // The count is the rows written: each key of the statement once.
            assert_eq!(
                insert_batch(&ctx, &case.table, batch).await,
                distinct.len() as u64,
                "{}",
                case.table
            );
        }
        eprintln!(
            "{}: {} upserts of {} operations in {:.1?}",
            case.table,
            statements,
            ops,
            started.elapsed()
        );
        assert_eq!(
            petrel_rows(&ctx, &case.table).await,
            case.model_rows(),
            "{} read by Petrel",
            case.table
        );
    }

    // Every upsert is an overwrite adding equality deletes.
    let big = fs.load_table(&ident("big")).await.expect("big");
    let mut snapshots: Vec<_> = big.metadata().snapshots().collect();
    snapshots.sort_by_key(|s| s.sequence_number());
    assert_eq!(snapshots.len(), 10);
    for s in &snapshots {
        assert_eq!(s.summary().operation, iceberg::spec::Operation::Overwrite);
        let props = &s.summary().additional_properties;
        // One equality-delete file per data file: per writer task and bucket.
        assert_eq!(
            props.get("added-equality-delete-files"),
            props.get("added-data-files"),
            "{props:?}"
        );
        assert_eq!(
            props.get("changed-partition-count").map(String::as_str),
            Some("8")
        );
    }

    // Spark, DuckDB and PyIceberg: the SQL catalog's tables by metadata path.
    let mut specs: Vec<String> = vec!["big".into(), "flat_v3".into()];
    for name in ["region_v3", "flat_v2"] {
        let t = sql.load_table(&ident(name)).await.expect("load");
        specs.push(format!("{name}={}", t.metadata_location()));
    }
    // DuckDB 1.5.5 reads equality deletes correctly but slowly (about 6 minutes for `big`'s
    // 320 delete files): `big` is read by Spark only, the other tables by every engine.
    let mut args: Vec<std::ffi::OsString> = vec![
        "--no-versions".into(),
        "--light".into(),
        "big".into(),
        warehouse.clone().into(),
    ];
    args.extend(specs.iter().map(Into::into));
    let seen = spark_script("read_back.py", &args);
    let columns = ["id", "region", "name", "v"];
    for (case, _, _, _) in &cases {
        let name = case.table.rsplit('.').next().expect("name");
        let t = &seen[name];
        assert_eq!(
            result_rows(&t["spark"], &columns),
            case.model_rows(),
            "Spark {name}"
        );
        if name != "big" {
            assert_eq!(duckdb_rows(t, &columns), case.model_rows(), "DuckDB {name}");
        }
        // PyIceberg 0.12 refuses to read equality deletes.
        assert!(
            t["pyiceberg_error"]
                .as_str()
                .is_some_and(|e| e.contains("does not yet support equality deletes")),
            "PyIceberg on {name}: {}",
            t["pyiceberg_error"]
        );
        // Spark's `files`: equality-delete files (content 2) on the key's field ids (id is 1,
        // region 2), holding only key columns.
        let key_ids = if case.composite {
            json!([1, 2])
        } else {
            json!([1])
        };
        let files = t["files"].as_array().expect("files");
        let deletes: Vec<&Value> = files.iter().filter(|f| f["content"] == json!(2)).collect();
        assert!(
            !deletes.is_empty(),
            "{name}: no equality-delete files in {files:?}"
        );
        for f in &deletes {
            assert_eq!(f["equality_ids"], key_ids, "{name}: {f}");
            let counted: Vec<&String> = f["value_counts"]
                .as_object()
                .map(|m| m.keys().collect())
                .unwrap_or_default();
            assert_eq!(
                counted.len(),
                key_ids.as_array().map_or(0, Vec::len),
                "{name}: {f}"
            );
        }
        assert!(
            files.iter().all(|f| f["content"] != json!(1)),
            "{name}: no position deletes expected"
        );
    }

    // Compaction applies every equality delete: afterwards no delete file remains and the rows
    // are unchanged.
    for (case, _, _, _) in &cases {
        let (catalog_name, rest) = case.table.split_once('.').expect("catalog");
        let call = format!(
            "CALL {catalog_name}.system.rewrite_data_files(table => '{rest}', \
             options => map('rewrite-all', 'true'))"
        );
        query(&ctx, &call)
            .await
            .unwrap_or_else(|e| panic!("{call}: {e}"));
        assert_eq!(
            petrel_rows(&ctx, &case.table).await,
            case.model_rows(),
            "{} after rewrite_data_files",
            case.table
        );
        let name = rest.rsplit('.').next().expect("name");
        let catalog = if catalog_name == "iceberg" { &fs } else { &sql };
        let table = catalog.load_table(&ident(name)).await.expect("load");
        let summary = &table
            .metadata()
            .current_snapshot()
            .expect("a snapshot")
            .summary()
            .additional_properties;
        assert_eq!(
            summary.get("total-delete-files").map(String::as_str),
            Some("0"),
            "{}: {summary:?}",
            case.table
        );
        assert_eq!(
            summary.get("total-equality-deletes").map(String::as_str),
            Some("0"),
            "{}: {summary:?}",
            case.table
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_upserts_probe_their_groups_joined_with_the_models_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_warehouse, catalog) = common::warehouse_with_db(dir.path()).await;
    let ctx = ordered_session(vec![("iceberg", catalog as Arc<dyn Catalog>)]).await;
    // A long key on an unpartitioned table; a composite key on a table partitioned by one of
    // its columns, whose groups apply each to its own partition's files only.
    for (name, key, partitioned_by, composite) in [
        ("ids", "id", "", false),
        ("pairs", "id, region", "region", true),
    ] {
        let table = format!("iceberg.db.{name}");
        run_ddl(&ctx, &create_sql(&table, key, partitioned_by, 2, true)).await;
        let mut case = Case::new(&table, composite, 50);
        let mut rng = Rng(0x5eed_0000 + name.len() as u64);
        let mut joined_at = Vec::new();
        for _ in 0..8 {
            insert_batch(&ctx, &table, case.batch(&mut rng, 20)).await;
            let want = case.model_rows();
            // Filtered: every batch probed against the sets.
            let filtered = format!("SELECT id, region, name, v FROM {table} WHERE v >= 0");
            let (plan, batches) = common::run_plan(&ctx, &filtered).await;
            let mut rows: Vec<String> = rows_json(&batches, &[])
                .into_iter()
                .map(|r| Value::Array(r).to_string())
                .collect();
            rows.sort();
            assert_eq!(rows, want, "{filtered}");
            let metrics = common::find_scan(&plan)
                .and_then(|scan| scan.metrics())
                .expect("scan metrics");
            let count = |name: &str| metrics.sum_by_name(name).map_or(0, |v| v.as_usize());
            // Each upsert commits one group per partition it writes (one file each); the
            // scan joins them once it has four (the oldest commit's applies to no file).
            let groups = count("delete_files_equality");
            let joined = count("equality_groups_joined");
            assert_eq!(
                joined,
                if groups >= 4 { groups } else { 0 },
                "{groups} groups"
            );
            joined_at.push(joined);
            // Unfiltered: probed while the positions are recorded, then from them.
            for _ in 0..2 {
                assert_eq!(petrel_rows(&ctx, &table).await, want, "{table}");
            }
        }
        let last = if composite { 21 } else { 7 };
        assert_eq!(joined_at.last(), Some(&last), "{table}: {joined_at:?}");
    }
}

/// The unfiltered scan of `table`'s rows, checked against `case`'s model, and the scan's
/// count of each of `names`.
async fn model_scan(ctx: &SessionContext, case: &Case, names: &[&str]) -> Vec<usize> {
    let sql = format!("SELECT id, region, name, v FROM {}", case.table);
    let (plan, batches) = common::run_plan(ctx, &sql).await;
    let mut rows: Vec<String> = rows_json(&batches, &[])
        .into_iter()
        .map(|r| Value::Array(r).to_string())
        .collect();
    rows.sort();
    assert_eq!(rows, case.model_rows(), "{sql}");
    let metrics = common::find_scan(&plan)
        .and_then(|scan| scan.metrics())
        .expect("scan metrics");
    names
        .iter()
        .map(|name| metrics.sum_by_name(name).map_or(0, |v| v.as_usize()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upserts_extend_the_positions_recorded_before_them() {
    const COUNTS: [&str; 4] = [
        "equality_positions_extended",
        "equality_positions_recorded",
        "equality_positions_cached",
        "equality_key_columns_cached",
    ];
    // Without the decoded-column cache (key columns read at every extension) and with it (as
    // the server runs: kept from one commit's extension to the next).
    for column_cache in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_warehouse, catalog) = common::warehouse_with_db(dir.path()).await;
        let catalogs = vec![("iceberg", catalog as Arc<dyn Catalog>)];
        let ctx = if column_cache {
            let cache = ColumnCache::new(1 << 30);
            let planner = Arc::new(ScanPlanner::default().with_column_cache(cache));
            ordered(common::session_with_planner(catalogs, planner)).await
        } else {
            ordered_session(catalogs).await
        };
        // A long key on an unpartitioned table; a composite key on a table partitioned by one
        // of its columns (its key columns are a long and a string: sets in arrow's row format).
        for (name, key, partitioned_by, composite) in [
            ("ids", "id", "", false),
            ("pairs", "id, region", "region", true),
        ] {
            let table = format!("iceberg.db.{name}");
            let at = |step: &str| format!("{table}, column cache {column_cache}: {step}");
            run_ddl(&ctx, &create_sql(&table, key, partitioned_by, 2, true)).await;
            let mut case = Case::new(&table, composite, 400);
            let mut rng = Rng(0xe7e7_0000 + name.len() as u64);
            for _ in 0..3 {
                insert_batch(&ctx, &table, case.batch(&mut rng, 300)).await;
            }
            // The first scan records every file's positions, the next finds them.
            let [extended, recorded, _, _] = model_scan(&ctx, &case, &COUNTS).await[..] else {
                unreachable!()
            };
            assert_eq!((extended, recorded > 0), (0, true), "{}", at("first scan"));
            let [extended, recorded, cached, _] = model_scan(&ctx, &case, &COUNTS).await[..] else {
                unreachable!()
            };
            assert_eq!((extended, recorded), (0, 0), "{}", at("second scan"));
            assert!(cached > 0, "{}", at("second scan"));
            // Upserts then a scan: the files' positions are extended by the new groups, one
            // commit or two behind; from the second extension on, the files extended before
            // find their key columns kept.
            let mut keys_cached = Vec::new();
            for upserts in [1, 2, 1, 3, 1] {
                for _ in 0..upserts {
                    insert_batch(&ctx, &table, case.batch(&mut rng, 20)).await;
                }
                let step = format!("after {upserts} upsert(s)");
                let [extended, recorded, cached, from_cache] =
                    model_scan(&ctx, &case, &COUNTS).await[..]
                else {
                    unreachable!()
                };
                assert_eq!(recorded, 0, "{}", at(&step));
                assert!(
                    extended > 0 && extended <= cached && from_cache <= extended,
                    "{}: {extended} extended, {cached} cached, {from_cache} keys cached",
                    at(&step)
                );
                keys_cached.push(from_cache);
                let [extended, recorded, _, _] = model_scan(&ctx, &case, &COUNTS).await[..] else {
                    unreachable!()
                };
                assert_eq!((extended, recorded), (0, 0), "{}", at("repeated"));
            }
            if column_cache {
                assert_eq!(keys_cached[0], 0, "{}: {keys_cached:?}", at("key columns"));
                assert!(
                    keys_cached[1..].iter().all(|n| *n > 0),
                    "{}: {keys_cached:?}",
                    at("key columns")
                );
            } else {
                assert_eq!(keys_cached, [0; 5], "{}", at("key columns"));
            }
            // Rows deleted by position too: files with both kinds of deletes are extended
            // alike (their equality positions are probed over every row).
            let sql = format!("DELETE FROM {table} WHERE id % 7 = 0");
            query(&ctx, &sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            case.model.retain(|(id, _), _| id % 7 != 0);
            model_scan(&ctx, &case, &COUNTS).await;
            insert_batch(&ctx, &table, case.batch(&mut rng, 20)).await;
            let [extended, recorded, _, _] = model_scan(&ctx, &case, &COUNTS).await[..] else {
                unreachable!()
            };
            assert_eq!(recorded, 0, "{}", at("after the DELETE and an upsert"));
            assert!(extended > 0, "{}", at("after the DELETE and an upsert"));
            model_scan(&ctx, &case, &COUNTS).await;
            // Four commits behind: recorded again while read, as a first scan is.
            for _ in 0..4 {
                insert_batch(&ctx, &table, case.batch(&mut rng, 20)).await;
            }
            let [extended, recorded, _, _] = model_scan(&ctx, &case, &COUNTS).await[..] else {
                unreachable!()
            };
            assert_eq!(
                (extended, recorded > 0),
                (0, true),
                "{}",
                at("four upserts behind")
            );
            model_scan(&ctx, &case, &COUNTS).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_keys_keep_the_last_row_and_bad_upserts_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = common::warehouse_with_db(dir.path()).await;
    let ctx = ordered_session(vec![("iceberg", Arc::clone(&catalog))]).await;
    run_ddl(
        &ctx,
        &create_sql("iceberg.db.t", "id", "bucket(4, id)", 2, true),
    )
    .await;
    let count = common::write_count(
        &ctx,
        "INSERT INTO iceberg.db.t VALUES (1, 'eu', 'a', 1), (2, 'us', 'b', 2), (1, 'eu', 'c', 3), \
         (3, 'ap', NULL, 4), (2, 'us', 'd', 5), (1, 'eu', 'e', 6)",
    )
    .await;
    assert_eq!(count, 3);
    common::write_count(
        &ctx,
        "INSERT INTO iceberg.db.t VALUES (3, 'ap', 'f', 7), (4, 'eu', 'g', 8), (3, 'ap', 'h', 9)",
    )
    .await;
    assert_eq!(
        petrel_rows(&ctx, "iceberg.db.t").await,
        vec![
            r#"[1,"eu","e",6]"#,
            r#"[2,"us","d",5]"#,
            r#"[3,"ap","h",9]"#,
            r#"[4,"eu","g",8]"#
        ]
    );

    // A key column holding NULL is refused by the NOT NULL check before anything is written;
    // a failure while the rows stream in leaves no file and no snapshot.
    let before = files_under(&warehouse);
    let err = query(
        &ctx,
        "INSERT INTO iceberg.db.t SELECT value, 'eu', 'x', \
         CAST(CASE WHEN value = 3 THEN 'bad' ELSE '1' END AS BIGINT) FROM generate_series(1, 3)",
    )
    .await
    .expect_err("a cast failure");
    assert!(err.to_string().contains("bad"), "{err}");
    assert_eq!(
        files_under(&warehouse),
        before,
        "a failed upsert leaves nothing"
    );

    // INSERT OVERWRITE does not upsert.
    let err = query(
        &ctx,
        "INSERT OVERWRITE iceberg.db.t VALUES (9, 'eu', 'z', 0)",
    )
    .await
    .expect_err("overwrite refused");
    assert!(
        err.to_string()
            .contains("INSERT OVERWRITE is not supported"),
        "{err}"
    );

    // A partition column outside the key.
    run_ddl(
        &ctx,
        &create_sql("iceberg.db.by_region", "id", "region", 2, true),
    )
    .await;
    let err = query(
        &ctx,
        "INSERT INTO iceberg.db.by_region VALUES (1, 'eu', 'a', 1)",
    )
    .await
    .expect_err("partition column outside the key");
    assert!(
        err.to_string().contains("partition field region")
            && err.to_string().contains("not part of the key"),
        "{err}"
    );

    // Upserts without identifier fields.
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.nokey (id BIGINT, v BIGINT) \
         TBLPROPERTIES ('write.upsert.enabled'='true')",
    )
    .await;
    let err = query(&ctx, "INSERT INTO iceberg.db.nokey VALUES (1, 1)")
        .await
        .expect_err("no identifier fields");
    assert!(err.to_string().contains("needs identifier fields"), "{err}");

    // A key without the property appends (duplicates stay).
    run_ddl(&ctx, &create_sql("iceberg.db.plain", "id", "", 2, false)).await;
    for _ in 0..2 {
        common::write_count(
            &ctx,
            "INSERT INTO iceberg.db.plain VALUES (1, 'eu', 'a', 1)",
        )
        .await;
    }
    assert_eq!(petrel_rows(&ctx, "iceberg.db.plain").await.len(), 2);
}

/// An upsert of 100,000 rows, half of them existing keys, against a plain append of the same
/// rows (a table with the same key without `write.upsert.enabled`); printed, not asserted (a
/// debug build: the figure is indicative).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_throughput_against_append() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_warehouse, catalog) = common::warehouse_with_db(dir.path()).await;
    // The default session (round-robin on): both writes spread over the writer tasks alike.
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let rows = |from: i64| -> RecordBatch {
        to_batch(
            &(from..from + 100_000)
                .map(|id| {
                    (
                        id,
                        REGIONS[(id % 3) as usize].to_string(),
                        Some(format!("n{id}")),
                        id,
                    )
                })
                .collect::<Vec<_>>(),
        )
    };
    let mut upsert = Vec::new();
    let mut append = Vec::new();
    for round in 0..3 {
        for (table, is_upsert, times) in [("u", true, &mut upsert), ("a", false, &mut append)] {
            let name = format!("iceberg.db.{table}{round}");
            run_ddl(&ctx, &create_sql(&name, "id", "", 2, is_upsert)).await;
            insert_batch(&ctx, &name, rows(0)).await;
            let started = Instant::now();
            // Keys 50,000..150,000: half exist.
            assert_eq!(insert_batch(&ctx, &name, rows(50_000)).await, 100_000);
            times.push(started.elapsed().as_secs_f64());
        }
    }
    upsert.sort_by(f64::total_cmp);
    append.sort_by(f64::total_cmp);
    eprintln!(
        "100,000 rows, 50% existing keys: upsert {:.3} s, append {:.3} s (medians of 3), \
         upsert throughput / append = {:.2}",
        upsert[1],
        append[1],
        append[1] / upsert[1]
    );
}

/// An upsert holds its rows until its input ends: they count against the session's memory
/// pool, so an upsert larger than the pool fails cleanly (nothing written, nothing committed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_larger_than_the_memory_pool_fails_cleanly() {
    use datafusion::execution::memory_pool::GreedyMemoryPool;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::prelude::SessionConfig;
    use petrel_table_provider::catalog::IcebergCatalogProvider;

    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = common::warehouse_with_db(dir.path()).await;
    run_ddl(
        &session(vec![("iceberg", Arc::clone(&catalog))]),
        &create_sql("iceberg.db.t", "id", "", 2, true),
    )
    .await;
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(GreedyMemoryPool::new(1024 * 1024)))
        .build_arc()
        .expect("runtime");
    let ctx = SessionContext::new_with_config_rt(SessionConfig::new(), runtime);
    ctx.register_catalog(
        "iceberg",
        Arc::new(IcebergCatalogProvider::new(Arc::clone(&catalog))),
    );
    let before = files_under(&warehouse);
    let rows: Vec<Row> = (0..200_000)
        .map(|id| (id, "eu".to_string(), Some(format!("name-{id}")), id))
        .collect();
    ctx.register_batch("src", to_batch(&rows))
        .expect("register");
    let err = query(&ctx, "INSERT INTO iceberg.db.t SELECT * FROM src")
        .await
        .expect_err("over the memory pool");
    assert!(err.to_string().contains("Resources exhausted"), "{err}");
    assert_eq!(files_under(&warehouse), before, "nothing written");
}
