//! `sum` of integers and decimals that fails on overflow instead of wrapping around.
//!
//! DataFusion 53's `sum` of `Int64` and `Decimal128` values adds with wrapping arithmetic and
//! never checks a decimal total's precision: `9223372036854775807` + 1 summed to
//! -9223372036854775808, two `DECIMAL(38,0)` values of 99…9 to
//! -140282366920938463463374607431768211458, and 99…9 + 1 gave a 39-digit value in a
//! `DECIMAL(38,0)` column; window frames wrapped the same way. PostgreSQL and DuckDB sum
//! `BIGINT`s into a wider type, Trino and Spark (ANSI) fail; a silent wrong total is never
//! right. [`CheckedSum`] wraps the built-in `sum` and, for `Int64` and `Decimal128` results,
//! gives it accumulators (grouped, ungrouped and over sliding window frames) whose totals are
//! checked against the result type: an overflow fails the query with INVALID_ARGUMENT-class
//! `ArrowError::ArithmeticOverflow` naming the type. `DISTINCT` sums of those types keep the
//! built-in's set of distinct values and total it with the same checks (DataFusion's wrapped:
//! `sum(DISTINCT v)` of 9223372036854775807 and 1 answered -9223372036854775808), over window
//! frames too. Other types are the built-in's.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::checked_arithmetic::magnitudes::{MARGIN, decimals_fit, integer_magnitude};
use arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, BooleanArray, Decimal128Array, Int64Array,
};
use arrow::datatypes::{DataType, Decimal128Type, DecimalType, Int64Type, UInt64Type};
use arrow::error::ArrowError;
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::function::AccumulatorArgs;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF,
};
use datafusion_functions_aggregate_common::aggregate::groups_accumulator::prim_op::PrimitiveGroupsAccumulator;
use datafusion_functions_aggregate_common::utils::GenericDistinctBuffer;

/// The built-in `sum`, with overflow-checked accumulators for `Int64` and `Decimal128` results.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CheckedSum {
    inner: Arc<AggregateUDF>,
}

impl CheckedSum {
    /// `sum`, as a function to register over the built-in.
    pub fn sum() -> AggregateUDF {
        AggregateUDF::new_from_impl(Self {
            inner: datafusion::functions_aggregate::sum::sum_udaf(),
        })
    }
}

/// The type a checked total has, which decides when it overflows.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Total {
    Int64,
    Decimal128 { precision: u8, scale: i8 },
}

impl Total {
    /// The total of a non-distinct sum returning `data_type`, if it is checked here.
    fn of(args: &AccumulatorArgs) -> Option<Self> {
        match args.is_distinct {
            true => None,
            false => Self::of_type(args.return_field.data_type()),
        }
    }

    /// The total of a `DISTINCT` sum, if it is checked here.
    fn of_distinct(args: &AccumulatorArgs) -> Option<Self> {
        match args.is_distinct {
            true => Self::of_type(args.return_field.data_type()),
            false => None,
        }
    }

    fn of_type(data_type: &DataType) -> Option<Self> {
        match data_type {
            DataType::Int64 => Some(Self::Int64),
            DataType::Decimal128(precision, scale) => Some(Self::Decimal128 {
                precision: *precision,
                scale: *scale,
            }),
            _ => None,
        }
    }

    fn overflow(self) -> DataFusionError {
        let message = match self {
            Self::Int64 => {
                "sum overflows BIGINT: cast the column to DECIMAL(38,0) before summing".to_string()
            }
            Self::Decimal128 { precision, scale } => format!(
                "sum overflows DECIMAL({precision},{scale}): cast the column to a wider decimal \
                 or a double before summing"
            ),
        };
        DataFusionError::ArrowError(Box::new(ArrowError::ArithmeticOverflow(message)), None)
    }

