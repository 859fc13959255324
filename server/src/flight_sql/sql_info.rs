//! GetSqlInfo: the full table of server facts the JDBC driver reads on its first
//! `DatabaseMetaData` call and ADBC reads at connect (`adbc_get_info`).
//!
//! Every value is a claim about this server: DataFusion 53's SQL (generic dialect, unquoted
//! identifiers folded to lower case, quoted ones kept and compared exactly) with Petrel's
//! additions (time travel, Spark's DDL, INSERT [OVERWRITE], searched DELETE, bulk ingest; no
//! UPDATE or MERGE yet, no transactions), and `--read-only`, which turns every write-related value off.
//! `server/tests/it/sql_info.rs` checks each value that SQL can check (identifier case and quoting,
//! keywords, functions, conversions, LIKE escapes, null ordering, subqueries, joins, unions)
//! by running it.

use std::collections::HashMap;

use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::{
    SqlInfo, SqlNullOrdering, SqlOuterJoinsSupportLevel, SqlSupportedCaseSensitivity,
    SqlSupportedGroupBy, SqlSupportedResultSetConcurrency, SqlSupportedResultSetType,
    SqlSupportedSubqueries, SqlSupportedTransaction, SqlSupportedUnions, SqlSupportsConvert,
    SqlTransactionIsolationLevel, SupportedSqlGrammar,
};
use tonic::Status;

use crate::{SERVER_NAME, SERVER_VERSION};

/// Arrow format version Petrel speaks.
const ARROW_VERSION: &str = "58.4";

/// Keywords of statements Petrel runs that are not SQL:2003 keywords (what JDBC's
/// `getSQLKeywords` reports): `EXPLAIN [ANALYZE]`, `DESCRIBE t`, `SELECT * EXCLUDE (…)`,
/// `ILIKE`, `LIMIT` / `OFFSET`, `QUALIFY`, `SHOW TABLES` and time travel's `VERSION AS OF`.
/// (SQL:2003's own `ARRAY`, `FILTER`, `TIMESTAMP`, `UNNEST` are not listed, nor keywords the
/// parser knows but DataFusion does not run, such as `ASOF`.)
const KEYWORDS: &[&str] = &[
    "ANALYZE", "DESCRIBE", "EXCLUDE", "EXPLAIN", "ILIKE", "LIMIT", "OFFSET", "QUALIFY", "SHOW",
    "TABLES", "VERSION",
];
/// Numeric functions (DataFusion has no `mod()`: `%` is the operator).
const NUMERIC_FUNCTIONS: &[&str] = &[
    "abs", "acos", "asin", "atan", "atan2", "cbrt", "ceil", "cos", "cot", "degrees", "exp",
    "floor", "ln", "log", "log10", "log2", "pi", "power", "radians", "random", "round", "signum",
    "sin", "sqrt", "tan", "trunc",
];
const STRING_FUNCTIONS: &[&str] = &[
    "ascii",
    "btrim",
    "char_length",
    "chr",
    "concat",
    "concat_ws",
    "initcap",
    "left",
    "length",
    "lower",
    "lpad",
    "ltrim",
    "md5",
    "octet_length",
    "regexp_like",
    "regexp_match",
    "regexp_replace",
    "repeat",
    "replace",
    "reverse",
    "right",
    "rpad",
    "rtrim",
    "split_part",
    "starts_with",
    "strpos",
    "substr",
    "substring",
    "to_hex",
    "translate",
    "trim",
    "upper",
];
const SYSTEM_FUNCTIONS: &[&str] = &["arrow_typeof", "coalesce", "nullif", "nvl", "version"];
const DATETIME_FUNCTIONS: &[&str] = &[
    "current_date",
    "current_time",
    "current_timestamp",
    "date_bin",
    "date_part",
    "date_trunc",
    "extract",
    "from_unixtime",
    "make_date",
    "now",
    "to_char",
    "to_date",
    "to_timestamp",
    "to_timestamp_micros",
    "to_timestamp_millis",
    "to_timestamp_seconds",
    "to_unixtime",
];

