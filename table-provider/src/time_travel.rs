//! Time travel in SQL, in Trino's syntax and Spark's (without `FOR`):
//!
//! ```sql
//! SELECT * FROM iceberg.db.t FOR VERSION AS OF 8744736658442914487
//! SELECT * FROM iceberg.db.t VERSION AS OF 'my-branch'
//! SELECT * FROM iceberg.db.t FOR TIMESTAMP AS OF TIMESTAMP '2026-01-01 00:00:00'
//! SELECT * FROM iceberg.db.t TIMESTAMP AS OF '2026-01-01T00:00:00Z'
//! ```
//!
//! (`SYSTEM_TIME AS OF` is accepted for timestamps.) DataFusion's parser does not take these
//! clauses, so [`rewrite_time_travel`] rewrites them at the token level (strings and comments
//! are never touched) into a quoted table name with a suffix, `"t@@version=…"`, that the
//! catalog's schema provider resolves with
//! [`split_time_travel`]. Timestamps without a zone are UTC. Spark's branch and tag names,
//! `catalog.ns.t.branch_b` and `catalog.ns.t.tag_v1`, become `"t@@ref=b"` the same way; an
//! `INSERT INTO` a branch name commits to that branch. Spark's metadata tables,
//! `catalog.ns.t.files` (time travel included: `catalog.ns.t.files VERSION AS OF 1`), become
//! Trino's `catalog.ns."t$files"` (`"t$files@@version=1"`), see [`crate::metadata_tables`].
//!
//! The same pass refuses named arguments to `table_changes(...)` (`stream => true`), which
//! DataFusion would drop without a word (see [`crate::changes::TableChangesFunction`]).

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};

use crate::error::{Error, Result};
use crate::metadata_tables::{MetadataTableKind, metadata_table_name};
use crate::spec::SnapshotSelector;

const MARKER: &str = "@@";

/// Rewrites the time-travel clauses of `sql` into table names the catalog resolves.
pub fn rewrite_time_travel(sql: &str) -> Result<String> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| Error::InvalidArgument(format!("SQL syntax error: {e}")))?;
    let significant: Vec<usize> = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_)))
        .map(|(i, _)| i)
        .collect();
    refuse_named_table_changes_arguments(&tokens, &significant)?;
    let offsets = LineOffsets::new(sql);
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let word = |k: usize, keyword: Keyword| -> bool {
        significant
            .get(k)
            .is_some_and(|&i| matches!(&tokens[i].token, Token::Word(w) if w.keyword == keyword && w.quote_style.is_none()))
    };
    let mut k = 0;
    while k < significant.len() {
        // [FOR] (VERSION | TIMESTAMP | SYSTEM_VERSION | SYSTEM_TIME) AS OF <value>
        let has_for = word(k, Keyword::FOR);
        let kind_at = if has_for { k + 1 } else { k };
        let kind = if word(kind_at, Keyword::VERSION) {
            Some("version")
        } else if word(kind_at, Keyword::TIMESTAMP) || word(kind_at, Keyword::SYSTEM_TIME) {
            Some("timestamp")
        } else {
            None
        };
        let clause =
            kind.filter(|_| word(kind_at + 1, Keyword::AS) && word(kind_at + 2, Keyword::OF));
        let table_token = k.checked_sub(1).map(|t| &tokens[significant[t]]);
        let (
            Some(kind),
            Some(TokenWithSpan {
                token: Token::Word(table_word),
                span,
            }),
        ) = (clause, table_token)
        else {
            k += 1;
            continue;
        };
        // Without FOR, only a plain identifier may precede the clause (`SELECT version AS of`
        // is a column alias, not time travel).
        // (A keyword that ends a dotted name is a table name: Spark's `t.files VERSION AS OF`.)
        let dotted = k >= 2
            && significant
                .get(k - 2)
                .is_some_and(|&i| tokens[i].token == Token::Period);
        if !has_for
            && !dotted
            && table_word.quote_style.is_none()
            && table_word.keyword != Keyword::NoKeyword
        {
            k += 1;
            continue;
        }
        let mut v = kind_at + 3;
        // Optional TIMESTAMP keyword before the literal.
        if kind == "timestamp" && word(v, Keyword::TIMESTAMP) {
            v += 1;
        }
        let mut negative = false;
        if significant
            .get(v)
            .is_some_and(|&i| tokens[i].token == Token::Minus)
        {
            negative = true;
            v += 1;
        }
        let Some(&value_index) = significant.get(v) else {
            return Err(Error::InvalidArgument(format!(
                "{} AS OF needs a value",
                kind.to_uppercase()
            )));
        };
        let value = match (&tokens[value_index].token, kind) {
            (Token::Number(n, _), "version") => {
                format!("version={}{n}", if negative { "-" } else { "" })
            }
            (Token::SingleQuotedString(s), "version") => format!("ref={s}"),
            (Token::SingleQuotedString(s), "timestamp") => format!("timestamp={s}"),
            (Token::Number(n, _), "timestamp") if !negative => format!("timestamp_ms={n}"),
            (other, _) => {
                return Err(Error::InvalidArgument(format!(
                    "{} AS OF expects {}, found {other}",
                    kind.to_uppercase(),
                    if kind == "version" {
                        "a snapshot id or a quoted branch or tag name"
                    } else {
                        "a timestamp literal such as TIMESTAMP '2026-01-01 00:00:00'"
                    }
                )));
            }
        };
        let name = if table_word.quote_style.is_some() {
            table_word.value.clone()
        } else {
            table_word.value.to_lowercase()
        };
        let replacement = format!(
            "\"{}\"",
            format!("{name}{MARKER}{value}").replace('"', "\"\"")
        );
        let start = offsets.byte(span.start);
        let end = tokens
            .get(value_index + 1)
            .map_or(sql.len(), |t| offsets.byte(t.span.start));
        edits.push((start, end, replacement));
        k = v + 1;
    }
    let mut out = sql.to_string();
    for (start, end, replacement) in edits.into_iter().rev() {
        out.replace_range(start..end, &replacement);
    }
    rewrite_ref_names(&out)
}

