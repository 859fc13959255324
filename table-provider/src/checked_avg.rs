//! `avg` of decimals that fails on overflow instead of wrapping around.
//!
//! DataFusion 53's `avg` of `Decimal128` values keeps its running sum in an i128 and adds with
//! wrapping arithmetic (per batch with Arrow's unchecked `sum`, then across batches, partial
//! sums and groups): `avg(x)` of four `DECIMAL(38,0)` values of 2^126 answered 0 (their sum,
//! 2^128, wraps to 0). Only the division at the end was checked, so a sum that wrapped to a
//! large value failed there by luck. [`CheckedAvg`] wraps the built-in `avg` and, for `Decimal128` arguments,
//! gives it accumulators (grouped, ungrouped, over sliding window frames, and `DISTINCT`) whose
//! sums are checked: a sum leaving i128's range, or an average outside its result type, fails
//! the query with `ArrowError::ArithmeticOverflow` naming the type. The states exchanged between
//! partial and final aggregation are the built-in's, so plans are unchanged. Averages of other
//! types are the built-in's (integers and floats are averaged as doubles).

use std::sync::Arc;

use crate::checked_sum::{RunningTotal, Total};
use arrow::array::{ArrayRef, AsArray, BooleanArray, Decimal128Array, PrimitiveArray, UInt64Array};
use arrow::datatypes::{DataType, Decimal128Type, UInt64Type};
use arrow::error::ArrowError;
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::function::AccumulatorArgs;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF,
};
use datafusion_functions_aggregate_common::aggregate::groups_accumulator::accumulate::NullState;
use datafusion_functions_aggregate_common::aggregate::groups_accumulator::nulls::{
    filtered_null_mask, set_nulls,
};
use datafusion_functions_aggregate_common::utils::{DecimalAverager, GenericDistinctBuffer};

/// The built-in `avg`, with overflow-checked accumulators for `Decimal128` arguments.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CheckedAvg {
    inner: Arc<AggregateUDF>,
}

impl CheckedAvg {
    /// `avg` (and its alias `mean`), as a function to register over the built-in.
    pub fn avg() -> AggregateUDF {
        AggregateUDF::new_from_impl(Self {
            inner: datafusion::functions_aggregate::average::avg_udaf(),
        })
    }
}

/// How a decimal average is computed: the sums' type (the argument's) and the result's.
#[derive(Debug, Clone, Copy)]
struct Averaging {
    sum_precision: u8,
    sum_scale: i8,
    result_precision: u8,
    result_scale: i8,
}

impl Averaging {
    /// The averaging of a `Decimal128` argument, if it is checked here.
    fn of(args: &AccumulatorArgs) -> Option<Self> {
        let argument = args.expr_fields.first()?.data_type();
        match (argument, args.return_field.data_type()) {
            (
                DataType::Decimal128(sum_precision, sum_scale),
                DataType::Decimal128(result_precision, result_scale),
            ) => Some(Self {
                sum_precision: *sum_precision,
                sum_scale: *sum_scale,
                result_precision: *result_precision,
                result_scale: *result_scale,
            }),
            _ => None,
        }
    }

    fn overflow(self) -> DataFusionError {
        let message = format!(
            "avg of DECIMAL({},{}) values overflows: their sum or their average leaves the \
             range of DECIMAL({},{}); cast the column to a double before averaging",
            self.sum_precision, self.sum_scale, self.result_precision, self.result_scale
        );
        DataFusionError::ArrowError(Box::new(ArrowError::ArithmeticOverflow(message)), None)
    }

    /// The sums' type as a checked total, which sums batches of arguments. (Its fast path
    /// bounds a batch by the precision, which partial sums may be over: `merge_batch` adds them
    /// with Arrow's checked sum.)
    fn total(self) -> Total {
        Total::Decimal128 {
            precision: self.sum_precision,
            scale: self.sum_scale,
        }
    }

    fn add(self, sum: i128, batch: Option<i128>) -> Result<i128> {
        sum.checked_add(batch.unwrap_or(0))
            .ok_or_else(|| self.overflow())
    }

