//! Integer and decimal `+`, `-`, `*` and unary `-` fail on overflow (`checked_arithmetic`):
//! DataFusion 53 wraps them around (`9223372036854775807 * 9223372036854775807` answered 1)
//! and lets a decimal result outgrow its precision. Everything that fits answers exactly what
//! DataFusion's operators answer, with the same column names and types.

use std::sync::Arc;

use arrow::util::pretty::pretty_format_batches;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use petrel_table_provider::checked_arithmetic::CheckArithmetic;

/// A session with the rule, or DataFusion's own, both parsing `1.5` as a decimal as the
/// server does.
fn session(checked: bool) -> SessionContext {
    let mut config = SessionConfig::new();
    config.options_mut().sql_parser.parse_float_as_decimal = true;
    let mut builder = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features();
    if checked {
        builder = builder.with_analyzer_rule(Arc::new(CheckArithmetic::new()));
    }
    SessionContext::new_with_state(builder.build())
}

/// The answer as a table with its column names and types.
async fn answer(ctx: &SessionContext, sql: &str) -> datafusion::common::Result<String> {
    let df = ctx.sql(sql).await?;
    let types: Vec<String> = df
        .schema()
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect();
    let batches = df.collect().await?;
    Ok(format!(
        "{}\n{}",
        types.join(", "),
        pretty_format_batches(&batches)?
    ))
}

