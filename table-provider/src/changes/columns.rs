//! The change feed's own columns, named and typed as Spark's changelog view:
//! `_change_type` (string), `_change_ordinal` (int: the snapshot's place in the range, replace
//! snapshots not counted) and `_commit_snapshot_id` (long).

use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::Result as DFResult;

/// `_change_type`.
pub const CHANGE_TYPE_COLUMN: &str = "_change_type";
/// `_change_ordinal`.
pub const CHANGE_ORDINAL_COLUMN: &str = "_change_ordinal";
/// `_commit_snapshot_id`.
pub const COMMIT_SNAPSHOT_ID_COLUMN: &str = "_commit_snapshot_id";

/// What happened to a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    /// Added.
    Insert,
    /// Removed.
    Delete,
    /// A key's row before an update.
    UpdateBefore,
    /// The same key's row after it.
    UpdateAfter,
}

impl ChangeType {
    /// Spark's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Insert => "INSERT",
            ChangeType::Delete => "DELETE",
            ChangeType::UpdateBefore => "UPDATE_BEFORE",
            ChangeType::UpdateAfter => "UPDATE_AFTER",
        }
    }
}

/// The table's columns followed by the three change columns.
pub fn change_schema(table: &Schema) -> SchemaRef {
    let mut fields: Vec<Arc<Field>> = table.fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(
        CHANGE_TYPE_COLUMN,
        DataType::Utf8,
        false,
    )));
    fields.push(Arc::new(Field::new(
        CHANGE_ORDINAL_COLUMN,
        DataType::Int32,
        false,
    )));
    fields.push(Arc::new(Field::new(
        COMMIT_SNAPSHOT_ID_COLUMN,
        DataType::Int64,
        false,
    )));
    Arc::new(Schema::new(fields))
}

/// `table_columns` with the change columns appended (one type per row).
pub(crate) fn with_change_columns(
    schema: &SchemaRef,
    mut table_columns: Vec<ArrayRef>,
    types: &[ChangeType],
    ordinal: i32,
    snapshot_id: i64,
) -> DFResult<RecordBatch> {
    let rows = types.len();
    table_columns.push(Arc::new(StringArray::from_iter_values(
        types.iter().map(|t| t.as_str()),
    )));
    table_columns.push(Arc::new(Int32Array::from(vec![ordinal; rows])));
    table_columns.push(Arc::new(Int64Array::from(vec![snapshot_id; rows])));
    Ok(RecordBatch::try_new(Arc::clone(schema), table_columns)?)
}
