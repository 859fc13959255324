//! A procedure's arguments: the literal values a `CALL` passes ([`ArgValue`]), the parameters a
//! procedure declares ([`Param`]), and [`ProcedureArgs`], the values bound to those parameters
//! with typed accessors.
//!
//! Binding follows Spark: arguments are all positional or all named (`name => value`, names
//! case-insensitive); an unknown or repeated name, a required parameter left out, or a value
//! that cannot be the parameter's type is an error naming the procedure and the parameter.
//! Values are checked against their types when bound, so a wrong `CALL` fails when planned.

use std::collections::HashMap;

use crate::error::{Error, Result};

/// A literal value in a `CALL`.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    /// `NULL`.
    Null,
    /// `'text'`.
    String(String),
    /// A number as written (`42`, `-1`, `0.5`).
    Number(String),
    /// `true` / `false`.
    Boolean(bool),
    /// `TIMESTAMP '2024-01-01 00:00:00'`: the literal's text.
    Timestamp(String),
    /// `array(v, …)`.
    Array(Vec<ArgValue>),
    /// `map(k, v, …)`.
    Map(Vec<(ArgValue, ArgValue)>),
}

impl ArgValue {
    /// How the value reads in an error message.
    fn describe(&self) -> String {
        match self {
            ArgValue::Null => "NULL".into(),
            ArgValue::String(s) => format!("'{s}'"),
            ArgValue::Number(n) => n.clone(),
            ArgValue::Boolean(b) => b.to_string(),
            ArgValue::Timestamp(t) => format!("TIMESTAMP '{t}'"),
            ArgValue::Array(_) => "an array".into(),
            ArgValue::Map(_) => "a map".into(),
        }
    }
}

/// The type of a procedure parameter (Spark's type in the procedure's declaration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// `string`.
    String,
    /// `long` (a whole number, or a string holding one).
    Long,
    /// `int`.
    Int,
    /// `boolean` (also the strings `'true'` / `'false'`).
    Boolean,
    /// `timestamp`: a `TIMESTAMP '…'` literal, a string in a timestamp format (UTC unless it
    /// names a zone), or milliseconds since the epoch.
    Timestamp,
    /// `array<long>`.
    LongArray,
    /// `array<string>`.
    StringArray,
    /// `map<string, string>`.
    StringMap,
}

impl ParamType {
    fn name(self) -> &'static str {
        match self {
            ParamType::String => "a string",
            ParamType::Long => "a long",
            ParamType::Int => "an int",
            ParamType::Boolean => "a boolean",
            ParamType::Timestamp => "a timestamp",
            ParamType::LongArray => "an array of longs",
            ParamType::StringArray => "an array of strings",
            ParamType::StringMap => "a map of strings",
        }
    }
}

/// A parameter a procedure declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// Its name (lower case, as Spark's procedures declare it).
    pub name: &'static str,
    /// Its type.
    pub ty: ParamType,
    /// Whether the call must give it.
    pub required: bool,
}

impl Param {
    /// A required parameter.
    pub const fn required(name: &'static str, ty: ParamType) -> Self {
        Self {
            name,
            ty,
            required: true,
        }
    }

    /// An optional parameter.
    pub const fn optional(name: &'static str, ty: ParamType) -> Self {
        Self {
            name,
            ty,
            required: false,
        }
    }
}

/// A `CALL`'s arguments as written: positional or named.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CallArgs {
    /// `value, …` in order.
    pub positional: Vec<ArgValue>,
    /// `name => value, …` (names as written).
    pub named: Vec<(String, ArgValue)>,
}

/// The arguments of one call bound to its procedure's parameters (NULLs dropped), with typed
/// accessors. Every value was checked against its parameter's type when bound; an accessor
/// asked for a parameter the procedure did not declare, or for a different type, is an error.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcedureArgs {
    procedure: String,
    params: &'static [Param],
    values: HashMap<&'static str, ArgValue>,
}