const NINES: &str = "CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0))";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflowing_arithmetic_fails_instead_of_wrapping() {
    let checked = session(true);
    let unchecked = session(false);
    let overflowing = [
        "SELECT v * v FROM (VALUES (9223372036854775807)) t(v)".to_string(),
        "SELECT v + 1 FROM (VALUES (9223372036854775807)) t(v)".to_string(),
        "SELECT v - 2 FROM (VALUES (-9223372036854775807)) t(v)".to_string(),
        "SELECT -v FROM (VALUES (-9223372036854775807 - 1)) t(v)".to_string(),
        "SELECT a + b FROM (VALUES (CAST(2147483647 AS INT), CAST(1 AS INT))) t(a, b)".to_string(),
        "SELECT a * b FROM (VALUES (CAST(32767 AS SMALLINT), CAST(2 AS SMALLINT))) t(a, b)"
            .to_string(),
        // Folded as constants, then failing when run.
        "SELECT CAST(2147483647 AS INT) + CAST(1 AS INT)".to_string(),
        // Within i128, past 38 digits.
        format!("SELECT v + 1 FROM (VALUES ({NINES})) t(v)"),
        format!("SELECT v * 10 FROM (VALUES ({NINES})) t(v)"),
        format!("SELECT -v - v FROM (VALUES ({NINES})) t(v)"),
        // The 20th of 20,000 rows overflows; in a filter; in an aggregate's argument.
        "SELECT max(v * 461168601842738790) FROM generate_series(1, 20000) t(v)".to_string(),
        "SELECT count(*) FROM generate_series(1, 20000) t(v) WHERE v * 461168601842738790 > 0"
            .to_string(),
        "SELECT v % 7, sum(v * 461168601842738790) FROM generate_series(1, 20000) t(v) \
         GROUP BY v % 7"
            .to_string(),
        // In a subquery and a join condition.
        "SELECT (SELECT max(x) * 4 FROM (VALUES (4611686018427387904)) s(x))".to_string(),
        "SELECT count(*) FROM (VALUES (9223372036854775807)) a(x) JOIN (VALUES (1)) b(y) \
         ON a.x + b.y = 0"
            .to_string(),
    ];
    for sql in &overflowing {
        match answer(&checked, sql).await {
            Ok(rows) => panic!("{sql}: answered\n{rows}"),
            Err(e) => assert!(
                e.to_string().to_lowercase().contains("overflow"),
                "{sql}: {e}"
            ),
        }
    }
    // DataFusion alone answers the first (wrong): the test sees the rule's work.
    let wrapped = answer(&unchecked, &overflowing[0]).await.expect("answered");
    assert!(wrapped.contains("| 1 "), "{wrapped}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arithmetic_that_fits_answers_as_datafusion_does() {
    let checked = session(true);
    let unchecked = session(false);
    for sql in [
        "SELECT v * 3, v + 1, v - 10, -v, v * -v FROM (VALUES (1), (-7), (NULL), \
         (3037000499)) t(v)",
        "SELECT a + b, a - b, a * b, -a FROM (VALUES (CAST(2147483646 AS INT), CAST(1 AS INT)), \
         (CAST(-5 AS INT), CAST(NULL AS INT))) t(a, b)",
        "SELECT a + b, a * b, a - 1, b * 2 FROM (VALUES (CAST(32766 AS SMALLINT), \
         CAST(1 AS TINYINT))) t(a, b)",
        "SELECT d * d, d + 1, d - 0.005, -d, d * 3 FROM (VALUES (CAST(12.34 AS DECIMAL(10,2))), \
         (CAST(-0.01 AS DECIMAL(10,2))), (NULL)) t(d)",
        &format!(
            "SELECT v - 1, v + 0, -v FROM (VALUES ({NINES}), \
             (CAST('-99999999999999999999999999999999999998' AS DECIMAL(38,0)))) t(v)"
        ),
        "SELECT v * 1.5, v + 0.25, v * 2.5e0 FROM (VALUES (4), (-3)) t(v)",
        // Other types keep DataFusion's operators.
        "SELECT f * CAST('1e308' AS DOUBLE), f + 1, DATE '2020-02-28' + INTERVAL '2 days', \
         TIMESTAMP '2020-01-01 00:00:00' - INTERVAL '1 hour', DATE '2020-03-01' - DATE '2020-01-01' \
         FROM (VALUES (CAST(10 AS DOUBLE))) t(f)",
        "SELECT v + 1 AS next, count(*) FROM generate_series(1, 1000) t(v) \
         GROUP BY v + 1 HAVING (v + 1) * 2 > 1990 ORDER BY v + 1",
        "SELECT v % 3 AS g, sum(v * 2), avg(v + 1), max(-v) FROM generate_series(1, 10000) t(v) \
         GROUP BY v % 3 ORDER BY g",
        "SELECT v, sum(v * v) OVER (ORDER BY v ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) \
         FROM generate_series(1, 6) t(v) ORDER BY v + 0",
        "SELECT t.v FROM (VALUES (1), (2), (3)) t(v) WHERE EXISTS \
         (SELECT 1 FROM (VALUES (10), (20)) s(x) WHERE s.x = t.v * 10) ORDER BY t.v",
        "SELECT t.v FROM (VALUES (1), (5), (15)) t(v) WHERE t.v + 5 IN \
         (SELECT x * 2 FROM (VALUES (5), (10)) s(x)) ORDER BY t.v",
        "SELECT a.x, b.y FROM (VALUES (1), (2), (3)) a(x) JOIN (VALUES (2), (4)) b(y) \
         ON a.x * 2 = b.y ORDER BY a.x",
        "SELECT CASE WHEN v > 2 THEN v * 100 ELSE v - 100 END FROM generate_series(1, 4) t(v)",
    ] {
        let want = answer(&unchecked, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let got = answer(&checked, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(got, want, "{sql}");
    }
}

/// `a + 1` of a sorted `a` is sorted: a plan ordering by it needs no sort of its own (one
/// `SortExec`, the inner TopK; a second when the order is lost), as with
/// DataFusion's operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sums_and_differences_keep_their_operands_order() {
    let ctx = session(true);
    let sql = "EXPLAIN SELECT * FROM (SELECT v + 1 AS w FROM \
               (SELECT v FROM generate_series(1, 100000) t(v) ORDER BY v LIMIT 50000)) ORDER BY w";
    let plan = answer(&ctx, sql).await.expect("explained");
    assert!(plan.contains("petrel_checked_add"), "{plan}");
    let physical = plan.split("physical_plan").nth(1).unwrap_or_default();
    assert_eq!(physical.matches("SortExec").count(), 1, "{plan}");
}

/// A chain of operators becomes calls nested as deep as it is long, which DataFusion plans in
/// time cubic in the depth: at most 128 nested calls are planned (quickly), a longer chain fails
/// at once, in about the time DataFusion takes to plan the operators themselves. Before the cap,
/// 400 `+` took 26 s to plan (release build, 0.6 s as DataFusion's operators).
#[test]
fn long_operator_chains_plan_quickly_or_are_refused() {
    // DataFusion's SQL planner recurses once per operator: on a larger stack, as the server
    // plans (a test thread's 2 MiB overflow on a debug build).
    let planner = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let chain = |n: usize| {
                    let terms = vec!["v"; n].join(" + ");
                    format!("SELECT {terms} FROM generate_series(1, 3) t(v) ORDER BY 1")
                };
                let ctx = session(true);
                // 128 terms: 127 operators.
                let answered = answer(&ctx, &chain(128)).await.expect("128 terms");
                assert!(answered.contains("| 384 "), "{answered}");
                // 400 terms: refused in about the time DataFusion alone takes to plan them
                // (not the minutes 400 nested calls take on a debug build).
                let started = std::time::Instant::now();
                let plain = answer(&session(false), &chain(400))
                    .await
                    .expect("DataFusion");
                assert!(plain.contains("| 1200 "), "{plain}");
                let datafusion = started.elapsed();
                let started = std::time::Instant::now();
                let refused = answer(&ctx, &chain(400)).await.expect_err("400 terms");
                assert!(
                    refused.to_string().contains("nests more than 128"),
                    "{refused}"
                );
                let refusal = started.elapsed();
                assert!(
                    refusal < datafusion * 3 + std::time::Duration::from_secs(2),
                    "refused in {refusal:?}, DataFusion planned in {datafusion:?}"
                );
            })
        })
        .expect("planner thread");
    if let Err(panic) = planner.join() {
        std::panic::resume_unwind(panic);
    }
}
