//! [`LiteralCopies`]: the optimizer rule that refuses a plan which would copy a large literal
//! into every row of its batches.
//!
//! A literal in a projection, or as a function's argument, becomes a column of the batch: one
//! copy per row. `SELECT '<100 KB of text>' || v FROM generate_series(1, 20000)` asked for
//! 13 GB at once, outside any memory pool, and the allocation killed the server. The rule runs
//! after constant folding (so it also sees `repeat('x', 100000)` folded to its value) and
//! refuses, with `ResourcesExhausted`, a plan node whose literals times the rows of a batch
//! exceed the limit of one function call's output. Literals that are not copied stay free: a
//! comparison's operand (`doc = '…'`), a `LIKE` pattern, an `IN` list, and the cells of
//! `VALUES` (one copy each), so a large value is still written with `INSERT … VALUES`, bound
//! as a parameter or not.

use datafusion::common::DataFusionError;
use datafusion::common::Result;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{Expr, FetchType, LogicalPlan};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::describe_bytes;
use super::sizes::scalar_bytes;

/// Refuses plans that copy literals into rows beyond the limit (see the module docs).
#[derive(Debug)]
pub struct LiteralCopies {
    limit: usize,
}

impl LiteralCopies {
    /// The rule for `limit` bytes (the limit of one function call's output).
    pub fn new(limit: usize) -> Self {
        Self { limit }
    }

    fn check(&self, node: &LogicalPlan, batch_size: usize) -> Result<()> {
        if matches!(node, LogicalPlan::Values(_)) {
            return Ok(());
        }
        let rows = node
            .inputs()
            .iter()
            .map(|input| rows_per_batch(input, batch_size))
            .max()
            .unwrap_or(batch_size);
        let mut largest = 0;
        let mut bytes = 0usize;
        node.apply_expressions(|expr| {
            copied_literals(expr, &mut |b| {
                largest = largest.max(b);
                bytes = bytes.saturating_add(b);
            });
            Ok(TreeNodeRecursion::Continue)
        })?;
        let copies = bytes.saturating_mul(rows);
        if copies > self.limit {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "the statement's literals ({} in all, the largest {}) would be copied into each \
                 of up to {rows} rows of a batch ({}), over the {} one expression may produce \
                 (a quarter of the query's memory limit); write a large value with INSERT … \
                 VALUES (as a literal or a bound parameter), or compare with it, rather than \
                 computing with it over many rows",
                describe_bytes(bytes),
                describe_bytes(largest),
                describe_bytes(copies),
                describe_bytes(self.limit),
            )));
        }
        Ok(())
    }
}

/// At most how many rows a batch of `plan`'s output has.
fn rows_per_batch(plan: &LogicalPlan, batch_size: usize) -> usize {
    match plan {
        LogicalPlan::EmptyRelation(e) => usize::from(e.produce_one_row),
        LogicalPlan::Values(v) => v.values.len().min(batch_size),
        LogicalPlan::Aggregate(a) if a.group_expr.is_empty() => 1,
        LogicalPlan::Sort(sort) => {
            let input = rows_per_batch(&sort.input, batch_size);
            sort.fetch.map_or(input, |fetch| input.min(fetch))
        }
        LogicalPlan::TableScan(scan) => {
            scan.fetch.map_or(batch_size, |fetch| batch_size.min(fetch))
        }
        LogicalPlan::Projection(_)
        | LogicalPlan::SubqueryAlias(_)
        | LogicalPlan::Filter(_)
        | LogicalPlan::Union(_) => plan
            .inputs()
            .iter()
            .map(|input| rows_per_batch(input, batch_size))
            .max()
            .unwrap_or(batch_size),
        LogicalPlan::Limit(limit) => {
            let input = rows_per_batch(&limit.input, batch_size);
            match limit.get_fetch_type() {
                Ok(FetchType::Literal(Some(fetch))) => input.min(fetch),
                _ => input,
            }
        }
        _ => batch_size,
    }
}

/// Calls `found` with the heap bytes of each literal in `expr` that is copied into rows:
/// every literal except a comparison's operand, a `LIKE` pattern and an `IN` list's items.
fn copied_literals(expr: &Expr, found: &mut impl FnMut(usize)) {
    let is_literal = |e: &Expr| matches!(e, Expr::Literal(..));
    match expr {
        Expr::Literal(value, _) => found(scalar_bytes(value)),
        // Comparisons and regular-expression matches take a scalar operand as it is.
        Expr::BinaryExpr(b) if b.op.supports_propagation() => {
            for operand in [b.left.as_ref(), b.right.as_ref()] {
                if !is_literal(operand) {
                    copied_literals(operand, found);
                }
            }
        }
        Expr::Like(like) | Expr::SimilarTo(like) => {
            copied_literals(&like.expr, found);
            if !is_literal(&like.pattern) {
                copied_literals(&like.pattern, found);
            }
        }
        Expr::InList(list) => {
            copied_literals(&list.expr, found);
            for item in list.list.iter().filter(|item| !is_literal(item)) {
                copied_literals(item, found);
            }
        }
        // A subquery's plan is checked as a plan of its own.
        Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) => {}
        other => {
            // `apply_children` only fails when the closure does.
            let _ = other.apply_children(|child| {
                copied_literals(child, found);
                Ok(TreeNodeRecursion::Continue)
            });
        }
    }
}

impl OptimizerRule for LiteralCopies {
    fn name(&self) -> &str {
        "petrel_literal_copies"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        None
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        let batch_size = config.options().execution.batch_size;
        plan.apply_with_subqueries(|node| {
            self.check(node, batch_size)?;
            Ok(TreeNodeRecursion::Continue)
        })?;
        Ok(Transformed::no(plan))
    }
}
