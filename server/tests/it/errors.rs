//! Errors reach the client with the code of what went wrong, naming the table, without the
//! server's paths: a table whose metadata cannot be read (storage IO failed, or the file is
//! garbage), a SQL catalog whose database is broken, a missing table. GetTables still lists a
//! broken table, with its error, and every other table (one table's storage failing does not
//! fail the filesystem catalog's listing); a catalog that cannot be listed fails the listing
//! instead of looking empty.

use crate::common;

use arrow::datatypes::Schema;
use arrow_flight::sql::{CommandGetDbSchemas, CommandGetTables};
use common::{Petrel, fetch, query};
use tonic::Code;

/// The `vN.metadata.json` files of a filesystem-catalog table, newest last.
fn metadata_files(table_dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(table_dir.join("metadata"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".metadata.json"))
        .collect();
    files.sort();
    files
}

type Client = arrow_flight::sql::client::FlightSqlServiceClient<tonic::transport::Channel>;

async fn run(client: &mut Client, sql: &str) {
    query(client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// GetTables' rows as (table name, schema).
async fn tables_with_schemas(client: &mut Client) -> Result<Vec<(String, Schema)>, tonic::Status> {
    let info = client
        .get_tables(CommandGetTables {
            include_schema: true,
            ..Default::default()
        })
        .await
        .map_err(common::to_status)?;
    let batches = fetch(client, &info).await?;
    let mut out = Vec::new();
    for b in &batches {
        let names =
            arrow::array::AsArray::as_string::<i32>(b.column_by_name("table_name").unwrap());
        let schemas =
            arrow::array::AsArray::as_binary::<i32>(b.column_by_name("table_schema").unwrap());
        for i in 0..b.num_rows() {
            let schema = arrow::ipc::convert::try_schema_from_ipc_buffer(schemas.value(i)).unwrap();
            out.push((names.value(i).to_string(), schema));
        }
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_table_metadata_names_the_table_and_stays_listed() {
    let warehouse = tempfile::TempDir::new().unwrap();
    let wh = warehouse.path().join("wh");
    std::fs::create_dir_all(&wh).unwrap();
    let server = Petrel::start(&["--warehouse", wh.to_str().unwrap()]);
    let mut client = server.client().await;
    run(&mut client, "CREATE SCHEMA iceberg.db").await;
    for t in ["good", "io_error", "garbage"] {
        run(
            &mut client,
            &format!("CREATE TABLE iceberg.db.{t} (id BIGINT)"),
        )
        .await;
        run(
            &mut client,
            &format!("INSERT INTO iceberg.db.{t} VALUES (1)"),
        )
        .await;
    }
    // Parsed metadata files are cached (they never change): break them under a new server.
    drop(client);
    server.terminate();
    // Storage fails on one table's current metadata file (a symbolic link to itself: ELOOP),
    // and another's is garbage.
    let io_error = metadata_files(&wh.join("db/io_error")).pop().unwrap();
    let saved = std::fs::read(&io_error).unwrap();
    std::fs::remove_file(&io_error).unwrap();
    std::os::unix::fs::symlink(&io_error, &io_error).unwrap();
    let current = metadata_files(&wh.join("db/garbage")).pop().unwrap();
    std::fs::write(&current, b"{ not json").unwrap();

    let server = Petrel::start(&["--warehouse", wh.to_str().unwrap()]);
    let mut client = server.client().await;
    let secret = warehouse.path().to_string_lossy().to_string();
    for (table, code) in [("io_error", Code::Unavailable), ("garbage", Code::Internal)] {
        let e = query(&mut client, &format!("SELECT * FROM iceberg.db.{table}"))
            .await
            .unwrap_err();
        assert_eq!(e.code(), code, "{table}: {e}");
        assert!(e.message().contains(&format!("db.{table}")), "{table}: {e}");
        assert!(
            !e.message().contains(&secret),
            "{table}: leaks the warehouse: {e}"
        );
    }
    let e = query(&mut client, "SELECT * FROM iceberg.db.garbage")
        .await
        .unwrap_err();
    assert!(
        e.message().contains("…/metadata/"),
        "the file, relative to its table: {e}"
    );
    // A missing table is NOT_FOUND, still without the warehouse's path.
    let e = query(&mut client, "SELECT * FROM iceberg.db.nope")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assert!(
        e.message().contains("db.nope") && !e.message().contains(&secret),
        "{e}"
    );

    // GetTables lists all three, with both still broken (the filesystem catalog must read a
    // table's metadata to know it is one: storage failing there does not fail the listing);
    // each broken one with an empty schema holding its error. GetDbSchemas lists `db` alone
    // (a table it cannot read is not taken for a namespace).
    let mut listed = tables_with_schemas(&mut client).await.unwrap();
    listed.sort_by(|a, b| a.0.cmp(&b.0));
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["garbage", "good", "io_error"]);
    let info = client
        .get_db_schemas(CommandGetDbSchemas::default())
        .await
        .unwrap();
    let batches = fetch(&mut client, &info).await.unwrap();
    let schemas: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            let c = arrow::array::AsArray::as_string::<i32>(
                b.column_by_name("db_schema_name").unwrap(),
            );
            (0..b.num_rows())
                .map(|i| c.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(schemas.contains(&"db".to_string()), "{schemas:?}");
    assert!(
        !schemas.iter().any(|s| s.contains("io_error")),
        "{schemas:?}"
    );
    for (name, schema) in &listed {
        let error = schema.metadata().get("petrel:table_error");
        if name == "good" {
            assert_eq!(schema.fields().len(), 1, "{schema:?}");
            assert_eq!(error, None);
        } else {
            assert!(schema.fields().is_empty(), "{name}: {schema:?}");
            let error = error.unwrap_or_else(|| panic!("{name}: no error in {schema:?}"));
            assert!(error.contains(&format!("iceberg.db.{name}")), "{error}");
            assert!(!error.contains(&secret), "{error}");
            let code = if name == "io_error" {
                "Unavailable"
            } else {
                "Internal"
            };
            assert!(error.starts_with(code), "{error}");
        }
    }
    let log = server.log();
    assert_eq!(
        log.matches("GetTables: a table's schema cannot be loaded")
            .count(),
        2,
        "{log}"
    );

    // Once mended, io_error lists with its columns again.
    std::fs::remove_file(&io_error).unwrap();
    std::fs::write(&io_error, saved).unwrap();
    let listed = tables_with_schemas(&mut client).await.unwrap();
    let (_, schema) = listed.iter().find(|(n, _)| n == "io_error").unwrap();
    assert_eq!(schema.fields().len(), 1, "{schema:?}");
    assert_eq!(schema.metadata().get("petrel:table_error"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_catalog_database_is_unavailable_not_empty() {
    let dir = tempfile::TempDir::new().unwrap();
    let db = dir.path().join("catalog.db");
    let wh = dir.path().join("wh");
    std::fs::create_dir_all(&wh).unwrap();
    let config = dir.path().join("petrel.toml");
    std::fs::write(
        &config,
        format!(
            "[[catalog]]\nname = \"lake\"\ntype = \"sql\"\npath = {:?}\nwarehouse = {:?}\n",
            db.to_string_lossy(),
            format!("file://{}", wh.to_string_lossy())
        ),
    )
    .unwrap();
    let server = Petrel::start(&["--config", config.to_str().unwrap()]);
    let mut client = server.client().await;
    run(&mut client, "CREATE SCHEMA lake.db").await;
    run(&mut client, "CREATE TABLE lake.db.t (id BIGINT)").await;
    run(&mut client, "SELECT * FROM lake.db.t").await;

    // The database file is overwritten with garbage under the running server.
    std::fs::write(&db, vec![b'x'; 8192]).unwrap();

    let secret = dir.path().to_string_lossy().to_string();
    let e = query(&mut client, "SELECT * FROM lake.db.t")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    assert!(e.message().contains("db.t"), "{e}");
    assert!(!e.message().contains(&secret), "{e}");

    // Listing fails with the cause; it does not answer "no schemas".
    let e = match client.get_db_schemas(CommandGetDbSchemas::default()).await {
        Err(e) => common::to_status(e),
        Ok(info) => fetch(&mut client, &info).await.expect_err("listing fails"),
    };
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    assert!(e.message().contains("catalog lake"), "{e}");
    assert!(!e.message().contains(&secret), "{e}");
    let e = tables_with_schemas(&mut client).await.unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e}");
}

/// Statements and listing patterns that once aborted the server (a stack overflow) or held a
/// worker for minutes: each is refused with INVALID_ARGUMENT or answered, and the server
/// still answers afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_and_patterns_that_crashed_the_server_are_refused() {
    let server = Petrel::start(&[]);
    let mut client = server.client().await;
    let chain = |n: usize, op: &str| format!("SELECT {}", vec!["1"; n].join(op));
    // 2,000 terms overflowed a 2 MiB stack; 5,000 terms: refused before planning.
    for sql in [
        chain(5_000, "+"),
        chain(5_000, " OR 1 = "),
        vec!["SELECT 1"; 5_000].join(" UNION ALL "),
        format!("SELECT 1{}", " ".repeat(5 << 20)),
        // 5,000 chained CTEs: over 100 s and 10 GB of planning.
        format!(
            "WITH c0 AS (SELECT 1 AS x), {} SELECT x FROM c4999",
            (1..5_000)
                .map(|i| format!("c{i} AS (SELECT x FROM c{})", i - 1))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ] {
        let e = query(&mut client, &sql).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains("over the limit"), "{e}");
    }
    assert_eq!(single_i64(&mut client, &chain(300, "+")).await, 300);
    // Listing patterns from the client: 200,000 `%` (a recursive matcher overflowed the stack;
    // now DataFusion's LIKE refuses it as too large a regex) and 60 `%` before an `x`
    // (exponential backtracking).
    for pattern in ["%".repeat(200_000), format!("{}x", "%".repeat(60))] {
        let schemas = client
            .get_db_schemas(CommandGetDbSchemas {
                catalog: None,
                db_schema_filter_pattern: Some(pattern.clone()),
            })
            .await;
        let tables = client
            .get_tables(CommandGetTables {
                table_name_filter_pattern: Some(pattern.clone()),
                ..Default::default()
            })
            .await;
        for info in [schemas, tables] {
            let rows = match info {
                Ok(info) => fetch(&mut client, &info)
                    .await
                    .map(|batches| batches.iter().map(|b| b.num_rows()).sum::<usize>()),
                Err(e) => Err(common::to_status(e)),
            };
            match rows {
                Ok(rows) => assert_eq!(rows > 0, !pattern.ends_with('x'), "{}", pattern.len()),
                Err(e) => assert_eq!(e.code(), Code::InvalidArgument, "{e}"),
            }
        }
    }
    run(&mut client, "SELECT count(*) FROM seabirds").await;
}

/// Statements that made Arrow allocate without bound, outside the memory pool, and so killed
/// the server (a 100 KB literal concatenated over 20,000 rows asked for 13 GB; `repeat`,
/// `lpad`, `array_repeat` for 2-30 GB; a running `array_agg` for 14 GB): each fails with RESOURCE_EXHAUSTED naming what was too
/// large, and the server keeps answering. Under the limit the same functions answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_that_would_allocate_without_bound_are_refused() {
    // A 1 GiB query limit: 256 MiB for one call's output.
    let server = Petrel::start(&["--query-memory-limit", "1GiB"]);
    let mut client = server.client().await;
    let literal = "x".repeat(100_000);
    let doubled = |levels: usize| {
        let mut sql = "WITH l0 AS (SELECT repeat('x', 1048576) s)".to_string();
        for level in 1..=levels {
            sql.push_str(&format!(
                ", l{level} AS (SELECT s || s s FROM l{})",
                level - 1
            ));
        }
        format!("{sql} SELECT length(s) FROM l{levels}")
    };
    for (sql, what) in [
        (
            "SELECT length(repeat('x', 2000000000))".to_string(),
            "repeat()",
        ),
        ("SELECT length(lpad('x', 2147483647))".to_string(), "lpad()"),
        (
            "SELECT cardinality(array_repeat(1, 2000000000))".to_string(),
            "array_repeat()",
        ),
        (
            "SELECT cardinality(range(1, 2000000000))".to_string(),
            "range()",
        ),
        (
            format!(
                "SELECT sum(length(concat('{literal}', CAST(v AS VARCHAR)))) \
                 FROM generate_series(1, 20000) AS t(v)"
            ),
            "copied into each of up to 8192 rows",
        ),
        (
            format!("SELECT '{literal}' FROM generate_series(1, 20000)"),
            "copied into each of up to 8192 rows",
        ),
        // 1 MiB doubled 9 times: 512 MiB.
        (doubled(9), "petrel_string_concat()"),
        (
            "SELECT arrow_cast(NULL, 'FixedSizeList(2147483647, Int64)') IS NULL".to_string(),
            "arrow_cast()",
        ),
        // Each row's value holds every row before it: 14 GB over 60,000 rows.
        (
            "SELECT sum(cardinality(a)) FROM (SELECT array_agg(v) OVER (ORDER BY v) a \
             FROM generate_series(1, 60000) t(v))"
                .to_string(),
            "array_agg() as a window function",
        ),
    ] {
        let e = query(&mut client, &sql).await.unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
        assert!(
            e.message().contains(what) && e.message().contains("256.0 MiB"),
            "{e}"
        );
        assert!(!e.message().contains("Optimizer rule"), "{e}");
    }
    // -1 month + 28 days from March 1st is March 1st again: the series never ended.
    let e = query(
        &mut client,
        "SELECT cardinality(generate_series(DATE '2001-03-01', DATE '2000-01-01', \
         INTERVAL '-1 month 28 days'))",
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    assert!(e.message().contains("step mixes signs"), "{e}");
    assert_eq!(single_i64(&mut client, &doubled(3)).await, 8 << 20);
    assert_eq!(
        single_i64(&mut client, "SELECT length(repeat('ab', 1000))").await,
        2000
    );
    run(&mut client, "SELECT count(*) FROM seabirds").await;
}

/// Joins, windows and `unnest` copy one row into many output rows, allocated in one piece
/// outside the memory pool: a 100 MB string cross-joined with 100 rows asked for 10 GB and the
/// failed allocation killed the server. Now each fails with RESOURCE_EXHAUSTED naming the
/// operator, rows of a table's data as well as computed ones, and the server keeps answering;
/// copies that fit (fewer rows, smaller values) are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_copied_beyond_the_query_memory_are_refused() {
    // A 1 GiB query limit: one output batch of copies may take 1 GiB.
    let server = Petrel::start(&["--query-memory-limit", "1GiB"]);
    let mut client = server.client().await;
    run(
        &mut client,
        "CREATE TABLE petrel.demo.docs (id INT, body STRING)",
    )
    .await;
    run(
        &mut client,
        "INSERT INTO petrel.demo.docs VALUES (1, repeat('d', 2000000)), (2, 'short')",
    )
    .await;
    let large = "arrow_cast(repeat('x', 100000000), 'LargeUtf8')";
    for (sql, operator) in [
        // What aborted the server: 100 × 100 MB of LargeUtf8 in one allocation.
        (
            format!(
                "SELECT max(length(s)) FROM (SELECT {large} s) CROSS JOIN generate_series(1, 100)"
            ),
            "a cross join",
        ),
        // A table's 2 MB row, up to 8,192 times: 16 GB.
        (
            "SELECT sum(length(d.body)) FROM petrel.demo.docs d \
             CROSS JOIN generate_series(1, 10000) g(v)"
                .to_string(),
            "a cross join",
        ),
        (
            "SELECT sum(length(d.body)) FROM petrel.demo.docs d \
             JOIN generate_series(1, 10000) g(v) ON d.id = g.v % 2"
                .to_string(),
            "a hash join",
        ),
        (
            "SELECT count(*), max(length(body)) FROM \
             (SELECT unnest(range(1, 1000)) e, body FROM petrel.demo.docs)"
                .to_string(),
            "unnest",
        ),
        (
            "SELECT max(length(m)) FROM (SELECT max(s) OVER (ORDER BY v) m FROM \
             (SELECT v, repeat('x', CASE WHEN v = 1 THEN 2000000 ELSE 1 END) s \
             FROM generate_series(1, 1000) g(v)))"
                .to_string(),
            "a window function",
        ),
    ] {
        let e = query(&mut client, &sql).await.unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{sql}: {e}");
        assert!(
            e.message().contains(&format!("{operator} would copy"))
                && e.message().contains("1.0 GiB a query may use"),
            "{sql}: {e}"
        );
        assert_eq!(single_i64(&mut client, "SELECT 41 + 1").await, 42);
    }
    // 100 copies of the 2 MB row: answered.
    assert_eq!(
        single_i64(
            &mut client,
            "SELECT sum(length(d.body)) FROM petrel.demo.docs d \
             JOIN generate_series(1, 200) g(v) ON d.id = g.v % 2"
        )
        .await,
        100 * 2_000_000
    );
}

/// Queries over their memory spill to temporary files, within the server's `spill_limit`
/// (DataFusion's own limit, 100 GiB whatever the disk holds, let one `DISTINCT` fill `/tmp`):
/// over it a query fails with RESOURCE_EXHAUSTED naming the setting; `0` turns spilling off;
/// with room the same sort spills and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spills_are_bounded_by_the_spill_limit() {
    // 2,000,000 strings of ~20 bytes sorted in 64 MiB: the sort must spill.
    let sql = "SELECT max(r), count(*) FROM (SELECT row_number() OVER (ORDER BY s) r FROM \
               (SELECT CAST(v * 7919 % 1000003 AS VARCHAR) || 'padding-padding' s \
               FROM generate_series(1, 2000000) g(v)))";
    for (spill_limit, says) in [
        ("1MiB", "Raise the server's spill_limit (--spill-limit)"),
        ("0", "(spilling is off: spill_limit is 0)"),
    ] {
        let server = Petrel::start(&[
            "--query-memory-limit",
            "64MiB",
            "--target-partitions",
            "1",
            "--spill-limit",
            spill_limit,
        ]);
        let mut client = server.client().await;
        let e = query(&mut client, sql).await.unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{spill_limit}: {e}");
        assert!(e.message().contains(says), "{spill_limit}: {e}");
        assert!(!e.message().contains("max_temp_directory_size"), "{e}");
        assert_eq!(single_i64(&mut client, "SELECT 41 + 1").await, 42);
    }
    // One sort (one partition): its merge of the spilled runs fits the same 64 MiB.
    let server = Petrel::start(&["--query-memory-limit", "64MiB", "--target-partitions", "1"]);
    let mut client = server.client().await;
    assert_eq!(
        single_i64(
            &mut client,
            &sql.replace("SELECT max(r), count(*)", "SELECT max(r)")
        )
        .await,
        2_000_000
    );
}

/// Statements DataFusion 53 panics on, while optimizing (`date_trunc`, `overlay`: constant
/// folding) or planning (interval arithmetic), fail with INTERNAL naming the panic instead of
/// losing the client its call; the server answers the next statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_the_engine_panics_on_fail_with_the_reason() {
    let server = Petrel::start(&[]);
    let mut client = server.client().await;
    for sql in [
        "SELECT date_trunc('week', TIMESTAMP '1677-09-21 00:12:44')",
        "SELECT overlay('abc' placing 'x' from -9223372036854775808 for 9223372036854775807)",
        "SELECT DATE '1970-01-01' + INTERVAL '2147483647 days'",
        // The same, over a column: the panic is in running the plan, not folding it.
        "SELECT date_trunc('week', t) FROM (VALUES (TIMESTAMP '1677-09-21 00:12:44'), \
         (TIMESTAMP '2020-01-01 00:00:00')) v(t)",
    ] {
        let e = query(&mut client, sql).await.unwrap_err();
        assert_eq!(e.code(), Code::Internal, "{sql}: {e}");
        assert!(e.message().contains("panicked"), "{sql}: {e}");
        assert_eq!(single_i64(&mut client, "SELECT 41 + 1").await, 42);
    }
}

/// A function given a value it cannot take fails with INVALID_ARGUMENT naming the value, not
/// INTERNAL (DataFusion raises these as `Execution` errors; the ADBC DB-API driver showed them
/// as `InternalError`, as if the server were broken); the server answers the next statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_arguments_a_statement_cannot_take_are_invalid() {
    let server = Petrel::start(&[]);
    let mut client = server.client().await;
    for (sql, says) in [
        (
            "SELECT make_date(2024, 13, 1)",
            "Month value '13' is out of range",
        ),
        ("SELECT substr('abc', 1, -1)", "negative substring length"),
        ("SELECT chr(-1)", "invalid Unicode scalar value"),
        ("SELECT date_trunc('bogus', now())", "granularity: 'bogus'"),
        (
            "SELECT split_part('a,b', ',', 0)",
            "field position must not be zero",
        ),
        ("SELECT generate_series(1, 10, 0)", "step can't be 0"),
        ("SELECT arrow_cast(1, 'Bogus')", "Unsupported type 'Bogus'"),
        ("SELECT regexp_like('a', '[')", "regex parse error"),
        ("SELECT 'a' ~ '('", "regex parse error"),
    ] {
        let e = query(&mut client, sql).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{sql}: {e}");
        assert!(e.message().contains(says), "{sql}: {e}");
        assert_eq!(single_i64(&mut client, "SELECT 41 + 1").await, 42);
    }
}

/// Integer and decimal arithmetic, sums (`DISTINCT` too) and decimal averages that overflow fail
/// with INVALID_ARGUMENT instead of answering a wrapped-around value (DataFusion 53 wraps them):
/// in a query, and in writes, which then commit nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflowing_arithmetic_is_invalid_and_writes_nothing() {
    let server = Petrel::start(&[]);
    let mut client = server.client().await;
    run(
        &mut client,
        "CREATE TABLE petrel.demo.big (id INT, v BIGINT)",
    )
    .await;
    run(
        &mut client,
        "INSERT INTO petrel.demo.big VALUES (1, 9223372036854775807), (2, 5)",
    )
    .await;
    for sql in [
        "SELECT v * v FROM (VALUES (9223372036854775807)) t(v)",
        "SELECT v + 1 FROM petrel.demo.big",
        "SELECT sum(v) FROM petrel.demo.big",
        "SELECT sum(DISTINCT v), sum(DISTINCT id) FROM petrel.demo.big",
        "SELECT CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0)) + 1",
        "SELECT avg(x) FROM (VALUES (CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0))), \
         (CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0)))) t(x)",
        "UPDATE petrel.demo.big SET v = v + 1",
        "INSERT INTO petrel.demo.big SELECT id, v * 2 FROM petrel.demo.big",
    ] {
        let e = query(&mut client, sql).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{sql}: {e}");
        assert!(
            e.message().to_lowercase().contains("overflow"),
            "{sql}: {e}"
        );
    }
    // Chains of operators rewritten into nested calls: at most 128 deep, refused at once.
    // (400 terms: DataFusion alone takes 40 s to plan 2,000 on a debug build.)
    let sums = vec!["v"; 400].join(" + ");
    let concats = vec!["'x'"; 400].join(" || ");
    for sql in [
        format!("SELECT {sums} FROM petrel.demo.big"),
        format!("SELECT length({concats})"),
    ] {
        let started = std::time::Instant::now();
        let e = query(&mut client, &sql).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains("nests more than 128"), "{e}");
        assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    }
    let unchanged = "SELECT count(*) FROM petrel.demo.big \
                     WHERE (id = 1 AND v = 9223372036854775807) OR (id = 2 AND v = 5)";
    assert_eq!(single_i64(&mut client, unchanged).await, 2);
    let all = "SELECT count(*) FROM petrel.demo.big";
    assert_eq!(single_i64(&mut client, all).await, 2);
    // What fits is answered.
    let fits = "SELECT sum(v - 9223372036854775800) FROM petrel.demo.big";
    assert_eq!(single_i64(&mut client, fits).await, -9223372036854775788);
}

