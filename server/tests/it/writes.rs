//! Writes through the real binary with arrow-rs's Flight SQL client: `CommandStatementUpdate`,
//! prepared updates with parameter batches (one commit per batch), INSERT sent on the query
//! path (run once, however often its ticket is fetched), statements the policy refuses, and
//! `--read-only`, and `--table-cache-ms`. Tables are created in a fresh filesystem warehouse through Petrel's catalog
//! API; every result is checked by reading the table back through Petrel and through the
//! catalog's metadata (snapshot count).

use crate::common;

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
use arrow_flight::sql::client::FlightSqlServiceClient;
use common::{Petrel, fetch, query, to_status};
use iceberg::spec::{
    FormatVersion, NestedField, PartitionSpec, PrimitiveType, Schema, SortOrder,
    TableMetadataBuilder, Type,
};
use petrel_table_provider::{Catalog, FileSystemCatalog, Namespace, TableIdent};
use tonic::Code;
use tonic::transport::Channel;

fn ident(name: &str) -> TableIdent {
    TableIdent::new(Namespace::new(vec!["db".into()]), name)
}

/// Creates `db.<name> (id long NOT NULL, name string)` in the warehouse `dir`.
async fn create_table(dir: &Path, name: &str) {
    let catalog = FileSystemCatalog::new(dir.to_str().unwrap()).unwrap();
    catalog
        .create_namespace(&Namespace::new(vec!["db".into()]), true)
        .await
        .unwrap();
    let schema = Schema::builder()
        .with_fields(vec![
            Arc::new(NestedField::required(
                1,
                "id",
                Type::Primitive(PrimitiveType::Long),
            )),
            Arc::new(NestedField::optional(
                2,
                "name",
                Type::Primitive(PrimitiveType::String),
            )),
        ])
        .build()
        .unwrap();
    let spec = PartitionSpec::builder(schema.clone()).build().unwrap();
    let location = catalog.default_table_location(&ident(name)).await.unwrap();
    let metadata = TableMetadataBuilder::new(
        schema,
        spec,
        SortOrder::unsorted_order(),
        location,
        FormatVersion::V2,
        Default::default(),
    )
    .unwrap()
    .build()
    .unwrap()
    .metadata;
    catalog.create_table(&ident(name), metadata).await.unwrap();
}

async fn snapshots(dir: &Path, name: &str) -> usize {
    let catalog = FileSystemCatalog::new(dir.to_str().unwrap()).unwrap();
    let table = catalog.load_table(&ident(name)).await.unwrap();
    table.metadata().snapshots().count()
}

/// The table's rows as (id, name), sorted.
async fn table_rows(
    client: &mut FlightSqlServiceClient<Channel>,
    table: &str,
) -> Vec<(i64, Option<String>)> {
    let batches = query(client, &format!("SELECT id, name FROM {table} ORDER BY id"))
        .await
        .unwrap();
    let mut out = Vec::new();
    for b in &batches {
        let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let names = arrow::compute::cast(b.column(1), &DataType::Utf8).unwrap();
        let names = names.as_any().downcast_ref::<StringArray>().unwrap();
        for i in 0..b.num_rows() {
            out.push((
                ids.value(i),
                names.is_valid(i).then(|| names.value(i).to_string()),
            ));
        }
    }
    out
}

fn count(batches: &[RecordBatch]) -> u64 {
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    let b = &batches[0];
    assert_eq!(b.schema().field(0).name(), "count");
    b.column(0)
        .as_any()
        .downcast_ref::<UInt64Array>()
        .unwrap()
        .value(0)
}

