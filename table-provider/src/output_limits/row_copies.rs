//! [`BoundRowCopies`]: the physical optimizer rule that puts a [`CopyGuardExec`] on each input
//! of an operator that copies rows into many output rows, where those rows can hold values of
//! any size.
//!
//! The operators: every join (hash, nested-loop, cross, sort-merge, symmetric hash,
//! piecewise merge), windows whose functions answer strings, binaries or lists (a frame's
//! `max(s)` or `first_value(s)` lands in every row of the frame), and `unnest`. An operator
//! whose inputs' columns are all of fixed width is not guarded: its rows are a few hundred
//! bytes at most, and a batch of their copies is bounded by the batch size. Otherwise all its
//! inputs are: those of fixed width count the rows the others' rows may be copied into. Other
//! operators copy a row at most once per output row (filters, sorts, aggregates,
//! repartitions), and the values functions and literals make are bounded where they are made
//! (`BoundedOutput`, `LiteralCopies`).
//!
//! The rule runs last, after join selection has chosen build sides, and adds nothing to a
//! plan it has already guarded.

use std::sync::Arc;

use arrow::datatypes::Schema;
use datafusion::common::Result;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::{
    CrossJoinExec, HashJoinExec, NestedLoopJoinExec, PiecewiseMergeJoinExec, SortMergeJoinExec,
    SymmetricHashJoinExec,
};
use datafusion::physical_plan::unnest::UnnestExec;
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec};

use super::copy_guard::{Copies, CopyGuardExec};
use super::row_bytes::is_variable_width;

/// Guards the inputs of row-copying operators (see the module docs).
#[derive(Debug)]
pub struct BoundRowCopies {
    /// Bytes one output batch of such an operator may take.
    limit: usize,
}

impl BoundRowCopies {
    /// The rule for output batches of at most `limit` bytes ([`super::copy_limit`]).
    pub fn new(limit: usize) -> Self {
        Self { limit }
    }

    /// `node` with its inputs guarded, if it copies rows.
    fn guard(&self, node: Arc<dyn ExecutionPlan>) -> Result<Transformed<Arc<dyn ExecutionPlan>>> {
        let Some((operator, copies)) = copying(node.as_ref()) else {
            return Ok(Transformed::no(node));
        };
        let children = node.children();
        if children
            .iter()
            .any(|c| c.as_any().downcast_ref::<CopyGuardExec>().is_some())
        {
            return Ok(Transformed::no(node));
        }
        // Every input of a guarded operator is guarded: the ones of fixed width count the rows
        // the others' rows may be copied into.
        let copied = matches!(copies, Copying::Elements(_))
            || children.iter().any(|c| has_variable_width(&c.schema()));
        if !copied {
            return Ok(Transformed::no(node));
        }
        let hows = match copies {
            Copying::Joined => Copies::joined(children.len()),
            Copying::Partition => vec![Copies::Partition; children.len()],
            Copying::Elements(lists) => vec![Copies::Elements { lists }; children.len()],
        };
        let inputs = children
            .into_iter()
            .zip(hows)
            .map(|(child, how)| {
                Arc::new(CopyGuardExec::new(
                    Arc::clone(child),
                    operator,
                    how,
                    self.limit,
                )) as Arc<dyn ExecutionPlan>
            })
            .collect();
        Ok(Transformed::yes(node.with_new_children(inputs)?))
    }
}

/// How an operator copies rows (the plan-level form of [`Copies`]).
enum Copying {
    Joined,
    Partition,
    Elements(Vec<(usize, usize)>),
}

/// The operator's name for messages and how it copies rows, if it does.
fn copying(node: &dyn ExecutionPlan) -> Option<(&'static str, Copying)> {
    let any = node.as_any();
    let join = |name| Some((name, Copying::Joined));
    if any.is::<HashJoinExec>() {
        return join("a hash join");
    }
    if any.is::<NestedLoopJoinExec>() {
        return join("a nested-loop join");
    }
    if any.is::<CrossJoinExec>() {
        return join("a cross join");
    }
    if any.is::<SortMergeJoinExec>() {
        return join("a sort-merge join");
    }
    if any.is::<SymmetricHashJoinExec>() {
        return join("a symmetric hash join");
    }
    if any.is::<PiecewiseMergeJoinExec>() {
        return join("a piecewise merge join");
    }
    if let Some(window) = any.downcast_ref::<BoundedWindowAggExec>() {
        return answers_variable_width(node, window.input())
            .then_some(("a window function", Copying::Joined));
    }
    if let Some(window) = any.downcast_ref::<WindowAggExec>() {
        return answers_variable_width(node, window.input())
            .then_some(("a window function", Copying::Partition));
    }
    if let Some(unnest) = any.downcast_ref::<UnnestExec>() {
        let lists = unnest
            .list_column_indices()
            .iter()
            .map(|l| (l.index_in_input_schema, l.depth))
            .collect();
        return Some(("unnest", Copying::Elements(lists)));
    }
    None
}

/// Whether a window node adds a column of variable width to its input's (a window function
/// answering strings, binaries or lists).
fn answers_variable_width(window: &dyn ExecutionPlan, input: &Arc<dyn ExecutionPlan>) -> bool {
    let inputs = input.schema().fields().len();
    window
        .schema()
        .fields()
        .iter()
        .skip(inputs)
        .any(|f| is_variable_width(f.data_type()))
}

/// Whether any column of `schema` holds values of any size.
fn has_variable_width(schema: &Schema) -> bool {
    schema
        .fields()
        .iter()
        .any(|f| is_variable_width(f.data_type()))
}

impl PhysicalOptimizerRule for BoundRowCopies {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| self.guard(node)).data()
    }

    fn name(&self) -> &str {
        "petrel_bound_row_copies"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
