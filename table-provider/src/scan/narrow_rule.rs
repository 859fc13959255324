//! [`NarrowStructColumns`]: a physical optimizer rule that lets a Petrel scan read only the
//! struct leaves a query accesses when the projection or aggregate using them is not directly
//! above the scan (`SELECT s.a … WHERE s.b = 1` puts a filter in between; `SELECT sum(s.a)` has
//! no projection at all).
//!
//! From every projection or partial/single aggregate, it walks down through nodes that pass
//! columns through by name (filters, sorts, repartitions) to an
//! [`IcebergScanExec`], gathering every expression on the way; if the scan's struct columns
//! are only accessed by field, the scan is replaced by its narrowed self
//! (`IcebergScanExec::narrowed_for`). Any other node on the way stops the walk: nothing is
//! narrowed without seeing every use.
//!
//! Sessions add it with `SessionStateBuilder::with_physical_optimizer_rule`; without it, only
//! a projection directly above the scan narrows (through `try_swapping_with_projection`).

use std::sync::Arc;

use datafusion::common::Result as DFResult;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};

use super::exec::IcebergScanExec;

/// Narrows struct columns of Petrel scans to the fields queries access (module docs).
#[derive(Debug, Default)]
pub struct NarrowStructColumns;

impl NarrowStructColumns {
    /// The rule.
    pub fn new() -> Self {
        Self
    }
}

impl PhysicalOptimizerRule for NarrowStructColumns {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        plan.transform_down(|node| {
            Ok(match narrow_below(&node)? {
                Some(narrowed) => Transformed::yes(narrowed),
                None => Transformed::no(node),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "petrel_narrow_struct_columns"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `node` with the scan below it narrowed, when `node` is a projection or aggregate whose
/// path down to a Petrel scan passes columns through.
fn narrow_below(node: &Arc<dyn ExecutionPlan>) -> DFResult<Option<Arc<dyn ExecutionPlan>>> {
    let Some(mut uses) = consumer_exprs(node) else {
        return Ok(None);
    };
    let [child] = node.children()[..] else {
        return Ok(None);
    };
    // Walk down to the scan through pass-through nodes, gathering their expressions.
    let mut chain: Vec<Arc<dyn ExecutionPlan>> = Vec::new();
    let mut current = Arc::clone(child);
    let scan = loop {
        if let Some(scan) = current.as_any().downcast_ref::<IcebergScanExec>() {
            break scan;
        }
        let Some(exprs) = pass_through_exprs(&current) else {
            return Ok(None);
        };
        uses.extend(exprs);
        let next = match current.children()[..] {
            [only] => Arc::clone(only),
            _ => return Ok(None),
        };
        chain.push(current);
        current = next;
    };
    let refs: Vec<&Arc<dyn PhysicalExpr>> = uses.iter().collect();
    let Some(narrowed) = scan.narrowed_for(&refs)? else {
        return Ok(None);
    };
    let mut rebuilt: Arc<dyn ExecutionPlan> = Arc::new(narrowed);
    for parent in chain.into_iter().rev() {
        rebuilt = parent.with_new_children(vec![rebuilt])?;
    }
    Ok(Some(Arc::clone(node).with_new_children(vec![rebuilt])?))
}

/// Every expression of a node that consumes scan columns and produces new ones: projections,
/// and aggregates reading raw rows (partial or single mode).
fn consumer_exprs(node: &Arc<dyn ExecutionPlan>) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
    if let Some(projection) = node.as_any().downcast_ref::<ProjectionExec>() {
        return Some(
            projection
                .expr()
                .iter()
                .map(|p| Arc::clone(&p.expr))
                .collect(),
        );
    }
    let aggregate = node.as_any().downcast_ref::<AggregateExec>()?;
    if !matches!(
        aggregate.mode(),
        AggregateMode::Partial | AggregateMode::Single | AggregateMode::SinglePartitioned
    ) {
        return None;
    }
    let group = aggregate.group_expr();
    let mut exprs: Vec<Arc<dyn PhysicalExpr>> = group
        .expr()
        .iter()
        .chain(group.null_expr())
        .map(|(e, _)| Arc::clone(e))
        .collect();
    for function in aggregate.aggr_expr() {
        exprs.extend(function.expressions());
        exprs.extend(function.order_bys().iter().map(|s| Arc::clone(&s.expr)));
    }
    exprs.extend(aggregate.filter_expr().iter().flatten().cloned());
    Some(exprs)
}

/// The expressions of a node that passes its input's columns through by name, or `None`
/// when it does not.
fn pass_through_exprs(node: &Arc<dyn ExecutionPlan>) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
    let any = node.as_any();
    if let Some(filter) = any.downcast_ref::<FilterExec>() {
        return Some(vec![Arc::clone(filter.predicate())]);
    }
    if let Some(sort) = any.downcast_ref::<SortExec>() {
        return Some(sort.expr().iter().map(|s| Arc::clone(&s.expr)).collect());
    }
    if let Some(repartition) = any.downcast_ref::<RepartitionExec>() {
        return Some(match repartition.partitioning() {
            Partitioning::Hash(exprs, _) => exprs.clone(),
            _ => Vec::new(),
        });
    }
    None
}