    /// Whether `total` is a value of this type.
    fn fits(self, total: i128) -> bool {
        match self {
            Self::Int64 => i64::try_from(total).is_ok(),
            Self::Decimal128 { precision, .. } => {
                Decimal128Type::is_valid_decimal_precision(total, precision)
            }
        }
    }

    /// The exact sum of a batch of this type's values (`None` when all are null), or an error
    /// when it leaves i128's range.
    pub(crate) fn batch_sum(self, values: &ArrayRef) -> Result<Option<i128>> {
        match self {
            Self::Int64 => {
                let values: &Int64Array = values.as_primitive();
                // A batch whose count times its largest magnitude (bounded by the OR of the
                // magnitudes) stays under i64's range cannot overflow. Without NULLs, one
                // vectorised pass sums with wrapping and ORs; with them, the OR (NULL slots
                // included, which only loosens it), then Arrow's (vectorised) sum. Otherwise
                // checked in i64, and exactly in i128 when that overflows.
                let safe = |magnitudes: f64| {
                    magnitudes * (values.len() as f64) < (i64::MAX as f64) * MARGIN
                };
                if values.null_count() == 0 && !values.is_empty() {
                    let (sum, magnitudes) =
                        values.values().iter().fold((0i64, 0u64), |(sum, bits), v| {
                            (sum.wrapping_add(*v), bits | v.unsigned_abs())
                        });
                    if safe(magnitudes as f64) {
                        return Ok(Some(i128::from(sum)));
                    }
                } else if safe(integer_magnitude(values)) {
                    return Ok(arrow::compute::sum(values).map(i128::from));
                }
                match arrow::compute::sum_checked(values) {
                    Ok(sum) => Ok(sum.map(i128::from)),
                    Err(_) => Ok(Some(values.iter().flatten().map(i128::from).sum())),
                }
            }
            Self::Decimal128 { .. } => {
                // A batch of values of at most `p` digits whose count times 10^p stays under
                // i128's range cannot overflow while summed: Arrow's unchecked (vectorized)
                // sum then, the checked one otherwise (a wide decimal, or merged totals).
                let cannot_overflow = match values.data_type() {
                    DataType::Decimal128(p, _) => {
                        (values.len() as f64) * 10f64.powi(i32::from(*p)) < 1.0e38
                    }
                    _ => false,
                };
                let values: &Decimal128Array = values.as_primitive();
                Ok(if cannot_overflow {
                    arrow::compute::sum(values)
                } else {
                    arrow::compute::sum_checked(values)?
                })
            }
        }
    }

    /// `total` as a value of this type, or the overflow error.
    fn value(self, total: Option<i128>) -> Result<ScalarValue> {
        if let Some(total) = total
            && !self.fits(total)
        {
            return Err(self.overflow());
        }
        Ok(match self {
            // (In range: just checked.)
            Self::Int64 => ScalarValue::Int64(total.map(|t| t as i64)),
            Self::Decimal128 { precision, scale } => {
                ScalarValue::Decimal128(total, precision, scale)
            }
        })
    }

    /// `total` plus `batch`, or the overflow error.
    fn add(self, total: Option<i128>, batch: Option<i128>) -> Result<Option<i128>> {
        match (total, batch) {
            (Some(t), Some(b)) => t.checked_add(b).map(Some).ok_or_else(|| self.overflow()),
            (t, b) => Ok(t.or(b)),
        }
    }
}

