//! [`MergeRowsExec`]: applies a MERGE's actions to the rows of its join — the rows to write
//! go on (updated and inserted rows, the table's columns), the positions of the target rows
//! that change are recorded, and a target row matched twice fails the statement.
//!
//! Its input rows are (action, the table's columns, data file, position), one per row of the
//! target ⋈ source join that some clause acts on (and, for the cardinality check, every
//! matched row): the action is one of the [`MergeAction`] codes the plan computed from the
//! first WHEN clause that holds.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::{Array, AsArray, BooleanArray, BooleanBufferBuilder, RecordBatch};
use arrow::datatypes::{Int8Type, Int64Type, SchemaRef};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::StreamExt;
use roaring::RoaringTreemap;

use super::position_columns::Positions;
use crate::error::Error;

/// What happens to one row of a MERGE's join (the `i8` codes of the action column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub(super) enum MergeAction {
    /// A matched target row no clause acts on (kept only for the cardinality check).
    MatchedKeep = 0,
    /// A matched target row a `WHEN MATCHED … UPDATE` changes.
    MatchedUpdate = 1,
    /// A matched target row a `WHEN MATCHED … DELETE` deletes.
    MatchedDelete = 2,
    /// A source row a `WHEN NOT MATCHED … INSERT` inserts.
    Insert = 3,
    /// A target row without a source row that `WHEN NOT MATCHED BY SOURCE … UPDATE` changes.
    UnmatchedUpdate = 4,
    /// A target row without a source row that `WHEN NOT MATCHED BY SOURCE … DELETE` deletes.
    UnmatchedDelete = 5,
}

impl MergeAction {
    /// The code in the action column.
    pub(super) fn code(self) -> i8 {
        self as i8
    }

    fn from_code(code: i8) -> Option<Self> {
        Some(match code {
            0 => Self::MatchedKeep,
            1 => Self::MatchedUpdate,
            2 => Self::MatchedDelete,
            3 => Self::Insert,
            4 => Self::UnmatchedUpdate,
            5 => Self::UnmatchedDelete,
            _ => return None,
        })
    }

    fn matched(self) -> bool {
        matches!(
            self,
            Self::MatchedKeep | Self::MatchedUpdate | Self::MatchedDelete
        )
    }
}

/// What a MERGE's rows did, gathered over all partitions.
#[derive(Debug, Default)]
pub(super) struct MergeTally {
    /// The target rows updated or deleted: their old versions go.
    pub changed: Positions,
    /// Rows updated.
    pub updated: u64,
    /// Rows deleted.
    pub deleted: u64,
    /// Rows inserted.
    pub inserted: u64,
    /// Every matched target row, for the cardinality check.
    matched: Positions,
}

/// Applies the MERGE actions of its input's rows (see the module docs); outputs the rows to
/// write, the table's columns.
#[derive(Debug)]
pub(super) struct MergeRowsExec {
    input: Arc<dyn ExecutionPlan>,
    tally: Arc<Mutex<MergeTally>>,
    /// Fail when a target row is matched twice.
    check_cardinality: bool,
    /// The target table's name, for errors.
    table: String,
    properties: Arc<PlanProperties>,
}

impl MergeRowsExec {
    /// Over `input` (action, `schema`'s columns, file path, position), recording into `tally`.
    pub(super) fn new(
        input: Arc<dyn ExecutionPlan>,
        tally: Arc<Mutex<MergeTally>>,
        check_cardinality: bool,
        table: String,
        schema: SchemaRef,
    ) -> Self {
        let partitions = input.properties().output_partitioning().partition_count();
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Self {
            input,
            tally,
            check_cardinality,
            table,
            properties,
        }
    }
}

impl DisplayAs for MergeRowsExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MergeRowsExec: cardinality_check={}",
            self.check_cardinality
        )
    }
}

impl ExecutionPlan for MergeRowsExec {
    fn name(&self) -> &str {
        "MergeRowsExec"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let input = children
            .pop()
            .ok_or_else(|| DataFusionError::Internal("MergeRowsExec needs an input".into()))?;
        Ok(Arc::new(Self::new(
            input,
            Arc::clone(&self.tally),
            self.check_cardinality,
            self.table.clone(),
            self.schema(),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let tally = Arc::clone(&self.tally);
        let check = self.check_cardinality;
        let table = self.table.clone();
        let schema = self.schema();
        let out_schema = Arc::clone(&schema);
        let stream = input.map(move |batch| {
            let batch = batch?;
            let mut tally = tally.lock().unwrap_or_else(PoisonError::into_inner);
            let keep = apply(&batch, &mut tally, check, &table)?;
            let kept = arrow::compute::filter_record_batch(&batch, &keep)?;
            let columns = kept.num_columns().saturating_sub(2);
            Ok(RecordBatch::try_new(
                Arc::clone(&out_schema),
                kept.columns()[1..columns].to_vec(),
            )?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// Records the actions of `batch`'s rows in `tally`; returns which rows are written.
fn apply(
    batch: &RecordBatch,
    tally: &mut MergeTally,
    check: bool,
    table: &str,
) -> DFResult<BooleanArray> {
    let columns = batch.num_columns();
    if columns < 3 {
        return Err(DataFusionError::Internal(format!(
            "MERGE rows are (action, …, file, position), got {columns} columns"
        )));
    }
    let actions = batch.column(0).as_primitive::<Int8Type>();
    let files = batch.column(columns - 2).as_string::<i32>();
    let rows = batch.column(columns - 1).as_primitive::<Int64Type>();
    let mut keep = BooleanBufferBuilder::new(batch.num_rows());
    for i in 0..batch.num_rows() {
        let action = if actions.is_null(i) {
            None
        } else {
            MergeAction::from_code(actions.value(i))
        };
        let Some(action) = action else {
            keep.append(false);
            continue;
        };
        if action == MergeAction::Insert {
            tally.inserted += 1;
            keep.append(true);
            continue;
        }
        if files.is_null(i) || rows.is_null(i) {
            return Err(DataFusionError::Internal(
                "a MERGE row acting on the target has no file and position".into(),
            ));
        }
        let (file, position) = (files.value(i), rows.value(i));
        let position = u64::try_from(position)
            .map_err(|_| DataFusionError::Internal("a negative row position".into()))?;
        if check && action.matched() && !insert(&mut tally.matched, file, position) {
            return Err(Error::InvalidArgument(format!(
                "MERGE INTO {table}: the MERGE statement matched a single row from the target \
                 table with multiple rows of the source table (data file {file}, position \
                 {position}); a target row can be updated or deleted only once: make the \
                 source rows unique for the ON condition"
            ))
            .into());
        }
        match action {
            MergeAction::MatchedKeep => keep.append(false),
            MergeAction::MatchedUpdate | MergeAction::UnmatchedUpdate => {
                if insert(&mut tally.changed, file, position) {
                    tally.updated += 1;
                }
                keep.append(true);
            }
            MergeAction::MatchedDelete | MergeAction::UnmatchedDelete => {
                // Without the check (a lone unconditional DELETE), a row matched twice is
                // deleted once.
                if insert(&mut tally.changed, file, position) {
                    tally.deleted += 1;
                }
                keep.append(false);
            }
            MergeAction::Insert => keep.append(true),
        }
    }
    Ok(BooleanArray::new(keep.finish(), None))
}

/// Adds `position` of `file` to `positions`; false if it was there.
fn insert(positions: &mut Positions, file: &str, position: u64) -> bool {
    match positions.get_mut(file) {
        Some(set) => set.insert(position),
        None => {
            positions.insert(file.to_string(), RoaringTreemap::from_iter([position]));
            true
        }
    }
}
