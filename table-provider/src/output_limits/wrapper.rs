//! [`BoundedOutput`]: a built-in scalar function that refuses a call whose output would exceed
//! the limit, before it runs.

use std::any::Any;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{DataFusionError, ExprSchema, Result};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::interval_arithmetic::Interval;
use datafusion::logical_expr::preimage::PreimageResult;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ExpressionPlacement, ReturnFieldArgs, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature,
};

use super::bounds::Growth;
use super::describe_bytes;

/// A scalar function whose calls are bounded: everything is the wrapped function's (name,
/// aliases, types, simplification, evaluation) except that a call whose output's upper bound
/// ([`Growth::upper_bound`]) exceeds `limit` bytes fails with `ResourcesExhausted` before the
/// function runs.
#[derive(Debug)]
pub struct BoundedOutput {
    inner: Arc<ScalarUDF>,
    growth: Growth,
    limit: usize,
}

impl BoundedOutput {
    pub(super) fn udf(inner: Arc<ScalarUDF>, growth: Growth, limit: usize) -> ScalarUDF {
        ScalarUDF::new_from_impl(Self {
            inner,
            growth,
            limit,
        })
    }

    /// Whether `udf` is bounded already.
    pub(super) fn wraps(udf: &ScalarUDF) -> bool {
        udf.inner().as_any().is::<BoundedOutput>()
    }

    /// `expr` with every call of the unbounded function of this name (a built-in's own
    /// simplification builds those) replaced by this one.
    fn rewrap(&self, expr: Expr) -> Result<Expr> {
        expr.transform_up(|e| match e {
            Expr::ScalarFunction(f)
                if f.func.name() == self.inner.name() && !Self::wraps(&f.func) =>
            {
                let bounded = Arc::new(Self::udf(Arc::clone(&self.inner), self.growth, self.limit));
                Ok(Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(bounded, f.args),
                )))
            }
            other => Ok(Transformed::no(other)),
        })
        .data()
    }
}

impl PartialEq for BoundedOutput {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner && self.limit == other.limit
    }
}

impl Eq for BoundedOutput {}

impl Hash for BoundedOutput {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.hash(state);
        self.limit.hash(state);
    }
}

impl ScalarUDFImpl for BoundedOutput {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        self.inner.inner().schema_name(args)
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.growth.check_arguments(args.scalar_arguments)?;
        let field = self.inner.return_field_from_args(args)?;
        self.growth
            .check_return_type(field.data_type(), self.limit)?;
        Ok(field)
    }

    fn is_nullable(&self, args: &[Expr], schema: &dyn ExprSchema) -> bool {
        #[expect(deprecated)]
        self.inner.inner().is_nullable(args, schema)
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        let updated = self.inner.inner().with_updated_config(config)?;
        Some(Self::udf(Arc::new(updated), self.growth, self.limit))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let bound = self.growth.upper_bound(&args, self.limit)?;
        if bound > self.limit {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{}() would produce up to {} for {} row(s), over the {} one function call may \
                 produce (a quarter of the query's memory limit)",
                self.inner.name(),
                describe_bytes(bound),
                args.number_rows,
                describe_bytes(self.limit),
            )));
        }
        self.inner.invoke_with_args(args)
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        // The planning checks again: a call whose type nothing asked for (`arrow_cast(…) IS
        // NULL`) reaches simplification unchecked, and `arrow_cast` becomes a `CAST` there.
        let literals: Vec<Option<&datafusion::common::ScalarValue>> = args
            .iter()
            .map(|a| match a {
                Expr::Literal(value, _) => Some(value),
                _ => None,
            })
            .collect();
        self.growth.check_arguments(&literals)?;
        Ok(match self.inner.simplify(args, info)? {
            ExprSimplifyResult::Simplified(expr) => {
                let cast_to = match &expr {
                    Expr::Cast(cast) => Some(&cast.data_type),
                    Expr::TryCast(cast) => Some(&cast.data_type),
                    _ => None,
                };
                if let Some(data_type) = cast_to {
                    self.growth.check_return_type(data_type, self.limit)?;
                }
                ExprSimplifyResult::Simplified(self.rewrap(expr)?)
            }
            original => original,
        })
    }

    fn preimage(
        &self,
        args: &[Expr],
        lit_expr: &Expr,
        info: &SimplifyContext,
    ) -> Result<PreimageResult> {
        self.inner.inner().preimage(args, lit_expr, info)
    }

    fn short_circuits(&self) -> bool {
        self.inner.short_circuits()
    }

    fn conditional_arguments<'a>(
        &self,
        args: &'a [Expr],
    ) -> Option<(Vec<&'a Expr>, Vec<&'a Expr>)> {
        self.inner.conditional_arguments(args)
    }

    fn evaluate_bounds(&self, input: &[&Interval]) -> Result<Interval> {
        self.inner.evaluate_bounds(input)
    }

    fn propagate_constraints(
        &self,
        interval: &Interval,
        inputs: &[&Interval],
    ) -> Result<Option<Vec<Interval>>> {
        self.inner.propagate_constraints(interval, inputs)
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        self.inner.output_ordering(inputs)
    }

    fn preserves_lex_ordering(&self, inputs: &[ExprProperties]) -> Result<bool> {
        self.inner.preserves_lex_ordering(inputs)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn placement(&self, args: &[ExpressionPlacement]) -> ExpressionPlacement {
        self.inner.placement(args)
    }
}
