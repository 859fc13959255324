//! Growing functions and copied literals are bounded before Arrow allocates them
//! (`output_limits`): a call or a plan over the limit fails with `ResourcesExhausted` naming
//! what was too large, and everything under it answers exactly what DataFusion's built-ins
//! answer, with the same column names.
//!
//! The limit here is 1 MiB, so every case over it is cheap to try; the server's is a quarter of
//! its query memory limit.

use std::sync::Arc;

use arrow::util::pretty::pretty_format_batches;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::SessionContext;
use petrel_table_provider::output_limits::{
    BoundFunctionOutputs, LiteralCopies, bounded_scalar_functions,
};

const LIMIT: usize = 1 << 20;

/// A session as the server builds it, with a 1 MiB limit.
fn bounded_session() -> SessionContext {
    let mut state = SessionStateBuilder::new()
        .with_default_features()
        .with_analyzer_rule(Arc::new(BoundFunctionOutputs::new(
            bounded_scalar_functions(LIMIT),
        )))
        .with_optimizer_rule(Arc::new(LiteralCopies::new(LIMIT)))
        .build();
    petrel_table_provider::register_functions(&mut state, LIMIT).expect("register");
    SessionContext::new_with_state(state)
}

async fn answer(ctx: &SessionContext, sql: &str) -> datafusion::common::Result<String> {
    let batches = ctx.sql(sql).await?.collect().await?;
    Ok(pretty_format_batches(&batches)?.to_string())
}

