//! SQL text preparation before DataFusion parses it.
//!
//! JDBC and ADBC send parameter markers as written, usually `?`; DataFusion understands only
//! `$1`-style placeholders. [`number_placeholders`] turns each `?` outside string literals,
//! quoted identifiers and comments into `$1`, `$2`, … in order.

/// Rewrites positional `?` markers to `$N`. Returns the text unchanged when it has none.
pub fn number_placeholders(sql: &str) -> String {
    if !sql.contains('?') {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut n = 0;
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' | '`' => {
                out.push(c);
                // Quoted: copy through the closing quote; a doubled quote is an escape.
                while let Some(d) = chars.next() {
                    out.push(d);
                    if d == c {
                        if chars.peek() == Some(&c) {
                            out.push(chars.next().expect("peeked"));
                        } else {
                            break;
                        }
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                out.push(c);
                out.push(chars.next().expect("peeked"));
                let mut prev = ' ';
                for d in chars.by_ref() {
                    out.push(d);
                    if prev == '*' && d == '/' {
                        break;
                    }
                    prev = d;
                }
            }
            '?' => {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            }
            _ => out.push(c),
        }
    }
    out
}

/// Placeholder ids (`$1`, `$2`, …) ordered by number, then others by name.
pub fn order_placeholders(ids: &mut [String]) {
    ids.sort_by_key(|id| {
        (
            id.strip_prefix('$')
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(u64::MAX),
            id.clone(),
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_markers_outside_quotes_and_comments() {
        assert_eq!(
            number_placeholders("SELECT * FROM t WHERE a = ? AND b = '?' AND \"c?\" = ? -- ?\n"),
            "SELECT * FROM t WHERE a = $1 AND b = '?' AND \"c?\" = $2 -- ?\n"
        );
        assert_eq!(
            number_placeholders("SELECT 'it''s ?', ? /* ? */, ?"),
            "SELECT 'it''s ?', $1 /* ? */, $2"
        );
        assert_eq!(number_placeholders("SELECT $1"), "SELECT $1");
    }

    #[test]
    fn orders_numerically() {
        let mut ids = vec!["$10".to_string(), "$2".into(), "$1".into()];
        order_placeholders(&mut ids);
        assert_eq!(ids, ["$1", "$2", "$10"]);
    }
}
