//! Limits on the data one function call or one literal may make, checked before it is made.
//!
//! A few SQL functions make far more data than they are given: `repeat('x', 2000000000)`,
//! `lpad(s, 2147483647)`, `range(1, 1e12)`, `array_repeat(v, n)`, `replace`,
//! `regexp_replace` and `array_replace_all` (up to the product of their arguments' sizes), and
//! a concatenation, `encode(…, 'hex')` or `overlay` of a value with itself, level after level
//! of a CTE. A literal is copied into every row of a
//! batch it is computed with. Arrow allocates those outputs in one piece, outside any memory
//! pool, and an allocation the machine cannot give aborts the process: one statement of a few
//! hundred bytes killed the server (PostgreSQL refuses such values with "requested length too
//! large"; so does Petrel now).
//!
//! - [`BoundedOutput`] wraps each growing built-in (`bounded_scalar_functions`): before it
//!   runs, an upper bound of its output is computed from its arguments (`bounds`), and a call
//!   over the limit fails with RESOURCE_EXHAUSTED naming the function, the bound and the limit.
//! - [`BoundFunctionOutputs`] (analyzer rule) puts the bounded functions where DataFusion's
//!   planners put built-ins directly, and makes `||` of strings the bounded
//!   [`STRING_CONCAT`].
//! - [`BoundedAggregate`] wraps `array_agg` and `string_agg`, whose value is made again for
//!   every row when they are window functions.
//! - [`LiteralCopies`] (optimizer rule) refuses a plan that copies literals into batches beyond
//!   the limit.
//! - [`BoundRowCopies`] (physical optimizer rule) guards the inputs of joins, windows and
//!   `unnest`, which copy one row into many: [`CopyGuardExec`] fails the query before an
//!   output batch of copies could exceed [`copy_limit`].
//!
//! The limit is the server's (a quarter of one query's memory limit; the copies' limit is the
//! whole of it); a cluster's executors use [`DEFAULT_OUTPUT_LIMIT`] and do not guard copies.

mod aggregate;
mod bounds;
mod copy_guard;
mod literal_copies;
mod row_bytes;
mod row_copies;
mod rule;
mod sizes;
mod string_concat;
mod wrapper;

use std::sync::Arc;

use datafusion::logical_expr::ScalarUDF;

pub use aggregate::{BoundedAggregate, MAX_DIGEST_SIZE};
use bounds::Growth;
pub use copy_guard::{Copies, CopyGuardExec};
pub use literal_copies::LiteralCopies;
pub use row_copies::BoundRowCopies;
pub use rule::BoundFunctionOutputs;
pub use string_concat::{STRING_CONCAT, StringConcat};
pub use wrapper::BoundedOutput;

/// The output limit where no query memory limit says otherwise (1 GiB).
pub const DEFAULT_OUTPUT_LIMIT: usize = 1 << 30;

/// The limit on one function call's output (and one plan node's literal copies) for a query
/// memory limit of `query_memory_limit` bytes: a quarter of it, at least 16 MiB.
pub fn output_limit(query_memory_limit: usize) -> usize {
    (query_memory_limit / 4).max(16 << 20)
}

/// The limit on one output batch of a row-copying operator (a join, a window, `unnest`) for a
/// query memory limit of `query_memory_limit` bytes: all of it, at least 64 MiB.
pub fn copy_limit(query_memory_limit: usize) -> usize {
    query_memory_limit.max(64 << 20)
}

/// The growing scalar functions, each bounded to `limit` bytes of output per call, under the
/// built-ins' names (and `petrel_string_concat`): register them over the built-ins.
pub fn bounded_scalar_functions(limit: usize) -> Vec<ScalarUDF> {
    use datafusion::functions::{regex, string, unicode};
    use datafusion::functions_nested::{concat, make_array, range, repeat, resize};
    let built_ins: Vec<(Arc<ScalarUDF>, Growth)> = vec![
        (string::repeat(), Growth::Repeat),
        (unicode::lpad(), Growth::Pad),
        (unicode::rpad(), Growth::Pad),
        (string::replace(), Growth::Replace),
        (regex::regexp_replace(), Growth::RegexpReplace),
        (string::concat(), Growth::Concatenation),
        (string::concat_ws(), Growth::ConcatWithSeparator),
        (
            Arc::new(ScalarUDF::new_from_impl(StringConcat::default())),
            Growth::Concatenation,
        ),
        (concat::array_concat_udf(), Growth::Concatenation),
        (concat::array_append_udf(), Growth::Concatenation),
        (concat::array_prepend_udf(), Growth::Concatenation),
        (make_array::make_array_udf(), Growth::Concatenation),
        (repeat::array_repeat_udf(), Growth::ArrayRepeat),
        (resize::array_resize_udf(), Growth::ArrayResize),
        (range::range_udf(), Growth::Series),
        (range::gen_series_udf(), Growth::Series),
        (
            datafusion::functions_nested::string::array_to_string_udf(),
            Growth::ArrayToString,
        ),
        (datafusion::functions::encoding::encode(), Growth::Scaled(2)),
        (string::upper(), Growth::Case),
        (string::lower(), Growth::Case),
        (unicode::initcap(), Growth::Case),
        (unicode::translate(), Growth::Translate),
        (datafusion::functions::core::overlay(), Growth::Scaled(1)),
        (datafusion::functions::datetime::to_char(), Growth::ToChar),
        (datafusion::functions::core::arrow_cast(), Growth::ArrowCast),
        (
            datafusion::functions_nested::replace::array_replace_udf(),
            Growth::ArrayReplace,
        ),
        (
            datafusion::functions_nested::replace::array_replace_n_udf(),
            Growth::ArrayReplace,
        ),
        (
            datafusion::functions_nested::replace::array_replace_all_udf(),
            Growth::ArrayReplace,
        ),
    ];
    built_ins
        .into_iter()
        .map(|(inner, growth)| BoundedOutput::udf(inner, growth, limit))
        .collect()
}

/// `array_agg` and `string_agg`, whose values as window functions are bounded to `limit`
/// bytes per partition, and the approximate percentiles, whose t-digests are bounded
/// ([`BoundedAggregate`]): register them over the built-ins.
pub fn bounded_aggregate_functions(limit: usize) -> Vec<datafusion::logical_expr::AggregateUDF> {
    use datafusion::functions_aggregate::{
        approx_percentile_cont, approx_percentile_cont_with_weight, array_agg, string_agg,
    };
    vec![
        BoundedAggregate::udaf(array_agg::array_agg_udaf(), limit),
        BoundedAggregate::udaf(string_agg::string_agg_udaf(), limit),
        // (value, percentile, max size) and (value, weight, percentile, max size).
        BoundedAggregate::digest(
            approx_percentile_cont::approx_percentile_cont_udaf(),
            2,
            limit,
        ),
        BoundedAggregate::digest(
            approx_percentile_cont_with_weight::approx_percentile_cont_with_weight_udaf(),
            3,
            limit,
        ),
    ]
}

/// `bytes` for a message: `512 B`, `96.0 KiB`, `1.5 GiB`.
fn describe_bytes(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
