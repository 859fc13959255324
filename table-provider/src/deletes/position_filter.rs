//! Applying one data file's deleted positions while it is read.
//!
//! The deleted positions of a file (position delete files and deletion vectors, folded into one
//! bitmap) are applied in two layers:
//!
//! - **Skips** ([`PositionalPlan`]): row groups whose every row is deleted, runs of at least
//!   [`MIN_SKIPPED_RUN`] consecutive deleted rows, and the rows of pages a filtered read's page
//!   index prunes ([`GroupRead::Rows`]), become a `ParquetAccessPlan` (skipped row groups, row
//!   selections), so the reader never decodes them.
//! - **A keep-mask** ([`PositionFilter`]): every other deleted row is dropped from the decoded
//!   batches with one vectorised filter. The plan knows exactly which positions the reader
//!   emits, in order, so it builds one bit per emitted row up front and each batch takes the
//!   next slice of it — no row-position column, no per-row lookups while scanning.
//!
//! Scattered deletes (Spark's merge-on-read UPDATE of one row in ten) would otherwise make a
//! row selection of one selector per deleted row, whose bookkeeping in the Parquet reader
//! costs more than decoding the rows and filtering them.

use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{BooleanArray, Int64Array, RecordBatch, RecordBatchOptions};
use arrow::buffer::{BooleanBuffer, MutableBuffer};
use arrow::error::ArrowError;
use datafusion::datasource::physical_plan::parquet::{ParquetAccessPlan, RowGroupAccess};
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use roaring::RoaringTreemap;

/// Deleted runs at least this long are skipped by the reader; shorter ones are filtered.
pub(crate) const MIN_SKIPPED_RUN: u64 = 4096;

/// The deleted positions of one data file.
#[derive(Debug, Clone)]
pub(crate) enum DeletedPositions {
    /// Sorted, distinct positions: one position delete file's entries for the file, shared
    /// with every reader of it.
    Sorted(Arc<[u64]>),
    /// Several sources (or a deletion vector) folded together.
    Bitmap(RoaringTreemap),
}

impl DeletedPositions {
    /// Whether `other` holds the same positions (a slice shared with it is not compared). The
    /// two forms are never the same: a file's deletes take one form or the other, whichever
    /// scan reads it.
    pub(crate) fn same_as(&self, other: &DeletedPositions) -> bool {
        match (self, other) {
            (DeletedPositions::Sorted(a), DeletedPositions::Sorted(b)) => {
                Arc::ptr_eq(a, b) || a == b
            }
            (DeletedPositions::Bitmap(a), DeletedPositions::Bitmap(b)) => a == b,
            _ => false,
        }
    }

    /// A hash of how many positions there are and of the first and last, for lookups by
    /// content ([`DeletedPositions::same_as`] tells them apart).
    pub(crate) fn fingerprint(&self) -> u64 {
        let mut hasher = std::hash::DefaultHasher::new();
        match self {
            DeletedPositions::Sorted(positions) => {
                (0u8, positions.len(), positions.first(), positions.last()).hash(&mut hasher);
            }
            DeletedPositions::Bitmap(bitmap) => {
                (1u8, bitmap.len(), bitmap.min(), bitmap.max()).hash(&mut hasher);
            }
        }
        hasher.finish()
    }

    /// About how many bytes it holds.
    pub(crate) fn memory_size(&self) -> usize {
        match self {
            DeletedPositions::Sorted(positions) => std::mem::size_of_val(positions.as_ref()),
            DeletedPositions::Bitmap(bitmap) => bitmap.serialized_size(),
        }
    }

    /// The deleted positions within `range`, ascending (`buffer` holds them when they are not
    /// stored as a slice).
    fn within<'a>(&'a self, range: Range<u64>, buffer: &'a mut Vec<u64>) -> &'a [u64] {
        match self {
            DeletedPositions::Sorted(positions) => {
                let from = positions.partition_point(|p| *p < range.start);
                let to = from + positions[from..].partition_point(|p| *p < range.end);
                &positions[from..to]
            }
            DeletedPositions::Bitmap(bitmap) => {
                buffer.clear();
                let mut positions = bitmap.iter();
                positions.advance_to(range.start);
                buffer.extend(positions.take_while(|p| *p < range.end));
                buffer
            }
        }
    }
}