impl AggregateUDFImpl for CheckedSum {
    crate::udaf_delegation::delegate_aggregate_udf!();

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        if let Some(kind) = Total::of(&args) {
            return Ok(Box::new(CheckedSumAccumulator { sum: None, kind }));
        }
        let return_type = args.return_field.data_type();
        match Total::of_distinct(&args) {
            Some(kind @ Total::Int64) => Ok(Box::new(CheckedDistinctSum::<Int64Type> {
                values: GenericDistinctBuffer::new(return_type.clone()),
                kind,
            })),
            Some(kind @ Total::Decimal128 { .. }) => {
                Ok(Box::new(CheckedDistinctSum::<Decimal128Type> {
                    values: GenericDistinctBuffer::new(return_type.clone()),
                    kind,
                }))
            }
            None => self.inner.accumulator(args),
        }
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let Some(kind) = Total::of(&args) else {
            return self.inner.create_groups_accumulator(args);
        };
        let data_type = args.return_field.data_type().clone();
        let overflowed = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&overflowed);
        let inner: Box<dyn GroupsAccumulator> = match kind {
            Total::Int64 => Box::new(PrimitiveGroupsAccumulator::<Int64Type, _>::new(
                &data_type,
                move |x: &mut i64, y: i64| match x.checked_add(y) {
                    Some(sum) => *x = sum,
                    None => flag.store(true, Ordering::Relaxed),
                },
            )),
            Total::Decimal128 { .. } => {
                Box::new(PrimitiveGroupsAccumulator::<Decimal128Type, _>::new(
                    &data_type,
                    move |x: &mut i128, y: i128| match x.checked_add(y) {
                        Some(sum) => *x = sum,
                        None => flag.store(true, Ordering::Relaxed),
                    },
                ))
            }
        };
        Ok(Box::new(CheckedSumGroups {
            inner,
            overflowed,
            kind,
        }))
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        if let Some(kind) = Total::of(&args) {
            return Ok(Box::new(CheckedSlidingSum {
                total: RunningTotal::default(),
                kind,
            }));
        }
        match Total::of_distinct(&args) {
            // (The built-in slides distinct sums of BIGINTs only.)
            Some(Total::Int64) => Ok(Box::new(CheckedSlidingDistinctSum::default())),
            _ => self.inner.create_sliding_accumulator(args),
        }
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }
}

/// The running total of one group, added with overflow checks.
#[derive(Debug)]
struct CheckedSumAccumulator {
    sum: Option<i128>,
    kind: Total,
}

impl Accumulator for CheckedSumAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if let Some(values) = values.first() {
            let batch = self.kind.batch_sum(values)?;
            self.sum = self.kind.add(self.sum, batch)?;
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.kind.value(self.sum)
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.kind.value(self.sum)?])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }
}

/// A total of values that enter and leave it (a sliding window frame, an average's running
/// sum), exact in an i128, and how many non-null values it holds.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RunningTotal {
    pub(crate) sum: i128,
    /// Non-null values in the total: none makes a `sum` or an `avg` NULL.
    pub(crate) count: u64,
}

impl RunningTotal {
    /// Adds `values` (of `kind`), or takes them away when they are `leaving`; `overflow` is the
    /// error when the total would leave i128's range.
    pub(crate) fn shift(
        &mut self,
        kind: Total,
        values: &ArrayRef,
        leaving: bool,
        overflow: impl FnOnce() -> DataFusionError,
    ) -> Result<()> {
        let batch = kind.batch_sum(values)?.unwrap_or(0);
        let non_null = (values.len() - values.null_count()) as u64;
        let sum = match leaving {
            false => self.sum.checked_add(batch),
            true => self.sum.checked_sub(batch),
        };
        self.sum = sum.ok_or_else(overflow)?;
        self.count = match leaving {
            false => self.count + non_null,
            true => self.count.saturating_sub(non_null),
        };
        Ok(())
    }
}

/// The total of a sliding window frame: values enter and leave it, and the total is checked
/// when it is read (so a frame passing through an overflow that its later rows undo is exact).
#[derive(Debug)]
struct CheckedSlidingSum {
    total: RunningTotal,
    kind: Total,
}

