//! Upserts as Flink's delta writer makes them: the rows of a statement replace the table's rows
//! with the same key (the schema's identifier fields).
//!
//! A table upserts when it has identifier fields (`PRIMARY KEY (…)` in `CREATE TABLE`) and
//! `write.upsert.enabled=true` (Flink's property), or when a statement asks for it (the bulk
//! ingest option `upsert=true`). Such a write commits, in one `overwrite` snapshot, the new data
//! files and equality-delete files holding the statement's keys (`super::equality_deletes`):
//! the deletes remove every older row with one of those keys, and, since equality deletes only
//! apply to data files of a lower sequence number, not the rows committed with them.
//!
//! A key repeated within one statement keeps its last row: [`UpsertKeys::keep_last`] drops the
//! earlier ones before anything is written (no position deletes or deletion vectors against the
//! statement's own files, which Flink writes because it streams; a statement is written at once).
//! "Last" is the order in which the writer receives the rows: the writers are fed by a hash
//! repartitioning on the key, which keeps the order of each input partition, so a single-stream
//! input (a bulk ingest, `INSERT … VALUES`) keeps its order when DataFusion does not spread it
//! round-robin first (Petrel's upsert ingest turns that off; large `INSERT … SELECT` inputs are
//! read in parallel, and which of a key's rows is last among them is then unspecified, as SQL
//! leaves their order unspecified).
//!
//! Cost: each writer task holds the rows it receives until its input ends (to know which row
//! of a key is the last), so an upsert statement's rows are in memory at once, spread over the
//! writer tasks and reserved from the session's memory pool (an upsert larger than the pool
//! fails with DataFusion's "Resources exhausted", writing nothing). No conflict validation runs before the commit (Flink's upsert has none either):
//! of two concurrent upserts of one key, the one committed last wins, since its equality deletes
//! carry the higher sequence number.
//!
//! Refused, as Flink refuses them: identifier fields missing, partition source columns that are
//! not all part of the key (an equality delete in one partition cannot remove the old row of
//! the key in another), and `INSERT OVERWRITE`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::{Schema as ArrowSchema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use iceberg::spec::TableMetadata;

use crate::error::{Error, Result};

/// The table property that makes every INSERT an upsert (Flink's `write.upsert.enabled`).
pub const UPSERT_PROPERTY: &str = "write.upsert.enabled";

