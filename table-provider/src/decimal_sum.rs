//! `sum` of decimals that fails on overflow instead of wrapping around.
//!
//! DataFusion 53's `sum` of `Decimal128` values adds with wrapping arithmetic and never checks
//! the result's precision: two `DECIMAL(38,0)` values of 99…9 summed to
//! -140282366920938463463374607431768211458, and 99…9 + 1 gave a 39-digit value in a
//! `DECIMAL(38,0)` column. Spark fails such a sum in ANSI mode and answers NULL otherwise; a
//! silent wrong total is neither. [`CheckedDecimalSum`] wraps the built-in `sum` and, for
//! `Decimal128` results, gives it accumulators (grouped and not) that add with overflow checks
//! and check the total against the result's precision: an overflow fails the query with
//! INVALID_ARGUMENT-class `ArrowError::ArithmeticOverflow` naming the precision. Everything
//! else (other types, `DISTINCT`, window frames) is the built-in's.

use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow::array::{ArrayRef, AsArray, BooleanArray, Decimal128Array};
use arrow::datatypes::{DataType, Decimal128Type, DecimalType};
use arrow::error::ArrowError;
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::function::AccumulatorArgs;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF,
};
use datafusion_functions_aggregate_common::aggregate::groups_accumulator::prim_op::PrimitiveGroupsAccumulator;

/// The built-in `sum`, with overflow-checked accumulators for `Decimal128` results.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CheckedDecimalSum {
    inner: Arc<AggregateUDF>,
}

impl CheckedDecimalSum {
    /// `sum`, as a function to register over the built-in.
    pub fn sum() -> AggregateUDF {
        AggregateUDF::new_from_impl(Self {
            inner: datafusion::functions_aggregate::sum::sum_udaf(),
        })
    }
}

/// The error of a sum over its decimal type.
fn overflow(precision: u8, scale: i8) -> DataFusionError {
    DataFusionError::ArrowError(
        Box::new(ArrowError::ArithmeticOverflow(format!(
            "sum overflows DECIMAL({precision},{scale}): cast the column to a wider decimal or \
             a double before summing"
        ))),
        None,
    )
}

/// Whether `value` fits `precision` digits.
fn fits(value: i128, precision: u8) -> bool {
    Decimal128Type::is_valid_decimal_precision(value, precision)
}

impl AggregateUDFImpl for CheckedDecimalSum {
    crate::udaf_delegation::delegate_aggregate_udf!();

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        match args.return_field.data_type() {
            DataType::Decimal128(precision, scale) if !args.is_distinct => {
                Ok(Box::new(CheckedSumAccumulator {
                    sum: None,
                    precision: *precision,
                    scale: *scale,
                }))
            }
            _ => self.inner.accumulator(args),
        }
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let data_type = args.return_field.data_type().clone();
        let DataType::Decimal128(precision, scale) = data_type else {
            return self.inner.create_groups_accumulator(args);
        };
        let overflowed = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&overflowed);
        let inner = PrimitiveGroupsAccumulator::<Decimal128Type, _>::new(
            &data_type,
            move |x: &mut i128, y: i128| match x.checked_add(y) {
                Some(sum) => *x = sum,
                None => flag.store(true, Ordering::Relaxed),
            },
        );
        Ok(Box::new(CheckedSumGroups {
            inner: Box::new(inner),
            overflowed,
            precision,
            scale,
        }))
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.inner.create_sliding_accumulator(args)
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }
}

/// The running total of one group, added with overflow checks.
#[derive(Debug)]
struct CheckedSumAccumulator {
    sum: Option<i128>,
    precision: u8,
    scale: i8,
}

impl CheckedSumAccumulator {
    fn add(&mut self, values: &ArrayRef) -> Result<()> {
        // A batch of values of at most `p` digits whose count times 10^p stays under i128's
        // range cannot overflow while summed: the built-in's unchecked (vectorized) sum then,
        // the checked one otherwise (a wide decimal, or the partial totals merged).
        let cannot_overflow = match values.data_type() {
            DataType::Decimal128(p, _) => {
                (values.len() as f64) * 10f64.powi(i32::from(*p)) < 1.0e38
            }
            _ => false,
        };
        let values: &Decimal128Array = values.as_primitive();
        let batch = if cannot_overflow {
            arrow::compute::sum(values)
        } else {
            arrow::compute::sum_checked(values)?
        };
        let Some(batch) = batch else {
            return Ok(());
        };
        let sum = match self.sum {
            Some(sum) => sum
                .checked_add(batch)
                .ok_or_else(|| overflow(self.precision, self.scale))?,
            None => batch,
        };
        self.sum = Some(sum);
        Ok(())
    }

    fn value(&self) -> Result<ScalarValue> {
        if let Some(sum) = self.sum
            && !fits(sum, self.precision)
        {
            return Err(overflow(self.precision, self.scale));
        }
        Ok(ScalarValue::Decimal128(
            self.sum,
            self.precision,
            self.scale,
        ))
    }
}

impl Accumulator for CheckedSumAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        match values.first() {
            Some(values) => self.add(values),
            None => Ok(()),
        }
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.value()
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.value()?])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }
}

/// Grouped totals added with overflow checks: the built-in's primitive accumulator with a
/// checked addition that raises a flag, read when the totals are emitted.
struct CheckedSumGroups {
    inner: Box<dyn GroupsAccumulator>,
    overflowed: Arc<AtomicBool>,
    precision: u8,
    scale: i8,
}

impl std::fmt::Debug for CheckedSumGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedSumGroups")
            .field("precision", &self.precision)
            .field("scale", &self.scale)
            .finish()
    }
}

impl CheckedSumGroups {
    /// `totals`, unless an addition overflowed or a total is over the precision.
    fn checked(&self, totals: ArrayRef) -> Result<ArrayRef> {
        let overflow_seen = self.overflowed.load(Ordering::Relaxed);
        let decimals: &Decimal128Array = totals.as_primitive();
        if overflow_seen || decimals.iter().flatten().any(|v| !fits(v, self.precision)) {
            return Err(overflow(self.precision, self.scale));
        }
        Ok(totals)
    }
}

impl GroupsAccumulator for CheckedSumGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner
            .update_batch(values, group_indices, opt_filter, total_num_groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let totals = self.inner.evaluate(emit_to)?;
        self.checked(totals)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let mut state = self.inner.state(emit_to)?;
        if let Some(totals) = state.pop() {
            state.push(self.checked(totals)?);
        }
        Ok(state)
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner
            .merge_batch(values, group_indices, opt_filter, total_num_groups)
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        self.inner.convert_to_state(values, opt_filter)
    }

    fn supports_convert_to_state(&self) -> bool {
        self.inner.supports_convert_to_state()
    }

    fn size(&self) -> usize {
        self.inner.size()
    }
}
