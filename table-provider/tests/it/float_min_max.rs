//! Grouped `min` / `max` of float and double columns with NaN, infinities and signed zeros:
//! each group's answer is the ungrouped answer over that group's rows (NaN above every
//! number, `-0.0` below `0.0`), whatever the order of the rows, the batch boundaries and the
//! number of groups.

use crate::common::{query, run_ddl, session, sorted_rows, warehouse_with_db, write_count};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_float_extremes_match_ungrouped_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", catalog)]);
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.f (g int, d double, r float) PARTITIONED BY (bucket(3, g))",
    )
    .await;
    // Seven groups; each holds the eight special values in turn, in both orders over three
    // commits, except group 3 (2.0 in place of NaN) and group 5 (signed zeros only).
    let specials = "CASE WHEN value % 7 = 5 THEN (CASE WHEN value % 2 = 0 THEN -0.0 ELSE 0.0 END) \
         WHEN value % 7 = 3 AND value % 8 = 0 THEN 2.0 \
         ELSE (CASE value % 8 WHEN 0 THEN CAST('NaN' AS DOUBLE) WHEN 1 THEN 1.0 \
         WHEN 2 THEN -1.0 WHEN 3 THEN CAST('inf' AS DOUBLE) WHEN 4 THEN CAST('-inf' AS DOUBLE) \
         WHEN 5 THEN -0.0 WHEN 6 THEN 0.0 ELSE NULL END) END";
    for (from, to, order) in [(0, 399, "ASC"), (400, 799, "DESC"), (800, 1199, "ASC")] {
        let insert = format!(
            "INSERT INTO iceberg.db.f SELECT CAST(value % 7 AS INT), v AS d, CAST(v AS FLOAT) AS r \
             FROM (SELECT value, {specials} AS v FROM generate_series({from}, {to}) \
             ORDER BY value {order})"
        );
        assert_eq!(write_count(&ctx, &insert).await, 400);
    }
    let grouped = sorted_rows(
        &ctx,
        "SELECT g, min(d), max(d), min(r), max(r) FROM iceberg.db.f GROUP BY g",
    )
    .await;
    let mut want = Vec::new();
    for g in 0..7 {
        let ungrouped = sorted_rows(
            &ctx,
            &format!("SELECT {g}, min(d), max(d), min(r), max(r) FROM iceberg.db.f WHERE g = {g}"),
        )
        .await;
        want.extend(ungrouped);
    }
    want.sort();
    assert_eq!(grouped, want);
    let row = |g: i32| {
        grouped
            .iter()
            .find(|r| r.starts_with(&format!("[{g},")))
            .cloned()
    };
    assert_eq!(
        row(0).as_deref(),
        Some(r#"[0,"-Infinity","NaN","-Infinity","NaN"]"#)
    );
    assert_eq!(
        row(3).as_deref(),
        Some(r#"[3,"-Infinity","Infinity","-Infinity","Infinity"]"#)
    );
    assert_eq!(row(5).as_deref(), Some("[5,-0.0,0.0,-0.0,0.0]"));
    // Across groups the extremes are NaN (max) and -inf (min), as ungrouped.
    let batches = query(
        &ctx,
        "SELECT min(d), max(d) FROM (SELECT g % 2 AS h, d FROM iceberg.db.f) GROUP BY h ORDER BY h",
    )
    .await
    .expect("two groups");
    let text = arrow::util::pretty::pretty_format_batches(&batches)
        .expect("format")
        .to_string();
    assert_eq!(text.matches("-inf").count(), 2, "{text}");
    assert_eq!(text.matches("NaN").count(), 2, "{text}");
}
