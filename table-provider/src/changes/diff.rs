//! One snapshot's change rows from the rows before and after it (Spark's changelog view):
//!
//! 1. rows of a data file on both sides (its deletes changed) at the same position are
//!    unchanged and dropped: files are immutable, so a position names one row;
//! 2. a deleted and an inserted row with equal values cancel (carry-over rows, e.g. the
//!    unchanged rows of a copy-on-write rewrite), as many times as they pair;
//! 3. with identifier fields, the one deleted and the one inserted row of a key become
//!    `UPDATE_BEFORE` / `UPDATE_AFTER` (Spark's `compute_updates`).
//!
//! What remains is `DELETE` and `INSERT`. The snapshot's changed rows are held in memory
//! (only snapshots that both delete and insert rows come here).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::{concat_batches, interleave};
use arrow::datatypes::{Int64Type, SchemaRef};
use arrow::row::{RowConverter, SortField};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{DataFusionError, Result as DFResult};

use super::columns::{ChangeType, with_change_columns};

/// The change rows of one snapshot (see the module docs). `before` and `after` are positional
/// scan batches (table columns, file path, position) with `table_schema`'s columns first; the
/// rows carry the snapshot's `(ordinal, snapshot id)`.
pub(crate) fn diff_snapshot(
    table_schema: &SchemaRef,
    output_schema: &SchemaRef,
    before: &[RecordBatch],
    after: &[RecordBatch],
    shared_files: &HashSet<String>,
    identifier_columns: &[usize],
    (ordinal, snapshot_id): (i32, i64),
) -> DFResult<Option<RecordBatch>> {
    let columns = table_schema.fields().len();
    let (Some(first_before), Some(first_after)) = (before.first(), after.first()) else {
        return Err(DataFusionError::Internal(
            "a change diff needs rows on both sides".into(),
        ));
    };
    let before = concat_batches(&first_before.schema(), before)?;
    let after = concat_batches(&first_after.schema(), after)?;
    let before_positions = shared_positions(&before, columns, shared_files)?;
    let after_positions = shared_positions(&after, columns, shared_files)?;
    // 1. Rows at the same position of a shared file are unchanged.
    let before_keys: HashSet<&(String, i64)> = before_positions.values().collect();
    let after_keys: HashSet<&(String, i64)> = after_positions.values().collect();
    let deleted: Vec<usize> = (0..before.num_rows())
        .filter(|i| {
            before_positions
                .get(i)
                .is_none_or(|key| !after_keys.contains(key))
        })
        .collect();
    let inserted: Vec<usize> = (0..after.num_rows())
        .filter(|i| {
            after_positions
                .get(i)
                .is_none_or(|key| !before_keys.contains(key))
        })
        .collect();

    // 2. Carry-over rows cancel.
    let all: Vec<usize> = (0..columns).collect();
    let before_rows = row_keys(&before, &all)?;
    let after_rows = row_keys(&after, &all)?;
    let mut deleted_by_value: HashMap<&[u8], Vec<usize>> = HashMap::new();
    for &i in &deleted {
        deleted_by_value
            .entry(before_rows[i].as_slice())
            .or_default()
            .push(i);
    }
    let mut cancelled_before = HashSet::new();
    let mut inserted_left = Vec::new();
    for &i in &inserted {
        match deleted_by_value
            .get_mut(after_rows[i].as_slice())
            .and_then(Vec::pop)
        {
            Some(d) => {
                cancelled_before.insert(d);
            }
            None => inserted_left.push(i),
        }
    }
    let deleted_left: Vec<usize> = deleted
        .into_iter()
        .filter(|i| !cancelled_before.contains(i))
        .collect();

    // 3. Updates: one deleted and one inserted row of a key.
    let mut out: Vec<(usize, usize, ChangeType)> = Vec::new();
    let mut paired_before = HashSet::new();
    let mut paired_after = HashSet::new();
    if !identifier_columns.is_empty() {
        let before_ids = row_keys(&before, identifier_columns)?;
        let after_ids = row_keys(&after, identifier_columns)?;
        let mut deletes_by_key: HashMap<&[u8], Vec<usize>> = HashMap::new();
        for &i in &deleted_left {
            deletes_by_key
                .entry(before_ids[i].as_slice())
                .or_default()
                .push(i);
        }
        let mut inserts_by_key: HashMap<&[u8], Vec<usize>> = HashMap::new();
        for &i in &inserted_left {
            inserts_by_key
                .entry(after_ids[i].as_slice())
                .or_default()
                .push(i);
        }
        for &d in &deleted_left {
            let key = before_ids[d].as_slice();
            if let (Some([d]), Some([a])) = (
                deletes_by_key.get(key).map(Vec::as_slice),
                inserts_by_key.get(key).map(Vec::as_slice),
            ) {
                out.push((0, *d, ChangeType::UpdateBefore));
                out.push((1, *a, ChangeType::UpdateAfter));
                paired_before.insert(*d);
                paired_after.insert(*a);
            }
        }
    }
    out.extend(
        deleted_left
            .iter()
            .filter(|i| !paired_before.contains(*i))
            .map(|&i| (0, i, ChangeType::Delete)),
    );
    out.extend(
        inserted_left
            .iter()
            .filter(|i| !paired_after.contains(*i))
            .map(|&i| (1, i, ChangeType::Insert)),
    );
    if out.is_empty() {
        return Ok(None);
    }
    let indices: Vec<(usize, usize)> = out.iter().map(|(side, row, _)| (*side, *row)).collect();
    let mut table_columns: Vec<ArrayRef> = Vec::with_capacity(columns);
    for c in 0..columns {
        let sides: [&dyn Array; 2] = [before.column(c).as_ref(), after.column(c).as_ref()];
        table_columns.push(interleave(&sides, &indices)?);
    }
    let types: Vec<ChangeType> = out.iter().map(|(_, _, t)| *t).collect();
    with_change_columns(output_schema, table_columns, &types, ordinal, snapshot_id).map(Some)
}

