//! `sum` of decimals fails when the total overflows its type instead of wrapping around
//! (DataFusion 53 answered -140282366920938463463374607431768211458 for two 38-digit nines),
//! grouped or not, within one batch or across partial sums; totals that fit are exact.

use crate::common::{query, session, sorted_rows};

// (Long integers are cast from strings: this session parses a number too long for an i64 as a
// double.)

const NINES: &str = "CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0))";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimal_sums_fail_on_overflow_and_are_exact_otherwise() {
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
    ];
    for sql in &overflowing {
        let e = match query(&ctx, sql).await {
            Ok(batches) => panic!("{sql}: answered {batches:?}"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("sum overflows DECIMAL(38,0)") || e.contains("Overflow"),
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
    ] {
        assert_eq!(sorted_rows(&ctx, sql).await, want, "{sql}");
    }
}
