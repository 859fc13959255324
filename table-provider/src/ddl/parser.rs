//! Spark's DDL for Iceberg tables, parsed from SQL tokens.
//!
//! DataFusion's SQL parser runs `CREATE TABLE` as an in-memory table and no sqlparser dialect
//! reads Spark's `USING iceberg`, transforms in `PARTITIONED BY`, or `STRUCT<a: t>` types, so
//! Petrel reads these statements itself (with sqlparser's tokenizer):
//!
//! ```text
//! CREATE {SCHEMA | DATABASE | NAMESPACE} [IF NOT EXISTS] name
//! DROP {SCHEMA | DATABASE | NAMESPACE} [IF EXISTS] name
//! CREATE TABLE [IF NOT EXISTS] name [(column type [NOT NULL] [COMMENT 'c'], …, [PRIMARY KEY (c, …)])]
//!   [USING iceberg] [PARTITIONED BY (term, …)] [LOCATION 'path'] [COMMENT 'c']
//!   [TBLPROPERTIES ('k' = 'v', …)] [AS query]
//! {CREATE OR REPLACE | REPLACE} TABLE name … (the rest as CREATE TABLE, without IF NOT EXISTS)
//! DROP TABLE [IF EXISTS] name [PURGE]
//! ```
//!
//! A partition term is a column or `bucket(N, c)`, `truncate(W, c)` (or `truncate(c, W)`),
//! `years|year(c)`, `months|month(c)`, `days|day|date(c)`, `hours|hour|date_hour(c)`,
//! `identity(c)`, `void(c)`. Type names are those of the SQL the server speaks (DataFusion's)
//! plus Spark's aliases: see [`super::types`].

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use iceberg::spec::Transform;

use super::types::{ParsedType, TypeName};
use crate::error::{Error, Result};
use crate::sql_tokens::TokenCursor;

/// A DDL statement Petrel runs itself.
#[derive(Debug, Clone, PartialEq)]
pub enum DdlStatement {
    /// `CREATE SCHEMA`.
    CreateSchema {
        /// Its name's parts (catalog optional, then namespace levels).
        name: Vec<String>,
        /// `IF NOT EXISTS`.
        if_not_exists: bool,
    },
    /// `DROP SCHEMA` (empty schemas only).
    DropSchema {
        /// Its name's parts.
        name: Vec<String>,
        /// `IF EXISTS`.
        if_exists: bool,
    },
    /// `CREATE TABLE`, with or without `AS query`.
    CreateTable(CreateTable),
    /// `DROP TABLE`.
    DropTable {
        /// Its name's parts.
        name: Vec<String>,
        /// `IF EXISTS`.
        if_exists: bool,
        /// `PURGE`: delete the table's files too.
        purge: bool,
    },
}

/// A column of `CREATE TABLE`.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: ParsedType,
    /// `NOT NULL`.
    pub required: bool,
    /// `COMMENT '…'`.
    pub comment: Option<String>,
}

/// One `PARTITIONED BY` term.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionTerm {
    /// The source column.
    pub column: String,
    /// The transform.
    pub transform: Transform,
}

/// `CREATE TABLE`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CreateTable {
    /// The table name's parts.
    pub name: Vec<String>,
    /// `IF NOT EXISTS`.
    pub if_not_exists: bool,
    /// The columns (empty for `CREATE TABLE … AS query` without a column list).
    pub columns: Vec<ColumnDef>,
    /// `PRIMARY KEY (…)`: the schema's identifier fields.
    pub primary_key: Vec<String>,
    /// `PARTITIONED BY (…)`.
    pub partitioning: Vec<PartitionTerm>,
    /// `LOCATION '…'`.
    pub location: Option<String>,
    /// `COMMENT '…'` of the table.
    pub comment: Option<String>,
    /// `TBLPROPERTIES (…)`, in order.
    pub properties: Vec<(String, String)>,
    /// The SQL text of `AS query`.
    pub query: Option<String>,
    /// `CREATE OR REPLACE TABLE` / `REPLACE TABLE`: what to do with a table that exists.
    pub replace: ReplaceMode,
}

/// What `CREATE TABLE` does when the table exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReplaceMode {
    /// `CREATE TABLE`: fail (or nothing, with `IF NOT EXISTS`).
    #[default]
    No,
    /// `CREATE OR REPLACE TABLE`: replace it, create it when missing.
    OrCreate,
    /// `REPLACE TABLE`: replace it, fail when missing.
    Only,
}