/// A scalar subquery returning more than one row fails with INVALID_ARGUMENT saying so, in a
/// query and in a DELETE (which deletes nothing); one row is its value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scalar_subquery_of_several_rows_is_invalid() {
    let server = Petrel::start(&[]);
    let mut client = server.client().await;
    run(&mut client, "CREATE TABLE petrel.demo.sq (id BIGINT)").await;
    run(
        &mut client,
        "INSERT INTO petrel.demo.sq VALUES (1), (2), (3)",
    )
    .await;
    for sql in [
        "SELECT (SELECT id FROM petrel.demo.sq)",
        "DELETE FROM petrel.demo.sq WHERE id = (SELECT id FROM petrel.demo.sq WHERE id > 1)",
    ] {
        let e = query(&mut client, sql).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{sql}: {e}");
        assert!(e.message().contains("more than one row"), "{e}");
    }
    let one = "SELECT count(*) FROM petrel.demo.sq \
               WHERE id = (SELECT id FROM petrel.demo.sq WHERE id = 2)";
    assert_eq!(single_i64(&mut client, one).await, 1);
    let all = "SELECT count(*) FROM petrel.demo.sq";
    assert_eq!(single_i64(&mut client, all).await, 3);
}

/// The one value `sql` returns, as an Int64.
async fn single_i64(client: &mut Client, sql: &str) -> i64 {
    let batches = query(client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let value =
        arrow::compute::cast(batches[0].column(0), &arrow::datatypes::DataType::Int64).unwrap();
    value
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .unwrap()
        .value(0)
}