fn row(id: i64, name: &str) -> (i64, Option<String>) {
    (id, Some(name.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_prepared_batches_and_query_path_inserts() {
    let warehouse = tempfile::TempDir::new().unwrap();
    create_table(warehouse.path(), "t").await;
    let wh = warehouse.path().to_str().unwrap();
    let server = Petrel::start(&["--warehouse", wh, "--default-schema", "db"]);
    let mut client = server.client().await;
    const T: &str = "iceberg.db.t";

    // CommandStatementUpdate: runs once, answers the row count.
    let n = client
        .execute_update(format!("INSERT INTO {T} VALUES (1, 'a'), (2, NULL)"), None)
        .await
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(snapshots(warehouse.path(), "t").await, 1);

    // Prepared: empty dataset schema (JDBC's "this is an update"), parameters bound as a
    // three-row batch: every row inserted, as one commit.
    let mut stmt = client
        .prepare("INSERT INTO t VALUES (?, ?)".into(), None)
        .await
        .unwrap();
    assert!(stmt.dataset_schema().unwrap().fields().is_empty());
    assert_eq!(stmt.parameter_schema().unwrap().fields().len(), 2);
    let params = RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("$1", DataType::Int64, false),
            Field::new("$2", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![3, 4, 5])),
            Arc::new(StringArray::from(vec![Some("c"), None, Some("e")])),
        ],
    )
    .unwrap();
    stmt.set_parameters(params).unwrap();
    assert_eq!(stmt.execute_update().await.unwrap(), 3);
    assert_eq!(
        snapshots(warehouse.path(), "t").await,
        2,
        "one commit per batch"
    );
    // The same handle, one more row.
    let one = RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("$1", DataType::Int64, false),
            Field::new("$2", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![6])),
            Arc::new(StringArray::from(vec!["f"])),
        ],
    )
    .unwrap();
    stmt.set_parameters(one).unwrap();
    assert_eq!(stmt.execute_update().await.unwrap(), 1);

    // INSERT on the query path (what ADBC's cursor.execute sends): runs in GetFlightInfo,
    // the ticket answers the count every time it is fetched, and nothing runs again.
    let info = client
        .execute(format!("INSERT INTO {T} VALUES (7, 'g')"), None)
        .await
        .unwrap();
    assert_eq!(info.total_records, 1);
    let first = fetch(&mut client, &info).await.unwrap();
    let second = fetch(&mut client, &info).await.unwrap();
    assert_eq!((count(&first), count(&second)), (1, 1));
    // GetSchema describes an INSERT without running it.
    let before = snapshots(warehouse.path(), "t").await;
    let cmd = arrow_flight::sql::CommandStatementQuery {
        query: format!("INSERT INTO {T} VALUES (99, 'never')"),
        transaction_id: None,
    };
    let bytes = prost::Message::encode_to_vec(&arrow_flight::sql::ProstMessageExt::as_any(&cmd));
    let schema = client
        .inner_mut()
        .get_schema(arrow_flight::FlightDescriptor::new_cmd(bytes))
        .await
        .unwrap()
        .into_inner();
    assert!(!schema.schema.is_empty());
    assert_eq!(snapshots(warehouse.path(), "t").await, before);

    // INSERT ... SELECT from the same table.
    let n = client
        .execute_update(
            format!("INSERT INTO {T} SELECT id + 100, name FROM {T} WHERE id <= 2"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(n, 2);

    let expected = vec![
        row(1, "a"),
        (2, None),
        row(3, "c"),
        (4, None),
        row(5, "e"),
        row(6, "f"),
        row(7, "g"),
        row(101, "a"),
        (102, None),
    ];
    assert_eq!(table_rows(&mut client, T).await, expected);
    assert_eq!(snapshots(warehouse.path(), "t").await, 5);

    // Refused: each a clear error, nothing written.
    let copy_target = server.dir.path().join("copy.csv");
    for (sql, code, needle) in [
        (
            format!("COPY (SELECT 1) TO '{}'", copy_target.display()),
            Code::PermissionDenied,
            "COPY",
        ),
        (
            "CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '/etc/passwd'".to_string(),
            Code::PermissionDenied,
            "CREATE EXTERNAL TABLE",
        ),
        (
            "INSERT INTO iceberg.information_schema.tables VALUES ('a', 'b', 'c', 'd')".to_string(),
            Code::PermissionDenied,
            "only tables of",
        ),
        (
            format!("REPLACE INTO {T} VALUES (1, 'a')"),
            Code::Unimplemented,
            "REPLACE INTO",
        ),
        (
            "CREATE VIEW v AS SELECT 1".to_string(),
            Code::PermissionDenied,
            "DDL",
        ),
        (
            format!("EXPLAIN ANALYZE INSERT INTO {T} VALUES (8, 'h')"),
            Code::PermissionDenied,
            "statement itself",
        ),
    ] {
        for via_update in [true, false] {
            let err = if via_update {
                to_status(client.execute_update(sql.clone(), None).await.unwrap_err())
            } else {
                query(&mut client, &sql).await.unwrap_err()
            };
            assert_eq!(err.code(), code, "{sql}: {err}");
            assert!(err.message().contains(needle), "{sql}: {err}");
        }
    }
    assert!(!copy_target.exists());
    // A query is not an update.
    let err = to_status(
        client
            .execute_update("SELECT 1".into(), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert_eq!(table_rows(&mut client, T).await, expected);
    assert_eq!(snapshots(warehouse.path(), "t").await, 5);
    // A prepared INSERT executed as a query (GetFlightInfo): runs once, its ticket answers
    // the count on every fetch.
    let mut stmt = client
        .prepare(format!("INSERT INTO {T} VALUES (9, 'i')"), None)
        .await
        .unwrap();
    let info = stmt.execute().await.unwrap();
    for _ in 0..2 {
        assert_eq!(count(&fetch(&mut client, &info).await.unwrap()), 1);
    }
    assert_eq!(snapshots(warehouse.path(), "t").await, 6);
    let mut expected = expected;
    expected.push(row(9, "i"));
    expected.sort();
    assert_eq!(table_rows(&mut client, T).await, expected);
    // INSERT OVERWRITE of an unpartitioned table replaces every row, in one snapshot.
    let replaced = client
        .execute_update(
            format!("INSERT OVERWRITE {T} VALUES (10, 'j'), (11, NULL)"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(replaced, 2);
    assert_eq!(snapshots(warehouse.path(), "t").await, 7);
    assert_eq!(
        table_rows(&mut client, T).await,
        vec![row(10, "j"), (11, None)]
    );
    // DELETE of a copy-on-write table (no write.delete.mode: Iceberg's default) rewrites the
    // file, in one snapshot.
    let deleted = client
        .execute_update(format!("DELETE FROM {T} WHERE name IS NULL"), None)
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(snapshots(warehouse.path(), "t").await, 8);
    assert_eq!(table_rows(&mut client, T).await, vec![row(10, "j")]);
    // UPDATE, copy-on-write as well.
    let updated = client
        .execute_update(format!("UPDATE {T} SET name = 'k' WHERE id = 10"), None)
        .await
        .unwrap();
    assert_eq!(updated, 1);
    assert_eq!(snapshots(warehouse.path(), "t").await, 9);
    assert_eq!(table_rows(&mut client, T).await, vec![row(10, "k")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_refuses_every_write() {
    let warehouse = tempfile::TempDir::new().unwrap();
    create_table(warehouse.path(), "t").await;
    let wh = warehouse.path().to_str().unwrap();
    let server = Petrel::start(&["--warehouse", wh, "--read-only"]);
    let mut client = server.client().await;
    let err = to_status(
        client
            .execute_update("INSERT INTO iceberg.db.t VALUES (1, 'a')".into(), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code(), Code::PermissionDenied, "{err}");
    assert!(err.message().contains("read-only"), "{err}");
    let err = query(&mut client, "INSERT INTO iceberg.db.t VALUES (1, 'a')")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err}");
    let err = to_status(
        client
            .prepare("INSERT INTO iceberg.db.t VALUES (?, ?)".into(), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code(), Code::PermissionDenied, "{err}");
    assert_eq!(snapshots(warehouse.path(), "t").await, 0);
    // Reads still work.
    let b = query(&mut client, "SELECT count(*) FROM iceberg.db.t")
        .await
        .unwrap();
    let n = b[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    assert_eq!(n.value(0), 0);
}

/// MERGE INTO over Flight SQL: as an update command, on the query path (run once: its ticket
/// answers the count on every fetch), a target row matched twice (Spark's error, nothing
/// committed), and EXPLAIN MERGE (explained, not run). The table is copy-on-write (no
/// `write.merge.mode`: Iceberg's default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_into_over_flight_sql() {
    let warehouse = tempfile::TempDir::new().unwrap();
    create_table(warehouse.path(), "t").await;
    create_table(warehouse.path(), "s").await;
    let wh = warehouse.path().to_str().unwrap();
    let server = Petrel::start(&["--warehouse", wh, "--default-schema", "db"]);
    let mut client = server.client().await;
    for sql in [
        "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "INSERT INTO s VALUES (2, 'B'), (3, NULL), (4, 'd')",
    ] {
        assert_eq!(client.execute_update(sql.into(), None).await.unwrap(), 3);
    }

    // Clauses in order: 3 is deleted (its source name is NULL), 2 updated, 4 inserted.
    let merged = client
        .execute_update(
            "MERGE INTO t USING s ON t.id = s.id \
             WHEN MATCHED AND s.name IS NULL THEN DELETE \
             WHEN MATCHED THEN UPDATE SET name = s.name \
             WHEN NOT MATCHED THEN INSERT *"
                .into(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(merged, 3);
    assert_eq!(snapshots(warehouse.path(), "t").await, 2);
    let expected = vec![row(1, "a"), row(2, "B"), row(4, "d")];
    assert_eq!(table_rows(&mut client, "t").await, expected);

    // On the query path, from a subquery: runs once.
    let info = client
        .execute(
            "MERGE INTO iceberg.db.t AS t USING (SELECT id + 10 AS id, name FROM s) src \
             ON t.id = src.id WHEN NOT MATCHED THEN INSERT (id, name) VALUES (src.id, src.name)"
                .into(),
            None,
        )
        .await
        .unwrap();
    let first = fetch(&mut client, &info).await.unwrap();
    let second = fetch(&mut client, &info).await.unwrap();
    assert_eq!((count(&first), count(&second)), (3, 3));
    assert_eq!(snapshots(warehouse.path(), "t").await, 3);
    let mut expected = expected;
    expected.extend([row(12, "B"), (13, None), row(14, "d")]);
    assert_eq!(table_rows(&mut client, "t").await, expected);

    // A target row matched by two source rows: refused, nothing committed.
    let err = to_status(
        client
            .execute_update(
                "MERGE INTO t USING (SELECT id FROM s UNION ALL SELECT id FROM s) s \
                 ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = 'x'"
                    .into(),
                None,
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(
        err.message()
            .contains("matched a single row from the target table with multiple rows"),
        "{err}"
    );

    // EXPLAIN MERGE explains; nothing runs.
    let explained = query(
        &mut client,
        "EXPLAIN MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE",
    )
    .await
    .unwrap();
    let plans = arrow::compute::cast(explained[0].column(1), &DataType::Utf8).unwrap();
    let plans = plans.as_any().downcast_ref::<StringArray>().unwrap();
    let text: Vec<&str> = (0..plans.len()).map(|i| plans.value(i)).collect();
    assert!(
        text.iter().any(|p| p.contains("IcebergMergeExec")),
        "{text:?}"
    );
    assert_eq!(snapshots(warehouse.path(), "t").await, 3);
    assert_eq!(table_rows(&mut client, "t").await, expected);
}

/// `--table-cache-ms`: the server answers its own commits at once and another writer's (a second
/// server on the same warehouse) once the set time has passed since it last loaded the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_cache_shows_own_commits_at_once_and_others_after_the_set_time() {
    const T: &str = "iceberg.db.t";
    let ttl = std::time::Duration::from_secs(8);
    let warehouse = tempfile::TempDir::new().unwrap();
    create_table(warehouse.path(), "t").await;
    let wh = warehouse.path().to_str().unwrap();
    let cached = Petrel::start(&["--warehouse", wh, "--table-cache-ms", "8000"]);
    let other = Petrel::start(&["--warehouse", wh]);
    let (mut client, mut other_client) = (cached.client().await, other.client().await);
    assert_eq!(table_rows(&mut client, T).await, vec![]);

    client
        .execute_update("INSERT INTO iceberg.db.t VALUES (1, 'own')".into(), None)
        .await
        .unwrap();
    let committed = std::time::Instant::now();
    assert_eq!(table_rows(&mut client, T).await, vec![row(1, "own")]);

    other_client
        .execute_update("INSERT INTO iceberg.db.t VALUES (2, 'other')".into(), None)
        .await
        .unwrap();
    let seen = table_rows(&mut client, T).await;
    if committed.elapsed() < ttl {
        assert_eq!(
            seen,
            vec![row(1, "own")],
            "another writer's commit is not asked for"
        );
    }
    tokio::time::sleep(ttl.saturating_sub(committed.elapsed())).await;
    assert_eq!(
        table_rows(&mut client, T).await,
        vec![row(1, "own"), row(2, "other")]
    );
    assert_eq!(snapshots(warehouse.path(), "t").await, 2);
}