/// The positional form of `table_changes`, named in errors.
const TABLE_CHANGES_FORM: &str = "table_changes('ns.t', start, end, true [, poll_ms])";

/// Refuses named arguments (`stream => true`, `stream := true`, `stream = true`) to
/// `table_changes(...)`. DataFusion 53 drops a table function's named arguments without a word,
/// so `table_changes('t', 1, NULL, stream => true)` would run as a bounded feed; here, before
/// DataFusion parses, the call's top-level tokens still show them.
fn refuse_named_table_changes_arguments(
    tokens: &[TokenWithSpan],
    significant: &[usize],
) -> Result<()> {
    let token = |k: usize| significant.get(k).map(|&i| &tokens[i].token);
    for k in 0..significant.len() {
        let is_call = matches!(token(k), Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("table_changes"))
            && token(k + 1) == Some(&Token::LParen);
        if !is_call {
            continue;
        }
        // The call's arguments, up to its closing parenthesis: a named one is `<name> =>`,
        // `<name> :=` or `<name> =` at the call's own depth (its arguments are constants, so
        // a comparison with a bare name is not one of them).
        let mut depth = 0usize;
        let mut j = k + 1;
        while let Some(t) = token(j) {
            match t {
                Token::LParen | Token::LBracket | Token::LBrace => depth += 1,
                Token::RParen | Token::RBracket | Token::RBrace => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                Token::RArrow | Token::Assignment | Token::Eq if depth == 1 => {
                    let name = match j.checked_sub(1).and_then(token) {
                        Some(Token::Word(w)) => Some(w.value.clone()),
                        _ => None,
                    };
                    let after_separator =
                        matches!(token(j - 2), Some(Token::LParen | Token::Comma));
                    if *t == Token::Eq && !(name.is_some() && after_separator) {
                        j += 1;
                        continue;
                    }
                    let name = name.unwrap_or_else(|| "…".to_string());
                    let operator = match t {
                        Token::RArrow => "=>",
                        Token::Assignment => ":=",
                        _ => "=",
                    };
                    return Err(Error::InvalidArgument(format!(
                        "table_changes takes positional arguments only, not named ones such as \
                         `{name} {operator} …`: write {TABLE_CHANGES_FORM} (end NULL and true for \
                         a live stream; poll_ms optional)"
                    )));
                }
                _ => {}
            }
            j += 1;
        }
    }
    Ok(())
}

