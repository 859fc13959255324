//! Spark's maintenance statements for Iceberg tables, parsed from SQL tokens (DataFusion's parser
//! reads neither):
//!
//! ```text
//! CALL [catalog.]system.procedure(arg, …)            positional
//! CALL [catalog.]system.procedure(name => arg, …)    named (case-insensitive)
//!   arg: 'string' | number | true | false | NULL | TIMESTAMP 'yyyy-mm-dd hh:mm:ss'
//!        | array(arg, …) | map(key, value, …)
//!
//! ALTER TABLE t CREATE [OR REPLACE] BRANCH [IF NOT EXISTS] b [AS OF VERSION n]
//!   [RETAIN n {DAYS | HOURS | MINUTES}]
//! ALTER TABLE t REPLACE BRANCH b [AS OF VERSION n] [RETAIN …]
//! ALTER TABLE t CREATE [OR REPLACE] TAG [IF NOT EXISTS] tag [AS OF VERSION n] [RETAIN …]
//! ALTER TABLE t REPLACE TAG tag [AS OF VERSION n] [RETAIN …]
//! ALTER TABLE t DROP BRANCH [IF EXISTS] b
//! ALTER TABLE t DROP TAG [IF EXISTS] tag
//! ```
//!
//! `RETAIN` sets the ref's `max-ref-age-ms`. Spark's `WITH SNAPSHOT RETENTION` is refused by name.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use super::args::{ArgValue, CallArgs};
use crate::catalog::RefKind;
use crate::error::{Error, Result};
use crate::sql_tokens::TokenCursor;

/// A maintenance statement.
#[derive(Debug, Clone, PartialEq)]
pub enum MaintenanceStatement {
    /// `CALL … system.procedure(…)`.
    Call(ProcedureCall),
    /// `ALTER TABLE … CREATE / REPLACE / DROP BRANCH / TAG`.
    Ref(RefStatement),
}

/// `CALL [catalog.]system.name(args)`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcedureCall {
    /// The catalog named before `system` (else the session's default catalog).
    pub catalog: Option<String>,
    /// The procedure's name, lower case.
    pub name: String,
    /// The arguments as written.
    pub args: CallArgs,
}

/// A branch or tag statement on a table.
#[derive(Debug, Clone, PartialEq)]
pub struct RefStatement {
    /// The table name's parts, as written.
    pub table: Vec<String>,
    /// The ref's name.
    pub name: String,
    /// Branch or tag.
    pub kind: RefKind,
    /// Create, replace or drop.
    pub action: RefAction,
}

/// What a [`RefStatement`] does.
#[derive(Debug, Clone, PartialEq)]
pub enum RefAction {
    /// `CREATE [OR REPLACE]` / `REPLACE`.
    Create {
        /// `CREATE` (not `REPLACE`): the ref may be new.
        create: bool,
        /// `OR REPLACE` / `REPLACE`: the ref may exist.
        replace: bool,
        /// `IF NOT EXISTS`: an existing ref is left as it is.
        if_not_exists: bool,
        /// `AS OF VERSION n` (else the current snapshot).
        snapshot_id: Option<i64>,
        /// `RETAIN n unit`, in milliseconds.
        max_ref_age_ms: Option<i64>,
    },
    /// `DROP`.
    Drop {
        /// `IF EXISTS`.
        if_exists: bool,
    },
}

