//! Applying one data file's deleted positions while it is read.
//!
//! The deleted positions of a file (position delete files and deletion vectors, folded into one
//! bitmap) are applied in two layers:
//!
//! - **Skips** ([`PositionalPlan`]): row groups whose every row is deleted, and runs of at
//!   least [`MIN_SKIPPED_RUN`] consecutive deleted rows, become a `ParquetAccessPlan` (skipped
//!   row groups, row selections), so the reader never decodes them.
//! - **A keep-mask** ([`PositionFilter`]): every other deleted row is dropped from the decoded
//!   batches with one vectorised filter. The plan records exactly which positions the reader
//!   emits, in order, so each batch's positions are known without a row-position column.
//!
//! Scattered deletes (Spark's merge-on-read UPDATE of one row in ten) would otherwise make a
//! row selection of one selector per deleted row, whose bookkeeping in the Parquet reader
//! costs more than decoding the rows and filtering them.

use std::ops::Range;

use arrow::array::{BooleanArray, RecordBatch, RecordBatchOptions};
use arrow::buffer::{BooleanBuffer, MutableBuffer};
use datafusion::datasource::physical_plan::parquet::{ParquetAccessPlan, RowGroupAccess};
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use roaring::RoaringTreemap;
use roaring::treemap::IntoIter;

/// Deleted runs at least this long are skipped by the reader; shorter ones are filtered.
pub(crate) const MIN_SKIPPED_RUN: u64 = 4096;

/// How the reader is to read one data file with positional deletes.
#[derive(Debug)]
pub(crate) struct PositionalPlan {
    /// Row groups and row selections to read.
    pub(crate) access: ParquetAccessPlan,
    /// The file positions the reader emits under `access`, in order.
    pub(crate) emitted: Vec<Range<u64>>,
    /// Deleted rows the reader skips (never decoded).
    pub(crate) skipped_deleted: u64,
}

/// Plans the read of a file whose row groups hold `row_group_rows` rows, of which the reader
/// is to read those with `scan[i]` (the others are outside the task's byte range or pruned by
/// statistics), `deleted` holding the file's deleted positions.
pub(crate) fn positional_plan(
    deleted: &RoaringTreemap,
    row_group_rows: &[u64],
    scan: &[bool],
) -> PositionalPlan {
    let mut groups = Vec::with_capacity(row_group_rows.len());
    let mut emitted: Vec<Range<u64>> = Vec::new();
    let mut skipped_deleted = 0;
    let mut emit = |range: Range<u64>| match emitted.last_mut() {
        Some(last) if last.end == range.start => last.end = range.end,
        _ => emitted.push(range),
    };
    let mut start = 0u64;
    for (index, &rows) in row_group_rows.iter().enumerate() {
        let end = start + rows;
        let group_start = start;
        start = end;
        if !scan.get(index).copied().unwrap_or(true) {
            groups.push(RowGroupAccess::Skip);
            continue;
        }
        if rows == 0 {
            groups.push(RowGroupAccess::Scan);
            continue;
        }
        if deleted.range_cardinality(group_start..end) == rows {
            skipped_deleted += rows;
            groups.push(RowGroupAccess::Skip);
            continue;
        }
        // Long deleted runs inside the group become skips.
        let mut selectors = Vec::new();
        let mut cursor = group_start;
        for run in deleted_runs(deleted, group_start..end) {
            if run.end - run.start < MIN_SKIPPED_RUN {
                continue;
            }
            if run.start > cursor {
                selectors.push(RowSelector::select((run.start - cursor) as usize));
                emit(cursor..run.start);
            }
            selectors.push(RowSelector::skip((run.end - run.start) as usize));
            skipped_deleted += run.end - run.start;
            cursor = run.end;
        }
        if selectors.is_empty() {
            groups.push(RowGroupAccess::Scan);
            emit(group_start..end);
            continue;
        }
        if cursor < end {
            selectors.push(RowSelector::select((end - cursor) as usize));
            emit(cursor..end);
        }
        groups.push(RowGroupAccess::Selection(RowSelection::from(selectors)));
    }
    PositionalPlan {
        access: ParquetAccessPlan::new(groups),
        emitted,
        skipped_deleted,
    }
}

/// Maximal runs of consecutive deleted positions within `range`.
fn deleted_runs(deleted: &RoaringTreemap, range: Range<u64>) -> impl Iterator<Item = Range<u64>> {
    let mut positions = deleted.iter();
    positions.advance_to(range.start);
    let mut positions = positions.take_while(move |p| *p < range.end).peekable();
    std::iter::from_fn(move || {
        let first = positions.next()?;
        let mut end = first + 1;
        while positions.next_if_eq(&end).is_some() {
            end += 1;
        }
        Some(first..end)
    })
}