/// Spark's branch and tag names: `catalog.ns.t.branch_b` / `catalog.ns.t.tag_v1` (four or more
/// parts, the last one unquoted with the prefix `branch_` or `tag_`) become
/// `catalog.ns."t@@ref=b"`, read (and, for a branch, written: `INSERT INTO …`) at that ref.
/// Shorter names are left alone: `ns.t.branch_b` cannot be told from a table `branch_b`.
fn rewrite_ref_names(sql: &str) -> Result<String> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| Error::InvalidArgument(format!("SQL syntax error: {e}")))?;
    let significant: Vec<usize> = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_)))
        .map(|(i, _)| i)
        .collect();
    let token = |k: usize| significant.get(k).map(|&i| &tokens[i].token);
    let offsets = LineOffsets::new(sql);
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut k = 0;
    while k < significant.len() {
        // A dotted name starting at k (not in the middle of one).
        let starts = matches!(token(k), Some(Token::Word(_)))
            && !(k > 0 && token(k - 1) == Some(&Token::Period));
        if !starts {
            k += 1;
            continue;
        }
        let mut parts = vec![k];
        while token(parts[parts.len() - 1] + 1) == Some(&Token::Period)
            && matches!(token(parts[parts.len() - 1] + 2), Some(Token::Word(_)))
        {
            parts.push(parts[parts.len() - 1] + 2);
        }
        let last = parts[parts.len() - 1];
        k = last + 1;
        if parts.len() < 4 {
            continue;
        }
        let (Some(Token::Word(table)), Some(Token::Word(suffix))) = (token(last - 2), token(last))
        else {
            continue;
        };
        let table_name = if table.quote_style.is_some() {
            table.value.clone()
        } else {
            table.value.to_lowercase()
        };
        let start = offsets.byte(tokens[significant[last - 2]].span.start);
        let end = tokens
            .get(significant[last] + 1)
            .map_or(sql.len(), |t| offsets.byte(t.span.start));
        // Spark's metadata tables: `catalog.ns.t.files` (time travel already rewritten into
        // the last part: `catalog.ns.t."files@@version=1"`) becomes `catalog.ns."t$files"`.
        let (meta, travel) = match suffix.quote_style {
            None => (suffix.value.as_str(), ""),
            Some(_) => match suffix.value.find(MARKER) {
                Some(at) => suffix.value.split_at(at),
                None => ("", ""),
            },
        };
        if let Some(kind) = MetadataTableKind::from_name(meta) {
            let name = format!("{}{travel}", metadata_table_name(&table_name, kind));
            edits.push((start, end, format!("\"{}\"", name.replace('"', "\"\""))));
            continue;
        }
        if suffix.quote_style.is_some() {
            continue;
        }
        let lower = suffix.value.to_ascii_lowercase();
        let name = ["branch_", "tag_"]
            .iter()
            .find(|p| lower.starts_with(*p))
            .map(|p| &suffix.value[p.len()..]);
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            continue;
        };
        let replacement = format!(
            "\"{}\"",
            format!("{table_name}{MARKER}ref={name}").replace('"', "\"\"")
        );
        edits.push((start, end, replacement));
    }
    let mut out = sql.to_string();
    for (start, end, replacement) in edits.into_iter().rev() {
        out.replace_range(start..end, &replacement);
    }
    Ok(out)
}

