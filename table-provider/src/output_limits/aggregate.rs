//! [`BoundedAggregate`]: `array_agg` and `string_agg` whose values, when computed row by row
//! as window functions, are bounded; and approximate percentiles whose t-digest size is
//! ([`MAX_DIGEST_SIZE`]).
//!
//! As an aggregate, each group's value is made once from a state the memory pool accounts
//! for. As a window function, the value is made again for every row: `array_agg(v) OVER
//! (ORDER BY v)` over 60,000 rows is 60,000 arrays of up to 60,000 elements, 14 GB held outside
//! the pool until the batch is built, and the allocation aborted the server. The wrapper's
//! accumulators count the bytes of the values they have made; past the limit (and only once a
//! value was made more than once: a group's one value stays the pool's business) the query
//! fails with `ResourcesExhausted`.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::expr::WindowFunctionParams;
use datafusion::logical_expr::function::{AccumulatorArgs, AggregateFunctionSimplification};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, GroupsAccumulator, ReversedUDAF, StatisticsArgs,
};
use datafusion::physical_expr::expressions::Literal;

use super::describe_bytes;
use super::sizes::scalar_bytes;

/// A built-in aggregate whose row-by-row values are bounded (see the module docs).
#[derive(Debug)]
pub struct BoundedAggregate {
    inner: Arc<AggregateUDF>,
    limit: usize,
    /// The argument that sizes a t-digest (`approx_percentile_cont`'s max size), if any.
    digest_size_argument: Option<usize>,
}

/// The largest t-digest `approx_percentile_cont` may ask for: DataFusion allocates room for
/// all its centroids at once (a max size of 1,000,000,000 asked for 16 GB and aborted the
/// server). Spark's default accuracy is 10,000, DataFusion's 100.
pub const MAX_DIGEST_SIZE: u64 = 1_000_000;

impl BoundedAggregate {
    pub(super) fn udaf(inner: Arc<AggregateUDF>, limit: usize) -> AggregateUDF {
        AggregateUDF::new_from_impl(Self {
            inner,
            limit,
            digest_size_argument: None,
        })
    }

    /// `inner` (an approximate percentile) whose t-digest size, argument `index`, is at most
    /// [`MAX_DIGEST_SIZE`].
    pub(super) fn digest(inner: Arc<AggregateUDF>, index: usize, limit: usize) -> AggregateUDF {
        AggregateUDF::new_from_impl(Self {
            inner,
            limit,
            digest_size_argument: Some(index),
        })
    }

    /// Refuses a t-digest size over [`MAX_DIGEST_SIZE`].
    fn check_arguments(&self, args: &AccumulatorArgs) -> Result<()> {
        let Some(index) = self.digest_size_argument else {
            return Ok(());
        };
        let Some(literal) = args
            .exprs
            .get(index)
            .and_then(|e| e.as_any().downcast_ref::<Literal>())
        else {
            return Ok(());
        };
        let size = match literal.value().cast_to(&DataType::Float64) {
            Ok(ScalarValue::Float64(Some(size))) => size,
            _ => return Ok(()),
        };
        if size > MAX_DIGEST_SIZE as f64 {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{}(): a t-digest of {size} centroids is over the limit of {MAX_DIGEST_SIZE} \
                 (its room is allocated at once)",
                self.inner.name()
            )));
        }
        Ok(())
    }

    fn bounded(&self, inner: Box<dyn Accumulator>) -> Box<dyn Accumulator> {
        Box::new(BoundedAccumulator {
            inner,
            name: self.inner.name().to_string(),
            limit: self.limit,
            values: 0,
            produced: 0,
        })
    }
}

impl PartialEq for BoundedAggregate {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
            && self.limit == other.limit
            && self.digest_size_argument == other.digest_size_argument
    }
}

impl Eq for BoundedAggregate {}

impl Hash for BoundedAggregate {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.hash(state);
        self.limit.hash(state);
    }
}

impl AggregateUDFImpl for BoundedAggregate {
    crate::udaf_delegation::delegate_aggregate_udf!();

    fn window_function_schema_name(&self, params: &WindowFunctionParams) -> Result<String> {
        self.inner.window_function_schema_name(params)
    }

    fn window_function_display_name(&self, params: &WindowFunctionParams) -> Result<String> {
        self.inner.window_function_display_name(params)
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.check_arguments(&acc_args)?;
        Ok(self.bounded(self.inner.accumulator(acc_args)?))
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.check_arguments(&args)?;
        Ok(self.bounded(self.inner.create_sliding_accumulator(args)?))
    }

    // A grouped accumulator makes each group's value once (its state is in the pool).
    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        self.check_arguments(&args)?;
        self.inner.create_groups_accumulator(args)
    }

    fn with_beneficial_ordering(
        self: Arc<Self>,
        beneficial_ordering: bool,
    ) -> Result<Option<Arc<dyn AggregateUDFImpl>>> {
        Ok(Arc::clone(self.inner.inner())
            .with_beneficial_ordering(beneficial_ordering)?
            .map(|inner| {
                let inner = Arc::new(AggregateUDF::new_from_shared_impl(inner));
                Arc::new(Self {
                    inner,
                    limit: self.limit,
                    digest_size_argument: self.digest_size_argument,
                }) as Arc<dyn AggregateUDFImpl>
            }))
    }

    fn simplify(&self) -> Option<AggregateFunctionSimplification> {
        self.inner.simplify()
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        match self.inner.reverse_udf() {
            ReversedUDAF::Reversed(reversed) => {
                ReversedUDAF::Reversed(Arc::new(AggregateUDF::new_from_impl(Self {
                    inner: reversed,
                    limit: self.limit,
                    digest_size_argument: self.digest_size_argument,
                })))
            }
            other => other,
        }
    }

    fn value_from_stats(&self, statistics_args: &StatisticsArgs) -> Option<ScalarValue> {
        self.inner.value_from_stats(statistics_args)
    }

    fn supports_within_group_clause(&self) -> bool {
        self.inner.inner().supports_within_group_clause()
    }
}

/// An accumulator that counts the bytes of the values it makes.
#[derive(Debug)]
struct BoundedAccumulator {
    inner: Box<dyn Accumulator>,
    name: String,
    limit: usize,
    /// Values made so far.
    values: usize,
    /// Their bytes.
    produced: usize,
}

impl Accumulator for BoundedAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.update_batch(values)
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let value = self.inner.evaluate()?;
        self.values += 1;
        self.produced = self.produced.saturating_add(scalar_bytes(&value));
        if self.values > 1 && self.produced > self.limit {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{}() as a window function made {} values of {} in all, over the {} one \
                 function may produce for a partition (a quarter of the query's memory \
                 limit): every row's value holds its whole frame; narrow the frame or \
                 aggregate with GROUP BY",
                self.name,
                self.values,
                describe_bytes(self.produced),
                describe_bytes(self.limit),
            )));
        }
        Ok(value)
    }

    fn size(&self) -> usize {
        self.inner.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.inner.state()
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.inner.merge_batch(states)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.retract_batch(values)
    }

    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }
}
