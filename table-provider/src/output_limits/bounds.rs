//! Upper bounds of what one call of a growing function produces, computed from its arguments
//! before it runs.
//!
//! Each bound is in bytes of output values (offsets and validity are not counted: they are a
//! few bytes a row, which the limit's headroom covers). A bound never under-counts: where the
//! exact size is dear to compute (`replace`, `regexp_replace`), a loose bound is used first and
//! the exact one only when the loose one is over the limit.

use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, IntervalMonthDayNanoType, TimeUnit};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs};

use super::sizes::{Arg, Integers, value_bytes};

const NANOS_PER_DAY: i128 = 86_400_000_000_000;

/// How a function's output grows with its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Growth {
    /// `repeat(s, n)`: `n` copies of `s`.
    Repeat,
    /// `lpad` / `rpad(s, n [, fill])`: `n` characters.
    Pad,
    /// `replace(s, from, to)`: each occurrence of `from` becomes `to`.
    Replace,
    /// `regexp_replace(s, pattern, replacement [, flags])`.
    RegexpReplace,
    /// The arguments side by side: `concat`, `||`, `array_concat`, `array_append`, `make_array`.
    Concatenation,
    /// `concat_ws(separator, value, …)`: the values with a separator between each two.
    ConcatWithSeparator,
    /// `array_repeat(value, n)`: a list of `n` copies.
    ArrayRepeat,
    /// `array_resize(list, n [, fill])`: a list of `n` elements.
    ArrayResize,
    /// `range` / `generate_series([start,] stop [, step])`: a list of every step.
    Series,
    /// `array_to_string(list, separator [, null_text])`: every element as text.
    ArrayToString,
    /// At most this many times the bytes of the arguments: `encode` (hex: 2), `overlay` (1).
    Scaled(usize),
    /// `upper` / `lower` / `initcap(s)`: ASCII keeps its size; another character's case can
    /// take up to 3 times its bytes (`ΐ`).
    Case,
    /// `translate(s, from, to)`: each character becomes at most one of `to`'s.
    Translate,
    /// `to_char(value, format)`: a format specifier of 2 bytes writes up to 32 (`%+`).
    ToChar,
    /// `array_replace[_n|_all](list, from, to [, n])`: each element may become `to`.
    ArrayReplace,
    /// `arrow_cast(value, 'type')`: checked at planning (DataFusion makes it a `CAST`): the
    /// type's text nests at most [`MAX_TYPE_NESTING`] deep (parsing it recursed without
    /// bound), and one value of a fixed-size type (`FixedSizeList(2147483647, Int64)`: 16 GiB,
    /// even for NULL) fits the limit.
    ArrowCast,
}

/// How deep the type text of `arrow_cast` may nest.
pub(super) const MAX_TYPE_NESTING: usize = 64;

impl Growth {
    /// Checks made while planning, before the function's own return type is computed from
    /// `scalar_arguments` (the literal arguments).
    pub(super) fn check_arguments(self, scalar_arguments: &[Option<&ScalarValue>]) -> Result<()> {
        if self != Growth::ArrowCast {
            return Ok(());
        }
        let Some(text) = scalar_arguments
            .get(1)
            .copied()
            .flatten()
            .and_then(|v| v.try_as_str().flatten())
        else {
            return Ok(());
        };
        let mut depth = 0usize;
        let mut deepest = 0usize;
        for c in text.chars() {
            match c {
                '(' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                ')' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        if deepest > MAX_TYPE_NESTING {
            return Err(DataFusionError::Plan(format!(
                "arrow_cast: the type nests {deepest} levels deep, over the limit of \
                 {MAX_TYPE_NESTING}"
            )));
        }
        Ok(())
    }

    /// Checks made while planning on the function's return type.
    pub(super) fn check_return_type(self, data_type: &DataType, limit: usize) -> Result<()> {
        if self != Growth::ArrowCast {
            return Ok(());
        }
        let width = fixed_width(data_type);
        if width > limit {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "arrow_cast() to {data_type}: one value takes {}, over the {} one function \
                 call may produce (a quarter of the query's memory limit)",
                super::describe_bytes(width),
                super::describe_bytes(limit),
            )));
        }
        Ok(())
    }
}

