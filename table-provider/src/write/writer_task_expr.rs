//! [`WriterTaskExpr`]: which writer task a written row goes to under hash distribution
//! (`write.distribution-mode=hash`, see [`super::distribution`]), with large table partitions
//! spread over every task.
//!
//! Hashing rows on their partition key alone sends every row of one table partition to one
//! writer task: a large load of one day into a `days(ts)` table would be written by one task
//! while the others idle. Spark avoids it with adaptive query execution, which splits a shuffle
//! partition larger than the write's advisory partition size
//! (`write.spark.advisory-partition-size-bytes`) over several tasks. A streaming plan cannot
//! wait to see the sizes, so this expression decides as the rows pass: the rows of a table
//! partition go to one task until the partition has sent the advisory size (counted in the
//! Arrow bytes of the rows); from then on its rows go to every task in turn, in pieces of at
//! most [`SPREAD_ROWS`] rows. A table partition smaller than the advisory size is written by
//! one task, one file (or one run of rolling files); a larger one by every task, each writing
//! one file of it. Turning in small pieces rather than handing over every advisory size keeps
//! all the tasks busy at once: the repartition below the writers passes rows as they come and
//! a task handed a long stretch of rows would write it alone.
//!
//! The expression's value for a row is a number that DataFusion's hash repartition
//! (`RepartitionExec`, which hashes its expressions with [`REPARTITION_RANDOM_STATE`] and takes
//! the hash modulo the task count) sends to the chosen task: for each task, the smallest
//! non-negative integer that hashes there. Where the repartition should hash another way
//! (another DataFusion, another task count), the rows given one task still share one value and
//! reach one task: only the balance would suffer, never the rows.
//!
//! The count of bytes per table partition is shared by every input partition of the write (the
//! repartition evaluates the expression in each of them) and lives as long as the plan.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Schema as ArrowSchema};
use datafusion::common::Result as DFResult;
use datafusion::common::hash_utils::create_hashes;
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::physical_plan::repartition::REPARTITION_RANDOM_STATE;

/// The most rows of a table partition past the advisory size that go to one task in a row.
pub const SPREAD_ROWS: usize = 1024;

/// The writer task of each written row: its table partition's, large partitions spread.
#[derive(Debug)]
pub struct WriterTaskExpr {
    /// The partition key: one expression per (non-void) partition field.
    keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The number of writer tasks (the hash repartition's output partitions).
    tasks: usize,
    /// Bytes of one table partition's rows its first task takes before the partition is spread
    /// over every task.
    split_bytes: u64,
    /// For each task, a value the repartition sends to it.
    representatives: Vec<i64>,
    /// Per table partition (by the hash of its key): the task it went to last and the bytes
    /// it has sent.
    routes: Arc<Mutex<Routes>>,
}

/// A table partition's last task and the bytes it has sent (up to the split size).
#[derive(Debug, Clone, Copy)]
struct Route {
    task: usize,
    bytes: u64,
}

/// The keys are already hashes: no second hashing.
#[derive(Default)]
struct KeyHashHasher(u64);

impl Hasher for KeyHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

type Routes = HashMap<u64, Route, BuildHasherDefault<KeyHashHasher>>;

impl WriterTaskExpr {
    /// Rows spread over `tasks` writer tasks by the partition key `keys`, a table partition
    /// spread over every task once it has sent `split_bytes`.
    pub fn new(keys: Vec<Arc<dyn PhysicalExpr>>, tasks: usize, split_bytes: u64) -> Self {
        let tasks = tasks.max(1);
        Self {
            keys,
            tasks,
            split_bytes: split_bytes.max(1),
            representatives: representatives(tasks),
            routes: Arc::new(Mutex::new(Routes::default())),
        }
    }

    /// The partition key the rows are distributed on.
    pub fn keys(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.keys
    }

    /// The task a key's rows go to until the key has sent `split_bytes` bytes.
    fn first_task(&self, key_hash: u64) -> usize {
        (key_hash % self.tasks as u64) as usize
    }
}

/// For each of `tasks` tasks, the smallest non-negative `i64` whose hash, as DataFusion's hash
/// repartition computes it for a single `Int64` column, selects that task. A task no value in
/// the search reaches keeps its own index (balance only, see the module docs).
fn representatives(tasks: usize) -> Vec<i64> {
    let mut found: Vec<Option<i64>> = vec![None; tasks];
    let mut missing = tasks;
    const BATCH: i64 = 1024;
    let mut start = 0i64;
    while missing > 0 && start < 1 << 20 {
        let candidates: ArrayRef = Arc::new(Int64Array::from_iter_values(start..start + BATCH));
        let mut hashes = vec![0u64; BATCH as usize];
        if create_hashes(
            [&candidates],
            REPARTITION_RANDOM_STATE.random_state(),
            &mut hashes,
        )
        .is_err()
        {
            break;
        }
        for (offset, hash) in hashes.iter().enumerate() {
            let task = (hash % tasks as u64) as usize;
            if found[task].is_none() {
                found[task] = Some(start + offset as i64);
                missing -= 1;
            }
        }
        start += BATCH;
    }
    found
        .into_iter()
        .enumerate()
        .map(|(task, value)| value.unwrap_or(task as i64))
        .collect()
}

/// The Arrow bytes of a batch's rows, as sliced (a slice of a larger batch counts its own rows
/// only).
fn batch_bytes(batch: &RecordBatch) -> u64 {
    batch
        .columns()
        .iter()
        .map(|column| {
            column
                .to_data()
                .get_slice_memory_size()
                .unwrap_or_else(|_| column.get_array_memory_size()) as u64
        })
        .sum()
}

impl fmt::Display for WriterTaskExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(ToString::to_string).collect();
        write!(
            f,
            "writer_task({}; split={} bytes)",
            keys.join(", "),
            self.split_bytes
        )
    }
}