/// Parses `sql` if it is one of the DDL statements above; `Ok(None)` for anything else.
pub fn parse_ddl(sql: &str) -> Result<Option<DdlStatement>> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .map_err(|e| Error::InvalidArgument(format!("cannot read statement: {e}")))?;
    let mut p = TokenCursor::new(tokens);
    let statement = if p.keyword("CREATE") {
        if p.keyword_any(&["SCHEMA", "DATABASE", "NAMESPACE"]) {
            let if_not_exists = p.keywords(&["IF", "NOT", "EXISTS"]);
            DdlStatement::CreateSchema {
                name: p.name()?,
                if_not_exists,
            }
        } else if p.keyword("TABLE") {
            DdlStatement::CreateTable(create_table(&mut p, ReplaceMode::No)?)
        } else if p.keywords(&["OR", "REPLACE", "TABLE"]) {
            DdlStatement::CreateTable(create_table(&mut p, ReplaceMode::OrCreate)?)
        } else {
            return Ok(None);
        }
    } else if p.keywords(&["REPLACE", "TABLE"]) {
        DdlStatement::CreateTable(create_table(&mut p, ReplaceMode::Only)?)
    } else if p.keyword("DROP") {
        if p.keyword_any(&["SCHEMA", "DATABASE", "NAMESPACE"]) {
            let if_exists = p.keywords(&["IF", "EXISTS"]);
            DdlStatement::DropSchema {
                name: p.name()?,
                if_exists,
            }
        } else if p.keyword("TABLE") {
            let if_exists = p.keywords(&["IF", "EXISTS"]);
            let name = p.name()?;
            DdlStatement::DropTable {
                name,
                if_exists,
                purge: p.keyword("PURGE"),
            }
        } else {
            return Ok(None);
        }
    } else {
        return Ok(None);
    };
    p.eat(&Token::SemiColon);
    if !p.at_end() {
        return Err(p.unexpected("the end of the statement"));
    }
    Ok(Some(statement))
}

fn create_table(p: &mut TokenCursor, replace: ReplaceMode) -> Result<CreateTable> {
    let mut table = CreateTable {
        if_not_exists: p.keywords(&["IF", "NOT", "EXISTS"]),
        name: p.name()?,
        replace,
        ..Default::default()
    };
    if table.if_not_exists && replace != ReplaceMode::No {
        return Err(Error::InvalidArgument(
            "IF NOT EXISTS cannot be combined with REPLACE TABLE".into(),
        ));
    }
    if p.eat(&Token::LParen) {
        loop {
            if p.keywords(&["PRIMARY", "KEY"]) {
                p.require(&Token::LParen)?;
                loop {
                    table.primary_key.push(p.identifier()?);
                    if !p.eat(&Token::Comma) {
                        break;
                    }
                }
                p.require(&Token::RParen)?;
            } else {
                let name = p.identifier()?;
                let ty = p.data_type()?;
                let mut column = ColumnDef {
                    name,
                    ty,
                    required: false,
                    comment: None,
                };
                loop {
                    if p.keywords(&["NOT", "NULL"]) {
                        column.required = true;
                    } else if p.keyword("NULL") {
                        column.required = false;
                    } else if p.keyword("COMMENT") {
                        column.comment = Some(p.string()?);
                    } else if p.keywords(&["PRIMARY", "KEY"]) {
                        table.primary_key.push(column.name.clone());
                    } else {
                        break;
                    }
                }
                table.columns.push(column);
            }
            if !p.eat(&Token::Comma) {
                break;
            }
        }
        p.require(&Token::RParen)?;
    }
    loop {
        if p.keyword("USING") {
            let format = p.identifier()?;
            if !format.eq_ignore_ascii_case("iceberg") {
                return Err(Error::InvalidArgument(format!(
                    "USING {format}: Petrel creates Iceberg tables only (USING iceberg)"
                )));
            }
        } else if p.keywords(&["PARTITIONED", "BY"]) {
            p.require(&Token::LParen)?;
            loop {
                table.partitioning.push(partition_term(p)?);
                if !p.eat(&Token::Comma) {
                    break;
                }
            }
            p.require(&Token::RParen)?;
        } else if p.keyword("LOCATION") {
            table.location = Some(p.string()?);
        } else if p.keyword("COMMENT") {
            table.comment = Some(p.string()?);
        } else if p.keyword_any(&["TBLPROPERTIES", "OPTIONS"]) {
            p.require(&Token::LParen)?;
            loop {
                let key = p.string()?;
                p.eat(&Token::Eq);
                let value = p.property_value()?;
                table.properties.push((key, value));
                if !p.eat(&Token::Comma) {
                    break;
                }
            }
            p.require(&Token::RParen)?;
        } else if p.keyword("AS") {
            table.query = Some(p.rest());
            break;
        } else {
            break;
        }
    }
    if table.columns.is_empty() && table.query.is_none() {
        return Err(Error::InvalidArgument(format!(
            "CREATE TABLE {}: give the columns or AS query",
            table.name.join(".")
        )));
    }
    Ok(table)
}