/// Row index → (file, position) for the rows of `batch` in `shared` files.
fn shared_positions(
    batch: &RecordBatch,
    columns: usize,
    shared: &HashSet<String>,
) -> DFResult<HashMap<usize, (String, i64)>> {
    if shared.is_empty() {
        return Ok(HashMap::new());
    }
    let (Some(files), Some(positions)) = (
        batch.column(columns).as_string_opt::<i32>(),
        batch.column(columns + 1).as_primitive_opt::<Int64Type>(),
    ) else {
        return Err(DataFusionError::Internal(
            "a positional scan ends with file and position columns".into(),
        ));
    };
    Ok((0..batch.num_rows())
        .filter(|i| shared.contains(files.value(*i)))
        .map(|i| (i, (files.value(i).to_string(), positions.value(i))))
        .collect())
}

/// Each row of `batch`'s `columns` as comparable bytes: Arrow's row format where it applies,
/// else (maps) each value's text with its nullness.
fn row_keys(batch: &RecordBatch, columns: &[usize]) -> DFResult<Vec<Vec<u8>>> {
    let arrays: Vec<ArrayRef> = columns
        .iter()
        .map(|c| Arc::clone(batch.column(*c)))
        .collect();
    let fields: Vec<SortField> = arrays
        .iter()
        .map(|a| SortField::new(a.data_type().clone()))
        .collect();
    if RowConverter::supports_fields(&fields) {
        let converter = RowConverter::new(fields)?;
        let rows = converter.convert_columns(&arrays)?;
        return Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect());
    }
    let options = FormatOptions::default().with_null("\u{0}NULL");
    let formatters = arrays
        .iter()
        .map(|a| ArrayFormatter::try_new(a.as_ref(), &options))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((0..batch.num_rows())
        .map(|i| {
            let mut key = Vec::new();
            for f in &formatters {
                key.extend_from_slice(f.value(i).to_string().as_bytes());
                key.push(0x1f);
            }
            key
        })
        .collect())
}
