//! Reading a `MERGE INTO` statement (Spark's grammar) into [`MergeStatement`]: target, source,
//! ON condition and WHEN clauses, with column names normalised as DataFusion normalises them.
//!
//! DataFusion's SQL parser (sqlparser) reads MERGE but not Spark's `UPDATE SET *` and
//! `INSERT *`; before parsing, those two forms are replaced token by token with an assignment
//! to, and an insert of, a marker column (never a real column: the names are quoted and
//! reserved), which [`parse_merge`] turns back into [`ClauseAction::UpdateStar`] and
//! [`ClauseAction::InsertStar`]. `EXPLAIN [VERBOSE] MERGE …` is read too; `EXPLAIN ANALYZE
//! MERGE` is refused (it would run the statement). Any other statement is left to DataFusion.

use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{ExplainFormat, ExplainOption};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::planner::IdentNormalizer;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, Expr as SqlExpr, Merge, MergeAction, MergeClauseKind, MergeInsertKind,
    ObjectName, Statement, TableFactor,
};
use datafusion::sql::sqlparser::dialect::dialect_from_str;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::{Error, Result};

/// The marker column `UPDATE SET *` is read as.
const SET_STAR: &str = "__petrel_merge_set_star";
/// The marker column `INSERT *` is read as.
const INSERT_STAR: &str = "__petrel_merge_insert_star";

/// A `MERGE INTO` statement, read.
#[derive(Debug, Clone)]
pub(super) struct MergeStatement {
    /// The target table's name, as written.
    pub target: ObjectName,
    /// The target's alias (normalised), if any.
    pub target_alias: Option<String>,
    /// The source: a table or a subquery, with its alias.
    pub source: TableFactor,
    /// The ON condition.
    pub on: SqlExpr,
    /// The WHEN clauses, in order.
    pub clauses: Vec<Clause>,
}

/// Which rows a WHEN clause is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClauseKind {
    /// `WHEN MATCHED`: a target row and a source row the ON condition pairs.
    Matched,
    /// `WHEN NOT MATCHED [BY TARGET]`: a source row that matches no target row.
    NotMatched,
    /// `WHEN NOT MATCHED BY SOURCE`: a target row that matches no source row.
    NotMatchedBySource,
}

/// A WHEN clause.
#[derive(Debug, Clone)]
pub(super) struct Clause {
    /// Which rows it is for.
    pub kind: ClauseKind,
    /// Its `AND <condition>`, if any.
    pub condition: Option<SqlExpr>,
    /// What it does.
    pub action: ClauseAction,
}

/// What a WHEN clause does.
#[derive(Debug, Clone)]
pub(super) enum ClauseAction {
    /// `UPDATE SET c = e, …` (column names normalised; the other columns keep their values).
    Update(Vec<(String, SqlExpr)>),
    /// `UPDATE SET *`: every column from the source's column of the same name.
    UpdateStar,
    /// `DELETE`.
    Delete,
    /// `INSERT (c, …) VALUES (e, …)`; no columns: all of the table's, in order. Columns not
    /// named are NULL.
    Insert {
        /// The columns named (normalised).
        columns: Vec<String>,
        /// One value per column.
        values: Vec<SqlExpr>,
    },
    /// `INSERT *`: every column from the source's column of the same name.
    InsertStar,
}

/// A MERGE statement and whether it is to be explained rather than run.
#[derive(Debug, Clone)]
pub(super) struct ParsedMerge {
    /// The statement.
    pub statement: MergeStatement,
    /// `EXPLAIN [VERBOSE] [FORMAT …]`: explain it, with these options.
    pub explain: Option<ExplainOption>,
}

/// `sql` read as a MERGE statement (or an EXPLAIN of one) in `state`'s SQL dialect; `None`
/// when it is another statement.
pub(super) fn parse_merge(state: &SessionState, sql: &str) -> Result<Option<ParsedMerge>> {
    let options = &state.config().options().sql_parser;
    let dialect_name = options.dialect;
    if !may_start_merge(sql) {
        return Ok(None);
    }
    let Some(dialect) = dialect_from_str(dialect_name.as_ref()) else {
        return Ok(None);
    };
    let Ok(tokens) = Tokenizer::new(dialect.as_ref(), sql).tokenize() else {
        // Not for Petrel to report: DataFusion parses it and says what is wrong.
        return Ok(None);
    };
    if !starts_merge(&tokens) {
        return Ok(None);
    }
    let text = with_star_markers(&tokens);
    let statement = state.sql_to_statement(text.as_deref().unwrap_or(sql), &dialect_name)?;
    let (merge, explain) = match statement {
        DFStatement::Statement(s) => match *s {
            Statement::Merge(merge) => (merge, None),
            _ => return Ok(None),
        },
        DFStatement::Explain(explain) => {
            let DFStatement::Statement(inner) = *explain.statement else {
                return Ok(None);
            };
            let Statement::Merge(merge) = *inner else {
                return Ok(None);
            };
            if explain.analyze {
                return Err(Error::InvalidArgument(
                    "EXPLAIN ANALYZE MERGE would run the MERGE: use EXPLAIN MERGE".into(),
                ));
            }
            let format = match &explain.format {
                Some(f) => f.parse::<ExplainFormat>()?,
                None => ExplainFormat::Indent,
            };
            let options = ExplainOption::default()
                .with_verbose(explain.verbose)
                .with_format(format);
            (merge, Some(options))
        }
        _ => return Ok(None),
    };
    let normalizer = IdentNormalizer::new(options.enable_ident_normalization);
    let statement = read_merge(merge, &normalizer)?;
    Ok(Some(ParsedMerge { statement, explain }))
}

