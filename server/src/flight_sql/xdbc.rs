//! GetXdbcTypeInfo and the Arrow → SQL type naming shared with GetTables' column metadata.

use arrow::datatypes::{DataType, TimeUnit};
use arrow_flight::sql::metadata::{XdbcTypeInfo, XdbcTypeInfoData, XdbcTypeInfoDataBuilder};
use arrow_flight::sql::{Nullable, Searchable, XdbcDataType, XdbcDatetimeSubcode};
use tonic::Status;

/// The SQL type name a client shows for an Arrow type (`ARROW:FLIGHT:SQL:TYPE_NAME`).
pub(crate) fn sql_type_name(dt: &DataType) -> String {
    match dt {
        DataType::Null => "NULL".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INTEGER".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::UInt8 => "TINYINT UNSIGNED".into(),
        DataType::UInt16 => "SMALLINT UNSIGNED".into(),
        DataType::UInt32 => "INTEGER UNSIGNED".into(),
        DataType::UInt64 => "BIGINT UNSIGNED".into(),
        DataType::Float16 | DataType::Float32 => "REAL".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) => {
            format!("DECIMAL({p}, {s})")
        }
        DataType::Decimal256(p, s) => format!("DECIMAL({p}, {s})"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "VARBINARY".into(),
        DataType::FixedSizeBinary(16) => "UUID".into(),
        DataType::FixedSizeBinary(n) => format!("BINARY({n})"),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Time32(_) | DataType::Time64(_) => "TIME".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP WITH TIME ZONE".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP".into(),
        DataType::Interval(_) | DataType::Duration(_) => "INTERVAL".into(),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _) => format!("ARRAY<{}>", sql_type_name(f.data_type())),
        DataType::Struct(fields) => format!(
            "STRUCT<{}>",
            fields
                .iter()
                .map(|f| format!("{}: {}", f.name(), sql_type_name(f.data_type())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => format!(
                "MAP<{}, {}>",
                sql_type_name(kv[0].data_type()),
                sql_type_name(kv[1].data_type())
            ),
            _ => "MAP".into(),
        },
        DataType::Dictionary(_, v) => sql_type_name(v),
        DataType::RunEndEncoded(_, v) => sql_type_name(v.data_type()),
        DataType::Union(..) => "UNION".into(),
    }
}

/// Decimal precision / scale, or the character/temporal precision a JDBC client expects.
pub(crate) fn precision_scale(dt: &DataType) -> (Option<i32>, Option<i32>) {
    match dt {
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => (Some(*p as i32), Some(*s as i32)),
        DataType::Int8 | DataType::UInt8 => (Some(3), Some(0)),
        DataType::Int16 | DataType::UInt16 => (Some(5), Some(0)),
        DataType::Int32 | DataType::UInt32 => (Some(10), Some(0)),
        DataType::Int64 | DataType::UInt64 => (Some(19), Some(0)),
        DataType::Float32 => (Some(7), None),
        DataType::Float64 => (Some(15), None),
        DataType::Timestamp(unit, _) | DataType::Duration(unit) => (
            None,
            Some(match unit {
                TimeUnit::Second => 0,
                TimeUnit::Millisecond => 3,
                TimeUnit::Microsecond => 6,
                TimeUnit::Nanosecond => 9,
            }),
        ),
        _ => (None, None),
    }
}

fn ty(
    name: &str,
    data_type: XdbcDataType,
    column_size: Option<i32>,
    prefix_suffix: Option<(&str, &str)>,
    searchable: Searchable,
    case_sensitive: bool,
) -> XdbcTypeInfo {
    XdbcTypeInfo {
        type_name: name.into(),
        data_type,
        column_size,
        literal_prefix: prefix_suffix.map(|p| p.0.to_string()),
        literal_suffix: prefix_suffix.map(|p| p.1.to_string()),
        create_params: None,
        nullable: Nullable::NullabilityNullable,
        case_sensitive,
        searchable,
        unsigned_attribute: None,
        fixed_prec_scale: false,
        auto_increment: None,
        local_type_name: Some(name.into()),
        minimum_scale: None,
        maximum_scale: None,
        sql_data_type: data_type,
        datetime_subcode: None,
        num_prec_radix: None,
        interval_precision: None,
    }
}

/// The types Petrel returns (what Iceberg columns become), for GetXdbcTypeInfo.
/// Builds the table.
pub(crate) fn try_xdbc_type_info_data() -> Result<XdbcTypeInfoData, Status> {
    use XdbcDataType as X;
    let full = Searchable::Full;
    let basic = Searchable::Basic;
    let mut b = XdbcTypeInfoDataBuilder::new();
    let numeric = |name: &str, x: X, size: i32| {
        let mut t = ty(name, x, Some(size), None, full, false);
        t.unsigned_attribute = Some(false);
        t.num_prec_radix = Some(10);
        t.minimum_scale = Some(0);
        t.maximum_scale = Some(0);
        t
    };
    let mut list = vec![
        ty("BOOLEAN", X::XdbcBit, Some(1), None, basic, false),
        numeric("TINYINT", X::XdbcTinyint, 3),
        numeric("SMALLINT", X::XdbcSmallint, 5),
        numeric("INTEGER", X::XdbcInteger, 10),
        numeric("BIGINT", X::XdbcBigint, 19),
        {
            let mut t = ty("REAL", X::XdbcReal, Some(7), None, full, false);
            t.num_prec_radix = Some(2);
            t
        },
        {
            let mut t = ty("DOUBLE", X::XdbcDouble, Some(15), None, full, false);
            t.num_prec_radix = Some(2);
            t
        },
        {
            let mut t = ty("DECIMAL", X::XdbcDecimal, Some(38), None, full, false);
            t.create_params = Some(vec!["precision".into(), "scale".into()]);
            t.fixed_prec_scale = true;
            t.num_prec_radix = Some(10);
            t.minimum_scale = Some(0);
            t.maximum_scale = Some(38);
            t
        },
        ty(
            "VARCHAR",
            X::XdbcVarchar,
            None,
            Some(("'", "'")),
            full,
            true,
        ),
        ty(
            "VARBINARY",
            X::XdbcVarbinary,
            None,
            Some(("X'", "'")),
            basic,
            false,
        ),
        ty(
            "BINARY",
            X::XdbcBinary,
            None,
            Some(("X'", "'")),
            basic,
            false,
        ),
        ty(
            "UUID",
            X::XdbcBinary,
            Some(16),
            Some(("'", "'")),
            basic,
            false,
        ),
        {
            let mut t = ty(
                "DATE",
                X::XdbcDate,
                Some(10),
                Some(("DATE '", "'")),
                full,
                false,
            );
            t.sql_data_type = X::XdbcDatetime;
            t.datetime_subcode = Some(XdbcDatetimeSubcode::XdbcSubcodeYear);
            t
        },
        {
            let mut t = ty(
                "TIME",
                X::XdbcTime,
                Some(15),
                Some(("TIME '", "'")),
                full,
                false,
            );
            t.sql_data_type = X::XdbcDatetime;
            t.datetime_subcode = Some(XdbcDatetimeSubcode::XdbcSubcodeTime);
            t
        },
        {
            let mut t = ty(
                "TIMESTAMP",
                X::XdbcTimestamp,
                Some(26),
                Some(("TIMESTAMP '", "'")),
                full,
                false,
            );
            t.sql_data_type = X::XdbcDatetime;
            t.datetime_subcode = Some(XdbcDatetimeSubcode::XdbcSubcodeTimestamp);
            t
        },
        {
            let mut t = ty(
                "TIMESTAMP WITH TIME ZONE",
                X::XdbcTimestamp,
                Some(32),
                Some(("TIMESTAMP '", "'")),
                full,
                false,
            );
            t.sql_data_type = X::XdbcDatetime;
            t.datetime_subcode = Some(XdbcDatetimeSubcode::XdbcSubcodeTimestampWithTimezone);
            t
        },
        ty("INTERVAL", X::XdbcInterval, None, None, basic, false),
        ty(
            "ARRAY",
            X::XdbcUnknownType,
            None,
            None,
            Searchable::None,
            false,
        ),
        ty(
            "STRUCT",
            X::XdbcUnknownType,
            None,
            None,
            Searchable::None,
            false,
        ),
        ty(
            "MAP",
            X::XdbcUnknownType,
            None,
            None,
            Searchable::None,
            false,
        ),
    ];
    // Sorted by data type, then name (the order JDBC's getTypeInfo promises).
    list.sort_by(|a, b| {
        (a.data_type as i32, &a.type_name).cmp(&(b.data_type as i32, &b.type_name))
    });
    for t in list {
        b.append(t);
    }
    b.build()
        .map_err(|e| Status::internal(format!("building the XDBC type table: {e}")))
}