/// The bytes one value of `data_type` takes whatever it holds (NULL too): fixed-size lists
/// and binaries, structs of them, and fixed-width values; 0 for variable-size types, whose
/// NULL takes nothing.
fn fixed_width(data_type: &DataType) -> usize {
    match data_type {
        DataType::FixedSizeList(field, size) => usize::try_from(*size)
            .unwrap_or(0)
            .saturating_mul(fixed_width(field.data_type()).max(1)),
        DataType::FixedSizeBinary(size) => usize::try_from(*size).unwrap_or(0),
        DataType::Struct(fields) => fields.iter().fold(0usize, |sum, f| {
            sum.saturating_add(fixed_width(f.data_type()))
        }),
        other => other.primitive_width().unwrap_or(0),
    }
}

impl Growth {
    /// An upper bound, in bytes, of the output of a call with `args`; `limit` is the limit the
    /// caller checks against (an exact count is computed only when the loose bound exceeds it).
    pub(super) fn upper_bound(self, args: &ScalarFunctionArgs, limit: usize) -> Result<usize> {
        let values = &args.args;
        // Scalars only: the call makes one value, which the plan copies into rows later (that
        // copy is bounded at planning: `LiteralCopies`).
        let rows = if values.iter().any(|v| matches!(v, ColumnarValue::Array(_))) {
            args.number_rows
        } else {
            1
        };
        let arg = |i: usize| values.get(i);
        match self {
            Growth::Concatenation => Ok(all_bytes(values, rows)),
            Growth::ConcatWithSeparator => {
                let Some(separator) = arg(0) else {
                    return Ok(0);
                };
                let separators = values.len().saturating_sub(2);
                let texts = all_bytes(&values[1..], rows);
                Ok(texts.saturating_add(value_bytes(separator, rows).saturating_mul(separators)))
            }
            Growth::Repeat => {
                let (Some(text), Some(count)) = (arg(0), arg(1)) else {
                    return Ok(0);
                };
                let count_arg = Integers::new(count)?;
                if is_scalar(count) {
                    // One count: the texts' bytes times it, without a pass over the rows.
                    return Ok(value_bytes(text, rows).saturating_mul(count_arg.count_at(0)));
                }
                let text = Arg::new(text)?;
                Ok(sum_rows(rows, |row| {
                    text.bytes_at(row).saturating_mul(count_arg.count_at(row))
                }))
            }
            Growth::Pad => {
                let (Some(text), Some(length)) = (arg(0), arg(1)) else {
                    return Ok(0);
                };
                let length_arg = Integers::new(length)?;
                let fill_value = arg(2);
                if is_scalar(length) && fill_value.is_none_or(is_scalar) {
                    // One length and fill: the same sum, without a pass over the rows.
                    let characters = length_arg.count_at(0);
                    let fill_width = match fill_value {
                        Some(ColumnarValue::Scalar(f)) => {
                            f.try_as_str().flatten().map_or(4, widest_character)
                        }
                        _ => 1,
                    };
                    return Ok(value_bytes(text, rows)
                        .min(rows.saturating_mul(characters.saturating_mul(4)))
                        .saturating_add(
                            rows.saturating_mul(characters.saturating_mul(fill_width)),
                        ));
                }
                let (text, length) = (Arg::new(text)?, length_arg);
                let fill = fill_value.map(Arg::new).transpose()?;
                Ok(sum_rows(rows, |row| {
                    let characters = length.count_at(row);
                    // The result is `characters` characters: the text's first ones, then fill.
                    let fill_width = fill
                        .as_ref()
                        .map_or(1, |f| f.str_at(row).map_or(4, widest_character));
                    text.bytes_at(row)
                        .min(characters.saturating_mul(4))
                        .saturating_add(characters.saturating_mul(fill_width))
                }))
            }
            Growth::Replace => replace_bound(values, rows, limit),
            Growth::RegexpReplace => regexp_replace_bound(args, rows, limit),
            Growth::ArrayRepeat => {
                let (Some(value), Some(count)) = (arg(0), arg(1)) else {
                    return Ok(0);
                };
                let (value, count) = (Arg::new(value)?, Integers::new(count)?);
                Ok(sum_rows(rows, |row| {
                    // An element's bytes and its list offset.
                    value
                        .bytes_at(row)
                        .saturating_add(8)
                        .saturating_mul(count.count_at(row))
                }))
            }
            Growth::ArrayResize => {
                let (Some(list), Some(size)) = (arg(0), arg(1)) else {
                    return Ok(0);
                };
                let (list, size) = (Arg::new(list)?, Integers::new(size)?);
                let fill = arg(2).map(Arg::new).transpose()?;
                let element = list.average_element_bytes();
                Ok(sum_rows(rows, |row| {
                    let fill = fill.as_ref().map_or(0, |f| f.bytes_at(row));
                    let element = element.max(fill).saturating_add(8);
                    list.bytes_at(row)
                        .saturating_add(size.count_at(row).saturating_mul(element))
                }))
            }
            Growth::Series => series_bound(values, rows),
            // (A call is a CAST once simplified; its one-value size was checked at planning.)
            Growth::ArrowCast => Ok(0),
            Growth::Scaled(factor) => Ok(all_bytes(values, rows).saturating_mul(factor)),
            Growth::Case => {
                let Some(text) = arg(0) else {
                    return Ok(0);
                };
                let loose = value_bytes(text, rows).saturating_mul(3);
                if loose <= limit {
                    return Ok(loose);
                }
                let text = Arg::new(text)?;
                Ok(sum_rows(rows, |row| {
                    text.str_at(row).map_or(0, |t| {
                        let wide = t.bytes().filter(|b| !b.is_ascii()).count();
                        t.len().saturating_add(wide.saturating_mul(2))
                    })
                }))
            }
            Growth::Translate => {
                let (Some(text), Some(to)) = (arg(0), arg(2)) else {
                    return Ok(0);
                };
                let widest = match to {
                    ColumnarValue::Scalar(s) => {
                        s.try_as_str().flatten().map_or(1, widest_character)
                    }
                    ColumnarValue::Array(_) => 4,
                };
                Ok(value_bytes(text, rows).saturating_mul(widest.max(1)))
            }
            Growth::ToChar => {
                let Some(format) = arg(1) else {
                    return Ok(0);
                };
                let format = Arg::new(format)?;
                Ok(sum_rows(rows, |row| {
                    format.bytes_at(row).saturating_mul(16).saturating_add(64)
                }))
            }
            Growth::ArrayReplace => {
                let (Some(list), Some(to)) = (arg(0), arg(2)) else {
                    return Ok(0);
                };
                let (list, to) = (Arg::new(list)?, Arg::new(to)?);
                Ok(sum_rows(rows, |row| {
                    list.bytes_at(row).saturating_add(
                        list.leaves_at(row)
                            .saturating_mul(to.bytes_at(row).saturating_add(8)),
                    )
                }))
            }
            Growth::ArrayToString => {
                let (Some(list), Some(separator)) = (arg(0), arg(1)) else {
                    return Ok(0);
                };
                let (list, separator) = (Arg::new(list)?, Arg::new(separator)?);
                let null_text = arg(2).map(Arg::new).transpose()?;
                Ok(sum_rows(rows, |row| {
                    // Each element: its text (a number's is at most ~40 bytes; a string's is
                    // its bytes, in the row's size) and a separator or the NULL text.
                    let per_element = separator
                        .bytes_at(row)
                        .saturating_add(null_text.as_ref().map_or(0, |n| n.bytes_at(row)))
                        .saturating_add(40);
                    list.bytes_at(row)
                        .saturating_add(list.leaves_at(row).saturating_mul(per_element))
                }))
            }
        }
    }
}