/// A cheap first look (no tokenizing of every statement's text): whether `sql` may start with
/// MERGE or EXPLAIN (or a comment, left to the tokenizer).
fn may_start_merge(sql: &str) -> bool {
    let head = sql.trim_start();
    if head.starts_with("--") || head.starts_with("/*") {
        return true;
    }
    let word: String = head
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .take(8)
        .collect();
    word.eq_ignore_ascii_case("merge") || word.eq_ignore_ascii_case("explain")
}

/// Whether the tokens start `MERGE …` or `EXPLAIN [ANALYZE] [VERBOSE] [FORMAT x] MERGE …`.
fn starts_merge(tokens: &[Token]) -> bool {
    let mut words = tokens.iter().filter(|t| !matches!(t, Token::Whitespace(_)));
    let keyword = |t: Option<&Token>| match t {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    };
    match keyword(words.next()) {
        Some(Keyword::MERGE) => true,
        Some(Keyword::EXPLAIN) => loop {
            match keyword(words.next()) {
                Some(Keyword::MERGE) => break true,
                Some(Keyword::ANALYZE | Keyword::VERBOSE) => {}
                Some(Keyword::FORMAT) => {
                    words.next();
                }
                _ => break false,
            }
        },
        _ => false,
    }
}

/// The statement's text with `UPDATE SET *` and `INSERT *` replaced by the marker forms, or
/// `None` when it has neither (the text is then parsed as written).
fn with_star_markers(tokens: &[Token]) -> Option<String> {
    let mut replaced = false;
    let mut text = String::new();
    // The last two tokens that are not whitespace.
    let mut last: [Option<&Token>; 2] = [None, None];
    let is = |t: Option<&Token>, k: Keyword| matches!(t, Some(Token::Word(w)) if w.quote_style.is_none() && w.keyword == k);
    for token in tokens {
        if matches!(token, Token::Mul) {
            if is(last[1], Keyword::SET) && is(last[0], Keyword::UPDATE) {
                text.push_str(&format!("\"{SET_STAR}\" = NULL"));
                replaced = true;
                last = [last[1], Some(token)];
                continue;
            }
            if is(last[1], Keyword::INSERT) {
                text.push_str(&format!("(\"{INSERT_STAR}\") VALUES (NULL)"));
                replaced = true;
                last = [last[1], Some(token)];
                continue;
            }
        }
        text.push_str(&token.to_string());
        if !matches!(token, Token::Whitespace(_)) {
            last = [last[1], Some(token)];
        }
    }
    replaced.then_some(text)
}

