//! Shared test support: sessions over Petrel catalogs, Arrow → the corpus's normalised JSON,
//! and exact result comparison (multisets for unordered results, floats to 1e-9 relative).

#![allow(dead_code, unreachable_pub)]

pub mod moto;
pub mod postgres;
pub mod rustberg;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, TimeUnit};
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use petrel_table_provider::plan::PlanMetrics;
use petrel_table_provider::{
    Catalog, IcebergCatalogProvider, IcebergScanExec, NarrowStructColumns, NestedValuesTypes,
    PetrelQueryPlanner, RowLevelDml, ScanPlanner, SignedZeroEquality, rewrite_time_travel,
};
use serde_json::{Value, json};

/// A test dataset made by `scripts/test-data.sh NAME` (once per run, shared by every test
/// process, read-only): its directory.
pub fn dataset(name: &str) -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/test-data.sh");
    let output = std::process::Command::new("bash")
        .arg(&script)
        .arg(name)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run scripts/test-data.sh");
    assert!(
        output.status.success(),
        "scripts/test-data.sh {name} failed"
    );
    let stdout = String::from_utf8(output.stdout).expect("utf8 path");
    let dir = PathBuf::from(stdout.lines().last().expect("a path").trim());
    assert!(
        dir.is_dir(),
        "dataset {name}: {} is not a directory",
        dir.display()
    );
    dir
}

/// The fixture corpus (see `scripts/test-data.sh`: `PETREL_CORPUS`, the shared corpus beside
/// the clone, or one generated with Spark).
pub fn corpus_dir() -> PathBuf {
    static CORPUS: OnceLock<PathBuf> = OnceLock::new();
    CORPUS.get_or_init(|| dataset("corpus")).clone()
}

/// Tables a Python generator wrote (a dataset of `scripts/test-data.sh`), with the
/// `expected.json` it wrote beside them.
pub struct Generated {
    /// The output directory (catalog.db, warehouse/, expected.json).
    pub root: PathBuf,
    /// The parsed `expected.json`.
    pub expected: Value,
}

/// The dataset `name` (`pyiceberg-tables`, `pyiceberg-deletes`), loaded once per process.
pub fn generated(name: &str) -> Generated {
    let root = dataset(name);
    let expected =
        serde_json::from_slice(&std::fs::read(root.join("expected.json")).expect("expected.json"))
            .expect("expected json");
    Generated { root, expected }
}

/// A session with the given catalogs registered under their names.
pub fn session(catalogs: Vec<(&str, Arc<dyn Catalog>)>) -> SessionContext {
    session_of(catalogs, None)
}

/// As [`session`], every catalog planning its scans with `planner` (and its caches).
pub fn session_with_planner(
    catalogs: Vec<(&str, Arc<dyn Catalog>)>,
    planner: Arc<ScanPlanner>,
) -> SessionContext {
    session_of(catalogs, Some(planner))
}

/// A session over `catalogs`, each with a planner of its own unless `planner` is given.
fn session_of(
    catalogs: Vec<(&str, Arc<dyn Catalog>)>,
    planner: Option<Arc<ScanPlanner>>,
) -> SessionContext {
    let config = SessionConfig::new()
        .with_target_partitions(4)
        .with_information_schema(true);
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_optimizer_rule(Arc::new(SignedZeroEquality::new()))
        .with_optimizer_rule(Arc::new(NestedValuesTypes::new()))
        .with_analyzer_rule(Arc::new(RowLevelDml::new()))
        .with_analyzer_rule(Arc::new(petrel_table_provider::SingleRowSubqueries))
        .with_analyzer_rule(Arc::new(
            petrel_table_provider::checked_arithmetic::CheckArithmetic::new(),
        ))
        .with_query_planner(Arc::new(PetrelQueryPlanner))
        .with_physical_optimizer_rule(Arc::new(NarrowStructColumns::new()))
        .build();
    let ctx = SessionContext::new_with_state(state);
    // As the server registers them: grouped float `min` / `max` ordered as ungrouped.
    for f in petrel_table_provider::petrel_functions() {
        ctx.register_udaf(f);
    }
    for (name, catalog) in catalogs {
        ctx.register_catalog(
            name,
            Arc::new(IcebergCatalogProvider::with_planner(
                catalog,
                planner.clone().unwrap_or_default(),
            )),
        );
    }
    ctx
}

