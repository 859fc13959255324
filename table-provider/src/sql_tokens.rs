//! [`TokenCursor`]: a cursor over a SQL statement's tokens (sqlparser's tokenizer, whitespace
//! skipped) for the statements Petrel parses itself — Spark's DDL (`ddl::parser`) and `CALL` /
//! `ALTER TABLE … BRANCH|TAG` (`procedures::parser`). Each parser adds its own productions in
//! an `impl TokenCursor` block of its own module.

use datafusion::sql::sqlparser::tokenizer::Token;

use crate::error::{Error, Result};

/// The statement's tokens without whitespace, and a cursor.
pub(crate) struct TokenCursor {
    pub(crate) tokens: Vec<Token>,
    /// Every token with whitespace (for text taken as written, [`Self::rest`]), and where each
    /// of `tokens` is in it.
    all: Vec<Token>,
    positions: Vec<usize>,
    pub(crate) at: usize,
}

impl TokenCursor {
    pub(crate) fn new(all: Vec<Token>) -> Self {
        let mut tokens = Vec::new();
        let mut positions = Vec::new();
        for (i, t) in all.iter().enumerate() {
            if !matches!(t, Token::Whitespace(_)) {
                tokens.push(t.clone());
                positions.push(i);
            }
        }
        Self {
            tokens,
            all,
            positions,
            at: 0,
        }
    }

    pub(crate) fn peek(&self) -> &Token {
        self.peek_at(0)
    }

    /// The token `ahead` places after the current one (`EOF` past the end).
    pub(crate) fn peek_at(&self, ahead: usize) -> &Token {
        self.tokens.get(self.at + ahead).unwrap_or(&Token::EOF)
    }

    pub(crate) fn at_end(&self) -> bool {
        self.at >= self.tokens.len()
    }

    /// "expected `wanted`, found …", naming the current token.
    pub(crate) fn unexpected(&self, wanted: &str) -> Error {
        match self.peek() {
            Token::EOF => Error::InvalidArgument(format!("expected {wanted}, found the end")),
            found => Error::InvalidArgument(format!("expected {wanted}, found {found}")),
        }
    }

    /// An unquoted word equal to `keyword`, consumed.
    pub(crate) fn keyword(&mut self, keyword: &str) -> bool {
        match self.peek() {
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(keyword) => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    /// One of `keywords`, consumed.
    pub(crate) fn keyword_any(&mut self, keywords: &[&str]) -> bool {
        keywords.iter().any(|k| self.keyword(k))
    }

    /// All of `keywords` in a row, consumed; nothing consumed unless all match.
    pub(crate) fn keywords(&mut self, keywords: &[&str]) -> bool {
        let start = self.at;
        if keywords.iter().all(|k| self.keyword(k)) {
            true
        } else {
            self.at = start;
            false
        }
    }

    /// `token`, consumed.
    pub(crate) fn eat(&mut self, token: &Token) -> bool {
        if self.peek() == token {
            self.at += 1;
            true
        } else {
            false
        }
    }

    pub(crate) fn require(&mut self, token: &Token) -> Result<()> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("{token}")))
        }
    }

    /// An identifier (quoted ones keep their case; unquoted ones are lowercased, as DataFusion
    /// normalises them).
    pub(crate) fn identifier(&mut self) -> Result<String> {
        match self.peek().clone() {
            Token::Word(w) => {
                self.at += 1;
                Ok(match w.quote_style {
                    Some(_) => w.value,
                    None => w.value.to_lowercase(),
                })
            }
            _ => Err(self.unexpected("a name")),
        }
    }

    /// A dotted name.
    pub(crate) fn name(&mut self) -> Result<Vec<String>> {
        let mut parts = vec![self.identifier()?];
        while self.eat(&Token::Period) {
            parts.push(self.identifier()?);
        }
        Ok(parts)
    }

    /// A quoted string (single quotes, or double quotes as Spark reads them).
    pub(crate) fn string(&mut self) -> Result<String> {
        match self.peek().clone() {
            Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => {
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.unexpected("a quoted string")),
        }
    }

    /// The rest of the statement as written (for `AS query`).
    pub(crate) fn rest(&mut self) -> String {
        let from = self
            .positions
            .get(self.at)
            .copied()
            .unwrap_or(self.all.len());
        self.at = self.tokens.len();
        let text: String = self.all[from..].iter().map(Token::to_string).collect();
        text.trim().trim_end_matches(';').trim().to_string()
    }
}