#[tokio::test]
async fn calls_over_the_limit_are_refused_before_they_run() {
    let ctx = bounded_session();
    let refused = [
        ("SELECT repeat('x', 2000000000)", "repeat()"),
        ("SELECT repeat('ab', 600000)", "repeat()"),
        // Per row: 10 rows of 200 KB.
        (
            "SELECT length(repeat(CAST(v AS VARCHAR), 100000)) FROM generate_series(10, 19) t(v)",
            "repeat()",
        ),
        ("SELECT lpad('x', 2147483647)", "lpad()"),
        ("SELECT rpad('x', 400000, '€')", "rpad()"),
        // Every one of 2,000 characters replaced by 1,000.
        (
            "SELECT replace(repeat('a', 2000), 'a', repeat('b', 1000))",
            "replace()",
        ),
        (
            "SELECT regexp_replace(repeat('a', 2000), '.', repeat('b', 1000), 'g')",
            "regexp_replace()",
        ),
        (
            "SELECT cardinality(array_repeat(1, 2000000000))",
            "array_repeat()",
        ),
        (
            "SELECT cardinality(array_resize([1], 1000000))",
            "array_resize()",
        ),
        ("SELECT cardinality(range(1, 2000000000))", "range()"),
        (
            "SELECT cardinality(generate_series(1, 200000))",
            "generate_series()",
        ),
        (
            "SELECT cardinality(generate_series(DATE '1970-01-01', DATE '9999-01-01', \
             INTERVAL '1 day'))",
            "generate_series()",
        ),
        (
            "SELECT cardinality(range(TIMESTAMP '2020-01-01', TIMESTAMP '2021-01-01', \
             INTERVAL '1 second'))",
            "range()",
        ),
        // A step that mixes signs lands on the same date again (-1 month + 28 days from
        // March 1st): DataFusion's series never ends.
        (
            "SELECT cardinality(generate_series(DATE '2001-03-01', DATE '2000-01-01', \
             INTERVAL '-1 month 28 days'))",
            "step mixes signs",
        ),
        (
            "SELECT cardinality(range(TIMESTAMP '2001-03-01', TIMESTAMP '2100-01-01', \
             INTERVAL '1 month -30 days'))",
            "step mixes signs",
        ),
        (
            "SELECT length(array_to_string(range(1, 100000), repeat('-', 100)))",
            "array_to_string()",
        ),
        // A string doubled level after level: 64 KiB, …, 1 MiB, 2 MiB.
        (
            "WITH a AS (SELECT repeat('x', 65536) s), b AS (SELECT s || s s FROM a), \
             c AS (SELECT s || s s FROM b), d AS (SELECT s || s s FROM c), \
             e AS (SELECT s || s s FROM d), f AS (SELECT s || s s FROM e) \
             SELECT length(s) FROM f",
            "petrel_string_concat()",
        ),
        // The same with views (Parquet's strings are read as Utf8View), whose bytes Arrow's
        // slice size leaves out.
        (
            "WITH a AS (SELECT arrow_cast(v, 'Utf8View') s \
             FROM (VALUES (repeat('x', 65536)), (repeat('y', 65536))) t(v)), \
             b AS (SELECT s || s s FROM a), c AS (SELECT s || s s FROM b), \
             d AS (SELECT s || s s FROM c), e AS (SELECT s || s s FROM d), \
             f AS (SELECT s || s s FROM e) SELECT max(length(s)) FROM f",
            "petrel_string_concat()",
        ),
        (
            "WITH a AS (SELECT repeat('x', 400000) s) SELECT length(concat(s, s, s)) FROM a",
            "concat()",
        ),
        (
            "WITH a AS (SELECT repeat('x', 400000) s) \
             SELECT length(concat_ws(s, 'a', 'b', 'c', 'd')) FROM a",
            "concat_ws()",
        ),
        (
            "WITH a AS (SELECT range(0, 70000) l) \
             SELECT cardinality(array_concat(l, l)) FROM a",
            "array_concat()",
        ),
        (
            "WITH a AS (SELECT range(0, 70000) l) SELECT cardinality([l, l]) FROM a",
            "make_array()",
        ),
        (
            "SELECT length(encode(encode(repeat('x', 300000), 'hex'), 'hex'))",
            "encode()",
        ),
        (
            "WITH a AS (SELECT repeat('x', 300000) s), \
             b AS (SELECT overlay(s placing s from 1 for 0) s FROM a) \
             SELECT length(overlay(s placing s from 1 for 0)) FROM b",
            "overlay()",
        ),
        (
            "SELECT cardinality(array_replace_all(array_repeat('a', 10000), 'a', \
             repeat('y', 200)))",
            "array_replace_all()",
        ),
        (
            "SELECT max(length(to_char(t, repeat('%c', 20)))) \
             FROM (SELECT to_timestamp(v) t FROM generate_series(1, 2000) t(v))",
            "to_char()",
        ),
        // 'ΐ' is 2 bytes and its upper case 6.
        ("SELECT length(upper(repeat('ΐ', 200000)))", "upper()"),
        (
            "SELECT arrow_cast(NULL, 'FixedSizeList(2147483647, Int64)') IS NULL",
            "arrow_cast()",
        ),
        (
            "SELECT approx_percentile_cont(0.5, 1000000000) WITHIN GROUP (ORDER BY v) \
             FROM generate_series(1, 1000) t(v)",
            "a t-digest of 1000000000 centroids",
        ),
        (
            "SELECT approx_percentile_cont_with_weight(1, 0.5, 1000000000) \
             WITHIN GROUP (ORDER BY v) FROM generate_series(1, 1000) t(v)",
            "a t-digest of 1000000000 centroids",
        ),
        // Window functions make a value per row, each holding its frame.
        (
            "SELECT sum(cardinality(a)) FROM \
             (SELECT array_agg(v) OVER (ORDER BY v) a FROM generate_series(1, 2000) t(v))",
            "array_agg() as a window function",
        ),
        (
            "SELECT sum(length(a)) FROM (SELECT string_agg(CAST(v AS VARCHAR), ',') \
             OVER (ORDER BY v) a FROM generate_series(1, 2000) t(v))",
            "string_agg() as a window function",
        ),
    ];
    // A type nested deeper than parsing it can recurse.
    let nested = format!(
        "SELECT arrow_cast(NULL, '{}Int64{}') IS NULL",
        "List(".repeat(3000),
        ")".repeat(3000)
    );
    let e = answer(&ctx, &nested)
        .await
        .expect_err("nested type")
        .to_string();
    assert!(e.contains("nests 3000 levels deep"), "{e}");
    for (sql, function) in refused {
        match answer(&ctx, sql).await {
            Ok(rows) => panic!("{sql}: answered\n{rows}"),
            Err(e) => {
                let text = e.to_string();
                assert!(
                    matches!(
                        e.find_root(),
                        datafusion::error::DataFusionError::ResourcesExhausted(_)
                    ),
                    "{sql}: {text}"
                );
                assert!(
                    text.contains(function)
                        && (text.contains("1.0 MiB")
                            || function == "step mixes signs"
                            || function.starts_with("a t-digest")),
                    "{sql}: {text}"
                );
            }
        }
    }
}

