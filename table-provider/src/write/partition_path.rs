//! A data file's partition directory, as Iceberg Java writes it.
//!
//! Iceberg Java (1.10, `PartitionSpec.partitionToPath`) names the directory of a data file
//! `name=value/name=value/...`: each partition field's name and the field's value rendered by
//! `Transform.toHumanString(resultType, value)`, both URL-encoded with
//! `java.net.URLEncoder.encode(s, UTF_8)`. Spark writes exactly these names (`country=a%2Fb%3Dc+d%25`),
//! and they are literal names on disk, never to be decoded (issue 8).
//!
//! The `iceberg` crate's `PartitionSpec::partition_to_path` / `Datum::to_human_string` differ from
//! Java (no URL encoding, raw year/month/hour ordinals, hex binary, Rust float formatting), so this
//! module renders every value itself:
//!
//! | value | Java | here |
//! |---|---|---|
//! | null (any transform, also void) | `"null"` | [`human_string`] |
//! | year / month / day / hour ordinal | `TransformUtil.humanYear/Month/Day/Hour` (`%04d`, floorDiv) | `human_year` ... |
//! | date | `humanDay` | `human_day` |
//! | time | `LocalTime.toString()` | `human_time` |
//! | timestamp(tz), timestamp_ns(tz) | `DateTimeUtil.*ToIsoTimestamp(tz)` (`ISO_LOCAL_DATE_TIME` [+ `+00:00`]) | `iso_timestamp` |
//! | binary / fixed | Base64, standard alphabet, padded | `base64` |
//! | float / double | `Float.toString` / `Double.toString` | `java_float` / `java_double` |
//! | decimal | `BigDecimal.toString()` | `java_big_decimal` |
//! | uuid, int, long, boolean, string | `toString()` | |

use iceberg::spec::{
    Literal, PartitionSpec, PrimitiveLiteral, PrimitiveType, Schema, Struct, Transform, Type,
};

use crate::error::{Error, Result};

/// The directory (relative to the table's data location) of a data file with partition tuple
/// `values` under `spec`, exactly as Iceberg Java's `PartitionSpec.partitionToPath` writes it:
/// `name=value/...`, each name and value URL-encoded with `java.net.URLEncoder`'s form encoding
/// (see [`url_encode`]), values as `Transform.toHumanString` renders them (see [`human_string`]).
/// Empty string for an unpartitioned spec.
///
/// `values` holds one entry per partition field of `spec`, in the spec's order, each of the
/// field's result type (`Transform::result_type` of its source type in `schema`).
pub fn partition_path(spec: &PartitionSpec, schema: &Schema, values: &Struct) -> Result<String> {
    let fields = spec.fields();
    if values.fields().len() != fields.len() {
        return Err(Error::InvalidArgument(format!(
            "partition tuple has {} values, partition spec {} has {} fields",
            values.fields().len(),
            spec.spec_id(),
            fields.len()
        )));
    }
    if fields.is_empty() {
        return Ok(String::new());
    }
    let partition_type = spec.partition_type(schema)?;
    let mut path = String::new();
    for (i, (field, result)) in fields.iter().zip(partition_type.fields()).enumerate() {
        let value = values.fields()[i].as_ref();
        let human = human_string(&field.transform, &result.field_type, value).map_err(|e| {
            Error::InvalidArgument(format!(
                "partition field {} ({}): {e}",
                field.name, field.transform
            ))
        })?;
        if i > 0 {
            path.push('/');
        }
        path.push_str(&url_encode(&field.name));
        path.push('=');
        path.push_str(&url_encode(&human));
    }
    Ok(path)
}

/// One partition value as Iceberg Java's `Transform.toHumanString(resultType, value)` renders it.
///
/// `result_type` is the partition field's result type (`Transform::result_type` of the source
/// type): `int` for year, month, hour and bucket, `date` for day, the source type otherwise.
///
/// - null → `null` (any transform; void always gives `null`);
/// - year / month / day / hour ordinals → `2024`, `2024-03`, `2024-03-05`, `2024-03-05-10`;
/// - date → `2024-03-05`; time → `LocalTime.toString()` (`10:15`, `10:15:30`, `10:15:30.500`);
/// - timestamp → `ISO_LOCAL_DATE_TIME` (`2024-03-05T10:15:30`, `...T10:15:30.5`), timestamptz the
///   same plus `+00:00`; the `_ns` variants alike with up to nine fraction digits;
/// - binary / fixed → Base64 (standard alphabet, padded);
/// - float / double → Java `Float.toString` / `Double.toString` (`1.0`, `1.0E7`, `1.0E-4`, `NaN`,
///   `-0.0`, `Infinity`);
/// - decimal → `BigDecimal.toString()` (`1E-7` when the adjusted exponent is below -6);
/// - uuid → lowercase hyphenated; boolean → `true` / `false`; int, long, string → as is.
pub fn human_string(
    transform: &Transform,
    result_type: &Type,
    value: Option<&Literal>,
) -> Result<String> {
    let Some(value) = value else {
        return Ok("null".to_string());
    };
    let Literal::Primitive(value) = value else {
        return Err(Error::InvalidArgument(format!(
            "partition value {value:?} is not a primitive value"
        )));
    };
    let mismatch = || {
        Error::InvalidArgument(format!(
            "partition value {value:?} does not fit transform {transform} with result type {result_type}"
        ))
    };
    match transform {
        Transform::Void => return Ok("null".to_string()),
        Transform::Unknown => {
            return Err(Error::InvalidArgument(
                "cannot render a value of an unknown partition transform".to_string(),
            ));
        }
        Transform::Year | Transform::Month | Transform::Day | Transform::Hour => {
            let ordinal = match value {
                PrimitiveLiteral::Int(v) => *v,
                _ => return Err(mismatch()),
            };
            return Ok(match transform {
                Transform::Year => human_year(ordinal),
                Transform::Month => human_month(ordinal),
                Transform::Day => human_day(i64::from(ordinal)),
                _ => human_hour(ordinal),
            });
        }
        Transform::Identity | Transform::Bucket(_) | Transform::Truncate(_) => {}
    }
    let Type::Primitive(result_type) = result_type else {
        return Err(mismatch());
    };
    Ok(match (result_type, value) {
        (PrimitiveType::Boolean, PrimitiveLiteral::Boolean(b)) => b.to_string(),
        (PrimitiveType::Int, PrimitiveLiteral::Int(v)) => v.to_string(),
        (PrimitiveType::Long, PrimitiveLiteral::Long(v)) => v.to_string(),
        (PrimitiveType::Float, PrimitiveLiteral::Float(v)) => java_float(v.0),
        (PrimitiveType::Double, PrimitiveLiteral::Double(v)) => java_double(v.0),
        (PrimitiveType::Decimal { scale, .. }, PrimitiveLiteral::Int128(v)) => {
            java_big_decimal(*v, *scale)
        }
        (PrimitiveType::Date, PrimitiveLiteral::Int(v)) => human_day(i64::from(*v)),
        (PrimitiveType::Time, PrimitiveLiteral::Long(v)) => human_time(*v).ok_or_else(mismatch)?,
        (PrimitiveType::Timestamp, PrimitiveLiteral::Long(v)) => iso_timestamp(*v, 1_000, false),
        (PrimitiveType::Timestamptz, PrimitiveLiteral::Long(v)) => iso_timestamp(*v, 1_000, true),
        (PrimitiveType::TimestampNs, PrimitiveLiteral::Long(v)) => iso_timestamp(*v, 1, false),
        (PrimitiveType::TimestamptzNs, PrimitiveLiteral::Long(v)) => iso_timestamp(*v, 1, true),
        (PrimitiveType::String, PrimitiveLiteral::String(s)) => s.clone(),
        (PrimitiveType::Uuid, PrimitiveLiteral::UInt128(v)) => {
            uuid::Uuid::from_u128(*v).hyphenated().to_string()
        }
        (PrimitiveType::Fixed(_) | PrimitiveType::Binary, PrimitiveLiteral::Binary(b)) => base64(b),
        _ => return Err(mismatch()),
    })
}

/// `java.net.URLEncoder.encode(s, UTF_8)`: `A-Z a-z 0-9 . - * _` are kept, space becomes `+`,
/// every other byte of the UTF-8 encoding becomes `%XX` (uppercase hex).
pub fn url_encode(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(char::from(b))
            }
            b' ' => out.push('+'),
            _ => {
                out.push('%');
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0x0F)]));
            }
        }
    }
    out
}

// ------------------------------------------------------------------------------------ dates

/// Days since 1970-01-01 → proleptic Gregorian (year, month, day), for every `i64` day count
/// the callers produce (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let day = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both are in range by construction.
    (year, month as u32, day as u32)
}