    /// `sum` ÷ `count` in the result type (NULL for no values), or the overflow error.
    fn average(self, sum: i128, count: u64) -> Result<Option<i128>> {
        if count == 0 {
            return Ok(None);
        }
        let averager = DecimalAverager::<Decimal128Type>::try_new(
            self.sum_scale,
            self.result_precision,
            self.result_scale,
        )
        .map_err(|_| self.overflow())?;
        let count = i128::from(count);
        averager
            .avg(sum, count)
            .map(Some)
            .map_err(|_| self.overflow())
    }

    fn value(self, sum: i128, count: u64) -> Result<ScalarValue> {
        Ok(ScalarValue::Decimal128(
            self.average(sum, count)?,
            self.result_precision,
            self.result_scale,
        ))
    }

    fn sum_type(self) -> DataType {
        DataType::Decimal128(self.sum_precision, self.sum_scale)
    }
}

impl AggregateUDFImpl for CheckedAvg {
    crate::udaf_delegation::delegate_aggregate_udf!();

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        match Averaging::of(&args) {
            Some(averaging) if args.is_distinct => Ok(Box::new(CheckedDistinctAvg {
                // The built-in's distinct state: the values as DECIMAL(38, scale).
                values: GenericDistinctBuffer::new(DataType::Decimal128(
                    arrow::datatypes::DECIMAL128_MAX_PRECISION,
                    averaging.sum_scale,
                )),
                averaging,
            })),
            Some(averaging) => Ok(Box::new(CheckedAvgAccumulator {
                total: RunningTotal::default(),
                averaging,
            })),
            None => self.inner.accumulator(args),
        }
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        match Averaging::of(&args) {
            Some(averaging) if !args.is_distinct => Ok(Box::new(CheckedAvgGroups {
                averaging,
                sums: Vec::new(),
                counts: Vec::new(),
                null_state: NullState::new(),
                overflowed: false,
            })),
            _ => self.inner.create_groups_accumulator(args),
        }
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }
}

/// The running sum and count of one group (or window frame), summed with overflow checks.
#[derive(Debug)]
struct CheckedAvgAccumulator {
    total: RunningTotal,
    averaging: Averaging,
}

impl CheckedAvgAccumulator {
    /// Adds the arguments entering, or takes away those `leaving` (a sliding frame).
    fn shift(&mut self, values: &[ArrayRef], leaving: bool) -> Result<()> {
        let Some(values) = values.first() else {
            return Ok(());
        };
        let averaging = self.averaging;
        // (A batch whose own sum overflows fails in Arrow's checked sum, with Arrow's words:
        // the average's error says what to do.)
        self.total
            .shift(averaging.total(), values, leaving, || averaging.overflow())
            .map_err(|_| averaging.overflow())
    }
}

impl Accumulator for CheckedAvgAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.shift(values, false)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.shift(values, true)
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.averaging.value(self.total.sum, self.total.count)
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }

    /// The count and the sum, as the built-in's state is.
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let RunningTotal { sum, count } = self.total;
        Ok(vec![
            ScalarValue::UInt64(Some(count)),
            ScalarValue::Decimal128(
                (count > 0).then_some(sum),
                self.averaging.sum_precision,
                self.averaging.sum_scale,
            ),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let [counts, sums, ..] = states else {
            return Ok(());
        };
        if let Some(count) = arrow::compute::sum(counts.as_primitive::<UInt64Type>()) {
            self.total.count += count;
        }
        let partial = arrow::compute::sum_checked(sums.as_primitive::<Decimal128Type>())
            .map_err(|_| self.averaging.overflow())?;
        self.total.sum = self.averaging.add(self.total.sum, partial)?;
        Ok(())
    }
}

/// `avg(DISTINCT …)` of one group: the built-in's set of distinct values (state and merges
/// unchanged), summed with overflow checks when read.
#[derive(Debug)]
struct CheckedDistinctAvg {
    values: GenericDistinctBuffer<Decimal128Type>,
    averaging: Averaging,
}

impl Accumulator for CheckedDistinctAvg {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.values.update_batch(values)
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let mut sum = 0i128;
        for value in &self.values.values {
            sum = self.averaging.add(sum, Some(value.0))?;
        }
        self.averaging.value(sum, self.values.values.len() as u64)
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.values.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.values.state()
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.values.merge_batch(states)
    }
}