#[tokio::test]
async fn literals_copied_into_many_rows_are_refused_and_others_are_not() {
    let ctx = bounded_session();
    let large = format!("'{}'", "x".repeat(1000));
    // 1,000 bytes × 8,192 rows of a batch is over 1 MiB.
    for sql in [
        format!("SELECT {large} FROM generate_series(1, 10000)"),
        format!("SELECT concat({large}, v) FROM generate_series(1, 10000) t(v)"),
        format!(
            "SELECT count(*) FROM generate_series(1, 10000) t(v) WHERE strpos({large}, CAST(v AS VARCHAR)) > 0"
        ),
        format!(
            "SELECT string_agg(CAST(v AS VARCHAR), {large}) FROM generate_series(1, 10000) t(v)"
        ),
    ] {
        let e = answer(&ctx, &sql).await.expect_err(&sql).to_string();
        assert!(
            e.contains("would be copied into each of up to 8192 rows")
                && e.contains("largest 1000 B"),
            "{sql}: {e}"
        );
    }
    // Written once per row, compared with, or in a plan of a few rows: answered.
    let single = format!("SELECT length({large})");
    assert!(answer(&ctx, &single).await.expect(&single).contains("1000"));
    let values = format!("SELECT length(v) FROM (VALUES ({large}), ({large})) t(v)");
    assert_eq!(
        answer(&ctx, &values)
            .await
            .expect(&values)
            .matches("1000")
            .count(),
        2
    );
    let compared = format!(
        "SELECT count(*) FROM generate_series(1, 10000) t(v) \
         WHERE CAST(v AS VARCHAR) = {large} OR CAST(v AS VARCHAR) LIKE {large} \
         OR CAST(v AS VARCHAR) IN ({large}, 'x')"
    );
    assert!(
        answer(&ctx, &compared)
            .await
            .expect(&compared)
            .contains("| 0 ")
    );
    // Computed over the rows a LIMIT lets through.
    let few = format!(
        "SELECT length(concat({large}, v)) FROM (SELECT v FROM generate_series(1, 100) t(v) \
         ORDER BY v LIMIT 3)"
    );
    assert_eq!(
        answer(&ctx, &few)
            .await
            .expect(&few)
            .matches("1001")
            .count(),
        3
    );
}