fn partition_term(p: &mut TokenCursor) -> Result<PartitionTerm> {
    let first = p.identifier()?;
    if !p.eat(&Token::LParen) {
        return Ok(PartitionTerm {
            column: first,
            transform: Transform::Identity,
        });
    }
    let function = first.to_ascii_lowercase();
    let (column, number) = match function.as_str() {
        "bucket" | "truncate" => {
            // bucket(N, c); truncate(W, c) or truncate(c, W).
            let (column, number) = match p.number_opt()? {
                Some(n) => {
                    p.require(&Token::Comma)?;
                    (p.identifier()?, n)
                }
                None => {
                    let column = p.identifier()?;
                    p.require(&Token::Comma)?;
                    (column, p.number()?)
                }
            };
            (column, Some(number))
        }
        _ => (p.identifier()?, None),
    };
    p.require(&Token::RParen)?;
    let transform = match (function.as_str(), number) {
        ("bucket", Some(n)) => Transform::Bucket(n),
        ("truncate", Some(n)) => Transform::Truncate(n),
        ("years" | "year", _) => Transform::Year,
        ("months" | "month", _) => Transform::Month,
        ("days" | "day" | "date", _) => Transform::Day,
        ("hours" | "hour" | "date_hour", _) => Transform::Hour,
        ("identity", _) => Transform::Identity,
        ("void", _) => Transform::Void,
        _ => {
            return Err(Error::InvalidArgument(format!(
                "unknown partition transform {first}(…): use bucket, truncate, years, months, \
                 days, hours, identity or void"
            )));
        }
    };
    Ok(PartitionTerm { column, transform })
}

impl TokenCursor {
    /// A property value: a string, a number or a word (`true`).
    fn property_value(&mut self) -> Result<String> {
        match self.peek().clone() {
            Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => {
                self.at += 1;
                Ok(s)
            }
            Token::Number(n, _) => {
                self.at += 1;
                Ok(n)
            }
            Token::Word(w) => {
                self.at += 1;
                Ok(w.value)
            }
            _ => Err(self.unexpected("a property value")),
        }
    }

    fn number_opt(&mut self) -> Result<Option<u32>> {
        match self.peek().clone() {
            Token::Number(n, _) => {
                self.at += 1;
                n.parse()
                    .map(Some)
                    .map_err(|_| Error::InvalidArgument(format!("{n} is not a small whole number")))
            }
            _ => Ok(None),
        }
    }

    fn number(&mut self) -> Result<u32> {
        self.number_opt()?
            .ok_or_else(|| self.unexpected("a number"))
    }

    /// `>`, also when the tokenizer read `>>` (the end of two nested types) as one token.
    fn close_angle(&mut self) -> Result<()> {
        match self.peek() {
            Token::Gt => {
                self.at += 1;
                Ok(())
            }
            Token::ShiftRight => {
                self.tokens[self.at] = Token::Gt;
                Ok(())
            }
            _ => Err(self.unexpected(">")),
        }
    }