impl PartialEq for WriterTaskExpr {
    fn eq(&self, other: &Self) -> bool {
        // The routes are the state of one execution, not what the expression is.
        self.keys == other.keys
            && self.tasks == other.tasks
            && self.split_bytes == other.split_bytes
    }
}

impl Eq for WriterTaskExpr {}

impl Hash for WriterTaskExpr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.keys.hash(state);
        self.tasks.hash(state);
        self.split_bytes.hash(state);
    }
}

impl PhysicalExpr for WriterTaskExpr {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn data_type(&self, _input_schema: &ArrowSchema) -> DFResult<DataType> {
        Ok(DataType::Int64)
    }

    fn nullable(&self, _input_schema: &ArrowSchema) -> DFResult<bool> {
        Ok(false)
    }

    fn evaluate(&self, batch: &RecordBatch) -> DFResult<ColumnarValue> {
        let rows = batch.num_rows();
        let keys = self
            .keys
            .iter()
            .map(|key| key.evaluate(batch)?.into_array(rows))
            .collect::<DFResult<Vec<ArrayRef>>>()?;
        let mut hashes = vec![0u64; rows];
        create_hashes(&keys, REPARTITION_RANDOM_STATE.random_state(), &mut hashes)?;
        // Every row of the batch weighs the batch's average.
        let row_bytes = batch_bytes(batch).div_ceil(rows.max(1) as u64).max(1);

        let mut values = Vec::with_capacity(rows);
        // The counts only add up: a panic elsewhere while the lock was held left them usable.
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let mut start = 0;
        while start < rows {
            // A run of rows with one key: one lookup.
            let hash = hashes[start];
            let end = hashes[start..]
                .iter()
                .position(|&h| h != hash)
                .map_or(rows, |n| start + n);
            let route = routes.entry(hash).or_insert(Route {
                task: self.first_task(hash),
                bytes: 0,
            });
            let mut row = start;
            while row < end {
                let take = if route.bytes < self.split_bytes {
                    // Still on its first task: at least one row, as many as fit.
                    let room = (self.split_bytes - route.bytes).div_ceil(row_bytes);
                    let take = room.min((end - row) as u64) as usize;
                    route.bytes += take as u64 * row_bytes;
                    take
                } else {
                    // Spread: each piece to the next task.
                    route.task = (route.task + 1) % self.tasks;
                    (end - row).min(SPREAD_ROWS)
                };
                values.extend(std::iter::repeat_n(self.representatives[route.task], take));
                row += take;
            }
            start = end;
        }
        drop(routes);
        Ok(ColumnarValue::Array(Arc::new(Int64Array::from(values))))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        self.keys.iter().collect()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> DFResult<Arc<dyn PhysicalExpr>> {
        Ok(Arc::new(Self {
            keys: children,
            tasks: self.tasks,
            split_bytes: self.split_bytes,
            representatives: self.representatives.clone(),
            routes: Arc::clone(&self.routes),
        }))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::Column;

    use super::*;

    /// The task DataFusion's hash repartition sends each row of `values` to.
    fn tasks_of(values: &ArrayRef, tasks: usize) -> Vec<usize> {
        let mut hashes = vec![0u64; values.len()];
        create_hashes(
            [values],
            REPARTITION_RANDOM_STATE.random_state(),
            &mut hashes,
        )
        .unwrap();
        hashes.iter().map(|h| (h % tasks as u64) as usize).collect()
    }

    fn batch(keys: Vec<i32>) -> RecordBatch {
        let payload: Vec<String> = keys.iter().map(|k| format!("{k:>60}")).collect();
        RecordBatch::try_new(
            Arc::new(ArrowSchema::new(vec![
                Field::new("k", DataType::Int32, true),
                Field::new("payload", DataType::Utf8, false),
            ])),
            vec![
                Arc::new(Int32Array::from(keys)),
                Arc::new(StringArray::from(payload)),
            ],
        )
        .unwrap()
    }

    fn expr(tasks: usize, split_bytes: u64) -> WriterTaskExpr {
        WriterTaskExpr::new(vec![Arc::new(Column::new("k", 0))], tasks, split_bytes)
    }

    fn evaluate(expr: &WriterTaskExpr, batch: &RecordBatch) -> ArrayRef {
        match expr.evaluate(batch).unwrap() {
            ColumnarValue::Array(a) => a,
            ColumnarValue::Scalar(_) => panic!("a scalar"),
        }
    }

    #[test]
    fn each_representative_reaches_its_task() {
        for tasks in [1, 2, 3, 4, 7, 16, 64] {
            let values: ArrayRef = Arc::new(Int64Array::from(representatives(tasks)));
            assert_eq!(
                tasks_of(&values, tasks),
                (0..tasks).collect::<Vec<_>>(),
                "{tasks} tasks"
            );
        }
    }

    #[test]
    fn small_partitions_stay_on_one_task_and_large_ones_spread() {
        let tasks = 4;
        // A split after 20 rows.
        let row_bytes = batch_bytes(&batch(vec![0; 100])).div_ceil(100);
        let expr = expr(tasks, 20 * row_bytes);
        let mut rows_per_key_task: BTreeMap<(i32, usize), usize> = BTreeMap::new();
        let mut first_batch_tasks = Vec::new();
        for round in 0..10 {
            // Key 0 in every row of one batch (a big partition); keys 1..=9 one row each per
            // round (small partitions: 10 rows in all, half the split size).
            let big = batch(vec![0; 100]);
            let small: Vec<i32> = (0..9).map(|i| 1 + (i + round) % 9).collect();
            for batch in [big, batch(small)] {
                let values = evaluate(&expr, &batch);
                let keys = batch
                    .column(0)
                    .as_any()
                    .downcast_ref::<Int32Array>()
                    .unwrap();
                let tasks = tasks_of(&values, tasks);
                if round == 0 && first_batch_tasks.is_empty() {
                    first_batch_tasks = tasks.clone();
                }
                for (row, task) in tasks.into_iter().enumerate() {
                    *rows_per_key_task
                        .entry((keys.value(row), task))
                        .or_default() += 1;
                }
            }
        }
        // Key 0: its first 20 rows on its first task, the other 80 of the first batch on the
        // next task, then each batch (one run, under SPREAD_ROWS) on the next.
        let first = first_batch_tasks[0];
        assert!(first_batch_tasks[..20].iter().all(|&t| t == first));
        assert!(
            first_batch_tasks[20..]
                .iter()
                .all(|&t| t == (first + 1) % tasks)
        );
        let per_task: Vec<usize> = (0..tasks)
            .map(|t| rows_per_key_task[&(0, (first + t) % tasks)])
            .collect();
        assert_eq!(per_task, [20 + 100 + 100, 80 + 100 + 100, 300, 200]);
        let tasks_of_key = |key: i32| -> BTreeSet<usize> {
            rows_per_key_task
                .keys()
                .filter(|(k, _)| *k == key)
                .map(|(_, t)| *t)
                .collect()
        };
        for key in 1..=9 {
            assert_eq!(tasks_of_key(key).len(), 1, "key {key}");
        }
        // The small keys still spread by their hash over more than one task.
        let small_tasks: BTreeSet<usize> = (1..=9).flat_map(tasks_of_key).collect();
        assert!(small_tasks.len() > 1, "{small_tasks:?}");
        // A long run past the split goes out in pieces of SPREAD_ROWS rows.
        let long = batch(vec![0; 3 * SPREAD_ROWS]);
        let tasks_of_long = tasks_of(&evaluate(&expr, &long), tasks);
        for piece in tasks_of_long.chunks(SPREAD_ROWS) {
            assert!(piece.iter().all(|&t| t == piece[0]));
        }
        let pieces: BTreeSet<usize> = tasks_of_long.iter().copied().collect();
        assert_eq!(pieces.len(), 3);
    }

    #[test]
    fn without_a_split_a_key_keeps_its_task_and_nulls_are_a_key() {
        let expr = expr(2, u64::MAX);
        let nulls = RecordBatch::try_new(
            batch(vec![1]).schema(),
            vec![
                Arc::new(Int32Array::from(vec![None, Some(5), None, Some(5)])),
                Arc::new(StringArray::from(vec!["a", "b", "c", "d"])),
            ],
        )
        .unwrap();
        let first = tasks_of(&evaluate(&expr, &nulls), 2);
        assert_eq!(first[0], first[2]);
        assert_eq!(first[1], first[3]);
        for _ in 0..50 {
            assert_eq!(tasks_of(&evaluate(&expr, &nulls), 2), first);
        }
        // A slice counts its own rows only.
        let big = batch(vec![7; 10_000]);
        assert!(batch_bytes(&big.slice(0, 10)) < 2_000);
        assert!(batch_bytes(&big) > 600_000);
    }
}