/// How the reader is to read one data file with positional deletes.
#[derive(Debug)]
pub(crate) struct PositionalPlan {
    /// Row groups and row selections to read.
    pub(crate) access: ParquetAccessPlan,
    /// One bit per emitted row, in emission order: set when the row is live.
    pub(crate) keep: BooleanBuffer,
    /// Deleted rows the reader skips (never decoded).
    pub(crate) skipped_deleted: u64,
    /// The positions the reader emits, in order, as ranges (a positional scan reports them).
    pub(crate) emitted: Arc<[Range<u64>]>,
}

/// What the reader is to read of one row group (before deletes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GroupRead {
    /// Nothing: outside the task's byte range, or pruned by statistics.
    Skip,
    /// Every row.
    All,
    /// These rows (offsets within the row group: ascending, disjoint), the pages the page
    /// index keeps.
    Rows(Vec<Range<u64>>),
}

impl From<bool> for GroupRead {
    fn from(scan: bool) -> Self {
        if scan {
            GroupRead::All
        } else {
            GroupRead::Skip
        }
    }
}

impl GroupRead {
    /// The row group's rows to read, from the row selection of an access plan over a row
    /// group of `rows` rows.
    pub(crate) fn of_access(access: &RowGroupAccess, rows: u64) -> Self {
        match access {
            RowGroupAccess::Skip => GroupRead::Skip,
            RowGroupAccess::Scan => GroupRead::All,
            RowGroupAccess::Selection(selection) => {
                let mut ranges: Vec<Range<u64>> = Vec::new();
                let mut at = 0u64;
                for selector in selection.iter() {
                    let end = (at + selector.row_count as u64).min(rows);
                    if !selector.skip && end > at {
                        match ranges.last_mut() {
                            Some(last) if last.end == at => last.end = end,
                            _ => ranges.push(at..end),
                        }
                    }
                    at = end;
                }
                match ranges.as_slice() {
                    [] => GroupRead::Skip,
                    [only] if *only == (0..rows) => GroupRead::All,
                    _ => GroupRead::Rows(ranges),
                }
            }
        }
    }

    /// The rows to read of a row group of `rows` rows (offsets within it).
    fn ranges(&self, rows: u64) -> Vec<Range<u64>> {
        match self {
            GroupRead::Skip => vec![],
            GroupRead::All => std::iter::once(0..rows).collect(),
            GroupRead::Rows(ranges) => ranges
                .iter()
                .map(|r| r.start.min(rows)..r.end.min(rows))
                .filter(|r| !r.is_empty())
                .collect(),
        }
    }
}

/// Plans the read of a file whose row groups hold `row_group_rows` rows, of which the reader
/// is to read those with `scan[i]` (the others are outside the task's byte range or pruned by
/// statistics), `deleted` holding the file's deleted positions.
#[cfg(test)]
pub(crate) fn positional_plan(
    deleted: &DeletedPositions,
    row_group_rows: &[u64],
    scan: &[bool],
) -> PositionalPlan {
    let reads: Vec<GroupRead> = scan.iter().map(|&s| GroupRead::from(s)).collect();
    positional_plan_of(deleted, row_group_rows, &reads)
}