    /// A column type.
    fn data_type(&mut self) -> Result<ParsedType> {
        let word = self.identifier()?.to_ascii_uppercase();
        match word.as_str() {
            "ARRAY" | "LIST" => {
                self.require(&Token::Lt)?;
                let element = self.data_type()?;
                self.close_angle()?;
                Ok(ParsedType::List(Box::new(element)))
            }
            "MAP" => {
                self.require(&Token::Lt)?;
                let key = self.data_type()?;
                self.require(&Token::Comma)?;
                let value = self.data_type()?;
                self.close_angle()?;
                Ok(ParsedType::Map(Box::new(key), Box::new(value)))
            }
            "STRUCT" => {
                self.require(&Token::Lt)?;
                let mut fields = Vec::new();
                loop {
                    let name = self.identifier()?;
                    self.eat(&Token::Colon);
                    let ty = self.data_type()?;
                    let mut required = false;
                    let mut comment = None;
                    loop {
                        if self.keywords(&["NOT", "NULL"]) {
                            required = true;
                        } else if self.keyword("COMMENT") {
                            comment = Some(self.string()?);
                        } else {
                            break;
                        }
                    }
                    fields.push(ColumnDef {
                        name,
                        ty,
                        required,
                        comment,
                    });
                    if !self.eat(&Token::Comma) {
                        break;
                    }
                }
                self.close_angle()?;
                Ok(ParsedType::Struct(fields))
            }
            _ => {
                let mut words = vec![word];
                // Multi-word names.
                if words[0] == "DOUBLE" && self.keyword("PRECISION") {
                    words.push("PRECISION".into());
                }
                if words[0] == "TIMESTAMP" {
                    if self.keywords(&["WITH", "TIME", "ZONE"]) {
                        words.push("WITH TIME ZONE".into());
                    } else if self.keywords(&["WITHOUT", "TIME", "ZONE"]) {
                        words.push("WITHOUT TIME ZONE".into());
                    }
                }
                let mut args = Vec::new();
                if self.eat(&Token::LParen) {
                    loop {
                        args.push(self.number()?);
                        if !self.eat(&Token::Comma) {
                            break;
                        }
                    }
                    self.require(&Token::RParen)?;
                }
                Ok(ParsedType::Primitive(TypeName::resolve(
                    &words.join(" "),
                    &args,
                )?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::PrimitiveType;

    use super::*;

    fn create(sql: &str) -> CreateTable {
        match parse_ddl(sql).unwrap() {
            Some(DdlStatement::CreateTable(t)) => t,
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn spark_create_table_with_every_clause() {
        let t = create(
            "CREATE TABLE IF NOT EXISTS iceberg.db.events (
               id BIGINT NOT NULL COMMENT 'the id',
               \"Name\" STRING,
               ts TIMESTAMP WITH TIME ZONE,
               amount DECIMAL(10, 2),
               tags ARRAY<STRING>,
               attrs MAP<STRING, ARRAY<INT>>,
               point STRUCT<x: DOUBLE, y DOUBLE NOT NULL>,
               PRIMARY KEY (id)
             ) USING iceberg
             PARTITIONED BY (days(ts), bucket(16, id), truncate(name, 4), \"Name\")
             LOCATION '/data/events 50%'
             COMMENT 'all events'
             TBLPROPERTIES ('format-version' = '3', 'write.target-file-size-bytes'=1024);",
        );
        assert_eq!(t.name, ["iceberg", "db", "events"]);
        assert!(t.if_not_exists);
        let names: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["id", "Name", "ts", "amount", "tags", "attrs", "point"]
        );
        assert!(t.columns[0].required);
        assert_eq!(t.columns[0].comment.as_deref(), Some("the id"));
        assert_eq!(
            t.columns[2].ty,
            ParsedType::Primitive(PrimitiveType::Timestamptz)
        );
        assert_eq!(
            t.columns[3].ty,
            ParsedType::Primitive(PrimitiveType::Decimal {
                precision: 10,
                scale: 2
            })
        );
        assert_eq!(
            t.columns[5].ty,
            ParsedType::Map(
                Box::new(ParsedType::Primitive(PrimitiveType::String)),
                Box::new(ParsedType::List(Box::new(ParsedType::Primitive(
                    PrimitiveType::Int
                ))))
            )
        );
        assert_eq!(t.primary_key, ["id"]);
        let terms: Vec<(String, Transform)> = t
            .partitioning
            .iter()
            .map(|p| (p.column.clone(), p.transform))
            .collect();
        assert_eq!(
            terms,
            [
                ("ts".to_string(), Transform::Day),
                ("id".to_string(), Transform::Bucket(16)),
                ("name".to_string(), Transform::Truncate(4)),
                ("Name".to_string(), Transform::Identity),
            ]
        );
        assert_eq!(t.location.as_deref(), Some("/data/events 50%"));
        assert_eq!(t.comment.as_deref(), Some("all events"));
        assert_eq!(
            t.properties,
            [
                ("format-version".to_string(), "3".to_string()),
                (
                    "write.target-file-size-bytes".to_string(),
                    "1024".to_string()
                )
            ]
        );
        assert_eq!(t.query, None);
    }

    #[test]
    fn nested_types_close_with_double_angle_brackets() {
        let t = create("CREATE TABLE t (a ARRAY<ARRAY<BIGINT>>, m MAP<STRING,STRUCT<a:INT>>)");
        assert_eq!(
            t.columns[0].ty,
            ParsedType::List(Box::new(ParsedType::List(Box::new(ParsedType::Primitive(
                PrimitiveType::Long
            )))))
        );
        assert!(matches!(t.columns[1].ty, ParsedType::Map(_, _)));
    }

    #[test]
    fn replace_table_forms() {
        let t = create("CREATE OR REPLACE TABLE db.t (id BIGINT) USING iceberg");
        assert_eq!(t.replace, ReplaceMode::OrCreate);
        assert_eq!(t.name, ["db", "t"]);
        let t = create("replace table db.t as select 1 AS x");
        assert_eq!(t.replace, ReplaceMode::Only);
        assert_eq!(t.query.as_deref(), Some("select 1 AS x"));
        assert_eq!(
            create("CREATE TABLE db.t (id INT)").replace,
            ReplaceMode::No
        );
        assert!(parse_ddl("CREATE OR REPLACE TABLE IF NOT EXISTS t (id INT)").is_err());
        // Not DDL: left to DataFusion.
        assert_eq!(parse_ddl("REPLACE INTO t VALUES (1)").unwrap(), None);
        assert_eq!(
            parse_ddl("CREATE OR REPLACE VIEW v AS SELECT 1").unwrap(),
            None
        );
    }

    #[test]
    fn create_table_as_keeps_the_query_text() {
        let t = create(
            "CREATE TABLE db.copy PARTITIONED BY (months(ts)) AS SELECT id, 'a b' AS s, ts FROM db.src WHERE x > 1;",
        );
        assert!(t.columns.is_empty());
        assert_eq!(
            t.query.as_deref(),
            Some("SELECT id, 'a b' AS s, ts FROM db.src WHERE x > 1")
        );
    }

    #[test]
    fn schemas_and_drops() {
        assert_eq!(
            parse_ddl("create schema if not exists iceberg.sales").unwrap(),
            Some(DdlStatement::CreateSchema {
                name: vec!["iceberg".into(), "sales".into()],
                if_not_exists: true
            })
        );
        assert_eq!(
            parse_ddl("DROP DATABASE s").unwrap(),
            Some(DdlStatement::DropSchema {
                name: vec!["s".into()],
                if_exists: false
            })
        );
        assert_eq!(
            parse_ddl("DROP TABLE IF EXISTS a.b PURGE").unwrap(),
            Some(DdlStatement::DropTable {
                name: vec!["a".into(), "b".into()],
                if_exists: true,
                purge: true
            })
        );
    }

    #[test]
    fn other_statements_are_not_ddl() {
        for sql in [
            "SELECT 1",
            "INSERT INTO t VALUES (1)",
            "CREATE EXTERNAL TABLE t STORED AS PARQUET LOCATION '/etc'",
            "CREATE VIEW v AS SELECT 1",
            "DROP VIEW v",
        ] {
            assert_eq!(parse_ddl(sql).unwrap(), None, "{sql}");
        }
    }

    #[test]
    fn mistakes_are_named() {
        for (sql, expected) in [
            ("CREATE TABLE t (a FOO)", "unknown column type FOO"),
            (
                "CREATE TABLE t (a INT) USING parquet",
                "Iceberg tables only",
            ),
            (
                "CREATE TABLE t (a INT) PARTITIONED BY (squash(a))",
                "unknown partition transform",
            ),
            (
                "CREATE TABLE t (a INT) PARTITIONED BY (bucket(a))",
                "expected ,",
            ),
            ("CREATE TABLE t", "give the columns or AS query"),
            (
                "CREATE TABLE t (a DECIMAL(40, 2))",
                "precision must be 1 to 38",
            ),
            (
                "CREATE TABLE t (a INT) garbage",
                "expected the end of the statement",
            ),
        ] {
            let err = parse_ddl(sql).unwrap_err().to_string();
            assert!(err.contains(expected), "{sql}: {err}");
        }
    }
}
