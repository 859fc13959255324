//! Filters pushed into the files and entries metadata tables (`metadata_tables::pushdown`: they
//! skip manifests by content, spec id, partition summaries and status counts): for every corpus
//! table (partition evolution across two specs, bucket / days / identity partitions, position
//! deletes, deletion vectors, equality deletes), each filtered query returns exactly the rows of
//! the unfiltered table that the filter accepts, evaluated here in Rust (SQL semantics: a
//! comparison with null is false); and the filters that should prune reach the scan.

use crate::common;

use std::cmp::Ordering;

use arrow::datatypes::DataType;
use common::{corpus_dir, corpus_tables, query, rows_json, session};
use datafusion::prelude::SessionContext;
use petrel_table_provider::{Catalog, FileSystemCatalog};
use serde_json::Value;

/// One column the filters test: its SQL expression, its type, and its position in the rows.
#[derive(Debug, Clone)]
struct Col {
    sql: String,
    ty: DataType,
    at: usize,
}

/// A filter, as SQL and as a model over the unfiltered rows.
#[derive(Debug)]
struct Filter {
    sql: String,
    at: usize,
    test: Test,
}

#[derive(Debug)]
enum Test {
    Cmp(&'static str, Value),
    In(Vec<Value>),
    Between(Value, Value),
}

fn literal(ty: &DataType, v: &Value) -> String {
    match ty {
        DataType::Date32 => format!("DATE '{}'", v.as_str().expect("date text")),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            format!("'{}'", v.as_str().expect("text").replace('\'', "''"))
        }
        _ => v.to_string(),
    }
}

fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => panic!("cannot compare {a} with {b}"),
    }
}

impl Filter {
    fn new(col: &Col, test: Test) -> Self {
        let lit = |v: &Value| literal(&col.ty, v);
        let sql = match &test {
            Test::Cmp(op, v) => format!("{} {op} {}", col.sql, lit(v)),
            Test::In(list) => format!(
                "{} IN ({})",
                col.sql,
                list.iter().map(lit).collect::<Vec<_>>().join(", ")
            ),
            Test::Between(lo, hi) => format!("{} BETWEEN {} AND {}", col.sql, lit(lo), lit(hi)),
        };
        Self {
            sql,
            at: col.at,
            test,
        }
    }

    /// The same comparison, the constant on the left (`7 = content`).
    fn flipped(col: &Col, op: &'static str, v: Value) -> Self {
        let flipped = match op {
            "<" => ">",
            ">" => "<",
            "<=" => ">=",
            ">=" => "<=",
            other => other,
        };
        Self {
            sql: format!("{} {flipped} {}", literal(&col.ty, &v), col.sql),
            at: col.at,
            test: Test::Cmp(op, v),
        }
    }

    fn accepts(&self, row: &[Value]) -> bool {
        let value = &row[self.at];
        match &self.test {
            Test::Cmp(op, v) => compare(value, v).is_some_and(|o| match *op {
                "=" => o == Ordering::Equal,
                "<>" => o != Ordering::Equal,
                "<" => o == Ordering::Less,
                "<=" => o != Ordering::Greater,
                ">" => o == Ordering::Greater,
                ">=" => o != Ordering::Less,
                other => panic!("operator {other}"),
            }),
            Test::In(list) => list
                .iter()
                .any(|v| compare(value, v) == Some(Ordering::Equal)),
            Test::Between(lo, hi) => {
                compare(value, lo).is_some_and(|o| o != Ordering::Less)
                    && compare(value, hi).is_some_and(|o| o != Ordering::Greater)
            }
        }
    }
}