/// Builds Petrel's SqlInfo table.
/// Builds the table.
pub(crate) fn try_sql_info_data(read_only: bool) -> Result<SqlInfoData, Status> {
    let mut b = SqlInfoDataBuilder::new();
    // Server
    b.append(SqlInfo::FlightSqlServerName, SERVER_NAME);
    b.append(SqlInfo::FlightSqlServerVersion, SERVER_VERSION);
    b.append(SqlInfo::FlightSqlServerArrowVersion, ARROW_VERSION);
    // Writes (INSERT INTO Iceberg tables, Spark DDL, bulk ingest) are accepted unless the server
    // runs with --read-only.
    b.append(SqlInfo::FlightSqlServerReadOnly, read_only);
    b.append(SqlInfo::FlightSqlServerSql, true);
    b.append(SqlInfo::FlightSqlServerSubstrait, false);
    b.append(
        SqlInfo::FlightSqlServerTransaction,
        SqlSupportedTransaction::None as i32,
    );
    b.append(SqlInfo::FlightSqlServerCancel, true);
    // CommandStatementIngest (ADBC's adbc_ingest), each ingest its own commit.
    b.append(SqlInfo::FlightSqlServerBulkIngestion, !read_only);
    b.append(SqlInfo::FlightSqlServerIngestTransactionsSupported, false);
    b.append(SqlInfo::FlightSqlServerStatementTimeout, 0i32);
    b.append(SqlInfo::FlightSqlServerTransactionTimeout, 0i32);
    // DDL: Spark's CREATE/DROP SCHEMA and TABLE for Iceberg catalogs (not in read-only mode);
    // catalogs come from the configuration only.
    b.append(SqlInfo::SqlDdlCatalog, false);
    b.append(SqlInfo::SqlDdlSchema, !read_only);
    b.append(SqlInfo::SqlDdlTable, !read_only);
    // Identifiers: unquoted ones are folded to lower case; quoted ones are kept as written and
    // compared exactly (`"Name"` and `"name"` are two columns). Flight SQL has no "case
    // sensitive" value: UNKNOWN is how it says so (Arrow's ODBC driver reads it as
    // SQL_IC_SENSITIVE; CASE_INSENSITIVE would be SQL_IC_MIXED, a false claim).
    b.append(
        SqlInfo::SqlIdentifierCase,
        SqlSupportedCaseSensitivity::SqlCaseSensitivityLowercase as i32,
    );
    b.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
    b.append(
        SqlInfo::SqlQuotedIdentifierCase,
        SqlSupportedCaseSensitivity::SqlCaseSensitivityUnknown as i32,
    );
    b.append(SqlInfo::SqlAllTablesAreSelectable, true);
    b.append(
        SqlInfo::SqlNullOrdering,
        SqlNullOrdering::SqlNullsSortedHigh as i32,
    );
    b.append(SqlInfo::SqlKeywords, KEYWORDS);
    b.append(SqlInfo::SqlNumericFunctions, NUMERIC_FUNCTIONS);
    b.append(SqlInfo::SqlStringFunctions, STRING_FUNCTIONS);
    b.append(SqlInfo::SqlSystemFunctions, SYSTEM_FUNCTIONS);
    b.append(SqlInfo::SqlDatetimeFunctions, DATETIME_FUNCTIONS);
    // LIKE's default escape character.
    b.append(SqlInfo::SqlSearchStringEscape, "\\");
    // Beyond letters, digits and `_`, DataFusion's generic dialect takes `@`, `$` and `#` in
    // unquoted identifiers.
    b.append(SqlInfo::SqlExtraNameCharacters, "@$#");
    b.append(SqlInfo::SqlSupportsColumnAliasing, true);
    b.append(SqlInfo::SqlNullPlusNullIsNull, true);
    b.append(SqlInfo::SqlSupportsConvert, convert_map());
    b.append(SqlInfo::SqlSupportsTableCorrelationNames, true);
    b.append(SqlInfo::SqlSupportsDifferentTableCorrelationNames, false);
    b.append(SqlInfo::SqlSupportsExpressionsInOrderBy, true);
    b.append(SqlInfo::SqlSupportsOrderByUnrelated, true);
    b.append(
        SqlInfo::SqlSupportedGroupBy,
        (1 << SqlSupportedGroupBy::SqlGroupByUnrelated as i32)
            | (1 << SqlSupportedGroupBy::SqlGroupByBeyondSelect as i32),
    );
    // `LIKE … ESCAPE c` runs only with c = `\`, the default: no escape clause to speak of.
    b.append(SqlInfo::SqlSupportsLikeEscapeClause, false);
    // `NOT NULL` columns in CREATE TABLE.
    b.append(SqlInfo::SqlSupportsNonNullableColumns, true);
    // The ODBC minimum grammar and entry-level SQL-92, as far as queries, CREATE/DROP TABLE,
    // INSERT and searched DELETE go; searched UPDATE is not run yet. Not ODBC Core (no views, indexes,
    // GRANT, positioned updates) nor intermediate SQL-92 (no transactions, domains, ALTER).
    b.append(
        SqlInfo::SqlSupportedGrammar,
        1 << SupportedSqlGrammar::SqlMinimumGrammar as i32,
    );
    // SupportedAnsi92SqlGrammarLevel is not re-exported by arrow-flight: ANSI92_ENTRY_SQL is 0.
    b.append(SqlInfo::SqlAnsi92SupportedLevel, 1i32 << 0);
    b.append(SqlInfo::SqlSupportsIntegrityEnhancementFacility, false);
    b.append(
        SqlInfo::SqlOuterJoinsSupportLevel,
        SqlOuterJoinsSupportLevel::SqlFullOuterJoins as i32,
    );
    b.append(SqlInfo::SqlSchemaTerm, "schema");
    b.append(SqlInfo::SqlProcedureTerm, "procedure");
    b.append(SqlInfo::SqlCatalogTerm, "catalog");
    b.append(SqlInfo::SqlCatalogAtStart, true);
    b.append(SqlInfo::SqlSchemasSupportedActions, 0i32);
    b.append(SqlInfo::SqlCatalogsSupportedActions, 0i32);
    b.append(SqlInfo::SqlSupportedPositionedCommands, 0i32);
    b.append(SqlInfo::SqlSelectForUpdateSupported, false);
    b.append(SqlInfo::SqlStoredProceduresSupported, false);
    b.append(
        SqlInfo::SqlSupportedSubqueries,
        (1 << SqlSupportedSubqueries::SqlSubqueriesInComparisons as i32)
            | (1 << SqlSupportedSubqueries::SqlSubqueriesInExists as i32)
            | (1 << SqlSupportedSubqueries::SqlSubqueriesInIns as i32),
    );
    b.append(SqlInfo::SqlCorrelatedSubqueriesSupported, true);
    b.append(
        SqlInfo::SqlSupportedUnions,
        (1 << SqlSupportedUnions::SqlUnion as i32) | (1 << SqlSupportedUnions::SqlUnionAll as i32),
    );
    // Limits: 0 means "no limit or unknown" (JDBC convention)
    for info in [
        SqlInfo::SqlMaxBinaryLiteralLength,
        SqlInfo::SqlMaxCharLiteralLength,
        SqlInfo::SqlMaxColumnNameLength,
        SqlInfo::SqlMaxColumnsInGroupBy,
        SqlInfo::SqlMaxColumnsInIndex,
        SqlInfo::SqlMaxColumnsInOrderBy,
        SqlInfo::SqlMaxColumnsInSelect,
        SqlInfo::SqlMaxColumnsInTable,
        SqlInfo::SqlMaxConnections,
        SqlInfo::SqlMaxCursorNameLength,
        SqlInfo::SqlMaxIndexLength,
        SqlInfo::SqlDbSchemaNameLength,
        SqlInfo::SqlMaxProcedureNameLength,
        SqlInfo::SqlMaxCatalogNameLength,
        SqlInfo::SqlMaxRowSize,
        SqlInfo::SqlMaxStatementLength,
        SqlInfo::SqlMaxStatements,
        SqlInfo::SqlMaxTableNameLength,
        SqlInfo::SqlMaxTablesInSelect,
        SqlInfo::SqlMaxUsernameLength,
    ] {
        b.append(info, 0i64);
    }
    b.append(SqlInfo::SqlMaxRowSizeIncludesBlobs, false);
    // Transactions: none (every query reads one consistent snapshot per table)
    // The JDBC driver reads this one as a bigint (`Long.class`), unlike the other ordinals.
    b.append(
        SqlInfo::SqlDefaultTransactionIsolation,
        SqlTransactionIsolationLevel::SqlTransactionNone as i64,
    );
    b.append(SqlInfo::SqlTransactionsSupported, false);
    b.append(SqlInfo::SqlSupportedTransactionsIsolationLevels, 0i32);
    // With no transactions there is nothing for DDL to commit or be ignored in.
    b.append(SqlInfo::SqlDataDefinitionCausesTransactionCommit, false);
    b.append(SqlInfo::SqlDataDefinitionsInTransactionsIgnored, false);
    // Forward-only, read-only result sets
    b.append(
        SqlInfo::SqlSupportedResultSetTypes,
        1 << SqlSupportedResultSetType::SqlResultSetTypeForwardOnly as i32,
    );
    b.append(
        SqlInfo::SqlSupportedConcurrenciesForResultSetUnspecified,
        0i32,
    );
    b.append(
        SqlInfo::SqlSupportedConcurrenciesForResultSetForwardOnly,
        1 << SqlSupportedResultSetConcurrency::SqlResultSetConcurrencyReadOnly as i32,
    );
    b.append(
        SqlInfo::SqlSupportedConcurrenciesForResultSetScrollSensitive,
        0i32,
    );
    b.append(
        SqlInfo::SqlSupportedConcurrenciesForResultSetScrollInsensitive,
        0i32,
    );
    b.append(SqlInfo::SqlBatchUpdatesSupported, false);
    b.append(SqlInfo::SqlSavepointsSupported, false);
    b.append(SqlInfo::SqlNamedParametersSupported, false);
    b.append(SqlInfo::SqlLocatorsUpdateCopy, false);
    b.append(SqlInfo::SqlStoredFunctionsUsingCallSyntaxSupported, false);
    b.build()
        .map_err(|e| Status::internal(format!("building the SqlInfo table: {e}")))
}

