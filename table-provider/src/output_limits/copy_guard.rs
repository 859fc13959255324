//! [`CopyGuardExec`]: the input of an operator that copies rows (a join, a window, `unnest`),
//! passed through unchanged once the copies its rows could make are known to fit.
//!
//! Such an operator writes one row of its input into many rows of its output: a join's output
//! batch of up to `batch_size` rows may hold one build row in every row, a window function over
//! a frame copies one value into each row the frame covers, `unnest` copies a row's other
//! columns once per element of its list. Arrow allocates each output column in one piece,
//! outside every memory pool, so a 100 MB string joined with 100 rows asked for 10 GB at once
//! and the failed allocation aborted the server. The guard measures the rows before the
//! operator sees them (`row_bytes`) and fails the query with RESOURCE_EXHAUSTED when the
//! operator's output could exceed the limit (the query's memory limit):
//!
//! - [`Copies::Joined`]: the largest rows of the operator's inputs together, times
//!   `batch_size` or the pairs of the rows read so far if fewer (each guarded input records
//!   its largest row and its rows so far; each batch is checked against all inputs' records,
//!   so the input read second sees both);
//! - [`Copies::Partition`]: a window over whole partitions answers a partition in one batch:
//!   the rows read so far × the largest;
//! - [`Copies::Elements`]: each row × the elements of its longest unnested list, summed over
//!   the batch (the rows `unnest` makes of it in one batch); first bounded without a pass over
//!   the rows, by all the batch's elements × its largest row.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::RecordBatch;
use datafusion::common::{DataFusionError, Result, Statistics};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::StreamExt;

use super::describe_bytes;
use super::row_bytes::{
    add_row_bytes, largest_row_bytes, largest_row_bytes_except, list_lengths, total_elements,
};

/// How the operator above a guard copies the guarded input's rows.
#[derive(Debug, Clone)]
pub enum Copies {
    /// Output batches of up to `batch_size` rows, each made of a row of every input (joins,
    /// windows over bounded frames), and no more rows than the pairs of the rows read so far.
    /// The inputs' largest rows and row counts so far, one slot per guarded input, are shared
    /// by the operator's guards.
    Joined {
        /// The largest row seen on each input of the operator.
        largest: Arc<[AtomicUsize]>,
        /// The rows seen on each input of the operator.
        rows: Arc<[AtomicUsize]>,
        /// This input's slot.
        slot: usize,
    },
    /// Every row of a partition in one output batch, each holding a copy of a value of the
    /// partition (windows over whole partitions).
    Partition,
    /// Each row once per element of its longest list among these (column, depth) pairs
    /// (`unnest`).
    Elements { lists: Vec<(usize, usize)> },
}

impl Copies {
    /// [`Copies::Joined`] for an operator with `inputs` inputs, one per slot.
    pub fn joined(inputs: usize) -> Vec<Copies> {
        let slots = || -> Arc<[AtomicUsize]> { (0..inputs).map(|_| AtomicUsize::new(0)).collect() };
        let (largest, rows) = (slots(), slots());
        (0..inputs)
            .map(|slot| Copies::Joined {
                largest: Arc::clone(&largest),
                rows: Arc::clone(&rows),
                slot,
            })
            .collect()
    }
}

/// An operator's input, checked for the copies the operator could make of it (module docs).
#[derive(Debug)]
pub struct CopyGuardExec {
    input: Arc<dyn ExecutionPlan>,
    check: Arc<CopyCheck>,
}

/// What a guard checks each batch against; shared by its streams.
#[derive(Debug)]
struct CopyCheck {
    /// The operator, for messages and `EXPLAIN` ("a hash join").
    operator: &'static str,
    copies: Copies,
    /// Bytes the operator's output may take at once.
    limit: usize,
}

/// One stream's rows and largest row so far ([`Copies::Partition`]).
#[derive(Debug, Default)]
struct Seen {
    rows: usize,
    largest: usize,
}

impl CopyGuardExec {
    /// `input` of `operator`, which copies its rows as `copies` says, within `limit` bytes.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        operator: &'static str,
        copies: Copies,
        limit: usize,
    ) -> Self {
        let check = Arc::new(CopyCheck {
            operator,
            copies,
            limit,
        });
        Self { input, check }
    }
}

impl CopyCheck {
    /// The error for an output of `bytes`, `how` its rows are copied.
    fn refuse(&self, how: String, bytes: usize) -> DataFusionError {
        DataFusionError::ResourcesExhausted(format!(
            "{} would copy {how}: {} in one output batch, over the {} a query may use; Arrow \
             allocates it at once, outside the memory pool. Pass fewer or smaller columns \
             through it, or raise query_memory_limit",
            self.operator,
            describe_bytes(bytes),
            describe_bytes(self.limit),
        ))
    }