/// The bytes all of `values` contribute to a call over `rows` rows ([`value_bytes`]).
fn all_bytes(values: &[ColumnarValue], rows: usize) -> usize {
    values
        .iter()
        .fold(0usize, |sum, v| sum.saturating_add(value_bytes(v, rows)))
}

/// The sum of `bytes(row)` over `rows` rows, saturating.
fn sum_rows(rows: usize, bytes: impl Fn(usize) -> usize) -> usize {
    (0..rows).fold(0usize, |sum, row| sum.saturating_add(bytes(row)))
}

/// Whether an argument is one value for every row.
fn is_scalar(value: &ColumnarValue) -> bool {
    matches!(value, ColumnarValue::Scalar(_))
}

/// A scalar's bytes as text (a string's length; 0 for NULL).
fn scalar_text_bytes(value: &ScalarValue) -> usize {
    value.try_as_str().flatten().map_or(0, str::len)
}

/// The UTF-8 width of the widest character of `text` (1 for an empty text).
fn widest_character(text: &str) -> usize {
    text.chars().map(char::len_utf8).max().unwrap_or(1)
}

/// `replace(s, from, to)`: every non-overlapping occurrence of `from` becomes `to` (an empty
/// `from` matches before each character and at the end). Loose: as many occurrences as fit;
/// exact (counting them) when the loose bound exceeds `limit`.
fn replace_bound(values: &[ColumnarValue], rows: usize, limit: usize) -> Result<usize> {
    let (Some(text), Some(from), Some(to)) = (values.first(), values.get(1), values.get(2)) else {
        return Ok(0);
    };
    if let (ColumnarValue::Scalar(f), ColumnarValue::Scalar(t)) = (from, to) {
        // One pattern and replacement: as many occurrences as fit in all the text, without a
        // pass over the rows (the sum of each row's is at most that).
        let (f, t) = (scalar_text_bytes(f), scalar_text_bytes(t));
        let length = value_bytes(text, rows);
        let occurrences = length
            .checked_div(f)
            .unwrap_or_else(|| length.saturating_add(rows));
        let loose = length.saturating_add(occurrences.saturating_mul(t.saturating_sub(f)));
        if loose <= limit {
            return Ok(loose);
        }
    }
    let (text, from, to) = (Arg::new(text)?, Arg::new(from)?, Arg::new(to)?);
    let growth = |row: usize, occurrences: usize| {
        let (from, to) = (from.bytes_at(row), to.bytes_at(row));
        text.bytes_at(row)
            .saturating_add(occurrences.saturating_mul(to.saturating_sub(from)))
    };
    let loose = sum_rows(rows, |row| {
        let (length, from) = (text.bytes_at(row), from.bytes_at(row));
        let occurrences = length
            .checked_div(from)
            .unwrap_or_else(|| length.saturating_add(1));
        growth(row, occurrences)
    });
    if loose <= limit {
        return Ok(loose);
    }
    Ok(sum_rows(rows, |row| {
        let occurrences = match (text.str_at(row), from.str_at(row)) {
            (Some(text), Some("")) => text.chars().count().saturating_add(1),
            (Some(text), Some(from)) => text.matches(from).count(),
            _ => 0,
        };
        growth(row, occurrences)
    }))
}

