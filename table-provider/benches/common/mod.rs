//! The rows the benchmarks share: a lineitem-like shape of four columns, `id bigint` (unique,
//! the row's number), `i int` (`id % 1000`), `d double` (`(id % 10007) / 4`: multiples of 0.25,
//! so sums are exact in any order) and `s string` (`name-NNNNNN`, 250,000 distinct values),
//! with Iceberg field ids 1–4.

#![allow(dead_code)]

pub(crate) mod many_files;
pub(crate) mod timing;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

/// The `i` column of row `id`.
pub(crate) fn i_of(id: i64) -> i32 {
    (id % 1000) as i32
}

/// The `d` column of row `id`.
pub(crate) fn d_of(id: i64) -> f64 {
    // Multiples of 0.25 below 2^40: every partial sum is exact, whatever the order.
    (id % 10_007) as f64 * 0.25
}

/// The `s` column of row `id`.
pub(crate) fn s_of(id: i64) -> String {
    format!("name-{:06}", id % 250_000)
}

/// An Arrow field carrying an Iceberg field id.
pub(crate) fn field(name: &str, dt: DataType, nullable: bool, id: i32) -> Field {
    Field::new(name, dt, nullable).with_metadata(HashMap::from([(
        PARQUET_FIELD_ID_META_KEY.to_string(),
        id.to_string(),
    )]))
}

/// The shape's Arrow schema (`id` NOT NULL, the others nullable), with field ids.
pub(crate) fn lineitem_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        field("id", DataType::Int64, false, 1),
        field("i", DataType::Int32, true, 2),
        field("d", DataType::Float64, true, 3),
        field("s", DataType::Utf8, true, 4),
    ]))
}

/// The rows `ids` as one batch of `schema` (the shape's schema, or one with the same types).
pub(crate) fn lineitem_batch(schema: &SchemaRef, ids: Range<i64>) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(ids.clone())),
        Arc::new(Int32Array::from_iter_values(ids.clone().map(i_of))),
        Arc::new(Float64Array::from_iter_values(ids.clone().map(d_of))),
        Arc::new(StringArray::from_iter_values(ids.map(s_of))),
    ];
    RecordBatch::try_new(Arc::clone(schema), columns).expect("lineitem batch")
}

/// `rows` rows (ids `0..rows`) in batches of `batch_rows`.
pub(crate) fn lineitem_batches(schema: &SchemaRef, rows: i64, batch_rows: i64) -> Vec<RecordBatch> {
    (0..rows)
        .step_by(batch_rows as usize)
        .map(|start| lineitem_batch(schema, start..(start + batch_rows).min(rows)))
        .collect()
}