/// The filters tried on `cols` given the unfiltered `rows`.
fn filters(cols: &[Col], rows: &[Vec<Value>]) -> Vec<Filter> {
    let mut out = Vec::new();
    for col in cols {
        let mut values: Vec<Value> = rows
            .iter()
            .map(|r| r[col.at].clone())
            .filter(|v| !v.is_null())
            .collect();
        values.sort_by(|a, b| compare(a, b).unwrap_or(Ordering::Equal));
        values.dedup();
        let is_int = matches!(col.ty, DataType::Int32 | DataType::Int64);
        if is_int && values.is_empty() {
            values.push(Value::from(0));
        }
        // The smallest, a middle and the largest value, and (integers) one nobody has.
        let mut picks: Vec<Value> = Vec::new();
        for i in [0, values.len() / 2, values.len().saturating_sub(1)] {
            if let Some(v) = values.get(i)
                && !picks.contains(v)
            {
                picks.push(v.clone());
            }
        }
        if is_int {
            picks.push(Value::from(97));
        }
        for v in &picks {
            for op in ["=", "<>", "<=", ">"] {
                out.push(Filter::new(col, Test::Cmp(op, v.clone())));
            }
            out.push(Filter::flipped(col, "<", v.clone()));
            out.push(Filter::new(col, Test::Between(v.clone(), v.clone())));
        }
        if picks.len() >= 2 {
            out.push(Filter::new(
                col,
                Test::In(vec![picks[0].clone(), picks[picks.len() - 1].clone()]),
            ));
            out.push(Filter::new(
                col,
                Test::Between(picks[0].clone(), picks[1].clone()),
            ));
        }
    }
    out
}

