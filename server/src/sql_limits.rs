//! Limits on a statement's text, checked before anything parses or plans it.
//!
//! DataFusion's SQL planner, optimizer and expression evaluation recurse once per level of an
//! expression tree, and a left-associative chain (`1+1+…+1`, `a = 1 OR a = 2 OR …`, `… UNION
//! ALL …`) is as deep as it is long: sqlparser's recursion limit counts nesting, not chains. On
//! a 2 MiB thread stack 2,000 terms overflowed it and the stack overflow aborted the whole
//! server. Planning such chains also takes time quadratic in their length (release build, 2
//! cores: `1+…+1` of 1,000 terms 1.0 s, 2,000 terms 3.9 s; 2,000 `UNION ALL` 5.3 s; an `OR` of
//! 1,000 equalities 0.3 s), on the thread that serves other calls. So a statement may have at
//! most [`MAX_OPERATORS`] binary and set operators, and at most [`MAX_SET_OPERATIONS`] of them
//! `UNION` / `INTERSECT` / `EXCEPT`; Petrel's threads have 32 MiB stacks (`main.rs`), several
//! times what the longest chain allowed needs.
//!
//! A chain of common table expressions (`WITH c1 AS (…), c2 AS (SELECT … FROM c1), …`) is flat
//! text but is inlined into one plan as deep as the chain, and planning it took time and memory
//! quadratic in its length (release build: 500 CTEs 0.4 s and 180 MB, 1,000 1.2 s and 0.5 GB,
//! 5,000 more than 100 s and 10 GB, uncancellable, on a worker thread). So a statement may have
//! at most [`MAX_QUERIES`] `SELECT`s.
//!
//! The text itself is bounded by [`MAX_SQL_BYTES`]: each byte of SQL costs ~190 bytes of
//! memory while it is tokenized and planned (whitespace tokens included), outside the query
//! memory pool, so a 60 MB statement (under gRPC's 64 MB message limit) took ~11 GB.

use datafusion::sql::sqlparser::dialect::{GenericDialect, dialect_from_str};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use tonic::Status;

/// Longest statement text accepted (4 MiB). Bulk data goes through parameters or ingest.
pub const MAX_SQL_BYTES: usize = 4 << 20;

/// Most binary and set operators one statement may have (arithmetic, comparison, `AND` /
/// `OR`, string concatenation, `UNION` / `INTERSECT` / `EXCEPT`).
pub const MAX_OPERATORS: usize = 2_000;

/// Most `UNION` / `INTERSECT` / `EXCEPT` one statement may have.
pub const MAX_SET_OPERATIONS: usize = 500;

/// Most `SELECT`s (queries, subqueries, common table expressions) one statement may have.
pub const MAX_QUERIES: usize = 1_000;

/// Refuses `sql` with INVALID_ARGUMENT when it is longer than [`MAX_SQL_BYTES`] or has more
/// than [`MAX_OPERATORS`] operators, [`MAX_SET_OPERATIONS`] set operations or [`MAX_QUERIES`]
/// `SELECT`s, in the tokens of
/// `dialect` (DataFusion's `sql_parser.dialect`). Text that does not tokenize passes: the
/// parser reports it.
pub fn check(sql: &str, dialect: &str) -> Result<(), Status> {
    if sql.len() > MAX_SQL_BYTES {
        return Err(Status::invalid_argument(format!(
            "the SQL text is {} bytes, over the limit of {} bytes: send large data as bound \
             parameters or through bulk ingest",
            sql.len(),
            MAX_SQL_BYTES
        )));
    }
    if sql.len() <= MAX_OPERATORS {
        // Each operator takes at least a byte: this text cannot have too many.
        return Ok(());
    }
    let dialect = dialect_from_str(dialect).unwrap_or_else(|| Box::new(GenericDialect {}));
    let Ok(tokens) = Tokenizer::new(dialect.as_ref(), sql).tokenize() else {
        return Ok(());
    };
    let operators = tokens.iter().filter(|t| is_operator(t)).count();
    let set_operations = tokens.iter().filter(|t| is_set_operation(t)).count();
    if operators > MAX_OPERATORS || set_operations > MAX_SET_OPERATIONS {
        return Err(Status::invalid_argument(format!(
            "the statement has {operators} operators ({set_operations} of them UNION, INTERSECT \
             or EXCEPT), over the limit of {MAX_OPERATORS} ({MAX_SET_OPERATIONS}): long chains \
             (a = 1 OR a = 2 OR …, x + y + …, … UNION ALL …) are planned recursively, in time \
             that grows with their square; write a list of values as IN (…) or VALUES, or \
             split the statement"
        )));
    }
    let queries = tokens
        .iter()
        .filter(|t| matches!(t, Token::Word(w) if w.keyword == Keyword::SELECT))
        .count();
    if queries > MAX_QUERIES {
        return Err(Status::invalid_argument(format!(
            "the statement has {queries} SELECTs, over the limit of {MAX_QUERIES}: common \
             table expressions and subqueries are planned as one nested plan, in time and \
             memory that grow with the square of their number; split the statement"
        )));
    }
    Ok(())
}