/// sqlparser's MERGE as a [`MergeStatement`], refusing what Spark's MERGE does not have.
fn read_merge(merge: Merge, normalizer: &IdentNormalizer) -> Result<MergeStatement> {
    let invalid = |message: String| Error::InvalidArgument(format!("MERGE: {message}"));
    if merge.output.is_some() {
        return Err(invalid("OUTPUT / RETURNING is not supported".into()));
    }
    let TableFactor::Table {
        name,
        alias,
        args: None,
        version: None,
        ..
    } = merge.table
    else {
        return Err(invalid(format!(
            "the target must be a table, not {}",
            merge.table
        )));
    };
    let target_alias = match alias {
        Some(alias) if !alias.columns.is_empty() => {
            return Err(invalid(format!(
                "the target's alias {alias} cannot rename columns"
            )));
        }
        Some(alias) => Some(normalizer.normalize(alias.name)),
        None => None,
    };
    let qualifier = match &target_alias {
        Some(alias) => alias.clone(),
        None => name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(|i| normalizer.normalize(i.clone()))
            .unwrap_or_default(),
    };
    let mut clauses = Vec::with_capacity(merge.clauses.len());
    for clause in merge.clauses {
        let kind = match clause.clause_kind {
            MergeClauseKind::Matched => ClauseKind::Matched,
            MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => {
                ClauseKind::NotMatched
            }
            MergeClauseKind::NotMatchedBySource => ClauseKind::NotMatchedBySource,
        };
        let action = match clause.action {
            MergeAction::Delete { .. } => ClauseAction::Delete,
            MergeAction::Update(update) => {
                if update.update_predicate.is_some() || update.delete_predicate.is_some() {
                    return Err(invalid(
                        "UPDATE … WHERE / DELETE WHERE is not Spark's syntax: put the \
                         condition in WHEN MATCHED AND <condition>"
                            .into(),
                    ));
                }
                let mut assignments = Vec::with_capacity(update.assignments.len());
                for assignment in update.assignments {
                    let AssignmentTarget::ColumnName(column) = assignment.target else {
                        return Err(invalid(format!(
                            "cannot assign to a tuple of columns ({})",
                            assignment.target
                        )));
                    };
                    if is_marker(&column, SET_STAR) {
                        assignments.clear();
                        break;
                    }
                    let name = column_name(&column, &qualifier, normalizer)?;
                    if assignments.iter().any(|(n, _)| *n == name) {
                        return Err(invalid(format!("column {name} is assigned twice")));
                    }
                    assignments.push((name, assignment.value));
                }
                if assignments.is_empty() {
                    ClauseAction::UpdateStar
                } else {
                    ClauseAction::Update(assignments)
                }
            }
            MergeAction::Insert(insert) => {
                if insert.insert_predicate.is_some() {
                    return Err(invalid(
                        "INSERT … WHERE is not Spark's syntax: put the condition in WHEN NOT \
                         MATCHED AND <condition>"
                            .into(),
                    ));
                }
                if insert.columns.len() == 1 && is_marker(&insert.columns[0], INSERT_STAR) {
                    ClauseAction::InsertStar
                } else {
                    let MergeInsertKind::Values(values) = insert.kind else {
                        return Err(invalid("INSERT ROW is not supported: use INSERT *".into()));
                    };
                    let [row] = <[Vec<SqlExpr>; 1]>::try_from(values.rows).map_err(|rows| {
                        invalid(format!(
                            "INSERT takes one row of VALUES, not {}",
                            rows.len()
                        ))
                    })?;
                    let columns = insert
                        .columns
                        .iter()
                        .map(|c| column_name(c, &qualifier, normalizer))
                        .collect::<Result<Vec<_>>>()?;
                    if !columns.is_empty() && columns.len() != row.len() {
                        return Err(invalid(format!(
                            "INSERT names {} columns but has {} values",
                            columns.len(),
                            row.len()
                        )));
                    }
                    if let Some(dup) = columns
                        .iter()
                        .enumerate()
                        .find(|(i, c)| columns[..*i].contains(c))
                    {
                        return Err(invalid(format!("INSERT names column {} twice", dup.1)));
                    }
                    ClauseAction::Insert {
                        columns,
                        values: row,
                    }
                }
            }
        };
        clauses.push(Clause {
            kind,
            condition: clause.predicate,
            action,
        });
    }
    if clauses.is_empty() {
        return Err(invalid("a MERGE needs at least one WHEN clause".into()));
    }
    // Spark: of the clauses of one kind, only the last may omit its condition.
    for kind in [
        ClauseKind::Matched,
        ClauseKind::NotMatched,
        ClauseKind::NotMatchedBySource,
    ] {
        let of_kind: Vec<&Clause> = clauses.iter().filter(|c| c.kind == kind).collect();
        if let Some((_, earlier)) = of_kind.split_last()
            && earlier.iter().any(|c| c.condition.is_none())
        {
            return Err(invalid(format!(
                "when there are several {} clauses, only the last one can omit the condition",
                kind.sql()
            )));
        }
    }
    Ok(MergeStatement {
        target: name,
        target_alias,
        source: merge.source,
        on: *merge.on,
        clauses,
    })
}

impl ClauseKind {
    /// The clause kind as written.
    pub(super) fn sql(self) -> &'static str {
        match self {
            Self::Matched => "WHEN MATCHED",
            Self::NotMatched => "WHEN NOT MATCHED",
            Self::NotMatchedBySource => "WHEN NOT MATCHED BY SOURCE",
        }
    }
}

/// Whether `name` is the quoted marker column `marker`.
fn is_marker(name: &ObjectName, marker: &str) -> bool {
    match name.0.as_slice() {
        [part] => part
            .as_ident()
            .is_some_and(|i| i.quote_style.is_some() && i.value == marker),
        _ => false,
    }
}

/// The column an assignment or INSERT names: `c`, or `t.c` where `t` is the target's
/// `qualifier` (its alias, else its table name). Nested fields cannot be assigned.
fn column_name(name: &ObjectName, qualifier: &str, normalizer: &IdentNormalizer) -> Result<String> {
    let parts: Vec<String> = name
        .0
        .iter()
        .filter_map(|p| p.as_ident())
        .map(|i| normalizer.normalize(i.clone()))
        .collect();
    match parts.as_slice() {
        [column] if name.0.len() == 1 => Ok(column.clone()),
        [table, column] if name.0.len() == 2 && table == qualifier => Ok(column.clone()),
        _ => Err(Error::InvalidArgument(format!(
            "MERGE: cannot assign {name}: name a top-level column of the target table \
             ({qualifier})"
        ))),
    }
}