/// The row texts of `sql`, sorted.
async fn rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<Value>> {
    let batches = query(ctx, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows_json(&batches, &[])
}

fn texts(rows: &[Vec<Value>]) -> Vec<String> {
    let mut t: Vec<String> = rows
        .iter()
        .map(|r| Value::Array(r.clone()).to_string())
        .collect();
    t.sort();
    t
}

/// The columns one metadata table's filters test: content, spec id, each partition field and
/// (entries) status; `prefix` is `data_file.` for the entries tables.
async fn columns(ctx: &SessionContext, table: &str, entries: bool) -> Vec<Col> {
    let schema = ctx
        .sql(&format!("SELECT * FROM {table}"))
        .await
        .expect("metadata table")
        .schema()
        .as_arrow()
        .clone();
    let file = if entries {
        match schema
            .field_with_name("data_file")
            .expect("data_file")
            .data_type()
        {
            DataType::Struct(fields) => fields.clone(),
            other => panic!("data_file is {other}"),
        }
    } else {
        schema.fields().clone()
    };
    let prefix = if entries { "data_file." } else { "" };
    let mut cols = vec![
        Col {
            sql: format!("{prefix}content"),
            ty: DataType::Int32,
            at: 0,
        },
        Col {
            sql: format!("{prefix}spec_id"),
            ty: DataType::Int32,
            at: 0,
        },
    ];
    if let Some((_, partition)) = file.find("partition") {
        let DataType::Struct(parts) = partition.data_type() else {
            panic!("partition is not a struct");
        };
        for f in parts {
            cols.push(Col {
                sql: format!("{prefix}partition.{}", f.name()),
                ty: f.data_type().clone(),
                at: 0,
            });
        }
    }
    if entries {
        cols.push(Col {
            sql: "status".into(),
            ty: DataType::Int32,
            at: 0,
        });
    }
    for (i, c) in cols.iter_mut().enumerate() {
        c.at = i;
    }
    cols
}

/// Whether the scan of `sql`'s plan took `filter` as a pruning filter.
async fn pushed(ctx: &SessionContext, sql: &str) -> bool {
    let batches = query(ctx, &format!("EXPLAIN {sql}"))
        .await
        .unwrap_or_else(|e| panic!("EXPLAIN {sql}: {e}"));
    let text = arrow::util::pretty::pretty_format_batches(&batches)
        .expect("explain text")
        .to_string();
    text.contains("pruning_filters=[")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filtered_files_and_entries_equal_the_unfiltered_rows_filtered() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog: std::sync::Arc<dyn Catalog> = std::sync::Arc::new(
        FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"),
    );
    let ctx = session(vec![("iceberg", catalog)]);
    let (mut queries, mut narrowing, mut pushed_down, mut tables) = (0, 0, 0, 0);
    for (table, _) in corpus_tables(&corpus_dir()) {
        tables += 1;
        for kind in ["files", "delete_files", "all_entries"] {
            let name = format!("iceberg.db.\"{table}${kind}\"");
            let entries = kind.ends_with("entries");
            let cols = columns(&ctx, &name, entries).await;
            let path = if entries {
                "data_file.file_path"
            } else {
                "file_path"
            };
            let select = format!(
                "SELECT {}, {path} FROM {name}",
                cols.iter()
                    .map(|c| c.sql.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let all = rows(&ctx, &select).await;
            for filter in filters(&cols, &all) {
                let sql = format!("{select} WHERE {}", filter.sql);
                let expected: Vec<Vec<Value>> =
                    all.iter().filter(|r| filter.accepts(r)).cloned().collect();
                let actual = rows(&ctx, &sql).await;
                assert_eq!(texts(&actual), texts(&expected), "{sql}");
                queries += 1;
                if !expected.is_empty() && expected.len() < all.len() {
                    narrowing += 1;
                }
                // One form per column is enough to see the filters reach the scan (EXPLAIN
                // doubles the queries).
                if matches!(filter.test, Test::Cmp("=", _)) {
                    assert!(
                        pushed(&ctx, &sql).await,
                        "{sql}: the filter did not reach the scan as a pruning filter"
                    );
                    pushed_down += 1;
                }
            }
        }
    }
    assert_eq!(tables, 8, "corpus tables");
    println!("{queries} filtered queries, {narrowing} selecting some but not all rows");
    assert!(
        narrowing * 4 > queries,
        "too few filters narrow the result ({narrowing} of {queries})"
    );
    assert!(pushed_down > 0, "no filter was checked for pushdown");
}

/// A filter the scan cannot prune by (an `OR`, another column) is left to DataFusion and still
/// answers right; a filter on a partition field the file's spec lacks excludes the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_that_do_not_prune_are_applied_by_datafusion() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog: std::sync::Arc<dyn Catalog> = std::sync::Arc::new(
        FileSystemCatalog::new(warehouse.to_str().expect("utf8")).expect("catalog"),
    );
    let ctx = session(vec![("iceberg", catalog)]);
    let name = "iceberg.db.\"v2_evolved$files\"";
    let all = rows(
        &ctx,
        &format!("SELECT content, spec_id, record_count, file_path FROM {name}"),
    )
    .await;
    let sql = format!(
        "SELECT content, spec_id, record_count, file_path FROM {name} \
         WHERE content = 1 OR record_count > 10"
    );
    let expected: Vec<Vec<Value>> = all
        .iter()
        .filter(|r| r[0] == 1 || r[2].as_i64().expect("count") > 10)
        .cloned()
        .collect();
    assert_eq!(texts(&rows(&ctx, &sql).await), texts(&expected), "{sql}");
    assert!(!pushed(&ctx, &sql).await, "{sql}: an OR does not prune");

    // v2_evolved went from bucket(4, id) to days(ts): the files of the older spec have no day,
    // and a comparison with it excludes them.
    let specs = rows(
        &ctx,
        &format!("SELECT DISTINCT spec_id FROM {name} WHERE content = 0 ORDER BY spec_id"),
    )
    .await;
    assert_eq!(specs.len(), 2, "v2_evolved's data files are of two specs");
    let days = rows(
        &ctx,
        &format!("SELECT DISTINCT spec_id FROM {name} WHERE partition.ts_day IS NOT NULL"),
    )
    .await;
    assert_eq!(days, vec![specs[1].clone()], "only the newer spec has days");
}
