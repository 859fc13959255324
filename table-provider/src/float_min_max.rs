//! `min` and `max` whose grouped form orders floating-point values as the ungrouped form does.
//!
//! DataFusion 53's grouped accumulators for `min` / `max` of floating-point values compare with `partial_cmp` and overwrite the group's value whenever a NaN is
//! involved, so `SELECT g, max(x) … GROUP BY g` depended on the order of the rows: a NaN
//! followed by `1.0` gave `1.0`, and a group's `min` could be NaN (apache/datafusion#24432,
//! fixed upstream after 53). Without `GROUP BY` the same functions order by `total_cmp`: NaN
//! above every number (Spark's order too), `-0.0` below `0.0`.
//!
//! [`FloatTotalOrder`] wraps the built-in `min` or `max` and changes only that: for `Float32`
//! and `Float64` arguments its grouped accumulator keeps the greatest (least) value by `total_cmp`, starting
//! from −∞ (+∞) as the upstream fix does. Everything else — the name, coercion, the
//! ungrouped accumulator, answers from statistics — is the built-in's.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, AggregateFunctionSimplification};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, GroupsAccumulator, ReversedUDAF, StatisticsArgs,
};
use datafusion_functions_aggregate_common::aggregate::groups_accumulator::prim_op::PrimitiveGroupsAccumulator;

/// Which of the two functions a [`FloatTotalOrder`] wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Extreme {
    Min,
    Max,
}

/// The built-in `min` or `max`, with a grouped accumulator for floats ordered by `total_cmp`.
#[derive(Debug)]
pub struct FloatTotalOrder {
    inner: Arc<AggregateUDF>,
    extreme: Extreme,
}

impl FloatTotalOrder {
    /// `min`, as a function to register over the built-in.
    pub fn min() -> AggregateUDF {
        AggregateUDF::new_from_impl(Self {
            inner: datafusion::functions_aggregate::min_max::min_udaf(),
            extreme: Extreme::Min,
        })
    }

    /// `max`, as a function to register over the built-in.
    pub fn max() -> AggregateUDF {
        AggregateUDF::new_from_impl(Self {
            inner: datafusion::functions_aggregate::min_max::max_udaf(),
            extreme: Extreme::Max,
        })
    }
}

impl PartialEq for FloatTotalOrder {
    fn eq(&self, other: &Self) -> bool {
        self.extreme == other.extreme
    }
}

impl Eq for FloatTotalOrder {}

impl Hash for FloatTotalOrder {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.extreme.hash(state);
    }
}

/// A grouped accumulator keeping each group's least or greatest value by `total_cmp`.
macro_rules! total_order_accumulator {
    ($data_type:expr, $native:ty, $arrow:ty, $extreme:expr) => {{
        let keep = match $extreme {
            Extreme::Max => Ordering::Greater,
            Extreme::Min => Ordering::Less,
        };
        let start = match $extreme {
            Extreme::Max => <$native>::NEG_INFINITY,
            Extreme::Min => <$native>::INFINITY,
        };
        Box::new(
            PrimitiveGroupsAccumulator::<$arrow, _>::new($data_type, move |cur, new| {
                if new.total_cmp(cur) == keep {
                    *cur = new;
                }
            })
            .with_starting_value(start),
        ) as Box<dyn GroupsAccumulator>
    }};
}

impl AggregateUDFImpl for FloatTotalOrder {
    crate::udaf_delegation::delegate_aggregate_udf!();

    fn accumulator(&self, acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.inner.accumulator(acc_args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        // The float types Iceberg columns map to (`float`, `double`); the rest, `Float16`
        // included, keep the built-in's accumulator.
        let data_type = args.return_field.data_type().clone();
        Ok(match data_type {
            DataType::Float32 => {
                total_order_accumulator!(&data_type, f32, Float32Type, self.extreme)
            }
            DataType::Float64 => {
                total_order_accumulator!(&data_type, f64, Float64Type, self.extreme)
            }
            _ => return self.inner.create_groups_accumulator(args),
        })
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.inner.create_sliding_accumulator(args)
    }

    fn simplify(&self) -> Option<AggregateFunctionSimplification> {
        self.inner.simplify()
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        self.inner.reverse_udf()
    }

    fn value_from_stats(&self, statistics_args: &StatisticsArgs) -> Option<ScalarValue> {
        self.inner.value_from_stats(statistics_args)
    }
}