/// Runs `sql` (time travel rewritten) and returns its batches.
pub async fn query(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<Vec<RecordBatch>> {
    let sql = rewrite_time_travel(sql).map_err(datafusion::error::DataFusionError::from)?;
    let state = ctx.state();
    if let Some(plan) = petrel_table_provider::statements::plan_statement(&state, &sql).await? {
        return datafusion::dataframe::DataFrame::new(state, plan)
            .collect()
            .await;
    }
    ctx.sql(&sql).await?.collect().await
}

/// The physical plan of `sql` and the planning metrics of its (first) Iceberg scan.
pub async fn plan_metrics(ctx: &SessionContext, sql: &str) -> PlanMetrics {
    let sql = rewrite_time_travel(sql).expect("rewrite");
    let plan = ctx
        .sql(&sql)
        .await
        .expect("plan")
        .create_physical_plan()
        .await
        .expect("physical plan");
    find_scan(&plan)
        .unwrap_or_else(|| panic!("no IcebergScanExec in plan of {sql}"))
        .plan_metrics()
        .clone()
}

/// The Petrel scan node of a physical plan.
pub fn find_scan(plan: &Arc<dyn ExecutionPlan>) -> Option<&IcebergScanExec> {
    if let Some(scan) = plan.as_any().downcast_ref::<IcebergScanExec>() {
        return Some(scan);
    }
    plan.children().into_iter().find_map(find_scan)
}

/// Rows of `batches` as normalised JSON values (the corpus README's format). `types` are the
/// expected result's type names, used to tell uuid from fixed(16).
pub fn rows_json(batches: &[RecordBatch], types: &[String]) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for batch in batches {
        for row in 0..batch.num_rows() {
            rows.push(
                batch
                    .columns()
                    .iter()
                    .enumerate()
                    .map(|(c, col)| value_json(col, row, types.get(c).map(String::as_str)))
                    .collect(),
            );
        }
    }
    rows
}