/// Drops the deleted rows from the batches the reader emits for one file under a
/// [`PositionalPlan`], batch by batch, in order.
pub(crate) struct PositionFilter {
    /// Emitted position ranges, consumed from the front.
    emitted: std::vec::IntoIter<Range<u64>>,
    current: Option<Range<u64>>,
    /// Deleted positions, ascending, consumed as the scan passes them.
    deleted: IntoIter,
    next_deleted: Option<u64>,
}

impl PositionFilter {
    /// A filter for a file read under `plan`, whose deleted positions are `deleted`.
    pub(crate) fn new(plan: &PositionalPlan, deleted: RoaringTreemap) -> Self {
        let mut emitted = plan.emitted.clone().into_iter();
        let current = emitted.next();
        let mut deleted = deleted.into_iter();
        let next_deleted = deleted.next();
        Self {
            emitted,
            current,
            deleted,
            next_deleted,
        }
    }

    /// The keep-mask of the next `rows` emitted rows (`None`: keep them all).
    pub(crate) fn next_mask(&mut self, rows: usize) -> Option<BooleanBuffer> {
        let mut mask: Option<MutableBuffer> = None;
        let mut offset = 0usize;
        while offset < rows {
            let Some(range) = self.current.as_mut() else {
                // The reader emitted more rows than planned: nothing left to delete.
                break;
            };
            let take = (range.end - range.start).min((rows - offset) as u64);
            let (start, end) = (range.start, range.start + take);
            // Deleted positions in [start, end).
            // (Positions the reader skipped: whole row groups, long runs.)
            while self.next_deleted.is_some_and(|p| p < start) {
                self.next_deleted = self.deleted.next();
            }
            while let Some(p) = self.next_deleted.filter(|p| *p < end) {
                let bits = mask.get_or_insert_with(|| all_set(rows));
                arrow::util::bit_util::unset_bit(
                    bits.as_slice_mut(),
                    offset + (p - start) as usize,
                );
                self.next_deleted = self.deleted.next();
            }
            offset += take as usize;
            range.start = end;
            if range.start == range.end {
                self.current = self.emitted.next();
            }
        }
        mask.map(|bits| BooleanBuffer::new(bits.into(), 0, rows))
    }

    /// `batch` without its deleted rows; the number of rows removed.
    pub(crate) fn apply(
        &mut self,
        batch: RecordBatch,
    ) -> arrow::error::Result<(RecordBatch, usize)> {
        let rows = batch.num_rows();
        let Some(keep) = self.next_mask(rows) else {
            return Ok((batch, 0));
        };
        let kept = keep.count_set_bits();
        let batch = if batch.num_columns() == 0 {
            RecordBatch::try_new_with_options(
                batch.schema(),
                vec![],
                &RecordBatchOptions::new().with_row_count(Some(kept)),
            )?
        } else {
            arrow::compute::filter_record_batch(&batch, &BooleanArray::new(keep, None))?
        };
        Ok((batch, rows - kept))
    }
}

impl std::fmt::Debug for PositionFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PositionFilter")
            .field("current", &self.current)
            .field("next_deleted", &self.next_deleted)
            .finish_non_exhaustive()
    }
}

