//! A scalar subquery that returns more than one row is an error, as in Spark and PostgreSQL.
//!
//! DataFusion 53 turns an uncorrelated scalar subquery into a join (`ScalarSubqueryToJoin`)
//! without checking that it yields at most one row (apache/datafusion#16134, fixed in 54), so
//! `DELETE FROM t WHERE id = (SELECT id FROM t WHERE id > 1)` deleted every row the subquery
//! returned instead of failing, and `SELECT (SELECT id FROM t)` returned one row per row of
//! `t`.
//!
//! [`SingleRowSubqueries`] (an analyzer rule) puts each uncorrelated scalar subquery that
//! could return more than one row under an aggregate of [`single_value`]: no row gives NULL,
//! one row its value, a second row fails the query with INVALID_ARGUMENT ("scalar subquery
//! returned more than one row"). A subquery already aggregated without `GROUP BY`, or limited
//! to one row, is left as it is; correlated ones must already be aggregated (DataFusion's
//! analyzer refuses them otherwise).

use std::any::Any;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, UInt64Array};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Expr, LogicalPlan, LogicalPlanBuilder, Signature,
    Subquery, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::error::Error;

/// The analyzer rule (see the module docs). Register it with
/// `SessionStateBuilder::with_analyzer_rule`.
#[derive(Debug, Default, Clone, Copy)]
pub struct SingleRowSubqueries;

impl AnalyzerRule for SingleRowSubqueries {
    fn name(&self) -> &str {
        "petrel_single_row_subqueries"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            node.map_expressions(|expr| {
                expr.transform_up(|e| match e {
                    Expr::ScalarSubquery(sq)
                        if sq.outer_ref_columns.is_empty() && !at_most_one_row(&sq.subquery) =>
                    {
                        Ok(Transformed::yes(Expr::ScalarSubquery(single_row(sq)?)))
                    }
                    other => Ok(Transformed::no(other)),
                })
            })
        })
        .map(|t| t.data)
    }
}

/// Whether `plan` yields at most one row by its shape: an aggregate without `GROUP BY`, or a
/// limit of at most one row, under projections, aliases and filters.
fn at_most_one_row(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(a) => a.group_expr.is_empty(),
        LogicalPlan::Limit(limit) => matches!(
            limit.get_fetch_type(),
            Ok(datafusion::logical_expr::logical_plan::FetchType::Literal(Some(n))) if n <= 1
        ),
        LogicalPlan::Projection(p) => at_most_one_row(&p.input),
        LogicalPlan::SubqueryAlias(a) => at_most_one_row(&a.input),
        LogicalPlan::Filter(f) => at_most_one_row(&f.input),
        LogicalPlan::Sort(s) => at_most_one_row(&s.input),
        _ => false,
    }
}

/// `sq` under an aggregate of [`single_value`] over its one column, named as before.
fn single_row(sq: Subquery) -> Result<Subquery> {
    let plan = sq.subquery.as_ref().clone();
    let (qualifier, field) = plan.schema().qualified_field(0);
    let column = Expr::Column(datafusion::common::Column::new(
        qualifier.cloned(),
        field.name(),
    ));
    let value = Expr::AggregateFunction(AggregateFunction::new_udf(
        Arc::new(single_value()),
        vec![column],
        false,
        None,
        vec![],
        None,
    ))
    .alias(field.name());
    let wrapped = LogicalPlanBuilder::from(plan)
        .aggregate(Vec::<Expr>::new(), vec![value])?
        .build()?;
    Ok(Subquery {
        subquery: Arc::new(wrapped),
        outer_ref_columns: sq.outer_ref_columns,
        spans: sq.spans,
    })
}

/// The aggregate `petrel_single_value(x)`: NULL for no row, the value of one row, an error
/// for more.
pub fn single_value() -> AggregateUDF {
    AggregateUDF::new_from_impl(SingleValue {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SingleValue {
    signature: Signature,
}

impl AggregateUDFImpl for SingleValue {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        "petrel_single_value"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(SingleValueAccumulator {
            value: ScalarValue::try_from(args.return_field.data_type())?,
            rows: 0,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(
                "value",
                args.return_field.data_type().clone(),
                true,
            )),
            Arc::new(Field::new("rows", DataType::UInt64, false)),
        ])
    }
}

#[derive(Debug)]
struct SingleValueAccumulator {
    value: ScalarValue,
    rows: u64,
}

impl SingleValueAccumulator {
    /// Counts `rows` more rows, the first of them `first()` if none was seen before.
    fn add(&mut self, rows: u64, first: impl FnOnce() -> Result<ScalarValue>) -> Result<()> {
        if rows == 0 {
            return Ok(());
        }
        if self.rows == 0 {
            self.value = first()?;
        }
        self.rows += rows;
        if self.rows > 1 {
            return Err(DataFusionError::External(Box::new(Error::InvalidArgument(
                "scalar subquery returned more than one row (a subquery used as a value must \
                 return at most one)"
                    .into(),
            ))));
        }
        Ok(())
    }
}

impl Accumulator for SingleValueAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let array = &values[0];
        self.add(array.len() as u64, || ScalarValue::try_from_array(array, 0))
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (values, rows) = (&states[0], &states[1]);
        let rows = rows
            .as_any()
            .downcast_ref::<UInt64Array>()
            .ok_or_else(|| DataFusionError::Internal("single value: row counts".into()))?;
        for i in 0..rows.len() {
            self.add(rows.value(i), || ScalarValue::try_from_array(values, i))?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            self.value.clone(),
            ScalarValue::UInt64(Some(self.rows)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.value.clone())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.value.size() - std::mem::size_of_val(&self.value)
    }
}