/// `regexp_replace(s, pattern, replacement [, flags])`: the first match replaced, or every
/// match with flag `g`. A replacement's group references (`\1`, `$1`) expand to parts of
/// their match, and matches do not overlap, so each reference adds at most the text's length.
/// Loose: a match at every position; exact (counting the matches with `regexp_count`, the
/// same regular expressions) when the loose bound exceeds `limit`.
fn regexp_replace_bound(args: &ScalarFunctionArgs, rows: usize, limit: usize) -> Result<usize> {
    let values = &args.args;
    let (Some(text), Some(pattern), Some(replacement)) =
        (values.first(), values.get(1), values.get(2))
    else {
        return Ok(0);
    };
    let flags = match values.get(3) {
        None => Some(String::new()),
        Some(ColumnarValue::Scalar(s)) => s.try_as_str().map(|f| f.unwrap_or("").to_string()),
        // Flags per row: assume every row replaces every match.
        Some(ColumnarValue::Array(_)) => None,
    };
    let global = flags.as_ref().is_none_or(|f| f.contains('g'));
    if let ColumnarValue::Scalar(r) = replacement {
        // One replacement: the loose bound over all the text, without a pass over the rows.
        let length = value_bytes(text, rows);
        let references = r
            .try_as_str()
            .flatten()
            .map_or(0, |r| r.matches(['\\', '$']).count());
        let matches = if global {
            length.saturating_add(rows)
        } else {
            rows
        };
        let loose = length
            .saturating_add(matches.saturating_mul(scalar_text_bytes(r)))
            .saturating_add(references.saturating_mul(length));
        if loose <= limit {
            return Ok(loose);
        }
    }
    let (text_arg, replacement) = (Arg::new(text)?, Arg::new(replacement)?);
    let bound = |row: usize, matches: usize| {
        let length = text_arg.bytes_at(row);
        let references = replacement
            .str_at(row)
            .map_or(0, |r| r.matches(['\\', '$']).count());
        length
            .saturating_add(matches.saturating_mul(replacement.bytes_at(row)))
            .saturating_add(references.saturating_mul(length))
    };
    let loose = sum_rows(rows, |row| {
        let matches = if global {
            text_arg.bytes_at(row).saturating_add(1)
        } else {
            1
        };
        bound(row, matches)
    });
    let Some(flags) = flags else {
        return Ok(loose);
    };
    if loose <= limit {
        return Ok(loose);
    }
    let mut count_args = vec![
        ColumnarValue::clone(text),
        ColumnarValue::clone(pattern),
        ColumnarValue::Scalar(ScalarValue::Int64(Some(1))),
    ];
    let flags = flags.replace('g', "");
    if !flags.is_empty() {
        count_args.push(ColumnarValue::Scalar(ScalarValue::Utf8(Some(flags))));
    }
    let arg_fields = count_args
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Arc::new(arrow::datatypes::Field::new(
                format!("a{i}"),
                v.data_type(),
                true,
            ))
        })
        .collect();
    let counts =
        datafusion::functions::regex::regexp_count().invoke_with_args(ScalarFunctionArgs {
            args: count_args,
            arg_fields,
            number_rows: args.number_rows,
            return_field: Arc::new(arrow::datatypes::Field::new("count", DataType::Int64, true)),
            config_options: Arc::clone(&args.config_options),
        })?;
    let counts = Integers::new(&counts)?;
    Ok(sum_rows(rows, |row| {
        let matches = counts.count_at(row);
        bound(row, if global { matches } else { matches.min(1) })
    }))
}

