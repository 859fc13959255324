//! GetSqlInfo tells the truth: every value the server reports, asserted exactly, and each value
//! SQL can check checked by running SQL on the real server (identifier case and quoting,
//! keywords, functions, CAST conversions, LIKE escapes, null ordering, GROUP BY / ORDER BY,
//! subqueries, joins, unions). `--read-only` turns the write-related values off.

use crate::common;

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, AsArray, UnionArray};
use arrow::datatypes::{Int32Type, Int64Type, UInt32Type};
use arrow_flight::sql::SqlInfo;
use common::{Petrel, corpus_warehouse, fetch, query};
use tonic::Code;

/// One SqlInfo value.
#[derive(Debug, Clone, PartialEq)]
enum V {
    S(String),
    B(bool),
    I64(i64),
    I32(i32),
    L(Vec<String>),
    M(BTreeMap<i32, Vec<i32>>),
}

type Client = arrow_flight::sql::client::FlightSqlServiceClient<tonic::transport::Channel>;

async fn sql_info(client: &mut Client) -> HashMap<u32, V> {
    let info = client.get_sql_info(vec![]).await.unwrap();
    let batches = fetch(client, &info).await.unwrap();
    let mut out = HashMap::new();
    for b in &batches {
        let names = b.column(0).as_primitive::<UInt32Type>();
        let values = b.column(1).as_any().downcast_ref::<UnionArray>().unwrap();
        for i in 0..b.num_rows() {
            let (ty, at) = (values.type_id(i), values.value_offset(i));
            let child = values.child(ty);
            let v = match ty {
                0 => V::S(child.as_string::<i32>().value(at).to_string()),
                1 => V::B(child.as_boolean().value(at)),
                2 => V::I64(child.as_primitive::<Int64Type>().value(at)),
                3 => V::I32(child.as_primitive::<Int32Type>().value(at)),
                4 => {
                    let list = child.as_list::<i32>().value(at);
                    let s = list.as_string::<i32>();
                    V::L((0..s.len()).map(|j| s.value(j).to_string()).collect())
                }
                5 => {
                    let map = child.as_map().value(at);
                    let keys = map.column(0).as_primitive::<Int32Type>();
                    let values = map.column(1).as_list::<i32>();
                    V::M(
                        (0..keys.len())
                            .map(|j| {
                                let l = values.value(j);
                                let l = l.as_primitive::<Int32Type>();
                                (keys.value(j), l.values().to_vec())
                            })
                            .collect(),
                    )
                }
                other => panic!("unknown union type {other}"),
            };
            out.insert(names.value(i), v);
        }
    }
    out
}

fn bits(ns: &[i32]) -> V {
    V::I32(ns.iter().map(|n| 1 << n).sum())
}