/// Parses `sql` if it is one of the statements above; `Ok(None)` for anything else.
pub fn parse_maintenance(sql: &str) -> Result<Option<MaintenanceStatement>> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .map_err(|e| Error::InvalidArgument(format!("cannot read statement: {e}")))?;
    let mut p = TokenCursor::new(tokens);
    let statement = if p.keyword("CALL") {
        MaintenanceStatement::Call(call(&mut p)?)
    } else if p.keyword("ALTER") && p.keyword("TABLE") {
        let start = p.at;
        let table = p.name()?;
        match ref_statement(&mut p, table)? {
            Some(statement) => MaintenanceStatement::Ref(statement),
            None => {
                p.at = start;
                return Ok(None);
            }
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

fn call(p: &mut TokenCursor) -> Result<ProcedureCall> {
    let parts = p.name()?;
    let (catalog, name) = match parts.as_slice() {
        [system, name] if system.eq_ignore_ascii_case("system") => (None, name.clone()),
        [catalog, system, name] if system.eq_ignore_ascii_case("system") => {
            (Some(catalog.clone()), name.clone())
        }
        _ => {
            return Err(Error::InvalidArgument(format!(
                "CALL {}: procedures are named [catalog.]system.<procedure>",
                parts.join(".")
            )));
        }
    };
    p.require(&Token::LParen)?;
    let mut args = CallArgs::default();
    if !p.eat(&Token::RParen) {
        loop {
            if let (Token::Word(w), Token::RArrow) = (p.peek().clone(), p.peek_at(1).clone()) {
                p.at += 2;
                let value = value(p)?;
                args.named.push((w.value, value));
            } else {
                args.positional.push(value(p)?);
            }
            if !p.eat(&Token::Comma) {
                break;
            }
        }
        p.require(&Token::RParen)?;
    }
    Ok(ProcedureCall {
        catalog,
        name: name.to_ascii_lowercase(),
        args,
    })
}

/// One argument value.
fn value(p: &mut TokenCursor) -> Result<ArgValue> {
    let negative = p.eat(&Token::Minus);
    match p.peek().clone() {
        Token::Number(n, _) => {
            p.at += 1;
            Ok(ArgValue::Number(if negative { format!("-{n}") } else { n }))
        }
        _ if negative => Err(p.unexpected("a number after -")),
        Token::SingleQuotedString(s) => {
            p.at += 1;
            Ok(ArgValue::String(s))
        }
        Token::Word(w) if w.quote_style.is_none() => {
            let word = w.value.to_ascii_uppercase();
            match word.as_str() {
                "TRUE" | "FALSE" => {
                    p.at += 1;
                    Ok(ArgValue::Boolean(word == "TRUE"))
                }
                "NULL" => {
                    p.at += 1;
                    Ok(ArgValue::Null)
                }
                "TIMESTAMP" | "TIMESTAMP_LTZ" | "TIMESTAMP_NTZ" => {
                    p.at += 1;
                    Ok(ArgValue::Timestamp(p.string()?))
                }
                "ARRAY" | "MAP" => {
                    p.at += 1;
                    p.require(&Token::LParen)?;
                    let mut items = Vec::new();
                    if !p.eat(&Token::RParen) {
                        loop {
                            items.push(value(p)?);
                            if !p.eat(&Token::Comma) {
                                break;
                            }
                        }
                        p.require(&Token::RParen)?;
                    }
                    if word == "ARRAY" {
                        return Ok(ArgValue::Array(items));
                    }
                    if items.len() % 2 != 0 {
                        return Err(Error::InvalidArgument(
                            "map(…) takes keys and values in pairs: map('k1', 'v1', 'k2', 'v2')"
                                .into(),
                        ));
                    }
                    let mut entries = Vec::with_capacity(items.len() / 2);
                    let mut items = items.into_iter();
                    while let (Some(k), Some(v)) = (items.next(), items.next()) {
                        entries.push((k, v));
                    }
                    Ok(ArgValue::Map(entries))
                }
                _ => Err(p.unexpected("a literal argument")),
            }
        }
        _ => Err(p.unexpected("a literal argument")),
    }
}

/// `CREATE/REPLACE/DROP BRANCH/TAG …` after `ALTER TABLE name`; `None` for other ALTER TABLEs.
fn ref_statement(p: &mut TokenCursor, table: Vec<String>) -> Result<Option<RefStatement>> {
    let (create, replace) = if p.keywords(&["CREATE", "OR", "REPLACE"]) {
        (true, true)
    } else if p.keyword("CREATE") {
        (true, false)
    } else if p.keyword("REPLACE") {
        (false, true)
    } else if p.keyword("DROP") {
        let kind = match ref_kind(p) {
            Some(kind) => kind,
            None => return Ok(None),
        };
        let if_exists = p.keywords(&["IF", "EXISTS"]);
        let name = p.identifier()?;
        return Ok(Some(RefStatement {
            table,
            name,
            kind,
            action: RefAction::Drop { if_exists },
        }));
    } else {
        return Ok(None);
    };
    let Some(kind) = ref_kind(p) else {
        return Ok(None);
    };
    let if_not_exists = create && p.keywords(&["IF", "NOT", "EXISTS"]);
    if if_not_exists && replace {
        return Err(Error::InvalidArgument(
            "CREATE OR REPLACE and IF NOT EXISTS cannot be used together".into(),
        ));
    }
    let name = p.identifier()?;
    let mut snapshot_id = None;
    let mut max_ref_age_ms = None;
    loop {
        if p.keywords(&["AS", "OF", "VERSION"]) {
            snapshot_id = Some(p.long()?);
        } else if p.keyword("RETAIN") {
            let n = p.long()?;
            let unit = p.identifier()?.to_ascii_uppercase();
            let ms = match unit.as_str() {
                "DAYS" | "DAY" => 86_400_000,
                "HOURS" | "HOUR" => 3_600_000,
                "MINUTES" | "MINUTE" => 60_000,
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "RETAIN {n} {other}: use DAYS, HOURS or MINUTES"
                    )));
                }
            };
            max_ref_age_ms =
                Some(n.checked_mul(ms).ok_or_else(|| {
                    Error::InvalidArgument(format!("RETAIN {n} {unit} is too long"))
                })?);
        } else if p.keyword("WITH") {
            return Err(Error::InvalidArgument(
                "WITH SNAPSHOT RETENTION is not supported yet: set the table properties \
                 history.expire.* instead"
                    .into(),
            ));
        } else {
            break;
        }
    }
    Ok(Some(RefStatement {
        table,
        name,
        kind,
        action: RefAction::Create {
            create,
            replace,
            if_not_exists,
            snapshot_id,
            max_ref_age_ms,
        },
    }))
}