/// `range` / `generate_series([start,] stop [, step])` of integers, dates or timestamps: a
/// list of at most |stop − start| / |step| + 1 elements, 8 bytes each.
fn series_bound(values: &[ColumnarValue], rows: usize) -> Result<usize> {
    let Some(first) = values.first() else {
        return Ok(0);
    };
    let (start, stop) = match values.get(1) {
        Some(stop) => (Some(first), stop),
        None => (None, first),
    };
    let step = values.get(2);
    let elements: Vec<u128> = match first.data_type() {
        DataType::Int64 | DataType::Int32 | DataType::Int16 | DataType::Int8 => {
            let start = start.map(Integers::new).transpose()?;
            let stop = Integers::new(stop)?;
            let step = step.map(Integers::new).transpose()?;
            (0..rows)
                .map(|row| {
                    let from = start.as_ref().map_or(Some(0), |s| s.at(row));
                    let step = step.as_ref().map_or(Some(1), |s| s.at(row));
                    steps(
                        from.map(i128::from),
                        stop.at(row).map(i128::from),
                        step.map(i128::from),
                    )
                })
                .collect()
        }
        DataType::Date32 | DataType::Date64 => {
            let days = |v: &ColumnarValue| Integers::new(&cast_value(v, &DataType::Date32)?);
            let (start, stop) = (start.map(days).transpose()?, days(stop)?);
            let step = step.map(IntervalSteps::new).transpose()?;
            (0..rows)
                .map(|row| {
                    let day = |v: Option<i64>| v.map(|d| i128::from(d) * NANOS_PER_DAY);
                    let from = start.as_ref().and_then(|s| day(s.at(row)));
                    // Dates move by whole days: a step's nanoseconds do not move them.
                    let step = step
                        .as_ref()
                        .map_or(Step::Length(NANOS_PER_DAY as u128), |s| {
                            s.step_at(row, true)
                        });
                    interval_steps(from, day(stop.at(row)), step)
                })
                .collect::<Result<_>>()?
        }
        DataType::Timestamp(unit, _) => {
            let per_unit: i128 = match unit {
                TimeUnit::Second => 1_000_000_000,
                TimeUnit::Millisecond => 1_000_000,
                TimeUnit::Microsecond => 1_000,
                TimeUnit::Nanosecond => 1,
            };
            // The values as stored (UTC), in `unit`s.
            let (start, stop) = (start.map(Integers::new).transpose()?, Integers::new(stop)?);
            let step = step.map(IntervalSteps::new).transpose()?;
            (0..rows)
                .map(|row| {
                    let nanos = |v: Option<i64>| v.map(|t| i128::from(t) * per_unit);
                    let from = start.as_ref().and_then(|s| nanos(s.at(row)));
                    let step = step.as_ref().map_or(Step::Null, |s| s.step_at(row, false));
                    interval_steps(from, nanos(stop.at(row)), step)
                })
                .collect::<Result<_>>()?
        }
        // Other types fail in the function itself.
        _ => return Ok(0),
    };
    Ok(elements.into_iter().fold(0usize, |sum, n| {
        sum.saturating_add(usize::try_from(n.saturating_mul(8)).unwrap_or(usize::MAX))
    }))
}