/// Whether `metadata`'s properties ask for upserts.
pub fn upsert_enabled(metadata: &TableMetadata) -> bool {
    metadata
        .properties()
        .get(UPSERT_PROPERTY)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The key of an upsert: the table's identifier fields, as columns of its Arrow schema.
#[derive(Debug, Clone)]
pub struct UpsertKeys {
    /// The identifier field ids, ascending (the equality-delete files' `equality_ids`).
    field_ids: Vec<i32>,
    /// Their top-level column indices in the table's Arrow schema, in `field_ids` order.
    columns: Vec<usize>,
    /// The Arrow schema of an equality-delete file: the key columns (with field ids).
    delete_schema: SchemaRef,
}

impl UpsertKeys {
    /// The upsert key of table `table` (its name, for errors) with `metadata` whose rows are
    /// written with `arrow_schema`; refuses tables upserts cannot be written to.
    pub fn for_table(
        table: &str,
        metadata: &TableMetadata,
        arrow_schema: &SchemaRef,
    ) -> Result<Self> {
        let refuse = |message: String| Error::Unsupported {
            table: table.to_string(),
            message,
        };
        let schema = metadata.current_schema();
        let mut field_ids: Vec<i32> = schema.identifier_field_ids().collect();
        field_ids.sort_unstable();
        if field_ids.is_empty() {
            return Err(refuse(
                "an upsert needs identifier fields (PRIMARY KEY (...) in CREATE TABLE); this \
                 table has none"
                    .into(),
            ));
        }
        let mut columns = Vec::with_capacity(field_ids.len());
        for id in &field_ids {
            let top_level = schema.as_struct().fields().iter().position(|f| f.id == *id);
            let Some(index) = top_level else {
                let name = schema.name_by_field_id(*id).unwrap_or("?");
                return Err(refuse(format!(
                    "identifier field {name} (id {id}) is nested: upserts support top-level \
                     key columns only"
                )));
            };
            if index >= arrow_schema.fields().len() {
                return Err(refuse(format!("identifier field id {id} has no column")));
            }
            columns.push(index);
        }
        let spec = metadata.default_partition_spec();
        for field in spec.fields() {
            if !field_ids.contains(&field.source_id) {
                let source = schema.name_by_field_id(field.source_id).unwrap_or("?");
                let key: Vec<&str> = field_ids
                    .iter()
                    .map(|id| schema.name_by_field_id(*id).unwrap_or("?"))
                    .collect();
                return Err(refuse(format!(
                    "partition field {} (on column {source}) is not part of the key ({}): an \
                     upsert's equality deletes could not remove a key's old row in another \
                     partition; partition by key columns only",
                    field.name,
                    key.join(", ")
                )));
            }
        }
        let delete_schema = Arc::new(ArrowSchema::new(
            columns
                .iter()
                .map(|&i| Arc::clone(&arrow_schema.fields()[i]))
                .collect::<Vec<_>>(),
        ));
        Ok(Self {
            field_ids,
            columns,
            delete_schema,
        })
    }

    /// The identifier field ids, ascending.
    pub fn field_ids(&self) -> &[i32] {
        &self.field_ids
    }

    /// The key columns' indices in the table's Arrow schema.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// The Arrow schema of the equality-delete files.
    pub fn delete_schema(&self) -> &SchemaRef {
        &self.delete_schema
    }

    /// The key columns of `batch` (rows in the table's Arrow schema), as an equality-delete
    /// batch.
    pub fn project(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = self
            .columns
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        Ok(RecordBatch::try_new(
            Arc::clone(&self.delete_schema),
            columns,
        )?)
    }

    /// The rows of `batches` (in order) with each key's last row only, in the order of those
    /// last rows; `None` when there are no rows.
    pub fn keep_last(
        &self,
        schema: &SchemaRef,
        batches: &[RecordBatch],
    ) -> Result<Option<RecordBatch>> {
        let all = concat_batches(schema, batches)?;
        if all.num_rows() == 0 {
            return Ok(None);
        }
        let converter = RowConverter::new(
            self.columns
                .iter()
                .map(|&i| SortField::new(all.column(i).data_type().clone()))
                .collect(),
        )?;
        let keys: Vec<ArrayRef> = self
            .columns
            .iter()
            .map(|&i| Arc::clone(all.column(i)))
            .collect();
        let rows = converter.convert_columns(&keys)?;
        let mut last: HashMap<&[u8], u32> = HashMap::with_capacity(all.num_rows());
        for (index, row) in rows.iter().enumerate() {
            let index = u32::try_from(index).map_err(|_| {
                Error::InvalidArgument("an upsert writes at most 2^32 rows per writer".into())
            })?;
            last.insert(row.data(), index);
        }
        if last.len() == all.num_rows() {
            return Ok(Some(all));
        }
        let mut kept: Vec<u32> = last.into_values().collect();
        kept.sort_unstable();
        Ok(Some(take_record_batch(&all, &UInt32Array::from(kept))?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field};

    #[test]
    fn keep_last_keeps_each_keys_last_row_in_order() {
        let schema: SchemaRef = Arc::new(ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", DataType::Utf8, true),
        ]));
        let keys = UpsertKeys {
            field_ids: vec![1],
            columns: vec![0],
            delete_schema: Arc::new(ArrowSchema::new(vec![schema.field(0).clone()])),
        };
        let batch = |ids: Vec<i64>, vs: Vec<&str>| {
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from(ids)),
                    Arc::new(StringArray::from(vs)),
                ],
            )
            .expect("batch")
        };
        let kept = keys
            .keep_last(
                &schema,
                &[
                    batch(vec![1, 2, 1], vec!["a", "b", "c"]),
                    batch(vec![3, 2], vec!["d", "e"]),
                ],
            )
            .expect("dedupe")
            .expect("rows");
        let ids = kept
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("ids");
        let vs = kept
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("vs");
        assert_eq!(ids.values().to_vec(), vec![1, 3, 2]);
        assert_eq!(
            (0..3).map(|i| vs.value(i)).collect::<Vec<_>>(),
            vec!["c", "d", "e"]
        );
        assert!(keys.keep_last(&schema, &[]).expect("empty").is_none());
    }
}