/// Every value the server reports, as it must be (`read_only`: the `--read-only` server).
fn expected(read_only: bool) -> HashMap<u32, V> {
    use SqlInfo as I;
    let s = |t: &str| V::S(t.to_string());
    let list = |xs: &[&str]| V::L(xs.iter().map(|x| x.to_string()).collect());
    let mut m: HashMap<u32, V> = HashMap::new();
    let mut put = |k: I, v: V| {
        m.insert(k as u32, v);
    };
    put(I::FlightSqlServerName, s("Petrel"));
    put(I::FlightSqlServerArrowVersion, s("58.4"));
    put(I::FlightSqlServerReadOnly, V::B(read_only));
    put(I::FlightSqlServerSql, V::B(true));
    put(I::FlightSqlServerSubstrait, V::B(false));
    put(I::FlightSqlServerTransaction, V::I32(0));
    put(I::FlightSqlServerCancel, V::B(true));
    put(I::FlightSqlServerBulkIngestion, V::B(!read_only));
    put(I::FlightSqlServerIngestTransactionsSupported, V::B(false));
    put(I::FlightSqlServerStatementTimeout, V::I32(0));
    put(I::FlightSqlServerTransactionTimeout, V::I32(0));
    put(I::SqlDdlCatalog, V::B(false));
    put(I::SqlDdlSchema, V::B(!read_only));
    put(I::SqlDdlTable, V::B(!read_only));
    put(I::SqlIdentifierCase, V::I32(3)); // LOWERCASE
    put(I::SqlIdentifierQuoteChar, s("\""));
    put(I::SqlQuotedIdentifierCase, V::I32(0)); // UNKNOWN: ODBC's SQL_IC_SENSITIVE
    put(I::SqlAllTablesAreSelectable, V::B(true));
    put(I::SqlNullOrdering, V::I32(0)); // SORTED_HIGH
    put(I::SqlKeywords, list(KEYWORDS));
    put(I::SqlNumericFunctions, list(NUMERIC_FUNCTIONS));
    put(I::SqlStringFunctions, list(STRING_FUNCTIONS));
    put(I::SqlSystemFunctions, list(SYSTEM_FUNCTIONS));
    put(I::SqlDatetimeFunctions, list(DATETIME_FUNCTIONS));
    put(I::SqlSearchStringEscape, s("\\"));
    put(I::SqlExtraNameCharacters, s("@$#"));
    put(I::SqlSupportsColumnAliasing, V::B(true));
    put(I::SqlNullPlusNullIsNull, V::B(true));
    put(I::SqlSupportsTableCorrelationNames, V::B(true));
    put(I::SqlSupportsDifferentTableCorrelationNames, V::B(false));
    put(I::SqlSupportsExpressionsInOrderBy, V::B(true));
    put(I::SqlSupportsOrderByUnrelated, V::B(true));
    put(I::SqlSupportedGroupBy, bits(&[0, 1])); // unrelated, beyond select
    put(I::SqlSupportsLikeEscapeClause, V::B(false));
    put(I::SqlSupportsNonNullableColumns, V::B(true));
    put(I::SqlSupportedGrammar, bits(&[0])); // ODBC minimum only
    put(I::SqlAnsi92SupportedLevel, bits(&[0])); // entry only
    put(I::SqlSupportsIntegrityEnhancementFacility, V::B(false));
    put(I::SqlOuterJoinsSupportLevel, V::I32(2)); // full outer joins
    put(I::SqlSchemaTerm, s("schema"));
    put(I::SqlProcedureTerm, s("procedure"));
    put(I::SqlCatalogTerm, s("catalog"));
    put(I::SqlCatalogAtStart, V::B(true));
    put(I::SqlSchemasSupportedActions, V::I32(0));
    put(I::SqlCatalogsSupportedActions, V::I32(0));
    put(I::SqlSupportedPositionedCommands, V::I32(0));
    put(I::SqlSelectForUpdateSupported, V::B(false));
    put(I::SqlStoredProceduresSupported, V::B(false));
    put(I::SqlSupportedSubqueries, bits(&[0, 1, 2])); // comparisons, EXISTS, IN
    put(I::SqlCorrelatedSubqueriesSupported, V::B(true));
    put(I::SqlSupportedUnions, bits(&[0, 1]));
    for k in [
        I::SqlMaxBinaryLiteralLength,
        I::SqlMaxCharLiteralLength,
        I::SqlMaxColumnNameLength,
        I::SqlMaxColumnsInGroupBy,
        I::SqlMaxColumnsInIndex,
        I::SqlMaxColumnsInOrderBy,
        I::SqlMaxColumnsInSelect,
        I::SqlMaxColumnsInTable,
        I::SqlMaxConnections,
        I::SqlMaxCursorNameLength,
        I::SqlMaxIndexLength,
        I::SqlDbSchemaNameLength,
        I::SqlMaxProcedureNameLength,
        I::SqlMaxCatalogNameLength,
        I::SqlMaxRowSize,
        I::SqlMaxStatementLength,
        I::SqlMaxStatements,
        I::SqlMaxTableNameLength,
        I::SqlMaxTablesInSelect,
        I::SqlMaxUsernameLength,
    ] {
        put(k, V::I64(0));
    }
    put(I::SqlMaxRowSizeIncludesBlobs, V::B(false));
    put(I::SqlDefaultTransactionIsolation, V::I64(0));
    put(I::SqlTransactionsSupported, V::B(false));
    put(I::SqlSupportedTransactionsIsolationLevels, V::I32(0));
    put(I::SqlDataDefinitionCausesTransactionCommit, V::B(false));
    put(I::SqlDataDefinitionsInTransactionsIgnored, V::B(false));
    put(I::SqlSupportedResultSetTypes, bits(&[1])); // forward only
    put(
        I::SqlSupportedConcurrenciesForResultSetUnspecified,
        V::I32(0),
    );
    put(
        I::SqlSupportedConcurrenciesForResultSetForwardOnly,
        bits(&[1]),
    ); // read only
    put(
        I::SqlSupportedConcurrenciesForResultSetScrollSensitive,
        V::I32(0),
    );
    put(
        I::SqlSupportedConcurrenciesForResultSetScrollInsensitive,
        V::I32(0),
    );
    put(I::SqlBatchUpdatesSupported, V::B(false));
    put(I::SqlSavepointsSupported, V::B(false));
    put(I::SqlNamedParametersSupported, V::B(false));
    put(I::SqlLocatorsUpdateCopy, V::B(false));
    put(I::SqlStoredFunctionsUsingCallSyntaxSupported, V::B(false));
    m
}