/// A buffer of `bits` set bits.
fn all_set(bits: usize) -> MutableBuffer {
    let mut buffer = MutableBuffer::new_null(bits);
    buffer.as_slice_mut().fill(0xff);
    buffer
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::Int64Type;

    use super::*;

    /// Reads `plan` the way the Parquet reader does: the emitted positions, in batches.
    fn read(
        plan: &PositionalPlan,
        deleted: &RoaringTreemap,
        batch_rows: usize,
    ) -> (Vec<i64>, usize) {
        let positions: Vec<i64> = plan
            .emitted
            .iter()
            .flat_map(|r| r.clone())
            .map(|p| p as i64)
            .collect();
        let mut filter = PositionFilter::new(plan, deleted.clone());
        let mut out = Vec::new();
        let mut removed = 0;
        for chunk in positions.chunks(batch_rows) {
            let batch = RecordBatch::try_from_iter([(
                "pos",
                Arc::new(Int64Array::from(chunk.to_vec())) as _,
            )])
            .unwrap();
            let (batch, r) = filter.apply(batch).unwrap();
            removed += r;
            let column = batch.column(0).as_primitive::<Int64Type>();
            out.extend(column.values().iter().take(column.len()));
        }
        (out, removed)
    }

    fn check(deleted: &[u64], row_groups: &[u64], scan: &[bool], batch_rows: usize) {
        let deleted: RoaringTreemap = deleted.iter().copied().collect();
        let plan = positional_plan(&deleted, row_groups, scan);
        let (kept, _) = read(&plan, &deleted, batch_rows);
        let mut expected = Vec::new();
        let mut start = 0u64;
        for (i, rows) in row_groups.iter().enumerate() {
            if scan.get(i).copied().unwrap_or(true) {
                expected.extend((start..start + rows).filter(|p| !deleted.contains(*p)));
            }
            start += rows;
        }
        let expected: Vec<i64> = expected.into_iter().map(|p| p as i64).collect();
        assert_eq!(
            kept, expected,
            "row groups {row_groups:?}, batch {batch_rows}"
        );
    }

    #[test]
    fn scattered_deletes_are_filtered_not_selected() {
        let deleted: Vec<u64> = (0..20_000).filter(|p| p % 10 == 0).collect();
        let deleted_map: RoaringTreemap = deleted.iter().copied().collect();
        let plan = positional_plan(&deleted_map, &[10_000, 10_000], &[true, true]);
        assert_eq!(plan.skipped_deleted, 0);
        assert!(
            plan.access
                .inner()
                .iter()
                .all(|g| matches!(g, RowGroupAccess::Scan))
        );
        assert_eq!(plan.emitted, vec![0..20_000]);
        for batch in [1, 7, 1000, 8192, 20_000] {
            check(&deleted, &[10_000, 10_000], &[true, true], batch);
        }
    }

    #[test]
    fn long_runs_and_whole_row_groups_are_skipped() {
        // Row group 1 entirely deleted; a 5,000-row run inside row group 0; scattered rows.
        let mut deleted: Vec<u64> = (1000..6000).collect();
        deleted.extend(10_000..20_000);
        deleted.extend([3, 7, 9_999, 20_001, 25_000]);
        let deleted_map: RoaringTreemap = deleted.iter().copied().collect();
        let plan = positional_plan(&deleted_map, &[10_000, 10_000, 10_000], &[true; 3]);
        assert_eq!(plan.skipped_deleted, 15_000);
        assert_eq!(plan.emitted, vec![0..1000, 6000..10_000, 20_000..30_000]);
        let groups = plan.access.inner();
        assert!(matches!(groups[1], RowGroupAccess::Skip));
        assert!(matches!(groups[2], RowGroupAccess::Scan));
        let RowGroupAccess::Selection(selection) = &groups[0] else {
            panic!("expected a selection, got {:?}", groups[0]);
        };
        assert_eq!(selection.row_count(), 5000);
        for batch in [1, 999, 1000, 4096, 30_000] {
            check(&deleted, &[10_000, 10_000, 10_000], &[true; 3], batch);
        }
    }

    #[test]
    fn row_groups_not_scanned_are_skipped_and_their_deletes_passed_over() {
        let deleted: Vec<u64> = vec![5, 150, 151, 260, 299];
        for scan in [
            [false, true, true],
            [true, false, true],
            [true, true, false],
        ] {
            for batch in [1, 3, 64, 300] {
                check(&deleted, &[100, 100, 100], &scan, batch);
            }
        }
        check(&deleted, &[100, 0, 200], &[true, true, true], 17);
    }

    #[test]
    fn batches_without_deletes_pass_through_untouched() {
        let deleted: RoaringTreemap = [500u64].into_iter().collect();
        let plan = positional_plan(&deleted, &[1000], &[true]);
        let mut filter = PositionFilter::new(&plan, deleted);
        assert!(filter.next_mask(500).is_none());
        let mask = filter.next_mask(10).unwrap();
        assert_eq!(mask.count_set_bits(), 9);
        assert!(!mask.value(0));
        assert!(filter.next_mask(490).is_none());
    }

    #[test]
    fn batches_without_columns_keep_their_row_count() {
        let deleted: RoaringTreemap = (0..100u64).filter(|p| p % 4 == 0).collect();
        let plan = positional_plan(&deleted, &[100], &[true]);
        let mut filter = PositionFilter::new(&plan, deleted);
        let empty = RecordBatch::try_new_with_options(
            Arc::new(arrow::datatypes::Schema::empty()),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(100)),
        )
        .unwrap();
        let (batch, removed) = filter.apply(empty).unwrap();
        assert_eq!((batch.num_rows(), removed), (75, 25));
    }
}