impl Accumulator for CheckedSlidingSum {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if let Some(values) = values.first() {
            let kind = self.kind;
            self.total.shift(kind, values, false, || kind.overflow())?;
        }
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if let Some(values) = values.first() {
            let kind = self.kind;
            self.total.shift(kind, values, true, || kind.overflow())?;
        }
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let total = self.total;
        self.kind.value((total.count > 0).then_some(total.sum))
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }

    /// The total and the count, as the built-in sliding sum's state is.
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            self.evaluate()?,
            ScalarValue::UInt64(Some(self.total.count)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let [totals, counts, ..] = states else {
            return self.update_batch(states);
        };
        let partial = self.kind.batch_sum(totals)?.unwrap_or(0);
        self.total.sum = self
            .total
            .sum
            .checked_add(partial)
            .ok_or_else(|| self.kind.overflow())?;
        if let Some(count) = arrow::compute::sum(counts.as_primitive::<UInt64Type>()) {
            self.total.count += count;
        }
        Ok(())
    }
}

/// Grouped totals added with overflow checks: the built-in's primitive accumulator with a
/// checked addition that raises a flag, read when the totals are emitted.
struct CheckedSumGroups {
    inner: Box<dyn GroupsAccumulator>,
    overflowed: Arc<AtomicBool>,
    kind: Total,
}

impl std::fmt::Debug for CheckedSumGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedSumGroups")
            .field("kind", &self.kind)
            .finish()
    }
}

impl CheckedSumGroups {
    /// `totals`, unless an addition overflowed or a decimal total is over the precision.
    fn checked(&self, totals: ArrayRef) -> Result<ArrayRef> {
        // (BIGINT totals are in range unless the flag says otherwise.)
        if !decimals_fit(&totals) || self.overflowed.load(Ordering::Relaxed) {
            return Err(self.kind.overflow());
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

/// `sum(DISTINCT …)` of one group: the built-in's set of distinct values (state and merges
/// unchanged), totalled with overflow checks when read.
#[derive(Debug)]
struct CheckedDistinctSum<T: ArrowPrimitiveType> {
    values: GenericDistinctBuffer<T>,
    kind: Total,
}

impl<T> Accumulator for CheckedDistinctSum<T>
where
    T: ArrowPrimitiveType + std::fmt::Debug,
    i128: From<T::Native>,
{
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.values.update_batch(values)
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let mut total = None;
        for value in &self.values.values {
            total = self.kind.add(total, Some(i128::from(value.0)))?;
        }
        self.kind.value(total)
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

/// `sum(DISTINCT …)` of BIGINTs over a sliding window frame: how many times each value is in
/// the frame, and the exact total of the distinct ones, checked when read (the built-in's
/// wrapped around). NULLs are not values: a frame of NULLs sums to NULL.
#[derive(Debug, Default)]
struct CheckedSlidingDistinctSum {
    counts: HashMap<i64, u64>,
    sum: i128,
}

impl CheckedSlidingDistinctSum {
    fn enter(&mut self, value: i64) {
        let count = self.counts.entry(value).or_insert(0);
        if *count == 0 {
            self.sum += i128::from(value);
        }
        *count += 1;
    }
}

impl Accumulator for CheckedSlidingDistinctSum {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if let Some(values) = values.first() {
            for value in values.as_primitive::<Int64Type>().iter().flatten() {
                self.enter(value);
            }
        }
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if let Some(values) = values.first() {
            for value in values.as_primitive::<Int64Type>().iter().flatten() {
                if let Some(count) = self.counts.get_mut(&value) {
                    *count -= 1;
                    if *count == 0 {
                        self.counts.remove(&value);
                        self.sum -= i128::from(value);
                    }
                }
            }
        }
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Total::Int64.value((!self.counts.is_empty()).then_some(self.sum))
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.counts.capacity() * 2 * size_of::<u64>()
    }

    /// The distinct values, as the built-in's state is.
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let values = Int64Array::from_iter_values(self.counts.keys().copied());
        Ok(vec![
            SingleRowListArrayBuilder::new(Arc::new(values)).build_list_scalar(),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        if let Some(lists) = states.first() {
            for list in lists.as_list::<i32>().iter().flatten() {
                for value in list.as_primitive::<Int64Type>().iter().flatten() {
                    self.enter(value);
                }
            }
        }
        Ok(())
    }
}