/// CAST support between the types DataFusion converts freely (every pair is run by
/// `server/tests/it/sql_info.rs`). DataFusion's SQL has no BIT or LONGVARCHAR type.
fn convert_map() -> HashMap<i32, Vec<i32>> {
    use SqlSupportsConvert as C;
    let numeric = [
        C::SqlConvertBigint,
        C::SqlConvertInteger,
        C::SqlConvertSmallint,
        C::SqlConvertTinyint,
        C::SqlConvertDecimal,
        C::SqlConvertFloat,
        C::SqlConvertReal,
        C::SqlConvertNumeric,
    ];
    let text = [C::SqlConvertChar, C::SqlConvertVarchar];
    let mut map = HashMap::new();
    let all_numeric_text: Vec<i32> = numeric
        .iter()
        .chain(text.iter())
        .map(|c| *c as i32)
        .collect();
    for n in numeric.iter().chain(text.iter()) {
        map.insert(*n as i32, all_numeric_text.clone());
    }
    for t in text {
        map.entry(t as i32).or_insert_with(Vec::new).extend([
            C::SqlConvertDate as i32,
            C::SqlConvertTimestamp as i32,
            C::SqlConvertTime as i32,
        ]);
    }
    map.insert(
        C::SqlConvertDate as i32,
        vec![C::SqlConvertTimestamp as i32, C::SqlConvertVarchar as i32],
    );
    map.insert(
        C::SqlConvertTimestamp as i32,
        vec![
            C::SqlConvertDate as i32,
            C::SqlConvertTime as i32,
            C::SqlConvertVarchar as i32,
        ],
    );
    map
}
