//! `sum` of integers and decimals fails when the total overflows its type instead of wrapping
//! around (DataFusion 53 answered -140282366920938463463374607431768211458 for two 38-digit
//! nines, -9223372036854775808 for `BIGINT` 9223372036854775807 + 1), grouped or not, within
//! one batch or across partial sums, and over window frames; totals that fit are exact.

use crate::common::{query, session, sorted_rows};

// (Long integers are cast from strings: this session parses a number too long for an i64 as a
// double.)

const NINES: &str = "CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0))";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sums_fail_on_overflow_and_are_exact_otherwise() {
    let ctx = session(vec![]);
    let overflowing = [
        format!("SELECT sum(x) FROM (VALUES ({NINES}), ({NINES})) t(x)"),
        // Fits an i128, not 38 digits.
        format!("SELECT sum(x) FROM (VALUES ({NINES}), (CAST(1 AS DECIMAL(38,0)))) t(x)"),
        format!("SELECT g, sum(x) FROM (VALUES (1, {NINES}), (1, {NINES}), (2, 1)) t(g, x) GROUP BY g"),
        // Many rows over two partitions: partial sums, then their merge.
        "SELECT sum(CAST('90000000000000000000000000000000000000' AS DECIMAL(38,0)) + v - v) \
         FROM generate_series(1, 20000) t(v)"
            .to_string(),
        "SELECT v % 3, sum(CAST('90000000000000000000000000000000000000' AS DECIMAL(38,0)) + v - v) \
         FROM generate_series(1, 20000) t(v) GROUP BY v % 3"
            .to_string(),
        // BIGINT totals, grouped or not, over partitions.
        "SELECT sum(v) FROM (VALUES (9223372036854775807), (1)) t(v)".to_string(),
        "SELECT g, sum(v) FROM (VALUES (1, 9223372036854775807), (1, 1), (2, 5)) t(g, v) GROUP BY g"
            .to_string(),
        "SELECT sum(v * 1000000000000) FROM generate_series(1, 20000) t(v)".to_string(),
        "SELECT v % 3, sum(v * 1000000000000) FROM generate_series(1, 20000) t(v) GROUP BY v % 3"
            .to_string(),
        // Window frames: growing, sliding, whole partition.
        format!("SELECT sum(x) OVER (ORDER BY k) FROM (VALUES (1, {NINES}), (2, {NINES})) t(k, x)"),
        format!(
            "SELECT sum(x) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)              FROM (VALUES (1, {NINES}), (2, {NINES})) t(k, x)"
        ),
        "SELECT sum(x) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)          FROM (VALUES (1, 9223372036854775807), (2, 1)) t(k, x)"
            .to_string(),
        "SELECT sum(x) OVER () FROM (VALUES (1, 9223372036854775807), (2, 1)) t(k, x)".to_string(),
    ];
    for sql in &overflowing {
        let e = match query(&ctx, sql).await {
            Ok(batches) => panic!("{sql}: answered {batches:?}"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("sum overflows ") || e.contains("Overflow"),
            "{sql}: {e}"
        );
    }
    for (sql, want) in [
        (
            "SELECT sum(x) FROM (VALUES (CAST(1.25 AS DECIMAL(10,2))), (CAST(-0.50 AS DECIMAL(10,2))), (NULL)) t(x)",
            vec![r#"["0.75"]"#],
        ),
        (
            "SELECT sum(x) FROM (VALUES (CAST(NULL AS DECIMAL(10,2)))) t(x)",
            vec!["[null]"],
        ),
        (
            "SELECT g, sum(x) FROM (VALUES (1, CAST('99999999999999999999999999999999999998' AS DECIMAL(38,0))), \
             (1, CAST(1 AS DECIMAL(38,0))), (2, CAST(-5 AS DECIMAL(38,0)))) t(g, x) GROUP BY g",
            vec![
                r#"[1,"99999999999999999999999999999999999999"]"#,
                r#"[2,"-5"]"#,
            ],
        ),
        (
            "SELECT sum(CAST(v AS DECIMAL(20,3)) / 1000) FROM generate_series(1, 20000) t(v)",
            vec![r#"["200010.0000000"]"#],
        ),
        // BIGINT: an overflow undone by a later value is exact, as is a sum of INTs past
        // INT's range.
        (
            "SELECT sum(v) FROM (VALUES (9223372036854775807), (1), (-2)) t(v)",
            vec!["[9223372036854775806]"],
        ),
        (
            "SELECT sum(CAST(v AS INT)) FROM generate_series(1, 100000) t(v)",
            vec!["[5000050000]"],
        ),
        (
            "SELECT v % 2, sum(v * 1000000000) FROM generate_series(1, 20000) t(v) GROUP BY v % 2",
            vec!["[0,100010000000000000]", "[1,100000000000000000]"],
        ),
        // Sliding frames: a frame leaving its NULLs and its large values.
        (
            "SELECT k, sum(v) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)              FROM (VALUES (1, 9223372036854775807), (2, -5), (3, CAST(NULL AS BIGINT)), (4, NULL),              (5, 7)) t(k, v)",
            vec![
                "[1,9223372036854775807]",
                "[2,9223372036854775802]",
                "[3,-5]",
                "[4,null]",
                "[5,7]",
            ],
        ),
        (
            "SELECT k, sum(v) OVER (ORDER BY k ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING)              FROM (VALUES (1, CAST(1.5 AS DECIMAL(10,2))), (2, CAST(-0.25 AS DECIMAL(10,2))),              (3, NULL), (4, CAST(2 AS DECIMAL(10,2)))) t(k, v)",
            vec![
                r#"[1,"1.25"]"#,
                r#"[2,"1.25"]"#,
                r#"[3,"3.25"]"#,
                r#"[4,"1.75"]"#,
            ],
        ),
    ] {
        assert_eq!(sorted_rows(&ctx, sql).await, want, "{sql}");
    }
}