/// Splits a table name into its real name and time-travel selector.
pub fn split_time_travel(name: &str) -> Result<(String, SnapshotSelector)> {
    let Some((table, spec)) = name.split_once(MARKER) else {
        return Ok((name.to_string(), SnapshotSelector::Current));
    };
    let (kind, value) = spec.split_once('=').ok_or_else(|| {
        Error::InvalidArgument(format!("malformed time-travel table name {name:?}"))
    })?;
    let selector = match kind {
        "version" => SnapshotSelector::Id(value.parse().map_err(|_| {
            Error::InvalidArgument(format!("snapshot id {value:?} is not a 64-bit integer"))
        })?),
        "ref" => SnapshotSelector::Ref(value.to_string()),
        "timestamp_ms" => SnapshotSelector::AsOfTimestampMs(value.parse().map_err(|_| {
            Error::InvalidArgument(format!(
                "timestamp {value:?} is not milliseconds since the epoch"
            ))
        })?),
        "timestamp" => SnapshotSelector::AsOfTimestampMs(parse_timestamp_ms(value)?),
        other => {
            return Err(Error::InvalidArgument(format!(
                "unknown time-travel kind {other:?} in {name:?}"
            )));
        }
    };
    Ok((table.to_string(), selector))
}

/// Parses a SQL timestamp literal (zone optional, UTC by default) to epoch milliseconds,
/// rounding up so that `AS OF` the commit instant (with microseconds) includes the commit.
fn parse_timestamp_ms(text: &str) -> Result<i64> {
    let nanos = arrow::compute::kernels::cast_utils::string_to_timestamp_nanos(text.trim())
        .map_err(|e| Error::InvalidArgument(format!("invalid timestamp {text:?}: {e}")))?;
    Ok(nanos.div_euclid(1_000_000))
}