    /// The error if the operator's copies of `batch` could go over the limit; `seen` is what
    /// the batch's stream has read before it.
    fn check(&self, batch: &RecordBatch, batch_size: usize, seen: &mut Seen) -> Result<()> {
        match &self.copies {
            Copies::Joined {
                largest,
                rows,
                slot,
            } => {
                if let (Some(own_largest), Some(own_rows)) = (largest.get(*slot), rows.get(*slot)) {
                    own_largest.fetch_max(largest_row_bytes(batch), Ordering::Relaxed);
                    own_rows.fetch_add(batch.num_rows(), Ordering::Relaxed);
                }
                let together = largest
                    .iter()
                    .map(|l| l.load(Ordering::Relaxed))
                    .fold(0usize, usize::saturating_add);
                // An input not read yet (or empty) still gives its other inputs' rows an
                // output row each (outer joins).
                let pairs = rows
                    .iter()
                    .map(|r| r.load(Ordering::Relaxed).max(1))
                    .fold(1usize, usize::saturating_mul);
                let copies = pairs.min(batch_size);
                let bytes = together.saturating_mul(copies);
                if bytes > self.limit {
                    return Err(self.refuse(
                        format!(
                            "rows of up to {} (the largest rows of its inputs together) into \
                             each of up to {copies} rows",
                            describe_bytes(together)
                        ),
                        bytes,
                    ));
                }
            }
            Copies::Partition => {
                seen.rows = seen.rows.saturating_add(batch.num_rows());
                seen.largest = seen.largest.max(largest_row_bytes(batch));
                let bytes = seen.largest.saturating_mul(seen.rows);
                if bytes > self.limit {
                    return Err(self.refuse(
                        format!(
                            "values of up to {} into each of the {} rows of a partition",
                            describe_bytes(seen.largest),
                            seen.rows
                        ),
                        bytes,
                    ));
                }
            }
            Copies::Elements { lists } => {
                let skip: Vec<usize> = lists.iter().map(|(c, _)| *c).collect();
                // First a bound without a pass over the rows: every element (and every row
                // whose list is empty) a copy of the largest row.
                let elements = lists
                    .iter()
                    .filter_map(|(c, depth)| Some(total_elements(batch.columns().get(*c)?, *depth)))
                    .fold(batch.num_rows(), usize::saturating_add);
                let largest = largest_row_bytes_except(batch, &skip);
                if elements.saturating_mul(largest) <= self.limit {
                    return Ok(());
                }
                let mut copies = vec![1usize; batch.num_rows()];
                for (column, depth) in lists {
                    if let Some(list) = batch.columns().get(*column) {
                        for (row, n) in list_lengths(list, *depth).into_iter().enumerate() {
                            copies[row] = copies[row].max(n);
                        }
                    }
                }
                let mut row_bytes = vec![0usize; batch.num_rows()];
                add_row_bytes(batch, &skip, &mut row_bytes);
                let bytes = copies
                    .iter()
                    .zip(&row_bytes)
                    .map(|(n, b)| n.saturating_mul(*b))
                    .fold(0usize, usize::saturating_add);
                if bytes > self.limit {
                    let largest = copies.iter().copied().max().unwrap_or(0);
                    return Err(self.refuse(
                        format!("each row's other columns once per element of its list (up to {largest} elements)"),
                        bytes,
                    ));
                }
            }
        }
        Ok(())
    }
}

impl DisplayAs for CopyGuardExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let copies = match &self.check.copies {
            Copies::Joined { .. } => "up to a batch of copies of a row",
            Copies::Partition => "a copy per row of a partition",
            Copies::Elements { .. } => "a copy per list element",
        };
        write!(
            f,
            "CopyGuardExec: {} makes {copies}, within {}",
            self.check.operator,
            describe_bytes(self.check.limit)
        )
    }
}

impl ExecutionPlan for CopyGuardExec {
    fn name(&self) -> &str {
        "CopyGuardExec"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let input = children
            .pop()
            .ok_or_else(|| DataFusionError::Internal("CopyGuardExec needs an input".into()))?;
        Ok(Arc::new(Self {
            input,
            check: Arc::clone(&self.check),
        }))
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Statistics> {
        self.input.partition_statistics(partition)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let batch_size = context.session_config().batch_size();
        let input = self.input.execute(partition, context)?;
        let schema = input.schema();
        let check = Arc::clone(&self.check);
        let mut seen = Seen::default();
        let stream = input.map(move |batch| {
            let batch = batch?;
            check.check(&batch, batch_size, &mut seen)?;
            Ok(batch)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}
