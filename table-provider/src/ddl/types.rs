//! Column type names of `CREATE TABLE` as Iceberg types: the names of the SQL the server speaks
//! (DataFusion's) and Spark's aliases.
//!
//! | names | Iceberg |
//! |---|---|
//! | BOOLEAN, BOOL | boolean |
//! | TINYINT, SMALLINT, INT, INTEGER, INT2, INT4 | int |
//! | BIGINT, LONG, INT8 | long |
//! | FLOAT, REAL, FLOAT4 | float |
//! | DOUBLE, DOUBLE PRECISION, FLOAT8 | double |
//! | DECIMAL(p, s), NUMERIC(p, s), DEC (DataFusion's default: 38, 10) | decimal(p, s) |
//! | DATE | date |
//! | TIME | time |
//! | TIMESTAMP, TIMESTAMP WITHOUT TIME ZONE, TIMESTAMP_NTZ | timestamp |
//! | TIMESTAMPTZ, TIMESTAMP WITH TIME ZONE, TIMESTAMP_LTZ | timestamptz |
//! | TIMESTAMP_NS, TIMESTAMPTZ_NS | timestamp_ns, timestamptz_ns (format 3) |
//! | STRING, VARCHAR[(n)], CHAR[(n)], TEXT | string |
//! | BINARY, VARBINARY, BYTEA, BLOB | binary |
//! | UUID | uuid |
//! | FIXED(n) | fixed(n) |
//! | ARRAY<t>, MAP<k, v>, STRUCT<name[:] t, …> | list, map, struct |

use iceberg::spec::PrimitiveType;

use super::parser::ColumnDef;
use crate::error::{Error, Result};

/// A column type as written.
#[derive(Debug, Clone, PartialEq)]
pub enum ParsedType {
    /// A primitive type.
    Primitive(PrimitiveType),
    /// `ARRAY<element>`.
    List(Box<ParsedType>),
    /// `MAP<key, value>`.
    Map(Box<ParsedType>, Box<ParsedType>),
    /// `STRUCT<…>`.
    Struct(Vec<ColumnDef>),
}

/// Resolves primitive type names.
#[derive(Debug)]
pub struct TypeName;

impl TypeName {
    /// The Iceberg type named `name` (upper case, multi-word names joined by spaces) with
    /// arguments `args`.
    pub fn resolve(name: &str, args: &[u32]) -> Result<PrimitiveType> {
        let no_args = |ty: PrimitiveType| -> Result<PrimitiveType> {
            if args.is_empty() {
                Ok(ty)
            } else {
                Err(Error::InvalidArgument(format!(
                    "type {name} takes no arguments"
                )))
            }
        };
        match name {
            "BOOLEAN" | "BOOL" => no_args(PrimitiveType::Boolean),
            "TINYINT" | "SMALLINT" | "INT" | "INTEGER" | "INT2" | "INT4" => {
                no_args(PrimitiveType::Int)
            }
            "BIGINT" | "LONG" | "INT8" => no_args(PrimitiveType::Long),
            "FLOAT" | "REAL" | "FLOAT4" => no_args(PrimitiveType::Float),
            "DOUBLE" | "DOUBLE PRECISION" | "FLOAT8" => no_args(PrimitiveType::Double),
            "DECIMAL" | "NUMERIC" | "DEC" => {
                let (precision, scale) = match args {
                    [] => (38, 10),
                    [p] => (*p, 0),
                    [p, s] => (*p, *s),
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "{name} takes a precision and a scale"
                        )));
                    }
                };
                if !(1..=38).contains(&precision) || scale > precision {
                    return Err(Error::InvalidArgument(format!(
                        "{name}({precision}, {scale}): precision must be 1 to 38 and scale at most the precision"
                    )));
                }
                Ok(PrimitiveType::Decimal { precision, scale })
            }
            "DATE" => no_args(PrimitiveType::Date),
            "TIME" => no_args(PrimitiveType::Time),
            "TIMESTAMP" | "TIMESTAMP WITHOUT TIME ZONE" | "TIMESTAMP_NTZ" => {
                no_args(PrimitiveType::Timestamp)
            }
            "TIMESTAMPTZ" | "TIMESTAMP WITH TIME ZONE" | "TIMESTAMP_LTZ" => {
                no_args(PrimitiveType::Timestamptz)
            }
            "TIMESTAMP_NS" => no_args(PrimitiveType::TimestampNs),
            "TIMESTAMPTZ_NS" => no_args(PrimitiveType::TimestamptzNs),
            "STRING" | "TEXT" => no_args(PrimitiveType::String),
            // A length limit is not an Iceberg notion: the column is a string.
            "VARCHAR" | "CHAR" | "CHARACTER" => Ok(PrimitiveType::String),
            "BINARY" | "VARBINARY" | "BYTEA" | "BLOB" => no_args(PrimitiveType::Binary),
            "UUID" => no_args(PrimitiveType::Uuid),
            "FIXED" => match args {
                [n] if *n > 0 => Ok(PrimitiveType::Fixed(u64::from(*n))),
                _ => Err(Error::InvalidArgument(
                    "FIXED takes one positive length: FIXED(16)".into(),
                )),
            },
            other => Err(Error::InvalidArgument(format!(
                "unknown column type {other}"
            ))),
        }
    }
}