impl ProcedureArgs {
    /// Binds `args` to `params` of `procedure`.
    pub fn bind(procedure: &str, params: &'static [Param], args: CallArgs) -> Result<Self> {
        let invalid =
            |message: String| Error::InvalidArgument(format!("procedure {procedure}: {message}"));
        let mut values: HashMap<&'static str, ArgValue> = HashMap::new();
        if !args.positional.is_empty() && !args.named.is_empty() {
            return Err(invalid(
                "named and positional arguments cannot be mixed".into(),
            ));
        }
        if args.positional.len() > params.len() {
            return Err(invalid(format!(
                "too many arguments: {} given, it takes {} ({})",
                args.positional.len(),
                params.len(),
                names(params)
            )));
        }
        for (param, value) in params.iter().zip(args.positional) {
            values.insert(param.name, value);
        }
        for (name, value) in args.named {
            let Some(param) = params.iter().find(|p| p.name.eq_ignore_ascii_case(&name)) else {
                return Err(invalid(format!(
                    "unknown argument {name} (parameters: {})",
                    names(params)
                )));
            };
            if values.insert(param.name, value).is_some() {
                return Err(invalid(format!("argument {} given twice", param.name)));
            }
        }
        values.retain(|_, v| *v != ArgValue::Null);
        for param in params {
            match values.get(param.name) {
                None if param.required => {
                    return Err(invalid(format!(
                        "missing required argument {} ({})",
                        param.name,
                        param.ty.name()
                    )));
                }
                Some(value) => check_type(param, value).map_err(invalid)?,
                None => {}
            }
        }
        Ok(Self {
            procedure: procedure.to_string(),
            params,
            values,
        })
    }

    /// The procedure these arguments are for.
    pub fn procedure(&self) -> &str {
        &self.procedure
    }

    fn invalid(&self, message: String) -> Error {
        Error::InvalidArgument(format!("procedure {}: {message}", self.procedure))
    }

    /// The value of `name`, checking the procedure declares it with type `ty`.
    fn value(&self, name: &str, ty: ParamType) -> Result<Option<&ArgValue>> {
        match self.params.iter().find(|p| p.name == name) {
            Some(p) if p.ty == ty => Ok(self.values.get(p.name)),
            Some(p) => Err(self.invalid(format!(
                "argument {name} is {}, read as {}",
                p.ty.name(),
                ty.name()
            ))),
            None => Err(self.invalid(format!("has no parameter {name}"))),
        }
    }

    fn required<T>(&self, name: &str, value: Option<T>) -> Result<T> {
        value.ok_or_else(|| self.invalid(format!("missing required argument {name}")))
    }

    /// An optional string.
    pub fn string_opt(&self, name: &str) -> Result<Option<String>> {
        Ok(match self.value(name, ParamType::String)? {
            Some(ArgValue::String(s)) => Some(s.clone()),
            Some(other) => Some(scalar_text(other)),
            None => None,
        })
    }

    /// A required string.
    pub fn string(&self, name: &str) -> Result<String> {
        let value = self.string_opt(name)?;
        self.required(name, value)
    }

    /// An optional long.
    pub fn long_opt(&self, name: &str) -> Result<Option<i64>> {
        self.value(name, ParamType::Long)?
            .map(|v| as_long(v).map_err(|m| self.invalid(format!("argument {name}: {m}"))))
            .transpose()
    }

    /// A required long.
    pub fn long(&self, name: &str) -> Result<i64> {
        let value = self.long_opt(name)?;
        self.required(name, value)
    }

    /// An optional int.
    pub fn int_opt(&self, name: &str) -> Result<Option<i32>> {
        self.value(name, ParamType::Int)?
            .map(|v| as_int(v).map_err(|m| self.invalid(format!("argument {name}: {m}"))))
            .transpose()
    }

    /// An optional boolean.
    pub fn bool_opt(&self, name: &str) -> Result<Option<bool>> {
        self.value(name, ParamType::Boolean)?
            .map(|v| as_bool(v).map_err(|m| self.invalid(format!("argument {name}: {m}"))))
            .transpose()
    }

    /// An optional timestamp, as milliseconds since the epoch.
    pub fn timestamp_ms_opt(&self, name: &str) -> Result<Option<i64>> {
        self.value(name, ParamType::Timestamp)?
            .map(|v| as_timestamp_ms(v).map_err(|m| self.invalid(format!("argument {name}: {m}"))))
            .transpose()
    }

    /// An optional array of longs.
    pub fn long_array_opt(&self, name: &str) -> Result<Option<Vec<i64>>> {
        match self.value(name, ParamType::LongArray)? {
            Some(ArgValue::Array(items)) => items
                .iter()
                .map(|v| as_long(v).map_err(|m| self.invalid(format!("argument {name}: {m}"))))
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(other) => Err(self.invalid(format!(
                "argument {name}: expected an array, found {}",
                other.describe()
            ))),
            None => Ok(None),
        }
    }

