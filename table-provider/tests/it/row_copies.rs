//! Joins, windows and `unnest` copy one row into many output rows; `BoundRowCopies` guards
//! their inputs so that a batch of copies stays within the limit: over it the statement fails
//! with `ResourcesExhausted` naming the operator, under it every statement answers exactly what
//! DataFusion answers without the rule.
//!
//! Here batches have 1,024 rows and the limit is 16 MiB: a joined row may hold 16 KiB.

use std::sync::Arc;

use arrow::util::pretty::pretty_format_batches;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::displayable;
use datafusion::prelude::{SessionConfig, SessionContext};
use petrel_table_provider::output_limits::BoundRowCopies;

const LIMIT: usize = 16 << 20;

/// A session with 1,024-row batches, guarded (or not), hash joins preferred (or not).
fn session(guarded: bool, prefer_hash_join: bool) -> SessionContext {
    let mut config = SessionConfig::new().with_batch_size(1024);
    config.options_mut().optimizer.prefer_hash_join = prefer_hash_join;
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features();
    if guarded {
        state = state.with_physical_optimizer_rule(Arc::new(BoundRowCopies::new(LIMIT)));
    }
    SessionContext::new_with_state(state.build())
}

async fn answer(ctx: &SessionContext, sql: &str) -> datafusion::common::Result<String> {
    let batches = ctx.sql(sql).await?.collect().await?;
    Ok(pretty_format_batches(&batches)?.to_string())
}

/// `n` rows `v` 1..=n with a string `s` of `big` bytes at v = 1 and of 1 byte elsewhere
/// (computed per row, so not folded into a literal).
fn rows(n: usize, big: usize) -> String {
    format!(
        "(SELECT v, repeat('x', CASE WHEN v = 1 THEN {big} ELSE 1 END) s \
         FROM generate_series(1, {n}) g(v))"
    )
}

#[tokio::test]
async fn copies_over_the_limit_are_refused_naming_the_operator() {
    let guarded = session(true, true);
    let merge = session(true, false);
    let unguarded = session(false, true);
    // Each statement: what the guard names, and the session that plans the operator.
    let cases = [
        // A 20 KB row, 1,024 times: 20 MB.
        (
            format!(
                "SELECT count(*), sum(length(a.s)) FROM {} a CROSS JOIN generate_series(1, 2000) b",
                rows(1, 20_000)
            ),
            "a cross join",
            &guarded,
        ),
        (
            format!(
                "SELECT count(*), sum(length(a.s)) FROM {} a JOIN {} b ON a.v % 2 = b.v % 2",
                rows(3, 20_000),
                rows(2000, 1)
            ),
            "a hash join",
            &guarded,
        ),
        (
            format!(
                "SELECT count(*), sum(length(a.s)) FROM {} a JOIN {} b ON a.v < b.v",
                rows(3, 20_000),
                rows(2000, 1)
            ),
            "a nested-loop join",
            &guarded,
        ),
        (
            format!(
                "SELECT count(*), sum(length(a.s)) FROM {} a JOIN {} b ON a.v % 2 = b.v % 2",
                rows(3, 20_000),
                rows(2000, 1)
            ),
            "a sort-merge join",
            &merge,
        ),
        // The frame's maximum lands in every row.
        (
            format!(
                "SELECT sum(length(m)) FROM (SELECT max(s) OVER (ORDER BY v) m FROM {})",
                rows(2000, 20_000)
            ),
            "a window function",
            &guarded,
        ),
        // A whole partition in one batch: 2,000 rows × 10 KB.
        (
            format!(
                "SELECT sum(length(m)) FROM (SELECT first_value(s) OVER () m FROM {})",
                rows(2000, 10_000)
            ),
            "a window function",
            &guarded,
        ),
        // 200 elements × 100 KB: 20 MB.
        (
            format!(
                "SELECT count(*), sum(length(s)) FROM \
                 (SELECT unnest(range(0, 200)) e, s FROM {})",
                rows(1, 100_000)
            ),
            "unnest",
            &guarded,
        ),
    ];
    for (sql, operator, ctx) in &cases {
        let e = answer(ctx, sql).await.expect_err(sql).to_string();
        assert!(
            e.contains("Resources exhausted")
                && e.contains(&format!("{operator} would copy"))
                && e.contains("16.0 MiB a query may use"),
            "{sql}: {e}"
        );
        // Without the guard DataFusion answers them (they are small enough here): the
        // guard's refusal, not DataFusion's, failed them.
        answer(&unguarded, sql).await.expect(sql);
    }
}