/// Plans the read of a file whose row groups hold `row_group_rows` rows, of which the reader
/// is to read what `reads[i]` says (a missing entry: the whole group), `deleted` holding the
/// file's deleted positions. One pass over the deleted positions of the rows read. Rows the
/// reads leave out (pages pruned by the page index) are skipped like deleted runs, but are
/// neither emitted nor counted as deleted.
pub(crate) fn positional_plan_of(
    deleted: &DeletedPositions,
    row_group_rows: &[u64],
    reads: &[GroupRead],
) -> PositionalPlan {
    // Each row group's rows to read (offsets within it), worked out once.
    let to_read: Vec<Vec<Range<u64>>> = row_group_rows
        .iter()
        .enumerate()
        .map(|(i, &rows)| reads.get(i).unwrap_or(&GroupRead::All).ranges(rows))
        .collect();
    let capacity: u64 = to_read.iter().flatten().map(|r| r.end - r.start).sum();
    let mut keep = all_set(capacity as usize);
    let mut groups = Vec::with_capacity(row_group_rows.len());
    // Rows emitted so far (the keep-mask's length).
    let mut emitted_rows = 0u64;
    let mut skipped_deleted = 0;
    let mut buffer = Vec::new();
    let mut emitted: Vec<Range<u64>> = Vec::new();
    let mut emit = |range: Range<u64>| match emitted.last_mut() {
        Some(last) if last.end == range.start => last.end = range.end,
        _ if range.is_empty() => {}
        _ => emitted.push(range),
    };
    let mut start = 0u64;
    for (&rows, ranges) in row_group_rows.iter().zip(to_read) {
        let (group_start, group_end) = (start, start + rows);
        start = group_end;
        if ranges.is_empty() {
            groups.push(RowGroupAccess::Skip);
            continue;
        }
        let whole = ranges.len() == 1 && ranges[0] == (0..rows);
        if whole && rows > 0 {
            let positions = deleted.within(group_start..group_end, &mut buffer);
            if positions.len() as u64 == rows {
                skipped_deleted += rows;
                groups.push(RowGroupAccess::Skip);
                continue;
            }
        }
        // Per range read: its deleted runs, long ones skipped, short ones keep-mask holes;
        // rows between ranges skipped.
        let mut selectors = Vec::new();
        let mut skips = false;
        // Where the selectors have got to (absolute position).
        let mut selected_to = group_start;
        for range in ranges {
            let (range_start, end) = (group_start + range.start, group_start + range.end);
            if range_start > selected_to {
                selectors.push(RowSelector::skip((range_start - selected_to) as usize));
                skips = true;
            }
            let positions = deleted.within(range_start..end, &mut buffer);
            // Start of the segment being emitted, and its row in the keep-mask.
            let (mut cursor, mut cursor_row) = (range_start, emitted_rows);
            let mut at = 0;
            while at < positions.len() {
                let first = positions[at];
                let mut run = 1;
                while at + run < positions.len() && positions[at + run] == first + run as u64 {
                    run += 1;
                }
                at += run;
                let run_end = first + run as u64;
                if run as u64 >= MIN_SKIPPED_RUN {
                    if first > cursor {
                        selectors.push(RowSelector::select((first - cursor) as usize));
                        emitted_rows += first - cursor;
                        emit(cursor..first);
                    }
                    selectors.push(RowSelector::skip(run));
                    skips = true;
                    skipped_deleted += run as u64;
                    (cursor, cursor_row) = (run_end, emitted_rows);
                } else {
                    let bits = keep.as_slice_mut();
                    for p in first..run_end {
                        arrow::util::bit_util::unset_bit(
                            bits,
                            (cursor_row + (p - cursor)) as usize,
                        );
                    }
                }
            }
            if cursor < end {
                emitted_rows += end - cursor;
                emit(cursor..end);
                selectors.push(RowSelector::select((end - cursor) as usize));
            }
            selected_to = end;
        }
        if selected_to < group_end {
            selectors.push(RowSelector::skip((group_end - selected_to) as usize));
            skips = true;
        }
        groups.push(if skips {
            RowGroupAccess::Selection(RowSelection::from(selectors))
        } else {
            RowGroupAccess::Scan
        });
    }
    PositionalPlan {
        access: ParquetAccessPlan::new(groups),
        keep: BooleanBuffer::new(keep.into(), 0, emitted_rows as usize),
        skipped_deleted,
        emitted: emitted.into(),
    }
}

/// Drops the deleted rows from the batches the reader emits for one file under a
/// [`PositionalPlan`], batch by batch, in order: each batch takes the next slice of the plan's
/// keep-mask.
#[derive(Debug)]
pub(crate) struct PositionFilter {
    keep: BooleanBuffer,
    /// Rows of the keep-mask consumed.
    offset: usize,
    /// The emitted positions (for [`PositionFilter::apply_with_positions`]).
    emitted: Arc<[Range<u64>]>,
    /// The range of `emitted` the next row is in, and how far into it.
    range: usize,
    into_range: u64,
}