/// Each reported keyword with a statement that uses it (run on the server).
const KEYWORD_SAMPLES: &[(&str, &str)] = &[
    ("ANALYZE", "EXPLAIN ANALYZE SELECT 1"),
    ("DESCRIBE", "DESCRIBE pyiceberg_cow"),
    (
        "EXCLUDE",
        "SELECT * EXCLUDE (b) FROM (SELECT 1 AS a, 2 AS b)",
    ),
    ("EXPLAIN", "EXPLAIN SELECT 1"),
    ("ILIKE", "SELECT 'A' ILIKE 'a'"),
    ("LIMIT", "SELECT 1 LIMIT 1"),
    ("OFFSET", "SELECT 1 OFFSET 0"),
    (
        "QUALIFY",
        "SELECT a FROM (VALUES (1), (2)) t(a) QUALIFY row_number() OVER (ORDER BY a) = 1",
    ),
    ("SHOW", "SHOW TABLES"),
    ("TABLES", "SHOW TABLES"),
    (
        "VERSION",
        "SELECT count(*) FROM pyiceberg_cow VERSION AS OF 'main'",
    ),
];
const KEYWORDS: &[&str] = &[
    "ANALYZE", "DESCRIBE", "EXCLUDE", "EXPLAIN", "ILIKE", "LIMIT", "OFFSET", "QUALIFY", "SHOW",
    "TABLES", "VERSION",
];
const NUMERIC_FUNCTIONS: &[&str] = &[
    "abs", "acos", "asin", "atan", "atan2", "cbrt", "ceil", "cos", "cot", "degrees", "exp",
    "floor", "ln", "log", "log10", "log2", "pi", "power", "radians", "random", "round", "signum",
    "sin", "sqrt", "tan", "trunc",
];
const STRING_FUNCTIONS: &[&str] = &[
    "ascii",
    "btrim",
    "char_length",
    "chr",
    "concat",
    "concat_ws",
    "initcap",
    "left",
    "length",
    "lower",
    "lpad",
    "ltrim",
    "md5",
    "octet_length",
    "regexp_like",
    "regexp_match",
    "regexp_replace",
    "repeat",
    "replace",
    "reverse",
    "right",
    "rpad",
    "rtrim",
    "split_part",
    "starts_with",
    "strpos",
    "substr",
    "substring",
    "to_hex",
    "translate",
    "trim",
    "upper",
];
const SYSTEM_FUNCTIONS: &[&str] = &["arrow_typeof", "coalesce", "nullif", "nvl", "version"];
const DATETIME_FUNCTIONS: &[&str] = &[
    "current_date",
    "current_time",
    "current_timestamp",
    "date_bin",
    "date_part",
    "date_trunc",
    "extract",
    "from_unixtime",
    "make_date",
    "now",
    "to_char",
    "to_date",
    "to_timestamp",
    "to_timestamp_micros",
    "to_timestamp_millis",
    "to_timestamp_seconds",
    "to_unixtime",
];