/// Grouped decimal averages: a sum and a count per group, the sums added with checks. An
/// overflow raises a flag, read after each batch and before anything is emitted.
#[derive(Debug)]
struct CheckedAvgGroups {
    averaging: Averaging,
    sums: Vec<i128>,
    counts: Vec<u64>,
    null_state: NullState,
    overflowed: bool,
}

impl CheckedAvgGroups {
    /// Room for `total_num_groups` groups.
    fn grow(&mut self, total_num_groups: usize) {
        self.sums.resize(total_num_groups, 0);
        self.counts.resize(total_num_groups, 0);
    }

    /// Adds `value` to `sum`, or raises `overflowed` and leaves `sum` as it was.
    fn add(sum: &mut i128, value: i128, overflowed: &mut bool) {
        match sum.checked_add(value) {
            Some(total) => *sum = total,
            None => *overflowed = true,
        }
    }

    fn check(&self) -> Result<()> {
        match self.overflowed {
            true => Err(self.averaging.overflow()),
            false => Ok(()),
        }
    }
}

impl GroupsAccumulator for CheckedAvgGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        let Some(values) = values.first() else {
            return Ok(());
        };
        let values: &Decimal128Array = values.as_primitive();
        self.grow(total_num_groups);
        let Self {
            sums,
            counts,
            null_state,
            overflowed,
            ..
        } = self;
        null_state.accumulate(
            group_indices,
            values,
            opt_filter,
            total_num_groups,
            |group, value| {
                Self::add(&mut sums[group], value, overflowed);
                counts[group] += 1;
            },
        );
        self.check()
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        self.check()?;
        let sums = emit_to.take_needed(&mut self.sums);
        let counts = emit_to.take_needed(&mut self.counts);
        let nulls = self.null_state.build(emit_to);
        let mut averages = Vec::with_capacity(sums.len());
        for (group, (sum, count)) in sums.into_iter().zip(counts).enumerate() {
            let valid = nulls.as_ref().is_none_or(|nulls| nulls.is_valid(group));
            averages.push(match valid {
                true => self.averaging.average(sum, count)?.unwrap_or(0),
                false => 0,
            });
        }
        let averages =
            PrimitiveArray::<Decimal128Type>::new(averages.into(), nulls).with_data_type(
                DataType::Decimal128(self.averaging.result_precision, self.averaging.result_scale),
            );
        Ok(Arc::new(averages))
    }

    /// The counts and the sums, as the built-in's state is.
    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        self.check()?;
        let nulls = self.null_state.build(emit_to);
        let counts = UInt64Array::new(emit_to.take_needed(&mut self.counts).into(), nulls.clone());
        let sums = PrimitiveArray::<Decimal128Type>::new(
            emit_to.take_needed(&mut self.sums).into(),
            nulls,
        )
        .with_data_type(self.averaging.sum_type());
        Ok(vec![Arc::new(counts), Arc::new(sums)])
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        let [partial_counts, partial_sums, ..] = values else {
            return Ok(());
        };
        self.grow(total_num_groups);
        let Self {
            sums,
            counts,
            null_state,
            overflowed,
            ..
        } = self;
        null_state.accumulate(
            group_indices,
            partial_counts.as_primitive::<UInt64Type>(),
            opt_filter,
            total_num_groups,
            |group, count| counts[group] += count,
        );
        null_state.accumulate(
            group_indices,
            partial_sums.as_primitive::<Decimal128Type>(),
            opt_filter,
            total_num_groups,
            |group, partial| Self::add(&mut sums[group], partial, overflowed),
        );
        self.check()
    }

    /// Each row as a partial state of its own: a count of 1 and the value as its sum.
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let Some(values) = values.first() else {
            return Ok(Vec::new());
        };
        let sums = values
            .as_primitive::<Decimal128Type>()
            .clone()
            .with_data_type(self.averaging.sum_type());
        let counts = UInt64Array::from_value(1, sums.len());
        let nulls = filtered_null_mask(opt_filter, &sums);
        Ok(vec![
            Arc::new(set_nulls(counts, nulls.clone())),
            Arc::new(set_nulls(sums, nulls)),
        ])
    }

    fn supports_convert_to_state(&self) -> bool {
        true
    }

    fn size(&self) -> usize {
        self.sums.capacity() * size_of::<i128>() + self.counts.capacity() * size_of::<u64>()
    }
}