/// `TransformUtil.humanYear`: `String.format("%04d", 1970 + ordinal)` (Java `int` arithmetic).
fn human_year(ordinal: i32) -> String {
    format!("{:04}", 1970i32.wrapping_add(ordinal))
}

/// `TransformUtil.humanMonth`: `"%04d-%02d"` of `1970 + floorDiv(o, 12)`, `1 + floorMod(o, 12)`.
fn human_month(ordinal: i32) -> String {
    format!(
        "{:04}-{:02}",
        1970 + ordinal.div_euclid(12),
        1 + ordinal.rem_euclid(12)
    )
}

/// `TransformUtil.humanDay`: `"%04d-%02d-%02d"` of the epoch plus `days`.
fn human_day(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `TransformUtil.humanHour`: `"%04d-%02d-%02d-%02d"` of the epoch plus `hours`.
fn human_hour(hours: i32) -> String {
    let (y, m, d) = civil_from_days(i64::from(hours.div_euclid(24)));
    format!("{y:04}-{m:02}-{d:02}-{:02}", hours.rem_euclid(24))
}

/// `LocalTime.ofNanoOfDay(micros * 1000).toString()`: `HH:mm`, then `:ss` if seconds or the
/// fraction are non-zero, then the fraction in groups of three digits (3, 6 or 9). `None` for a
/// value outside a day (Java throws).
fn human_time(micros: i64) -> Option<String> {
    if !(0..86_400_000_000).contains(&micros) {
        return None;
    }
    let nanos = micros * 1_000;
    let secs = micros / 1_000_000;
    let (h, m, s) = (secs / 3_600, secs / 60 % 60, secs % 60);
    let nano = nanos % 1_000_000_000;
    let mut out = format!("{h:02}:{m:02}");
    if s > 0 || nano > 0 {
        out.push_str(&format!(":{s:02}"));
        if nano > 0 {
            if nano % 1_000_000 == 0 {
                out.push_str(&format!(".{:03}", nano / 1_000_000));
            } else if nano % 1_000 == 0 {
                out.push_str(&format!(".{:06}", nano / 1_000));
            } else {
                out.push_str(&format!(".{nano:09}"));
            }
        }
    }
    Some(out)
}

/// `ISO_LOCAL_DATE_TIME` of the UTC timestamp `value` (in units of `nanos_per_unit` nanoseconds:
/// 1000 for µs, 1 for ns), with `+00:00` appended when `with_zone`
/// (`DateTimeUtil.microsToIsoTimestamp(tz)`, `nanosToIsoTimestamp(tz)`):
/// `yyyy-MM-ddTHH:mm:ss`, the fraction only when non-zero with trailing zeros removed. Years
/// beyond 9999 get a `+`, negative years a `-` and four digits (`SignStyle.EXCEEDS_PAD`).
fn iso_timestamp(value: i64, nanos_per_unit: i64, with_zone: bool) -> String {
    let units_per_sec = 1_000_000_000 / nanos_per_unit;
    let secs = value.div_euclid(units_per_sec);
    let nano = value.rem_euclid(units_per_sec) * nanos_per_unit;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    let year = if y > 9_999 {
        format!("+{y}")
    } else if y < 0 {
        format!("-{:04}", y.unsigned_abs())
    } else {
        format!("{y:04}")
    };
    let mut out = format!(
        "{year}-{mo:02}-{d:02}T{:02}:{:02}:{:02}",
        sod / 3_600,
        sod / 60 % 60,
        sod % 60
    );
    if nano > 0 {
        let digits = format!("{nano:09}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    if with_zone {
        out.push_str("+00:00");
    }
    out
}

// ------------------------------------------------------------------------------------ numbers

/// `java.math.BigDecimal.toString()` of `unscaled × 10^-scale`: plain when the adjusted exponent
/// (`-scale + digits - 1`) is at least -6, otherwise scientific (`1E-7`, `1.23E-8`, `0E-7`).
fn java_big_decimal(unscaled: i128, scale: u32) -> String {
    let coefficient = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    let scale = i64::from(scale);
    let adjusted = -scale + (coefficient.len() as i64 - 1);
    if scale == 0 {
        return format!("{sign}{coefficient}");
    }
    if adjusted >= -6 {
        let len = coefficient.len() as i64;
        if len > scale {
            let split = (len - scale) as usize;
            format!("{sign}{}.{}", &coefficient[..split], &coefficient[split..])
        } else {
            let zeros = "0".repeat((scale - len) as usize);
            format!("{sign}0.{zeros}{coefficient}")
        }
    } else {
        let (first, rest) = coefficient.split_at(1);
        let rest = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        format!("{sign}{first}{rest}E{adjusted}")
    }
}

/// Java's `Double.toString(x)` (JDK 19+ specification, JDK-4511638): the shortest decimal that
/// rounds to `x` (when that is a single digit, the closest of one or two digits), laid out plainly
/// for `1e-3 <= |x| < 1e7` with at least one fraction digit, otherwise as `d.dddE±n`.
fn java_double(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    let a = x.abs();
    let (digits, exp) = java_digits(
        &format!("{a:e}"),
        &format!("{a:.1e}"),
        &format!("{a:.767e}"),
        |s| s.parse::<f64>().ok() == Some(a),
    );
    java_layout(x < 0.0, &digits, exp)
}

/// Java's `Float.toString(x)`: as [`java_double`], with `float`'s shortest decimal.
fn java_float(x: f32) -> String {
    if x.is_nan() {
        return "NaN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    let a = x.abs();
    let (digits, exp) = java_digits(
        &format!("{a:e}"),
        &format!("{a:.1e}"),
        &format!("{a:.120e}"),
        |s| s.parse::<f32>().ok() == Some(a),
    );
    java_layout(x < 0.0, &digits, exp)
}

/// Splits Rust's `{:e}` output (`1.2345e-7`) into significant digits without trailing zeros
/// (`"12345"`) and the decimal exponent of the first digit (`-7`).
fn split_exp(s: &str) -> (String, i32) {
    let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
    let mut digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    (digits, exp.parse().unwrap_or(0))
}

/// The digits Java selects, from Rust's shortest round-tripping `{:e}` (`shortest`), the closest
/// two-digit decimal `{:.1e}` (`two`) and the exact decimal expansion (`exact`, `{:.767e}`).
///
/// Java (JDK 19+) takes the shortest decimals that round to the value and, of those, the one
/// closest to the exact value, on a tie the one with an even last digit; when the shortest is a
/// single digit, it chooses among the one- and two-digit decimals (`4.9E-324` for
/// `Double.MIN_VALUE`, where the shortest is `5e-324`). Rust's shortest is the closest too, but
/// rounds a tie up (`8.339840063750243e14` where Java prints `8.339840063750242E14`).
fn java_digits(
    shortest: &str,
    two: &str,
    exact: &str,
    round_trips: impl Fn(&str) -> bool,
) -> (String, i32) {
    let (digits, exp) = split_exp(shortest);
    if digits.len() == 1 {
        let (d2, e2) = split_exp(two);
        if d2.len() == 2 && round_trips(two) {
            return (d2, e2);
        }
        return (digits, exp);
    }
    // A tie: the exact value ends in a single 5 just below the last digit of the shortest.
    let (x, x_exp) = split_exp(exact);
    let grid = exp - digits.len() as i32 + 1; // the power of ten of the shortest's last digit
    let x_last = x_exp - x.len() as i32 + 1;
    if x_last != grid - 1 || !x.ends_with('5') || x.len() < 2 {
        return (digits, exp);
    }
    let lower = x[..x.len() - 1].to_string();
    let (upper, upper_exp) = increment(&lower, x_exp);
    let lower_even = lower
        .bytes()
        .last()
        .is_some_and(|d| (d - b'0').is_multiple_of(2));
    let (first, second) = if lower_even {
        ((lower, x_exp), (upper, upper_exp))
    } else {
        ((upper, upper_exp), (lower, x_exp))
    };
    for (candidate, candidate_exp) in [first, second] {
        let text = format!("{}.{}e{candidate_exp}", &candidate[..1], &candidate[1..]);
        if round_trips(&text) {
            return split_exp(&text);
        }
    }
    (digits, exp)
}

/// `digits × 10^(exp - len + 1)` plus one unit in its last digit, as digits and the exponent of
/// the first digit (`"99"`, 3 → `"100"`, 4).
fn increment(digits: &str, exp: i32) -> (String, i32) {
    let mut bytes = digits.as_bytes().to_vec();
    for b in bytes.iter_mut().rev() {
        if *b == b'9' {
            *b = b'0';
        } else {
            *b += 1;
            return (String::from_utf8_lossy(&bytes).into_owned(), exp);
        }
    }
    bytes.insert(0, b'1');
    bytes.pop(); // keep the length: the last digit is a 0 on the coarser grid
    (String::from_utf8_lossy(&bytes).into_owned(), exp + 1)
}

/// Java's layout of `0.d1d2...dn × 10^(exp+1)`: plain for `-3 <= exp < 7` (`123.456`, `1.0`,
/// `0.001`), otherwise `d1.d2...dnEexp` with at least one fraction digit (`1.0E7`, `1.0E-4`).
fn java_layout(negative: bool, digits: &str, exp: i32) -> String {
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if (-3..7).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(digits);
                out.push_str(&"0".repeat(int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.push_str(&"0".repeat((-exp - 1) as usize));
            out.push_str(digits);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        out.push('.');
        out.push_str(if rest.is_empty() { "0" } else { rest });
        out.push('E');
        out.push_str(&exp.to_string());
    }
    out
}

// ------------------------------------------------------------------------------------ base64

/// `java.util.Base64.getEncoder()`: standard alphabet, `=` padding, no line breaks. Iceberg
/// shows binary values this way (partition paths, metadata tables' bounds).
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 0x3F) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{NestedField, PrimitiveType as P};

    use super::*;

    fn schema(fields: Vec<(&str, P)>) -> Schema {
        let fields = fields.into_iter().enumerate().map(|(i, (name, ty))| {
            Arc::new(NestedField::optional(
                i as i32 + 1,
                name,
                Type::Primitive(ty),
            ))
        });
        Schema::builder().with_fields(fields).build().unwrap()
    }

    fn spec(schema: &Schema, fields: Vec<(&str, &str, Transform)>) -> PartitionSpec {
        let mut builder = PartitionSpec::builder(schema.clone());
        for (source, name, transform) in fields {
            builder = builder
                .add_partition_field(source, name, transform)
                .unwrap();
        }
        builder.build().unwrap()
    }

    fn path(schema: &Schema, spec: &PartitionSpec, values: Vec<Option<Literal>>) -> String {
        partition_path(spec, schema, &Struct::from_iter(values)).unwrap()
    }

    /// Spark's partition field name for `transform` on column `col` (`PartitionSpec.Builder`).
    fn spark_name(col: &str, transform: Transform) -> String {
        match transform {
            Transform::Identity => col.to_string(),
            Transform::Year => format!("{col}_year"),
            Transform::Month => format!("{col}_month"),
            Transform::Day => format!("{col}_day"),
            Transform::Hour => format!("{col}_hour"),
            Transform::Bucket(_) => format!("{col}_bucket"),
            Transform::Truncate(_) => format!("{col}_trunc"),
            Transform::Void => format!("{col}_null"),
            Transform::Unknown => unreachable!(),
        }
    }

    /// Every directory Spark 3.5 + Iceberg 1.10 wrote for `enc_v2`
    /// (`target/petrel-test-data/spark-tables/moved/warehouse/db/enc_v2/data/`,
    /// `PARTITIONED BY (country, truncate(4, code))`), from its partition values.
    #[test]
    fn spark_enc_v2_directories() {
        let schema = schema(vec![
            ("id", P::Long),
            ("country", P::String),
            ("code", P::String),
            ("v", P::Int),
        ]);
        let spec = spec(
            &schema,
            vec![
                ("country", "country", Transform::Identity),
                ("code", "code_trunc", Transform::Truncate(4)),
            ],
        );
        let cases: &[(Option<&str>, &str, &str)] = &[
            (Some(""), "éa%b", "country=/code_trunc=%C3%A9a%25b"),
            (
                Some(""),
                "日本語x",
                "country=/code_trunc=%E6%97%A5%E6%9C%AC%E8%AA%9Ex",
            ),
            (Some("%41"), "c/d=", "country=%2541/code_trunc=c%2Fd%3D"),
            (Some("%41"), "e#f?", "country=%2541/code_trunc=e%23f%3F"),
            (Some("é"), "c/d=", "country=%C3%A9/code_trunc=c%2Fd%3D"),
            (Some("é"), "e#f?", "country=%C3%A9/code_trunc=e%23f%3F"),
            (
                Some("日本"),
                "a b+",
                "country=%E6%97%A5%E6%9C%AC/code_trunc=a+b%2B",
            ),
            (
                Some("日本"),
                "c/d=",
                "country=%E6%97%A5%E6%9C%AC/code_trunc=c%2Fd%3D",
            ),
            (
                Some("50% off"),
                "a b+",
                "country=50%25+off/code_trunc=a+b%2B",
            ),
            (
                Some("50% off"),
                "c/d=",
                "country=50%25+off/code_trunc=c%2Fd%3D",
            ),
            (
                Some("A"),
                "日本語x",
                "country=A/code_trunc=%E6%97%A5%E6%9C%AC%E8%AA%9Ex",
            ),
            (Some("A"), "e#f?", "country=A/code_trunc=e%23f%3F"),
            (
                Some("a/b=c d%"),
                "%2Fx",
                "country=a%2Fb%3Dc+d%25/code_trunc=%252Fx",
            ),
            (
                Some("a/b=c d%"),
                "a b+",
                "country=a%2Fb%3Dc+d%25/code_trunc=a+b%2B",
            ),
            (Some("h#1"), "%2Fx", "country=h%231/code_trunc=%252Fx"),
            (Some("h#1"), "100%", "country=h%231/code_trunc=100%25"),
            (Some("k=v"), "100%", "country=k%3Dv/code_trunc=100%25"),
            (Some("k=v"), "plai", "country=k%3Dv/code_trunc=plai"),
            (None, "éa%b", "country=null/code_trunc=%C3%A9a%25b"),
            (None, "100%", "country=null/code_trunc=100%25"),
            (None, "plai", "country=null/code_trunc=plai"),
            // The string 'null' and a real NULL share one directory.
            (Some("null"), "plai", "country=null/code_trunc=plai"),
            (
                Some("plain"),
                "日本語x",
                "country=plain/code_trunc=%E6%97%A5%E6%9C%AC%E8%AA%9Ex",
            ),
            (Some("plain"), "e#f?", "country=plain/code_trunc=e%23f%3F"),
            (Some("q?x"), "%2Fx", "country=q%3Fx/code_trunc=%252Fx"),
            (Some("q?x"), "a b+", "country=q%3Fx/code_trunc=a+b%2B"),
            (Some("x+y"), "éa%b", "country=x%2By/code_trunc=%C3%A9a%25b"),
            (
                Some("x+y"),
                "日本語x",
                "country=x%2By/code_trunc=%E6%97%A5%E6%9C%AC%E8%AA%9Ex",
            ),
            (Some("x y"), "éa%b", "country=x+y/code_trunc=%C3%A9a%25b"),
            (Some("x y"), "plai", "country=x+y/code_trunc=plai"),
        ];
        for (country, code, want) in cases {
            let got = path(
                &schema,
                &spec,
                vec![country.map(Literal::string), Some(Literal::string(code))],
            );
            assert_eq!(&got, want, "country {country:?}, code prefix {code:?}");
        }
    }

    /// Directories of the Spark-written corpus (`../shared/fixtures/iceberg-corpus/warehouse/db/*/data/`).
    #[test]
    fn spark_corpus_directories() {
        let schema = schema(vec![
            ("id", P::Long),
            ("ts", P::Timestamp),
            ("cat", P::String),
        ]);
        // v2_mor: PARTITIONED BY (days(ts), bucket(4, id)); day ordinals of 2024-01-01 ... 2024-01-05.
        let day_bucket = spec(
            &schema,
            vec![
                ("ts", "ts_day", Transform::Day),
                ("id", "id_bucket", Transform::Bucket(4)),
            ],
        );
        for (day, date) in [
            (19723, "2024-01-01"),
            (19724, "2024-01-02"),
            (19727, "2024-01-05"),
        ] {
            for bucket in 0..4 {
                assert_eq!(
                    path(
                        &schema,
                        &day_bucket,
                        vec![Some(Literal::date(day)), Some(Literal::int(bucket))]
                    ),
                    format!("ts_day={date}/id_bucket={bucket}")
                );
            }
        }
        // v2_evolved: bucket(4, id), then days(ts) (2024-03-01 ... 2024-04-03).
        let bucket = spec(&schema, vec![("id", "id_bucket", Transform::Bucket(4))]);
        assert_eq!(
            path(&schema, &bucket, vec![Some(Literal::int(3))]),
            "id_bucket=3"
        );
        let day = spec(&schema, vec![("ts", "ts_day", Transform::Day)]);
        assert_eq!(
            path(&schema, &day, vec![Some(Literal::date(19783))]),
            "ts_day=2024-03-01"
        );
        assert_eq!(
            path(&schema, &day, vec![Some(Literal::date(19816))]),
            "ts_day=2024-04-03"
        );
        // v2_eq_java / eq_sidequery_part: PARTITIONED BY (cat).
        let cat = spec(&schema, vec![("cat", "cat", Transform::Identity)]);
        assert_eq!(
            path(&schema, &cat, vec![Some(Literal::string("even"))]),
            "cat=even"
        );
        assert_eq!(
            path(&schema, &cat, vec![Some(Literal::string("odd"))]),
            "cat=odd"
        );
    }

    /// One-field specs, each path produced by Iceberg 1.10.2's `PartitionSpec.partitionToPath`
    /// (iceberg-spark-runtime-3.5_2.12-1.10.2.jar on Temurin 25; identical on OpenJDK 17 except
    /// for the floats listed in `jdk17_double_divergences`).
    #[test]
    fn java_partition_to_path() {
        let cases: Vec<(&str, P, Transform, Option<Literal>, &str)> = vec![
            (
                "ts",
                P::Timestamp,
                Transform::Year,
                Some(Literal::int(0)),
                "ts_year=1970",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Year,
                Some(Literal::int(54)),
                "ts_year=2024",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Year,
                Some(Literal::int(-1)),
                "ts_year=1969",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Year,
                Some(Literal::int(-1970)),
                "ts_year=0000",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Year,
                Some(Literal::int(8029)),
                "ts_year=9999",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Year,
                Some(Literal::int(30000)),
                "ts_year=31970",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Month,
                Some(Literal::int(0)),
                "ts_month=1970-01",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Month,
                Some(Literal::int(650)),
                "ts_month=2024-03",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Month,
                Some(Literal::int(11)),
                "ts_month=1970-12",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Month,
                Some(Literal::int(12)),
                "ts_month=1971-01",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Month,
                Some(Literal::int(-1)),
                "ts_month=1969-12",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Month,
                Some(Literal::int(-12)),
                "ts_month=1969-01",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Month,
                Some(Literal::int(-13)),
                "ts_month=1968-12",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Month,
                Some(Literal::int(97199)),
                "ts_month=10069-12",
            ),
            (
                "d",
                P::Date,
                Transform::Day,
                Some(Literal::date(0)),
                "d_day=1970-01-01",
            ),
            (
                "d",
                P::Date,
                Transform::Day,
                Some(Literal::date(19723)),
                "d_day=2024-01-01",
            ),
            (
                "d",
                P::Date,
                Transform::Day,
                Some(Literal::date(19787)),
                "d_day=2024-03-05",
            ),
            (
                "d",
                P::Date,
                Transform::Day,
                Some(Literal::date(-1)),
                "d_day=1969-12-31",
            ),
            (
                "d",
                P::Date,
                Transform::Day,
                Some(Literal::date(-719528)),
                "d_day=0000-01-01",
            ),
            (
                "d",
                P::Date,
                Transform::Day,
                Some(Literal::date(-719529)),
                "d_day=-001-12-31",
            ),
            (
                "d",
                P::Date,
                Transform::Day,
                Some(Literal::date(2932896)),
                "d_day=9999-12-31",
            ),
            (
                "d",
                P::Date,
                Transform::Day,
                Some(Literal::date(2932897)),
                "d_day=10000-01-01",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Hour,
                Some(Literal::int(0)),
                "ts_hour=1970-01-01-00",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Hour,
                Some(Literal::int(473362)),
                "ts_hour=2024-01-01-10",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Hour,
                Some(Literal::int(473372)),
                "ts_hour=2024-01-01-20",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Hour,
                Some(Literal::int(-1)),
                "ts_hour=1969-12-31-23",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Hour,
                Some(Literal::int(-25)),
                "ts_hour=1969-12-30-23",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Hour,
                Some(Literal::int(23)),
                "ts_hour=1970-01-01-23",
            ),
            (
                "d",
                P::Date,
                Transform::Identity,
                Some(Literal::date(0)),
                "d=1970-01-01",
            ),
            (
                "d",
                P::Date,
                Transform::Identity,
                Some(Literal::date(19787)),
                "d=2024-03-05",
            ),
            (
                "d",
                P::Date,
                Transform::Identity,
                Some(Literal::date(-1)),
                "d=1969-12-31",
            ),
            (
                "d",
                P::Date,
                Transform::Identity,
                Some(Literal::date(-719528)),
                "d=0000-01-01",
            ),
            (
                "d",
                P::Date,
                Transform::Identity,
                Some(Literal::date(2932896)),
                "d=9999-12-31",
            ),
            (
                "d",
                P::Date,
                Transform::Identity,
                Some(Literal::date(2932897)),
                "d=10000-01-01",
            ),
            (
                "t",
                P::Time,
                Transform::Identity,
                Some(Literal::time(0)),
                "t=00%3A00",
            ),
            (
                "t",
                P::Time,
                Transform::Identity,
                Some(Literal::time(36900000000)),
                "t=10%3A15",
            ),
            (
                "t",
                P::Time,
                Transform::Identity,
                Some(Literal::time(36930000000)),
                "t=10%3A15%3A30",
            ),
            (
                "t",
                P::Time,
                Transform::Identity,
                Some(Literal::time(36930500000)),
                "t=10%3A15%3A30.500",
            ),
            (
                "t",
                P::Time,
                Transform::Identity,
                Some(Literal::time(36930123000)),
                "t=10%3A15%3A30.123",
            ),
            (
                "t",
                P::Time,
                Transform::Identity,
                Some(Literal::time(36930123456)),
                "t=10%3A15%3A30.123456",
            ),
            (
                "t",
                P::Time,
                Transform::Identity,
                Some(Literal::time(36930000001)),
                "t=10%3A15%3A30.000001",
            ),
            (
                "t",
                P::Time,
                Transform::Identity,
                Some(Literal::time(86399999999)),
                "t=23%3A59%3A59.999999",
            ),
            (
                "t",
                P::Time,
                Transform::Identity,
                Some(Literal::time(1000)),
                "t=00%3A00%3A00.001",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Identity,
                Some(Literal::timestamp(0)),
                "ts=1970-01-01T00%3A00%3A00",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Identity,
                Some(Literal::timestamptz(0)),
                "ts=1970-01-01T00%3A00%3A00%2B00%3A00",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Identity,
                Some(Literal::timestamp(1709633730000000)),
                "ts=2024-03-05T10%3A15%3A30",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Identity,
                Some(Literal::timestamptz(1709633730000000)),
                "ts=2024-03-05T10%3A15%3A30%2B00%3A00",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Identity,
                Some(Literal::timestamp(1709633730500000)),
                "ts=2024-03-05T10%3A15%3A30.5",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Identity,
                Some(Literal::timestamptz(1709633730500000)),
                "ts=2024-03-05T10%3A15%3A30.5%2B00%3A00",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Identity,
                Some(Literal::timestamp(1709633730123456)),
                "ts=2024-03-05T10%3A15%3A30.123456",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Identity,
                Some(Literal::timestamptz(1709633730123456)),
                "ts=2024-03-05T10%3A15%3A30.123456%2B00%3A00",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Identity,
                Some(Literal::timestamp(1709633730100000)),
                "ts=2024-03-05T10%3A15%3A30.1",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Identity,
                Some(Literal::timestamptz(1709633730100000)),
                "ts=2024-03-05T10%3A15%3A30.1%2B00%3A00",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Identity,
                Some(Literal::timestamp(1709632800000000)),
                "ts=2024-03-05T10%3A00%3A00",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Identity,
                Some(Literal::timestamptz(1709632800000000)),
                "ts=2024-03-05T10%3A00%3A00%2B00%3A00",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Identity,
                Some(Literal::timestamp(-1)),
                "ts=1969-12-31T23%3A59%3A59.999999",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Identity,
                Some(Literal::timestamptz(-1)),
                "ts=1969-12-31T23%3A59%3A59.999999%2B00%3A00",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Identity,
                Some(Literal::timestamp(-62135596800000000)),
                "ts=0001-01-01T00%3A00%3A00",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Identity,
                Some(Literal::timestamptz(-62135596800000000)),
                "ts=0001-01-01T00%3A00%3A00%2B00%3A00",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Identity,
                Some(Literal::timestamp(-62167219200000001)),
                "ts=-0001-12-31T23%3A59%3A59.999999",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Identity,
                Some(Literal::timestamptz(-62167219200000001)),
                "ts=-0001-12-31T23%3A59%3A59.999999%2B00%3A00",
            ),
            (
                "ts",
                P::Timestamp,
                Transform::Identity,
                Some(Literal::timestamp(253402300800000000)),
                "ts=%2B10000-01-01T00%3A00%3A00",
            ),
            (
                "ts",
                P::Timestamptz,
                Transform::Identity,
                Some(Literal::timestamptz(253402300800000000)),
                "ts=%2B10000-01-01T00%3A00%3A00%2B00%3A00",
            ),
            (
                "ts",
                P::TimestampNs,
                Transform::Identity,
                Some(Literal::long(0i64)),
                "ts=1970-01-01T00%3A00%3A00",
            ),
            (
                "ts",
                P::TimestamptzNs,
                Transform::Identity,
                Some(Literal::long(0i64)),
                "ts=1970-01-01T00%3A00%3A00%2B00%3A00",
            ),
            (
                "ts",
                P::TimestampNs,
                Transform::Identity,
                Some(Literal::long(1709633730123456789i64)),
                "ts=2024-03-05T10%3A15%3A30.123456789",
            ),
            (
                "ts",
                P::TimestamptzNs,
                Transform::Identity,
                Some(Literal::long(1709633730123456789i64)),
                "ts=2024-03-05T10%3A15%3A30.123456789%2B00%3A00",
            ),
            (
                "ts",
                P::TimestampNs,
                Transform::Identity,
                Some(Literal::long(1709633730000000001i64)),
                "ts=2024-03-05T10%3A15%3A30.000000001",
            ),
            (
                "ts",
                P::TimestamptzNs,
                Transform::Identity,
                Some(Literal::long(1709633730000000001i64)),
                "ts=2024-03-05T10%3A15%3A30.000000001%2B00%3A00",
            ),
            (
                "ts",
                P::TimestampNs,
                Transform::Identity,
                Some(Literal::long(1709633730120000000i64)),
                "ts=2024-03-05T10%3A15%3A30.12",
            ),
            (
                "ts",
                P::TimestamptzNs,
                Transform::Identity,
                Some(Literal::long(1709633730120000000i64)),
                "ts=2024-03-05T10%3A15%3A30.12%2B00%3A00",
            ),
            (
                "ts",
                P::TimestampNs,
                Transform::Identity,
                Some(Literal::long(-1i64)),
                "ts=1969-12-31T23%3A59%3A59.999999999",
            ),
            (
                "ts",
                P::TimestamptzNs,
                Transform::Identity,
                Some(Literal::long(-1i64)),
                "ts=1969-12-31T23%3A59%3A59.999999999%2B00%3A00",
            ),
            (
                "b",
                P::Binary,
                Transform::Identity,
                Some(Literal::binary(vec![])),
                "b=",
            ),
            (
                "b",
                P::Binary,
                Transform::Identity,
                Some(Literal::binary(vec![0u8])),
                "b=AA%3D%3D",
            ),
            (
                "f",
                P::Fixed(1),
                Transform::Identity,
                Some(Literal::fixed(vec![0u8])),
                "f=AA%3D%3D",
            ),
            (
                "b",
                P::Binary,
                Transform::Identity,
                Some(Literal::binary(vec![0u8, 1u8])),
                "b=AAE%3D",
            ),
            (
                "f",
                P::Fixed(2),
                Transform::Identity,
                Some(Literal::fixed(vec![0u8, 1u8])),
                "f=AAE%3D",
            ),
            (
                "b",
                P::Binary,
                Transform::Identity,
                Some(Literal::binary(vec![0u8, 1u8, 2u8])),
                "b=AAEC",
            ),
            (
                "f",
                P::Fixed(3),
                Transform::Identity,
                Some(Literal::fixed(vec![0u8, 1u8, 2u8])),
                "f=AAEC",
            ),
            (
                "b",
                P::Binary,
                Transform::Identity,
                Some(Literal::binary(vec![255u8, 254u8, 253u8, 252u8])),
                "b=%2F%2F79%2FA%3D%3D",
            ),
            (
                "f",
                P::Fixed(4),
                Transform::Identity,
                Some(Literal::fixed(vec![255u8, 254u8, 253u8, 252u8])),
                "f=%2F%2F79%2FA%3D%3D",
            ),
            (
                "b",
                P::Binary,
                Transform::Identity,
                Some(Literal::binary(vec![251u8, 255u8])),
                "b=%2B%2F8%3D",
            ),
            (
                "f",
                P::Fixed(2),
                Transform::Identity,
                Some(Literal::fixed(vec![251u8, 255u8])),
                "f=%2B%2F8%3D",
            ),
            (
                "b",
                P::Binary,
                Transform::Identity,
                Some(Literal::binary(vec![104u8, 105u8, 63u8, 62u8])),
                "b=aGk%2FPg%3D%3D",
            ),
            (
                "f",
                P::Fixed(4),
                Transform::Identity,
                Some(Literal::fixed(vec![104u8, 105u8, 63u8, 62u8])),
                "f=aGk%2FPg%3D%3D",
            ),
            (
                "b",
                P::Binary,
                Transform::Truncate(2),
                Some(Literal::binary(vec![0xfbu8, 0xff])),
                "b_trunc=%2B%2F8%3D",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 9,
                    scale: 2,
                },
                Transform::Identity,
                Some(Literal::decimal(0)),
                "dec=0.00",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 9,
                    scale: 2,
                },
                Transform::Identity,
                Some(Literal::decimal(12345)),
                "dec=123.45",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 9,
                    scale: 2,
                },
                Transform::Identity,
                Some(Literal::decimal(-12345)),
                "dec=-123.45",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 10,
                    scale: 7,
                },
                Transform::Identity,
                Some(Literal::decimal(1)),
                "dec=1E-7",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 10,
                    scale: 8,
                },
                Transform::Identity,
                Some(Literal::decimal(123)),
                "dec=0.00000123",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 10,
                    scale: 7,
                },
                Transform::Identity,
                Some(Literal::decimal(0)),
                "dec=0E-7",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 10,
                    scale: 6,
                },
                Transform::Identity,
                Some(Literal::decimal(1)),
                "dec=0.000001",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 10,
                    scale: 7,
                },
                Transform::Identity,
                Some(Literal::decimal(-1)),
                "dec=-1E-7",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 10,
                    scale: 0,
                },
                Transform::Identity,
                Some(Literal::decimal(5)),
                "dec=5",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 38,
                    scale: 38,
                },
                Transform::Identity,
                Some(Literal::decimal(99999999999999999999999999999999999999)),
                "dec=0.99999999999999999999999999999999999999",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 38,
                    scale: 0,
                },
                Transform::Identity,
                Some(Literal::decimal(-99999999999999999999999999999999999999)),
                "dec=-99999999999999999999999999999999999999",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 5,
                    scale: 2,
                },
                Transform::Identity,
                Some(Literal::decimal(100)),
                "dec=1.00",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 5,
                    scale: 3,
                },
                Transform::Identity,
                Some(Literal::decimal(1)),
                "dec=0.001",
            ),
            (
                "dec",
                P::Decimal {
                    precision: 9,
                    scale: 2,
                },
                Transform::Truncate(50),
                Some(Literal::decimal(12300)),
                "dec_trunc=123.00",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x0))),
                "x=0.0",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(-0.0f64)),
                "x=-0.0",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x3ff0000000000000))),
                "x=1.0",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0xbff0000000000000))),
                "x=-1.0",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x405edd2f1a9fbe77))),
                "x=123.456",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x416312d000000000))),
                "x=1.0E7",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x416312cfe0000000))),
                "x=9999999.0",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x3f50624dd2f1a9fc))),
                "x=0.001",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x3f1a36e2eb1c432d))),
                "x=1.0E-4",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x3fb999999999999a))),
                "x=0.1",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x444b1ae4d6e2ef50))),
                "x=1.0E21",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x44b52d02c7e14af6))),
                "x=1.0E23",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x44c52d02c7e14af6))),
                "x=2.0E23",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x1))),
                "x=4.9E-324",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x2))),
                "x=9.9E-324",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x7fefffffffffffff))),
                "x=1.7976931348623157E308",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x10000000000000))),
                "x=2.2250738585072014E-308",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::NAN)),
                "x=NaN",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::INFINITY)),
                "x=Infinity",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::NEG_INFINITY)),
                "x=-Infinity",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x3fd5555555555555))),
                "x=0.3333333333333333",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x4059000000000000))),
                "x=100.0",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x41678c29dccccccd))),
                "x=1.23456789E7",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x3f5426fe718a86d7))),
                "x=0.00123",
            ),
            (
                "x",
                P::Double,
                Transform::Identity,
                Some(Literal::double(f64::from_bits(0x3df49da7e361ce4c))),
                "x=3.0E-10",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x0))),
                "x=0.0",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(-0.0f32)),
                "x=-0.0",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x3f800000))),
                "x=1.0",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x3dcccccd))),
                "x=0.1",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x42f6e979))),
                "x=123.456",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x4b189680))),
                "x=1.0E7",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x3a83126f))),
                "x=0.001",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x38d1b717))),
                "x=1.0E-4",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x7f7fffff))),
                "x=3.4028235E38",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x1))),
                "x=1.4E-45",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x800000))),
                "x=1.1754944E-38",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x3eaaaaab))),
                "x=0.33333334",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::from_bits(0x4b800000))),
                "x=1.6777216E7",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::NAN)),
                "x=NaN",
            ),
            (
                "x",
                P::Float,
                Transform::Identity,
                Some(Literal::float(f32::NEG_INFINITY)),
                "x=-Infinity",
            ),
            (
                "u",
                P::Uuid,
                Transform::Identity,
                Some(Literal::uuid(uuid::Uuid::from_u128(
                    0xf79c3e09677c4bbda4793f349cb785e7,
                ))),
                "u=f79c3e09-677c-4bbd-a479-3f349cb785e7",
            ),
            (
                "u",
                P::Uuid,
                Transform::Bucket(16),
                Some(Literal::int(3)),
                "u_bucket=3",
            ),
            (
                "flag",
                P::Boolean,
                Transform::Identity,
                Some(Literal::bool(true)),
                "flag=true",
            ),
            (
                "flag",
                P::Boolean,
                Transform::Identity,
                Some(Literal::bool(false)),
                "flag=false",
            ),
            (
                "i",
                P::Int,
                Transform::Identity,
                Some(Literal::int(-42)),
                "i=-42",
            ),
            (
                "i",
                P::Int,
                Transform::Truncate(10),
                Some(Literal::int(-50)),
                "i_trunc=-50",
            ),
            (
                "l",
                P::Long,
                Transform::Identity,
                Some(Literal::long(i64::MIN)),
                "l=-9223372036854775808",
            ),
            (
                "l",
                P::Long,
                Transform::Bucket(4),
                Some(Literal::int(0)),
                "l_bucket=0",
            ),
            ("l", P::Long, Transform::Identity, None, "l=null"),
            ("l", P::Long, Transform::Void, None, "l_null=null"),
            ("ts", P::Timestamptz, Transform::Day, None, "ts_day=null"),
            (
                "s",
                P::String,
                Transform::Identity,
                Some(Literal::string("~!@#$^&()[]{}|\\;:'\",<>`")),
                "s=%7E%21%40%23%24%5E%26%28%29%5B%5D%7B%7D%7C%5C%3B%3A%27%22%2C%3C%3E%60",
            ),
            (
                "s",
                P::String,
                Transform::Identity,
                Some(Literal::string("*.-_ \t\n")),
                "s=*.-_+%09%0A",
            ),
            (
                "s",
                P::String,
                Transform::Identity,
                Some(Literal::string("😀€")),
                "s=%F0%9F%98%80%E2%82%AC",
            ),
            (
                "a b/c=d",
                P::String,
                Transform::Identity,
                Some(Literal::string("v")),
                "a+b%2Fc%3Dd=v",
            ),
            (
                "été",
                P::String,
                Transform::Truncate(3),
                Some(Literal::string("été")),
                "%C3%A9t%C3%A9_trunc=%C3%A9t%C3%A9",
            ),
        ];
        for (col, ty, transform, value, want) in cases {
            let schema = schema(vec![(col, ty.clone())]);
            let spec = spec(&schema, vec![(col, &spark_name(col, transform), transform)]);
            let got = path(&schema, &spec, vec![value.clone()]);
            assert_eq!(got, want, "{ty} {transform} {value:?}");
        }
    }

    #[test]
    fn unpartitioned_is_empty() {
        let schema = schema(vec![("id", P::Long)]);
        let spec = PartitionSpec::unpartition_spec();
        assert_eq!(path(&schema, &spec, vec![]), "");
    }

    #[test]
    fn three_fields_joined_with_slashes() {
        let schema = schema(vec![
            ("id", P::Long),
            ("ts", P::Timestamptz),
            ("s", P::String),
        ]);
        let spec = spec(
            &schema,
            vec![
                ("ts", "ts_hour", Transform::Hour),
                ("s", "s", Transform::Identity),
                ("id", "id_bucket", Transform::Bucket(16)),
            ],
        );
        assert_eq!(
            path(
                &schema,
                &spec,
                vec![
                    Some(Literal::int(473362)),
                    Some(Literal::string("a/b")),
                    None
                ]
            ),
            "ts_hour=2024-01-01-10/s=a%2Fb/id_bucket=null"
        );
    }

    #[test]
    fn wrong_arity_and_wrong_types_are_errors() {
        let schema = schema(vec![("id", P::Long), ("t", P::Time)]);
        let spec1 = spec(&schema, vec![("id", "id", Transform::Identity)]);
        let err = partition_path(&spec1, &schema, &Struct::from_iter(vec![])).unwrap_err();
        assert!(err.to_string().contains("0 values"), "{err}");
        let err = partition_path(
            &spec1,
            &schema,
            &Struct::from_iter(vec![Some(Literal::int(1))]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("partition field id"), "{err}");
        let year = spec(&schema, vec![("t", "t", Transform::Identity)]);
        // A time of day outside [00:00, 24:00) (Java's LocalTime throws).
        for micros in [-1, 86_400_000_000] {
            assert!(
                partition_path(
                    &year,
                    &schema,
                    &Struct::from_iter(vec![Some(Literal::time(micros))])
                )
                .is_err()
            );
        }
        let long = Type::Primitive(P::Long);
        assert!(
            human_string(
                &Transform::Year,
                &Type::Primitive(P::Int),
                Some(&Literal::long(1i64))
            )
            .is_err()
        );
        assert!(human_string(&Transform::Unknown, &long, Some(&Literal::long(1i64))).is_err());
        assert!(
            human_string(
                &Transform::Identity,
                &long,
                Some(&Literal::Struct(Struct::empty()))
            )
            .is_err()
        );
        // Null is "null" whatever the transform; void is always "null".
        assert_eq!(
            human_string(&Transform::Unknown, &long, None).unwrap(),
            "null"
        );
        assert_eq!(
            human_string(&Transform::Void, &long, Some(&Literal::long(7i64))).unwrap(),
            "null"
        );
    }

    #[test]
    fn url_encode_matches_java_url_encoder() {
        for b in 0u8..128 {
            let s = char::from(b).to_string();
            let want = match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => s.clone(),
                b' ' => "+".to_string(),
                _ => format!("%{b:02X}"),
            };
            assert_eq!(url_encode(&s), want, "byte {b}");
        }
        assert_eq!(url_encode("a/b=c d%"), "a%2Fb%3Dc+d%25");
        assert_eq!(
            url_encode("2024-03-05T10:15:30+00:00"),
            "2024-03-05T10%3A15%3A30%2B00%3A00"
        );
        assert_eq!(url_encode("~"), "%7E");
        assert_eq!(url_encode("日本"), "%E6%97%A5%E6%9C%AC");
        assert_eq!(
            url_encode("\u{7f}\u{80}\u{10FFFF}"),
            "%7F%C2%80%F4%8F%BF%BF"
        );
        assert_eq!(url_encode(""), "");
    }

    #[test]
    fn base64_rfc4648_vectors() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want);
        }
        assert_eq!(base64(&[0xfb, 0xff, 0xbf]), "+/+/");
        assert_eq!(base64(&[0; 57]).len(), 76, "no line breaks");
    }

    #[test]
    fn java_double_to_string() {
        for (x, want) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (-1.5, "-1.5"),
            (123.456, "123.456"),
            (100.0, "100.0"),
            (9_999_999.0, "9999999.0"),
            (9_999_999.999, "9999999.999"),
            (1e7, "1.0E7"),
            (-1e7, "-1.0E7"),
            (12_345_678.9, "1.23456789E7"),
            (0.001, "0.001"),
            (0.00123, "0.00123"),
            (0.000_999, "9.99E-4"),
            (1e-4, "1.0E-4"),
            (0.1, "0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.0 / 3.0, "0.3333333333333333"),
            (1e21, "1.0E21"),
            (1e23, "1.0E23"),
            (2e23, "2.0E23"),
            (3e-10, "3.0E-10"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
            (f64::from_bits(1), "4.9E-324"),
            (f64::from_bits(2), "9.9E-324"),
            (f64::from_bits(3), "1.5E-323"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(java_double(x), want, "{x:e}");
        }
    }

    #[test]
    fn java_float_to_string() {
        for (x, want) in [
            (0.0f32, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (123.456, "123.456"),
            (1e7, "1.0E7"),
            (16_777_216.0, "1.6777216E7"),
            (0.001, "0.001"),
            (1e-4, "1.0E-4"),
            (1.0 / 3.0, "0.33333334"),
            (f32::MAX, "3.4028235E38"),
            (f32::MIN_POSITIVE, "1.1754944E-38"),
            (f32::from_bits(1), "1.4E-45"),
            (f32::from_bits(2), "2.8E-45"),
            (f32::NAN, "NaN"),
            (f32::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(java_float(x), want, "{x:e}");
        }
    }

    /// Java before 19 (JDK-4511638; Spark 3.5 runs on 8/11/17) sometimes prints more digits than
    /// the shortest. Petrel follows the JDK 19+ specification; these are the values where OpenJDK
    /// 17 differs, kept here to document the choice.
    #[test]
    fn jdk17_double_divergences() {
        // (value, JDK 19+ and Petrel, OpenJDK 17)
        for (x, ours, jdk17) in [
            (1e23, "1.0E23", "9.999999999999999E22"),
            (2e23, "2.0E23", "1.9999999999999998E23"),
            (f64::from_bits(2), "9.9E-324", "1.0E-323"),
        ] {
            assert_eq!(java_double(x), ours);
            assert_ne!(java_double(x), jdk17);
        }
        assert_eq!(java_float(f32::MIN_POSITIVE), "1.1754944E-38"); // OpenJDK 17: 1.17549435E-38
    }

    #[test]
    fn java_big_decimal_to_string() {
        for (unscaled, scale, want) in [
            (0, 0, "0"),
            (0, 2, "0.00"),
            (0, 6, "0.000000"),
            (0, 7, "0E-7"),
            (1, 6, "0.000001"),
            (1, 7, "1E-7"),
            (12, 8, "1.2E-7"),
            (123, 8, "0.00000123"),
            (-123, 10, "-1.23E-8"),
            (10, 7, "0.0000010"),
            (12345, 2, "123.45"),
            (-12345, 5, "-0.12345"),
            (i128::MAX, 0, "170141183460469231731687303715884105727"),
            (i128::MIN, 0, "-170141183460469231731687303715884105728"),
            (i128::MIN, 38, "-1.70141183460469231731687303715884105728"),
        ] {
            assert_eq!(
                java_big_decimal(unscaled, scale),
                want,
                "{unscaled} scale {scale}"
            );
        }
    }

    #[test]
    fn human_time_and_timestamps() {
        let ts = Type::Primitive(P::Timestamp);
        let tstz = Type::Primitive(P::Timestamptz);
        let h = |ty: &Type, v: Literal| human_string(&Transform::Identity, ty, Some(&v)).unwrap();
        assert_eq!(
            h(&ts, Literal::timestamp(1_709_633_730_000_000)),
            "2024-03-05T10:15:30"
        );
        assert_eq!(
            h(&tstz, Literal::timestamptz(1_709_633_730_000_000)),
            "2024-03-05T10:15:30+00:00"
        );
        assert_eq!(
            h(&ts, Literal::timestamp(1_709_633_730_500_000)),
            "2024-03-05T10:15:30.5"
        );
        assert_eq!(
            h(&ts, Literal::timestamp(i64::MIN)),
            "-290308-12-21T19:59:05.224192"
        );
        assert_eq!(
            h(&ts, Literal::timestamp(i64::MAX)),
            "+294247-01-10T04:00:54.775807"
        );
        let ns_tz = Type::Primitive(P::TimestamptzNs);
        assert_eq!(
            h(&ns_tz, Literal::long(i64::MIN)),
            "1677-09-21T00:12:43.145224192+00:00"
        );
        let time = Type::Primitive(P::Time);
        assert_eq!(h(&time, Literal::time(36_900_000_000)), "10:15");
        assert_eq!(h(&time, Literal::time(36_930_000_000)), "10:15:30");
        assert_eq!(h(&time, Literal::time(36_930_500_000)), "10:15:30.500");
        assert_eq!(h(&time, Literal::time(36_900_000_010)), "10:15:00.000010");
        let int = Type::Primitive(P::Int);
        let o = |t: Transform, v: i32| human_string(&t, &int, Some(&Literal::int(v))).unwrap();
        assert_eq!(o(Transform::Year, 54), "2024");
        assert_eq!(o(Transform::Year, -1971), "-001");
        assert_eq!(o(Transform::Month, 650), "2024-03");
        assert_eq!(o(Transform::Month, -13), "1968-12");
        assert_eq!(o(Transform::Hour, 473_362), "2024-01-01-10");
        // Extremes, as Iceberg 1.10.2 renders them (the year wraps in Java's int arithmetic).
        assert_eq!(o(Transform::Hour, i32::MIN), "-243014-03-24-16");
        assert_eq!(o(Transform::Hour, i32::MAX), "246953-10-09-07");
        assert_eq!(o(Transform::Month, i32::MIN), "-178955001-05");
        assert_eq!(o(Transform::Year, i32::MAX), "-2147481679");
        assert_eq!(o(Transform::Day, i32::MAX), "5881580-07-11");
        assert_eq!(o(Transform::Day, i32::MIN), "-5877641-06-23");
    }

    /// Values drawn at random (random bit patterns, random short decimals, powers of ten and their
    /// neighbours) and printed by `Double.toString` / `Float.toString` on Temurin 25, plus ties
    /// that Java breaks to the even digit. A one-off run over all 659,234 values of that draw
    /// matched exactly.
    #[test]
    fn java_float_sample_from_jdk25() {
        let cases: &[(&str, u64, &str)] = &[
            ("d", 0xd2507ce703672705, "-3.279926312479342E88"),
            ("d", 0xf7eaee7b7384ee6c, "-4.4461880589338814E269"),
            ("d", 0x470dd095911b9e7b, "1.93509E34"),
            ("d", 0x403946e978d4fdf4, "25.277"),
            ("d", 0xa12d398a020a5095, "-7.1423830725254535E-149"),
            ("d", 0x5a71a0b7da28f537, "4.773054853552441E127"),
            ("d", 0xbb1848aff230c2c3, "-5.0218E-24"),
            ("d", 0x79f7eba146ae8d91, "3.392227488984783E279"),
            ("d", 0x2fee6f79a6448e5, "3.0240841214120737E-294"),
            ("d", 0x3fe14fdf3b645a1d, "0.541"),
            ("d", 0xdecac1dbd081db72, "-4.276707262300071E148"),
            ("d", 0x40e313a666666666, "39069.2"),
            ("d", 0xbf919e0e15800db3, "-0.01720449453570234"),
            ("d", 0x9eda795c57dd86e9, "-4.707636821650049E-160"),
            ("d", 0xbcc092e0eddd6c1b, "-4.600138227729618E-16"),
            ("d", 0x3c943e9915e14c8e, "7.02373E-17"),
            ("d", 0x3cf1ebdae9dc45f8, "3.97933E-15"),
            ("d", 0xdb0efeaf0de179b5, "-4.296925257830038E130"),
            ("d", 0x88802c714d92fe44, "-9.796719315448907E-268"),
            ("d", 0x45542e5a04cc9aa5, "9.75896232131701E25"),
            ("d", 0xc5f1e1f41bfbbdfc, "-8.85505E28"),
            ("d", 0xbf4718cf9e7d1cfb, "-7.04862E-4"),
            ("d", 0xb04ff5832dc03414, "-5.5200718959007515E-76"),
            ("d", 0x3c85452f07231a9b, "3.6898E-17"),
            ("d", 0x4dabfb1071727ead, "1.4733568545757795E66"),
            ("d", 0xf969eaa807a8a60a, "-7.178347877536866E276"),
            ("d", 0x4043a8f5c28f5c29, "39.32"),
            ("d", 0x404413126e978d50, "40.149"),
            ("d", 0x4040fc8b43958106, "33.973"),
            ("d", 0xc7cf8cf65632cbca, "-8.387597146326472E37"),
            ("d", 0x40504b3333333333, "65.175"),
            ("d", 0x4058d89374bc6a7f, "99.384"),
            ("d", 0x45b60d07257f67b7, "6.82442E27"),
            ("d", 0x377a41584e953be2, "1.883722071068797E-41"),
            ("d", 0x3495ff6e8e131432, "2.2428471342269598E-55"),
            ("d", 0xded0e4c38a007c9c, "-5.400330079826658E148"),
            ("d", 0xbbbbc07b765daf09, "-5.87669E-21"),
            ("d", 0x49370be87eaf8aa3, "5.1395448861477066E44"),
            ("d", 0xdc6401bce06e75d6, "-1.1633366776260846E137"),
            ("d", 0x472853e629bfbd00, "6.31584E34"),
            ("d", 0x9e83a1763caee772, "-1.0908583327336418E-161"),
            ("d", 0x4517b9cb32cca855, "7.17067E24"),
            ("d", 0x6626e49884867742, "1.215931669977903E184"),
            ("d", 0xc5038cd0109c6e61, "-2.95432E24"),
            ("d", 0xd59fa90ea71e0018, "-2.8364467707428243E104"),
            ("d", 0x44451e95bc2336f2, "7.79171E20"),
            ("d", 0xe1edb803d6443ba5, "-5.3480943092960556E163"),
            ("d", 0x5b9d41fbc27e8654, "2.0767250083840829E133"),
            ("d", 0x40526bc6a7ef9db2, "73.684"),
            ("d", 0x4244a91b89200000, "1.77473E11"),
            ("d", 0x402aa76c8b439581, "13.327"),
            ("d", 0xe42f60716ba953ed, "-3.880209695560973E174"),
            ("d", 0xfe6e72f1ac040673, "-1.0195739284367034E301"),
            ("d", 0x8f243976a395e6e0, "-9.938720531785273E-236"),
            ("d", 0xc6597fa268cd4dce, "-8.08082E30"),
            ("d", 0xddfa38abd1705d32, "-5.116033075349858E144"),
            ("d", 0x43414bc40c881800, "9.73676E15"),
            ("d", 0x3bc841b86826bc65, "1.0273120547962791E-20"),
            ("d", 0x403948f5c28f5c29, "25.285"),
            ("d", 0xc6b93f01db8e674b, "-5.120521892419362E32"),
            ("d", 0xbf9f724fa8b4bf90, "-0.0307095"),
            ("d", 0x3b279ba44faf4796, "9.76403E-24"),
            ("d", 0xc64896c7a3774ba8, "-3.89628E30"),
            ("d", 0xef8a7a89ffaeeea, "1.5144919087113136E-236"),
            ("d", 0xc6c1778a91f86b3b, "-7.08544E32"),
            ("d", 0x40533d3f7ced9168, "76.957"),
            ("d", 0x3dc0b3acde2a691f, "3.03805E-11"),
            ("d", 0x7116e5e41f9544c7, "5.824442879097124E236"),
            ("d", 0xd51a1483c59ec728, "-9.127007307120772E101"),
            ("d", 0x337e00a43ddb1503, "1.1669128375657796E-60"),
            ("d", 0x71d6644f84b189f5, "2.3329547081211605E240"),
            ("d", 0x5a8b6415c9bdd82f, "1.483321828913455E128"),
            ("d", 0x60fc75beb5d5a30d, "1.5629739052486846E159"),
            ("d", 0x4047c353f7ced917, "47.526"),
            ("d", 0xfa4979273a1b7c18, "-1.1559802432508848E281"),
            ("d", 0x3fef838e29f9ce8e, "0.984809"),
            ("d", 0xbf7d8dd26613db29, "-0.00721533"),
            ("d", 0xcb625bd9d8af5ef0, "-1.406738406820475E55"),
            ("d", 0x3beff0c04963bd16, "5.41092E-20"),
            ("d", 0xdf8a3ba8e78511e3, "-1.7174201295745964E152"),
            ("d", 0x4037553f7ced9168, "23.333"),
            ("d", 0xcaff35f17407600, "1.4280175442168033E-247"),
            ("d", 0x743150815b9cad1b, "4.958675528255908E251"),
            ("d", 0x3cd1b9e16eb30a83, "9.83996E-16"),
            ("d", 0xc6b6acada8a1246e, "-4.59894E32"),
            ("d", 0x5925f96fc77c4a6d, "2.8371646624563016E121"),
            ("d", 0x82eaff9d285d4bde, "-1.3210332764903364E-294"),
            ("d", 0x7a7f0f6b49aa3f5e, "1.1276144635553868E282"),
            ("d", 0xc40e8814c3ff0234, "-7.0401E19"),
            ("d", 0xc0d4068666666666, "-20506.1"),
            ("d", 0xbc37723b91c5f118, "-1.2710222120298635E-18"),
            ("d", 0x1ac4bf6142f8eef9, "9.999999999999998E-180"),
            ("d", 0x4c5e6b04e422401d, "7.6374861162573075E59"),
            ("d", 0xc473ee6722d474f3, "-5.88267E21"),
            ("d", 0x404f9bc6a7ef9db2, "63.217"),
            ("d", 0x37b01972c5fda1d, "6.765624695285845E-292"),
            ("d", 0x95aca6d54db53690, "-2.855770023726753E-204"),
            ("d", 0x8e6acc3b956f1e3e, "-3.215084123799024E-239"),
            ("d", 0x40452c8b43958106, "42.348"),
            ("d", 0x3d6e209f1c6c5c13, "8.56273E-13"),
            ("f", 0x4c9f5222, "8.353E7"),
            ("f", 0x23fd7c6f, "2.7483015E-17"),
            ("f", 0x97178274, "-4.8955386E-25"),
            ("f", 0x771598c9, "3.034184E33"),
            ("f", 0xba1f0af3, "-6.067E-4"),
            ("f", 0x47d912d3, "111141.65"),
            ("f", 0x47bba52c, "96074.34"),
            ("f", 0x99216593, "-8.344018E-24"),
            ("f", 0x44df6000, "1787.0"),
            ("f", 0x4f775bfa, "4.15E9"),
            ("f", 0x6bb90ddc, "4.4743345E26"),
            ("f", 0xba457265, "-7.532E-4"),
            ("f", 0xaa580bc0, "-1.918873E-13"),
            ("f", 0x72c690fc, "7.8660233E30"),
            ("f", 0xd955c9c1, "-3.761E15"),
            ("f", 0xbdd80a57, "-0.10548847"),
            ("f", 0xe671a2ef, "-2.8527398E23"),
            ("f", 0xc52a0219, "-2720.131"),
            ("f", 0xc94f4cc0, "-849100.0"),
            ("f", 0x793fecef, "6.2283393E34"),
            ("f", 0xa63028ce, "-6.1117567E-16"),
            ("f", 0xb5333f2f, "-6.677464E-7"),
            ("f", 0x9217871, "1.9436301E-33"),
            ("f", 0x643c4219, "1.3891003E22"),
            ("f", 0x57e299c1, "4.983E14"),
            ("f", 0xc386d99a, "-269.7"),
            ("f", 0xba6298e7, "-8.644E-4"),
            ("f", 0xe6da926c, "-5.1608845E23"),
            ("f", 0x9ba48eb4, "-2.7223744E-22"),
            ("f", 0x2d026db0, "7.414E-12"),
            ("f", 0xd98783c4, "-4.768E15"),
            ("f", 0xdc9048db, "-3.249E17"),
            ("f", 0xd144f0fd, "-5.2866044E10"),
            ("f", 0x1a712de2, "4.9874696E-23"),
            ("f", 0x4e0c861f, "5.894E8"),
            ("f", 0xb01072c6, "-5.255E-10"),
            ("f", 0x34f57fed, "4.5727884E-7"),
            ("f", 0x5474b47b, "4.204E12"),
            ("f", 0xea94ec94, "-9.0019115E25"),
            ("f", 0x350a29ea, "5.147E-7"),
            ("f", 0x4354d71f, "212.84032"),
            ("f", 0x1027536b, "3.2999206E-29"),
            ("f", 0x80682738, "-9.56496E-39"),
            ("f", 0xbdeda4b9, "-0.11603684"),
            ("f", 0xe7842fb2, "-1.2484644E24"),
            ("f", 0x1614aa43, "1.200907E-25"),
            ("f", 0x73426020, "1.5400013E31"),
            ("f", 0x155d095e, "4.4637984E-26"),
            ("f", 0xc7825500, "-66730.0"),
            ("f", 0x4d8467d5, "2.7767466E8"),
            ("f", 0xddd9e0ca, "-1.9624713E18"),
            ("f", 0xcdaea609, "-3.662646E8"),
            ("f", 0x7234757c, "3.5743572E30"),
            ("f", 0x618491d2, "3.056847E20"),
            ("f", 0xd180d6d4, "-6.917E10"),
            ("f", 0xba164983, "-5.733E-4"),
            ("f", 0xc1f84d2, "1.2288884E-31"),
            ("f", 0xc5189000, "-2441.0"),
            ("f", 0x1011b2c0, "2.8733912E-29"),
            ("f", 0xd58c74a2, "-1.930407E13"),
            ("d", 0xc307b40843963382, "-8.339840063750242E14"),
            ("d", 0x43015004f433031a, "6.091321013945312E14"),
            ("d", 0x42eac46b57b7f764, "2.3544733458425112E14"),
            ("d", 0x431ef7688eca4edd, "2.1790694364005672E15"),
        ];
        for (kind, bits, want) in cases {
            let got = if *kind == "d" {
                java_double(f64::from_bits(*bits))
            } else {
                java_float(f32::from_bits(*bits as u32))
            };
            assert_eq!(got, *want, "{kind} {bits:#x}");
        }
    }
}