impl PositionFilter {
    /// A filter for a file read under `plan`.
    pub(crate) fn new(plan: &PositionalPlan) -> Self {
        Self {
            keep: plan.keep.clone(),
            offset: 0,
            emitted: Arc::clone(&plan.emitted),
            range: 0,
            into_range: 0,
        }
    }

    /// The ranges of data-file positions the next `rows` emitted rows cover, in order.
    fn next_ranges(&mut self, rows: usize) -> Result<Vec<Range<u64>>, ArrowError> {
        let mut out = Vec::new();
        let mut covered = 0usize;
        while covered < rows {
            let Some(range) = self.emitted.get(self.range) else {
                return Err(ArrowError::ComputeError(format!(
                    "the Parquet reader returned more rows than its access plan selects ({} \
                     more)",
                    rows - covered
                )));
            };
            let start = range.start + self.into_range;
            let take = (range.end - start).min((rows - covered) as u64);
            out.push(start..start + take);
            covered += take as usize;
            self.into_range += take;
            if range.start + self.into_range == range.end {
                self.range += 1;
                self.into_range = 0;
            }
        }
        Ok(out)
    }

    /// The positions in the data file of the next `rows` emitted rows.
    fn next_positions(&mut self, rows: usize) -> Result<Vec<i64>, ArrowError> {
        let mut out = Vec::with_capacity(rows);
        for range in self.next_ranges(rows)? {
            out.extend(range.map(|p| p as i64));
        }
        Ok(out)
    }

    /// `batch` without its deleted rows, the number of rows removed, and the position in the
    /// data file of each row kept.
    pub(crate) fn apply_with_positions(
        &mut self,
        batch: RecordBatch,
    ) -> arrow::error::Result<(RecordBatch, usize, Int64Array)> {
        let rows = batch.num_rows();
        let positions = Int64Array::from(self.next_positions(rows)?);
        let Some(keep) = self.next_mask(rows) else {
            return Ok((batch, 0, positions));
        };
        let kept = keep.count_set_bits();
        let keep = BooleanArray::new(keep, None);
        let positions = arrow::compute::filter(&positions, &keep)?;
        let positions = positions
            .as_any()
            .downcast_ref::<Int64Array>()
            .cloned()
            .ok_or_else(|| ArrowError::ComputeError("positions are not Int64".into()))?;
        Ok((
            without_deleted(&batch, keep.values())?,
            rows - kept,
            positions,
        ))
    }

    /// `batch` without its deleted rows, the number of rows removed, and where the rows kept
    /// come from: what [`PositionFilter::apply_with_positions`] gives, without a position
    /// per row (a scan recording equality-deleted positions needs those of a few rows only).
    pub(crate) fn apply_with_origins(
        &mut self,
        batch: RecordBatch,
    ) -> arrow::error::Result<(RecordBatch, usize, RowOrigins)> {
        let rows = batch.num_rows();
        let ranges = self.next_ranges(rows)?;
        let keep = self.next_mask(rows);
        let (batch, removed) = match &keep {
            None => (batch, 0),
            Some(keep) => (without_deleted(&batch, keep)?, rows - keep.count_set_bits()),
        };
        Ok((batch, removed, RowOrigins { ranges, keep }))
    }

    /// The keep-mask of the next `rows` emitted rows (`None`: keep them all).
    pub(crate) fn next_mask(&mut self, rows: usize) -> Option<BooleanBuffer> {
        let start = self.offset.min(self.keep.len());
        // Rows past the plan (the reader emitted more than planned) have no deletes.
        let len = rows.min(self.keep.len() - start);
        self.offset += rows;
        let planned = self.keep.slice(start, len);
        if planned.count_set_bits() == len {
            return None;
        }
        if len == rows {
            return Some(planned);
        }
        let mut mask = arrow::array::BooleanBufferBuilder::new(rows);
        mask.append_buffer(&planned);
        mask.append_n(rows - len, true);
        Some(mask.finish())
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
        Ok((
            without_deleted(&batch, &keep)?,
            rows - keep.count_set_bits(),
        ))
    }
}

