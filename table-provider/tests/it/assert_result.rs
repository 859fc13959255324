//! The corpus comparison checks what it says: column types against the expected type names
//! (Spark's or Iceberg's), and column names of empty results.

use crate::common;

use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use common::{assert_result, assert_result_with_schema};
use serde_json::json;

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap()
}

#[test]
#[should_panic(expected = "column \"a\" is Int32 but \"bigint\" was expected")]
fn a_wrong_type_fails() {
    let b = batch(vec![("a", Arc::new(Int32Array::from(vec![1])))]);
    let expected = json!({"columns": ["a"], "types": ["bigint"], "count": 1, "rows": [[1]]});
    assert_result("int for bigint", &[b], &expected);
}

#[test]
#[should_panic(expected = "columns")]
fn empty_results_have_their_columns_checked() {
    let schema = Schema::new(vec![Field::new("b", DataType::Int32, true)]);
    let expected = json!({"columns": ["a"], "types": ["int"], "count": 0, "rows": []});
    assert_result_with_schema("empty", &schema, &[], &expected);
}

#[test]
fn spark_timestamp_is_utc_and_iceberg_timestamp_is_not() {
    let utc = || -> ArrayRef {
        Arc::new(TimestampMicrosecondArray::from(vec![0]).with_timezone("+00:00"))
    };
    let naive = || -> ArrayRef { Arc::new(TimestampMicrosecondArray::from(vec![0])) };
    let id = || -> ArrayRef { Arc::new(Int64Array::from(vec![1])) };
    // Spark (bigint tells): timestamp is timestamptz.
    let spark = json!({"columns": ["id", "t"], "types": ["bigint", "timestamp"], "count": 1,
                       "rows": [[1, "1970-01-01T00:00:00+00:00"]]});
    assert_result("spark", &[batch(vec![("id", id()), ("t", utc())])], &spark);
    // Iceberg (long tells): timestamp has no zone.
    let iceberg = json!({"columns": ["id", "t"], "types": ["long", "timestamp"], "count": 1,
                         "rows": [[1, "1970-01-01T00:00:00"]]});
    assert_result(
        "iceberg",
        &[batch(vec![("id", id()), ("t", naive())])],
        &iceberg,
    );
    let wrong = std::panic::catch_unwind(|| {
        let b = batch(vec![("id", id()), ("t", naive())]);
        let empty = json!({"columns": ["id", "t"], "types": ["bigint", "timestamp"], "count": 0});
        assert_result_with_schema("spark, no zone", &b.schema(), &[], &empty);
    });
    assert!(wrong.is_err(), "a Spark timestamp without a zone must fail");
    let _ = TimeUnit::Microsecond;
}