#[tokio::test]
async fn bounded_functions_answer_as_the_built_ins() {
    let bounded = bounded_session();
    let plain = SessionContext::new();
    let queries = [
        "SELECT repeat('ab', 3), repeat(NULL, 3), repeat('ab', -1), repeat('é', 2)",
        "SELECT lpad('ab', 5, 'xy'), rpad('ab', 5), lpad('abcdef', 3), rpad('€', 4, '€'), \
         lpad(NULL, 3), lpad('a', NULL)",
        "SELECT replace('aaa', 'a', 'bb'), replace('abc', '', 'X'), replace('abc', 'b', ''), \
         replace(NULL, 'a', 'b')",
        "SELECT regexp_replace('foobarbaz', 'b(..)', 'X\\1Y', 'g'), \
         regexp_replace('foobarbaz', 'b(..)', 'X\\1Y'), regexp_replace('ABC', 'b', 'x', 'gi')",
        "SELECT concat('a', NULL, 'b'), 'a' || NULL, 'a' || 'b' || 'c', concat_ws('-', 'a', NULL, 'b')",
        "SELECT v || '!' AS shout, 'x' || v FROM (VALUES ('a'), (NULL), ('c')) t(v)",
        "SELECT array_repeat(7, 3), array_repeat('ab', 2), array_repeat([1, 2], 2), \
         array_resize([1, 2], 4, 9), array_resize([1, 2, 3], 1)",
        "SELECT range(5), range(1, 10, 3), generate_series(1, 4), range(10, 1, -4), \
         generate_series(DATE '2020-01-30', DATE '2020-04-01', INTERVAL '1 month'), \
         range(TIMESTAMP '2020-01-01 00:00:00', TIMESTAMP '2020-01-01 03:00:00', INTERVAL '1 hour')",
        "SELECT array_to_string([1, NULL, 3], '-', 'n'), array_to_string([[1, 2], [3]], ','), \
         [1, 2] || [3], array_append([1], 2), array_prepend(0, [1]), make_array('a', 'b')",
        "SELECT v, repeat(v, v2), lpad(v, v2, '*'), replace(v, 'a', v), \
         regexp_replace(v, '(a)', '<\\1>', 'g'), range(v2) \
         FROM (VALUES ('banana', 2), ('a', 0), (NULL, 3), ('abc', NULL)) t(v, v2)",
        "SELECT array_agg(v) OVER (ORDER BY v), string_agg(CAST(v AS VARCHAR), '-') \
         OVER (ORDER BY v) FROM generate_series(1, 6) t(v) ORDER BY v",
        // One value per group, however large: the pool accounts for the state.
        "SELECT v % 3 AS g, cardinality(array_agg(v)), length(string_agg(CAST(v AS VARCHAR), '')), \
         array_agg(v ORDER BY v DESC)[1] FROM generate_series(1, 300000) t(v) GROUP BY v % 3 \
         ORDER BY g",
        "SELECT encode('ab', 'hex'), encode('ab', 'base64'), upper('aßΐ'), lower('ÀB'), \
         initcap('hello wORLD'), translate('abc', 'ab', 'xé'), \
         overlay('Txxxxas' placing 'hom' from 2 for 4), to_char(DATE '2020-01-02', '%Y/%m'), \
         array_replace_all([1, 2, 1], 1, 9), array_replace([1, 2, 1], 1, 9), \
         array_replace_n([1, 1, 1], 1, 9, 2), arrow_cast(1, 'Int32'), \
         arrow_cast(NULL, 'FixedSizeList(3, Int64)') IS NULL",
        "SELECT approx_percentile_cont(0.5, 1000) WITHIN GROUP (ORDER BY v), \
         approx_percentile_cont(0.25) WITHIN GROUP (ORDER BY v), \
         approx_percentile_cont_with_weight(2, 0.5, 500) WITHIN GROUP (ORDER BY v) \
         FROM generate_series(1, 1000) t(v)",
        // Each row's list counted by its own elements, not its array's.
        "SELECT sum(cardinality(array_repeat(range(v % 10), 2))), \
         sum(cardinality(array_concat(range(v % 7), range(v % 5)))) \
         FROM generate_series(1, 5000) t(v)",
        "SELECT sum(length(replace(CAST(v AS VARCHAR), '1', 'one'))), \
         sum(length(regexp_replace(CAST(v AS VARCHAR), '(.)', '\\1\\1', 'g'))) \
         FROM generate_series(1, 20000) t(v)",
    ];
    for sql in queries {
        let want = answer(&plain, sql).await.expect(sql);
        let got = answer(&bounded, sql).await.expect(sql);
        assert_eq!(got, want, "{sql}");
    }
}

/// Over-counting where the exact count is cheap would refuse what fits: a `replace` or a
/// `regexp_replace` whose loose bound (a match at every position) is over the limit but whose
/// matches are few runs.
#[tokio::test]
async fn replacements_are_bounded_by_their_matches() {
    let ctx = bounded_session();
    for sql in [
        // 600 KB of text with 3 'b's, each replaced by 1,000 characters.
        "WITH a AS (SELECT concat(repeat('a', 600000), 'bbb') s) \
         SELECT length(replace(s, 'b', repeat('c', 1000))) FROM a",
        "WITH a AS (SELECT concat(repeat('a', 600000), 'bbb') s) \
         SELECT length(regexp_replace(s, 'b', repeat('c', 1000), 'g')) FROM a",
        // ASCII keeps its size in another case (the loose bound is 3 times it).
        "WITH a AS (SELECT concat(repeat('a', 600000), 'bbb') s) \
         SELECT length(upper(s)) + 2997 FROM a",
    ] {
        let rows = answer(&ctx, sql).await.expect(sql);
        assert!(rows.contains("603000"), "{sql}: {rows}");
    }
}