/// The rows of `batch` that `keep` marks.
fn without_deleted(batch: &RecordBatch, keep: &BooleanBuffer) -> arrow::error::Result<RecordBatch> {
    if batch.num_columns() == 0 {
        return RecordBatch::try_new_with_options(
            batch.schema(),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(keep.count_set_bits())),
        );
    }
    arrow::compute::filter_record_batch(batch, &BooleanArray::new(keep.clone(), None))
}

/// Where the rows a [`PositionFilter`] kept of one batch come from in the data file: the
/// ranges of positions the batch covered, and the keep-mask applied to it (`None`: every row
/// kept).
#[derive(Debug)]
pub(crate) struct RowOrigins {
    ranges: Vec<Range<u64>>,
    keep: Option<BooleanBuffer>,
}

impl RowOrigins {
    /// The data-file positions, ascending, of the kept rows that `rows` marks (a mask over the
    /// kept rows).
    pub(crate) fn positions_of(&self, rows: &BooleanBuffer) -> arrow::error::Result<Vec<u64>> {
        let mut out = Vec::with_capacity(rows.count_set_bits());
        // Kept row → emitted row: the keep-mask's set bits, walked once.
        let mut emitted_of_kept = self.keep.as_ref().map(|k| k.set_indices().enumerate());
        // Emitted row → position: the ranges, walked once.
        let (mut range, mut before) = (0usize, 0u64);
        for kept in rows.set_indices() {
            let emitted = match &mut emitted_of_kept {
                None => kept,
                Some(set) => loop {
                    match set.next() {
                        Some((k, emitted)) if k == kept => break emitted,
                        Some(_) => {}
                        None => return Err(beyond(kept)),
                    }
                },
            } as u64;
            loop {
                let Some(r) = self.ranges.get(range) else {
                    return Err(beyond(kept));
                };
                let len = r.end - r.start;
                if emitted < before + len {
                    out.push(r.start + (emitted - before));
                    break;
                }
                before += len;
                range += 1;
            }
        }
        Ok(out)
    }
}

/// The error for a row past the batch [`RowOrigins`] describes.
fn beyond(row: usize) -> ArrowError {
    ArrowError::ComputeError(format!("row {row} is not a row of the batch filtered"))
}