fn ref_kind(p: &mut TokenCursor) -> Option<RefKind> {
    if p.keyword("BRANCH") {
        Some(RefKind::Branch)
    } else if p.keyword("TAG") {
        Some(RefKind::Tag)
    } else {
        None
    }
}

impl TokenCursor {
    /// A whole number, optionally negative.
    fn long(&mut self) -> Result<i64> {
        let negative = self.eat(&Token::Minus);
        match self.peek().clone() {
            Token::Number(n, _) => {
                self.at += 1;
                let n: i64 = n
                    .parse()
                    .map_err(|_| Error::InvalidArgument(format!("{n} is not a whole number")))?;
                Ok(if negative { -n } else { n })
            }
            _ => Err(self.unexpected("a number")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call_of(sql: &str) -> ProcedureCall {
        match parse_maintenance(sql).unwrap() {
            Some(MaintenanceStatement::Call(c)) => c,
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn calls_with_every_kind_of_literal() {
        let c = call_of(
            "CALL iceberg.system.expire_snapshots(table => 'db.t', OLDER_THAN => TIMESTAMP \
             '2024-01-01 00:00:00', retain_last => 2, snapshot_ids => array(1, -2), \
             options => map('a', 'b', 'c', 'd'), dry_run => true, x => NULL);",
        );
        assert_eq!(c.catalog.as_deref(), Some("iceberg"));
        assert_eq!(c.name, "expire_snapshots");
        assert!(c.args.positional.is_empty());
        let names: Vec<&str> = c.args.named.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "table",
                "OLDER_THAN",
                "retain_last",
                "snapshot_ids",
                "options",
                "dry_run",
                "x"
            ]
        );
        assert_eq!(
            c.args.named[1].1,
            ArgValue::Timestamp("2024-01-01 00:00:00".into())
        );
        assert_eq!(
            c.args.named[3].1,
            ArgValue::Array(vec![
                ArgValue::Number("1".into()),
                ArgValue::Number("-2".into())
            ])
        );
        assert_eq!(
            c.args.named[4].1,
            ArgValue::Map(vec![
                (ArgValue::String("a".into()), ArgValue::String("b".into())),
                (ArgValue::String("c".into()), ArgValue::String("d".into()))
            ])
        );
        assert_eq!(c.args.named[5].1, ArgValue::Boolean(true));
        assert_eq!(c.args.named[6].1, ArgValue::Null);

        let c = call_of("call system.Rollback_To_Snapshot('db.t', 123)");
        assert_eq!(c.catalog, None);
        assert_eq!(c.name, "rollback_to_snapshot");
        assert_eq!(
            c.args.positional,
            [
                ArgValue::String("db.t".into()),
                ArgValue::Number("123".into())
            ]
        );
    }

    #[test]
    fn branch_and_tag_statements() {
        let parsed = parse_maintenance(
            "ALTER TABLE iceberg.db.t CREATE BRANCH IF NOT EXISTS `audit` AS OF VERSION 42 RETAIN 7 DAYS",
        )
        .unwrap();
        assert_eq!(
            parsed,
            Some(MaintenanceStatement::Ref(RefStatement {
                table: vec!["iceberg".into(), "db".into(), "t".into()],
                name: "audit".into(),
                kind: RefKind::Branch,
                action: RefAction::Create {
                    create: true,
                    replace: false,
                    if_not_exists: true,
                    snapshot_id: Some(42),
                    max_ref_age_ms: Some(7 * 86_400_000),
                },
            }))
        );
        let parsed = parse_maintenance("alter table t drop tag if exists v1").unwrap();
        assert_eq!(
            parsed,
            Some(MaintenanceStatement::Ref(RefStatement {
                table: vec!["t".into()],
                name: "v1".into(),
                kind: RefKind::Tag,
                action: RefAction::Drop { if_exists: true },
            }))
        );
        let Some(MaintenanceStatement::Ref(r)) =
            parse_maintenance("ALTER TABLE t CREATE OR REPLACE TAG v1").unwrap()
        else {
            panic!("not a ref statement")
        };
        assert!(matches!(
            r.action,
            RefAction::Create {
                create: true,
                replace: true,
                ..
            }
        ));
    }

    #[test]
    fn other_statements_are_left_alone() {
        for sql in [
            "SELECT 1",
            "ALTER TABLE t ADD COLUMN x INT",
            "ALTER TABLE t SET TBLPROPERTIES ('a'='b')",
            "CREATE TABLE t (a INT)",
        ] {
            assert_eq!(parse_maintenance(sql).unwrap(), None, "{sql}");
        }
    }

    #[test]
    fn mistakes_are_named() {
        for (sql, expected) in [
            ("CALL iceberg.foo.bar()", "procedures are named"),
            ("CALL system.p(table => )", "expected a literal argument"),
            ("CALL system.p(map('a'))", "in pairs"),
            ("CALL system.p('a') extra", "expected the end"),
            (
                "ALTER TABLE t CREATE BRANCH b RETAIN 3 WEEKS",
                "use DAYS, HOURS or MINUTES",
            ),
            (
                "ALTER TABLE t CREATE BRANCH b WITH SNAPSHOT RETENTION 2 SNAPSHOTS",
                "not supported",
            ),
        ] {
            let err = parse_maintenance(sql).unwrap_err().to_string();
            assert!(err.contains(expected), "{sql}: {err}");
        }
    }
}
