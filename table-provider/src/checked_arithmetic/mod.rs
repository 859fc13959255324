//! Integer and decimal arithmetic that fails on overflow.
//!
//! DataFusion 53 evaluates `+`, `-` and `*` of integers with wrapping arithmetic and never
//! checks a decimal result against its precision: `9223372036854775807 * 9223372036854775807`
//! answered 1, `CAST(2147483647 AS INT) + CAST(1 AS INT)` a negative number, and 38 nines + 1
//! a 39-digit value in a `DECIMAL(38,0)` column. PostgreSQL, Trino and DuckDB fail such a
//! statement, Spark does in ANSI mode; a silent wrong answer is never right.
//!
//! - [`CheckedArithmetic`] (`function.rs`): the operators as functions evaluating Arrow's
//!   checked kernels and checking decimal precision; an overflow fails the statement with
//!   `ArrowError::ArithmeticOverflow` (INVALID_ARGUMENT over Flight SQL).
//! - `proven_safe.rs`: operators proven safe before they run, by the magnitudes their operands
//!   can have (`price * (1 - discount)`): they stay DataFusion's own.
//! - `magnitudes.rs`: when a batch's integer operands are too small to overflow, so the
//!   cheaper wrapping kernels answer exactly.
//! - [`CheckArithmetic`] (`rule.rs`): the analyzer rule putting them in place of the operators.

mod function;
pub(crate) mod magnitudes;
mod proven_safe;
mod rule;

pub use function::CheckedArithmetic;
pub use rule::CheckArithmetic;

use datafusion::logical_expr::{Operator, ScalarUDF};

/// The checked `+`, `-` and `*`, registered wherever Petrel's plans run (a cluster's
/// executors find them by name).
pub fn checked_arithmetic_functions() -> Vec<ScalarUDF> {
    [Operator::Plus, Operator::Minus, Operator::Multiply]
        .into_iter()
        .filter_map(CheckedArithmetic::new)
        .map(ScalarUDF::new_from_impl)
        .collect()
}