fn float_json(v: f64) -> Value {
    if v.is_nan() {
        json!("NaN")
    } else if v.is_infinite() {
        json!(if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        json!(v)
    }
}

fn iso_time(seconds: i64, micros: u32, with_zone: bool) -> String {
    let dt = chrono::DateTime::from_timestamp(seconds, micros * 1000).expect("timestamp in range");
    let base = dt.naive_utc().format("%Y-%m-%dT%H:%M:%S").to_string();
    let frac = if micros == 0 {
        String::new()
    } else {
        format!(".{micros:06}")
    };
    format!("{base}{frac}{}", if with_zone { "+00:00" } else { "" })
}

fn value_json(col: &ArrayRef, row: usize, ty: Option<&str>) -> Value {
    if col.is_null(row) {
        return Value::Null;
    }
    match col.data_type() {
        DataType::Boolean => json!(col.as_boolean().value(row)),
        DataType::Int8 => json!(col.as_primitive::<arrow::datatypes::Int8Type>().value(row)),
        DataType::Int16 => json!(col.as_primitive::<arrow::datatypes::Int16Type>().value(row)),
        DataType::Int32 => json!(col.as_primitive::<arrow::datatypes::Int32Type>().value(row)),
        DataType::Int64 => json!(col.as_primitive::<arrow::datatypes::Int64Type>().value(row)),
        DataType::Float32 => float_json(f64::from(
            col.as_primitive::<arrow::datatypes::Float32Type>()
                .value(row),
        )),
        DataType::Float64 => float_json(
            col.as_primitive::<arrow::datatypes::Float64Type>()
                .value(row),
        ),
        DataType::Decimal128(_, scale) => {
            let v = col
                .as_primitive::<arrow::datatypes::Decimal128Type>()
                .value(row);
            json!(
                arrow::array::Decimal128Array::from(vec![v])
                    .with_precision_and_scale(38, *scale)
                    .expect("decimal")
                    .value_as_string(0)
            )
        }
        DataType::Date32 => {
            let days = col
                .as_primitive::<arrow::datatypes::Date32Type>()
                .value(row);
            let date = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch")
                + chrono::Duration::days(i64::from(days));
            json!(date.format("%Y-%m-%d").to_string())
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let us = col
                .as_primitive::<arrow::datatypes::Time64MicrosecondType>()
                .value(row);
            let (secs, micros) = (us.div_euclid(1_000_000), us.rem_euclid(1_000_000));
            let base = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
            json!(if micros == 0 {
                base
            } else {
                format!("{base}.{micros:06}")
            })
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let us = col
                .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .value(row);
            json!(iso_time(
                us.div_euclid(1_000_000),
                us.rem_euclid(1_000_000) as u32,
                tz.is_some()
            ))
        }
        DataType::Utf8 => json!(col.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => json!(col.as_string::<i64>().value(row)),
        DataType::Utf8View => json!(col.as_string_view().value(row)),
        DataType::Binary => json!(hex(col.as_binary::<i32>().value(row))),
        DataType::FixedSizeBinary(16) if matches!(ty, Some("uuid") | Some("string")) => {
            let bytes: [u8; 16] = col
                .as_fixed_size_binary()
                .value(row)
                .try_into()
                .expect("16 bytes");
            json!(uuid::Uuid::from_bytes(bytes).to_string())
        }
        DataType::FixedSizeBinary(_) => json!(hex(col.as_fixed_size_binary().value(row))),
        DataType::Struct(fields) => {
            let s = col.as_struct();
            let mut map = serde_json::Map::new();
            for (i, f) in fields.iter().enumerate() {
                map.insert(f.name().clone(), value_json(s.column(i), row, None));
            }
            Value::Object(map)
        }
        DataType::List(_) => {
            let values = col.as_list::<i32>().value(row);
            Value::Array(
                (0..values.len())
                    .map(|i| value_json(&values, i, None))
                    .collect(),
            )
        }
        DataType::Map(_, _) => {
            let entries = col.as_map().value(row);
            let (keys, values) = (entries.column(0), entries.column(1));
            if matches!(keys.data_type(), DataType::Utf8) {
                let mut map = serde_json::Map::new();
                for i in 0..entries.len() {
                    map.insert(
                        keys.as_string::<i32>().value(i).to_string(),
                        value_json(values, i, None),
                    );
                }
                Value::Object(map)
            } else {
                Value::Array(
                    (0..entries.len())
                        .map(|i| json!([value_json(keys, i, None), value_json(values, i, None)]))
                        .collect(),
                )
            }
        }
        other => panic!("no JSON form for {other}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A sort key equal for values equal within the float tolerance.
fn sort_key(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => format!("{:.9e}", n.as_f64().unwrap_or_default()),
        Value::Array(a) => format!("[{}]", a.iter().map(sort_key).collect::<Vec<_>>().join(",")),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{k}:{}", sort_key(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => {
                let (x, y) = (
                    x.as_f64().unwrap_or(f64::NAN),
                    y.as_f64().unwrap_or(f64::NAN),
                );
                x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
            }
        },
        (Value::String(x), Value::String(y)) => {
            x == y
                || match (x.parse::<f64>(), y.parse::<f64>()) {
                    // decimals compare by value ("1.50" vs "1.5")
                    (Ok(a), Ok(b)) if x.contains('.') || y.contains('.') => a == b,
                    _ => false,
                }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| values_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Asserts that `batches` hold exactly `expected` (`{columns, types, ordered, count, rows}`):
/// the column names, the column types (see [`assert_types`]), the row count and the rows. The
/// columns are those of the first batch; a result without batches has none to check, so to
/// check the columns of an empty result use [`assert_result_with_schema`].
pub fn assert_result(what: &str, batches: &[RecordBatch], expected: &Value) {
    match batches.first() {
        Some(batch) => assert_result_with_schema(what, &batch.schema(), batches, expected),
        None => assert_rows(what, batches, expected),
    }
}

/// [`assert_result`] with the result's `schema` (DataFusion's, known even when no batch came):
/// columns and types are checked on empty results too.
pub fn assert_result_with_schema(
    what: &str,
    schema: &arrow::datatypes::Schema,
    batches: &[RecordBatch],
    expected: &Value,
) {
    let columns: Vec<String> = expected["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c.as_str().expect("column name").to_string())
        .collect();
    let actual: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(actual, columns, "{what}: columns");
    for batch in batches {
        assert_eq!(
            batch.schema().fields(),
            schema.fields(),
            "{what}: a batch's schema differs from the result's"
        );
    }
    assert_types(what, schema, expected);
    assert_rows(what, batches, expected);
}

/// The row count and the rows of `batches` against `expected`.
fn assert_rows(what: &str, batches: &[RecordBatch], expected: &Value) {
    let types = expected_types(expected);
    let count = expected["count"].as_u64().expect("count") as usize;
    let mut actual = rows_json(batches, &types);
    assert_eq!(actual.len(), count, "{what}: row count");
    let Some(rows) = expected["rows"].as_array() else {
        return;
    };
    let mut expected_rows: Vec<Vec<Value>> = rows
        .iter()
        .map(|r| r.as_array().expect("row").clone())
        .collect();
    if !expected["ordered"].as_bool().unwrap_or(false) {
        let key = |r: &Vec<Value>| r.iter().map(sort_key).collect::<Vec<_>>().join("|");
        actual.sort_by_key(key);
        expected_rows.sort_by_key(key);
    }
    for (i, (a, e)) in actual.iter().zip(&expected_rows).enumerate() {
        let equal = a.len() == e.len() && a.iter().zip(e).all(|(x, y)| values_equal(x, y));
        assert!(
            equal,
            "{what}: row {i} differs:\n  actual   {a:?}\n  expected {e:?}"
        );
    }
}

fn expected_types(expected: &Value) -> Vec<String> {
    expected["types"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|x| x.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Which type names an expected result uses: Spark's `simpleString` (the corpus, `read_back`'s
/// Spark results) or Iceberg's (PyIceberg generators, `read_back`'s DuckDB results). The two
/// share most names; `timestamp` is the one they disagree on (Spark: with time zone, Iceberg:
/// without).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TypeNames {
    Spark,
    Iceberg,
    /// Only names both use: `timestamp` is decided by the column's values.
    Either,
}

fn type_names(types: &[String]) -> TypeNames {
    let words = types
        .iter()
        .flat_map(|t| t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .collect::<Vec<_>>();
    const SPARK: &[&str] = &[
        "bigint",
        "tinyint",
        "smallint",
        "timestamp_ntz",
        "array",
        "void",
    ];
    const ICEBERG: &[&str] = &[
        "long",
        "timestamptz",
        "timestamp_ns",
        "timestamptz_ns",
        "uuid",
        "fixed",
        "time",
        "list",
    ];
    let bare_nested = types
        .iter()
        .any(|t| matches!(t.as_str(), "struct" | "list" | "map"));
    if words.iter().any(|w| SPARK.contains(w)) {
        TypeNames::Spark
    } else if bare_nested || words.iter().any(|w| ICEBERG.contains(w)) {
        TypeNames::Iceberg
    } else {
        TypeNames::Either
    }
}

/// Asserts that each column of `schema` has the Arrow type Petrel must return for the
/// expected result's type name (Spark's or Iceberg's, [`TypeNames`]):
///
/// | expected                              | Arrow                                         |
/// |---------------------------------------|-----------------------------------------------|
/// | boolean                               | Boolean                                       |
/// | tinyint, smallint, int               | Int8, Int16, Int32                            |
/// | bigint / long                         | Int64                                         |
/// | float, double                         | Float32, Float64                              |
/// | decimal(p,s)                          | Decimal128(p, s)                              |
/// | date                                  | Date32                                        |
/// | time                                  | Time64(µs)                                    |
/// | Spark timestamp / Iceberg timestamptz | Timestamp(µs, "UTC" or "+00:00")              |
/// | timestamp_ntz / Iceberg timestamp     | Timestamp(µs, none)                           |
/// | timestamp_ns, timestamptz_ns          | Timestamp(ns, none / UTC)                     |
/// | string                                | Utf8                                          |
/// | binary                                | Binary                                        |
/// | uuid, fixed[L]                        | FixedSizeBinary(16), FixedSizeBinary(L)       |
/// | array<T> / list<T>                    | List(T)                                       |
/// | struct<a:T,…> / struct<a: T, …>       | Struct(a: T, …)                               |
/// | map<K,V> / map<K, V>                  | Map(K, V)                                     |
/// | void                                  | Null                                          |
///
/// DuckDB's bare `struct`, `list`, `map` check the kind only. A `timestamp` in a result whose
/// names do not tell Spark's from Iceberg's is decided by its first non-null value (an offset
/// means with time zone); with no value either zone is accepted.
fn assert_types(what: &str, schema: &arrow::datatypes::Schema, expected: &Value) {
    let types = expected_types(expected);
    if types.is_empty() {
        return;
    }
    assert_eq!(
        types.len(),
        schema.fields().len(),
        "{what}: {} types expected, {} columns",
        types.len(),
        schema.fields().len()
    );
    let names = type_names(&types);
    for (i, (ty, field)) in types.iter().zip(schema.fields()).enumerate() {
        let names = match names {
            TypeNames::Either if ty == "timestamp" => {
                let value = expected["rows"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find_map(|r| r.get(i).and_then(Value::as_str));
                match value {
                    Some(v) if v.ends_with('Z') || v.contains('+') => TypeNames::Spark,
                    Some(_) => TypeNames::Iceberg,
                    None => TypeNames::Either,
                }
            }
            other => other,
        };
        assert!(
            type_matches(ty, field.data_type(), names),
            "{what}: column {:?} is {} but {ty:?} was expected",
            field.name(),
            field.data_type()
        );
    }
}

fn is_utc(tz: &Option<Arc<str>>) -> bool {
    matches!(tz.as_deref(), Some("UTC" | "+00:00"))
}

/// Whether `dt` is what Petrel must return for the type name `ty` ([`assert_types`]).
fn type_matches(ty: &str, dt: &DataType, names: TypeNames) -> bool {
    let ty = ty.trim();
    let us = |unit: &TimeUnit| *unit == TimeUnit::Microsecond;
    match (ty, dt) {
        ("boolean", DataType::Boolean)
        | ("tinyint", DataType::Int8)
        | ("smallint", DataType::Int16)
        | ("int" | "integer", DataType::Int32)
        | ("bigint" | "long", DataType::Int64)
        | ("float", DataType::Float32)
        | ("double", DataType::Float64)
        | ("date", DataType::Date32)
        | ("string", DataType::Utf8)
        | ("binary", DataType::Binary)
        | ("uuid", DataType::FixedSizeBinary(16))
        | ("void", DataType::Null)
        | ("struct", DataType::Struct(_))
        | ("list", DataType::List(_))
        | ("map", DataType::Map(..)) => true,
        ("time", DataType::Time64(unit)) => us(unit),
        ("timestamp_ntz", DataType::Timestamp(unit, None)) => us(unit),
        ("timestamptz", DataType::Timestamp(unit, tz)) => us(unit) && is_utc(tz),
        ("timestamp_ns", DataType::Timestamp(TimeUnit::Nanosecond, None)) => true,
        ("timestamptz_ns", DataType::Timestamp(TimeUnit::Nanosecond, tz)) => is_utc(tz),
        ("timestamp", DataType::Timestamp(unit, tz)) => {
            us(unit)
                && match names {
                    TypeNames::Spark => is_utc(tz),
                    TypeNames::Iceberg => tz.is_none(),
                    TypeNames::Either => tz.is_none() || is_utc(tz),
                }
        }
        (_, DataType::Decimal128(p, s)) if ty.starts_with("decimal(") => {
            let inner = ty.trim_start_matches("decimal(").trim_end_matches(')');
            let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
            parts.len() == 2 && parts[0] == p.to_string() && parts[1] == s.to_string()
        }
        (_, DataType::FixedSizeBinary(n)) if ty.starts_with("fixed[") => {
            ty.trim_start_matches("fixed[").trim_end_matches(']') == n.to_string()
        }
        (_, DataType::List(element)) if ty.starts_with("array<") || ty.starts_with("list<") => {
            let inner = &ty[ty.find('<').unwrap_or(0) + 1..ty.len() - 1];
            type_matches(inner, element.data_type(), names)
        }
        (_, DataType::Map(entries, _)) if ty.starts_with("map<") => {
            let parts = split_top(&ty[4..ty.len() - 1], ',');
            let DataType::Struct(kv) = entries.data_type() else {
                return false;
            };
            parts.len() == 2
                && kv.len() == 2
                && type_matches(parts[0], kv[0].data_type(), names)
                && type_matches(parts[1], kv[1].data_type(), names)
        }
        (_, DataType::Struct(fields)) if ty.starts_with("struct<") => {
            let parts = split_top(&ty[7..ty.len() - 1], ',');
            parts.len() == fields.len()
                && parts.iter().zip(fields).all(|(part, f)| {
                    let Some((name, inner)) = part.split_once(':') else {
                        return false;
                    };
                    name.trim().trim_matches('`') == f.name()
                        && type_matches(inner, f.data_type(), names)
                })
        }
        _ => false,
    }
}

/// `text` split at `sep` outside angle brackets.
fn split_top(text: &str, sep: char) -> Vec<&str> {
    let (mut depth, mut start, mut parts) = (0i32, 0, Vec::new());
    for (i, c) in text.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            c if c == sep && depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts
}

/// Plans `sql` (as written: no time-travel rewrite), runs it to completion, and returns the
/// executed physical plan (its metrics filled in) with the batches.
pub async fn run_plan(
    ctx: &SessionContext,
    sql: &str,
) -> (Arc<dyn ExecutionPlan>, Vec<RecordBatch>) {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .create_physical_plan()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let batches = datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    (plan, batches)
}

/// The single Int64 value of a one-row, one-column result (`count(*)`, `sum(...)`).
pub fn single_i64(batches: &[RecordBatch]) -> i64 {
    batches[0]
        .column(0)
        .as_primitive_opt::<arrow::datatypes::Int64Type>()
        .expect("an Int64 column")
        .value(0)
}

/// Copies directory `from` to `to`, recursively.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The tables of a corpus-format directory (`index.json`, `expected/<table>.json`).
pub fn corpus_tables(dir: &std::path::Path) -> Vec<(String, Value)> {
    let index: Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).expect("corpus index.json"))
            .expect("index json");
    index["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| {
            let name = t["table"].as_str().expect("name").to_string();
            let path = dir.join("expected").join(format!("{name}.json"));
            let expected = serde_json::from_slice(&std::fs::read(path).expect("expected json"))
                .expect("expected json parses");
            (name, expected)
        })
        .collect()
}

/// Whether the snapshot `id` of `expected` has live delete files.
fn has_deletes(expected: &Value, id: i64) -> bool {
    expected["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .find(|s| s["snapshot_id"].as_i64() == Some(id))
        .and_then(|s| s["summary"]["total-delete-files"].as_str())
        .is_some_and(|n| n != "0")
}

/// One recorded Spark result to compare with.
pub struct CorpusCase {
    pub what: String,
    pub sql: String,
    pub with_deletes: bool,
    pub result: Value,
}

/// Every result Spark recorded for `table` (of catalog `iceberg`, namespace `db`): the current
/// rows, each snapshot (by id in both syntaxes, and by commit time), each ref, each query.
pub fn corpus_cases(table: &str, expected: &Value) -> Vec<CorpusCase> {
    let fq = format!("iceberg.db.{table}");
    let current_id = expected["refs"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "main"))
        .and_then(|r| r["snapshot_id"].as_i64())
        .expect("main ref");
    let current_deletes = has_deletes(expected, current_id);
    let case = |what: String, sql: String, with_deletes: bool, result: &Value| CorpusCase {
        what,
        sql,
        with_deletes,
        result: result.clone(),
    };
    let mut cases = vec![case(
        format!("{table} current"),
        format!("SELECT * FROM {fq}"),
        current_deletes,
        &expected["current"],
    )];
    for s in expected["snapshots"].as_array().expect("snapshots") {
        let id = s["snapshot_id"].as_i64().expect("id");
        let deletes = has_deletes(expected, id);
        cases.push(case(
            format!("{table} snapshot {id}"),
            format!("SELECT * FROM {fq} VERSION AS OF {id}"),
            deletes,
            &s["version_as_of"],
        ));
        cases.push(case(
            format!("{table} snapshot {id} (Trino syntax)"),
            format!("SELECT * FROM {fq} FOR VERSION AS OF {id}"),
            deletes,
            &s["version_as_of"],
        ));
        // As of the commit time: the same snapshot.
        let committed = s["committed_at"].as_str().expect("committed_at");
        cases.push(case(
            format!("{table} timestamp {committed}"),
            format!("SELECT * FROM {fq} FOR TIMESTAMP AS OF TIMESTAMP '{committed}'"),
            deletes,
            &s["version_as_of"],
        ));
    }
    for r in expected["refs"].as_array().expect("refs") {
        let name = r["name"].as_str().expect("ref name");
        let id = r["snapshot_id"].as_i64().expect("ref id");
        cases.push(case(
            format!("{table} ref {name}"),
            format!("SELECT * FROM {fq} VERSION AS OF '{name}'"),
            has_deletes(expected, id),
            &r["version_as_of"],
        ));
    }
    for q in expected["queries"].as_array().expect("queries") {
        cases.push(case(
            format!("{table} query {}", q["id"]),
            q["sql"].as_str().expect("sql").to_string(),
            current_deletes,
            &q["result"],
        ));
    }
    cases
}

/// Runs every case of every table of the corpus-format directory `dir` through `ctx` (the
/// warehouse registered as catalog `iceberg`) and asserts each result; returns how many
/// results were compared and how many of them merged deletes.
pub async fn check_corpus(ctx: &SessionContext, dir: &std::path::Path) -> (usize, usize) {
    let (mut compared, mut merged) = (0, 0);
    for (table, expected) in corpus_tables(dir) {
        for case in corpus_cases(&table, &expected) {
            let failed = |e: &dyn std::fmt::Display| -> ! {
                panic!("{}: {} failed: {e}", case.what, case.sql)
            };
            let sql = rewrite_time_travel(&case.sql).unwrap_or_else(|e| failed(&e));
            let frame = ctx.sql(&sql).await.unwrap_or_else(|e| failed(&e));
            let schema = frame.schema().as_arrow().clone();
            let batches = frame.collect().await.unwrap_or_else(|e| failed(&e));
            assert_result_with_schema(&case.what, &schema, &batches, &case.result);
            compared += 1;
            merged += usize::from(case.with_deletes);
        }
    }
    (compared, merged)
}

/// The corpus's failing reads through `ctx` (the warehouse registered as catalog `iceberg`):
/// an unknown snapshot id, ref or time, and a missing table, each an error naming what was
/// asked for.
pub async fn check_corpus_errors(ctx: &SessionContext) {
    let err = query(
        ctx,
        "SELECT * FROM iceberg.db.pyiceberg_cow VERSION AS OF 42",
    )
    .await
    .expect_err("unknown snapshot");
    assert!(
        err.to_string()
            .contains("db.pyiceberg_cow has no snapshot with id 42"),
        "{err}"
    );
    let err = query(
        ctx,
        "SELECT * FROM iceberg.db.pyiceberg_cow VERSION AS OF 'nope'",
    )
    .await
    .expect_err("unknown ref");
    assert!(
        err.to_string().contains("no branch or tag named \"nope\""),
        "{err}"
    );
    let err = query(
        ctx,
        "SELECT * FROM iceberg.db.pyiceberg_cow FOR TIMESTAMP AS OF TIMESTAMP '2000-01-01 00:00:00'",
    )
    .await
    .expect_err("before first snapshot");
    assert!(
        err.to_string().contains("no snapshot at or before"),
        "{err}"
    );
    let err = query(ctx, "SELECT * FROM iceberg.db.no_such_table")
        .await
        .expect_err("missing");
    assert!(err.to_string().contains("no_such_table"), "{err}");
}

/// What Spark 3.5 + Iceberg 1.10, PyIceberg and DuckDB read from tables of a Hadoop-layout
/// warehouse (`tests/spark/read_back.py`, run in the Spark virtualenv of
/// `scripts/setup-spark.sh`), Spark's and DuckDB's rows at every snapshot included.
pub fn read_back(warehouse: &std::path::Path, tables: &[&str]) -> Value {
    read_back_with(warehouse, tables, &[], true)
}

/// [`read_back`], with `spark_sql` statements run by Spark first (in order: Spark writing to
/// the warehouse's tables) and, unless `versions`, without time travel to every snapshot. A
/// table may be `name=/path/vN.metadata.json`: a table of another catalog, read from that file.
pub fn read_back_with(
    warehouse: &std::path::Path,
    tables: &[&str],
    spark_sql: &[&str],
    versions: bool,
) -> Value {
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    for statement in spark_sql {
        args.push("--sql".into());
        args.push(statement.into());
    }
    if !versions {
        args.push("--no-versions".into());
    }
    args.push(warehouse.into());
    args.extend(tables.iter().map(Into::into));
    spark_script("read_back.py", &args)
}

/// Runs `table-provider/tests/spark/<script>` with `args` in the Spark virtualenv of
/// `scripts/setup-spark.sh` (installed if missing) and parses the JSON it prints: in the test
/// run's shared Spark session when `PETREL_SPARK_SERVER` names one (`tests/spark/spark_server.py`,
/// started by `scripts/test.sh`) and the script can share it, else in a Spark of its own.
pub fn spark_script(script: &str, args: &[std::ffi::OsString]) -> Value {
    // What changes the JVM for every session runs on its own: extra jars, and the Hadoop
    // configuration of the whole context (changelog.py's mount table).
    let shareable = script != "s3_read_back.py" && !args.iter().any(|a| a == "--moved-from");
    match std::env::var("PETREL_SPARK_SERVER") {
        Ok(address) if shareable && !address.is_empty() => {
            spark_script_in_server(&address, script, args)
        }
        _ => spark_script_alone(script, args),
    }
}

/// [`spark_script`] in the shared Spark session at `address` (one JSON line each way).
fn spark_script_in_server(address: &str, script: &str, args: &[std::ffi::OsString]) -> Value {
    use std::io::{BufRead, Write};
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_str().expect("UTF-8 argument").to_string())
        .collect();
    let stream = std::net::TcpStream::connect(address)
        .unwrap_or_else(|e| panic!("the shared Spark session at {address}: {e}"));
    // Requests run one at a time: a test may wait for others' Spark work first.
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(1800)))
        .expect("read timeout");
    let mut writer = stream.try_clone().expect("clone the connection");
    writeln!(writer, "{}", json!({"script": script, "args": args})).expect("send the request");
    let mut line = String::new();
    std::io::BufReader::new(stream)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("{script} in the shared Spark session at {address}: {e}"));
    let answer: Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("{script}: the shared Spark session answered {line:?}: {e}"));
    assert!(
        answer["ok"] == true,
        "{script} failed in the shared Spark session:\n{}",
        answer["error"].as_str().unwrap_or_default()
    );
    let stdout = answer["stdout"].as_str().expect("stdout");
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{script} json: {e}"))
}

/// [`spark_script`] in a Python process and a Spark of its own.
fn spark_script_alone(script: &str, args: &[std::ffi::OsString]) -> Value {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let setup = std::process::Command::new("bash")
        .arg(repo.join("scripts/setup-spark.sh"))
        .output()
        .expect("setup-spark.sh");
    assert!(
        setup.status.success(),
        "{}",
        String::from_utf8_lossy(&setup.stderr)
    );
    let cache = std::env::var_os("PETREL_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(&std::env::var_os("HOME").expect("HOME")).join(".cache/petrel")
        });
    let output = std::process::Command::new(cache.join("corpus-venvs/spark/bin/python"))
        .arg(repo.join("table-provider/tests/spark").join(script))
        .args(args)
        .env("TZ", "UTC")
        // The JVM's scratch files go where the test run's do.
        .env(
            "JAVA_TOOL_OPTIONS",
            format!(
                "-Djava.io.tmpdir={} -XX:-UsePerfData",
                std::env::temp_dir().display()
            ),
        )
        .output()
        .unwrap_or_else(|e| panic!("{script}: {e}"));
    assert!(
        output.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{script} json: {e}"))
}

/// The directory of the jars Spark needs for `s3://` tables (Hadoop's S3A and the AWS SDK),
/// installed by `scripts/setup-spark-s3.sh` (with the Spark setup) when missing.
pub fn spark_s3_jars() -> std::path::PathBuf {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let setup = std::process::Command::new("bash")
        .arg(repo.join("scripts/setup-spark-s3.sh"))
        .output()
        .expect("setup-spark-s3.sh");
    assert!(
        setup.status.success(),
        "setup-spark-s3.sh failed:\n{}",
        String::from_utf8_lossy(&setup.stderr)
    );
    let stdout = String::from_utf8_lossy(&setup.stdout);
    std::path::PathBuf::from(stdout.lines().last().expect("the jars' directory").trim())
}

/// The rows of a `{columns, rows}` result of `read_back` (Spark's or DuckDB's) projected onto
/// `columns`, each as a JSON array text, sorted: comparable with the texts of a model's rows.
pub fn result_rows(result: &Value, columns: &[&str]) -> Vec<String> {
    let names: Vec<&str> = result["columns"]
        .as_array()
        .unwrap_or_else(|| panic!("a result with columns: {result}"))
        .iter()
        .map(|c| c.as_str().expect("column name"))
        .collect();
    let index: Vec<usize> = columns
        .iter()
        .map(|c| {
            names
                .iter()
                .position(|n| n == c)
                .unwrap_or_else(|| panic!("no column {c} in {names:?}"))
        })
        .collect();
    let mut rows: Vec<String> = result["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| Value::Array(index.iter().map(|&i| r[i].clone()).collect()).to_string())
        .collect();
    rows.sort();
    rows
}

/// DuckDB's rows of a table `read_back` read (its `iceberg_scan`), projected as
/// [`result_rows`]; fails naming DuckDB's error if it could not read the table.
pub fn duckdb_rows(seen: &Value, columns: &[&str]) -> Vec<String> {
    assert!(
        seen["duckdb_error"].is_null(),
        "DuckDB could not read {}: {}",
        seen["metadata"],
        seen["duckdb_error"]
    );
    result_rows(&seen["duckdb"], columns)
}

/// The rows of `sql` as JSON array texts, sorted (comparable with a model's rows).
pub async fn sorted_rows(ctx: &SessionContext, sql: &str) -> Vec<String> {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out: Vec<String> = rows_json(&batches, &[])
        .into_iter()
        .map(|r| Value::Array(r).to_string())
        .collect();
    out.sort();
    out
}

/// How many snapshots table `db.<table>` of `catalog` has.
pub async fn snapshot_count(catalog: &dyn Catalog, table: &str) -> usize {
    let ident = petrel_table_provider::TableIdent::new(
        petrel_table_provider::Namespace::new(vec!["db".into()]),
        table,
    );
    catalog
        .load_table(&ident)
        .await
        .expect("load")
        .metadata()
        .snapshots()
        .count()
}

/// PyIceberg's rows of a table [`read_back`] read, like [`result_rows`]: `columns` of each row
/// as a JSON array text, sorted.
pub fn pyiceberg_rows(seen: &Value, columns: &[&str]) -> Vec<String> {
    let mut rows: Vec<String> = seen["pyiceberg"]
        .as_array()
        .unwrap_or_else(|| panic!("no PyIceberg rows: {}", seen["pyiceberg_error"]))
        .iter()
        .map(|r| {
            let row: Value = serde_json::from_str(r.as_str().expect("row text")).expect("row");
            Value::Array(columns.iter().map(|k| row[*k].clone()).collect()).to_string()
        })
        .collect();
    rows.sort();
    rows
}

/// The operations of a table's snapshots as [`read_back`] lists them (oldest first).
pub fn snapshot_operations(seen: &Value) -> Vec<String> {
    seen["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["operation"].as_str().expect("operation").to_string())
        .collect()
}

/// A filesystem warehouse in `dir` (`dir/warehouse`) with namespace `db`, as catalog and path.
pub async fn warehouse_with_db(dir: &std::path::Path) -> (std::path::PathBuf, Arc<dyn Catalog>) {
    let warehouse = dir.join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("mkdir warehouse");
    let catalog: Arc<dyn Catalog> = Arc::new(
        petrel_table_provider::FileSystemCatalog::new(warehouse.to_str().expect("utf8"))
            .expect("filesystem catalog"),
    );
    catalog
        .create_namespace(
            &petrel_table_provider::Namespace::new(vec!["db".into()]),
            false,
        )
        .await
        .expect("namespace db");
    (warehouse, catalog)
}

/// Runs Spark DDL (`ddl::parse_ddl`, `ddl::execute_ddl`) in `ctx`; panics naming the statement.
pub async fn run_ddl(ctx: &SessionContext, sql: &str) {
    let statement = petrel_table_provider::ddl::parse_ddl(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .unwrap_or_else(|| panic!("{sql} is not DDL"));
    petrel_table_provider::ddl::execute_ddl(ctx, statement)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The `count` a write statement (INSERT, DELETE, UPDATE) returns; panics naming the statement.
pub async fn write_count(ctx: &SessionContext, sql: &str) -> u64 {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::UInt64Array>()
        .unwrap_or_else(|| panic!("{sql}: count column"))
        .value(0)
}