/// The number of values from `start` to `stop` by `step` (inclusive, so an upper bound for
/// `range` too); 0 when any is NULL or the step is 0.
fn steps(start: Option<i128>, stop: Option<i128>, step: Option<i128>) -> u128 {
    match (start, stop, step) {
        (Some(start), Some(stop), Some(step)) if step != 0 => {
            (stop - start).unsigned_abs() / step.unsigned_abs() + 1
        }
        _ => 0,
    }
}

/// [`steps`] by an interval step; a step that may not advance is refused.
fn interval_steps(start: Option<i128>, stop: Option<i128>, step: Step) -> Result<u128> {
    match step {
        Step::Null => Ok(0),
        Step::Unbounded => Err(DataFusionError::ResourcesExhausted(
            "a date or timestamp series whose step mixes signs (such as INTERVAL '1 month \
             -28 days') may never advance, and its series would not end: give the step's \
             parts one sign"
                .into(),
        )),
        Step::Length(length) => Ok(steps(start, stop, i128::try_from(length).ok())),
    }
}

/// A column or scalar cast to `to` (as an array-valued or scalar `ColumnarValue`).
fn cast_value(value: &ColumnarValue, to: &DataType) -> Result<ColumnarValue> {
    Ok(match value {
        ColumnarValue::Array(a) => ColumnarValue::Array(cast(a, to)?),
        ColumnarValue::Scalar(s) => ColumnarValue::Scalar(s.cast_to(to)?),
    })
}

/// One row's interval step of a date or timestamp series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// NULL: the row's series is NULL.
    Null,
    /// It always advances by at least this many nanoseconds (a month counted as 28 days).
    Length(u128),
    /// Its parts have different signs (`1 month -28 days`, `-1 month 28 days`), so it may
    /// advance by nothing, or away from the end: DataFusion's series then never ends.
    Unbounded,
}

/// The interval steps of a date or timestamp series, readable by row.
struct IntervalSteps {
    /// One value for every row.
    scalar: bool,
    intervals: arrow::array::IntervalMonthDayNanoArray,
}

impl IntervalSteps {
    fn new(value: &ColumnarValue) -> Result<Self> {
        let to = DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano);
        let array = match cast_value(value, &to)? {
            ColumnarValue::Array(a) => a,
            ColumnarValue::Scalar(s) => s.to_array_of_size(1)?,
        };
        Ok(Self {
            scalar: matches!(value, ColumnarValue::Scalar(_)),
            intervals: array.as_primitive::<IntervalMonthDayNanoType>().clone(),
        })
    }

    /// The step at `row`; `whole_days`: of a date series, where nanoseconds do not count. A
    /// step of length 0 is DataFusion's to refuse.
    fn step_at(&self, row: usize, whole_days: bool) -> Step {
        let i = if self.scalar { 0 } else { row };
        if self.intervals.is_null(i) {
            return Step::Null;
        }
        let v = self.intervals.value(i);
        let nanos = if whole_days { 0 } else { v.nanoseconds };
        let parts = [i128::from(v.months), i128::from(v.days), i128::from(nanos)];
        if parts.iter().any(|p| *p > 0) && parts.iter().any(|p| *p < 0) {
            return Step::Unbounded;
        }
        Step::Length(
            (parts[0] * 28 * NANOS_PER_DAY + parts[1] * NANOS_PER_DAY + parts[2]).unsigned_abs(),
        )
    }
}