    /// An optional array of strings.
    pub fn string_array_opt(&self, name: &str) -> Result<Option<Vec<String>>> {
        match self.value(name, ParamType::StringArray)? {
            Some(ArgValue::Array(items)) => Ok(Some(items.iter().map(scalar_text).collect())),
            Some(other) => Err(self.invalid(format!(
                "argument {name}: expected an array, found {}",
                other.describe()
            ))),
            None => Ok(None),
        }
    }

    /// A map of strings (empty when not given), in the order written.
    pub fn string_map(&self, name: &str) -> Result<Vec<(String, String)>> {
        match self.value(name, ParamType::StringMap)? {
            Some(ArgValue::Map(entries)) => Ok(entries
                .iter()
                .map(|(k, v)| (scalar_text(k), scalar_text(v)))
                .collect()),
            Some(other) => Err(self.invalid(format!(
                "argument {name}: expected map('key', 'value', …), found {}",
                other.describe()
            ))),
            None => Ok(Vec::new()),
        }
    }
}

fn names(params: &[Param]) -> String {
    params.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// Checks `value` can be read as `param`'s type (the message names the parameter).
fn check_type(param: &Param, value: &ArgValue) -> std::result::Result<(), String> {
    let scalar = !matches!(value, ArgValue::Array(_) | ArgValue::Map(_));
    let ok = match param.ty {
        ParamType::String => scalar,
        ParamType::Long => as_long(value).is_ok(),
        ParamType::Int => as_int(value).is_ok(),
        ParamType::Boolean => as_bool(value).is_ok(),
        ParamType::Timestamp => as_timestamp_ms(value).is_ok(),
        ParamType::LongArray => match value {
            ArgValue::Array(items) => items.iter().all(|v| as_long(v).is_ok()),
            _ => false,
        },
        ParamType::StringArray => match value {
            ArgValue::Array(items) => items
                .iter()
                .all(|v| !matches!(v, ArgValue::Array(_) | ArgValue::Map(_))),
            _ => false,
        },
        ParamType::StringMap => match value {
            ArgValue::Map(entries) => entries.iter().all(|(k, v)| {
                !matches!(k, ArgValue::Array(_) | ArgValue::Map(_) | ArgValue::Null)
                    && !matches!(v, ArgValue::Array(_) | ArgValue::Map(_))
            }),
            _ => false,
        },
    };
    if ok {
        return Ok(());
    }
    let detail = match (param.ty, value) {
        (ParamType::Long | ParamType::Int, v) => as_long(v).err(),
        (ParamType::Timestamp, v) => as_timestamp_ms(v).err(),
        _ => None,
    };
    Err(format!(
        "argument {} must be {}, not {}{}",
        param.name,
        param.ty.name(),
        value.describe(),
        detail.map(|d| format!(" ({d})")).unwrap_or_default()
    ))
}

/// A scalar as text (a string's content, a number as written).
fn scalar_text(value: &ArgValue) -> String {
    match value {
        ArgValue::String(s) | ArgValue::Number(s) | ArgValue::Timestamp(s) => s.clone(),
        other => other.describe(),
    }
}

fn as_long(value: &ArgValue) -> std::result::Result<i64, String> {
    match value {
        ArgValue::Number(n) | ArgValue::String(n) => n
            .trim()
            .parse::<i64>()
            .map_err(|_| format!("{} is not a whole 64-bit number", value.describe())),
        other => Err(format!("{} is not a number", other.describe())),
    }
}

fn as_int(value: &ArgValue) -> std::result::Result<i32, String> {
    let n = as_long(value)?;
    i32::try_from(n).map_err(|_| format!("{n} does not fit an int"))
}

fn as_bool(value: &ArgValue) -> std::result::Result<bool, String> {
    match value {
        ArgValue::Boolean(b) => Ok(*b),
        ArgValue::String(s) if s.eq_ignore_ascii_case("true") => Ok(true),
        ArgValue::String(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        other => Err(format!("{} is not a boolean", other.describe())),
    }
}

/// A timestamp literal or string (UTC unless it names a zone), or epoch milliseconds.
fn as_timestamp_ms(value: &ArgValue) -> std::result::Result<i64, String> {
    match value {
        ArgValue::Timestamp(text) | ArgValue::String(text) => {
            arrow::compute::kernels::cast_utils::string_to_timestamp_nanos(text.trim())
                .map(|nanos| nanos.div_euclid(1_000_000))
                .map_err(|e| format!("invalid timestamp '{text}': {e}"))
        }
        ArgValue::Number(_) => as_long(value),
        other => Err(format!("{} is not a timestamp", other.describe())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAMS: &[Param] = &[
        Param::required("table", ParamType::String),
        Param::optional("snapshot_id", ParamType::Long),
        Param::optional("older_than", ParamType::Timestamp),
        Param::optional("ids", ParamType::LongArray),
        Param::optional("options", ParamType::StringMap),
        Param::optional("dry_run", ParamType::Boolean),
    ];

    fn named(args: &[(&str, ArgValue)]) -> CallArgs {
        CallArgs {
            positional: Vec::new(),
            named: args
                .iter()
                .map(|(n, v)| (n.to_string(), v.clone()))
                .collect(),
        }
    }

    #[test]
    fn named_arguments_are_case_insensitive_and_typed() {
        let args = ProcedureArgs::bind(
            "p",
            PARAMS,
            named(&[
                ("TABLE", ArgValue::String("db.t".into())),
                ("Snapshot_Id", ArgValue::Number("42".into())),
                (
                    "older_than",
                    ArgValue::Timestamp("2024-01-01 00:00:01".into()),
                ),
                (
                    "ids",
                    ArgValue::Array(vec![
                        ArgValue::Number("1".into()),
                        ArgValue::Number("-2".into()),
                    ]),
                ),
                (
                    "options",
                    ArgValue::Map(vec![(
                        ArgValue::String("k".into()),
                        ArgValue::String("v".into()),
                    )]),
                ),
            ]),
        )
        .unwrap();
        assert_eq!(args.string("table").unwrap(), "db.t");
        assert_eq!(args.long("snapshot_id").unwrap(), 42);
        assert_eq!(
            args.timestamp_ms_opt("older_than").unwrap(),
            Some(1_704_067_201_000)
        );
        assert_eq!(args.long_array_opt("ids").unwrap(), Some(vec![1, -2]));
        assert_eq!(
            args.string_map("options").unwrap(),
            [("k".to_string(), "v".to_string())]
        );
        assert_eq!(args.bool_opt("dry_run").unwrap(), None);
        assert!(args.int_opt("snapshot_id").is_err());
    }

    #[test]
    fn positional_arguments_follow_the_declaration() {
        let args = ProcedureArgs::bind(
            "p",
            PARAMS,
            CallArgs {
                positional: vec![ArgValue::String("t".into()), ArgValue::Number("7".into())],
                named: Vec::new(),
            },
        )
        .unwrap();
        assert_eq!(args.long("snapshot_id").unwrap(), 7);
    }

    #[test]
    fn mistakes_name_the_procedure_and_the_argument() {
        let cases: Vec<(CallArgs, &str)> = vec![
            (named(&[]), "procedure p: missing required argument table"),
            (
                named(&[
                    ("table", ArgValue::String("t".into())),
                    ("nope", ArgValue::Null),
                ]),
                "unknown argument nope",
            ),
            (
                named(&[
                    ("table", ArgValue::String("t".into())),
                    ("snapshot_id", ArgValue::String("x".into())),
                ]),
                "argument snapshot_id must be a long, not 'x'",
            ),
            (
                named(&[
                    ("table", ArgValue::String("t".into())),
                    ("TABLE", ArgValue::String("t".into())),
                ]),
                "argument table given twice",
            ),
            (
                named(&[
                    ("table", ArgValue::String("t".into())),
                    ("older_than", ArgValue::Timestamp("yesterday".into())),
                ]),
                "argument older_than must be a timestamp",
            ),
            (
                CallArgs {
                    positional: vec![ArgValue::String("t".into())],
                    named: vec![("snapshot_id".into(), ArgValue::Number("1".into()))],
                },
                "cannot be mixed",
            ),
        ];
        for (args, expected) in cases {
            let err = ProcedureArgs::bind("p", PARAMS, args.clone())
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{args:?}: {err}");
        }
    }
}
