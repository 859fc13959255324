//! `sum` of integers and decimals fails when the total overflows its type instead of wrapping
//! around (DataFusion 53 answered -140282366920938463463374607431768211458 for two 38-digit
//! nines, -9223372036854775808 for `BIGINT` 9223372036854775807 + 1), grouped or not, within
//! one batch or across partial sums, over window frames and `DISTINCT`; so does `avg` of
//! decimals. Totals and averages that fit are exact.

use crate::common::{query, session, sorted_rows};

// (Long integers are cast from strings: this session parses a number too long for an i64 as a
// double.)

const NINES: &str = "CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0))";
/// 2^126, a 38-digit decimal: four of them sum to 2^128, which wraps around to 0 in an i128.
const P126: &str = "CAST('85070591730234615865843651857942052864' AS DECIMAL(38,0))";

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

/// Statements DataFusion's own `sum` and `avg` answer with a wrapped total: Petrel's fail.
fn wrapping_distinct_sums_and_averages() -> Vec<String> {
    vec![
        // Two DISTINCT arguments: not rewritten into a grouping, the distinct accumulator sums.
        "SELECT sum(DISTINCT v), sum(DISTINCT w) FROM (VALUES (9223372036854775807, 1), (1, 2)) t(v, w)"
            .to_string(),
        "SELECT g, sum(DISTINCT v), count(DISTINCT w) \
         FROM (VALUES (1, 9223372036854775807, 1), (1, 1, 2), (2, 3, 3)) t(g, v, w) GROUP BY g"
            .to_string(),
        format!(
            "SELECT sum(DISTINCT x), sum(DISTINCT y) \
             FROM (VALUES ({NINES}, 1), (CAST(1 AS DECIMAL(38,0)), 2)) t(x, y)"
        ),
        // DISTINCT over window frames: sliding, whole partition.
        "SELECT sum(DISTINCT v) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) \
         FROM (VALUES (1, 9223372036854775807), (2, 1)) t(k, v)"
            .to_string(),
        "SELECT sum(DISTINCT v) OVER () FROM (VALUES (1, 9223372036854775807), (2, 1)) t(k, v)"
            .to_string(),
        // Decimal averages: ungrouped, grouped, over partitions, DISTINCT. Four values of
        // 2^126 (38 digits) sum to 2^128, which wraps to 0: DataFusion answered 0.
        format!("SELECT avg(x) FROM (VALUES ({P126}), ({P126}), ({P126}), ({P126})) t(x)"),
        format!(
            "SELECT g, avg(x) FROM (VALUES (1, {P126}), (1, {P126}), (1, {P126}), (1, {P126}), \
             (2, CAST(1 AS DECIMAL(38,0)))) t(g, x) GROUP BY g"
        ),
        format!("SELECT avg({P126} + v - v) FROM generate_series(1, 20000) t(v)"),
        format!("SELECT v % 2, avg({P126} + v - v) FROM generate_series(1, 20000) t(v) GROUP BY v % 2"),
        format!(
            "SELECT avg(DISTINCT x), count(DISTINCT y) FROM (VALUES ({P126}, 1), ({P126} + 1, 2), \
             ({P126} + 2, 3), ({P126} - 3, 4)) t(x, y)"
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distinct_sums_and_decimal_averages_fail_on_overflow() {
    let ctx = session(vec![]);
    let datafusion = datafusion::prelude::SessionContext::new();
    // A sliding frame of two 38-digit nines: DataFusion fails too, on its average's check
    // ("Arithmetic Overflow in AvgAccumulator"), after wrapping its sum.
    let sliding = format!(
        "SELECT avg(x) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) \
         FROM (VALUES (1, {NINES}), (2, {NINES})) t(k, x)"
    );
    let wrapping = wrapping_distinct_sums_and_averages();
    for sql in wrapping.iter().chain([&sliding]) {
        // DataFusion's own functions answer these (wrongly): the refusals are Petrel's.
        if *sql != sliding
            && let Err(e) = datafusion.sql(sql).await.unwrap().collect().await
        {
            panic!("{sql}: DataFusion's own functions now refuse it ({e}): drop the wrapper?");
        }
        let e = match query(&ctx, sql).await {
            Ok(batches) => panic!("{sql}: answered {batches:?}"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(" overflows"), "{sql}: {e}");
    }
    let bigint_max = "9223372036854775807";
    for (sql, want) in [
        // Distinct values whose order could overflow on the way: exact.
        (
            format!(
                "SELECT sum(DISTINCT v), sum(DISTINCT w) FROM (VALUES ({bigint_max}, 1), \
                 ({bigint_max}, 1), (1, 2), (-2, NULL)) t(v, w)"
            ),
            vec!["[9223372036854775806,3]"],
        ),
        (
            "SELECT g, sum(DISTINCT x), count(DISTINCT y) FROM (VALUES \
                 (1, CAST('99999999999999999999999999999999999998' AS DECIMAL(38,0)), 1), \
                 (1, CAST(1 AS DECIMAL(38,0)), 2), (1, CAST(1 AS DECIMAL(38,0)), 3), \
                 (2, NULL, 1)) t(g, x, y) GROUP BY g"
                .to_string(),
            vec![
                r#"[1,"99999999999999999999999999999999999999",3]"#,
                "[2,null,1]",
            ],
        ),
        (
            "SELECT avg(x) FROM (VALUES (CAST(1.25 AS DECIMAL(10,2))), (CAST(-0.50 AS DECIMAL(10,2))), \
             (NULL)) t(x)"
                .to_string(),
            vec![r#"["0.375000"]"#],
        ),
        (
            "SELECT avg(x) FROM (VALUES (CAST(NULL AS DECIMAL(10,2)))) t(x)".to_string(),
            vec!["[null]"],
        ),
        (
            "SELECT g, avg(x) FROM (VALUES (1, CAST('1000000000000000000000000000000000' AS DECIMAL(38,0))), \
             (1, CAST(3 AS DECIMAL(38,0))), (2, CAST(-5 AS DECIMAL(38,0))), (3, NULL)) t(g, x) GROUP BY g"
                .to_string(),
            vec![
                r#"[1,"500000000000000000000000000000001.5000"]"#,
                r#"[2,"-5.0000"]"#,
                "[3,null]",
            ],
        ),
        (
            "SELECT avg(CAST(v AS DECIMAL(20,2))) FROM generate_series(1, 20000) t(v)".to_string(),
            vec![r#"["10000.500000"]"#],
        ),
        (
            "SELECT v % 2, avg(CAST(v AS DECIMAL(20,2))) FROM generate_series(1, 20000) t(v) GROUP BY v % 2"
                .to_string(),
            vec![r#"[0,"10001.000000"]"#, r#"[1,"10000.000000"]"#],
        ),
        (
            "SELECT avg(DISTINCT x), count(DISTINCT y) FROM (VALUES (CAST(1.5 AS DECIMAL(10,1)), 1), \
             (CAST(1.5 AS DECIMAL(10,1)), 2), (CAST(2.5 AS DECIMAL(10,1)), 2), (NULL, 3)) t(x, y)"
                .to_string(),
            vec![r#"["2.00000",3]"#],
        ),
        // Sliding frames leaving NULLs and values.
        (
            format!(
                "SELECT k, sum(DISTINCT v) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) \
                 FROM (VALUES (1, 5), (2, 5), (3, CAST(NULL AS BIGINT)), (4, NULL), (5, {bigint_max}), \
                 (6, -1)) t(k, v)"
            ),
            vec![
                "[1,5]",
                "[2,5]",
                "[3,5]",
                "[4,null]",
                "[5,9223372036854775807]",
                "[6,9223372036854775806]",
            ],
        ),
        (
            "SELECT k, avg(x) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) \
             FROM (VALUES (1, CAST(1.5 AS DECIMAL(10,1))), (2, NULL), (3, NULL), \
             (4, CAST(2.5 AS DECIMAL(10,1))), (5, CAST(-0.5 AS DECIMAL(10,1)))) t(k, x)"
                .to_string(),
            vec![
                r#"[1,"1.50000"]"#,
                r#"[2,"1.50000"]"#,
                "[3,null]",
                r#"[4,"2.50000"]"#,
                r#"[5,"1.00000"]"#,
            ],
        ),
    ] {
        assert_eq!(sorted_rows(&ctx, &sql).await, want, "{sql}");
    }
}