/// Maps tokenizer (line, column) locations to byte offsets.
struct LineOffsets<'a> {
    sql: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineOffsets<'a> {
    fn new(sql: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(sql.match_indices('\n').map(|(i, _)| i + 1));
        Self { sql, starts }
    }

    fn byte(&self, location: Location) -> usize {
        let line = (location.line as usize).saturating_sub(1);
        let Some(&line_start) = self.starts.get(line) else {
            return self.sql.len();
        };
        let column = (location.column as usize).saturating_sub(1);
        self.sql[line_start..]
            .char_indices()
            .nth(column)
            .map_or(self.sql.len(), |(i, _)| line_start + i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_and_tag_names_become_refs() {
        for (input, expected) in [
            (
                "INSERT INTO iceberg.db.t.branch_audit VALUES (1)",
                "INSERT INTO iceberg.db.\"t@@ref=audit\" VALUES (1)",
            ),
            (
                "SELECT * FROM iceberg.db.T.tag_v1 WHERE x = 'a.b.c.branch_d'",
                "SELECT * FROM iceberg.db.\"t@@ref=v1\" WHERE x = 'a.b.c.branch_d'",
            ),
            (
                "INSERT INTO iceberg.db.m.branch_dev VALUES (10)",
                "INSERT INTO iceberg.db.\"m@@ref=dev\" VALUES (10)",
            ),
            (
                "INSERT INTO iceberg.db.t.branch_audit VALUES (10)",
                "INSERT INTO iceberg.db.\"t@@ref=audit\" VALUES (10)",
            ),
            // Three parts may be catalog.ns.table: left alone.
            ("SELECT * FROM db.t.branch_b", "SELECT * FROM db.t.branch_b"),
            ("SELECT * FROM c.db.t.other", "SELECT * FROM c.db.t.other"),
            (
                "SELECT * FROM iceberg.db.t.files",
                "SELECT * FROM iceberg.db.\"t$files\"",
            ),
            (
                "SELECT count(*) FROM iceberg.db.T.All_Data_Files x",
                "SELECT count(*) FROM iceberg.db.\"t$all_data_files\" x",
            ),
            (
                "SELECT * FROM iceberg.db.t.entries VERSION AS OF 7 WHERE status = 2",
                "SELECT * FROM iceberg.db.\"t$entries@@version=7\" WHERE status = 2",
            ),
            (
                "SELECT * FROM iceberg.db.t.partitions VERSION AS OF 7",
                "SELECT * FROM iceberg.db.\"t$partitions@@version=7\"",
            ),
            (
                "SELECT * FROM iceberg.db.t.files FOR VERSION AS OF 'b1'",
                "SELECT * FROM iceberg.db.\"t$files@@ref=b1\"",
            ),
            // Three parts: a table `files` of namespace `t`, left alone.
            ("SELECT * FROM db.t.files", "SELECT * FROM db.t.files"),
        ] {
            assert_eq!(rewrite_time_travel(input).unwrap(), expected, "{input}");
        }
    }

    #[test]
    fn rewrites_every_form() {
        let cases = [
            (
                "SELECT * FROM iceberg.db.t FOR VERSION AS OF 123",
                "SELECT * FROM iceberg.db.\"t@@version=123\"",
            ),
            (
                "select * from db.T version as of 'main' where x = 1",
                "select * from db.\"t@@ref=main\" where x = 1",
            ),
            (
                "SELECT 1 FROM t FOR TIMESTAMP AS OF TIMESTAMP '2026-01-01 00:00:00' AS x",
                "SELECT 1 FROM \"t@@timestamp=2026-01-01 00:00:00\" AS x",
            ),
            (
                "SELECT * FROM \"MyT\" TIMESTAMP AS OF '2026-01-01T00:00:00Z'",
                "SELECT * FROM \"MyT@@timestamp=2026-01-01T00:00:00Z\"",
            ),
            (
                "SELECT 'FOR VERSION AS OF 1' FROM t -- VERSION AS OF 2\n",
                "SELECT 'FOR VERSION AS OF 1' FROM t -- VERSION AS OF 2\n",
            ),
            (
                "SELECT * FROM a FOR VERSION AS OF 1 JOIN b FOR VERSION AS OF 2 ON a.x = b.x",
                "SELECT * FROM \"a@@version=1\" JOIN \"b@@version=2\" ON a.x = b.x",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(rewrite_time_travel(input).unwrap(), expected, "{input}");
        }
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let err = rewrite_time_travel("SELECT * FROM t FOR VERSION AS OF x").unwrap_err();
        assert!(err.to_string().contains("snapshot id"), "{err}");
        assert!(split_time_travel("t@@version=abc").is_err());
        assert!(split_time_travel("t@@timestamp=not a time").is_err());
    }

    #[test]
    fn named_table_changes_arguments_are_refused() {
        for (sql, shown) in [
            (
                "SELECT * FROM table_changes('db.t', 1, NULL, stream => true)",
                "`stream => …`",
            ),
            (
                "select * from TABLE_CHANGES('db.t', 1, NULL, true, poll_ms := 100)",
                "`poll_ms := …`",
            ),
            (
                "SELECT * FROM table_changes('db.t', 1, NULL, stream = true)",
                "`stream = …`",
            ),
            (
                "SELECT * FROM (SELECT id FROM table_changes(name => 'db.t', start => 1)) x",
                "`name => …`",
            ),
            (
                "SELECT * FROM table_changes('db.t', 1, NULL, 'stream' => true)",
                "`… => …`",
            ),
        ] {
            let err = rewrite_time_travel(sql).unwrap_err().to_string();
            assert_eq!(
                err,
                format!(
                    "invalid argument: table_changes takes positional arguments only, not named \
                     ones such as {shown}: write table_changes('ns.t', start, end, true [, \
                     poll_ms]) (end NULL and true for a live stream; poll_ms optional)"
                ),
                "{sql}"
            );
        }
        for sql in [
            "SELECT * FROM table_changes('db.t', 1, NULL, true, 100) WHERE id = 1",
            "SELECT * FROM table_changes('db.t', 1 = 1, (x = 2))",
            "SELECT 'table_changes(a => 1)' FROM t",
            "CALL petrel.system.expire_snapshots(table => 'db.t', retain_last => 1)",
            "SELECT f(stream => true), table_changes FROM t WHERE table_changes = 1",
        ] {
            assert_eq!(rewrite_time_travel(sql).unwrap(), sql);
        }
    }

    #[test]
    fn splits_names() {
        assert_eq!(
            split_time_travel("t@@version=-5").unwrap(),
            ("t".to_string(), SnapshotSelector::Id(-5))
        );
        assert_eq!(
            split_time_travel("t@@timestamp=2026-01-01 00:00:01")
                .unwrap()
                .1,
            SnapshotSelector::AsOfTimestampMs(1_767_225_601_000)
        );
        assert_eq!(
            split_time_travel("plain").unwrap().1,
            SnapshotSelector::Current
        );
    }
}