async fn one_string(client: &mut Client, sql: &str) -> Option<String> {
    let b = query(client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let b = b.iter().find(|b| b.num_rows() > 0)?;
    let c = arrow::compute::cast(b.column(0), &arrow::datatypes::DataType::Utf8).unwrap();
    let c = c.as_string::<i32>();
    c.is_valid(0).then(|| c.value(0).to_string())
}

async fn ok(client: &mut Client, sql: &str) {
    query(client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_value_is_true_of_the_server() {
    let wh = corpus_warehouse();
    let server = Petrel::start(&["--warehouse", wh.to_str().unwrap()]);
    let mut client = server.client().await;
    let mut reported = sql_info(&mut client).await;
    // The version follows the crate; the conversion map is checked below.
    assert_eq!(
        reported.remove(&(SqlInfo::FlightSqlServerVersion as u32)),
        Some(V::S(env!("CARGO_PKG_VERSION").to_string()))
    );
    let convert = reported
        .remove(&(SqlInfo::SqlSupportsConvert as u32))
        .expect("SqlSupportsConvert");
    let expected = expected(false);
    let mut keys: Vec<u32> = reported.keys().chain(expected.keys()).copied().collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        assert_eq!(reported.get(&k), expected.get(&k), "SqlInfo {k}");
    }

    // Identifiers: unquoted folded to lower case, quoted kept and compared exactly.
    let b = query(&mut client, "SELECT 1 AS Foo, 2 AS \"Bar\"")
        .await
        .unwrap();
    let names: Vec<String> = b[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["foo", "Bar"]);
    ok(&mut client, "SELECT \"Bar\" FROM (SELECT 2 AS \"Bar\")").await;
    let e = query(&mut client, "SELECT \"bar\" FROM (SELECT 2 AS \"Bar\")")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    let e = query(&mut client, "SELECT Bar FROM (SELECT 2 AS \"Bar\")")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    // Extra name characters in unquoted identifiers.
    ok(&mut client, "SELECT 1 AS a@b$c#d").await;

    // Keywords: each one runs.
    let listed: Vec<&str> = KEYWORD_SAMPLES.iter().map(|(k, _)| *k).collect();
    assert_eq!(listed, KEYWORDS);
    for (_, sql) in KEYWORD_SAMPLES {
        ok(&mut client, sql).await;
    }
    // ASOF is not a join DataFusion runs.
    assert!(
        query(
            &mut client,
            "SELECT * FROM (SELECT 1 AS a) l ASOF JOIN (SELECT 1 AS a) r MATCH_CONDITION (l.a >= r.a)"
        )
        .await
        .is_err()
    );

    // Functions: each one exists.
    let routines = query(
        &mut client,
        "SELECT DISTINCT routine_name FROM information_schema.routines",
    )
    .await
    .unwrap();
    let mut known: Vec<String> = Vec::new();
    for b in &routines {
        let c = b.column(0).as_string::<i32>();
        known.extend((0..c.len()).map(|i| c.value(i).to_lowercase()));
    }
    // Syntax rather than functions: `EXTRACT(f FROM x)`, `SUBSTRING(s FROM a FOR b)`,
    // `TRIM(BOTH …)`, `CURRENT_DATE` without parentheses.
    for sql in [
        "SELECT extract(year FROM DATE '2024-01-02')",
        "SELECT substring('abc' FROM 2 FOR 1)",
        "SELECT trim(BOTH 'x' FROM 'xax')",
        "SELECT current_date",
    ] {
        ok(&mut client, sql).await;
    }
    let unknown: Vec<&&str> = NUMERIC_FUNCTIONS
        .iter()
        .chain(STRING_FUNCTIONS)
        .chain(SYSTEM_FUNCTIONS)
        .chain(DATETIME_FUNCTIONS)
        .filter(|f| !["extract", "substring", "trim"].contains(f))
        .filter(|f| !known.iter().any(|k| k == **f))
        .collect();
    assert!(unknown.is_empty(), "unknown functions: {unknown:?}");

    // LIKE: `\` escapes by default; an ESCAPE clause naming another character is refused (so
    // no LIKE escape clause is reported).
    assert!(
        query(&mut client, "SELECT 'a_b' LIKE 'a!_b' ESCAPE '!'")
            .await
            .is_err()
    );
    for (sql, expected) in [
        ("SELECT 'a_b' LIKE 'a\\_b'", "true"),
        ("SELECT 'axb' LIKE 'a\\_b'", "false"),
        ("SELECT 'a_b' LIKE 'a\\_b' ESCAPE '\\'", "true"),
        // NULL + NULL is NULL (and NULL + 1).
        (
            "SELECT (NULL + NULL) IS NULL AND (1 + NULL) IS NULL",
            "true",
        ),
        // Nulls sort high: last ascending, first descending.
        (
            "SELECT x FROM (VALUES (1), (NULL)) t(x) ORDER BY x LIMIT 1",
            "1",
        ),
        (
            "SELECT coalesce(x, -1) FROM (VALUES (1), (NULL)) t(x) ORDER BY x DESC LIMIT 1",
            "-1",
        ),
    ] {
        assert_eq!(
            one_string(&mut client, sql).await.as_deref(),
            Some(expected),
            "{sql}"
        );
    }

    // Grouping, ordering, correlation names, subqueries, joins, unions.
    for sql in [
        "SELECT 1 AS x",
        "SELECT t.a FROM (SELECT 1 AS a) AS t",
        "SELECT a FROM (SELECT 1 AS a) AS a",
        "SELECT a FROM (VALUES (1, 2)) t(a, b) ORDER BY a + 1",
        "SELECT a FROM (VALUES (1, 2)) t(a, b) ORDER BY b",
        "SELECT count(*) FROM (VALUES (1, 2)) t(a, b) GROUP BY b",
        "SELECT a FROM (VALUES (1, 2)) t(a, b) GROUP BY a, b",
        "SELECT a FROM (VALUES (1)) t(a) WHERE a = (SELECT 1)",
        "SELECT a FROM (VALUES (1)) t(a) WHERE EXISTS (SELECT 1)",
        "SELECT a FROM (VALUES (1)) t(a) WHERE a IN (SELECT 1)",
        "SELECT a FROM (VALUES (1)) t(a) WHERE EXISTS (SELECT 1 FROM (VALUES (1)) u(b) WHERE u.b = t.a)",
        "SELECT * FROM (VALUES (1)) l(a) FULL OUTER JOIN (VALUES (2)) r(b) ON l.a = r.b",
        "SELECT 1 UNION SELECT 2",
        "SELECT 1 UNION ALL SELECT 1",
    ] {
        ok(&mut client, sql).await;
    }

    // CAST between every pair the conversion map lists.
    let V::M(convert) = convert else {
        panic!("SqlSupportsConvert is not a map: {convert:?}")
    };
    let sample = |ty: i32| -> (&'static str, &'static str) {
        use arrow_flight::sql::SqlSupportsConvert as C;
        match C::try_from(ty).unwrap() {
            C::SqlConvertBigint => ("BIGINT", "1"),
            C::SqlConvertInteger => ("INTEGER", "1"),
            C::SqlConvertSmallint => ("SMALLINT", "1"),
            C::SqlConvertTinyint => ("TINYINT", "1"),
            C::SqlConvertDecimal => ("DECIMAL(10, 2)", "1"),
            C::SqlConvertNumeric => ("NUMERIC(10, 2)", "1"),
            C::SqlConvertFloat => ("FLOAT", "1"),
            C::SqlConvertReal => ("REAL", "1"),
            C::SqlConvertChar => ("CHAR", "'1'"),
            C::SqlConvertVarchar => ("VARCHAR", "'1'"),
            C::SqlConvertDate => ("DATE", "DATE '2024-01-02'"),
            C::SqlConvertTimestamp => ("TIMESTAMP", "TIMESTAMP '2024-01-02 03:04:05'"),
            C::SqlConvertTime => ("TIME", "TIME '03:04:05'"),
            C::SqlConvertBinary => ("BINARY", "X'01'"),
            C::SqlConvertVarbinary => ("VARBINARY", "X'01'"),
            other => panic!("no sample for {other:?}"),
        }
    };
    let text_sample = |to: i32| -> Option<&'static str> {
        use arrow_flight::sql::SqlSupportsConvert as C;
        match C::try_from(to).unwrap() {
            C::SqlConvertDate => Some("'2024-01-02'"),
            C::SqlConvertTimestamp => Some("'2024-01-02 03:04:05'"),
            C::SqlConvertTime => Some("'03:04:05'"),
            _ => None,
        }
    };
    assert!(!convert.is_empty());
    for (from, tos) in &convert {
        for to in tos {
            let (from_ty, mut literal) = sample(*from);
            let (to_ty, _) = sample(*to);
            if from_ty.ends_with("CHAR")
                && let Some(text) = text_sample(*to)
            {
                literal = text;
            }
            ok(
                &mut client,
                &format!("SELECT CAST(CAST({literal} AS {from_ty}) AS {to_ty})"),
            )
            .await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_turns_the_write_values_off() {
    let wh = corpus_warehouse();
    let server = Petrel::start(&["--warehouse", wh.to_str().unwrap(), "--read-only"]);
    let mut client = server.client().await;
    let reported = sql_info(&mut client).await;
    let expected = expected(true);
    for k in [
        SqlInfo::FlightSqlServerReadOnly,
        SqlInfo::FlightSqlServerBulkIngestion,
        SqlInfo::SqlDdlSchema,
        SqlInfo::SqlDdlTable,
    ] {
        let k = k as u32;
        assert_eq!(reported.get(&k), expected.get(&k), "SqlInfo {k}");
    }
    let e = query(&mut client, "CREATE SCHEMA iceberg.nope")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e}");
}