/// The plan of a read of every row of the row groups of `row_group_rows` that `read` marks,
/// in order (their batches come whole from elsewhere, e.g. the decoded-column cache): no
/// skips, every deleted position in them masked.
pub(crate) fn whole_groups_plan(
    deleted: &DeletedPositions,
    row_group_rows: &[u64],
    read: &[bool],
) -> PositionalPlan {
    let emitted_rows: u64 = row_group_rows
        .iter()
        .zip(read)
        .filter(|(_, read)| **read)
        .map(|(rows, _)| *rows)
        .sum();
    let mut keep = all_set(emitted_rows as usize);
    let bits = keep.as_slice_mut();
    let mut buffer = Vec::new();
    let mut emitted: Vec<Range<u64>> = Vec::new();
    let (mut start, mut emitted_before) = (0u64, 0u64);
    for (&rows, &read) in row_group_rows.iter().zip(read) {
        let group = start..start + rows;
        start = group.end;
        if !read || rows == 0 {
            continue;
        }
        for p in deleted.within(group.clone(), &mut buffer) {
            arrow::util::bit_util::unset_bit(bits, (emitted_before + p - group.start) as usize);
        }
        emitted_before += rows;
        match emitted.last_mut() {
            Some(last) if last.end == group.start => last.end = group.end,
            _ => emitted.push(group),
        }
    }
    PositionalPlan {
        // Not read through an access plan: the batches are whole already.
        access: ParquetAccessPlan::new_all(0),
        keep: BooleanBuffer::new(keep.into(), 0, emitted_rows as usize),
        skipped_deleted: 0,
        emitted: emitted.into(),
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

    /// The positions the Parquet reader emits under `plan`'s access plan.
    fn emitted(plan: &PositionalPlan, row_groups: &[u64]) -> Vec<i64> {
        let mut out = Vec::new();
        let mut start = 0u64;
        for (access, rows) in plan.access.inner().iter().zip(row_groups) {
            match access {
                RowGroupAccess::Skip => {}
                RowGroupAccess::Scan => out.extend(start..start + rows),
                RowGroupAccess::Selection(selection) => {
                    let mut at = start;
                    for selector in selection.iter() {
                        if !selector.skip {
                            out.extend(at..at + selector.row_count as u64);
                        }
                        at += selector.row_count as u64;
                    }
                    assert_eq!(at, start + rows, "selection covers the row group");
                }
            }
            start += rows;
        }
        out.into_iter().map(|p| p as i64).collect()
    }

    /// Reads `plan` the way the Parquet reader does: the emitted positions, in batches.
    fn read(plan: &PositionalPlan, row_groups: &[u64], batch_rows: usize) -> (Vec<i64>, usize) {
        let positions = emitted(plan, row_groups);
        assert_eq!(
            positions.len(),
            plan.keep.len(),
            "one keep bit per emitted row"
        );
        let mut filter = PositionFilter::new(plan);
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

    /// `positions` (ascending) in both representations.
    fn both(positions: &[u64]) -> [DeletedPositions; 2] {
        [
            DeletedPositions::Sorted(Arc::from(positions.to_vec())),
            DeletedPositions::Bitmap(positions.iter().copied().collect()),
        ]
    }

    fn check(deleted: &[u64], row_groups: &[u64], scan: &[bool], batch_rows: usize) {
        let reads: Vec<GroupRead> = scan.iter().map(|&s| GroupRead::from(s)).collect();
        check_reads(deleted, row_groups, &reads, batch_rows);
    }

    /// Reading `reads` of row groups of `row_groups` rows with `deleted` keeps exactly the
    /// positions read that are not deleted, in order.
    fn check_reads(deleted: &[u64], row_groups: &[u64], reads: &[GroupRead], batch_rows: usize) {
        let mut expected = Vec::new();
        let mut start = 0u64;
        for (i, &rows) in row_groups.iter().enumerate() {
            let ranges = reads
                .get(i)
                .map_or_else(|| GroupRead::All.ranges(rows), |r| r.ranges(rows));
            for range in ranges {
                expected.extend(
                    (start + range.start..start + range.end)
                        .filter(|p| deleted.binary_search(p).is_err()),
                );
            }
            start += rows;
        }
        let expected: Vec<i64> = expected.into_iter().map(|p| p as i64).collect();
        for positions in both(deleted) {
            let plan = positional_plan_of(&positions, row_groups, reads);
            let (kept, _) = read(&plan, row_groups, batch_rows);
            assert_eq!(
                kept, expected,
                "row groups {row_groups:?}, batch {batch_rows}, {positions:?}"
            );
        }
    }

    #[test]
    fn scattered_deletes_are_filtered_not_selected() {
        let deleted: Vec<u64> = (0..20_000).filter(|p| p % 10 == 0).collect();
        let [sorted, _] = both(&deleted);
        let plan = positional_plan(&sorted, &[10_000, 10_000], &[true, true]);
        assert_eq!(plan.skipped_deleted, 0);
        assert!(
            plan.access
                .inner()
                .iter()
                .all(|g| matches!(g, RowGroupAccess::Scan))
        );
        assert_eq!(
            emitted(&plan, &[10_000, 10_000]),
            (0..20_000).collect::<Vec<i64>>()
        );
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
        deleted.sort_unstable();
        let [_, bitmap] = both(&deleted);
        let plan = positional_plan(&bitmap, &[10_000, 10_000, 10_000], &[true; 3]);
        assert_eq!(plan.skipped_deleted, 15_000);
        let want: Vec<i64> = (0..1000)
            .chain(6000..10_000)
            .chain(20_000..30_000)
            .collect();
        assert_eq!(emitted(&plan, &[10_000, 10_000, 10_000]), want);
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
    fn pages_left_out_are_skipped_and_not_counted_as_deleted() {
        // Row group 0: two page ranges read, a 5,000-row deleted run inside the second one and
        // deletes in the rows left out; row group 1 whole; row group 2 not read.
        let mut deleted: Vec<u64> = (3000..8000).collect();
        deleted.extend([5, 999, 1000, 1500, 9_500, 10_500, 20_001]);
        deleted.sort_unstable();
        let row_groups = [10_000, 10_000, 10_000];
        let reads = [
            GroupRead::Rows(vec![0..1000, 2000..9000]),
            GroupRead::All,
            GroupRead::Skip,
        ];
        for positions in both(&deleted) {
            let plan = positional_plan_of(&positions, &row_groups, &reads);
            // Only the long run inside a range read counts as skipped deleted rows.
            assert_eq!(plan.skipped_deleted, 5000);
            let want: Vec<i64> = (0..1000)
                .chain(2000..3000)
                .chain(8000..9000)
                .chain(10_000..20_000)
                .collect();
            assert_eq!(emitted(&plan, &row_groups), want);
            assert!(matches!(plan.access.inner()[1], RowGroupAccess::Scan));
            assert!(matches!(plan.access.inner()[2], RowGroupAccess::Skip));
        }
        for batch in [1, 7, 1000, 4096, 30_000] {
            check_reads(&deleted, &row_groups, &reads, batch);
        }
        // A selection from the page index, as an access plan gives it.
        let selection = RowSelection::from(vec![
            RowSelector::skip(100),
            RowSelector::select(50),
            RowSelector::select(50),
            RowSelector::skip(800),
        ]);
        let read = GroupRead::of_access(&RowGroupAccess::Selection(selection), 1000);
        assert_eq!(read, GroupRead::Rows(std::iter::once(100..200).collect()));
        let all = RowSelection::from(vec![RowSelector::select(1000)]);
        assert_eq!(
            GroupRead::of_access(&RowGroupAccess::Selection(all), 1000),
            GroupRead::All
        );
        let none = RowSelection::from(vec![RowSelector::skip(1000)]);
        assert_eq!(
            GroupRead::of_access(&RowGroupAccess::Selection(none), 1000),
            GroupRead::Skip
        );
        check_reads(&[150, 151, 900], &[1000], &[read], 64);
    }

    fn batch_of(values: &[i64]) -> RecordBatch {
        RecordBatch::try_from_iter([("pos", Arc::new(Int64Array::from(values.to_vec())) as _)])
            .unwrap()
    }

    #[test]
    fn positions_of_kept_rows_are_reported() {
        let mut deleted: Vec<u64> = (1000..6000).collect();
        deleted.extend([3, 7, 12_000, 25_000]);
        deleted.sort_unstable();
        let row_groups = [10_000, 10_000, 10_000];
        let scan = [true, false, true];
        let mut expected = Vec::new();
        let mut start = 0u64;
        for (i, rows) in row_groups.iter().enumerate() {
            if scan[i] {
                expected
                    .extend((start..start + rows).filter(|p| deleted.binary_search(p).is_err()));
            }
            start += rows;
        }
        let expected: Vec<i64> = expected.into_iter().map(|p| p as i64).collect();
        for positions in both(&deleted) {
            let plan = positional_plan(&positions, &row_groups, &scan);
            let emitted_rows = emitted(&plan, &row_groups);
            for batch_rows in [1, 333, 4096, 30_000] {
                let mut filter = PositionFilter::new(&plan);
                let mut by_origins = PositionFilter::new(&plan);
                let mut reported: Vec<i64> = Vec::new();
                let mut kept: Vec<i64> = Vec::new();
                // Every 7th kept row (counted across batches), as a probe would mark them.
                let (mut picked, mut picked_expected) = (Vec::new(), Vec::new());
                for chunk in emitted_rows.chunks(batch_rows) {
                    let (batch, removed, positions) =
                        filter.apply_with_positions(batch_of(chunk)).unwrap();
                    let (same, also_removed, origins) =
                        by_origins.apply_with_origins(batch_of(chunk)).unwrap();
                    assert_eq!((&same, also_removed), (&batch, removed));
                    let values = batch.column(0).as_primitive::<Int64Type>().values();
                    let first = kept.len();
                    let marks = BooleanBuffer::collect_bool(values.len(), |i| {
                        (first + i).is_multiple_of(7)
                    });
                    picked.extend(origins.positions_of(&marks).unwrap());
                    picked_expected.extend(marks.set_indices().map(|i| values[i] as u64));
                    kept.extend(values.iter());
                    reported.extend(positions.values().iter());
                }
                assert_eq!(reported, expected, "batch {batch_rows}");
                assert_eq!(
                    kept, expected,
                    "batch {batch_rows}: rows and positions agree"
                );
                assert!(!picked.is_empty());
                assert_eq!(picked, picked_expected, "batch {batch_rows}: origins");
            }
            // One row more than planned is an error, not a wrong position.
            let mut filter = PositionFilter::new(&plan);
            let all = RecordBatch::try_from_iter([(
                "pos",
                Arc::new(Int64Array::from(vec![0i64; emitted_rows.len() + 1])) as _,
            )])
            .unwrap();
            assert!(filter.apply_with_positions(all).is_err());
        }
    }

    #[test]
    fn batches_without_deletes_pass_through_untouched() {
        let [deleted, _] = both(&[500]);
        let plan = positional_plan(&deleted, &[1000], &[true]);
        let mut filter = PositionFilter::new(&plan);
        assert!(filter.next_mask(500).is_none());
        let mask = filter.next_mask(10).unwrap();
        assert_eq!(mask.count_set_bits(), 9);
        assert!(!mask.value(0));
        assert!(filter.next_mask(490).is_none());
    }

    #[test]
    fn batches_without_columns_keep_their_row_count() {
        let positions: Vec<u64> = (0..100u64).filter(|p| p % 4 == 0).collect();
        let [_, deleted] = both(&positions);
        let plan = positional_plan(&deleted, &[100], &[true]);
        let mut filter = PositionFilter::new(&plan);
        let empty = RecordBatch::try_new_with_options(
            Arc::new(arrow::datatypes::Schema::empty()),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(100)),
        )
        .unwrap();
        let (batch, removed) = filter.apply(empty).unwrap();
        assert_eq!((batch.num_rows(), removed), (75, 25));
    }

    #[test]
    fn a_whole_groups_plan_masks_every_deleted_row_and_skips_none() {
        // A run past MIN_SKIPPED_RUN (a read's plan skips it) is masked here like the single
        // rows (the batches come whole from the column cache); a position past the end is
        // ignored.
        let rows = 3 * MIN_SKIPPED_RUN;
        let mut positions: Vec<u64> = (0..MIN_SKIPPED_RUN + 2).collect();
        positions.extend([rows - 1, rows + 5]);
        for deleted in both(&positions) {
            let plan = whole_groups_plan(&deleted, &[rows], &[true]);
            assert_eq!(plan.skipped_deleted, 0);
            assert_eq!(plan.keep.len() as u64, rows);
            let mut filter = PositionFilter::new(&plan);
            let mut kept = Vec::new();
            let mut at = 0i64;
            for size in [
                MIN_SKIPPED_RUN as i64 - 1,
                2,
                2 * MIN_SKIPPED_RUN as i64 - 1,
            ] {
                let ids = Int64Array::from_iter_values(at..at + size);
                let schema = Arc::new(arrow::datatypes::Schema::new(vec![
                    arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
                ]));
                let batch = RecordBatch::try_new(schema, vec![Arc::new(ids)]).unwrap();
                let (batch, _) = filter.apply(batch).unwrap();
                kept.extend(
                    batch
                        .column(0)
                        .as_primitive::<Int64Type>()
                        .values()
                        .iter()
                        .copied(),
                );
                at += size;
            }
            let want: Vec<i64> = (MIN_SKIPPED_RUN as i64 + 2..rows as i64 - 1).collect();
            assert_eq!(kept, want);
        }
    }

    #[test]
    fn a_whole_groups_plan_masks_the_groups_read_at_their_positions() {
        // Row groups of 10, 20 and 30 rows; the middle one is another partition's.
        let positions = [0u64, 9, 10, 15, 29, 30, 31, 59];
        for deleted in both(&positions) {
            let plan = whole_groups_plan(&deleted, &[10, 20, 30], &[true, false, true]);
            assert_eq!(plan.keep.len(), 40);
            let kept: Vec<usize> = plan.keep.set_indices().collect();
            // Emitted rows 0..10 are positions 0..10, rows 10..40 positions 30..60.
            let want: Vec<usize> = (1..9).chain(12..39).collect();
            assert_eq!(kept, want);
            assert_eq!(plan.emitted.as_ref(), &[0..10, 30..60]);
        }
    }
}