#[tokio::test]
async fn copies_within_the_limit_answer_as_without_the_guard() {
    let guarded = session(true, true);
    let merge = session(true, false);
    let unguarded = session(false, true);
    let statements = [
        // 12 KB rows joined: under 16 KiB a row.
        format!(
            "SELECT a.v, b.v, length(a.s), length(b.s) FROM {} a JOIN {} b ON a.v % 3 = b.v % 3 \
             ORDER BY a.v, b.v",
            rows(20, 12_000),
            rows(30, 1)
        ),
        format!(
            "SELECT a.v, count(*), sum(length(b.s)) FROM {} a JOIN {} b ON a.v <= b.v \
             GROUP BY a.v ORDER BY a.v",
            rows(20, 1),
            rows(3000, 100)
        ),
        format!(
            "SELECT count(*), sum(length(a.s)), sum(b.w) FROM {} a \
             CROSS JOIN generate_series(1, 3000) b(w)",
            rows(2, 15_000)
        ),
        format!(
            "SELECT a.v, length(a.s) FROM {} a LEFT JOIN {} b ON a.v = b.v * 7 \
             WHERE b.v IS NULL ORDER BY a.v",
            rows(30, 5_000),
            rows(3, 1)
        ),
        // Fewer pairs of rows than a batch holds: 10 copies of 1 MB.
        format!(
            "SELECT count(*), sum(length(a.s)) FROM {} a CROSS JOIN generate_series(1, 10) b",
            rows(1, 1_000_000)
        ),
        format!(
            "SELECT v, length(max(s) OVER (ORDER BY v)) FROM {} ORDER BY v",
            rows(10, 1_000_000)
        ),
        // Windows: fixed-width answers are not copies of the strings.
        format!(
            "SELECT v, row_number() OVER (ORDER BY v DESC), length(s) FROM {} ORDER BY v",
            rows(50, 1_000_000)
        ),
        format!(
            "SELECT v, length(max(s) OVER (ORDER BY v)), length(first_value(s) OVER ()) \
             FROM {} ORDER BY v",
            rows(500, 6_000)
        ),
        format!(
            "SELECT v, length(lag(s) OVER (ORDER BY v)) FROM {} ORDER BY v",
            rows(100, 15_000)
        ),
        // 100 elements × 100 KB: 10 MB.
        format!(
            "SELECT count(*), sum(length(s)), sum(e) FROM \
             (SELECT unnest(range(0, 100)) e, s FROM {})",
            rows(3, 100_000)
        ),
        "SELECT k, unnest(l) FROM (VALUES (1, [1, 2, 3]), (2, []), (3, NULL), (4, [4])) t(k, l) \
         ORDER BY 1, 2"
            .to_string(),
    ];
    for sql in &statements {
        let expected = answer(&unguarded, sql).await.expect(sql);
        assert_eq!(answer(&guarded, sql).await.expect(sql), expected, "{sql}");
        assert_eq!(answer(&merge, sql).await.expect(sql), expected, "{sql}");
    }
}

/// The guards sit on the inputs of copying operators whose rows can be of any size, and only
/// there.
#[tokio::test]
async fn guards_sit_only_where_rows_of_any_size_are_copied() {
    let ctx = session(true, true);
    let plan = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            let frame = ctx.sql(sql).await.expect(sql);
            let plan = frame.create_physical_plan().await.expect(sql);
            displayable(plan.as_ref()).indent(false).to_string()
        }
    };
    let ints = plan(
        "SELECT a.v, b.v FROM generate_series(1, 10) a(v) JOIN generate_series(1, 10) b(v) \
         ON a.v = b.v",
    )
    .await;
    assert!(!ints.contains("CopyGuardExec"), "{ints}");
    let strings = plan(
        "SELECT a.v, b.s FROM generate_series(1, 10) a(v) \
         JOIN (SELECT v, CAST(v AS VARCHAR) s FROM generate_series(1, 10) g(v)) b ON a.v = b.v",
    )
    .await;
    assert_eq!(
        strings.matches("CopyGuardExec: a hash join").count(),
        2,
        "{strings}"
    );
    let ranked = plan(
        "SELECT row_number() OVER (ORDER BY v) FROM \
         (SELECT v, CAST(v AS VARCHAR) s FROM generate_series(1, 10) g(v))",
    )
    .await;
    assert!(!ranked.contains("CopyGuardExec"), "{ranked}");
    let unnested = plan("SELECT unnest(range(1, v)) FROM generate_series(1, 10) g(v)").await;
    assert_eq!(
        unnested.matches("CopyGuardExec: unnest").count(),
        1,
        "{unnested}"
    );
}