fn is_set_operation(token: &Token) -> bool {
    matches!(token, Token::Word(w) if matches!(w.keyword, Keyword::UNION | Keyword::INTERSECT | Keyword::EXCEPT))
}

fn is_operator(token: &Token) -> bool {
    match token {
        Token::Plus
        | Token::Minus
        | Token::Mul
        | Token::Div
        | Token::DuckIntDiv
        | Token::Mod
        | Token::StringConcat
        | Token::Eq
        | Token::DoubleEq
        | Token::Neq
        | Token::Lt
        | Token::Gt
        | Token::LtEq
        | Token::GtEq
        | Token::Spaceship
        | Token::Caret
        | Token::Ampersand
        | Token::Pipe
        | Token::ShiftLeft
        | Token::ShiftRight => true,
        Token::Word(word) => {
            matches!(word.keyword, Keyword::AND | Keyword::OR | Keyword::XOR)
                || is_set_operation(token)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_OPERATORS, MAX_QUERIES, MAX_SET_OPERATIONS, MAX_SQL_BYTES, check};

    fn chain(terms: usize, op: &str) -> String {
        format!("SELECT {}", vec!["1"; terms].join(op))
    }

    #[test]
    fn long_operator_chains_are_refused_before_planning() {
        assert!(check(&chain(MAX_OPERATORS + 1, "+"), "generic").is_ok());
        let err = check(&chain(MAX_OPERATORS + 2, "+"), "generic").unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(
            err.message().contains("2001 operators"),
            "{}",
            err.message()
        );
        // `SELECT *` counts its `*`: n equalities and n - 1 ORs, plus one.
        let ors = |n: usize| {
            let terms: Vec<String> = (0..n).map(|i| format!("a = {i}")).collect();
            format!("SELECT * FROM t WHERE {}", terms.join(" OR "))
        };
        assert!(check(&ors(1_000), "generic").is_ok());
        assert!(check(&ors(1_001), "generic").is_err());
        let unions = |n: usize| vec!["SELECT 1"; n + 1].join(" UNION ALL ");
        assert!(check(&unions(MAX_SET_OPERATIONS), "generic").is_ok());
        let err = check(&unions(MAX_SET_OPERATIONS + 1), "generic").unwrap_err();
        assert!(err.message().contains("(501 of them"), "{}", err.message());
    }

    #[test]
    fn long_chains_of_common_table_expressions_are_refused() {
        let ctes = |n: usize| {
            let chain: Vec<String> = (1..n)
                .map(|i| format!("c{i} AS (SELECT x FROM c{})", i - 1))
                .collect();
            format!(
                "WITH c0 AS (SELECT 1 AS x), {} SELECT x FROM c{}",
                chain.join(", "),
                n - 1
            )
        };
        // n CTEs and the final SELECT.
        assert!(check(&ctes(MAX_QUERIES - 1), "generic").is_ok());
        let err = check(&ctes(MAX_QUERIES), "generic").unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("1001 SELECTs"), "{}", err.message());
    }

    #[test]
    fn lists_literals_and_comments_do_not_count() {
        let list: Vec<String> = (0..100_000).map(|i| i.to_string()).collect();
        assert!(
            check(
                &format!("SELECT * FROM t WHERE a IN ({})", list.join(",")),
                "generic"
            )
            .is_ok()
        );
        let literal = format!("SELECT '{}'", "+-*/".repeat(10_000));
        assert!(check(&literal, "generic").is_ok());
        // Comments are whitespace tokens.
        let comment = format!("SELECT 1 -- {}\n", "a + b ".repeat(10_000));
        assert!(check(&comment, "generic").is_ok());
        let quoted = format!("SELECT 'it''s {}' AS x", "a+b".repeat(20_000));
        assert!(check(&quoted, "generic").is_ok());
    }

    #[test]
    fn long_text_is_refused() {
        let text = format!("SELECT 1{}", " ".repeat(MAX_SQL_BYTES));
        let err = check(&text, "generic").unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(
            err.message().contains("over the limit"),
            "{}",
            err.message()
        );
        assert!(
            check(
                &format!("SELECT 1{}", " ".repeat(MAX_SQL_BYTES - 8)),
                "generic"
            )
            .is_ok()
        );
    }
}
