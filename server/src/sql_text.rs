//! SQL text preparation before DataFusion parses it.
//!
//! - JDBC and ADBC send parameter markers as written, usually `?`; DataFusion understands only
//!   `$1`-style placeholders. [`normalize_sql`] turns each `?` outside string literals,
//!   quoted identifiers and comments into `$1`, `$2`, … in order.
//! - Superset (through flightsql-dbapi) writes time-range filters as bare timestamps,
//!   `ts >= 2024-01-01 00:00:00.000000`, which no SQL parser accepts; the same pass turns such a
//!   bare `YYYY-MM-DD HH:MM:SS[.ffffff]` into `TIMESTAMP 'YYYY-MM-DD HH:MM:SS[.ffffff]'`.

/// Rewrites positional `?` markers to `$N` and quotes bare timestamps (see the module docs).
pub fn normalize_sql(sql: &str) -> String {
    if !sql.contains('?') && !sql.contains(':') {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut n = 0;
    let mut prev: char = ' ';
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() && !(prev.is_alphanumeric() || prev == '_' || prev == '.') {
            let rest: String = std::iter::once(c).chain(chars.clone().take(40)).collect();
            if let Some(len) = bare_timestamp_len(&rest) {
                out.push_str("TIMESTAMP '");
                out.push_str(&rest[..len]);
                out.push('\'');
                for _ in 1..len {
                    chars.next();
                }
                prev = '\'';
                continue;
            }
        }
        prev = c;
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

/// Length of a bare `YYYY-MM-DD HH:MM:SS[.f+]` at the start of `s` (not followed by an
/// identifier character), if there is one.
fn bare_timestamp_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let pattern = b"dddd-dd-dd dd:dd:dd";
    if b.len() < pattern.len() {
        return None;
    }
    for (i, p) in pattern.iter().enumerate() {
        let ok = match p {
            b'd' => b[i].is_ascii_digit(),
            b' ' => b[i] == b' ' || b[i] == b'T',
            other => b[i] == *other,
        };
        if !ok {
            return None;
        }
    }
    let mut len = pattern.len();
    if b.get(len) == Some(&b'.') && b.get(len + 1).is_some_and(u8::is_ascii_digit) {
        len += 1;
        while b.get(len).is_some_and(u8::is_ascii_digit) {
            len += 1;
        }
    }
    if b.get(len)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
    {
        return None;
    }
    Some(len)
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
            normalize_sql("SELECT * FROM t WHERE a = ? AND b = '?' AND \"c?\" = ? -- ?\n"),
            "SELECT * FROM t WHERE a = $1 AND b = '?' AND \"c?\" = $2 -- ?\n"
        );
        assert_eq!(
            normalize_sql("SELECT 'it''s ?', ? /* ? */, ?"),
            "SELECT 'it''s ?', $1 /* ? */, $2"
        );
        assert_eq!(normalize_sql("SELECT $1"), "SELECT $1");
    }

    #[test]
    fn quotes_bare_timestamps() {
        assert_eq!(
            normalize_sql(
                "SELECT * FROM t WHERE ts >= 2024-01-01 00:00:00.000000 AND ts < 2024-01-02 00:00:00 AND s = '2024-01-01 00:00:00'"
            ),
            "SELECT * FROM t WHERE ts >= TIMESTAMP '2024-01-01 00:00:00.000000' AND ts < TIMESTAMP '2024-01-02 00:00:00' AND s = '2024-01-01 00:00:00'"
        );
        assert_eq!(
            normalize_sql("SELECT TIMESTAMP '2024-01-01 00:00:00'"),
            "SELECT TIMESTAMP '2024-01-01 00:00:00'"
        );
        assert_eq!(
            normalize_sql("SELECT x2024-01-01 00:00:00"),
            "SELECT x2024-01-01 00:00:00"
        );
    }

    #[test]
    fn orders_numerically() {
        let mut ids = vec!["$10".to_string(), "$2".into(), "$1".into()];
        order_placeholders(&mut ids);
        assert_eq!(ids, ["$1", "$2", "$10"]);
    }
}
